"""Fixtures for export tests: small sweep tables and a real spreadsheet (LibreOffice headless).

LibreOffice only recalculates an .xlsx on load when its profile says so, so every test worker
(pytest-xdist) seeds its own profile with recalculation set to "always". Without ``soffice``
the recalculation tests skip with a message, except in CI (``CI`` set), where they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from tests.exports.samples import (
    DISAGGREGATED_SCENARIO,
    EXAMPLE_SCENARIO,
    INFEASIBLE_SCENARIO,
    STRESS_SCENARIO,
    make_plan,
    synthetic_sweep,
)

_NAMESPACES = ('xmlns:oor="http://openoffice.org/2001/registry" '
               'xmlns:xs="http://www.w3.org/2001/XMLSchema" '
               'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"')
_RECALC_ITEM = ('<item oor:path="/org.openoffice.Office.Calc/Formula/Load">'
                '<prop oor:name="{}" oor:op="fuse"><value>0</value></prop></item>')
# recalculation mode 0 = "always recalculate" when a file is loaded
_RECALC_PROFILE = ('<?xml version="1.0" encoding="UTF-8"?>\n'
                   f"<oor:items {_NAMESPACES}>\n"
                   + "\n".join(_RECALC_ITEM.format(mode) for mode in ("OOXMLRecalcMode",
                                                                      "ODFRecalcMode"))
                   + "\n</oor:items>\n")
_PDF_FILTER = 'pdf:calc_pdf_Export:{"SinglePageSheets":{"type":"boolean","value":"true"}}'


class LibreOffice:
    """``soffice --headless`` with a private profile that recalculates workbooks on load."""

    def __init__(self, binary: str, profile: Path, recalculate: bool = True) -> None:
        self.binary = binary
        self.profile = profile
        self.converted: dict[tuple, Path] = {}
        (profile / "user").mkdir(parents=True, exist_ok=True)
        if recalculate:  # else LibreOffice's defaults: a workbook keeps its cached values
            (profile / "user" / "registrymodifications.xcu").write_text(_RECALC_PROFILE)

    def convert(self, path: Path, target: str, outdir: Path) -> Path:
        """``path`` converted to ``target`` in ``outdir``; a file converted before and not
        changed since is not converted again (a test that counts pages and sizes prints once)."""
        stat = path.stat()
        key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size, target, str(outdir))
        if key in self.converted and self.converted[key].exists():
            return self.converted[key]
        outdir.mkdir(parents=True, exist_ok=True)
        command = [self.binary, "--headless", "--norestore",
                   f"-env:UserInstallation={self.profile.as_uri()}",
                   "--convert-to", target, "--outdir", str(outdir), str(path)]
        env = {**os.environ, "HOME": str(self.profile)}
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env,
                              check=False)
        result = outdir / (path.stem + "." + target.split(":")[0])
        if done.returncode != 0 or not result.exists():
            pytest.fail(f"soffice failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        self.converted[key] = result
        return result

    def recalculate(self, path: Path) -> Path:
        """A recalculated copy of ``path`` (same name, in a sibling folder)."""
        return self.convert(path, "xlsx", path.parent / f"recalculated-{path.stem}")

    def pdf(self, path: Path) -> Path:
        """``path`` printed to PDF, one page per sheet."""
        return self.convert(path, _PDF_FILTER, path.parent / f"pdf-{path.stem}")

    def print(self, path: Path) -> Path:
        """``path`` printed to PDF as a reader prints it: each sheet's own page setup."""
        return self.convert(path, "pdf", path.parent / f"printed-{path.stem}")


def printed_pages(pdf: Path) -> list[tuple[str, list[str]]]:
    """Each printed page's sheet, read from its header (its centre names the sheet), and its
    other lines of text as laid out."""
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,
                          check=True, timeout=120).stdout
    pages = []
    for page in text.split("\f"):
        lines = [line for line in page.splitlines() if line.strip()]
        if lines:
            parts = re.split(r"\s{2,}", lines[0].strip())
            pages.append((parts[1] if len(parts) >= 3 else parts[0], lines[1:]))
    return pages


def pages_by_sheet(pdf: Path) -> Counter:
    """Printed pages per sheet."""
    return Counter(sheet for sheet, _ in printed_pages(pdf))


def type_height_by_sheet(pdf: Path) -> dict[str, float]:
    """Per printed sheet, the median height of the words on its pages outside the page header
    and footer [points]: the same cells printed smaller give proportionally smaller words."""
    text = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], capture_output=True, text=True,
                          check=True, timeout=120).stdout
    heights: dict[str, list[float]] = {}
    word = re.compile(r'xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">([^<]*)<')
    for page in text.split("<page ")[1:]:
        width = float(re.search(r'width="([\d.]+)"', page).group(1))
        height = float(re.search(r'height="([\d.]+)"', page).group(1))
        words = [tuple(map(float, box)) + (w,) for *box, w in word.findall(page)]
        # the header's centre names the sheet; its subject is left of it, the date right
        centre = [w for left, top, right, _, w in words
                  if top < 30 and left > 0.3 * width and right < 0.7 * width]
        body = [bottom - top for _, top, _, bottom, _ in words if top > 30 and bottom < height - 30]
        if centre and body:
            heights.setdefault(" ".join(centre), []).extend(body)
    return {sheet: statistics.median(values) for sheet, values in heights.items()}


@pytest.fixture(scope="session")
def libreoffice(tmp_path_factory) -> LibreOffice:
    binary = shutil.which("soffice") or shutil.which("libreoffice")
    if binary is None or shutil.which("pdftotext") is None:
        message = ("LibreOffice or poppler is not installed (no soffice or pdftotext on PATH); install "
                   "libreoffice-calc-nogui and poppler-utils to run the recalculation and printing tests")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return LibreOffice(binary, tmp_path_factory.mktemp(f"libreoffice-profile-{worker}"))


@pytest.fixture(scope="session")
def libreoffice_as_installed(libreoffice, tmp_path_factory) -> LibreOffice:
    """LibreOffice with its default settings, as a reader has it: no recalculation on load."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return LibreOffice(libreoffice.binary,
                       tmp_path_factory.mktemp(f"libreoffice-default-profile-{worker}"),
                       recalculate=False)


@pytest.fixture
def small_sweep() -> pd.DataFrame:
    return synthetic_sweep()


@pytest.fixture(scope="session")
def real_sweep() -> pd.DataFrame:
    """The engine's own output for a few GPUs, models and batches."""
    from fleetplan.sweeps import sweep

    return sweep(["h100-sxm", "l4", "a100-80gb-sxm"], ["llama-3.1-8b", "llama-3.1-70b"],
                 ["bf16", "fp8"], tps=[1, 2], batches=[1, 4, 16, 64, 256])


@pytest.fixture(scope="session")
def example_plan():
    return make_plan(EXAMPLE_SCENARIO)


@pytest.fixture(scope="session")
def stress_plan():
    return make_plan(STRESS_SCENARIO)


@pytest.fixture(scope="session")
def infeasible_plan():
    return make_plan(INFEASIBLE_SCENARIO)


@pytest.fixture(scope="session")
def disaggregated_plan():
    return make_plan(DISAGGREGATED_SCENARIO)
