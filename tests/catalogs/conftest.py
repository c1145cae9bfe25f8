"""Fixtures for the catalog tests: a small, valid copy of every catalog to edit per test."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from fleetplan.catalogs import loader

FIXTURE_DATA = Path(__file__).parent / "fixtures" / "data"
CATALOG_FILES = ("gpus", "models", "quants", "prices", "efficiency", "ownership", "engines")


def read_text_table(path: Path) -> pd.DataFrame:
    """A catalog CSV with every cell as text, as a spreadsheet user would edit it."""
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def write_csv(path: Path, frame: pd.DataFrame) -> Path:
    frame.to_csv(path, index=False)
    return path


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A writable copy of the fixture catalogs."""
    folder = tmp_path / "data"
    folder.mkdir()
    for name in CATALOG_FILES:
        shutil.copy(FIXTURE_DATA / f"{name}.csv", folder / f"{name}.csv")
    return folder


@pytest.fixture
def edit(data_dir: Path) -> Callable[[str, Callable[[pd.DataFrame], pd.DataFrame]], Path]:
    """``edit("prices", change)`` rewrites the copy of prices.csv with ``change(frame)``."""

    def apply(name: str, change: Callable[[pd.DataFrame], pd.DataFrame]) -> Path:
        path = data_dir / f"{name}.csv"
        write_csv(path, change(read_text_table(path)))
        return data_dir

    return apply


@pytest.fixture
def fixture_as_default(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make the fixture catalogs the ones ``load_catalogs()`` and the CLI read by default."""
    monkeypatch.setattr(loader, "DEFAULT_DATA_DIR", FIXTURE_DATA)
    return FIXTURE_DATA


def set_cell(frame: pd.DataFrame, row: int, column: str, value: str) -> pd.DataFrame:
    """Set the cell of spreadsheet ``row`` (header = row 1, first data row = row 2)."""
    frame = frame.copy()
    frame.loc[row - 2, column] = value
    return frame


def assert_edit_fails(edit, name: str, row: int, column: str, value: str, expected: str) -> None:
    """Setting one cell of catalog ``name`` makes loading fail with the message ``expected``."""
    from fleetplan.catalogs import load_catalogs
    from fleetplan.errors import CatalogError

    folder = edit(name, lambda frame: set_cell(frame, row, column, value))
    with pytest.raises(CatalogError, match=f"^{expected}"):
        load_catalogs(data_dir=folder)
