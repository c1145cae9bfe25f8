"""The rent-or-buy workbook is live: LibreOffice recalculates every cost from Assumptions, the
Summary ranks the options, and every price names the row it came from."""

import openpyxl
import pytest

from fleetplan.catalogs import PRICING_TYPES
from fleetplan.cli import main
from fleetplan.exports.compare_workbook import METRICS, write_compare_xlsx
from tests.exports.samples import (
    assert_recalculation_matches,
    cell_values,
    compare_table,
    formula_cells,
)

PARAMS = {"hours_per_month": 730.0, "usd_per_kwh": 0.1, "pue": 1.4, "power_load": 0.75}
GPUS = ("h100-sxm", "b200", "a100-80gb-sxm")


#: Buying financed at 8% a year, servers sold for 10% of their price at the end of their life.
FINANCING = {"cost_of_capital": 0.08, "residual_value": 0.1}


@pytest.fixture(scope="module")
def workbook(tmp_path_factory, shipped):
    table = compare_table(shipped, GPUS, **FINANCING)
    path = tmp_path_factory.mktemp("compare") / "compare.xlsx"
    write_compare_xlsx(table, path, params=PARAMS, workload={"model": "llama-3.1-70b", "quant": "fp8"},
                       catalogs=shipped, price_rule=shipped.price_rule.describe())
    return path, table


def _cell_of(book, name: str) -> tuple[str, str]:
    sheet, reference = book.defined_names[name].attr_text.split("!")
    return sheet.strip("'"), reference.replace("$", "")


def _options_cell(book, gpu: str, metric: str) -> tuple[str, str]:
    ws = book["Options"]
    header = next(row for row in ws.iter_rows() if row[0].value == "Per option")
    column = next(cell.column_letter for cell in header if cell.value == gpu)
    label = next(m.label for m in METRICS if m.name == metric)
    row = next(cell.row for cell in ws["A"] if cell.value == label)
    return "Options", f"{column}{row}"


@pytest.mark.libreoffice
def test_formulas_recalculate_to_the_python_values(workbook, libreoffice):
    path, _ = workbook
    assert assert_recalculation_matches(path, libreoffice.recalculate(path)) >= 20


def test_only_costs_and_the_ranking_hold_formulas(workbook):
    path, _ = workbook
    assert {sheet for sheet, _ in formula_cells(path)} == {"Options", "Summary"}


def test_summary_ranks_by_the_lowest_3_year_cost_and_explains_reserved_prices(workbook):
    path, table = workbook
    values = cell_values(path)
    ranked = [values[("Summary", f"B{row}")] for row in range(6, 8)]
    best = table.set_index("gpu")[["tco_3y_on_demand_usd", "tco_3y_reserved_usd", "tco_3y_buy_usd"]].min(axis=1)
    assert ranked == list(best.dropna().sort_values().index)
    texts = " ".join(str(v) for (sheet, _), v in values.items() if sheet == "Summary")
    assert "aws reserves h100-sxm at 1-year $5.42 (21% below aws on-demand $6.88)" in texts
    assert "No reserved price is listed for b200" in texts
    book = openpyxl.load_workbook(path)["Summary"]
    label = next(c for row in book.iter_rows() for c in row
                 if c.value == "Reserved against on-demand prices")
    gpu_cells = [book.cell(row=label.row + 1 + i, column=1) for i in range(len(ranked))]
    merged = {str(r) for r in book.merged_cells.ranges}
    assert all(f"A{c.row}:B{c.row}" in merged for c in gpu_cells)  # a long GPU id prints whole


def test_every_price_names_its_provider_date_and_source(workbook):
    path, _ = workbook
    ws = openpyxl.load_workbook(path)["Assumptions"]
    header = next(row for row in ws.iter_rows() if row[0].value == "GPU" and row[1].value == "Pricing")
    columns = {cell.value: cell.column - 1 for cell in header}
    rows = [row for row in ws.iter_rows(min_row=header[0].row + 1) if row[0].value in GPUS and row[1].value in PRICING_TYPES]
    assert {(r[0].value, r[1].value) for r in rows} >= {("h100-sxm", "on_demand"), ("h100-sxm", "reserved_1y")}
    for row in rows:
        assert row[columns["Provider"]].value and row[columns["As of"]].value and row[columns["Source"]].value


@pytest.mark.libreoffice
def test_raising_a_price_raises_exactly_the_dependent_costs(workbook, libreoffice, tmp_path):
    path, table = workbook
    book = openpyxl.load_workbook(path)
    sheet, cell = _cell_of(book, "price_h100_sxm_on_demand")
    book[sheet][cell].value = book[sheet][cell].value + 1.0
    edited = tmp_path / "edited.xlsx"
    book.save(edited)
    before, after = cell_values(libreoffice.recalculate(path)), cell_values(libreoffice.recalculate(edited))
    gpus = table.set_index("gpu").loc["h100-sxm", "gpus_needed"]
    rent = gpus * 1.0 * 730.0
    expected = {"rent_on_demand_usd_per_month": rent, "tco_1y_on_demand_usd": 12 * rent,
                "tco_3y_on_demand_usd": 36 * rent}
    for metric, delta in expected.items():
        key = _options_cell(book, "h100-sxm", metric)
        assert after[key] - before[key] == pytest.approx(delta, rel=1e-9)
    changed = {key for key in before if key[0] == "Options" and after.get(key) != before[key]}
    h100 = _options_cell(book, "h100-sxm", "tp")[1][0]
    assert changed and all(key[1][0] == h100 for key in changed)  # only the h100-sxm column moved


def test_a_gpu_no_server_is_listed_for_says_why_it_is_not_priced_to_buy(tmp_path, shipped):
    table = compare_table(shipped, ("h100-sxm", "l40s"))
    path = write_compare_xlsx(table, tmp_path / "compare.xlsx", params=PARAMS,
                              workload={"model": "llama-3.1-70b", "quant": "fp8"}, catalogs=shipped)
    texts = [c.value for row in openpyxl.load_workbook(path)["Summary"].iter_rows() for c in row
             if isinstance(c.value, str)]
    assert ("Not priced to buy: l40s (the ownership catalog holds no server for it; add one with "
            "--catalog), so its power and buy columns show '-'.") in texts


def test_the_compare_command_says_why_too(capsys):
    assert main(["compare", "--model", "llama-3.1-70b", "--gpus", "h100-sxm,l40s",
                 "--demand-req-s", "20", "--tpot-slo-ms", "50"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "Not priced to buy: l40s (the ownership catalog holds no server for it" in printed


def test_the_financing_inputs_are_named_inputs(workbook):
    path, _ = workbook
    book = openpyxl.load_workbook(path)
    for name, value in FINANCING.items():
        sheet, cell = _cell_of(book, f"in_{name}")
        assert (sheet, book[sheet][cell].value) == ("Assumptions", value)


@pytest.mark.libreoffice
def test_buying_recovers_the_servers_at_the_cost_of_capital(workbook, libreoffice, tmp_path):
    """At 8% the capital row is the annuity; set to 0% in the workbook it is straight-line
    less the resale, and the buy costs move by exactly the difference."""
    path, table = workbook
    book = openpyxl.load_workbook(path)
    sheet, cell = _cell_of(book, "in_cost_of_capital")
    book[sheet][cell].value = 0.0
    edited = tmp_path / "straight_line.xlsx"
    book.save(edited)
    before = cell_values(libreoffice.recalculate(path))
    after = cell_values(libreoffice.recalculate(edited))
    server = table.set_index("gpu").loc["h100-sxm"]
    price = server["nodes"] * server["usd_per_node"]
    months = 12 * server["life_years"]
    rate = 1.08 ** (1 / 12) - 1
    annuity = (price - 0.1 * price * (1 + rate) ** -months) * rate / (1 - (1 + rate) ** -months)
    capital = _options_cell(book, "h100-sxm", "buy_capital_usd_per_month")
    assert before[capital] == pytest.approx(annuity, rel=1e-9)
    assert after[capital] == pytest.approx(0.9 * price / months, rel=1e-9)
    buy = _options_cell(book, "h100-sxm", "buy_usd_per_month")
    assert before[buy] - after[buy] == pytest.approx(annuity - 0.9 * price / months, rel=1e-9)
    tco = _options_cell(book, "h100-sxm", "tco_3y_buy_usd")  # cash: no financing in it
    assert before[tco] == after[tco]
