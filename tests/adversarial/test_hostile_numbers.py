"""Non-finite, negative and absurd numbers in scenarios, profiles and options: one line naming the
field and the allowed range, exit 2, before any solve."""

from __future__ import annotations

import math
from typing import Annotated

import pytest

from fleetplan.optimizer.strict_model import boolean_for_number

INF, NAN = math.inf, math.nan


def workload(field, value):
    def edit(data):
        data["workloads"][0][field] = value
    return edit


def fleet(field, value):
    def edit(data):
        data["fleet"][field] = value
    return edit


def gpu_option(field, value):
    def edit(data):
        data["fleet"]["gpus"] = [{"id": "l40s", field: value}]
    return edit


def top(section, field, value):
    def edit(data):
        data.setdefault(section, {})[field] = value
    return edit


SCENARIO_CASES = {
    "requests_per_s inf": (workload("requests_per_s", INF), r"requests_per_s"),
    "requests_per_s nan": (workload("requests_per_s", NAN), r"requests_per_s"),
    "requests_per_s 1e30": (workload("requests_per_s", 1e30), r"requests_per_s.*<="),
    "requests_per_s negative": (workload("requests_per_s", -3), r"requests_per_s.*> 0"),
    "tokens_per_month inf": (lambda d: (d["workloads"][0].pop("requests_per_s"),
                                        d["workloads"][0].update(tokens_per_month=INF)), r"tokens_per_month"),
    "tpot_slo_ms inf": (workload("tpot_slo_ms", INF), r"tpot_slo_ms"),
    "tpot_slo_ms nan": (workload("tpot_slo_ms", NAN), r"tpot_slo_ms"),
    "tpot_slo_ms zero": (workload("tpot_slo_ms", 0), r"tpot_slo_ms.*> 0"),
    "ttft_slo_ms inf": (workload("ttft_slo_ms", INF), r"ttft_slo_ms"),
    "input_tokens huge": (workload("input_tokens", 10**12), r"input_tokens.*<="),
    "output_tokens zero": (workload("output_tokens", 0), r"output_tokens.*> 0"),
    "monthly_growth inf": (workload("monthly_growth", INF), r"monthly_growth"),
    "monthly_growth -1": (workload("monthly_growth", -1), r"monthly_growth.*> -1"),
    "redundancy_k huge": (workload("redundancy_k", 10**9), r"redundancy_k.*<="),
    "hourly_profile inf": (workload("hourly_profile", [1.0] * 23 + [INF]), r"hourly_profile.*finite"),
    "hourly_profile zeros": (workload("hourly_profile", [0.0] * 24), r"hourly_profile.*> 0"),
    "hourly_profile 25 values": (workload("hourly_profile", [1.0] * 25), r"hourly_profile"),
    "histogram weight inf": (lambda d: (d["workloads"][0].pop("input_tokens"), d["workloads"][0].pop("output_tokens"),
                                        d["workloads"][0].update(histogram=[{"input_tokens": 10, "output_tokens": 10,
                                                                             "weight": INF}])), r"weight"),
    "budget inf": (fleet("budget_usd_per_month", INF), r"budget_usd_per_month"),
    "budget 1e300": (fleet("budget_usd_per_month", 1e300), r"budget_usd_per_month.*<="),
    "target_utilization nan": (fleet("target_utilization", NAN), r"target_utilization"),
    "spot_max_share nan": (fleet("spot_max_share", NAN), r"spot_max_share"),
    "config_fixed_usd_per_month inf": (fleet("config_fixed_usd_per_month", INF),
                                       r"config_fixed_usd_per_month: must be a finite number"),
    "config_fixed_usd_per_month negative": (fleet("config_fixed_usd_per_month", -5),
                                            r"config_fixed_usd_per_month: must be >= 0"),
    "horizon_months huge": (fleet("horizon_months", 10**6), r"horizon_months.*<="),
    "hours_per_month inf": (fleet("hours_per_month", INF), r"hours_per_month"),
    "max_gpus 1e30": (gpu_option("max_gpus", 10**30), r"max_gpus.*<="),
    "max_gpus negative": (gpu_option("max_gpus", -1), r"max_gpus.*>= 0"),
    "price inf": (gpu_option("usd_per_gpu_hour", {"on_demand": INF}), r"usd_per_gpu_hour"),
    "price 1e300": (gpu_option("usd_per_gpu_hour", {"on_demand": 1e300}), r"usd_per_gpu_hour.*<="),
    "price negative": (gpu_option("usd_per_gpu_hour", {"on_demand": -1.0}), r"usd_per_gpu_hour.*>= 0"),
    # YAML's true/false would be read as 1 and 0: refused wherever a number is due
    "horizon_months true": (fleet("horizon_months", True),
                            r"fleet.horizon_months: must be a number, not a boolean, got True"),
    "input_tokens true": (workload("input_tokens", True), r"input_tokens: must be a number"),
    "tp list with false": (fleet("tp", [1, False]), r"fleet.tp: must be a number.*got \[1, False\]"),
    "price true": (gpu_option("usd_per_gpu_hour", {"on_demand": True}),
                   r"usd_per_gpu_hour: must be a number, not a boolean"),
    "current count true": (lambda d: d["fleet"].update(current=[
        {"gpu": "l40s", "pricing_type": "owned", "count": True}]),
        r"fleet.current\[0\].count: must be a number, not a boolean"),
    "time limit inf": (top("solver", "time_limit_s", INF), r"time_limit_s"),
    "mip gap nan": (top("solver", "mip_gap", NAN), r"mip_gap"),
}


@pytest.mark.parametrize("case", sorted(SCENARIO_CASES))
def test_scenario_numbers_are_checked_at_the_edge(sandbox, case):
    edit, pattern = SCENARIO_CASES[case]
    path = sandbox.scenario(edit=edit)
    sandbox.fails(["plan", path, "-q", "-o", "plan.json"], 2, pattern)


PROFILE_HEADER = "gpu,tp,input_tokens,output_tokens,max_req_s\n"


@pytest.mark.parametrize(("row", "pattern"), [
    ("l40s,1,4000,1000,inf", r"max_req_s.*finite|max_req_s"),
    ("l40s,1,4000,1000,1e-300", r"max_req_s.*>=|max_req_s"),
    ("l40s,1,4000,1000,-2", r"max_req_s.*>= 0"),
    ("h100x,1,4000,1000,5", r"unknown gpu 'h100x'.*did you mean"),
    ("l40s,1.5,4000,1000,5", r"tp.*whole number"),
])
def test_capacity_profile_values(sandbox, row, pattern):
    sandbox.write("profiles.csv", PROFILE_HEADER + row + "\n")
    path = sandbox.scenario(capacity_profiles="profiles.csv")
    sandbox.fails(["plan", path, "-q", "-o", "plan.json"], 2, pattern)


ESTIMATE = ["estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b"]


@pytest.mark.parametrize(("extra", "pattern"), [
    (["--tpot-slo-ms", "inf"], r"tpot.slo.ms.*finite|tpot_slo_ms"),
    (["--tpot-slo-ms", "nan"], r"tpot.slo.ms"),
    (["--tpot-slo-ms", "-1"], r"tpot.slo.ms.*> 0"),
    (["--ttft-slo-ms", "0", "--tpot-slo-ms", "30"], r"ttft.slo.ms.*> 0"),
    (["--rate", "inf"], r"rate"),
    (["--rate", "nan"], r"rate"),
    (["--batch", "0"], r"batch.*>= 1"),
    (["--batch", "1000000000000"], r"batch.*<="),
    (["--input-len", "0", "--batch", "1"], r"input.len.*>= 1"),
    (["--tp", "0", "--batch", "1"], r"tp.*>= 1"),
    (["--mbu", "nan", "--batch", "1"], r"mbu"),
    (["--mbu", "2", "--batch", "1"], r"mbu.*<= 1"),
    (["--price", "inf", "--batch", "1"], r"usd_per_gpu_hour|price"),
    (["--reserve-fraction", "1.5", "--batch", "1"], r"reserve_fraction.*<="),
])
def test_estimate_options(sandbox, extra, pattern):
    sandbox.fails([*ESTIMATE, *extra], 2, pattern)


COMPARE = ["compare", "--model", "llama-3.1-8b", "--gpus", "l40s,h100-sxm"]


@pytest.mark.parametrize(("extra", "pattern"), [
    (["--demand-req-s", "inf"], r"demand"),
    (["--demand-req-s", "nan"], r"demand"),
    (["--demand-req-s", "0"], r"demand.*> 0"),
    (["--demand-req-s", "1e30"], r"demand.*<="),
    (["--demand-req-s", "5", "--usd-per-kwh", "inf"], r"usd_per_kwh|usd-per-kwh"),
    (["--demand-req-s", "5", "--pue", "nan"], r"pue"),
    (["--demand-req-s", "5", "--utilization", "0"], r"utilization.*> 0"),
])
def test_compare_options(sandbox, extra, pattern):
    sandbox.fails([*COMPARE, *extra], 2, pattern)


SWEEP = ["sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b"]


@pytest.mark.parametrize(("extra", "pattern"), [
    (["--batch", "0"], r"batch.*from 1"),
    (["--batch", "1-100000000:1"], r"batch.*values|at most|too many"),
    (["--context", "1000000000000"], r"context.*to"),
    (["--tp", "0"], r"tp.*from 1"),
    (["--chunk-rows", "0"], r"chunk.rows.*>= 1"),
    (["--spec-acceptance", "inf"], r"spec_acceptance"),
    (["--prefix-hit-rate", "nan"], r"prefix_hit_rate"),
])
def test_sweep_options(sandbox, extra, pattern):
    sandbox.fails([*SWEEP, *extra], 2, pattern)


def test_one_infinite_whatif_value_fails_only_its_own_case(sandbox):
    base = sandbox.scenario("base.yaml")
    grid = sandbox.write("grid.yaml", f"base: {base.name}\naxes:\n  demand_multiplier: [1.0, .inf]\n")
    result = sandbox.run("whatif", grid, "-o", "grid.csv", "--workers", "1", "--no-base-plan")
    assert result.code == 0, result.err
    text = sandbox.path("grid.csv").read_text()
    assert "demand_multiplier" in text and "requests_per_s" in text  # the bad case names its field
    assert text.count("optimal") >= 1


@pytest.mark.parametrize(("axis", "pattern"), [
    ("demand_multiplier: [1.0, true]", r"axes.demand_multiplier: must be a number, not a boolean"),
    ("price_multiplier: {l40s: [1.0, false]}",
     r"axes.price_multiplier: must be a number, not a boolean, got \{'l40s': \[1.0, False\]\}"),
    # a list where a mapping is due is the wrong shape, whatever it holds
    ("price_multiplier: [1.0, true]", r"axes.price_multiplier: must be a mapping \(name: value\)"),
])
def test_a_boolean_in_a_whatif_axis_is_refused(sandbox, axis, pattern):
    base = sandbox.scenario("base.yaml")
    grid = sandbox.write("grid.yaml", f"base: {base.name}\naxes:\n  {axis}\n")
    sandbox.fails(["whatif", grid, "-o", "grid.csv"], 2, pattern)


@pytest.mark.parametrize(("value", "annotation", "refused"), [
    (True, int, True), (1, int, False), (True, bool, False), (True, bool | None, False),
    (True, float | None, True), ([1, False], list[int] | None, True), ([1, 2], list[int], False),
    ({"a": [1.0, True]}, dict[str, list[float]], True), ([True], dict[str, float], False),
    (True, str, False), ({"a": True}, dict[str, bool], False),
    ({"a": [True]}, dict[str, Annotated[list[float], "at least one"]], True),
    ({"a": [1.0]}, dict[str, Annotated[list[float], "at least one"]], False),
])
def test_booleans_are_found_where_numbers_are_due(value, annotation, refused):
    assert boolean_for_number(value, annotation) is refused
