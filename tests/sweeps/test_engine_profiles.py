"""Engine profiles as data: memory rules, batch caps and iteration overheads per engine, chosen
with --engine / fleet.engine and recorded in every estimate; calibration labels and error bands."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from fleetplan.catalogs import load_catalogs
from fleetplan.cli import main
from fleetplan.errors import CatalogError, InvalidValueError, UnknownNameError
from fleetplan.sweeps import estimate_cases, sweep
from fleetplan.sweeps import memory as mem
from fleetplan.sweeps.efficiencies import DEFAULT_ENGINE
from fleetplan.sweeps.estimate import case_arrays

CASE = {"gpu": "h100-sxm", "model": "llama-3.1-8b", "quant": "fp8", "tp": 1, "input_len": 1000, "output_len": 200}


def configs(**case):
    return case_arrays(pd.DataFrame([{**CASE, **case}]))[1].iloc[0]


@pytest.mark.parametrize(("engine", "seqs", "tokens"), [("vllm", 1024, 8192), ("tensorrt-llm", 2048, 8192),
                                                         ("sglang", 4096, 8192)])
def test_profiles_set_batch_caps(engine, seqs, tokens):
    row = configs(engine=engine)
    assert (row["engine"], row["max_num_seqs"], row["max_batched_tokens"]) == (engine, seqs, tokens)


def test_vllm_takes_its_small_gpu_defaults_below_70_gib():
    row = configs(gpu="l40s", engine="vllm")  # 48 GB GDDR6 = 44.7 GiB
    assert row["max_num_seqs"] == 256 and row["max_batched_tokens"] == 2048


@pytest.mark.parametrize("engine", ["vllm", "tensorrt-llm", "sglang"])
def test_kv_budget_follows_the_engines_memory_rule(engine, shipped):
    row = configs(engine=engine)
    profile = shipped.engines.loc[engine]
    memory_gb = 80 * 2**30 / 1e9  # NVIDIA's 80 GB are GiB
    workspace = mem.engine_workspace_gb(profile["workspace_gib"], row["max_batched_tokens"], 4096,
                                        profile["activation_bytes_per_token_hidden"], 1)
    fraction = profile["memory_fraction"]
    expected = {"tensorrt-llm": fraction * (memory_gb - row["weight_gb"] - workspace),
                "vllm": fraction * memory_gb - row["weight_gb"] - workspace,
                "sglang": fraction * memory_gb - row["weight_gb"]}[engine]
    assert row["memory_gb"] == pytest.approx(memory_gb)
    assert row["kv_budget_gb"] == pytest.approx(expected)


def test_one_reserve_rule_replaces_the_engine_rule_everywhere():
    row = configs(reserve_fraction=0.1)
    assert row["kv_budget_gb"] == pytest.approx(0.9 * 80 * 2**30 / 1e9 - row["weight_gb"])


def test_tensorrt_llm_reserves_whole_sequences_at_admission():
    cases = pd.DataFrame([{**CASE, "input_len": 128, "output_len": 4096, "engine": e} for e in ("tensorrt-llm", "vllm")])
    out = estimate_cases(cases, memory_fraction=0.9, max_num_seqs=100_000)
    trt, vllm = out["batch"].tolist()
    assert trt < 0.7 * vllm  # prompt + whole output vs the mean occupancy


def test_every_estimate_records_its_engine_calibration_and_band(shipped):
    out = estimate_cases(pd.DataFrame([{**CASE, "engine": e} for e in ("tensorrt-llm", "sglang")]
                                      + [{**CASE, "gpu": "mi355x"}, {**CASE, "gpu": "mi325x"}]))
    assert out["engine"].tolist() == ["tensorrt-llm", "sglang", DEFAULT_ENGINE, DEFAULT_ENGINE]
    assert out["calibration"].tolist() == ["measured", "transferred", "prior", "transferred"]
    assert (out["error_p10_pct"] < 0).all() and (out["error_p90_pct"] > 0).all()
    assert (out["capacity_quantile"] == "p50").all()


def test_p90_capacity_divides_throughput_by_the_band():
    cases = pd.DataFrame([CASE])
    typical, pessimistic = estimate_cases(cases).iloc[0], estimate_cases(cases, capacity_quantile="p90").iloc[0]
    factor = 1 + pessimistic["error_p90_pct"] / 100
    assert pessimistic["req_s"] == pytest.approx(typical["req_s"] / factor)
    assert pessimistic["usd_per_m_output_tokens"] == pytest.approx(typical["usd_per_m_output_tokens"] * factor)
    assert pessimistic["tpot_ms"] == typical["tpot_ms"]
    with pytest.raises(InvalidValueError, match="capacity_quantile must be one of p50, p90, got 'p99'"):
        estimate_cases(cases, capacity_quantile="p99")


def test_unknown_engine_says_did_you_mean():
    with pytest.raises(UnknownNameError, match="unknown engine 'vllmm'; did you mean 'vllm'"):
        estimate_cases(pd.DataFrame([{**CASE, "engine": "vllmm"}]))
    with pytest.raises(UnknownNameError, match=r"unknown engine \(efficiency catalog\) 'sglng'"):
        sweep(["h100-sxm"], ["llama-3.1-8b"], engine="sglng")


def test_cli_engine_option_and_json_record(capsys):
    base = ["estimate", "--gpu", "l40s", "--model", "llama-3.1-8b", "--quant", "fp8", "--input-len", "1000",
            "--output-len", "200", "--batch", "16", "--json"]
    assert main([*base, "--engine", "SGLang"]) == 0
    sglang = pd.read_json(io.StringIO(capsys.readouterr().out)).iloc[0]
    assert main([*base, "--engine", "tensorrt-llm"]) == 0
    trt = pd.read_json(io.StringIO(capsys.readouterr().out)).iloc[0]
    assert sglang["engine"] == "sglang" and trt["engine"] == "tensorrt-llm"
    assert sglang["tpot_ms"] != trt["tpot_ms"]
    assert main([*base, "--engine", "vlm"]) == 2
    assert "did you mean 'vllm'" in capsys.readouterr().err


def test_sweeps_carry_their_engine():
    table = sweep(["h100-sxm"], ["llama-3.1-8b"], batches=[1, 8], engine="tensorrt-llm")
    assert table.attrs["engine"] == "tensorrt-llm"
    assert sweep(["h100-sxm"], ["llama-3.1-8b"]).attrs["engine"] == DEFAULT_ENGINE
    assert np.isfinite(table["tpot_ms"]).all()


def test_an_older_release_runs_its_fitted_rows_and_its_engine_s_profile(shipped):
    case = {**CASE, "gpu": "h100-sxm", "model": "llama-3.1-70b", "quant": "bf16", "tp": 4, "batch": 8}
    newest, older = (estimate_cases(pd.DataFrame([{**case, "engine": e}])).iloc[0]
                     for e in ("tensorrt-llm", "tensorrt-llm@0.14"))
    assert older["engine"] == "tensorrt-llm@0.14" and older["calibration"] == "measured"
    assert older["tpot_ms"] != newest["tpot_ms"]
    assert older["max_batch"] == newest["max_batch"]  # one engine profile: same memory rule and batch cap
    # where the release was never measured, its engine's rows apply
    elsewhere = {**case, "gpu": "b200", "quant": "fp8"}
    b200_newest, b200_older = (estimate_cases(pd.DataFrame([{**elsewhere, "engine": e}])).iloc[0]
                               for e in ("tensorrt-llm", "tensorrt-llm@0.14"))
    assert b200_older["tpot_ms"] == b200_newest["tpot_ms"] and b200_older["calibration"] == "transferred"
    table = sweep(["h100-sxm"], ["llama-3.1-70b"], tps=[4], batches=[8], contexts=[int(older["context_len"])],
                  input_lens=[1000], output_lens=[200], engine="tensorrt-llm@0.14")
    assert table.attrs["engine"] == "tensorrt-llm@0.14"
    assert table["tpot_ms"].iloc[0] == pytest.approx(older["tpot_ms"], rel=1e-6)


@pytest.mark.parametrize(("engine", "match"), [
    ("tensorrt-llm@0.3", r"unknown engine release 'tensorrt-llm@0.3'; did you mean 'tensorrt-llm@0.9'"),
    ("vllm@0.1", r"unknown engine release 'vllm@0.1'.*valid: vllm\)"),
    ("tensorrt-lm@0.14", r"unknown engine 'tensorrt-lm'; did you mean 'tensorrt-llm'"),
])
def test_a_release_without_fitted_rows_is_refused_with_did_you_mean(engine, match):
    with pytest.raises(UnknownNameError, match=match):
        estimate_cases(pd.DataFrame([{**CASE, "engine": engine}]))


def test_an_efficiency_row_of_an_unknown_engine_release_is_refused(tmp_path):
    header = "engine,gpu,operator,precision,memory_efficiency,n_points,source,as_of\n"
    good = tmp_path / "release.csv"
    good.write_text(header + "vllm@0.6,h100-sxm,gemm,bf16,0.8,3,my measurements,2026-11-01\n", encoding="utf-8")
    assert "vllm@0.6" in set(load_catalogs(overrides=[good]).efficiency["engine"])
    bad = tmp_path / "bad.csv"
    bad.write_text(header + "vlm@0.6,h100-sxm,gemm,bf16,0.8,3,my measurements,2026-11-01\n", encoding="utf-8")
    with pytest.raises(CatalogError, match=r"unknown engine 'vlm'; did you mean 'vllm'"):
        load_catalogs(overrides=[bad])
