"""The catalogs shipped in the package load, validate and answer the lookups others rely on.

The ``shipped`` fixture (tests/conftest.py) is ``load_catalogs()``.
"""

from __future__ import annotations

import pytest

from fleetplan.catalogs import CATALOG_NAMES
from fleetplan.catalogs.schema import data_dir, load_schema


def _missing() -> list[str]:
    return [n for n in CATALOG_NAMES if not data_dir().joinpath(f"{n}.csv").is_file()]


pytestmark = pytest.mark.skipif(bool(_missing()), reason=f"data files missing: {_missing()}")


@pytest.mark.parametrize("name", CATALOG_NAMES)
def test_every_catalog_has_rows_with_provenance(shipped, name):
    table = shipped.table(name)
    assert len(table) > 0
    assert table["source"].str.len().gt(0).all()
    assert table["as_of"].str.fullmatch(r"\d{4}-\d{2}-\d{2}").all()
    columns = [c for c in load_schema(name).names if c != "id"]
    assert list(table.columns) == columns + (["override"] if name == "prices" else [])
    if name == "prices":  # no shipped row is the user's own
        assert not table["override"].any()


def test_versions_describe_every_catalog(shipped):
    versions = shipped.versions()
    assert set(versions) == set(CATALOG_NAMES)
    for name, version in versions.items():
        assert len(version["sha256"]) == 64
        assert version["rows"] == len(shipped.table(name))
        assert version["as_of_min"] <= version["as_of_max"]
        assert version["overrides"] == []


def test_shipped_ids_round_trip_through_require(shipped):
    for kind, table in (("gpu", shipped.gpus), ("model", shipped.models),
                        ("quant", shipped.quants)):
        ids = list(table.index)
        assert shipped.require(kind, [i.upper() for i in ids]) == ids


def test_efficiency_has_a_default_row(shipped):
    wildcard = shipped.efficiency.query("engine == '*' and gpu == '*' and precision == '*'")
    assert sorted(wildcard["operator"]) == ["allreduce", "attention", "expert_gemm", "gemm", "iteration"]


def test_every_quant_runs_natively_somewhere(shipped):
    assert shipped.native_gpus().any(axis=1).all()
