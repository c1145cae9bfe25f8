"""``fleetplan catalog show|check`` through the real entry point: exit codes 0 and 2."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from fleetplan.cli import main


@pytest.fixture(autouse=True)
def _fixture_catalogs(fixture_as_default):
    """Every CLI test reads the small fixture catalogs instead of the shipped ones."""


def test_show_prices_as_csv(capsys):
    assert main(["catalog", "show", "prices", "--format", "csv"]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert len(table) == 4
    assert table.columns[:4].tolist() == ["gpu", "provider", "region", "pricing_type"]


def test_show_defaults_to_csv_when_piped(capsys):
    assert main(["catalog", "show", "gpu", "--columns", "id,memory_gb"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:2] == ["id,memory_gb", "h100-sxm,80.0"]


def test_show_quants_as_json_lists_native_gpus(capsys):
    assert main(["catalog", "show", "quants", "--format", "json"]) == 0
    rows = {row["id"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["fp8"]["native_gpus"] == "h100-sxm, mi300x"
    assert rows["int4-awq"]["kv_bytes_per_element"] is None


def test_show_as_rich_table(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["catalog", "show", "efficiency", "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert "efficiency" in out and "gemm" in out and "0.75" in out


def test_show_with_an_override(tmp_path, capsys):
    path = tmp_path / "mine.csv"
    pd.DataFrame([{"gpu": "mi300x", "provider": "own", "region": "any",
                   "pricing_type": "reserved_3y", "usd_per_gpu_hour": 1.25, "source": "quote",
                   "as_of": "2025-01-01"}]).to_csv(path, index=False)
    assert main(["catalog", "show", "prices", "--catalog", str(path), "--columns",
                 "gpu,usd_per_gpu_hour,instance"]) == 0
    assert "mi300x,1.25,8x MI300X server" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "expected"), [
    (["catalog", "show", "gpuz"], "error: unknown catalog 'gpuz'; did you mean 'gpus'"),
    (["catalog", "show", "gpus", "--columns", "id,memry_gb"],
     "error: unknown column 'memry_gb'; did you mean 'memory_gb'"),
    (["catalog", "show", "gpus", "--format", "xml"], "error: unknown format 'xml'"),
    (["catalog", "show", "gpus", "--catalog", "nowhere.csv"],
     "error: nowhere.csv: no such catalog file"),
])
def test_show_bad_input_exits_2(capsys, argv, expected):
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith(expected)


def test_check_good_files(tmp_path, capsys):
    path = tmp_path / "prices.csv"
    pd.DataFrame([{"gpu": "h100-sxm", "provider": "lambda", "region": "any",
                   "pricing_type": "on_demand", "usd_per_gpu_hour": 2.99, "instance": "8x H100",
                   "includes_host": "true", "source": "page", "as_of": "2025-01-01"}]
                 ).to_csv(path, index=False)
    assert main(["catalog", "check", str(path)]) == 0
    assert capsys.readouterr().out == f"ok: 1 rows in prices ({path})\n"


def test_check_bad_file_lists_every_problem_and_exits_2(tmp_path, capsys):
    path = tmp_path / "prices.csv"
    pd.DataFrame([{"gpu": "h100", "provider": "aws", "region": "any",
                   "pricing_type": "on_demand", "usd_per_gpu_hour": -1, "source": "page",
                   "as_of": "2025-13-01"}]).to_csv(path, index=False)
    assert main(["catalog", "check", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"error: {path} row 2, column usd_per_gpu_hour: must be >= 0.01, got -1",
        f"error: {path} row 2, column as_of: must be a date YYYY-MM-DD, got '2025-13-01'",
        f"error: 2 problem(s) in {path}",
    ]


def test_check_without_paths_is_a_usage_error():
    assert main(["catalog", "check"]) == 2


def test_check_reports_each_sheet_of_a_workbook(tmp_path, capsys):
    from tests.catalogs.test_overrides import _workbook

    path = _workbook(tmp_path / "mine.xlsx")
    assert main(["catalog", "check", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"ok: 1 rows in gpus ({path} sheet gpus)", f"ok: 1 rows in prices ({path} sheet prices)"]
