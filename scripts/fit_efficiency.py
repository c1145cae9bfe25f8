"""Fit the efficiency factors (MBU, MFU, step overhead) to published measurements.

Writes ``fleetplan/catalogs/data/efficiency.csv`` and prints the calibration report quoted in the
README: median and 90th-percentile absolute percentage error of predicted vs measured offline
output tokens/s, before fitting (priors), after fitting per (GPU, precision), and leave-one-GPU-out
(factors fitted on the other GPUs, predicting a GPU the fit never saw).

Usage: python scripts/fit_efficiency.py [--measurements CSV] [--write]
"""

from __future__ import annotations

import argparse
import logging
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from fleetplan.catalogs import load_catalogs
from fleetplan.sweeps.calibration import ape_summary, load_measurements, offline_throughput_rows, predict_offline

PRIOR = {"mbu": 0.7, "mfu": 0.5, "step_overhead_ms": 0.5, "tp_scaling": 0.9}
# Prior spread in log space for the fractions, and in ms for the overhead: wide enough that data
# dominates where there is any, tight enough to keep thin groups near the seed's values.
PRIOR_SIGMA = {"mbu": 0.5, "mfu": 0.5, "step_overhead_ms": 2.0, "tp_scaling": 0.2}
BOUNDS = ([0.2, 0.1, 0.0, 0.5], [0.95, 0.95, 10.0, 1.0])
FACTORS = list(PRIOR)
EFFICIENCY_CSV = Path(__file__).resolve().parents[1] / "fleetplan" / "catalogs" / "data" / "efficiency.csv"
log = logging.getLogger("fit_efficiency")


def residuals(theta, rows, catalogs) -> np.ndarray:
    predicted = predict_offline(rows, catalogs, constant_factors(rows, theta))
    data = np.log(predicted / rows["value"].to_numpy())
    prior = [np.log(theta[i] / PRIOR[name]) / PRIOR_SIGMA[name] if name in ("mbu", "mfu")
             else (theta[i] - PRIOR[name]) / PRIOR_SIGMA[name] for i, name in enumerate(FACTORS)]
    return np.concatenate([data, prior])


def fit(rows: pd.DataFrame, catalogs) -> np.ndarray:
    start = [PRIOR[name] for name in FACTORS]
    return least_squares(residuals, start, bounds=BOUNDS, args=(rows, catalogs), diff_step=1e-3).x


def with_prediction(rows, catalogs, theta_by_row: pd.DataFrame) -> pd.DataFrame:
    out = rows.copy()
    out["predicted"] = predict_offline(rows, catalogs, theta_by_row)
    return out


def constant_factors(rows, theta) -> pd.DataFrame:
    return pd.DataFrame({name: theta[i] for i, name in enumerate(FACTORS)}, index=rows.index)


def fit_groups(rows, catalogs) -> pd.DataFrame:
    fitted = []
    for (gpu, quant), group in rows.groupby(["gpu", "quant"]):
        theta = fit(group, catalogs)
        fitted.append({"gpu": gpu, "precision": catalogs.quants.loc[quant, "compute_precision"],
                       **dict(zip(FACTORS, theta)), "n_points": len(group)})
    return pd.DataFrame(fitted)


def leave_one_gpu_out(rows, catalogs) -> pd.DataFrame:
    held_out = []
    for gpu in sorted(rows["gpu"].unique()):
        train, test = rows[rows["gpu"] != gpu], rows[rows["gpu"] == gpu]
        held_out.append(with_prediction(test, catalogs, constant_factors(test, fit(train, catalogs))))
    return pd.concat(held_out, ignore_index=True)


def efficiency_table(groups: pd.DataFrame, pooled: np.ndarray, n_rows: int, source: str) -> pd.DataFrame:
    per_gpu = groups.assign(precision="*")  # a fitted GPU's factors also serve its other precisions
    default = pd.DataFrame([{"gpu": "*", "precision": "*", **dict(zip(FACTORS, pooled)), "n_points": n_rows}])
    table = pd.concat([groups, per_gpu, default], ignore_index=True)
    table = table[["gpu", "precision", *FACTORS, "n_points"]]
    table[["mbu", "mfu", "tp_scaling"]] = table[["mbu", "mfu", "tp_scaling"]].round(3)
    table["step_overhead_ms"] = table["step_overhead_ms"].round(2)
    table["source"] = source
    table["as_of"] = date.today().isoformat()
    table["notes"] = np.where(table["gpu"] == "*", "pooled fit over all GPUs; used for GPUs without data",
                              np.where(table["precision"] == "*", "this GPU's fit, applied to its other precisions",
                                       "fitted per GPU and precision"))
    return table


def report(title: str, frame: pd.DataFrame) -> None:
    overall = ape_summary(frame, [])
    print(f"\n{title}: median {overall['median_ape_pct'].iloc[0]:.1f}% | p90 {overall['p90_ape_pct'].iloc[0]:.1f}% "
          f"over {int(overall['rows'].iloc[0])} rows")
    print(ape_summary(frame, ["gpu"]).round(1).to_string())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measurements", type=Path, default=None)
    parser.add_argument("--write", action="store_true", help="write the fitted efficiency.csv")
    args = parser.parse_args()
    catalogs = load_catalogs()
    rows = offline_throughput_rows(load_measurements(args.measurements))
    prior = with_prediction(rows, catalogs, constant_factors(rows, list(PRIOR.values())))
    groups = fit_groups(rows, catalogs)
    per_row = rows.merge(groups.rename(columns={"precision": "fit_precision"}), on="gpu", how="left")
    fitted = with_prediction(rows, catalogs, per_row[FACTORS])
    report("before fitting (priors MBU 0.7, MFU 0.5, overhead 0.5 ms, TP scaling 0.9)", prior)
    report("fitted per GPU and precision (in sample)", fitted)
    report("leave-one-GPU-out (pooled fit on the other GPUs)", leave_one_gpu_out(rows, catalogs))
    print("\nfitted factors:\n" + groups.round(3).to_string(index=False))
    if args.write:
        source = "scripts/fit_efficiency.py fit to fleetplan/sweeps/data/measured.csv (TensorRT-LLM v0.17 offline table)"
        table = efficiency_table(groups, fit(rows, catalogs), len(rows), source)
        table.to_csv(EFFICIENCY_CSV, index=False)
        print(f"\nwrote {EFFICIENCY_CSV}")


if __name__ == "__main__":
    main()
