"""Every workbook printed by LibreOffice as a reader prints it: pages per sheet, one-page
Summaries, the page budgets (plan at most 20 pages, compare at most 10), the size the type prints
at, and tables kept whole on a page."""

from __future__ import annotations

import dataclasses

import openpyxl
import pandas as pd
import pytest

from fleetplan.exports import write_plan, write_sweep
from fleetplan.exports.compare_workbook import write_compare_xlsx
from fleetplan.exports.validation_workbook import write_validation
from fleetplan.exports.whatif_workbook import write_grid_xlsx
from fleetplan.exports.xlsx_common import ref_rows
from fleetplan.sweeps import sweep
from fleetplan.sweeps.model_validation import HOLDOUTS, IN_SAMPLE
from tests.exports.conftest import pages_by_sheet, printed_pages, type_height_by_sheet
from tests.exports.samples import compare_table, validation_rows, whatif_results

pytestmark = pytest.mark.libreoffice
SWEEP_COLUMNS_SHOWN = ("gpu", "model", "quant", "tp", "context_len", "input_len", "output_len", "batch", "valid",
                       "fits", "tpot_ms", "ttft_ms", "decode_tok_s_per_gpu", "output_tok_s", "req_s", "usd_per_hour",
                       "usd_per_m_output_tokens", "usd_per_m_total_tokens", "usd_per_k_requests")


def _printed(libreoffice, path):
    pages = pages_by_sheet(libreoffice.print(path))
    assert set(pages) == set(openpyxl.load_workbook(path, read_only=True).sheetnames)  # every sheet prints
    return pages


def test_plan_prints_on_at_most_20_pages_with_a_one_page_summary(tmp_path, libreoffice,
                                                                 example_plan):
    pages = _printed(libreoffice, write_plan(example_plan, tmp_path / "plan.xlsx"))
    assert pages["Summary"] == 1 and pages["Read me"] == 1
    assert pages["Fleet"] == 2  # its 16 columns over two pages, the configuration on each
    assert pages["Candidates"] == 3  # 25 columns; the workload, bucket and configuration on each
    assert "Chargeback" not in pages  # no workload names a team
    assert sum(pages.values()) <= 20, pages


def test_every_plan_sheet_prints_at_half_its_size_or_more(tmp_path, libreoffice, example_plan):
    """The type of each sheet as printed against the same sheet printed at 100%: before wide
    sheets went over more pages, Fleet printed at 42%, Assumptions at 33% and Candidates at 25%."""
    scales = _printed_sizes(libreoffice, write_plan(example_plan, tmp_path / "plan.xlsx"))
    assert all(scale >= 0.5 for scale in scales.values()), scales


def _printed_sizes(libreoffice, path):
    """Per sheet, its type's height as printed against the same sheet printed at 100%."""
    book = openpyxl.load_workbook(path)
    for ws in book.worksheets:
        ws.sheet_properties.pageSetUpPr.fitToPage = False
        ws.page_setup.scale = 100
    (path.parent / "full").mkdir()
    book.save(path.parent / "full" / path.name)
    printed = type_height_by_sheet(libreoffice.print(path))
    full = type_height_by_sheet(libreoffice.print(path.parent / "full" / path.name))
    scales = {sheet: printed[sheet] / full[sheet] for sheet in printed}
    assert set(scales) == set(book.sheetnames)
    return scales


def test_plan_tables_that_fit_on_a_page_print_whole_on_one(tmp_path, libreoffice, example_plan):
    """Before page breaks kept them whole, the efficiency factors began at the foot of the
    Assumptions' first page and went on, headerless, on the next; so did the parameters on
    Sources, which, now taller than a page, repeat their header on each page instead."""
    path = write_plan(example_plan, tmp_path / "plan.xlsx")
    book = openpyxl.load_workbook(path)
    efficiency = book["Assumptions"].tables["EfficiencyFactors"].ref
    first, last = (int("".join(filter(str.isdigit, end))) for end in efficiency.split(":"))
    engines = [book["Assumptions"].cell(row=r, column=1).value for r in range(first + 1, last + 1)]
    sources = book["Sources"]
    parameters = [sources.cell(row=r, column=2).value for r in range(1, sources.max_row + 1)
                  if str(sources.cell(row=r, column=2).value).startswith("scenario.")]
    pages = printed_pages(libreoffice.print(path))
    titled = [lines for sheet, lines in pages if sheet == "Assumptions"
              and any(line.startswith("Efficiency factors") for line in lines)]
    assert titled  # on the page it starts on (and the pages across): every row, header first
    for lines in titled:
        rows = [line.split()[0] for line in lines if line.split()[0] in ("*", "vllm")]
        assert rows == engines and any(line.lstrip().startswith("Engine") for line in lines)
    sources_pages = [lines for sheet, lines in pages if sheet == "Sources"]
    start = next(i for i, lines in enumerate(sources_pages)
                 if any(line.startswith("Parameters") for line in lines))
    # the last table, taller than a page: its header atop each page it runs on
    running = [lines for lines in sources_pages[start:]
               if any(line.strip().startswith("scenario.") for line in lines)]
    assert len(parameters) > 40 and running
    assert all(any(line.split()[:2] == ["Name", "Value"] for line in lines) for lines in running)
    text = "\n".join("\n".join(lines) for lines in running)
    assert all(name in text for name in parameters)


def test_small_workbooks_print_with_libreoffices_default_settings(
        tmp_path, libreoffice_as_installed, small_sweep, example_plan):
    """Without recalculation on load, LibreOffice 7.4 crashed printing a sheet whose boolean
    cells carried a conditional format (the Sweep's 'Fits memory', the plan's 'Chosen' on
    a small plan): a 10-row sweep did not print at all."""
    sweep = write_sweep(small_sweep.head(10), tmp_path / "sweep.xlsx", tpot_slo_ms=20.0)
    assert set(pages_by_sheet(libreoffice_as_installed.print(sweep))) >= {"Summary", "Sweep"}
    small = dataclasses.replace(example_plan, candidates=example_plan.candidates.head(10))
    plan = write_plan(small, tmp_path / "plan.xlsx")
    assert "Candidates" in pages_by_sheet(libreoffice_as_installed.print(plan))


def test_compare_prints_its_ranking_and_options_on_a_page_each_and_every_sheet_legibly(
        tmp_path, libreoffice, shipped):
    """Each sheet was squeezed onto one page: Sources printed at 21% of its size and
    Assumptions at 44% (the built-in comparison of benchmarks/bench_printing.py), then
    Assumptions at 50%, its rental prices' provider and region in two columns; the prices, its
    last table, repeat their header on each page they run on."""
    path = write_compare_xlsx(compare_table(shipped), tmp_path / "compare.xlsx", catalogs=shipped,
                              params={"hours_per_month": 730.0, "usd_per_kwh": 0.1, "pue": 1.4,
                                      "power_load": 0.75},
                              workload={"model": "llama-3.1-70b", "quant": "fp8"})
    pages = _printed(libreoffice, path)
    assert pages["Summary"] == 1 and pages["Options"] == 1 and sum(pages.values()) <= 10, pages
    scales = _printed_sizes(libreoffice, path)
    assert all(scale >= 0.5 for scale in scales.values()) and scales["Assumptions"] >= 0.55, scales
    priced = [lines for sheet, lines in printed_pages(libreoffice.print(path))
              if sheet == "Assumptions" and any("price_" in line for line in lines)]
    assert len(priced) > 1 and all(any("Name in formulas" in line for line in lines)
                                   for lines in priced)


def test_whatif_prints_with_a_one_page_summary(tmp_path, libreoffice):
    results, axes = whatif_results()
    path = write_grid_xlsx(results, tmp_path / "grid.xlsx", axes=axes, base_fleet=None,
                           metadata={"base": "example"}, base_usd_per_month=30_000.0)
    pages = _printed(libreoffice, path)
    assert pages["Summary"] == 1 and all(pages[f"By {axis}"] == 1 for axis in axes)


def test_validation_prints_with_a_one_page_summary(tmp_path, libreoffice, shipped):
    pages = _printed(libreoffice, write_validation(validation_rows(shipped), tmp_path / "validation.xlsx"))
    assert pages["Summary"] == 1 and pages["Read me"] == 1


def test_validation_rows_print_each_measurement_once_one_page_across(tmp_path, libreoffice,
                                                                     shipped):
    """With its held-out rows the Rows sheet printed every measurement three times, unlabelled,
    over 46 pages (62 pages in all for the shipped measurements)."""
    in_sample = validation_rows(shipped).assign(validation="in sample")
    held_out = in_sample.assign(validation="leave-one-GPU-out")
    path = write_validation(pd.concat([held_out, in_sample], ignore_index=True),
                            tmp_path / "validation.xlsx")
    printed = [lines for sheet, lines in printed_pages(libreoffice.print(path)) if sheet == "Rows"]
    text = "\n".join(line for lines in printed for line in lines)
    assert "leave-one-GPU-out" not in text and text.count("in sample") == len(in_sample)
    assert len(printed) <= -(-len(in_sample) // 40)  # one page across, 40 rows or more a page
    scales = _printed_sizes(libreoffice, path)
    assert scales["Rows"] >= 0.5, scales


def test_the_validation_summary_of_every_measurement_prints_at_half_size_or_more(
        tmp_path, libreoffice, shipped):
    """The shipped measurements' six metrics under three validations: with two charts across,
    the one-page Summary printed at 46% of its size."""
    rows = validation_rows(shipped, rows=None)
    labelled = [rows.assign(validation=label) for label in (IN_SAMPLE, *HOLDOUTS.values())]
    path = write_validation(pd.concat(labelled, ignore_index=True), tmp_path / "validation.xlsx")
    assert rows["metric"].nunique() == 6
    pages = _printed(libreoffice, path)
    assert pages["Summary"] == 1
    assert _printed_sizes(libreoffice, path)["Summary"] >= 0.5


@pytest.mark.slow
def test_a_large_sweep_prints_its_first_rows_only(tmp_path, libreoffice, shipped):
    """24,576 rows, which would print on some 500 pages: the file keeps them all, the print
    shows the first 100."""
    grid = sweep(["h100-sxm", "h200", "l40s", "a100-80gb-sxm"], ["llama-3.1-8b", "llama-3.1-70b"],
                 ["bf16", "fp8"], tps=[1, 2, 4, 8], contexts=list(range(1024, 8193, 1024)),
                 output_lens=[128, 256, 512], batches=list(range(1, 513, 32)), catalogs=shipped)
    assert len(grid) >= 20_000
    shown = grid[list(SWEEP_COLUMNS_SHOWN)]  # the columns a cost review reads, costs still live
    path = write_sweep(shown, tmp_path / "sweep.xlsx", catalogs=shipped)
    assert openpyxl.load_workbook(path, read_only=True)["Sweep"].max_row == len(grid) + 1
    pages = _printed(libreoffice, path)
    assert pages["Summary"] == 1 and pages["Frontier"] == 1
    assert pages["Sweep"] <= 6  # 100 of its rows, not all of them (two pages across)


def test_the_frontier_prints_its_chart_above_its_first_rows_at_the_pages_width(
        tmp_path, libreoffice, shipped):
    """Beside 40 rows of its curve table, the chart and the table printed at 43-46%."""
    grid = sweep(["h100-sxm", "h200", "mi300x"], ["llama-3.1-70b"], ["bf16", "fp8"],
                 tps=[2, 4, 8], contexts=[2048, 8192], batches=[2**i for i in range(10)],
                 catalogs=shipped)
    path = write_sweep(grid[list(SWEEP_COLUMNS_SHOWN)], tmp_path / "sweep.xlsx", catalogs=shipped,
                       tpot_slo_ms=40.0)
    ws = openpyxl.load_workbook(path)["Frontier"]
    chart_row = ws._charts[0].anchor._from.row + 1
    assert chart_row < min(ref_rows(t.ref)[0] for t in ws.tables.values())  # above the data
    assert _printed(libreoffice, path)["Frontier"] == 1
    assert _printed_sizes(libreoffice, path)["Frontier"] >= 0.6
