"""Hosted-API tokens and the fixed cost per configuration as live workbook formulas: the
working tables reproduce the plan's figures, and an edited API price or fixed cost moves every
total by exactly what it should once LibreOffice recalculates."""

from __future__ import annotations

import copy
import datetime as dt

import openpyxl
import pytest

from fleetplan.exports.focus import focus_table
from fleetplan.exports.plan_costs_beyond_gpus import (
    SPARE,
    api_token_table,
    config_month_table,
)
from fleetplan.exports.plan_workbook import build_plan_book
from fleetplan.exports.xlsx_live import LiveColumn, write_live_table
from fleetplan.exports.xlsx_package import Book
from fleetplan.optimizer.chargeback import chargeback_table
from tests.exports.samples import assert_recalculation_matches, cell_values, make_plan

API = {"name": "hosted-8b", "provider": "Example", "model": "llama-3.1-8b",
       "usd_per_1m_input_tokens": 0.05, "usd_per_1m_output_tokens": 0.08,
       "max_requests_per_min": 300, "ttft_ms": 300, "tpot_ms": 20, "source": "price list",
       "as_of": "2026-11-22"}
#: Two workloads on two configurations for three months at $500 per configuration-month, each
#: sending 5 requests/s (the API's rate limit, shared) to a cheap hosted API.
SCENARIO = {
    "name": "apis and fixed costs",
    "workloads": [{"name": "chat", "model": "llama-3.1-8b", "requests_per_s": 20,
                   "input_tokens": 1000, "output_tokens": 200, "tpot_slo_ms": 50},
                  {"name": "batch", "model": "llama-3.1-8b", "requests_per_s": 4,
                   "input_tokens": 2000, "output_tokens": 400}],
    "fleet": {"gpus": ["l40s", "h100-sxm"], "pricing": ["on_demand"], "tp": [1],
              "horizon_months": 3, "config_fixed_usd_per_month": 500, "apis": [API]},
}


@pytest.fixture(scope="module")
def plan():
    made = make_plan(SCENARIO)
    assert made.status == "optimal"
    assert set(made.costs_by_pricing["pricing_type"]) >= {"api", "config_fixed"}
    return made


def test_the_api_tokens_are_the_plans_and_price_to_its_api_cost(plan):
    tokens = api_token_table(plan)
    assert sorted(tokens["month"].unique()) == [0, 1, 2]
    by_workload = tokens.groupby("workload")[["input_tokens", "output_tokens"]].sum()
    usage = plan.api_usage.groupby("workload")["tokens"].sum()
    total = by_workload["input_tokens"] + by_workload["output_tokens"]
    assert total.to_dict() == pytest.approx(usage.to_dict(), rel=1e-12)
    # chat's requests are 1000 + 200 tokens, batch's 2000 + 400: the split follows
    assert (by_workload["input_tokens"] / total).to_dict() == pytest.approx(
        {"batch": 2000 / 2400, "chat": 1000 / 1200})
    usd = (tokens["input_tokens"] * 0.05 + tokens["output_tokens"] * 0.08).sum() / 1e6
    api = plan.costs_by_pricing.set_index("pricing_type").loc["api", "usd_total"]
    assert usd == pytest.approx(api, rel=1e-12)


def test_the_configuration_months_split_by_load_and_add_up_to_the_deployed_months(plan):
    months = config_month_table(plan)
    deployed = plan.config_fixed_costs
    assert months["config_months"].sum() == pytest.approx(3.0 * len(deployed))
    per_config = months.groupby(["config", "month"])["config_months"].sum()
    assert per_config.to_numpy() == pytest.approx(1.0)
    assert SPARE not in set(months["workload"])  # every configuration carries load each month
    fixed = plan.costs_by_pricing.set_index("pricing_type").loc["config_fixed", "usd_total"]
    assert months["config_months"].sum() * 500.0 == pytest.approx(fixed)


def test_a_configuration_month_without_load_is_spare(plan):
    idle = copy.deepcopy(plan)
    idle.routing = idle.routing.iloc[0:0]
    months = config_month_table(idle)
    assert set(months["workload"]) == {SPARE}
    assert months["config_months"].sum() == pytest.approx(3.0 * len(plan.config_fixed_costs))


def test_every_cost_beyond_gpus_is_a_formula_that_agrees_with_the_plan(plan):
    book = build_plan_book(plan)
    assert book.mismatches == []
    names = set(book.wb.defined_names)
    assert {"config_fixed_usd_per_month", "price_hosted_8b_input", "price_hosted_8b_output",
            "api_usd", "api_month", "api_workload", "fixed_usd", "fixed_month",
            "fixed_workload", "gpu_usd_per_month", "total_usd_per_month"} <= names
    costs = book.wb["Costs"]
    rows = {row[0].value: row for row in costs.iter_rows() if row[0].value}
    assert rows["api"][2].value == "=SUM(api_usd)/horizon_months"
    assert rows["config_fixed"][2].value == "=SUM(fixed_usd)/horizon_months"
    assert str(rows["chat"][1].value).endswith(
        f"+(SUMPRODUCT((api_workload=A{rows['chat'][1].row})*api_usd)"
        f"+SUMPRODUCT((fixed_workload=A{rows['chat'][1].row})*fixed_usd))/horizon_months")


def test_a_plan_written_before_routing_kept_request_lengths_takes_them_from_its_candidates(plan):
    old = copy.deepcopy(plan)
    old.api_routing = old.api_routing.drop(columns=["input_len", "output_len"])
    assert api_token_table(old).equals(api_token_table(plan))
    old.candidates = old.candidates.iloc[0:0]
    assert api_token_table(old).empty
    book = build_plan_book(old)  # no lengths at all: the API's cost stays the plan's number
    costs = {row[0].value: row for row in book.wb["Costs"].iter_rows() if row[0].value}
    api = plan.costs_by_pricing.set_index("pricing_type").loc["api"]
    assert costs["api"][2].value == pytest.approx(api["usd_per_month"])


def _named_cell(wb, name: str) -> tuple[str, str]:
    sheet, coordinate = next(wb.defined_names[name].destinations)
    return sheet, coordinate.replace("$", "")


@pytest.mark.libreoffice
def test_editing_the_fixed_cost_and_an_api_price_moves_the_totals_exactly(
        tmp_path, libreoffice, plan):
    path = build_plan_book(plan).save(tmp_path / "base.xlsx")
    assert assert_recalculation_matches(path, libreoffice.recalculate(path)) > 0
    wb = openpyxl.load_workbook(path)
    fixed_cell = _named_cell(wb, "config_fixed_usd_per_month")
    price_cell = _named_cell(wb, "price_hosted_8b_input")
    wb[fixed_cell[0]][fixed_cell[1]].value += 100.0
    wb[price_cell[0]][price_cell[1]].value += 0.01
    wb.save(tmp_path / "edited.xlsx")
    before = cell_values(libreoffice.recalculate(path))
    after = cell_values(libreoffice.recalculate(tmp_path / "edited.xlsx"))

    months, tokens = config_month_table(plan), api_token_table(plan)
    fixed_delta = months.groupby("workload")["config_months"].sum() * 100.0 / 3
    api_delta = tokens.groupby("workload")["input_tokens"].sum() * 0.01 / 1e6 / 3
    total_delta = fixed_delta.sum() + api_delta.sum()
    summary = {row[0].value: row[1].coordinate for row in wb["Summary"].iter_rows(max_col=2)
               if row[0].value}
    key = ("Summary", summary["Total cost per month"])
    assert after[key] - before[key] == pytest.approx(total_delta, rel=1e-9)
    costs = {row[0].value: row[0].row for row in wb["Costs"].iter_rows(max_col=1) if row[0].value}
    for workload in ("chat", "batch"):
        cell = ("Costs", f"B{costs[workload]}")
        expected = fixed_delta[workload] + api_delta[workload]
        assert after[cell] - before[cell] == pytest.approx(expected, rel=1e-9)
    for kind, delta in (("api", api_delta.sum()), ("config_fixed", fixed_delta.sum())):
        cell = ("Costs", f"C{costs[kind]}")
        assert after[cell] - before[cell] == pytest.approx(delta, rel=1e-9)


@pytest.mark.parametrize(("scale", "kept"), [(None, True), ([82_000.0], False)])
def test_a_difference_of_totals_agrees_within_the_totals_rounding(scale, kept):
    # scenario 228's idle node GPUs: $6.2281746 by formula against the plan's $6.2281745,
    # both usage less fleet near $82,000 a month, 1.5e-12 of it apart
    book = Book()
    column = LiveColumn("usd_per_month", [6.2281746], lambda i, r: "gpu_usd_per_month-1",
                        [6.2281745], scale=scale)
    write_live_table(book, book.wb.active, 1, [column], "Idle")
    assert bool(book.mismatches) == kept
    assert (book.wb.active["A2"].value == 6.2281745) == kept


def test_every_output_gives_the_plan_the_same_total(tmp_path, plan):
    path = build_plan_book(plan).save(tmp_path / "plan.xlsx")
    summary = openpyxl.load_workbook(path, data_only=True)["Summary"]
    shown = {label: value for label, value in summary.iter_rows(max_col=2, values_only=True)
             if label}
    assert shown["Total over the horizon (3 months)"] == pytest.approx(plan.objective_usd,
                                                                       rel=1e-12)
    assert shown["Total cost per month"] == pytest.approx(plan.usd_per_month, rel=1e-12)
    billed = focus_table(plan, dt.date(2027, 1, 1))["BilledCost"].sum()
    charged = chargeback_table(plan)["usd"].sum()
    assert billed == pytest.approx(round(plan.objective_usd, 2), abs=1e-6)
    assert charged == pytest.approx(round(plan.objective_usd, 2), abs=1e-6)
