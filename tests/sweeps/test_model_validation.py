"""Held-out validation: each GPU predicted from a fit without it, labelled with what its
prediction then rests on, and the same rows whatever the number of worker processes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fleetplan.cli import main
from fleetplan.sweeps.measurements import predictable
from fleetplan.sweeps.model_validation import HOLDOUTS, holdout, holdouts, read_measurements

MEASURED = Path(__file__).resolve().parents[2] / "fleetplan" / "sweeps" / "data" / "measured.csv"


@pytest.fixture(scope="module")
def two_gpus(shipped):
    """A few predictable rows of each model measured on an L40S or an A100."""
    rows = predictable(read_measurements([MEASURED], catalogs=shipped))
    return rows[rows["gpu"].isin(["l40s", "a100-80gb-sxm"])].groupby(["gpu", "model"]).head(3)


def test_each_gpu_is_predicted_from_a_fit_without_it_on_any_number_of_workers(two_gpus, shipped):
    alone = holdout(two_gpus, shipped, "gpu")
    shared = holdouts(two_gpus, shipped, ["gpu"], workers=2)[0]
    assert len(alone) == len(two_gpus) and set(alone["validation"]) == {HOLDOUTS["gpu"]}
    # neither GPU has a measured sibling in these rows: each held out rests on the priors
    assert set(alone["calibration"]) == {"prior"}
    key = ["gpu", "model", "metric", "value", "input_len", "output_len"]
    pd.testing.assert_frame_equal(alone.sort_values(key).reset_index(drop=True),
                                  shared.sort_values(key).reset_index(drop=True))
    assert (alone["ape_pct"] == alone["error_pct"].abs()).all()


def test_a_dimension_with_one_group_holds_nothing_out(two_gpus, shipped):
    one = two_gpus[two_gpus["gpu"] == "l40s"]
    assert holdout(one, shipped, "gpu").empty


@pytest.mark.parametrize("workers", ["0", "-1", "1.5"])
def test_validate_refuses_a_bad_number_of_workers(workers, capsys):
    assert main(["validate", str(MEASURED), "--workers", workers]) == 2
    assert "--workers" in capsys.readouterr().err
