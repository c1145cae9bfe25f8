"""Per-engine efficiency profiles: fitted from measurements of two engines, selected by --engine
and fleet.engine, used per row by validate, and keyed by engine in the efficiency catalog."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from fleetplan.catalogs import load_catalogs
from fleetplan.cli import main
from fleetplan.errors import UnknownNameError
from fleetplan.sweeps import estimate_cases
from fleetplan.sweeps.fitting import FACTORS, constant_factors, factors_for_rows, fit_profiles
from fleetplan.sweeps.measurements import (
    load_measurements,
    offline_throughput_rows,
    predict_offline,
)

TRUTH = {"fast": {"mbu": 0.8, "mfu": 0.55, "mfu_prefill": 0.65, "step_overhead_ms": 0.5, "tp_scaling": 0.9,
                  "request_overhead_ms": 0.0},
         "slow": {"mbu": 0.45, "mfu": 0.3, "mfu_prefill": 0.4, "step_overhead_ms": 2.0, "tp_scaling": 0.9,
                  "request_overhead_ms": 0.0}}


@pytest.fixture(scope="module")
def two_engines(shipped):
    """L40S offline rows measured twice, by a fast and a slow engine (the model's own values, 3 % noise)."""
    rows = offline_throughput_rows(load_measurements())
    rows = rows[rows["gpu"] == "l40s"].reset_index(drop=True)
    noise = np.random.default_rng(11)
    frames = []
    for engine, truth in TRUTH.items():
        clean = predict_offline(rows, shipped, constant_factors(rows, [truth[n] for n in FACTORS]))
        frames.append(rows.assign(engine=engine, engine_id=engine,
                                  value=clean * noise.lognormal(0.0, 0.03, len(rows))))
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def profiles(two_engines, shipped):
    return fit_profiles(two_engines, shipped)


@pytest.mark.slow
def test_each_engine_gets_its_own_profile_and_the_pool_one(profiles):
    table = profiles.set_index("engine")
    assert sorted(table.index) == ["*", "fast", "slow"] and (profiles["gpu"] == "l40s").all()
    for engine, truth in TRUTH.items():  # MBU is what these throughput rows pin down
        assert table.loc[engine, "mbu"] == pytest.approx(truth["mbu"], rel=0.1), engine
    assert table.loc["slow", "mbu"] < table.loc["*", "mbu"] < table.loc["fast", "mbu"]


def test_rows_take_their_engines_profile_else_the_pooled_one(profiles, shipped):
    rows = pd.DataFrame({"engine_id": ["fast", "slow", "other"], "gpu": "l40s", "quant": "fp8"})
    factors = factors_for_rows(rows, profiles, shipped)
    table = profiles.set_index("engine")
    for index, engine in enumerate(["fast", "slow", "*"]):
        assert factors.loc[index, "mbu"] == pytest.approx(table.loc[engine, "mbu"])


@pytest.fixture(scope="module")
def profile_file(profiles, tmp_path_factory):
    path = tmp_path_factory.mktemp("profiles") / "factors.csv"
    profiles.assign(source="test fit", as_of="2026-11-22").to_csv(path, index=False)
    return path


def test_engine_selects_its_rows_in_estimates(profile_file, profiles):
    catalogs = load_catalogs([profile_file])
    case = pd.DataFrame([{"gpu": "l40s", "model": "llama-3.1-8b", "quant": "fp8", "tp": 1, "input_len": 1000,
                          "output_len": 200, "batch": 16}])
    fast = profiles.set_index("engine").loc["fast"]
    by_engine = estimate_cases(case, catalogs, engine="fast").iloc[0]
    by_hand = estimate_cases(case, catalogs, **{name: float(fast[name]) for name in FACTORS}).iloc[0]
    assert by_engine["tpot_ms"] == pytest.approx(by_hand["tpot_ms"])
    assert by_engine["ttft_ms"] == pytest.approx(by_hand["ttft_ms"])
    slow = estimate_cases(case, catalogs, engine="slow").iloc[0]
    assert slow["tpot_ms"] > 1.3 * by_engine["tpot_ms"]
    with pytest.raises(UnknownNameError, match=r"unknown engine \(efficiency catalog\) 'fats'; did you mean 'fast'"):
        estimate_cases(case, catalogs, engine="fats")


def test_cli_engine_option(profile_file, capsys):
    base = ["estimate", "--gpu", "l40s", "--model", "llama-3.1-8b", "--quant", "fp8", "--input-len", "1000",
            "--output-len", "200", "--batch", "16", "--catalog", str(profile_file), "--json"]
    assert main([*base, "--engine", "Fast"]) == 0
    fast = pd.read_json(io.StringIO(capsys.readouterr().out)).iloc[0]
    assert main([*base, "--engine", "slow"]) == 0
    slow = pd.read_json(io.StringIO(capsys.readouterr().out)).iloc[0]
    assert slow["tpot_ms"] > fast["tpot_ms"]
    assert main([*base, "--engine", "vllm"]) == 2
    assert "unknown engine (efficiency catalog) 'vllm'" in capsys.readouterr().err


def test_validate_uses_each_rows_engine(two_engines, profile_file):
    from fleetplan.sweeps.model_validation import compare

    compared = compare(two_engines, load_catalogs([profile_file]))
    median = compared.groupby("engine")["ape_pct"].median()
    assert (median < 6.0).all()  # each engine's rows predicted by its own profile
    pooled = compare(two_engines.assign(engine_id="*"), load_catalogs([profile_file]))
    assert pooled["ape_pct"].median() > 2 * compared["ape_pct"].median()


@pytest.mark.slow
def test_calibrate_writes_per_engine_rows(two_engines, tmp_path, capsys):
    measured = tmp_path / "two-engines.csv"
    columns = ["source", "engine", "gpu_name", "tp", "model_name", "precision_weights", "precision_kv",
               "input_len", "output_len", "scenario", "metric", "value"]
    two_engines[columns].rename(columns={"gpu_name": "gpu", "model_name": "model"}).to_csv(measured, index=False)
    factors = tmp_path / "factors.csv"
    assert main(["calibrate", str(measured), "-o", str(factors)]) == 0
    capsys.readouterr()
    table = pd.read_csv(factors)
    assert sorted(table["engine"]) == ["*", "fast", "slow"]
    catalogs = load_catalogs([factors])
    assert {"fast", "slow"} <= set(catalogs.efficiency["engine"])


def test_override_files_without_an_engine_column_still_load(tmp_path, shipped):
    path = tmp_path / "old.csv"
    pd.DataFrame([{"gpu": "l40s", "precision": "fp8", "mbu": 0.5, "mfu": 0.4, "step_overhead_ms": 1.0,
                   "tp_scaling": 0.9, "request_overhead_ms": 0.0, "n_points": 0, "source": "old file",
                   "as_of": "2026-01-01"}]).to_csv(path, index=False)
    efficiency = load_catalogs([path]).efficiency.set_index(["engine", "gpu", "precision"])
    assert efficiency.loc[("*", "l40s", "fp8"), "mbu"] == 0.5
    assert len(efficiency) == len(shipped.efficiency)  # replaced the shipped row, not added one
