"""User files extend or override catalog rows by key; versions() records what was merged."""

from __future__ import annotations

import datetime as dt
import re
import zipfile
from pathlib import Path

import openpyxl
import pandas as pd
import pytest

from fleetplan.catalogs import load_catalogs, workbook_files
from fleetplan.errors import CatalogError
from tests.catalogs.conftest import FIXTURE_DATA

ON_DEMAND = ("h100-sxm", "aws", "us-east-1", "on_demand")
NEW_GPU = {
    "id": "l40s", "name": "L40S", "vendor": "nvidia", "architecture": "ada", "memory_gb": "48",
    "memory_unit": "GB",
    "memory_bw_tb_s": "0.864", "tflops_bf16": "362", "tflops_fp16": "362", "tflops_fp8": "733",
    "tflops_int8": "733", "interconnect_gb_s": "64", "interconnect": "PCIe Gen4",
    "interconnect_domain_gpus": "4", "gpus_per_node": "8", "tdp_w": "350", "source": "my spec sheet", "as_of": "2025-02-01",
}


def _csv(path: Path, rows: list[dict]) -> Path:
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _price(catalogs, key=ON_DEMAND) -> pd.Series:
    prices = catalogs.prices.set_index(["gpu", "provider", "region", "pricing_type"])
    return prices.loc[key]


def _negotiated(tmp_path: Path, usd: str = "4.1", name: str = "my_prices.csv") -> Path:
    row = dict(zip(("gpu", "provider", "region", "pricing_type"), ON_DEMAND))
    row |= {"usd_per_gpu_hour": usd, "source": "our contract", "as_of": "2025-03-01"}
    return _csv(tmp_path / name, [row])


def test_partial_override_replaces_given_cells_and_keeps_others(tmp_path):
    shipped = load_catalogs(data_dir=FIXTURE_DATA)
    merged = load_catalogs([_negotiated(tmp_path)], data_dir=FIXTURE_DATA)
    price, before = _price(merged), _price(shipped)
    assert price["usd_per_gpu_hour"] == 4.1
    assert price["source"] == "our contract" and price["as_of"] == "2025-03-01"
    assert price["instance"] == before["instance"] == "p5.48xlarge"
    assert bool(price["includes_host"]) is True
    assert len(merged.prices) == len(shipped.prices)


def test_empty_override_cell_keeps_the_shipped_value(tmp_path):
    path = _negotiated(tmp_path)
    frame = pd.read_csv(path, dtype=str).assign(instance="")
    frame.to_csv(path, index=False)
    assert _price(load_catalogs([path], data_dir=FIXTURE_DATA))["instance"] == "p5.48xlarge"


def test_add_new_gpu_and_its_price_in_one_load(tmp_path):
    gpus = _csv(tmp_path / "gpus.csv", [NEW_GPU])
    price = {"gpu": "l40s", "provider": "runpod", "region": "any", "pricing_type": "on_demand",
             "usd_per_gpu_hour": "0.86", "instance": "1x L40S", "includes_host": "yes",
             "source": "runpod page", "as_of": "2025-02-01"}
    prices = _csv(tmp_path / "prices.csv", [price])
    catalogs = load_catalogs([gpus, prices], data_dir=FIXTURE_DATA)
    assert catalogs.gpu("l40s")["memory_gb"] == 48.0
    assert pd.isna(catalogs.gpu("l40s")["tflops_fp4"])
    assert _price(catalogs, ("l40s", "runpod", "any", "on_demand"))["usd_per_gpu_hour"] == 0.86
    assert catalogs.gpus.index.tolist()[-1] == "l40s"


def test_new_key_must_have_every_required_field(tmp_path):
    row = {k: v for k, v in NEW_GPU.items() if k != "tdp_w"}
    path = _csv(tmp_path / "gpus.csv", [row])
    with pytest.raises(CatalogError, match=f"^{path} row 2, column tdp_w: must not be empty"):
        load_catalogs([path], data_dir=FIXTURE_DATA)


def test_override_needs_source_and_as_of(tmp_path):
    path = _csv(tmp_path / "p.csv", [dict(zip(("gpu", "provider", "region", "pricing_type"),
                                              ON_DEMAND)) | {"usd_per_gpu_hour": "3"}])
    with pytest.raises(CatalogError, match=f"^{path} row 1: missing column 'source'"):
        load_catalogs({"prices": path}, data_dir=FIXTURE_DATA)


def test_override_cells_are_validated_in_their_own_file(tmp_path):
    path = _negotiated(tmp_path, usd="-3")
    with pytest.raises(CatalogError,
                       match=f"^{path} row 2, column usd_per_gpu_hour: must be >= 0.01, got -3"):
        load_catalogs([path], data_dir=FIXTURE_DATA)


def test_override_cross_reference_points_at_the_override_row(tmp_path):
    row = dict(NEW_GPU, id="h100-sxm", tflops_fp8="")  # h100 loses native fp8: still valid
    price = {"gpu": "h200", "provider": "aws", "region": "x", "pricing_type": "spot",
             "usd_per_gpu_hour": "3", "instance": "p5e", "includes_host": "1",
             "source": "s", "as_of": "2025-01-01"}
    gpus, prices = _csv(tmp_path / "g.csv", [row]), _csv(tmp_path / "p.csv", [price, price])
    with pytest.raises(CatalogError, match=f"^{prices} row 3, column gpu\\+provider"):
        load_catalogs([gpus, prices], data_dir=FIXTURE_DATA)
    _csv(prices, [price])
    with pytest.raises(CatalogError, match=f"^{prices} row 2, column gpu: unknown gpu 'h200'"):
        load_catalogs([gpus, prices], data_dir=FIXTURE_DATA)


def test_later_files_win(tmp_path):
    first = _negotiated(tmp_path, usd="4.1")
    second = _negotiated(tmp_path, usd="3.9", name="later.csv")
    catalogs = load_catalogs([first, second], data_dir=FIXTURE_DATA)
    assert _price(catalogs)["usd_per_gpu_hour"] == 3.9


def test_catalog_is_told_by_columns_or_by_mapping(tmp_path):
    only_key = _csv(tmp_path / "ids.csv", [{"id": "bf16", "source": "s", "as_of": "2025-01-01"}])
    with pytest.raises(CatalogError, match="fit the gpus and models and quants and engines catalogs"):
        load_catalogs([only_key], data_dir=FIXTURE_DATA)
    catalogs = load_catalogs({"quants": [only_key]}, data_dir=FIXTURE_DATA)
    assert catalogs.quant("bf16")["source"] == "s"
    assert catalogs.versions()["quants"]["overrides"] == [str(only_key)]


def test_file_without_any_key_is_rejected(tmp_path):
    path = _csv(tmp_path / "x.csv", [{"colour": "red"}])
    with pytest.raises(CatalogError, match=f"^{path} row 1: no catalog has these key columns"):
        load_catalogs([path], data_dir=FIXTURE_DATA)


@pytest.mark.parametrize(("name", "expected"), [
    ("missing.csv", "missing.csv: no such catalog file"),
    ("prices.json", "catalog files must be .csv or .xlsx, got '.json'"),
])
def test_bad_override_paths(tmp_path, name, expected):
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text("{}")
    with pytest.raises(CatalogError, match=expected):
        load_catalogs([path], data_dir=FIXTURE_DATA)


def test_an_override_split_by_semicolons_is_refused(tmp_path):
    path = tmp_path / "quote.csv"
    path.write_text("gpu;provider;region;pricing_type;usd_per_gpu_hour\n"
                    "h100-sxm;aws;us-east-1;on_demand;4,10\n")
    with pytest.raises(CatalogError, match="quote.csv: its values are separated by ';', not commas"):
        load_catalogs([path], data_dir=FIXTURE_DATA)


def _workbook(path: Path) -> Path:
    gpu = dict(NEW_GPU, memory_gb=48, gpus_per_node=8, as_of=dt.date(2025, 2, 1))
    price = {"gpu": "l40s", "provider": "own", "region": "any", "pricing_type": "reserved_1y",
             "usd_per_gpu_hour": 0.55, "instance": "4x L40S box", "includes_host": False,
             "source": "our quote", "as_of": dt.datetime(2025, 2, 3)}
    with pd.ExcelWriter(path, engine="openpyxl") as writer:
        pd.DataFrame([gpu]).to_excel(writer, sheet_name="gpus", index=False)
        pd.DataFrame([price]).to_excel(writer, sheet_name="prices", index=False)
        pd.DataFrame({"text": ["ignored"]}).to_excel(writer, sheet_name="README", index=False)
    return path


def test_xlsx_with_a_sheet_per_catalog(tmp_path):
    catalogs = load_catalogs([_workbook(tmp_path / "mine.xlsx")], data_dir=FIXTURE_DATA)
    price = _price(catalogs, ("l40s", "own", "any", "reserved_1y"))
    assert price["usd_per_gpu_hour"] == 0.55 and price["as_of"] == "2025-02-03"
    assert not price["includes_host"]
    assert catalogs.gpu("l40s")["gpus_per_node"] == 8
    versions = catalogs.versions()
    assert versions["gpus"]["overrides"] == versions["prices"]["overrides"] == [
        str(tmp_path / "mine.xlsx")]
    assert versions["models"]["overrides"] == []


def test_xlsx_errors_name_the_sheet(tmp_path):
    path = tmp_path / "bad.xlsx"
    row = {"gpu": "h100-sxm", "provider": "aws", "region": "us-east-1",
           "pricing_type": "on_demand", "usd_per_gpu_hour": "free", "source": "s",
           "as_of": "2025-01-01"}
    pd.DataFrame([row]).to_excel(path, sheet_name="prices", index=False)
    with pytest.raises(CatalogError, match=f"^{path} sheet prices row 2, column usd_per_gpu_hour"):
        load_catalogs([path], data_dir=FIXTURE_DATA)


def test_versions_change_with_an_override_value(tmp_path):
    shipped = load_catalogs(data_dir=FIXTURE_DATA).versions()
    merged = load_catalogs([_negotiated(tmp_path)], data_dir=FIXTURE_DATA).versions()
    assert merged["prices"]["sha256"] != shipped["prices"]["sha256"]
    assert merged["gpus"] == shipped["gpus"]
    assert merged["prices"]["overrides"] == [str(tmp_path / "my_prices.csv")]
    assert (merged["prices"]["as_of_min"], merged["prices"]["as_of_max"]) == (
        "2024-04-01", "2025-03-01")
    assert merged["prices"]["rows"] == shipped["prices"]["rows"] == 4


def test_single_path_and_unnamed_sheet_with_mapping(tmp_path):
    path = tmp_path / "quote.xlsx"
    row = {"gpu": "mi300x", "provider": "own", "region": "any", "pricing_type": "reserved_3y",
           "usd_per_gpu_hour": 1.1, "source": "quote", "as_of": "2025-01-01"}
    pd.DataFrame([row]).to_excel(path, sheet_name="Sheet1", index=False)
    by_mapping = load_catalogs({"price": path}, data_dir=FIXTURE_DATA)
    by_columns = load_catalogs(str(path), data_dir=FIXTURE_DATA)
    for catalogs in (by_mapping, by_columns):
        assert _price(catalogs, tuple(row.values())[:4])["usd_per_gpu_hour"] == 1.1


def test_mapping_to_a_workbook_without_that_sheet(tmp_path):
    path = _workbook(tmp_path / "mine.xlsx")
    with pytest.raises(CatalogError, match="mine.xlsx: no sheet named 'quants' \\(sheets: gpus"):
        load_catalogs({"quants": path}, data_dir=FIXTURE_DATA)


def test_blank_lines_keep_spreadsheet_row_numbers_and_headers_are_trimmed(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text(" GPU ,provider,region,pricing_type,usd_per_gpu_hour,source,as_of\n"
                    "\n"
                    ",,,,,,\n"
                    "h100-sxm,aws,us-east-1,on_demand,zero,s,2025-01-01\n")
    with pytest.raises(CatalogError, match=f"^{path} row 4, column usd_per_gpu_hour"):
        load_catalogs([path], data_dir=FIXTURE_DATA)


def _price_sheet(path: Path, cells: dict) -> Path:
    row = {"gpu": "h100-sxm", "provider": "aws", "region": "us-east-1",
           "pricing_type": "on_demand", "usd_per_gpu_hour": 4.1, "source": "our quote",
           "as_of": "2025-01-01", **cells}
    pd.DataFrame([row]).to_excel(path, sheet_name="prices", index=False)
    return path


def _saved_value(path: Path, cell: str, value: str) -> Path:
    """The workbook with ``cell``'s formula given a saved value, as a spreadsheet program saves
    it (openpyxl writes formulas without one)."""
    with zipfile.ZipFile(path) as book:
        parts = {name: book.read(name) for name in book.namelist()}
    sheet = parts["xl/worksheets/sheet1.xml"].decode()
    found = re.search(rf'<c r="{cell}"[^>]*><f>[^<]*</f><v\s*/>', sheet)
    parts["xl/worksheets/sheet1.xml"] = sheet.replace(
        found.group(0), found.group(0).replace("<v />", f"<v>{value}</v>")).encode()
    with zipfile.ZipFile(path, "w") as book:
        for name, data in parts.items():
            book.writestr(name, data)
    return path


def test_a_formula_without_a_saved_value_is_named_with_its_cell(tmp_path):
    path = _price_sheet(tmp_path / "quote.xlsx", {"usd_per_gpu_hour": "=4.1*0.9"})
    with pytest.raises(CatalogError, match=r"quote.xlsx sheet prices row 2, column "
                                           r"usd_per_gpu_hour: the formula =4.1\*0.9 has no saved "
                                           r"value; open and save the workbook"):
        load_catalogs([path], data_dir=FIXTURE_DATA)


def test_a_formula_with_its_saved_value_reads_the_value(tmp_path):
    path = _saved_value(_price_sheet(tmp_path / "quote.xlsx", {"usd_per_gpu_hour": "=4.1*0.9"}),
                        "E2", "3.69")
    assert _price(load_catalogs([path], data_dir=FIXTURE_DATA))["usd_per_gpu_hour"] == 3.69


def test_a_blank_first_row_is_refused_as_a_misplaced_header(tmp_path):
    path = _price_sheet(tmp_path / "quote.xlsx", {})
    book = openpyxl.load_workbook(path)
    book["prices"].insert_rows(1)
    book.save(path)
    with pytest.raises(CatalogError, match="quote.xlsx sheet prices row 1 is blank: the first "
                                           "row must hold the column names"):
        load_catalogs([path], data_dir=FIXTURE_DATA)
    csv = tmp_path / "quote.csv"
    csv.write_text("\ngpu,provider,region,pricing_type\nh100-sxm,aws,us-east-1,on_demand\n")
    with pytest.raises(CatalogError, match="quote.csv row 1 is blank"):
        load_catalogs([csv], data_dir=FIXTURE_DATA)


def test_a_huge_number_is_shown_short(tmp_path):
    path = _price_sheet(tmp_path / "quote.xlsx", {"usd_per_gpu_hour": 1e308})
    with pytest.raises(CatalogError, match=r"column usd_per_gpu_hour: must be <= 1000, got "
                                           r"1e\+308$"):
        load_catalogs([path], data_dir=FIXTURE_DATA)


def test_a_workbook_larger_than_the_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = _price_sheet(tmp_path / "quote.xlsx", {})
    monkeypatch.setattr(workbook_files, "MAX_TABLE_BYTES", 1000)
    with pytest.raises(CatalogError, match=r"quote.xlsx: catalog workbook is larger than"):
        load_catalogs([path], data_dir=FIXTURE_DATA)
