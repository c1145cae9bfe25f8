"""The what-if grid's resume cache: one JSON file per solved case in ``OUTPUT.cases/``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

import pandas as pd

from fleetplan.exports.atomic import write_text_atomic
from fleetplan.optimizer.whatif_grid import Grid, solve_grid


class JsonCaseCache:
    """Result rows kept as ``<folder>/<case id>.json``, each written atomically."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def load(self, ids: Iterable[str]) -> list[dict]:
        wanted = set(ids)
        return [json.loads(path.read_text()) for path in self.folder.glob("*.json") if path.stem in wanted]

    def save(self, row: dict) -> None:
        write_text_atomic(self.folder / f"{row['case_id']}.json", json.dumps(row, default=float))


def run_grid(grid: Grid, base: dict, cases: list[dict], folder: Path, *, catalog_paths=(), workers: int = 1,
             client=None, progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """Every case's result row, in case order; cases already in ``folder`` are not solved again."""
    return solve_grid(grid, base, cases, JsonCaseCache(folder), catalog_paths=catalog_paths, workers=workers,
                      client=client, progress=progress)
