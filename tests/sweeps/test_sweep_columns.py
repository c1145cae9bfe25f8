"""Sweeps that expand only the columns asked for (``columns=``, ``--columns``)."""

import io

import pandas as pd
import pytest

from fleetplan.cli import main
from fleetplan.errors import InvalidValueError, UnknownNameError
from fleetplan.sweeps import iter_sweep, sweep
from fleetplan.sweeps.sweep_table import table_columns

GRID = {"gpus": ["h100-sxm", "l4"], "models": ["llama-3.1-8b", "llama-3.1-70b"], "quants": ["bf16", "fp8"],
        "contexts": [1024, 200_000], "batches": [1, 64, 4096]}
ASKED = ["usd_per_m_output_tokens", "gpu", "batch", "tpot_ms", "reason", "calibration"]


def test_the_columns_asked_for_equal_the_same_columns_of_the_whole_table():
    whole = sweep(**GRID)
    part = sweep(**GRID, columns=ASKED)
    assert list(part.columns) == ASKED  # in the order given
    pd.testing.assert_frame_equal(part, whole[ASKED])
    assert (~whole["fits"]).any() and whole["reason"].astype(str).ne("").any()  # the grid has invalid rows


def test_dropping_invalid_rows_works_without_asking_for_valid_or_fits():
    whole = sweep(**GRID, drop_invalid=True)
    part = sweep(**GRID, columns=["gpu", "tpot_ms"], drop_invalid=True)
    assert list(part.columns) == ["gpu", "tpot_ms"] and 0 < len(part) < len(sweep(**GRID))
    pd.testing.assert_frame_equal(part, whole[["gpu", "tpot_ms"]])


def test_streamed_chunks_carry_the_same_columns():
    chunks = list(iter_sweep(GRID["gpus"], GRID["models"], GRID["quants"], contexts=GRID["contexts"],
                             batches=GRID["batches"], chunk_rows=5, columns=ASKED, drop_invalid=True))
    assert len(chunks) > 1 and all(list(c.columns) == ASKED for c in chunks)
    joined = pd.concat([c.astype({"gpu": str, "reason": str, "calibration": str}) for c in chunks], ignore_index=True)
    expected = sweep(**GRID, columns=ASKED, drop_invalid=True)
    pd.testing.assert_frame_equal(joined, expected.astype({"gpu": str, "reason": str, "calibration": str}))


def test_swept_lever_columns_can_be_asked_for():
    table = sweep(["h100-sxm"], ["llama-3.1-8b"], batches=[1, 8], pp=[1, 2], columns=["pp", "tpot_ms"])
    assert list(table.columns) == ["pp", "tpot_ms"] and sorted(table["pp"].unique()) == [1.0, 2.0]
    assert "pp" in table_columns(("pp",)) and "pp" not in table_columns()


@pytest.mark.parametrize(("columns", "error", "match"), [
    (["tpot"], UnknownNameError, r"unknown sweep column 'tpot'; did you mean 'tpot_ms'"),
    (["pp"], UnknownNameError, r"unknown sweep column 'pp'"),  # not swept, so not a column
    ([], InvalidValueError, r"columns: name at least one column"),
])
def test_unknown_or_no_columns_are_refused_in_one_line(columns, error, match):
    with pytest.raises(error, match=match):
        sweep(["h100-sxm"], ["llama-3.1-8b"], columns=columns)


def test_the_command_prints_only_the_columns_asked_for(capsys):
    code = main(["sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--batch", "1,8",
                 "--columns", "gpu,batch,tpot_ms"])
    out = capsys.readouterr().out
    assert code == 0
    assert list(pd.read_csv(io.StringIO(out)).columns) == ["gpu", "batch", "tpot_ms"]


@pytest.mark.parametrize(("extra", "match"), [
    (["--columns", "gpu,tpot"], "did you mean 'tpot_ms'"),
    (["--columns", "gpu", "-o", "{tmp}/grid.xlsx"], "the sweep workbook needs every column"),
    (["--columns", "gpu", "-o", "{tmp}/grid", "--workers", "1"], "a Dask sweep writes every column"),
])
def test_the_command_refuses_columns_it_cannot_write_with_exit_2(capsys, tmp_path, extra, match):
    extra = [part.replace("{tmp}", str(tmp_path)) for part in extra]
    code = main(["sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--batch", "1,8", *extra])
    assert code == 2
    assert match in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
