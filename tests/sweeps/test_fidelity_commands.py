"""Benchmark-JSON parsing and the validate / calibrate commands."""

import json

import pandas as pd
import pytest

from fleetplan.cli import main
from fleetplan.errors import InvalidValueError
from fleetplan.sweeps.measurements import shipped_measurements_path, with_ids
from fleetplan.sweeps.vllm_results import model_id_from_hub_name, read_benchmark_json

VLLM_RESULT = {  # the aggregate fields vLLM's benchmark_serving.py --save-result writes
    "date": "20250101-120000", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B-Instruct",
    "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct", "num_prompts": 200, "request_rate": 8.0,
    "burstiness": 1.0, "max_concurrency": None, "duration": 25.1, "completed": 200,
    "total_input_tokens": 204800, "total_output_tokens": 51200, "request_throughput": 7.97,
    "request_goodput": None, "output_throughput": 2040.3, "total_token_throughput": 10200.5,
    "mean_ttft_ms": 41.2, "median_ttft_ms": 39.0, "std_ttft_ms": 6.1, "p99_ttft_ms": 70.3,
    "mean_tpot_ms": 9.8, "median_tpot_ms": 9.7, "std_tpot_ms": 0.5, "p99_tpot_ms": 11.0,
    "mean_itl_ms": 9.9, "median_itl_ms": 9.5, "std_itl_ms": 2.0, "p99_itl_ms": 20.0,
    "input_lens": [1024] * 200, "output_lens": [256] * 200,
}


@pytest.fixture
def result_json(tmp_path):
    path = tmp_path / "vllm-8qps.json"
    path.write_text(json.dumps(VLLM_RESULT))
    return path


def test_parses_vllm_result_into_measurement_rows(result_json, shipped):
    rows = with_ids(read_benchmark_json(result_json, gpu="h100-sxm", tp=1), shipped).set_index("metric")
    assert rows.loc["ttft_ms", "value"] == 41.2 and rows.loc["tpot_ms", "value"] == 9.8
    assert rows.loc["output_tok_s", "value"] == 2040.3 and rows.loc["req_s", "value"] == 7.97
    assert (rows["input_len"] == 1024).all() and (rows["output_len"] == 256).all()
    assert (rows["qps"] == 8.0).all() and (rows["model"] == "llama-3.1-8b").all()
    assert (rows["scenario"] == "server").all() and (rows["n_requests"] == 200).all()
    assert (rows["regime"] == "server").all() and (rows["engine_id"] == "vllm").all()


def test_infinite_rate_and_itl_fallback(tmp_path, shipped):
    path = tmp_path / "inf.json"
    path.write_text(json.dumps({**VLLM_RESULT, "request_rate": "inf", "mean_tpot_ms": None}))
    rows = with_ids(read_benchmark_json(path, gpu="h100-sxm", tp=1), shipped).set_index("metric")
    assert rows.loc["tpot_ms", "value"] == 9.9
    assert rows["qps"].iloc[0] == float("inf")


def test_model_names():
    assert model_id_from_hub_name("mistralai/Mixtral-8x7B-Instruct-v0.1") == "mixtral-8x7b"
    assert model_id_from_hub_name("Qwen/Qwen2.5-72B-Instruct") == "qwen2.5-72b"


def test_bad_json_errors(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(InvalidValueError, match="broken.json: not a readable benchmark result JSON"):
        read_benchmark_json(broken, gpu="h100-sxm", tp=1)
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"completed": 3}))
    with pytest.raises(InvalidValueError, match="partial.json: not a serving-benchmark result .missing total_input"):
        read_benchmark_json(partial, gpu="h100-sxm", tp=1)


def test_validate_command_reports_errors_and_writes_workbook(tmp_path, capsys, result_json):
    import openpyxl

    report = tmp_path / "report.xlsx"
    tables = tmp_path / "tables.csv"
    code = main(["validate", str(result_json), "--gpu", "h100-sxm", "--tp", "1", "-o", str(report),
                 "--tables", str(tables)])
    out = capsys.readouterr().out
    assert code == 0
    assert "5 predictable rows of 5" in out and "ttft_ms" in out and "by engine" in out
    written = pd.read_csv(tables)
    assert {"overall", "gpu", "model", "quant", "engine_id", "regime"} <= set(written["dimension"])
    book = openpyxl.load_workbook(report)
    assert book.sheetnames[:2] == ["Summary", "Rows"] and book["Summary"]._charts


@pytest.mark.slow
def test_calibrate_command_writes_efficiency_rows_usable_as_catalog(tmp_path, capsys):
    from fleetplan.catalogs import load_catalogs

    raw = pd.read_csv(shipped_measurements_path())
    small = tmp_path / "l40s.csv"
    raw[raw["gpu"] == "L40S"].to_csv(small, index=False)
    factors = tmp_path / "factors.csv"
    code = main(["calibrate", str(small), "-o", str(factors)])
    out = capsys.readouterr().out
    assert code == 0 and "before (current catalogs)" in out and "after (fitted rows)" in out
    table = pd.read_csv(factors)
    assert set(table["gpu"]) == {"l40s", "l4"}  # the Ada sibling is carried over
    merged = load_catalogs([factors]).efficiency.set_index(["engine", "gpu", "operator", "precision"])
    fitted = table.set_index(["engine", "gpu", "operator", "precision"])
    key = ("tensorrt-llm", "l40s", "gemm", "fp8")
    assert merged.loc[key, "memory_efficiency"] == pytest.approx(fitted.loc[key, "memory_efficiency"])
    assert fitted.loc[key, "n_points"] > 0


@pytest.mark.parametrize(("args", "match"), [
    (["validate", "missing.csv"], "measurements file missing.csv does not exist"),
    (["calibrate", "x.json", "-o", "f.csv"], "measurements file x.json does not exist"),
])
def test_command_errors(capsys, args, match):
    assert main(args) == 2
    assert match in capsys.readouterr().err


def test_json_without_hardware_is_refused(capsys, result_json):
    assert main(["validate", str(result_json)]) == 2
    assert "give --gpu and --tp" in capsys.readouterr().err
