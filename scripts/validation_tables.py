"""Regenerate the README's calibration tables: the model against the shipped measurements, in
sample and held out (leave-one-GPU-out, leave-one-model-out), by regime, GPU, engine and
precision, the slices the project tracks, and the error bands estimates report.

Runs ``fleetplan.sweeps.model_validation`` (the held-out part refits the efficiencies once per
GPU and per model: minutes) and rewrites the part of README.md between the
``<!-- validation-tables:start -->`` and ``<!-- validation-tables:end -->`` markers. With
``--csv PATH`` it also writes the long error table (``model_validation.error_tables``).

Usage: python scripts/validation_tables.py [--csv tables.csv] [--no-readme]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from fleetplan.catalogs import load_catalogs
from fleetplan.sweeps.measurements import ape_summary, load_measurements, predictable
from fleetplan.sweeps.model_validation import compare, error_bands, error_tables, holdout
from fleetplan.sweeps.uncertainty import shipped_error_bands

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
START, END = "<!-- validation-tables:start -->", "<!-- validation-tables:end -->"
ORDER = ("in sample", "leave-one-GPU-out", "leave-one-model-out")
THROUGHPUT = ("offline", "static")
SLICES = {  # name -> row filter
    "B200 FP4 (offline and static throughput)": lambda f: (f["gpu"] == "b200") & (f["quant"] == "fp4"),
    "Qwen3-30B-A3B (throughput)": lambda f: (f["model"] == "qwen3-30b-a3b") & f["regime"].isin(THROUGHPUT),
    "A100-PCIe at TP8": lambda f: (f["gpu"] == "a100-80gb-pcie") & (f["tp"] == 8),
    "gpt-oss-20b/120b (throughput)": lambda f: f["model"].str.startswith("gpt-oss") & f["regime"].isin(THROUGHPUT),
    "online TPOT (fixed rates)": lambda f: (f["regime"] == "server") & (f["metric"] == "tpot_ms"),
    "online TTFT (fixed rates)": lambda f: (f["regime"] == "server") & (f["metric"] == "ttft_ms"),
}


def markdown(frame: pd.DataFrame) -> str:
    """A pipe table of ``frame`` (index dropped)."""
    cells = frame.astype(object).where(frame.notna(), "")
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in cells.to_numpy()]
    return "\n".join(lines)


def _cell(part: pd.DataFrame) -> str:
    if part.empty:
        return ""
    summary = ape_summary(part, []).iloc[0]
    return f"{summary['median_ape_pct']:.1f}% / {summary['p90_ape_pct']:.1f}%"


def wide(everything: pd.DataFrame, key: str, rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """Median / p90 absolute error by ``key`` (rows) and validation (columns), with row counts."""
    frame = everything if rows is None else rows
    out = []
    for value, part in frame.groupby(key, sort=True):
        record = {key: value, "rows": int((part["validation"] == "in sample").sum())}
        record.update({v: _cell(part[part["validation"] == v]) for v in ORDER})
        out.append(record)
    return pd.DataFrame(out)


def tables(everything: pd.DataFrame) -> str:
    """The README section: every table with a one-line heading."""
    throughput = everything[everything["regime"].isin(THROUGHPUT)]
    regimes = everything.assign(regime_metric=everything["regime"] + " " + everything["metric"])
    slices = pd.DataFrame([{"slice": name, "rows": int((chosen(everything) & (everything["validation"] == "in sample")).sum()),
                            **{v: _cell(everything[chosen(everything) & (everything["validation"] == v)]) for v in ORDER}}
                           for name, chosen in SLICES.items()])
    bands = shipped_error_bands().reset_index()
    parts = [
        "Median / p90 absolute error of predicted vs measured, by regime and metric:", markdown(wide(regimes, "regime_metric")),
        "Throughput (offline and static) by GPU:", markdown(wide(throughput, "gpu")),
        "Throughput by engine:", markdown(wide(throughput, "engine_id")),
        "Throughput by weight precision:", markdown(wide(throughput, "quant")),
        "Slices:", markdown(slices),
        ("Error bands estimates report (signed error of held-out throughput rows, % over-predicted; "
         "`fleetplan/sweeps/data/error_bands.csv`):"),
        markdown(bands[["calibration", "rows", "error_p10_pct", "error_p50_pct", "error_p90_pct", "validation"]]),
    ]
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=None, help="also write the long error table here")
    parser.add_argument("--no-readme", action="store_true", help="print only")
    args = parser.parse_args()
    catalogs = load_catalogs()
    measurements = load_measurements(catalogs=catalogs)
    rows = predictable(measurements)
    everything = pd.concat([compare(measurements, catalogs).assign(validation="in sample"),
                            holdout(rows, catalogs, "gpu"), holdout(rows, catalogs, "model")], ignore_index=True)
    section = tables(everything)
    print(section)
    print("\nbands from these held-out rows:\n" + error_bands(everything[everything["validation"] != "in sample"])
          .to_string(index=False))
    if args.csv is not None:
        error_tables(everything).to_csv(args.csv, index=False)
    if not args.no_readme:
        text = README.read_text(encoding="utf-8")
        head, rest = text.split(START, 1)
        _, tail = rest.split(END, 1)
        README.write_text(f"{head}{START}\n{section}\n{END}{tail}", encoding="utf-8")
        print(f"\nrewrote the tables in {README.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
