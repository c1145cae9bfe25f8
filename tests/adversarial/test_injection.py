"""Hostile text (formulas, control characters) in every output: it stays text everywhere.

User text reaches outputs from scenario names and descriptions, catalog override rows (notes,
source, provider, instance), measurement sources and what-if case names. Every writer sends it
through the one sanitizer, so no CSV field starts like a formula and no workbook cell becomes
one, and a control character never breaks a workbook or forges a line of output.
"""

from __future__ import annotations

import csv
import io
import json

import openpyxl
import pytest

from tests.adversarial.conftest import HOSTILE_TEXT, all_files, formula_cells, tiny_scenario

PRICE_HEADER = "gpu,provider,region,pricing_type,usd_per_gpu_hour,instance,includes_host,source,as_of,notes\n"


def price_override(sandbox, text: str):
    quoted = '"' + text.replace('"', '""') + '"'
    return sandbox.write("prices.csv", PRICE_HEADER + f"l40s,{quoted},eu-1,on_demand,0.9,{quoted},false,{quoted},"
                                                      f"2026-11-01,{quoted}\n")


@pytest.mark.parametrize("text", HOSTILE_TEXT)
@pytest.mark.parametrize("suffix", [".xlsx", ".csv", ".json", ".parquet"])
def test_plan_outputs_keep_a_hostile_scenario_name_as_text(sandbox, text, suffix):
    catalog = price_override(sandbox, text)
    path = sandbox.scenario(edit=lambda data: data.update(name=text, description=text, catalogs=[catalog.name]))
    inputs = set(all_files(sandbox.folder))
    result = sandbox.run("plan", path, "-q", "-o", "plan" + suffix)
    assert result.code == 0, result.err
    outputs = [output for output in all_files(sandbox.folder) if output not in inputs]
    assert outputs
    for output in outputs:
        if output.suffix in (".csv", ".xlsx"):
            assert formula_cells(output) == [], output
    if suffix == ".xlsx":
        book = openpyxl.load_workbook(sandbox.path("plan.xlsx"))  # opens: properties are valid XML
        assert "\x0b" not in (book.properties.title or "")


@pytest.mark.parametrize("text", HOSTILE_TEXT)
@pytest.mark.parametrize("suffix", [".xlsx", ".csv", ".json"])
def test_compare_outputs_keep_hostile_override_text_as_text(sandbox, text, suffix):
    catalog = price_override(sandbox, text)
    result = sandbox.run("compare", "--model", "llama-3.1-8b", "--gpus", "l40s", "--demand-req-s", "2",
                         "--catalog", catalog, "-o", "compare" + suffix)
    assert result.code == 0, result.err
    if suffix != ".json":
        assert formula_cells(sandbox.path("compare" + suffix)) == []


@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_catalog_show_csv_keeps_override_text_inert(sandbox, text):
    catalog = price_override(sandbox, text)
    result = sandbox.run("catalog", "show", "prices", "--format", "csv", "--catalog", catalog)
    assert result.code == 0, result.err
    fields = [field for row in csv.reader(io.StringIO(result.out)) for field in row]
    assert not [f for f in fields if f.startswith(("=", "+", "@", "\t", "\r")) or f.startswith("-2+")]


@pytest.mark.parametrize("text", HOSTILE_TEXT)
@pytest.mark.parametrize("suffix", [".csv", ".xlsx"])
def test_validation_report_keeps_a_hostile_source_as_text(sandbox, text, suffix):
    quoted = '"' + text.replace('"', '""') + '"'
    measured = sandbox.write("measured.csv", "source,gpu,tp,model,precision_weights,input_len,output_len,"
                                             "scenario,metric,value\n"
                                             f"{quoted},H100 SXM,1,Llama-3.1-8B,FP8,128,128,offline,"
                                             "output_tok_s,20000\n")
    result = sandbox.run("validate", measured, "-o", "report" + suffix)
    assert result.code == 0, result.err
    assert formula_cells(sandbox.path("report" + suffix)) == []


@pytest.mark.parametrize("suffix", [".csv", ".xlsx"])
def test_whatif_outputs_keep_hostile_case_names_as_text(sandbox, suffix):
    base = sandbox.scenario("base.yaml")
    cases = "\n".join(f"  - name: {json.dumps(text)}\n    demand_multiplier: 1.0" for text in HOSTILE_TEXT)
    grid = sandbox.write("grid.yaml", f"base: {base.name}\ncases:\n{cases}\n")
    result = sandbox.run("whatif", grid, "-o", "grid" + suffix, "--workers", "1", "--no-base-plan")
    assert result.code == 0, result.err
    assert formula_cells(sandbox.path("grid" + suffix)) == []


def test_a_newline_in_an_id_cannot_forge_a_second_error_line(sandbox):
    sandbox.fails(["estimate", "--gpu", "h100\nerror: all good", "--model", "llama-3.1-8b", "--batch", "1"],
                  2, r"unknown gpu 'h100\\nerror: all good'")


def test_a_vertical_tab_in_the_scenario_name_still_opens(sandbox):
    path = sandbox.scenario(edit=lambda data: data.update(name="fleet\x0bplan"))
    assert sandbox.run("plan", path, "-q", "-o", "plan.xlsx").code == 0
    book = openpyxl.load_workbook(sandbox.path("plan.xlsx"))
    assert book.properties.title is not None and "\x0b" not in book.properties.title


def test_hostile_sheet_and_chart_titles_from_whatif_axes(sandbox):
    data = tiny_scenario()
    base = sandbox.scenario("base.yaml")
    grid = sandbox.write("grid.yaml", f"base: {base.name}\naxes:\n  pricing:\n    '=evil()': [on_demand]\n"
                                      "    '[x]:*?/\\\\': [on_demand]\n")
    result = sandbox.run("whatif", grid, "-o", "grid.xlsx", "--workers", "1", "--no-base-plan")
    assert result.code == 0, result.err
    book = openpyxl.load_workbook(sandbox.path("grid.xlsx"))
    assert all(len(name) <= 31 for name in book.sheetnames)
    assert formula_cells(sandbox.path("grid.xlsx")) == []
    assert data  # the base scenario is untouched
