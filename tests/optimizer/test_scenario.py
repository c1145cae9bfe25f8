"""Scenario files: validation errors are one line naming the field; loading YAML and TOML;
demand conversions."""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest

from fleetplan.errors import ScenarioError
from fleetplan.optimizer import demand
from fleetplan.optimizer.example import EXAMPLE_YAML, example_data, example_scenario
from fleetplan.optimizer.scenario import scenario_json_schema
from fleetplan.optimizer.scenario_files import load_scenario, validate_scenario

BASE = {
    "workloads": [{"name": "chat", "model": "llama-3.1-8b", "requests_per_s": 10,
                   "input_tokens": 500, "output_tokens": 200, "tpot_slo_ms": 50}],
    "fleet": {"gpus": ["h100-sxm", {"id": "l4", "max_gpus": 8}]},
}


def changed(edit) -> dict:
    data = copy.deepcopy(BASE)
    edit(data)
    return data


def set_in(path, value):
    def edit(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return edit


ERRORS = [
    (set_in(("workloads", 0, "tpot_slo_ms"), -5),
     r"^scenario.yaml: workloads\[0\].tpot_slo_ms: must be > 0, got -5$"),
    (set_in(("workloads", 0, "tpot_slo"), 5),
     r"workloads\[0\].tpot_slo: unknown field; did you mean 'tpot_slo_ms'\?"),
    (set_in(("workloads", 0, "tokens_per_s"), 5),
     r"workloads\[0\]: give exactly one of requests_per_s, tokens_per_s, tokens_per_month, "
     r"got requests_per_s, tokens_per_s"),
    (lambda d: d["workloads"][0].pop("requests_per_s"),
     r"workloads\[0\]: give exactly one of .* got none"),
    (lambda d: d["workloads"][0].pop("output_tokens"),
     r"workloads\[0\]: give both input_tokens and output_tokens"),
    (set_in(("workloads", 0, "histogram"), [{"input_tokens": 1, "output_tokens": 1, "weight": 1}]),
     r"workloads\[0\]: give either input_tokens and output_tokens, or a histogram"),
    (set_in(("workloads", 0, "hourly_profile"), []),
     r"workloads\[0\].hourly_profile: must hold a whole number of days of hourly values \(24 for "
     r"a day, 168 for a week, at most 8784\), got 0 values"),
    (set_in(("workloads", 0, "hourly_profile"), [1] * 25),
     r"workloads\[0\].hourly_profile: must hold a whole number of days .*got 25 values"),
    (lambda d: d["workloads"].extend([
        {**d["workloads"][0], "name": "three-days", "hourly_profile": [1] * 72},
        {**d["workloads"][0], "name": "two-days", "hourly_profile": [1] * 48}]),
     r"workloads\[2\].hourly_profile: its 48 values do not divide the 72-hour cycle of "
     r"workloads\[1\]"),
    (set_in(("workloads", 0, "hourly_profile"), [1] * 23 + [-1]),
     r"workloads\[0\].hourly_profile: hour 23: must be a finite number >= 0, got -1"),
    (set_in(("workloads", 0, "hourly_profile"), [0] * 24),
     r"hourly_profile: must have at least one value > 0"),
    (set_in(("workloads", 0, "name"), "has space"),
     r"workloads\[0\].name: string should match pattern"),
    (set_in(("workloads", 0, "redundancy_k"), -1),
     r"workloads\[0\].redundancy_k: must be >= 0, got -1"),
    (set_in(("workloads", 0, "monthly_growth"), -1),
     r"workloads\[0\].monthly_growth: must be > -1, got -1"),
    (set_in(("workloads", 0, "token_basis"), "prompt"),
     r"workloads\[0\].token_basis: must be 'total' or 'output', got 'prompt'"),
    (lambda d: d["workloads"].append(copy.deepcopy(d["workloads"][0])),
     r"workloads: workload names must be unique, 'chat' repeats"),
    (set_in(("workloads",), []), r"workloads: must hold at least 1 value, got \[\]$"),
    (lambda d: d.pop("fleet"), r"^scenario.yaml: fleet: is required$"),
    (set_in(("fleett",), {}), r"fleett: unknown field; did you mean 'fleet'\?"),
    (set_in(("fleet", "gpus"), []), r"fleet.gpus: must hold at least 1 value, got \[\]$"),
    (lambda d: d["fleet"]["gpus"].append({"id": "a10g", "price": 1}),
     r"fleet.gpus\[2\].price: unknown field; did you mean 'pricing'\?"),
    (lambda d: d["fleet"]["gpus"].append({"id": "a10g", "usd_per_gpu_hour": {"spott": 1}}),
     r"fleet.gpus\[2\].usd_per_gpu_hour.spott: must be 'on_demand', 'spot', 'reserved_1y', "
     r"'reserved_3y' or 'purchase', got 'spott'"),
    (lambda d: d["fleet"]["gpus"].append({"id": "a10g", "usd_per_gpu_hour": {"spot": -1}}),
     r"fleet.gpus\[2\].usd_per_gpu_hour: spot: must be >= 0, got -1"),
    (lambda d: d["fleet"]["gpus"].append({"id": "a10g", "max_gpus": -2}),
     r"fleet.gpus\[2\].max_gpus: must be >= 0, got -2"),
    (lambda d: d["fleet"]["gpus"].append("H100-SXM"), r"fleet: gpus: each GPU once"),
    (set_in(("fleet", "pricing"), ["ondemand"]),
     r"fleet.pricing\[0\]: must be 'on_demand', 'spot', 'reserved_1y', 'reserved_3y' or "
     r"'purchase'"),
    (set_in(("fleet", "tp"), [0]), r"fleet.tp: must be whole numbers between 1 and 1024, got 0"),
    (set_in(("fleet", "target_utilization"), 1.5),
     r"fleet.target_utilization: must be <= 1, got 1.5"),
    (set_in(("fleet", "target_utilization"), "high"),
     r"fleet.target_utilization: must be a number, got 'high'$"),
    (set_in(("fleet", "spot_max_share"), 2), r"fleet.spot_max_share: must be <= 1, got 2"),
    (set_in(("fleet", "budget_usd_per_month"), 0), r"fleet.budget_usd_per_month: must be > 0"),
    (set_in(("fleet", "horizon_months"), 0), r"fleet.horizon_months: must be >= 1, got 0"),
    (set_in(("solver",), {"solver": "gurobi"}),
     r"solver.solver: must be 'auto', 'highs' or 'cbc', got 'gurobi'"),
    (set_in(("solver",), {"time_limit_s": 0}), r"solver.time_limit_s: must be > 0, got 0"),
    (set_in(("what_if",), {"tpot_slo_factor": 1}), r"what_if.tpot_slo_factor: must be > 1"),
    # pydantic's own wording names a class, or says "got" before the value does
    (set_in(("workloads", 0), 0.5),
     r"^scenario.yaml: workloads\[0\]: must be a mapping of its fields \(name: value\), "
     r"got 0.5$"),
    (lambda d: d["fleet"]["gpus"].append({"id": "a10g", "max_new_gpus_per_month": 0.5}),
     r"fleet.gpus\[2\].max_new_gpus_per_month: must be a whole number, got 0.5$"),
    (set_in(("fleet", "gpus", 1, "usd_per_gpu_hour"), [1.0]),
     r"fleet.gpus\[1\].usd_per_gpu_hour: must be a mapping \(name: value\), got \[1.0\]$"),
    (set_in(("workloads", 0, "quants"), True), r"workloads\[0\].quants: must be a list, got True$"),
    (set_in(("workloads", 0, "quants"), [0]), r"workloads\[0\].quants\[0\]: must be text, got 0$"),
    (set_in(("workloads", 0, "model"), ""), r"workloads\[0\].model: must not be blank, got ''$"),
    (set_in(("workloads", 0, "redundancy_k"), 1e308),
     r"workloads\[0\].redundancy_k: must be a whole number of at most 18 digits, got 1e\+308$"),
]


@pytest.mark.parametrize(("edit", "message"), ERRORS)
def test_every_validation_error_is_one_line_naming_the_field(edit, message):
    with pytest.raises(ScenarioError, match=message) as raised:
        validate_scenario(changed(edit), source="scenario.yaml")
    assert "\n" not in str(raised.value)


def test_several_errors_report_the_first_and_count_the_rest():
    data = changed(set_in(("fleet", "tp"), [0]))
    data["workloads"][0]["tpot_slo_ms"] = -1
    with pytest.raises(ScenarioError, match=r"tpot_slo_ms: must be > 0, got -1 \(and 1 more\)"):
        validate_scenario(data, source="s")


def test_a_valid_scenario_takes_gpu_ids_or_options():
    scenario = validate_scenario(BASE)
    assert [g.id for g in scenario.fleet.gpus] == ["h100-sxm", "l4"]
    assert scenario.fleet.gpus[1].max_gpus == 8
    assert scenario.solver.mip_gap == pytest.approx(0.005)


def test_yaml_and_toml_files_load(tmp_path):
    yaml_file = tmp_path / "s.yaml"
    yaml_file.write_text(EXAMPLE_YAML)
    toml_file = tmp_path / "s.toml"
    toml_file.write_text('[[workloads]]\nname = "chat"\nmodel = "llama-3.1-8b"\n'
                         'requests_per_s = 5\ninput_tokens = 100\noutput_tokens = 50\n'
                         '[fleet]\ngpus = ["l4"]\n')
    assert load_scenario(yaml_file).name == "example-assistant-and-rag"
    assert load_scenario(toml_file).workloads[0].requests_per_s == 5


@pytest.mark.parametrize(("text", "suffix", "message"), [
    ("workloads: [\n", ".yaml", r"s.yaml: line \d+: invalid YAML"),
    ("- just\n- a list\n", ".yaml", r"s.yaml: must be a mapping of fields"),
    ("workloads = [", ".toml", r"s.toml: invalid TOML"),
])
def test_unreadable_files_give_one_line(tmp_path, text, suffix, message):
    path = tmp_path / f"s{suffix}"
    path.write_text(text)
    with pytest.raises(ScenarioError, match=message):
        load_scenario(path)


def test_missing_file(tmp_path):
    with pytest.raises(ScenarioError, match="scenario file not found"):
        load_scenario(tmp_path / "nope.yaml")


def test_hourly_profile_csv_is_read_relative_to_the_scenario(tmp_path):
    (tmp_path / "profile.csv").write_text("hour,demand\n" + "".join(
        f"{h},{1 + (h >= 12)}\n" for h in range(24)))
    data = changed(set_in(("workloads", 0, "hourly_profile"), "profile.csv"))
    path = tmp_path / "s.json.yaml"
    path.write_text(json.dumps(data))
    scenario = load_scenario(path)
    assert scenario.workloads[0].hourly_profile == [1.0] * 12 + [2.0] * 12


@pytest.mark.parametrize("header", ["", "demand\n"])
def test_a_profile_csv_may_have_a_header_row_or_none(tmp_path, header):
    # without a header every row is an hour: the first is not taken for a column name
    (tmp_path / "profile.csv").write_text(header + "".join(f"{1 + h / 10}\n" for h in range(24)))
    data = changed(set_in(("workloads", 0, "hourly_profile"), "profile.csv"))
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(data))
    profile = load_scenario(path).workloads[0].hourly_profile
    assert len(profile) == 24 and profile[1] / profile[0] == pytest.approx(1.1)


@pytest.mark.parametrize(("content", "message"), [
    (None, "file not found"),
    ("hour,demand\n0,x\n", r"profile.csv line 2: demand must be a number, got 'x'"),
    ("1\n2\nTrue\n", r"profile.csv line 3: the last column must be a number, got 'True'"),
    ("hour,demand\n", r"must hold 1 to 8784 numbers in its last column, got 0"),
    ("time,demand\n2026-01-05T00:00Z,1\n2026-01-05T02:00Z,2\n",
     r"timestamps must be one hour apart, 2026-01-05 00:00:00\+00:00 is followed by"),
    ("v\n" + "-1\n" * 24, r"hour 0: must be a finite number >= 0"),
    ("time,demand\n2026-01-05T00:00Z,1\n2026-01-05T01:00+01:00,2\n",
     r"timestamps must be one hour apart, 2026-01-05 00:00:00\+00:00 is given twice"),
    ("time;demand\n2026-01-05T00:00Z;1,5\n",
     r"profile.csv: its values are separated by ';', not commas: save the table as "
     r"comma-separated CSV"),
    ("demand\n1.5\n1,5\n", r"profile.csv: not a readable CSV file \(line 3 has 2 fields where "
                            r"the lines before it have 1; a value holding a comma must be quoted"),
    ("\n \n", r"profile.csv: empty file"),
])
def test_bad_profile_csv(tmp_path, content, message):
    if content is not None:
        (tmp_path / "profile.csv").write_text(content)
    data = changed(set_in(("workloads", 0, "hourly_profile"), "profile.csv"))
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(data))
    with pytest.raises(ScenarioError, match=r"workloads\[0\].hourly_profile: .*" + message):
        load_scenario(path)


def test_json_schema_forbids_unknown_fields():
    schema = scenario_json_schema()
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["Workload"]["additionalProperties"] is False
    assert "hourly_profile" in schema["$defs"]["Workload"]["properties"]
    json.dumps(schema)


def test_example_is_valid_and_commented():
    assert example_scenario().workloads[0].name == "chat"
    assert EXAMPLE_YAML.count("#") > 20
    assert example_data()["fleet"]["pricing"] == ["on_demand", "reserved_1y"]


@pytest.mark.parametrize(("field", "value", "req_s"), [
    ("requests_per_s", 10.0, 10.0),
    ("tokens_per_s", 7000.0, 10.0),          # 700 tokens per request
    ("tokens_per_month", 7000.0 * 730 * 3600, 10.0),
])
def test_demand_units_convert_to_requests_per_second(field, value, req_s):
    workload = {"name": "w", "model": "m", "input_tokens": 500, "output_tokens": 200, field: value}
    scenario = validate_scenario(changed(set_in(("workloads", 0), workload)))
    assert demand.mean_requests_per_s(scenario.workloads[0], 730.0) == pytest.approx(req_s)


def test_output_token_basis_counts_only_output_tokens():
    workload = {"name": "w", "model": "m", "input_tokens": 500, "output_tokens": 200,
                "tokens_per_s": 2000.0, "token_basis": "output"}
    scenario = validate_scenario(changed(set_in(("workloads", 0), workload)))
    assert demand.mean_requests_per_s(scenario.workloads[0], 730.0) == pytest.approx(10.0)


def test_histogram_weights_are_normalized_and_profile_and_growth_shape_demand():
    workload = {"name": "w", "model": "m", "requests_per_s": 10.0, "monthly_growth": 0.1,
                "histogram": [{"input_tokens": 100, "output_tokens": 10, "weight": 3},
                              {"input_tokens": 900, "output_tokens": 90, "weight": 1}],
                "hourly_profile": [1.0] * 12 + [3.0] * 12}
    data = changed(set_in(("workloads", 0), workload))
    data["fleet"]["horizon_months"] = 2
    scenario = validate_scenario(data)
    buckets = demand.workload_buckets(scenario)
    assert buckets["share"].tolist() == [0.75, 0.25]
    periods = demand.plan_periods(scenario)
    assert len(periods) == 48 and periods["hours"].sum() == pytest.approx(2 * 730)
    table = demand.demand_table(scenario, buckets, periods)
    night = table[(table["bucket"] == 0) & (table["period"] == 0)]["req_s"].item()
    day_next_month = table[(table["bucket"] == 0) & (table["period"] == 36)]["req_s"].item()
    assert night == pytest.approx(7.5 * 0.5)
    assert day_next_month == pytest.approx(7.5 * 1.5 * 1.1)


def test_a_week_profile_gives_168_periods_and_a_day_profile_repeats_in_it():
    data = changed(set_in(("workloads", 0, "hourly_profile"), [1.0] * 24 * 5 + [0.5] * 48))
    data["workloads"].append({**data["workloads"][0], "name": "daily",
                              "hourly_profile": [1.0] * 12 + [3.0] * 12})
    scenario = validate_scenario(data)
    periods = demand.plan_periods(scenario)
    assert len(periods) == 168 and periods["hours"].sum() == pytest.approx(12 * 730)
    table = demand.demand_table(scenario, demand.workload_buckets(scenario), periods)
    daily = table[table["workload"] == "daily"].set_index("period")["req_s"]
    assert daily[13] == daily[13 + 24 * 6] == pytest.approx(15.0)  # 10 req/s x 1.5, every day
    weekly = table[table["workload"] == "chat"].set_index("period")["req_s"]
    assert weekly[0] / weekly[167] == pytest.approx(2.0)


def test_a_profile_csv_with_timestamps_is_read_in_time_order(tmp_path):
    hours = pd.date_range("2026-01-05", periods=168, freq="h", tz="UTC")
    rows = pd.DataFrame({"timestamp": hours.strftime("%Y-%m-%dT%H:%M:%SZ"),
                         "req_s": np.arange(168) + 1.0}).sample(frac=1.0, random_state=3)
    rows.to_csv(tmp_path / "week.csv", index=False)
    data = changed(set_in(("workloads", 0, "hourly_profile"), "week.csv"))
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(data))
    assert load_scenario(path).workloads[0].hourly_profile == list(np.arange(168) + 1.0)


def test_profile_csvs_must_share_a_cycle(tmp_path):
    (tmp_path / "two-days.csv").write_text("v\n" + "1\n" * 48)
    data = changed(set_in(("workloads", 0, "hourly_profile"), "two-days.csv"))
    data["workloads"].append({**data["workloads"][0], "name": "three-days",
                              "hourly_profile": [1.0] * 72})
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(data))
    with pytest.raises(ScenarioError, match=r"s.yaml: workloads\[0\].hourly_profile: its 48 "
                                            r"values do not divide the 72-hour cycle"):
        load_scenario(path)
