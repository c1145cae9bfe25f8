"""The ownership catalog: what buying and hosting a GPU server costs (rent-versus-buy inputs)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fleetplan.catalogs import check_files, load_catalogs
from fleetplan.catalogs.schema import catalog_name
from fleetplan.cli import main
from fleetplan.errors import CatalogError, UnknownNameError
from tests.catalogs.conftest import FIXTURE_DATA, assert_edit_fails

# CBRE North America H2 2025 asking rent the shipped hosting column was computed from.
COLOCATION_USD_PER_KW_MONTH = 194.95
SHIPPED_GPUS = ["a100-80gb-sxm", "b200", "gb200", "h100-sxm", "h200", "mi300x"]


def _csv(path: Path, rows: list[dict]) -> Path:
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _row(catalogs, gpu: str) -> pd.Series:
    return catalogs.ownership.set_index("gpu").loc[gpu]


# --- the shipped rows


def test_shipped_rows_name_known_gpus(shipped):
    ownership = shipped.ownership
    assert sorted(ownership["gpu"]) == SHIPPED_GPUS
    assert ownership["gpu"].isin(shipped.gpus.index).all()


def test_shipped_node_sizes_match_the_gpus_catalog(shipped):
    ownership = shipped.ownership
    expected = shipped.gpus.loc[ownership["gpu"], "gpus_per_node"].to_numpy()
    np.testing.assert_array_equal(ownership["gpus_per_node"].to_numpy(), expected)


def test_shipped_hosting_is_colocation_rent_times_node_power(shipped):
    ownership = shipped.ownership
    expected = ownership["node_power_kw"] * COLOCATION_USD_PER_KW_MONTH
    np.testing.assert_allclose(ownership["hosting_usd_per_node_month"], expected, atol=0.006)


@pytest.mark.parametrize(("gpu", "usd_per_node", "node_power_kw"), [
    ("h100-sxm", 255237.04, 10.2),   # 8 x $31,904.63 HGX H100 listing; DGX H100 10.2 kW max
    ("b200", 379273.04, 14.3),       # DGX B200 reseller listing; DGX B200 14.3 kW max
    ("a100-80gb-sxm", 148390.00, 6.5),
])
def test_shipped_known_values(shipped, gpu, usd_per_node, node_power_kw):
    row = _row(shipped, gpu)
    assert row["usd_per_node"] == pytest.approx(usd_per_node)
    assert row["node_power_kw"] == pytest.approx(node_power_kw)
    assert row["life_years"] == 5


def test_every_shipped_figure_has_a_cited_source(shipped):
    for source in shipped.ownership["source"]:
        for figure in ("price:", "power:", "hosting:", "life:"):
            assert figure in source
        assert "https://" in source


def test_sources_of_ownership_rows(shipped):
    sources = shipped.sources("ownership", ["H100-SXM"])
    assert sources[["catalog", "key", "as_of"]].values.tolist() == [
        ["ownership", "h100-sxm", "2025-01-31"]]


# --- user overrides


def test_override_replaces_a_price_and_keeps_other_cells(tmp_path):
    path = _csv(tmp_path / "quote.csv", [{"gpu": "h100-sxm", "usd_per_node": "199000",
                                          "source": "our vendor quote", "as_of": "2026-10-01"}])
    catalogs = load_catalogs([path], data_dir=FIXTURE_DATA)
    row = _row(catalogs, "h100-sxm")
    assert row["usd_per_node"] == 199000.0
    assert row["source"] == "our vendor quote" and row["as_of"] == "2026-10-01"
    assert row["system"] == "HGX H100 8-GPU server" and row["node_power_kw"] == 10.2
    assert len(catalogs.ownership) == 2
    assert catalogs.versions()["ownership"]["overrides"] == [str(path)]
    assert catalogs.versions()["prices"]["overrides"] == []


def test_override_adds_a_gpu_and_fills_the_default_life(tmp_path):
    row = {"gpu": "a100-80gb-sxm", "system": "used HGX A100", "gpus_per_node": "8",
           "usd_per_node": "90000", "node_power_kw": "6.5", "life_years": "",
           "hosting_usd_per_node_month": "1200", "source": "broker", "as_of": "2026-09-01"}
    catalogs = load_catalogs([_csv(tmp_path / "used.csv", [row])], data_dir=FIXTURE_DATA)
    added = _row(catalogs, "a100-80gb-sxm")
    assert added["life_years"] == 5.0 and added["gpus_per_node"] == 8
    assert _row(catalogs, "mi300x")["life_years"] == 5.0


def test_a_file_with_gpu_and_provenance_only_is_an_ownership_file(tmp_path):
    path = _csv(tmp_path / "x.csv", [{"gpu": "mi300x", "source": "s", "as_of": "2026-01-01"}])
    assert check_files([path], data_dir=FIXTURE_DATA) == [(str(path), "ownership", 1)]


def test_price_and_efficiency_files_are_still_told_apart(tmp_path):
    price = _csv(tmp_path / "p.csv", [{"gpu": "h100-sxm", "provider": "own", "region": "any",
                                       "pricing_type": "on_demand", "usd_per_gpu_hour": "2",
                                       "instance": "box", "includes_host": "true",
                                       "source": "s", "as_of": "2026-01-01"}])
    factors = _csv(tmp_path / "e.csv", [{"gpu": "h100-sxm", "operator": "gemm", "precision": "fp8",
                                         "source": "s", "as_of": "2026-01-01"}])
    found = check_files([price, factors], data_dir=FIXTURE_DATA)
    assert [catalog for _, catalog, _ in found] == ["prices", "efficiency"]


# --- error paths


@pytest.mark.parametrize(("row", "column", "value", "expected"), [
    (2, "gpu", "h100",
     "ownership.csv row 2, column gpu: unknown gpu 'h100'; did you mean 'h100-sxm'\\?"),
    (3, "usd_per_node", "-5", "ownership.csv row 3, column usd_per_node: must be >= 100, got -5"),
    (2, "gpus_per_node", "7.5",
     "ownership.csv row 2, column gpus_per_node: must be a whole number, got 7.5"),
    (2, "gpus_per_node", "144",
     "ownership.csv row 2, column gpus_per_node: must be <= 72, got 144"),
    (3, "node_power_kw", "lots",
     "ownership.csv row 3, column node_power_kw: must be a number, got 'lots'"),
    (2, "life_years", "0.5", "ownership.csv row 2, column life_years: must be >= 1, got 0.5"),
    (3, "hosting_usd_per_node_month", "-1",
     "ownership.csv row 3, column hosting_usd_per_node_month: must be >= 0, got -1"),
    (2, "as_of", "2025-13-01",
     "ownership.csv row 2, column as_of: must be a date YYYY-MM-DD, got '2025-13-01'"),
    (2, "system", "", "ownership.csv row 2, column system: must not be empty \\(required\\)"),
])
def test_bad_ownership_cell(edit, row, column, value, expected):
    assert_edit_fails(edit, "ownership", row, column, value, expected)


def test_duplicate_gpu_row(edit):
    folder = edit("ownership", lambda frame: pd.concat([frame, frame.iloc[[0]]]))
    with pytest.raises(CatalogError, match="^ownership.csv row 4, column gpu: duplicate key "
                                           "'h100-sxm' \\(first on row 2\\)"):
        load_catalogs(data_dir=folder)


def test_missing_ownership_file(data_dir):
    (data_dir / "ownership.csv").unlink()
    with pytest.raises(CatalogError, match="^ownership.csv: catalog file is missing from"):
        load_catalogs(data_dir=data_dir)


def test_override_for_an_unknown_gpu(tmp_path):
    row = {"gpu": "h300", "system": "HGX H300", "gpus_per_node": "8", "usd_per_node": "400000",
           "node_power_kw": "12", "hosting_usd_per_node_month": "2300", "source": "s",
           "as_of": "2026-01-01"}
    path = _csv(tmp_path / "q.csv", [row])
    with pytest.raises(CatalogError, match=f"^{path} row 2, column gpu: unknown gpu 'h300'"):
        load_catalogs([path], data_dir=FIXTURE_DATA)


def test_new_gpu_in_an_override_needs_every_required_field(tmp_path):
    path = _csv(tmp_path / "q.csv", [{"gpu": "a100-80gb-sxm", "usd_per_node": "90000",
                                      "source": "s", "as_of": "2026-01-01"}])
    with pytest.raises(CatalogError, match=f"^{path} row 2, column system: must not be empty"):
        load_catalogs([path], data_dir=FIXTURE_DATA)


def test_misspelt_catalog_name_suggests_ownership():
    with pytest.raises(UnknownNameError, match="^unknown catalog 'ownrship'; did you mean "
                                               "'ownership'"):
        catalog_name("ownrship")


# --- fleetplan catalog show


def test_cli_shows_the_shipped_ownership_catalog(capsys):
    assert main(["catalog", "show", "ownership", "--columns", "gpu,usd_per_node"]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert table.set_index("gpu").loc["h100-sxm", "usd_per_node"] == pytest.approx(255237.04)


def test_cli_shows_the_fixture_ownership_as_csv(fixture_as_default, capsys):
    assert main(["catalog", "show", "ownership", "--format", "csv"]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert table.columns[:3].tolist() == ["gpu", "system", "gpus_per_node"]
    assert table["life_years"].tolist() == [5.0, 5.0]


def test_cli_ownership_as_rich_table(fixture_as_default, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["catalog", "show", "ownership", "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert "ownership" in out and "usd_per_node" in out and "250,000" in out


@pytest.mark.parametrize(("name", "suggestion"), [("ownershp", "ownership"), ("gpuz", "gpus")])
def test_cli_unknown_catalog_exits_2_with_did_you_mean(capsys, name, suggestion):
    assert main(["catalog", "show", name]) == 2
    expected = f"error: unknown catalog '{name}'; did you mean '{suggestion}'"
    assert capsys.readouterr().err.startswith(expected)
