"""Fit the per-operator efficiencies to the shipped measurements and write the catalog rows and
the calibration error bands.

1. Fits every predictable row of ``fleetplan/sweeps/data/measured.csv`` from the documented
   priors of ``fleetplan/catalogs/data/efficiency.csv`` (``fleetplan.sweeps.fitting``), and with
   ``--write`` replaces the fitted rows of that file (the priors stay).
2. Predicts every row again, held out: leave-one-GPU-out and leave-one-model-out
   (``fleetplan.sweeps.model_validation.holdout``), and with ``--write`` writes
   ``fleetplan/sweeps/data/error_bands.csv``: p10/p50/p90 of the signed relative error of
   held-out throughput rows by the calibration label they rest on, which ``estimate_cases``
   reports next to every estimate.

Usage: python scripts/fit_efficiency.py [--write]
"""

from __future__ import annotations

import argparse
import logging
from datetime import date
from pathlib import Path

import pandas as pd

from fleetplan.catalogs import load_catalogs
from fleetplan.sweeps.fitted_catalog import efficiency_rows
from fleetplan.sweeps.fitting import fit, priors_only
from fleetplan.sweeps.measurements import (
    ape_summary,
    load_measurements,
    predictable,
    shipped_measurements_path,
)
from fleetplan.sweeps.model_validation import error_bands, holdout

ROOT = Path(__file__).resolve().parents[1]
EFFICIENCY_CSV = ROOT / "fleetplan" / "catalogs" / "data" / "efficiency.csv"
ERROR_BANDS_CSV = ROOT / "fleetplan" / "sweeps" / "data" / "error_bands.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write efficiency.csv and error_bands.csv")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    catalogs = load_catalogs()
    priors = priors_only(catalogs)
    rows = predictable(load_measurements(catalogs=priors))
    source = (f"scripts/fit_efficiency.py fit to fleetplan/sweeps/data/measured.csv ({len(rows)} predictable rows) "
              "from the * priors")
    result = fit(rows, priors)
    fitted = efficiency_rows(result, priors, rows, source, date.today().isoformat())
    print(f"fitted {len(result.theta)} offsets to {len(rows)} rows; {len(fitted)} catalog rows")
    print(result.offsets().round(3).to_string())
    held_out = pd.concat([holdout(rows, catalogs, "gpu"), holdout(rows, catalogs, "model")], ignore_index=True)
    bands = error_bands(held_out)
    print("\nheld-out throughput errors by calibration label (%):\n" + bands.to_string(index=False))
    for name, part in held_out.groupby("validation"):
        print(f"\n{name}:\n" + ape_summary(part, ["regime", "metric"]).round(1).to_string())
    if args.write:
        table = pd.concat([priors.efficiency, fitted], ignore_index=True)
        table.to_csv(EFFICIENCY_CSV, index=False, lineterminator="\n")
        bands.assign(source=f"scripts/fit_efficiency.py on {shipped_measurements_path().name}",
                     as_of=date.today().isoformat()).to_csv(ERROR_BANDS_CSV, index=False, lineterminator="\n")
        print(f"\nwrote {EFFICIENCY_CSV.relative_to(ROOT)} and {ERROR_BANDS_CSV.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
