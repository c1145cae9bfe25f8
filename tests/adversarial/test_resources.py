"""Bounded resources: a sweep knows its size before it starts and refuses politely past a limit
(or streams), and printing a grid streams chunk by chunk."""

from __future__ import annotations

import pytest

from fleetplan.errors import FleetplanError
from fleetplan.sweeps import sweep
from fleetplan.sweeps.inputs import parse_axis


def test_python_sweep_refuses_a_grid_larger_than_memory():
    with pytest.raises(FleetplanError, match=r"rows.*GB.*iter_sweep|max_rows"):
        sweep(["h100-sxm", "h200", "l40s", "a100-80gb-sxm"], ["llama-3.1-8b", "llama-3.1-70b"], ["bf16", "fp8"],
              tps=[1, 2, 4, 8], contexts=range(128, 131_072, 16), batches=range(1, 2049))


def test_python_sweep_limit_can_be_raised_on_purpose():
    table = sweep(["h100-sxm"], ["llama-3.1-8b"], batches=[1, 2, 4], max_rows=3)
    assert len(table) == 3
    with pytest.raises(FleetplanError, match=r"3 rows.*max_rows 2"):
        sweep(["h100-sxm"], ["llama-3.1-8b"], batches=[1, 2, 4], max_rows=2)


def test_an_axis_of_a_hundred_million_values_is_refused_before_it_is_built():
    with pytest.raises(FleetplanError, match=r"at most|too many values"):
        parse_axis("1-100000000:1")


def test_a_huge_grid_to_stdout_is_refused_or_streamed(sandbox):
    result = sandbox.run("sweep", "--gpu", "h100-sxm,h200,l40s", "--model", "llama-3.1-8b,llama-3.1-70b",
                         "--quant", "bf16,fp8", "--tp", "1,2,4,8", "--context", "128-131072:64", "--batch", "1-2048:1")
    assert result.code == 2
    assert "rows" in result.err and "-o" in result.err and result.err.count("\n") == 1


def test_printing_a_grid_streams_chunk_by_chunk(sandbox):
    result = sandbox.run("sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--batch", "1-64:1",
                         "--context", "128-1024:128", "--chunk-rows", "100")
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0].startswith("gpu,") and len(lines) == 1 + 64 * 8
    assert sum(line.startswith("gpu,") for line in lines) == 1  # one header, however many chunks
