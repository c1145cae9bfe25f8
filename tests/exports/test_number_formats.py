"""Every number in every sheet of every workbook has a number format (none is left General),
headers are plain words with units, and every sheet has a page setup."""

from __future__ import annotations

import datetime as dt
import warnings

import openpyxl
import pytest

from fleetplan.exports import write_plan, write_sweep
from fleetplan.exports.compare_workbook import write_compare_xlsx
from fleetplan.exports.validation_workbook import write_validation
from fleetplan.exports.whatif_workbook import write_grid_xlsx
from tests.exports.samples import compare_table, validation_rows, whatif_results

PARAMS = {"hours_per_month": 730.0, "usd_per_kwh": 0.1, "pue": 1.4, "power_load": 0.75}


@pytest.fixture(scope="module")
def workbooks(tmp_path_factory, example_plan, stress_plan, real_sweep, shipped) -> dict:
    folder = tmp_path_factory.mktemp("formats")
    results, axes = whatif_results()
    return {
        "plan": write_plan(example_plan, folder / "plan.xlsx"),
        "stress plan": write_plan(stress_plan, folder / "stress.xlsx"),
        "compare": write_compare_xlsx(compare_table(shipped), folder / "compare.xlsx", params=PARAMS),
        "what-if": write_grid_xlsx(results, folder / "grid.xlsx", axes=axes, base_fleet=example_plan.fleet,
                                   metadata={"base": "example"}, base_usd_per_month=30_000.0),
        "sweep": write_sweep(real_sweep, folder / "sweep.xlsx", catalogs=shipped),
        "validation": write_validation(validation_rows(shipped, rows=60), folder / "validation.xlsx"),
    }


def _load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return openpyxl.load_workbook(path)


@pytest.mark.parametrize("kind", ["plan", "stress plan", "compare", "what-if", "sweep", "validation"])
def test_every_numeric_cell_has_a_number_format(workbooks, kind):
    book = _load(workbooks[kind])
    general = [(ws.title, cell.coordinate, cell.value) for ws in book.worksheets for row in ws.iter_rows()
               for cell in row
               if (cell.data_type == "f" or (isinstance(cell.value, (int, float, dt.date))
                                             and not isinstance(cell.value, bool)))
               and cell.number_format == "General"]
    assert general == []
    numbers = sum(1 for ws in book.worksheets for row in ws.iter_rows() for cell in row
                  if isinstance(cell.value, (int, float)) and not isinstance(cell.value, bool))
    assert numbers > 20  # the check looked at real workbooks


@pytest.mark.parametrize("kind", ["plan", "compare", "what-if", "sweep", "validation"])
def test_every_sheet_prints_landscape_or_portrait_fit_to_width_with_headers(workbooks, kind):
    for ws in _load(workbooks[kind]).worksheets:
        assert ws.page_setup.orientation in ("landscape", "portrait"), ws.title
        assert ws.sheet_properties.pageSetUpPr.fitToPage, ws.title
        assert ws.page_setup.fitToWidth in (1, 2, 3), ws.title
        if ws.page_setup.fitToWidth > 1:  # a wide sheet repeats its key columns on every page
            assert ws.print_title_cols.startswith("$A:$"), ws.title
            assert ws.page_setup.pageOrder == "overThenDown", ws.title
        assert ws.print_area, ws.title
        assert "Page &P of &N" in ws.oddFooter.right.text and ws.oddHeader.center.text == "&A", ws.title
    summary = _load(workbooks[kind]).worksheets[0]
    assert summary.title == "Summary" and summary.page_setup.fitToHeight == 1


def test_headers_are_plain_words_with_units(workbooks):
    fleet = _load(workbooks["plan"])["Fleet"]
    headers = {cell.value for row in fleet.iter_rows(max_row=6) for cell in row if isinstance(cell.value, str)}
    assert {"Price (USD/GPU-hour)", "Cost (USD/month)", "GPUs at peak", "Price from (provider, as of)"} <= headers
    assert not {h for h in headers if "usd_per" in h or "_peak" in h}


def test_plan_months_are_calendar_months(tmp_path, example_plan):
    path = write_plan(example_plan, tmp_path / "plan.xlsx")
    from fleetplan.exports.plan_workbook import build_plan_book

    book = build_plan_book(example_plan, start_date=dt.date(2027, 3, 1))
    book.save(tmp_path / "march.xlsx")
    months = [cell.value for row in _load(tmp_path / "march.xlsx")["Costs"].iter_rows() for cell in row
              if isinstance(cell.value, dt.datetime)]
    assert months[0] == dt.datetime(2027, 3, 1) and dt.datetime(2028, 2, 1) in months
    assert all(m.day == 1 for m in months)
    assert path.exists()


@pytest.mark.parametrize("kind", ["plan", "compare", "what-if", "sweep", "validation"])
def test_no_table_text_is_cut_off_by_the_cell_beside_it(workbooks, kind):
    """A text in a table that does not wrap prints only as far as its column when the next
    cell holds something: it must fit (the validation Summary cut 'leave-one-model-out'; the
    validation Rows' source, capped at 40 characters so that its rows stay one line each, was
    cut by the GPU beside it until it became the last column)."""
    cut = []
    for ws in _load(workbooks[kind]).worksheets:
        for table in ws.tables.values():
            for row in ws[table.ref][1:]:
                for cell, beside in zip(row, row[1:]):
                    if isinstance(cell.value, str) and beside.value is not None \
                            and not cell.alignment.wrap_text and not cell.value.startswith("="):
                        width = ws.column_dimensions[cell.column_letter].width or 8.43
                        if len(cell.value) > width:
                            cut.append((ws.title, cell.column_letter, len(cell.value), width))
    assert not cut, sorted(set(cut))
