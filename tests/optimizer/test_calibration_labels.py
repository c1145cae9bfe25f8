"""A plan says how sure its capacities are: calibration labels and error bands on the fleet, a
warning when the chosen configuration rests on priors, and a pessimistic capacity quantile."""

from __future__ import annotations

import json

import pytest

from fleetplan.cli import main
from fleetplan.errors import ScenarioError
from fleetplan.optimizer.scenario_files import validate_scenario
from fleetplan.optimizer.scenario_planning import plan_scenario, prepare
from fleetplan.sweeps.uncertainty import shipped_error_bands


def scenario(gpu: str, **fleet) -> dict:
    return {
        "workloads": [{"name": "chat", "model": "llama-3.1-8b", "requests_per_s": 30, "input_tokens": 1000,
                       "output_tokens": 200, "tpot_slo_ms": 50, "quants": ["fp8"]}],
        "fleet": {"gpus": [{"id": gpu, "usd_per_gpu_hour": {"on_demand": 2.0}}], "tp": [1], **fleet},
        "solver": {"mip_gap": 0.0},
        "what_if": {"enabled": False},
    }


@pytest.mark.slow
def test_plan_flags_a_configuration_resting_on_priors(shipped):
    plan = plan_scenario(validate_scenario(scenario("mi355x")), shipped)  # no MI355X measurements
    assert plan.feasible
    chosen = plan.fleet.iloc[0]
    band = shipped_error_bands().loc["prior"]
    assert chosen["calibration"] == "prior"
    assert (chosen["error_p10_pct"], chosen["error_p90_pct"]) == (band["error_p10_pct"], band["error_p90_pct"])
    warnings = [m for m in plan.messages if m.startswith("warning:") and "prior efficiencies" in m]
    assert warnings == [f"warning: {chosen['config']} rests on prior efficiencies (no measurements of this "
                        f"engine, GPU and precision or a sibling); held-out rows like it were off by "
                        f"{band['error_p10_pct']:+.0f}% to {band['error_p90_pct']:+.0f}% (p10 to p90)"]
    text = plan.summary_text()
    assert "calibration" in text and "prior" in text and warnings[0] in text


@pytest.mark.slow
def test_a_measured_configuration_has_no_warning(shipped):
    plan = plan_scenario(validate_scenario(scenario("mi300x", engine="vllm")), shipped)  # vLLM FP8 rows
    assert plan.fleet["calibration"].tolist() == ["measured"]
    assert not [m for m in plan.messages if "prior efficiencies" in m]


@pytest.mark.slow
def test_p90_capacity_quantile_derates_every_candidate(shipped):
    as_modelled = prepare(validate_scenario(scenario("mi355x")), shipped).candidates
    pessimistic = prepare(validate_scenario(scenario("mi355x", capacity_quantile="p90")), shipped).candidates
    derate = 1 + as_modelled["error_p90_pct"] / 100
    served = as_modelled["req_s_per_replica"] > 0
    assert served.any()
    assert pessimistic.loc[served, "req_s_per_replica"].to_numpy() == pytest.approx(
        (as_modelled.loc[served, "req_s_per_replica"] / derate[served]).to_numpy(), rel=1e-6)


def test_capacity_quantile_is_checked():
    with pytest.raises(ScenarioError, match="capacity_quantile"):
        validate_scenario(scenario("mi355x", capacity_quantile="p99"))


def test_compare_shows_each_option_calibration(shipped, capsys, monkeypatch):
    from fleetplan.cli import main
    from fleetplan.sweeps.rent_or_buy import compare

    workload = {"model": "llama-3.1-8b", "quant": "fp8", "input_len": 1000, "output_len": 200,
                "tpot_slo_ms": None, "ttft_slo_ms": None, "demand_req_s": 20.0}
    table = compare(workload, ["mi300x", "mi355x"], shipped).set_index("gpu")
    assert table["calibration"].to_dict() == {"mi300x": "measured", "mi355x": "prior"}  # vLLM FP8 rows on MI300X
    band = shipped_error_bands().loc["prior"]
    assert table.loc["mi355x", "error_p90_pct"] == band["error_p90_pct"]
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["compare", "--model", "llama-3.1-8b", "--gpus", "mi355x", "--demand-req-s", "20",
                 "--quant", "fp8"]) == 0
    printed = " ".join(capsys.readouterr().out.split())  # the caption wraps at the terminal width
    assert f"mi355x prior (p10 {band['error_p10_pct']:+.0f}%, p90 {band['error_p90_pct']:+.0f}%)" in printed


@pytest.mark.slow
def test_the_printed_plan_says_how_sure_its_fleet_is(tmp_path, capsys):
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario("mi300x", engine="vllm")), encoding="utf-8")
    assert main(["plan", str(path), "-o", str(tmp_path / "plan.xlsx")]) == 0
    band = shipped_error_bands().loc["measured"]
    assert (f"Capacity calibration: measured for 1 configuration (error of held-out rows like them: "
            f"p10 {band['error_p10_pct']:+.0f}%, p90 {band['error_p90_pct']:+.0f}%).") in capsys.readouterr().out
