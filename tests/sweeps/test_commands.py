"""``fleetplan sweep`` and ``fleetplan estimate`` on the command line."""

import io
import json

import pandas as pd
import pytest

from fleetplan.cli import main


def run(capsys, *args):
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_sweep_prints_csv_with_ranges(capsys):
    code, out, _ = run(capsys, "sweep", "--gpu", "h100-sxm,l40s", "--model", "llama-3.1-8b", "--batch", "1-16",
                       "--context", "1024,2048")
    assert code == 0
    df = pd.read_csv(io.StringIO(out))
    assert len(df) == 2 * 2 * 5
    assert sorted(df["batch"].unique()) == [1, 2, 4, 8, 16]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_sweep_writes_files(tmp_path, capsys, suffix):
    path = tmp_path / f"grid{suffix}"
    code, _, err = run(capsys, "sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b,mistral-7b",
                       "--quant", "bf16,fp8", "--batch", "1-64:8", "--chunk-rows", "5", "-o", str(path))
    assert code == 0, err
    df = pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)
    assert len(df) == 2 * 2 * 8


def test_estimate_json_knee(capsys):
    code, out, _ = run(capsys, "estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--input-len", "2000",
                       "--output-len", "2", "--tpot-slo-ms", "25", "--mbu", "0.7", "--mfu", "0.5",
                       "--step-overhead-ms", "0", "--reserve-fraction", "0", "--json")
    assert code == 0
    record = json.loads(out)[0]
    assert record["batch"] == 162 and record["mode"] == "slo"


def test_estimate_table_offline(capsys):
    code, out, _ = run(capsys, "estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-70b", "--tp", "4",
                       "--quant", "fp8", "--offline")
    assert code == 0
    assert "llama-3.1-70b on 4 x h100-sxm" in out and "decode_tok_s" in out


def test_estimate_bulk_cases_keeps_inputs(tmp_path, capsys):
    cases = tmp_path / "cases.csv"
    pd.DataFrame({"id": ["x1", "x2"], "gpu": ["h100-sxm", "a100-80gb-sxm"], "model": "llama-3.1-8b",
                  "quant": "bf16", "tp": 1, "input_len": 512, "output_len": 128, "tpot_slo_ms": 30}).to_csv(cases, index=False)
    out_path = tmp_path / "out.csv"
    code, _, err = run(capsys, "estimate", "--cases", str(cases), "-o", str(out_path))
    assert code == 0, err
    out = pd.read_csv(out_path)
    assert list(out["id"]) == ["x1", "x2"]
    assert {"gpu", "tpot_slo_ms", "batch", "req_s", "usd_per_m_output_tokens"} <= set(out.columns)


@pytest.mark.parametrize(("args", "match"), [
    (["sweep", "--gpu", "h100", "--model", "llama-3.1-8b"], "unknown gpu 'h100'; did you mean"),
    (["sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--batch", "0"], "batches must be whole numbers"),
    (["sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--chunk-rows", "0"], "chunk-rows must be >= 1"),
    (["estimate", "--model", "llama-3.1-8b"], "estimate needs --gpu and --model"),
    (["estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--batch", "4", "--offline"],
     "give one of --batch, --tpot-slo-ms/--ttft-slo-ms, --rate, --concurrency or --offline, not --batch and --offline"),
    (["estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--max-rate"], "--max-rate needs --tpot-slo-ms"),
    (["estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--spec-tokens", "2,4"],
     "--spec-tokens takes one value in estimate"),
    (["sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--spec-acceptance", "high"],
     "--spec-acceptance must be numbers separated by commas, got 'high'"),
    (["estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--tpot-slo-ms", "-3"],
     "column tpot_slo_ms: must be a number > 0"),
    (["estimate", "--cases", "no-such-file.csv"], "cases file no-such-file.csv does not exist"),
])
def test_bad_input_exits_2_with_one_line(capsys, args, match):
    code, _, err = run(capsys, *args)
    assert code == 2
    assert match in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_usage_error_exits_2(capsys):
    code, _, err = run(capsys, "estimate", "--tp", "two")
    assert code == 2
    assert "Traceback" not in err


def test_sweep_parquet_carries_provenance_and_partitions(tmp_path, capsys):
    import pyarrow.parquet as pq

    path = tmp_path / "grid.parquet"
    code, _, err = run(capsys, "sweep", "--gpu", "h100-sxm,l40s", "--model", "llama-3.1-8b", "--batch", "1-8",
                       "-o", str(path))
    assert code == 0, err
    metadata = pq.read_metadata(path).metadata
    assert b"fleetplan_version" in metadata and b"catalog_versions" in metadata
    assert b"1-8" in metadata[b"parameters"]
    folder = tmp_path / "parts.parquet"
    code, _, err = run(capsys, "sweep", "--gpu", "h100-sxm,l40s", "--model", "llama-3.1-8b", "--batch", "1-8",
                       "--partition-by", "gpu", "-o", str(folder))
    assert code == 0, err
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == ["gpu=h100-sxm", "gpu=l40s"]


def test_sweep_records_the_assumptions_and_levers_it_was_given(tmp_path, capsys):
    from fleetplan.exports.parquet import read_provenance

    path = tmp_path / "levers.parquet"
    code, _, err = run(capsys, "sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--batch", "1,8",
                       "--prefix-hit-rate", "0.5", "--spec-tokens", "0,2", "--mbu", "0.6", "-o", str(path))
    assert code == 0, err
    parameters = read_provenance(path)["parameters"]
    assert parameters["prefix_hit_rate"] == 0.5 and parameters["spec_tokens"] == [0.0, 2.0]
    assert parameters["mbu"] == 0.6 and parameters["engine"] == "vllm"  # the default engine is recorded


def test_progress_bar_passes_chunks_through():
    from fleetplan.cli.progress import with_progress

    chunks = [pd.DataFrame({"a": [1, 2]}), pd.DataFrame({"a": [3]})]
    assert [len(c) for c in with_progress(iter(chunks), 3, enabled=True)] == [2, 1]


def test_estimate_at_a_rate_and_levers(capsys):
    code, out, _ = run(capsys, "estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--rate", "4",
                       "--prefix-hit-rate", "0.5", "--spec-tokens", "3", "--spec-acceptance", "0.7", "--json")
    assert code == 0
    record = json.loads(out)[0]
    assert record["mode"] == "rate" and record["req_s"] == 4.0 and record["p99_ttft_ms"] >= record["p90_ttft_ms"]
    assert record["spec_tokens"] == 3 and record["prefix_hit_rate"] == 0.5


def test_sweep_lever_axis(capsys):
    code, out, _ = run(capsys, "sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--batch", "8",
                       "--spec-tokens", "0,2,4", "--spec-acceptance", "0.7")
    assert code == 0
    df = pd.read_csv(io.StringIO(out))
    assert sorted(df["spec_tokens"]) == [0, 2, 4]


@pytest.mark.parametrize(("content", "match"), [
    ("gpu;model;quant;tp;input_len;output_len\nh100-sxm;llama-3.1-8b;bf16;1;100;50\n",
     "cases.csv: its values are separated by ';', not commas"),
    ("\x00binary", "cases.csv: binary data, not text"),
    (None, "cases.csv: is a folder, not a cases file"),
])
def test_a_cases_file_is_read_as_every_user_file_is(capsys, tmp_path, content, match):
    path = tmp_path / "cases.csv"
    if content is None:
        path.mkdir()
    else:
        path.write_text(content)
    code, _, err = run(capsys, "estimate", "--cases", str(path))
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1
