"""Re-planning inputs end to end: the example scenario on the command line (printed diff,
stay-the-course lines, the Changes sheet), today's fleet from a CSV, and one-line errors for
bad rows."""

from __future__ import annotations

import json
import math
import re
import time
import warnings
from pathlib import Path

import openpyxl
import pandas as pd
import pytest

import fleetplan
import fleetplan.cli.plan
from fleetplan.catalogs import load_catalogs
from fleetplan.cli import main
from fleetplan.cli.plan_summary import print_plan
from fleetplan.errors import ScenarioError
from fleetplan.exports.plan_parquet import plan_tables
from fleetplan.exports.plan_workbook import build_plan_book
from fleetplan.optimizer import scenario_planning
from fleetplan.optimizer.current_fleet import owned_usd_per_gpu_hour, purchase_usd_per_gpu_hour
from fleetplan.optimizer.current_fleet_inputs import read_current_csv, replan_tables
from fleetplan.optimizer.optimization import WhatIfOptions, optimize_problem
from fleetplan.optimizer.scenario_files import load_scenario, validate_scenario
from fleetplan.optimizer.scenario_planning import prepare
from fleetplan.optimizer.stay_the_course import UNPRICED, UNSERVABLE
from fleetplan.optimizer.stochastic_problem import with_demand_factors
from tests.optimizer.test_replanning import EXACT, brute_force, tiny

EXAMPLE = Path(fleetplan.__file__).parent / "examples" / "replan.yaml"
CSV = ("gpu,pricing_type,count,model,tp,end_month,usd_per_month\n"
       "h100-sxm,committed,4,llama-3.1-8b,1,4,6400\n"
       "l40s,committed,4,,,9,2500\n"
       "h100-sxm,owned,8,,,,\n")


@pytest.fixture(scope="module")
def catalogs():
    return load_catalogs()


@pytest.mark.slow
def test_the_example_prints_the_diff_and_writes_the_changes_sheet(tmp_path, capsys):
    out = tmp_path / "out.xlsx"
    code = main(["plan", str(EXAMPLE), "-o", str(out), "--no-what-if"])
    printed, _ = capsys.readouterr()
    assert code == 0
    assert "Changes from today's fleet (GPUs)" in printed
    assert "sunk commitments: $48,100 (paid whatever the plan does)" in printed
    assert "stay the course (keep today's fleet, rent on demand the rest)" in printed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        book = openpyxl.load_workbook(out)
    assert "Changes" in book.sheetnames
    sheet = book["Changes"]
    labels = [sheet.cell(row, 1).value for row in range(1, 12)]
    assert "Whole bill with the plan" in labels and "Saving of the plan" in labels
    assert str(sheet.cell(labels.index("Whole bill with the plan") + 1, 2).value).startswith("=")
    headers = {sheet.cell(row, 2).value for row in range(1, 20)}
    assert "Bought (GPUs)" in headers
    # the same example in a 400 kW hall with a hosted API: kW per month and the API's share
    assert re.search(r"hall-a\s*│\s*11\s*│[^\n]*│\s*400\s*│", printed)  # month 11 of 400 kW
    share = re.search(r"nightly-summaries\s*│\s*deepinfra-70b-turbo\s*│\s*([\d.]+)%", printed)
    assert share and float(share.group(1)) > 0
    assert {"Supply", "Changes"} <= set(book.sheetnames)


def test_the_example_has_a_400_kw_site_and_a_hosted_api():
    fleet = load_scenario(EXAMPLE).fleet
    assert [(site.name, site.kw) for site in fleet.sites] == [("hall-a", 400.0)]
    assert [(api.name, api.model) for api in fleet.apis] == [("deepinfra-70b-turbo",
                                                              "llama-3.1-70b")]


def test_the_example_has_two_commitments_an_owned_pool_and_a_lead_time(catalogs):
    scenario = load_scenario(EXAMPLE)
    tables = replan_tables(scenario, catalogs, ["h100-sxm", "l40s"])
    committed = tables.existing[tables.existing["pricing_type"] == "committed"]
    assert sorted(committed["end_month"]) == [4.0, 9.0]  # end_date 2027-10-01 is month 9
    assert (tables.existing["pricing_type"] == "owned").sum() == 1
    assert tables.lead_times[["gpu", "start_month"]].values.tolist() == [["l40s", 3]]
    owned = tables.offers.set_index(["gpu", "pricing_type"])["usd_per_gpu_hour"]
    server = catalogs.ownership.set_index("gpu").loc["h100-sxm"]
    assert owned[("h100-sxm", "owned")] == pytest.approx(owned_usd_per_gpu_hour(
        server["node_power_kw"], server["hosting_usd_per_node_month"], 8, 0.10, 730.0))
    assert owned[("h100-sxm", "purchase")] == pytest.approx(purchase_usd_per_gpu_hour(
        server["usd_per_node"], server["life_years"], server["node_power_kw"],
        server["hosting_usd_per_node_month"], 8, 0.10, 730.0))
    assert (tables.prices["source"].str.len() > 0).all()


TWO_CONTRACTS = [
    {"gpu": "h100-sxm", "pricing_type": "owned", "count": 8, "provider": "own data hall"},
    {"gpu": "h100-sxm", "pricing_type": "owned", "count": 4, "provider": "colo",
     "usd_per_month": 9000},
    {"gpu": "l40s", "pricing_type": "committed", "count": 4, "provider": "coreweave",
     "end_month": 9, "usd_per_month": 2500},
    {"gpu": "l40s", "pricing_type": "committed", "count": 2, "provider": "lambda",
     "end_month": 6, "usd_per_month": 1000}]


def test_one_gpu_type_held_at_two_costs_is_one_price_row_at_their_weighted_mean(catalogs):
    scenario = validate_scenario(_with_current(TWO_CONTRACTS), source="test")
    tables = replan_tables(scenario, catalogs, ["h100-sxm", "l40s"])
    assert not tables.prices.duplicated(["gpu", "pricing_type"]).any()
    prices = tables.prices.set_index(["gpu", "pricing_type"])
    server = catalogs.ownership.set_index("gpu").loc["h100-sxm"]
    hall = owned_usd_per_gpu_hour(server["node_power_kw"], server["hosting_usd_per_node_month"],
                                  8, 0.10, 730.0)
    mean = (8 * hall + 9000 / 730.0) / 12
    owned = prices.loc[("h100-sxm", "owned")]
    assert owned["usd_per_gpu_hour"] == pytest.approx(mean)
    assert owned["provider"] == "own data hall; colo"
    assert owned["source"].startswith("GPU-weighted mean of 8 GPUs at $")
    assert "4 GPUs at $3.082/GPU-hour (fleet.current[1].usd_per_month)" in owned["source"]
    assert prices.loc[("l40s", "committed"), "provider"] == "coreweave; lambda"
    offers = tables.offers.set_index(["gpu", "pricing_type"])["usd_per_gpu_hour"]
    assert offers[("h100-sxm", "owned")] == pytest.approx(mean)


@pytest.mark.slow
def test_a_plan_holding_one_gpu_type_at_two_costs_prints_and_its_workbook_is_live(catalogs, capsys):
    scenario = validate_scenario(_with_current(TWO_CONTRACTS), source="test")
    plan = scenario_planning.plan_scenario(scenario, catalogs, what_if=False)
    print_plan(plan)  # it once failed on the two price rows of one (gpu, pricing_type)
    printed, _ = capsys.readouterr()
    owned = plan.fleet[plan.fleet["pricing_type"] == "owned"]
    price = plan.prices.set_index(["gpu", "pricing_type"]).loc[("h100-sxm", "owned")]
    assert not owned.empty and owned["usd_per_gpu_hour"].to_numpy() == pytest.approx(
        price["usd_per_gpu_hour"])
    assert re.search(r"owned\s*│[^\n]*│\s*1\.34\s*│\s*scenario\s*│", printed)
    fleet_cells = [m for m in build_plan_book(plan, catalogs=catalogs).mismatches
                   if m.startswith("Fleet!")]
    assert fleet_cells == []  # the workbook's owned price is the plan's, so its formulas agree


def test_a_current_fleet_csv_gives_the_scenarios_rows(tmp_path):
    path = tmp_path / "fleet.csv"
    path.write_text(CSV, encoding="utf-8")
    rows = read_current_csv(path)
    scenario = load_scenario(EXAMPLE)
    assert [(r["gpu"], r["count"], r["end_month"]) for r in rows] == [
        ("h100-sxm", 4, 4), ("l40s", 4, 9), ("h100-sxm", 8, None)]
    own = [r.model_dump(mode="json") for r in scenario.fleet.current]
    assert [r["count"] for r in own] == [r["count"] for r in rows]


@pytest.mark.parametrize(("text", "message"), [
    ("gpu,pricing_type,count,colour\nl40s,owned,4,red\n",
     r"unknown column 'colour'"),
    ("gpu,pricing_type,count\nl40s,rented,4\n",
     r"line 2: pricing_type: must be 'committed' or 'owned', got 'rented'$"),
    ("gpu,pricing_type,count\nl40s,owned,-4\n", r"line 2: count: must be > 0, got '-4'$"),
    ("gpu,pricing_type,count\nl40s,owned,True\n",
     r"line 2: count: must be a whole number, got 'True'$"),
    ("gpu,pricing_type,count,model\nl40s,owned,4,llama-3.1-8b\n",
     r"line 2: give both model and tp to name the configuration the GPUs serve$"),
    ("gpu,pricing_type,count,end_date\nl40s,committed,4,2027-13-01\n",
     r"line 2: end_date: must be a date \(YYYY-MM-DD\), got '2027-13-01'$"),
    ("gpu,pricing_type,count,end_month\nl40s,committed,4,soon\n", r"line 2: end_month"),
    ("gpu,pricing_type,count\nl40s,owned,inf\n", r"line 2: count"),
    ("gpu,pricing_type,count\n=cmd(),owned,4\n", None),
    ("", r"empty"),
])
def test_hostile_current_fleet_csvs_are_one_line_errors(tmp_path, text, message):
    path = tmp_path / "fleet.csv"
    path.write_text(text, encoding="utf-8")
    if message is None:  # a formula-like name is only a name: refused as an unknown GPU later
        assert read_current_csv(path)[0]["gpu"] == "=cmd()"
        return
    with pytest.raises(ScenarioError, match=message):
        read_current_csv(path)


def test_a_binary_current_fleet_file_is_refused(tmp_path):
    path = tmp_path / "fleet.csv"
    path.write_bytes(b"gpu,pricing_type\x00,count\n")
    with pytest.raises(ScenarioError, match="binary data"):
        read_current_csv(path)


def test_a_bad_current_fleet_csv_exits_2(tmp_path, capsys):
    path = tmp_path / "fleet.csv"
    path.write_text("gpu,pricing_type,count\nl40s,owned,zero\n", encoding="utf-8")
    assert main(["plan", str(EXAMPLE), "--current", str(path), "-q"]) == 2
    assert "line 2: count" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "message"), [
    ("gpu,pricing_type,count\nh100-sxm,owned,4\nh10,owned,2\n",
     r"fleet.csv: line 3: gpu: unknown gpu 'h10'; did you mean"),
    ("gpu,pricing_type,count\na10g,owned,1\n", r"fleet.csv: line 2: gpu: unknown fleet GPU 'a10g'"),
    ("gpu,pricing_type,count,model,tp\nl40s,owned,4,llama-3.1-8,1\n",
     r"fleet.csv: line 2: model: unknown model 'llama-3.1-8'; did you mean 'llama-3.1-8b'"),
])
def test_checks_needing_the_catalogs_name_the_current_csvs_line(tmp_path, capsys, text, message):
    path = tmp_path / "fleet.csv"
    path.write_text(text, encoding="utf-8")
    assert main(["plan", str(EXAMPLE), "--current", str(path), "-q", "--no-what-if"]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "fleet.current[" not in err and len(err.splitlines()) == 1


def _with_current(rows: list[dict], **fleet) -> dict:
    data = load_scenario(EXAMPLE).model_dump(mode="json")
    data["fleet"]["current"] = rows
    data["fleet"].update(fleet)
    return data


@pytest.mark.parametrize(("rows", "fleet", "message"), [
    ([{"gpu": "a10g", "pricing_type": "owned", "count": 1, "usd_per_month": 10}], {},
     r"fleet.current\[0\].gpu: unknown fleet GPU 'a10g'"),
    ([{"gpu": "l40s", "pricing_type": "committed", "count": 1, "end_date": "2027-05-01"}],
     {"start_date": None}, r"fleet.current\[0\].end_date: needs fleet.start_date"),
    ([{"gpu": "l40s", "pricing_type": "owned", "count": 4}], {},
     r"fleet.current\[0\]: no ownership catalog row for l40s; give usd_per_month"),
    ([{"gpu": "l40s", "pricing_type": "committed", "count": 4, "model": "llama-3.1-8bb",
       "tp": 1}], {}, r"fleet.current\[0\].model: .*did you mean 'llama-3.1-8b'"),
])
def test_bad_current_fleet_rows_name_the_field(catalogs, rows, fleet, message):
    scenario = validate_scenario(_with_current(rows, **fleet), source="test")
    with pytest.raises(ScenarioError, match=message):
        prepare(scenario, catalogs)


@pytest.mark.slow
def test_demand_scenarios_replan_todays_fleet_scenario_by_scenario(tmp_path, capsys):
    data = load_scenario(EXAMPLE).model_dump(mode="json")
    for workload in data["workloads"]:
        workload["demand_quantiles"] = {"p10": 0.7, "p50": 1.0, "p90": 1.4}
    data["fleet"]["horizon_months"] = 6
    path, out = tmp_path / "replan.yaml", tmp_path / "out.xlsx"
    path.write_text(json.dumps(data))  # JSON is YAML
    code = main(["plan", str(path), "-o", str(out), "--no-what-if"])
    printed, _ = capsys.readouterr()
    assert code == 0, printed
    assert "Changes from today's fleet (GPUs, in each demand scenario)" in printed
    assert "stay the course (keep today's fleet, rent on demand the rest)" in printed
    assert "over the horizon (expected over the demand scenarios)" in printed
    assert "Commitments under uncertain demand" in printed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        sheet = openpyxl.load_workbook(out)["Changes"]
    header = next(row for row in range(1, 40) if sheet.cell(row, 1).value == "Scenario")
    assert [sheet.cell(header, c).value for c in range(2, 8)] == [
        "Month", "Bought (GPUs)", "Released (GPUs)", "Migrated (GPUs)", "Kept (GPUs)",
        "Changes (GPUs)"]
    first = header + 1
    assert sheet.cell(first, 7).value == f"=C{first}+D{first}+E{first}"
    scenarios = {sheet.cell(row, 1).value for row in range(first, first + 18)}
    assert scenarios == {"p10", "p50", "p90"}  # 6 months each


@pytest.mark.parametrize(("row", "message"), [
    ({"gpu": "l40s", "pricing_type": "owned", "count": 4, "end_month": 3,
      "end_date": "2027-05-01"}, "give end_month or end_date, not both"),
    ({"gpu": "l40s", "pricing_type": "owned", "count": 4, "model": "llama-3.1-8b"},
     "give both model and tp"),
    ({"gpu": "l40s", "pricing_type": "owned", "count": 0}, "count: must be > 0"),
])
def test_invalid_current_fleet_rows_are_scenario_errors(row, message):
    with pytest.raises(ScenarioError, match=message):
        validate_scenario(_with_current([row]), source="test")


def test_one_more_month_of_lead_time_is_priced_by_a_resolve():
    demand = [3, 4, 4]
    problem = tiny(demand, end=3, committed=1, start=2)
    plan = optimize_problem(problem, EXACT, WhatIfOptions(enabled=True))
    lead = plan.binding_constraints[plan.binding_constraints["family"] == "lead_time"]
    saving = (brute_force(demand, end=3, committed=1, start=2)
              - brute_force(demand, end=3, committed=1, start=1)) / 3
    assert saving > 0
    assert lead["saving_usd_per_month"].tolist() == [pytest.approx(saving)]
    assert "one month sooner" in lead["description"].iloc[0]


def test_the_changes_table_is_a_parquet_table():
    plan = optimize_problem(tiny([2, 4, 1]), EXACT)
    tables = plan_tables(plan)
    assert list(tables["changes"].columns) == ["month", "gpu", "pricing_type", "config",
                                               "gpus_before", "gpus", "added", "removed", "kept"]
    assert not math.isnan(float(tables["changes"]["gpus"].sum()))
    assert isinstance(tables["changes"], pd.DataFrame)


def test_the_changes_of_each_demand_scenario_are_one_parquet_table():
    problem = with_demand_factors(tiny([2, 4, 1]), pd.DataFrame(
        {"scenario": ["lo", "hi"], "probability": [0.5, 0.5], "factor": [0.5, 1.0]}))
    changes = plan_tables(optimize_problem(problem, EXACT))["changes"]
    assert list(changes.columns[:2]) == ["scenario", "month"]
    assert changes.groupby("scenario")["month"].nunique().to_dict() == {"hi": 3, "lo": 3}


def test_the_stay_the_course_comparison_shares_the_calls_time_limit(monkeypatch, catalogs):
    # the plan's solve gets all but FOLLOW_UP_SHARE of the limit; the comparison gets what the
    # plan left, at least that share, so both together stay within the call's limit
    given = {}
    real_optimize, real_stay = scenario_planning.optimize_problem, scenario_planning.stay_the_course

    def optimize(problem, options, *arguments, **keywords):
        given["plan"], given["prepared"] = options.time_limit_s, time.perf_counter() - started
        return real_optimize(problem, options, *arguments, **keywords)

    def stay(problem, plan, options):
        given["stay"] = options.time_limit_s
        return real_stay(problem, plan, options)

    monkeypatch.setattr(scenario_planning, "optimize_problem", optimize)
    monkeypatch.setattr(scenario_planning, "stay_the_course", stay)
    scenario = load_scenario(EXAMPLE)
    scenario = scenario.model_copy(update={"solver": scenario.solver.model_copy(
        update={"time_limit_s": 40.0})})
    started = time.perf_counter()
    plan = scenario_planning.plan_scenario(scenario, catalogs, what_if=False)
    elapsed = time.perf_counter() - started
    assert plan.assumptions["stay_the_course"]["status"] == "optimal"
    share = scenario_planning.FOLLOW_UP_SHARE  # of what preparing the scenario left
    assert (40.0 - given["prepared"]) * (1 - share) <= given["plan"] <= 40.0 * (1 - share)
    assert 40.0 * scenario_planning.FOLLOW_UP_SHARE <= given["stay"] <= 40.0 - elapsed / 2


@pytest.mark.slow
def test_commitments_and_stay_the_course_split_what_the_plan_leaves(monkeypatch, catalogs):
    # with demand scenarios on today's fleet both follow-ups run: each gets half of what the
    # call has left when it starts, and at least half of FOLLOW_UP_SHARE
    given = {}
    real_commit, real_stay = scenario_planning.add_commitments, scenario_planning.stay_the_course

    def commit(plan, problem, options):
        given["commitments"] = (options.time_limit_s, time.perf_counter() - started)
        return real_commit(plan, problem, options)

    def stay(problem, plan, options):
        given["stay"] = (options.time_limit_s, time.perf_counter() - started)
        return real_stay(problem, plan, options)

    monkeypatch.setattr(scenario_planning, "add_commitments", commit)
    monkeypatch.setattr(scenario_planning, "stay_the_course", stay)
    data = load_scenario(EXAMPLE).model_dump(mode="json")
    data["workloads"][0]["demand_quantiles"] = {"p10": 0.7, "p50": 1.0, "p90": 1.4}
    data["fleet"]["horizon_months"] = 4
    data["solver"]["time_limit_s"] = 40.0
    scenario = validate_scenario(data, source="test")
    started = time.perf_counter()
    plan = scenario_planning.plan_scenario(scenario, catalogs, what_if=False)
    least = 40.0 * scenario_planning.FOLLOW_UP_SHARE / 2
    (commit_s, commit_at), (stay_s, stay_at) = given["commitments"], given["stay"]
    assert least <= commit_s <= max((40.0 - commit_at) / 2, least) + 0.01
    assert least <= stay_s <= max(40.0 - stay_at, least) + 0.01
    assert not plan.commitments.empty and plan.assumptions["stay_the_course"]


@pytest.mark.parametrize(("status", "warned"), [("time_limit", True), ("optimal", False)])
def test_a_stay_the_course_cost_cut_short_says_the_saving_may_be_overstated(
        monkeypatch, catalogs, capsys, tmp_path, status, warned):
    real = scenario_planning.stay_the_course
    monkeypatch.setattr(scenario_planning, "stay_the_course",
                        lambda *a: {**real(*a), "status": status})
    monkeypatch.setattr(fleetplan.cli.plan, "plan_scenario", lambda scenario, what_if=None, **clock:
                        scenario_planning.plan_scenario(scenario, catalogs, what_if=False))
    assert main(["plan", str(EXAMPLE), "-o", str(tmp_path / "plan.json"), "--no-what-if"]) == 0
    printed, _ = capsys.readouterr()
    assert ("not proven the least: the saving may be overstated" in printed) is warned


@pytest.mark.parametrize(("status", "printed_line"), [
    (UNSERVABLE, f"stay the course: not possible ({UNSERVABLE})"),
    (UNPRICED, f"stay the course: not priced ({UNPRICED}; raise solver.time_limit_s)")])
def test_a_stay_the_course_without_a_cost_prints_why(monkeypatch, catalogs, capsys, tmp_path,
                                                      status, printed_line):
    real = scenario_planning.stay_the_course
    monkeypatch.setattr(scenario_planning, "stay_the_course", lambda *a: {
        **real(*a), "status": status, "stay_usd_total": math.nan})
    monkeypatch.setattr(fleetplan.cli.plan, "plan_scenario", lambda scenario, what_if=None, **clock:
                        scenario_planning.plan_scenario(scenario, catalogs, what_if=False))
    assert main(["plan", str(EXAMPLE), "-o", str(tmp_path / "plan.json"), "--no-what-if"]) == 0
    assert printed_line in capsys.readouterr().out
