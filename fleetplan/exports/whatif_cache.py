"""The what-if grid's resume cache: one JSON file per solved case in ``OUTPUT.cases/``.

An entry is valid only for the inputs that produced it: it carries a key hashed from the base
scenario, the grid, the content of every catalog file and the fleetplan version, and a rerun
solves again every case whose key differs (an edited base scenario or price file never returns
a stale answer). A damaged entry (a killed writer cannot leave one, a person or a disk can) is
solved again and reported.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path

import pandas as pd

import fleetplan
from fleetplan.exports.atomic import write_text_atomic
from fleetplan.optimizer.whatif_grid import Grid
from fleetplan.optimizer.whatif_solving import solve_grid

log = logging.getLogger(__name__)


def inputs_key(grid: Grid, base: dict, catalog_paths: Iterable[str | Path] = ()) -> str:
    """A hash of everything a case's result depends on besides the case's own values."""
    digest = hashlib.sha256()
    for part in (fleetplan.__version__, grid.model_dump_json(), json.dumps(base, sort_keys=True, default=str)):
        digest.update(part.encode())
        digest.update(b"\0")
    for path in catalog_paths:
        digest.update(str(path).encode() + b"\0")
        digest.update(Path(path).read_bytes() if Path(path).is_file() else b"missing")
    return digest.hexdigest()[:32]


class JsonCaseCache:
    """Result rows kept as ``<folder>/<case id>.json``, each written atomically with ``key``."""

    def __init__(self, folder: Path, key: str = "", report: Callable[[str], None] | None = None) -> None:
        self.folder = Path(folder)
        self.key = key
        self.report = report or log.warning
        self.folder.mkdir(exist_ok=True)

    def load(self, ids: Iterable[str]) -> list[dict]:
        wanted = set(ids)
        rows, damaged, stale = [], [], 0
        for path in sorted(self.folder.glob("*.json")):
            if path.stem not in wanted:
                continue
            entry = _entry(path)
            if entry is None:
                damaged.append(path.name)
            elif entry.get("key") != self.key:
                stale += 1
            else:
                rows.append(entry["row"])
        if damaged:
            self.report(f"{len(damaged)} damaged entries in {self.folder} ({', '.join(damaged[:3])}"
                        f"{', ...' if len(damaged) > 3 else ''}) are solved again")
        if stale:
            log.info("%d cached cases were solved from other inputs: solved again", stale)
        return rows

    def save(self, row: dict) -> None:
        entry = {"key": self.key, "row": row}
        write_text_atomic(self.folder / f"{row['case_id']}.json", json.dumps(entry, default=float))


def _entry(path: Path) -> dict | None:
    """The stored entry, or None when it is not one (unreadable, not JSON, wrong shape)."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("row"), dict) or "key" not in entry:
        return None
    return entry


def run_grid(grid: Grid, base: dict, cases: list[dict], folder: Path, *, catalog_paths=(), workers: int = 1,
             client=None, progress: Callable[[int, int], None] | None = None,
             report: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Every case's result row, in case order; cases already solved in ``folder`` from the same
    inputs are not solved again. ``report`` receives a line about damaged entries."""
    cache = JsonCaseCache(folder, inputs_key(grid, base, catalog_paths), report)
    return solve_grid(grid, base, cases, cache, catalog_paths=catalog_paths, workers=workers,
                      client=client, progress=progress)
