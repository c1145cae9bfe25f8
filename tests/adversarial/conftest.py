"""Hostile input for every command: the harness that runs a case and checks it failed cleanly.

A clean failure is: the expected exit code (2 for bad input, 1 for the environment), exactly one
line on stderr starting with ``error: `` with no control characters and no traceback, and no
file left behind in the sandbox (temporaries included). Outputs that were written are checked
for cells that became formulas.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import re
from pathlib import Path

import openpyxl
import pytest
import yaml

from fleetplan.cli import main

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
#: What spreadsheet applications execute when a cell starts with it (OWASP CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
HOSTILE_TEXT = ('=HYPERLINK("http://evil.example","click")', "+cmd|' /C calc'!A0", "@SUM(1)",
                "-2+3", "=1+1\x0bvertical tab", "line\nbreak")


@dataclasses.dataclass
class Result:
    code: int
    out: str
    err: str


class Sandbox:
    """A working folder the command runs in, with helpers to write hostile files."""

    def __init__(self, folder: Path, capsys) -> None:
        self.folder = folder
        self._capsys = capsys

    def path(self, name: str) -> Path:
        return self.folder / name

    def write(self, name: str, content: str | bytes) -> Path:
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    def scenario(self, name: str = "scenario.yaml", edit=None, **top) -> Path:
        data = tiny_scenario()
        data.update(top)
        if edit is not None:
            edit(data)
        return self.write(name, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))

    def files(self) -> set[str]:
        return {str(p.relative_to(self.folder)) for p in self.folder.rglob("*")}

    def run(self, *args: str) -> Result:
        self._capsys.readouterr()
        code = main([str(a) for a in args])
        captured = self._capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def fails(self, args, code: int, pattern: str) -> Result:
        """Run ``args``; assert a clean failure with ``code`` whose one line matches ``pattern``
        and that no file appeared."""
        before = self.files()
        result = self.run(*args)
        assert_clean_failure(result, code, pattern)
        assert self.files() == before, f"files left behind: {sorted(self.files() - before)}"
        return result


def assert_clean_failure(result: Result, code: int, pattern: str) -> None:
    assert result.code == code, f"exit {result.code} (wanted {code}); stderr: {result.err[-500:]!r}"
    lines = result.err.splitlines()
    assert len(lines) == 1 and result.err.endswith("\n"), f"want one line on stderr, got {result.err!r}"
    line = lines[0]
    assert line.startswith("error: "), line
    assert "Traceback" not in line and not CONTROL.search(line), repr(line)
    assert re.search(pattern, line), f"{line!r} does not match {pattern!r}"


def tiny_scenario() -> dict:
    """One small workload on one GPU: solves in well under a second."""
    return {
        "name": "tiny",
        "workloads": [{"name": "chat", "model": "llama-3.1-8b", "requests_per_s": 2.0,
                       "input_tokens": 500, "output_tokens": 100, "tpot_slo_ms": 60, "quants": ["bf16"]}],
        "fleet": {"gpus": ["l40s"], "tp": [1], "pricing": ["on_demand"], "horizon_months": 1},
        "what_if": {"enabled": False},
        "solver": {"time_limit_s": 20},
    }


@pytest.fixture
def sandbox(tmp_path, monkeypatch, capsys) -> Sandbox:
    folder = tmp_path / "sandbox"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return Sandbox(folder, capsys)


def formula_cells(path: Path) -> list[str]:
    """Cells of an output that a spreadsheet would run as formulas because of their text.

    CSV: any field starting like a formula that is not a plain number. XLSX: string cells are
    inert; formula cells are ours only when they hold no hostile payload.
    """
    found = []
    if path.suffix == ".csv":
        for row in csv.reader(io.StringIO(path.read_text(encoding="utf-8"))):
            found += [field for field in row if field.startswith(FORMULA_START) and not _number(field)]
        return found
    workbook = openpyxl.load_workbook(path)
    for sheet in workbook.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                if cell.data_type == "f" and any(marker in str(cell.value) for marker in
                                                 ("HYPERLINK", "cmd|", "SUM(1)", "evil")):
                    found.append(f"{sheet.title}!{cell.coordinate}={cell.value}")
    return found


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def all_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))


def temporaries(folder: Path) -> list[str]:
    """fleetplan's temporary names left in ``folder`` (``.<name>.<random>.tmp``/``.old``)."""
    return sorted(p.name for p in folder.rglob(".*") if re.search(r"\.(tmp|old)$", p.name))


__all__ = ["HOSTILE_TEXT", "Result", "Sandbox", "all_files", "assert_clean_failure", "formula_cells",
           "temporaries", "tiny_scenario", "os"]
