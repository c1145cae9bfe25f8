"""Calibration against the shipped published measurements, and the fitting machinery."""

import numpy as np
import pandas as pd
import pytest

from fleetplan.errors import InvalidValueError
from fleetplan.sweeps.fitting import FACTORS, constant_factors, fit_factors
from fleetplan.sweeps.measurements import (
    ape_summary,
    load_measurements,
    offline_throughput_rows,
    predict_offline,
)


@pytest.fixture(scope="module")
def offline_rows():
    return offline_throughput_rows(load_measurements())


def test_measurement_names_map_to_catalog_ids(shipped, offline_rows):
    measurements = load_measurements()
    assert set(measurements["gpu"]) <= set(shipped.gpus.index)
    assert set(measurements["model"]) <= set(shipped.models.index)
    assert set(measurements["quant"]) | set(measurements["kv_quant"]) <= set(shipped.quants.index)
    assert len(offline_rows) == 230
    server = measurements[measurements["scenario"] == "server"]
    assert sorted(server["qps"].unique()) == [2, 4, 8, 16, 32, np.inf]


def test_shipped_factors_predict_published_throughput_within_target(shipped, offline_rows):
    frame = offline_rows.assign(predicted=predict_offline(offline_rows, shipped))
    summary = ape_summary(frame, []).iloc[0]
    assert summary["rows"] == 230
    assert summary["median_ape_pct"] < 15.0
    assert summary["p90_ape_pct"] < 40.0


@pytest.mark.slow
def test_fit_recovers_known_factors_from_synthetic_noisy_measurements(shipped, offline_rows):
    rows = offline_rows[offline_rows["gpu"] == "h100-sxm"].reset_index(drop=True)
    truth = {"mbu": 0.62, "mfu": 0.45, "mfu_prefill": 0.6, "step_overhead_ms": 1.5, "tp_scaling": 0.8,
             "request_overhead_ms": 0.0}
    clean = predict_offline(rows, shipped, constant_factors(rows, [truth[name] for name in FACTORS]))
    noise = np.random.default_rng(7).lognormal(0.0, 0.03, len(rows))
    fitted = fit_factors(rows.assign(value=clean * noise), shipped)
    for name in ("mbu", "mfu", "mfu_prefill", "tp_scaling"):
        assert fitted[name] == pytest.approx(truth[name], rel=0.1), name
    assert list(fitted) == FACTORS


def test_missing_file_and_column_errors(tmp_path):
    with pytest.raises(InvalidValueError, match="measurements file .*nope.csv does not exist"):
        load_measurements(tmp_path / "nope.csv")
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"gpu": ["l40s"]}).to_csv(bad, index=False)
    with pytest.raises(InvalidValueError, match="bad.csv: missing column tp"):
        load_measurements(bad)
