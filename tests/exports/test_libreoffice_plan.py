"""Plan workbooks recalculated by LibreOffice: values, errors, and a price change."""

from __future__ import annotations

import copy
import math

import openpyxl
import pytest

import fleetplan.optimizer.optimization as optimization
from fleetplan.exports import write_plan
from fleetplan.exports.labels import header_of
from fleetplan.exports.plan_quantities import usage_table
from fleetplan.exports.plan_workbook import build_plan_book
from tests.exports.samples import (
    STRESS_SCENARIO,
    assert_recalculation_matches,
    cell_values,
    formula_cells,
    make_plan,
)

pytestmark = pytest.mark.libreoffice


@pytest.mark.parametrize("plan_fixture", ["example_plan", "stress_plan", "infeasible_plan",
                                          "disaggregated_plan"])
def test_recalculated_values_equal_python(tmp_path, libreoffice, request, plan_fixture):
    path = write_plan(request.getfixturevalue(plan_fixture), tmp_path / "plan.xlsx")
    compared = assert_recalculation_matches(path, libreoffice.recalculate(path))
    assert compared == len(formula_cells(path)) > 0


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9)
    return a == b


def _header_cells(ws, header: str, count: int) -> list[str]:
    for row in ws.iter_rows():
        for cell in row:
            if cell.value == header:
                return [cell.offset(row=i + 1).coordinate for i in range(count)]
    raise AssertionError(header)


def test_raising_one_gpu_price_raises_exactly_its_costs(tmp_path, libreoffice, example_plan):
    delta = 1.0
    gpu, pricing = "h100-sxm", "on_demand"
    path = write_plan(example_plan, tmp_path / "base.xlsx")
    wb = openpyxl.load_workbook(path)
    sheet, coordinate = next(wb.defined_names[f"price_{gpu.replace('-', '_')}_{pricing}"]
                             .destinations)
    price_cell = (sheet, coordinate.replace("$", ""))
    wb[sheet][price_cell[1]].value += delta
    wb.save(tmp_path / "edited.xlsx")
    before = cell_values(libreoffice.recalculate(path))
    after = cell_values(libreoffice.recalculate(tmp_path / "edited.xlsx"))
    changed = {key for key in before if not _same(before[key], after.get(key))}
    assert price_cell in changed

    fleet = example_plan.fleet.reset_index(drop=True)
    hours = example_plan.assumptions["hours_per_month"]
    months = example_plan.assumptions["horizon_months"]
    hit = (fleet["gpu"] == gpu) & (fleet["pricing_type"] == pricing)
    row_delta = (fleet["replicas_mean"] * fleet["tp"] * delta * hours).where(hit, 0.0)
    assert hit.sum() >= 1 and (~hit).sum() >= 1
    ws = wb["Fleet"]
    for name, scale in ((header_of("usd_per_gpu_hour"), None),
                        (header_of("usd_per_month"), 1.0), (header_of("usd_total"), months)):
        for index, coordinate in enumerate(_header_cells(ws, name, len(fleet))):
            key = ("Fleet", coordinate)
            expected = delta if scale is None and hit[index] else (
                0.0 if scale is None else row_delta[index] * scale)
            assert after[key] - before[key] == pytest.approx(expected, rel=1e-9, abs=1e-9)
            assert (key in changed) == bool(hit[index])

    monthly = row_delta.sum()  # the example buys no idle node GPUs
    summary = {row[0].value: row[1].coordinate for row in wb["Summary"].iter_rows(max_col=2)
               if row[0].value}
    for label, factor in (("Total cost per month", 1), ("Total cost per year", 12),
                          (f"Total over the horizon ({months:g} months)", months)):
        key = ("Summary", summary[label])
        assert after[key] - before[key] == pytest.approx(monthly * factor, rel=1e-9)

    by_model = row_delta.groupby(fleet["model"]).sum()
    workloads = example_plan.workloads.reset_index(drop=True)
    for index, coordinate in enumerate(_header_cells(wb["Workloads"], header_of("usd_per_month"),
                                                     len(workloads))):
        key = ("Workloads", coordinate)
        expected = by_model.get(workloads.loc[index, "model"], 0.0)
        assert after[key] - before[key] == pytest.approx(expected, rel=1e-9, abs=1e-9)

    other_gpus = {("Costs", c.offset(column=2).coordinate) for c in wb["Costs"]["A"]
                  if c.value in set(fleet["gpu"]) - {gpu} and c.offset(column=2).data_type == "f"}
    assert other_gpus and not other_gpus & changed
    assert {sheet for sheet, _ in changed} <= {"Assumptions", "Fleet", "Costs", "Workloads",
                                               "Summary"}
    formulas = set(formula_cells(path))
    assert changed - {price_cell} <= formulas  # only formulas move; decisions stay put


def test_renders_one_page_per_sheet(tmp_path, libreoffice, example_plan):
    import re

    path = write_plan(example_plan, tmp_path / "plan.xlsx")
    pdf = libreoffice.pdf(path).read_bytes()
    pages = re.findall(rb"/Type\s*/Page[^s]", pdf)
    assert len(pages) == len(openpyxl.load_workbook(path).sheetnames) == 9


#: A 1-year term bought after a 3-month lead time on a 9-month horizon: 6 months covered, 12
#: paid, so each GPU-hour of it costs twice its listed price.
TERM_SCENARIO = {
    "name": "a term past the horizon",
    "workloads": [{"name": "chat", "model": "llama-3.1-8b", "requests_per_s": 30,
                   "input_tokens": 1000, "output_tokens": 200, "tpot_slo_ms": 60}],
    "fleet": {"gpus": [{"id": "l40s", "usd_per_gpu_hour": {"reserved_1y": 0.3},
                        "lead_time_months": 3, "lead_time_pricing": ["reserved_1y"]}],
              "pricing": ["on_demand", "reserved_1y"], "tp": [1], "horizon_months": 9},
}


def test_a_term_charged_past_the_horizon_is_live_and_held_from_its_start(tmp_path, libreoffice):
    plan = make_plan(TERM_SCENARIO)
    prices = plan.prices.set_index(["gpu", "pricing_type"])
    assert prices.loc[("l40s", "reserved_1y"), "term_charge_factor"] == 2.0
    assert prices.loc[("l40s", "reserved_1y"), "start_month"] == 3
    reserved = plan.nodes.set_index(["gpu", "pricing_type"]).loc[("l40s", "reserved_1y")]
    assert reserved["gpus_bought_peak"] > 0
    book = build_plan_book(plan)
    assert book.mismatches == []  # the fleet's prices and the months' costs are formulas
    path = book.save(tmp_path / "term.xlsx")
    assert "price_l40s_reserved_1y_term" in openpyxl.load_workbook(path).defined_names
    usage = usage_table(plan)
    held = usage[usage["pricing_type"] == "reserved_1y"].set_index("month")["gpus_mean"]
    assert held.loc[:2].sum() == 0  # nothing is held before the lead time ends
    assert held.loc[3:].to_numpy() == pytest.approx(reserved["gpus_bought_peak"])
    compared = assert_recalculation_matches(path, libreoffice.recalculate(path))
    assert compared == len(formula_cells(path)) > 0


def test_a_fleet_row_that_keeps_the_plans_number_counts_in_the_stored_total(
        tmp_path, libreoffice, example_plan):
    plan = copy.deepcopy(example_plan)
    first = plan.fleet.index[0]  # a price the Assumptions sheet does not give
    plan.fleet.loc[first, ["usd_per_gpu_hour", "usd_per_month", "usd_total"]] *= 2
    book = build_plan_book(plan)
    assert any(m.startswith("Fleet!") for m in book.mismatches)
    path = book.save(tmp_path / "kept.xlsx")
    compared = assert_recalculation_matches(path, libreoffice.recalculate(path))
    assert compared == len(formula_cells(path)) > 0


def _keeping_a_spare_node(solve):
    """``solve_fleet`` whose plan keeps one node more than its replicas need in one period of
    the last month (hours of identical demand solved as one), as a solve stopped short of the
    optimum may."""
    def solve_with_spare(model, options, deadline=None, **kwargs):
        outcome = solve(model, options, deadline, **kwargs)
        nodes = model.nodes.assign(value=model.value(model.nodes))
        month = nodes["period"].map(model.problem.periods.set_index("period")["month"])
        flexible = nodes[(nodes["period"] >= 0) & (month == month.max()) & (nodes["value"] > 0)]
        model.values[int(flexible["col"].iloc[0])] += 1.0
        return outcome
    return solve_with_spare


def test_spare_nodes_in_one_hour_cost_that_month_in_live_formulas(tmp_path, libreoffice,
                                                                   monkeypatch, stress_plan):
    # the plan's nodes period by period (nodes_by_period) price the spare node in the month that
    # holds it; a plan without them spreads its node-hours over the months by use, so the
    # cost-by-month cells would keep the plan's numbers
    monkeypatch.setattr(optimization, "solve_fleet", _keeping_a_spare_node(
        optimization.solve_fleet))
    plan = make_plan(STRESS_SCENARIO)
    keys = ["period", "gpu", "pricing_type"]
    more = plan.nodes_by_period.set_index(keys)["nodes"].sub(
        stress_plan.nodes_by_period.set_index(keys)["nodes"], fill_value=0.0)
    more = more[more != 0]  # one node more in the hours of the last month one solve stands for
    months = plan.periods.set_index("period")["month"]
    assert len(more) and set(more) == {1.0}
    assert set(months.loc[more.index.get_level_values("period")]) == {2}
    book = build_plan_book(plan)
    assert book.mismatches == []
    path = book.save(tmp_path / "spare.xlsx")
    compared = assert_recalculation_matches(path, libreoffice.recalculate(path))
    assert compared == len(formula_cells(path)) > 0
    older = copy.deepcopy(plan)
    older.nodes_by_period = older.nodes_by_period.iloc[0:0]
    assert any(m.startswith("Costs!") for m in build_plan_book(older).mismatches)
