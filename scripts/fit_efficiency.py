"""Fit the efficiency factors (MBU, MFU, step overhead, TP scaling) to published measurements.

Writes ``fleetplan/catalogs/data/efficiency.csv`` (with --write) and prints the calibration report
quoted in the README: median and 90th-percentile absolute percentage error of predicted vs
measured offline output tokens/s, before fitting (priors), after fitting per (GPU, precision),
and leave-one-GPU-out (factors fitted on the other GPUs, predicting a GPU the fit never saw), by
metric and, for offline throughput, as the median signed error per GPU and TP degree.

Usage: python scripts/fit_efficiency.py [--measurements CSV] [--write]
"""

from __future__ import annotations

import argparse
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

from fleetplan.catalogs import load_catalogs
from fleetplan.sweeps.measurements import ape_summary, load_measurements, predictable
from fleetplan.sweeps.fitting import (FACTORS, PRIOR, constant_factors, factors_for_rows, fit_by_gpu, fit_factors,
                                      leave_one_gpu_out, with_prediction)

EFFICIENCY_CSV = Path(__file__).resolve().parents[1] / "fleetplan" / "catalogs" / "data" / "efficiency.csv"
SOURCE = ("scripts/fit_efficiency.py fit to fleetplan/sweeps/data/measured.csv (TensorRT-LLM v0.17 offline "
          "and v0.14 online-serving tables)")


def efficiency_table(groups: pd.DataFrame, pooled: dict, n_rows: int) -> pd.DataFrame:
    # A fitted GPU's best-supported precision also serves its other precisions.
    per_gpu = groups.sort_values("n_points").drop_duplicates("gpu", keep="last").assign(precision="*")
    default = pd.DataFrame([{"engine": "*", "gpu": "*", "precision": "*", **pooled, "n_points": n_rows}])
    table = pd.concat([groups, per_gpu, default], ignore_index=True)[
        ["engine", "gpu", "precision", *FACTORS, "n_points"]]
    table[["mbu", "mfu", "mfu_prefill", "tp_scaling"]] = table[["mbu", "mfu", "mfu_prefill", "tp_scaling"]].round(3)
    table[["step_overhead_ms", "request_overhead_ms"]] = table[["step_overhead_ms", "request_overhead_ms"]].round(2)
    table["source"], table["as_of"] = SOURCE, date.today().isoformat()
    table["notes"] = np.where(table["gpu"] == "*", "pooled fit over all GPUs; used for GPUs without data",
                              np.where(table["precision"] == "*", "this GPU's fit, applied to its other precisions",
                                       "fitted per GPU and precision"))
    return table


def report(title: str, frame: pd.DataFrame) -> None:
    overall = ape_summary(frame, []).iloc[0]
    print(f"\n{title}: median {overall['median_ape_pct']:.1f}% | p90 {overall['p90_ape_pct']:.1f}% "
          f"over {int(overall['rows'])} rows")
    print(ape_summary(frame, ["gpu", "metric"]).round(1).to_string())


def report_bias(title: str, frame: pd.DataFrame) -> None:
    """Median signed error of the offline rows by GPU and TP degree [%]: + = over-predicted."""
    offline = frame[(frame["scenario"] == "offline") & (frame["metric"] == "output_tok_s")]
    signed = (offline["predicted"] / offline["value"] - 1.0) * 100.0
    table = signed.groupby([offline["gpu"], offline["tp"]]).agg(["size", "median"])
    print(f"\n{title}, median signed error by GPU and TP (%):\n"
          + table.rename(columns={"size": "rows", "median": "median_error_pct"}).round(1).to_string())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measurements", type=Path, default=None)
    parser.add_argument("--write", action="store_true", help="write the fitted efficiency.csv")
    args = parser.parse_args()
    catalogs = load_catalogs()
    rows = predictable(load_measurements(args.measurements))
    groups = fit_by_gpu(rows, catalogs)
    per_row = factors_for_rows(rows, groups, catalogs)
    report("before fitting (priors MBU 0.7, MFU 0.5, overhead 0.5 ms, TP scaling 0.9)",
           with_prediction(rows, catalogs, constant_factors(rows, list(PRIOR.values()))))
    report("fitted per GPU and precision (in sample)", with_prediction(rows, catalogs, per_row))
    held_out = leave_one_gpu_out(rows, catalogs)
    report("leave-one-GPU-out (pooled fit on the other GPUs)", held_out)
    print(ape_summary(held_out, ["metric"]).round(1).to_string())
    report_bias("leave-one-GPU-out, offline output tokens/s", held_out)
    print("\nfitted factors:\n" + groups.round(3).to_string(index=False))
    if args.write:
        efficiency_table(groups, fit_factors(rows, catalogs), len(rows)).to_csv(EFFICIENCY_CSV, index=False)
        print(f"\nwrote {EFFICIENCY_CSV}")


if __name__ == "__main__":
    main()
