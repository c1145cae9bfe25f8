"""The Sources sheet lists every catalog row a workbook used, whole and legible in print: keys
that differ in their last part are written once with braces, a long list goes on over further
rows (a cell taller than a spreadsheet row would hide its end), and the parameters' names sit
in a column wide enough for them."""

from __future__ import annotations

import copy
import math

import openpyxl
import pandas as pd
import pytest

from fleetplan.exports.compare_workbook import write_compare_xlsx
from fleetplan.exports.plan_workbook import build_plan_book
from fleetplan.exports.sweep_workbook import build_sweep_book
from fleetplan.exports.xlsx_sheets import MAX_SOURCE_TEXT, shortened_source
from fleetplan.exports.xlsx_sources import (MAX_KEYS_TEXT, catalog_rows, compact_keys,
                                            engines_looked_up, sources_table)
from tests.exports.samples import compare_table, expanded_keys

COMPARE_PARAMS = {"hours_per_month": 730.0, "usd_per_kwh": 0.1, "pue": 1.4, "power_load": 0.75}


@pytest.fixture(scope="module")
def sources(example_plan, tmp_path_factory):
    path = build_plan_book(example_plan).save(tmp_path_factory.mktemp("plan") / "plan.xlsx")
    return openpyxl.load_workbook(path)["Sources"]


def _table_rows(ws, header: str) -> list[tuple]:
    rows = list(ws.iter_rows(values_only=True))
    start = next(i for i, row in enumerate(rows) if header in row)
    column = rows[start].index(header)
    found = []
    for row in rows[start + 1:]:
        if row[column] in (None, ""):
            break
        found.append(row)
    return found


def test_compact_keys_stand_for_exactly_the_keys_given():
    keys = ["vllm/h100-sxm/gemm/bf16", "vllm/h100-sxm/gemm/fp8", "*/l4/attention/*",
            "h100-sxm/aws/us-east-1/on_demand", "h100-sxm/aws/us-east-1/spot", "l4"]
    compact = compact_keys(keys)
    assert compact == ["vllm/h100-sxm/gemm/{bf16,fp8}", "*/l4/attention/*",
                       "h100-sxm/aws/us-east-1/{on_demand,spot}", "l4"]
    assert expanded_keys(", ".join(compact)) == keys


def test_a_long_list_of_rows_continues_on_further_rows():
    keys = [f"vllm@0.{v}/gpu-{g}/gemm/bf16" for v in range(10) for g in range(30)]
    used = pd.DataFrame({"catalog": "efficiency", "key": keys, "source": "our fit",
                         "as_of": "2026-11-01"})
    table = sources_table(used, {"efficiency": {"sha256": "ab" * 32}})
    assert len(table) > 1 and (table["rows_used"].str.len() <= MAX_KEYS_TEXT).all()
    assert [k for cell in table["rows_used"] for k in expanded_keys(cell)] == keys
    assert (table["source"] == "our fit").all() and (table["sha256"] == "ab" * 32).all()


def test_every_row_fits_a_printed_row_and_names_every_efficiency_row(sources, example_plan):
    rows = _table_rows(sources, "Rows used")
    efficiency = [k for row in rows if row[0] == "efficiency" for k in expanded_keys(row[1])]
    gpus = set(example_plan.fleet["gpu"]) | set(example_plan.candidates["gpu"])
    for gpu in gpus:  # each GPU planned on has its fitted rows listed, none cut off
        assert any(f"/{gpu}/gemm/" in key for key in efficiency), gpu
    assert all(len(str(row[1])) <= MAX_KEYS_TEXT for row in rows)
    heights = [sources.row_dimensions[r].height or 15 for r in range(1, sources.max_row + 1)]
    assert max(heights) < 409


def test_efficiency_rows_listed_are_the_plans_engines_only(sources, example_plan, shipped):
    """The example plan names no engine, so it runs the default, vLLM: TensorRT-LLM's and
    Gaudi's fitted rows played no part."""
    assert example_plan.assumptions["engine"] == "*"
    assert engines_looked_up(shipped, "*") == engines_looked_up(shipped, "vllm") == {"vllm", "*"}
    rows = _table_rows(sources, "Rows used")
    engines = {k.split("/")[0] for row in rows if row[0] == "efficiency"
               for k in expanded_keys(row[1])}
    assert engines == {"vllm", "*"}
    every = catalog_rows(shipped, {"gpu": set(example_plan.fleet["gpu"])})
    assert "tensorrt-llm" in set(every.loc[every["catalog"] == "efficiency", "key"]
                                 .str.split("/").str[0])  # without an engine: all of them


def test_an_engine_these_catalogs_do_not_know_lists_every_engines_rows(shipped):
    ids = {"gpu": {"h100-sxm"}}
    assert catalog_rows(shipped, ids, engine="an-engine-of-other-catalogs").equals(
        catalog_rows(shipped, ids))


def test_assumptions_show_the_plans_efficiency_rows_without_empty_columns(example_plan):
    ws = build_plan_book(example_plan).wb["Assumptions"]
    table = ws.tables["EfficiencyFactors"]
    cells = [[c.value for c in row] for row in ws[table.ref]]
    frame = pd.DataFrame(cells[1:], columns=cells[0])
    assert set(frame["Engine"]) <= {"vllm", "*"} and "vllm" in set(frame["Engine"])
    assert set(frame["GPU"]) <= set(example_plan.fleet["gpu"]) | {"*"}
    values = frame.drop(columns=["Engine", "GPU", "Operator", "Precision", "Fitted on (rows)",
                                 "As of"], errors="ignore")
    assert not values.empty and values.notna().any().all()  # no column left all empty


def test_parameter_names_print_whole(sources):
    rows = _table_rows(sources, "Name")
    names = [row[1] for row in rows]
    assert "scenario.workloads[0].requests_per_s" in names
    width = sources.column_dimensions["B"].width
    assert max(len(name) for name in names) <= width


def _efficiency_engines(ws) -> set[str]:
    rows = _table_rows(ws, "Rows used")
    return {k.split("/")[0] for row in rows if row[0] == "efficiency"
            for k in expanded_keys(row[1])}


def test_a_sweep_lists_the_efficiency_rows_of_its_engine_only(real_sweep, shipped):
    """The sweep ran vLLM's profile; without its engine (a sweep saved by other code) every
    engine's rows of its GPUs are listed."""
    engine = real_sweep.attrs["engine"]
    assert engine == "vllm"
    ws = build_sweep_book(real_sweep, metadata={"engine": engine}, catalogs=shipped).wb["Sources"]
    assert _efficiency_engines(ws) == engines_looked_up(shipped, engine) == {"vllm", "*"}
    every = build_sweep_book(real_sweep, catalogs=shipped).wb["Sources"]
    assert "tensorrt-llm" in _efficiency_engines(every)


def test_a_comparison_lists_the_default_engines_efficiency_rows(tmp_path, shipped):
    table = compare_table(shipped, ("h100-sxm", "b200"))
    path = write_compare_xlsx(table, tmp_path / "compare.xlsx", params=COMPARE_PARAMS,
                              workload={"model": "llama-3.1-70b", "quant": "fp8"}, catalogs=shipped)
    assert _efficiency_engines(openpyxl.load_workbook(path)["Sources"]) == {"vllm", "*"}


LONG_SOURCE = ("ownership catalog (power and hosting): price: " + "a dataset, row 7, " * 12
               + "hosting: a market report " + "x" * 80)


def test_a_long_source_is_cut_at_a_word_and_points_to_sources():
    assert shortened_source("NVIDIA price list") == "NVIDIA price list"
    assert shortened_source(math.nan) is not None and math.isnan(shortened_source(math.nan))
    short = shortened_source(LONG_SOURCE)
    assert short.endswith(" ... (in full on Sources)") and len(short) < MAX_SOURCE_TEXT + 30
    assert LONG_SOURCE.startswith(short.removesuffix(" ... (in full on Sources)"))
    assert LONG_SOURCE[len(short.removesuffix(" ... (in full on Sources)"))] in " ,"  # at a word


def test_a_price_rows_long_source_is_whole_on_sources_and_cut_on_assumptions(example_plan):
    plan = copy.deepcopy(example_plan)
    chosen = plan.prices.index[0]
    gpu, pricing = plan.prices.loc[chosen, ["gpu", "pricing_type"]]
    plan.prices.loc[chosen, "source"] = LONG_SOURCE
    for record in plan.assumptions["prices_used"]:
        if (record["gpu"], record["pricing_type"]) == (gpu, pricing):
            record["source"] = LONG_SOURCE
    book = build_plan_book(plan).wb
    assumptions = [c.value for row in book["Assumptions"].iter_rows() for c in row]
    assert shortened_source(LONG_SOURCE) in assumptions and LONG_SOURCE not in assumptions
    assert LONG_SOURCE in [c.value for row in book["Sources"].iter_rows() for c in row]
