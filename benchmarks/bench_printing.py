"""How the workbooks print: pages and printed size of each sheet.

Writes the workbook ``fleetplan plan`` writes (or, with ``--workbook``, the re-planning example's
plan, a rent-or-buy comparison, a what-if grid around the example, a sweep or the validation
report of the shipped measurements, held-out refits included: about 5 minutes), and a copy of it
with every sheet set to print at
100% (no fitting to pages), prints both to PDF with LibreOffice (``soffice --headless``, a private
profile that recalculates on load), and reports per sheet the pages it prints on and the size its
type prints at: the median height of its words (``pdftotext -bbox``, outside the page header and
footer) against the same sheet's at 100%. ``tests/exports/test_printing.py`` holds the budgets
(every sheet at 50% or more); this script prints the figures. Needs ``soffice`` and ``pdftotext``.

Usage: python benchmarks/bench_printing.py [--workbook plan|replan|compare|whatif|sweep|validation]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import openpyxl

from fleetplan.cli import main

_PROFILE = ('<?xml version="1.0" encoding="UTF-8"?>\n<oor:items '
            'xmlns:oor="http://openoffice.org/2001/registry" '
            'xmlns:xs="http://www.w3.org/2001/XMLSchema" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n'
            '<item oor:path="/org.openoffice.Office.Calc/Formula/Load">'
            '<prop oor:name="OOXMLRecalcMode" oor:op="fuse"><value>0</value></prop></item>\n'
            '</oor:items>\n')
_WORD = re.compile(r'xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">([^<]*)<')


def print_pdf(workbook: Path, profile: Path) -> Path:
    """``workbook`` printed to PDF as a reader prints it (each sheet's own page setup)."""
    outdir = workbook.parent / "pdf"
    subprocess.run([shutil.which("soffice"), "--headless", "--norestore",
                    f"-env:UserInstallation={profile.as_uri()}", "--convert-to", "pdf",
                    "--outdir", str(outdir), str(workbook)],
                   check=True, capture_output=True, timeout=600)
    return outdir / (workbook.stem + ".pdf")


def sheet_pages_and_type(pdf: Path) -> tuple[Counter, dict[str, float]]:
    """Pages per sheet (read from each page's header, whose centre names the sheet; all of
    them under ``(all pages)``) and the median height of each sheet's words [points]."""
    text = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], capture_output=True,
                          text=True, check=True, timeout=120).stdout
    pages, heights = Counter(), {}
    pages["(all pages)"] = text.count("<page ")
    for page in text.split("<page ")[1:]:
        width = float(re.search(r'width="([\d.]+)"', page).group(1))
        height = float(re.search(r'height="([\d.]+)"', page).group(1))
        words = [(float(left), float(top), float(right), float(bottom), w)
                 for left, top, right, bottom, w in _WORD.findall(page)]
        centre = [w for left, top, right, _, w in words
                  if top < 30 and left > 0.3 * width and right < 0.7 * width]
        if not centre:
            continue
        sheet = " ".join(centre)
        pages[sheet] += 1
        heights.setdefault(sheet, []).extend(
            bottom - top for _, top, _, bottom, _ in words if top > 30 and bottom < height - 30)
    return pages, {sheet: statistics.median(h) for sheet, h in heights.items() if h}


_PACKAGE = Path(__file__).resolve().parents[1] / "fleetplan"
_EXAMPLES = _PACKAGE / "examples"
_GRID = ("base: example\ncases:\n  - {name: base}\n  - {name: less, demand_multiplier: 0.5}\n"
         "  - {name: more, demand_multiplier: 2}\n  - {name: tight, tpot_slo_ms: 25}\n"
         "  - {name: short, input_tokens: 400}\n")


def workbook_command(workbook: str, folder: Path) -> list[str]:
    """The ``fleetplan`` arguments that write ``workbook`` to ``folder / "<workbook>.xlsx"``."""
    path = str(folder / f"{workbook}.xlsx")
    if workbook == "whatif":
        (folder / "grid.yaml").write_text(_GRID)
        return ["whatif", str(folder / "grid.yaml"), "-o", path, "--workers", "2"]
    return {"plan": ["plan", "-o", path, "-q", "--start-date", "2027-01-01"],
            "replan": ["plan", str(_EXAMPLES / "replan.yaml"), "-o", path, "-q",
                       "--start-date", "2027-01-01"],
            "compare": ["compare", "--model", "llama-3.1-70b", "--quant", "fp8", "--gpus",
                        "h100-sxm,h200,mi300x,b200", "--demand-req-s", "20", "--input-len",
                        "1000", "--output-len", "300", "--tpot-slo-ms", "40", "-o", path],
            "sweep": ["sweep", "--gpu", "h100-sxm,h200,mi300x", "--model", "llama-3.1-70b",
                      "--quant", "bf16,fp8", "--tp", "2,4,8", "--context", "2048,8192",
                      "--batch", "1-512", "--tpot-slo-ms", "40", "-o", path],
            "validation": ["validate", str(_PACKAGE / "sweeps" / "data" / "measured.csv"),
                           "-o", path, "--workers", "2"]}[workbook]


def main_script() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workbook", default="plan",
                        choices=["plan", "replan", "compare", "whatif", "sweep", "validation"])
    workbook = parser.parse_args().workbook
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        profile = folder / "profile"
        (profile / "user").mkdir(parents=True)
        (profile / "user" / "registrymodifications.xcu").write_text(_PROFILE)
        path = folder / f"{workbook}.xlsx"
        if main(workbook_command(workbook, folder)) != 0:
            raise SystemExit(f"fleetplan {workbook} failed")
        book = openpyxl.load_workbook(path)
        for ws in book.worksheets:
            ws.sheet_properties.pageSetUpPr.fitToPage = False
            ws.page_setup.scale = 100
        (folder / "full").mkdir()
        book.save(folder / "full" / path.name)
        pages, printed = sheet_pages_and_type(print_pdf(path, profile))
        _, full = sheet_pages_and_type(print_pdf(folder / "full" / path.name, profile))
        print(f"{'sheet':<22}{'pages':>6}{'printed size':>14}")
        for sheet in book.sheetnames:
            share = printed[sheet] / full[sheet] if sheet in printed and sheet in full else None
            shown = f"{share:.0%}" if share is not None else "n/a"
            print(f"{sheet:<22}{pages[sheet]:>6}{shown:>14}")
        print(f"{'total':<22}{pages['(all pages)']:>6}  (a sheet's pages are those whose header "
              "names it; n/a: none could be read)")


if __name__ == "__main__":
    main_script()
