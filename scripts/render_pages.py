"""Print the README's workbooks with LibreOffice and keep pages of them as PNGs in docs/img.

Writes the built-in example plan, the re-planning example, a rent-or-buy comparison, a what-if grid that varies one input
at a time, a sweep and the validation report, prints each to PDF as a reader would (each sheet's
own page setup) and saves the pages the README shows. Needs ``soffice`` and ``pdftoppm``.

    python scripts/render_pages.py [--out docs/img]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from fleetplan.cli import main

ROOT = Path(__file__).resolve().parents[1]
GRID = """base: example
cases:
  - {name: base}
  - {name: demand-low, demand_multiplier: 0.7}
  - {name: demand-high, demand_multiplier: 1.5}
  - {name: tpot-tight, tpot_slo_ms: 30}
  - {name: tpot-loose, tpot_slo_ms: 80}
  - {name: prompts-short, input_tokens: 600}
  - {name: prompts-long, input_tokens: 2400}
"""
PROFILE = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" \
xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Calc/Formula/Load"><prop oor:name="OOXMLRecalcMode" oor:op="fuse">\
<value>0</value></prop></item>
</oor:items>
"""
#: (workbook, pages to keep as (sheet, PNG name)): the first page each sheet prints on.
PAGES = {"plan.xlsx": [("Summary", "plan-summary"), ("Costs", "plan-costs"),
                       ("Assumptions", "plan-assumptions"), ("Frontier", "plan-frontier")],
         "compare.xlsx": [("Summary", "compare-summary"), ("Options", "compare-options")],
         "grid.xlsx": [("Summary", "whatif-summary")], "sweep.xlsx": [("Summary", "sweep-summary")],
         "validation.xlsx": [("Summary", "validation-summary")],
         "replan.xlsx": [("Supply", "replan-supply"), ("Changes", "replan-changes")]}


def _run(*args: str) -> None:
    code = main(list(args))
    if code != 0:
        raise SystemExit(f"fleetplan {' '.join(args)} exited {code}")


def write_workbooks(folder: Path) -> None:
    """The six workbooks the README shows."""
    _run("plan", "-o", str(folder / "plan.xlsx"), "-q", "--start-date", "2027-01-01")
    _run("plan", str(ROOT / "fleetplan" / "examples" / "replan.yaml"), "-o", str(folder / "replan.xlsx"),
         "-q")
    _run("compare", "--model", "llama-3.1-70b", "--quant", "fp8", "--gpus", "h100-sxm,h200,mi300x,b200",
         "--demand-req-s", "20", "--input-len", "1000", "--output-len", "300", "--tpot-slo-ms", "40",
         "-o", str(folder / "compare.xlsx"))
    (folder / "grid.yaml").write_text(GRID)
    _run("whatif", str(folder / "grid.yaml"), "-o", str(folder / "grid.xlsx"), "--workers", "2")
    _run("sweep", "--gpu", "h100-sxm,h200,mi300x", "--model", "llama-3.1-70b", "--quant", "bf16,fp8",
         "--tp", "2,4,8", "--context", "2048,8192", "--batch", "1-512", "--tpot-slo-ms", "40",
         "-o", str(folder / "sweep.xlsx"))
    _run("validate", str(ROOT / "fleetplan" / "sweeps" / "data" / "measured.csv"), "-o",
         str(folder / "validation.xlsx"))


def print_pages(folder: Path, out: Path) -> None:
    """Each workbook to PDF through LibreOffice, the chosen pages to PNG."""
    profile = folder / "profile"
    (profile / "user").mkdir(parents=True, exist_ok=True)
    (profile / "user" / "registrymodifications.xcu").write_text(PROFILE)
    out.mkdir(parents=True, exist_ok=True)
    for workbook, pages in PAGES.items():
        subprocess.run([shutil.which("soffice"), "--headless", "--norestore",
                        f"-env:UserInstallation={profile.as_uri()}", "--convert-to", "pdf", "--outdir",
                        str(folder), str(folder / workbook)], check=True, capture_output=True, timeout=600)
        pdf = folder / workbook.replace(".xlsx", ".pdf")
        first_pages = first_page_of_each_sheet(pdf)
        for sheet, name in pages:
            number = first_pages[sheet]
            subprocess.run(["pdftoppm", "-png", "-r", "80", "-singlefile", "-f", str(number), "-l", str(number),
                            str(pdf), str(out / name)], check=True, timeout=120)
            print(f"wrote {out / name}.png")


def first_page_of_each_sheet(pdf: Path) -> dict[str, int]:
    """The page number each sheet starts on, read from the pages' headers (their centre names
    the sheet)."""
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,
                          check=True, timeout=120).stdout
    first: dict[str, int] = {}
    for number, page in enumerate(text.split("\f"), start=1):
        lines = [line for line in page.splitlines() if line.strip()]
        if lines:
            parts = re.split(r"\s{2,}", lines[0].strip())
            first.setdefault(parts[1] if len(parts) >= 3 else parts[0], number)
    return first


def main_script() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    out = parser.parse_args().out
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        write_workbooks(folder)
        print_pages(folder, out)


if __name__ == "__main__":
    main_script()
