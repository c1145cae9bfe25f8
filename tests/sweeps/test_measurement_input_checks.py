"""Measurement inputs of validate and calibrate. A serving-benchmark result JSON is checked field
by field before it is used: each bad field is named with its file; the hardware the options (or
the file's model_id) name must be in the catalogs; a run's mean lengths need not be whole. A
measurement CSV's rows of names no catalog holds are kept, not predicted, and named."""

import json

import pandas as pd
import pytest

from fleetplan.cli import main
from fleetplan.errors import FleetplanError, InvalidValueError
from fleetplan.sweeps.measurements import load_measurements, shipped_measurements_path, with_ids
from fleetplan.sweeps.model_validation import read_measurements
from fleetplan.sweeps.vllm_results import read_benchmark_json
from tests.sweeps.test_fidelity_commands import VLLM_RESULT


def _written(tmp_path, **changes):
    path = tmp_path / "run.json"
    result = {key: value for key, value in {**VLLM_RESULT, **changes}.items() if value != "<del>"}
    path.write_text(json.dumps(result))
    return path


def test_a_mean_length_that_is_not_whole_is_rounded_to_whole_tokens(tmp_path, shipped):
    # 204,801 prompt tokens over 200 requests: a mean of 1024.005, as real runs have
    path = _written(tmp_path, total_input_tokens=204_801, total_output_tokens=51_330)
    rows = with_ids(read_benchmark_json(path, gpu="h100-sxm", tp=1), shipped)
    assert (rows["input_len"] == 1024).all() and (rows["output_len"] == 257).all()


@pytest.mark.parametrize(("changes", "match"), [
    ({"completed": "200"}, r"run.json: completed must be a whole number, got '200'"),
    ({"completed": 0}, r"run.json: completed must be >= 1 and <= 1e\+15, got 0"),
    ({"completed": 2.5}, r"run.json: completed must be a whole number, got 2.5"),
    ({"total_input_tokens": [1024]},
     r"run.json: total_input_tokens must be a finite number, got \[1024\]"),
    ({"total_output_tokens": 10}, r"run.json: total_output_tokens must be at least 1 token per "
                                  r"completed request, got 10 over 200 requests"),
    ({"request_throughput": True},
     r"run.json: request_throughput must be a finite number, got true"),
    ({"output_throughput": -1}, r"run.json: output_throughput must be > 0 and <= 1e\+15, got -1"),
    ({"mean_ttft_ms": ""}, r"run.json: mean_ttft_ms must be a finite number, got ''"),
    ({"mean_tpot_ms": None, "mean_itl_ms": "abc"},
     r"run.json: mean_itl_ms must be a finite number, got 'abc'"),
    ({"request_rate": 0}, r"run.json: request_rate must be > 0 and <= 1e\+15, got 0"),
    ({"request_rate": "fast"},
     r"run.json: request_rate must be a number > 0 or \"inf\", got 'fast'"),
    ({"backend": 3}, r"run.json: backend must be text, not blank, got 3"),
    ({"model_id": ""}, r"run.json: model_id must be text, not blank, got ''"),
    ({"model_id": "<del>"}, r"run.json: no model_id \(the model's hub name\); give --model"),
    ({"model_id": "/"}, r"run.json: model_id '/' names no model; give --model"),
    ({"request_throughput": "<del>"},
     r"run.json: not a serving-benchmark result \(missing request_throughput\)"),
])
def test_a_bad_field_is_named_with_its_file(tmp_path, changes, match):
    with pytest.raises(InvalidValueError, match=match):
        read_benchmark_json(_written(tmp_path, **changes), gpu="h100-sxm", tp=1)


@pytest.mark.parametrize(("options", "match"), [
    ({"gpu": "h100-sx", "tp": 1},
     r"run.json: --gpu: unknown gpu 'h100-sx'; did you mean 'h100-sxm'"),
    ({"gpu": "h100-sxm", "tp": 1, "quant": "fp9"},
     r"run.json: --quant: unknown quant 'fp9'; did you mean 'fp8'"),
    ({"gpu": "h100-sxm", "tp": 1, "model": "llama-3.1-8"},
     r"run.json: --model: unknown model 'llama-3.1-8'; did you mean 'llama-3.1-8b'"),
    ({"gpu": "h100-sxm", "tp": 0}, r"--tp must be >= 1 and <= 1024, got 0"),
])
def test_the_hardware_of_a_result_must_be_in_the_catalogs(tmp_path, shipped, options, match):
    with pytest.raises(FleetplanError, match=match):
        read_measurements([_written(tmp_path)], catalogs=shipped, **options)


def test_an_unknown_model_id_suggests_the_catalog_model_and_the_option(tmp_path, capsys):
    path = _written(tmp_path, model_id="meta-llama/Llama-3.1-9B-Instruct")
    assert main(["validate", str(path), "--gpu", "h100-sxm", "--tp", "1", "--no-holdout"]) == 2
    err = capsys.readouterr().err
    assert "run.json: model_id: unknown model 'llama-3.1-9b'; did you mean 'llama-3.1-8b'" in err
    assert "Traceback" not in err and "bug" not in err


def test_a_result_with_an_alias_gpu_and_an_odd_mean_validates(tmp_path, capsys):
    path = _written(tmp_path, total_input_tokens=204_801)
    assert main(["validate", str(path), "--gpu", "H100 SXM", "--tp", "1", "--no-holdout"]) == 0
    assert "5 predictable rows of 5" in capsys.readouterr().out


def test_rows_of_unknown_names_are_named_with_the_closest_ids(tmp_path, capsys):
    raw = pd.read_csv(shipped_measurements_path())
    rows = raw[raw["gpu"] == "L40S"].head(8).reset_index(drop=True)
    rows.loc[[0, 1], "gpu"] = "L40X"
    rows.loc[2, "model"] = "Llama-3.1-9B"
    rows.loc[3, "precision_weights"] = "FP9"
    path = tmp_path / "mine.csv"
    rows.to_csv(path, index=False)
    assert main(["validate", str(path), "--no-holdout"]) == 0
    captured = capsys.readouterr()
    assert "4 predictable rows of 8" in captured.out
    assert captured.err.splitlines()[:3] == [
        "note: 2 rows not predicted: unknown gpu 'L40X'; did you mean 'l40s' or 'l4'?",
        "note: 1 row not predicted: unknown model 'Llama-3.1-9B'; did you mean 'llama-3.1-8b', "
        "'llama-3.1-70b' or 'llama-3.1-405b'?",
        "note: 1 row not predicted: unknown quant 'FP9'; did you mean 'fp8' or 'fp4'?"]


@pytest.mark.parametrize(("column", "text", "match"), [
    ("settings", "memory_fraction=5",
     r"mine.csv row 4, column settings, memory_fraction: must be a number >= 0.1 and <= 1, "
     r"got '5'"),
    ("settings", "memory_fraction=abc", r"column settings, memory_fraction: .* got 'abc'"),
    ("settings", "max_num_seqs=0",
     r"column settings, max_num_seqs: must be a whole number >= 1 and <= 1e\+07, got '0'"),
    ("settings", "memory_fracton=0.9",
     r"mine.csv row 4, column settings: unknown setting 'memory_fracton'; "
     r"did you mean 'memory_fraction'"),
    ("settings", "memory_fraction=", r"column settings: 'memory_fraction=' must be name=value"),
    ("concurrency_or_batch", "request rate QPS=-3",
     r"column concurrency_or_batch, QPS: must be a number > 0 and <= 1e\+07, got '-3'"),
    ("concurrency_or_batch", "request rate QPS=0", r"concurrency_or_batch, QPS: .* got '0'"),
    ("concurrency_or_batch", "request rate QPS=",
     r"column concurrency_or_batch: 'request rate QPS=' states no number after QPS"),
    ("concurrency_or_batch", "static batch 0",
     r"column concurrency_or_batch, static batch: must be a whole number >= 1 .* got '0'"),
    ("concurrency_or_batch", "batch 2.5", r"concurrency_or_batch, static batch: .* got '2.5'"),
])
def test_numbers_stated_in_text_are_checked(tmp_path, column, text, match):
    raw = pd.read_csv(shipped_measurements_path(), dtype=str, keep_default_na=False)
    rows = raw[raw["settings"] != ""].head(5).reset_index(drop=True)
    rows.loc[2, column] = text
    path = tmp_path / "mine.csv"
    rows.to_csv(path, index=False)
    with pytest.raises(InvalidValueError, match=match):
        load_measurements(path)


def test_stated_settings_and_an_infinite_rate_are_read(tmp_path, shipped):
    raw = pd.read_csv(shipped_measurements_path(), dtype=str, keep_default_na=False)
    rows = raw[raw["settings"] != ""].head(2).reset_index(drop=True)
    rows.loc[0, "settings"] = "memory_fraction=0.9; max_num_seqs=64;"
    rows.loc[1, "concurrency_or_batch"] = "request rate QPS=INF"
    path = tmp_path / "mine.csv"
    rows.to_csv(path, index=False)
    read = load_measurements(path, shipped)
    assert read.loc[0, "memory_fraction"] == 0.9 and read.loc[0, "max_num_seqs"] == 64
    assert read.loc[1, "qps"] == float("inf")
