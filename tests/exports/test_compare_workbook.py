"""The rent-or-buy workbook is live: LibreOffice recalculates every cost from Assumptions."""

import openpyxl
import pytest

from fleetplan.exports.compare_workbook import write_compare_xlsx
from fleetplan.sweeps.rent_or_buy import compare
from tests.exports.samples import assert_recalculation_matches, cell_values, formula_cells

WORKLOAD = {"model": "llama-3.1-70b", "quant": "fp8", "input_len": 1000, "output_len": 300, "tpot_slo_ms": 40.0,
            "ttft_slo_ms": 1000.0, "demand_req_s": 50.0}
PARAMS = {"hours_per_month": 730.0, "usd_per_kwh": 0.1, "pue": 1.4, "power_load": 0.75}


@pytest.fixture(scope="module")
def workbook(tmp_path_factory, shipped):
    table = compare(WORKLOAD, ["h100-sxm", "b200", "a100-80gb-sxm"], shipped, usd_per_kwh=0.1, pue=1.4, power_load=0.75)
    path = tmp_path_factory.mktemp("compare") / "compare.xlsx"
    write_compare_xlsx(table, path, params=PARAMS)
    return path, table


def _cell_of(book, name: str) -> tuple[str, str]:
    sheet, reference = book.defined_names[name].attr_text.split("!")
    return sheet.strip("'"), reference.replace("$", "")


def test_formulas_recalculate_to_the_python_values(workbook, libreoffice):
    path, _ = workbook
    assert assert_recalculation_matches(path, libreoffice.recalculate(path)) >= 20


def test_only_cost_cells_hold_formulas(workbook):
    path, _ = workbook
    assert {sheet for sheet, _ in formula_cells(path)} == {"Compare"}


def test_raising_a_price_raises_exactly_the_dependent_totals(workbook, libreoffice, tmp_path):
    path, table = workbook
    book = openpyxl.load_workbook(path)
    sheet, cell = _cell_of(book, "price_h100_sxm_on_demand")
    book[sheet][cell].value = book[sheet][cell].value + 1.0
    edited = tmp_path / "edited.xlsx"
    book.save(edited)
    before, after = cell_values(libreoffice.recalculate(path)), cell_values(libreoffice.recalculate(edited))
    gpus = table.set_index("gpu").loc["h100-sxm", "gpus_needed"]
    changed = {key: after[key] - before[key] for key in before
               if key[0] == "Compare" and isinstance(before[key], (int, float)) and after.get(key) != before[key]}
    rent_delta = gpus * 1.0 * 730.0
    deltas = sorted(round(v, 6) for v in changed.values() if v > 0)
    assert deltas == sorted([round(rent_delta, 6), round(12 * rent_delta, 6), round(36 * rent_delta, 6)])
    assert all(key[1].endswith("2") for key in changed)  # only the h100-sxm row (row 2) moved
