"""Calibration against the shipped published measurements, and the fitting machinery."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from fleetplan.errors import InvalidValueError
from fleetplan.sweeps.fitted_catalog import efficiency_rows
from fleetplan.sweeps.fitting import Fit, FitSpace, fit, priors_only
from fleetplan.sweeps.measurements import (
    REGIMES,
    ape_summary,
    load_measurements,
    predictable,
    release_ids,
    shipped_measurements_path,
)
from fleetplan.sweeps.model_validation import compare, with_efficiency
from fleetplan.sweeps.predictions import MeasurementModel


@pytest.fixture(scope="module")
def measurements():
    return load_measurements()


@pytest.fixture(scope="module")
def compared(measurements, shipped):
    return compare(measurements, shipped)


def test_measurement_names_map_to_catalog_ids(shipped, measurements):
    rows = predictable(measurements)
    assert set(rows["gpu"]) <= set(shipped.gpus.index) and set(rows["model"]) <= set(shipped.models.index)
    assert set(rows["quant"]) | set(rows["kv_quant"]) <= set(shipped.quants.index)
    assert set(rows["engine_id"]) == {"tensorrt-llm", "vllm", "intel-gaudi"}
    assert len(measurements) == 948 and len(rows) == 904
    assert set(rows["regime"]) == set(REGIMES)
    left_out = measurements[measurements["regime"] == ""]
    assert left_out["parallelism"].str.startswith("DEP").all()  # expert-parallel layouts are kept, not predicted
    server = measurements[measurements["scenario"] == "server"]
    assert sorted(server["qps"].unique()) == [2, 4, 8, 16, 32, np.inf]
    assert measurements.loc[measurements["engine_version"] == "0.17", "memory_fraction"].eq(0.95).all()


def test_shipped_catalog_meets_the_in_sample_targets(compared):
    offline = ape_summary(compared[compared["regime"] == "offline"], []).iloc[0]
    assert offline["median_ape_pct"] <= 8.0 and offline["p90_ape_pct"] <= 25.0
    b200 = compared[(compared["gpu"] == "b200") & (compared["quant"] == "fp4")]
    assert ape_summary(b200, []).iloc[0]["median_ape_pct"] <= 12.0
    qwen = compared[(compared["model"] == "qwen3-30b-a3b") & compared["regime"].isin(["offline", "static"])]
    assert ape_summary(qwen, []).iloc[0]["median_ape_pct"] <= 20.0


def test_shipped_catalog_meets_the_pcie_tp8_target(compared):
    pcie = compared[(compared["gpu"] == "a100-80gb-pcie") & (compared["tp"] == 8)]
    assert ape_summary(pcie, []).iloc[0]["median_ape_pct"] <= 15.0


def test_shipped_catalog_meets_the_online_ttft_target(compared):
    server = compared[compared["regime"] == "server"]
    ttft = server[server["metric"] == "ttft_ms"]
    assert ape_summary(ttft, []).iloc[0]["median_ape_pct"] <= 15.0
    # 500 requests offered at once: about half the run's prompts are prefilled ahead of the
    # mean request, whatever the output length (measured 9.1 s for 70B at 467 tokens, 256 or
    # 16 out); counting slots alone gave 2.9-4.6 s
    burst = ttft[np.isinf(ttft["qps"])]
    assert len(burst) == 6 and (burst["ape_pct"] <= 10.0).all()


def test_release_labels_keep_the_newest_release_as_the_reference():
    engines = np.array(["tensorrt-llm"] * 4 + ["vllm", "*"])
    versions = pd.Series(["0.9.0", "0.17", "not stated (1.1-1.2 line)", "1.0", "0.6.7.dev", "0.3"])
    assert release_ids(engines, versions).tolist() == ["tensorrt-llm@0.9", "tensorrt-llm@0.17", "tensorrt-llm",
                                                       "tensorrt-llm", "vllm", "*"]


def test_shipped_catalog_meets_the_online_tpot_target(compared):
    server = compared[compared["regime"] == "server"]
    assert ape_summary(server[server["metric"] == "tpot_ms"], []).iloc[0]["median_ape_pct"] <= 12.0


def test_rows_of_an_older_release_are_predicted_with_that_release_s_fitted_rows(shipped, measurements):
    online = measurements[(measurements["regime"] == "server") & (measurements["metric"] == "tpot_ms")]
    assert set(online["engine_release"]) == {"tensorrt-llm@0.14"}
    efficiency = shipped.efficiency
    release_rows = efficiency[efficiency["engine"] == "tensorrt-llm@0.14"]
    assert set(release_rows["gpu"]) == {"h100-sxm"} and (release_rows["n_points"] > 0).any()
    assert not (release_rows["operator"] == "allreduce").any()  # a release refits no all-reduce
    newest = compare(online.assign(engine_release="tensorrt-llm"), shipped)
    own = compare(online, shipped)
    assert not np.allclose(own["predicted"], newest["predicted"])  # the release's own rows were used
    assert (ape_summary(own, []).iloc[0]["median_ape_pct"]
            < ape_summary(newest, []).iloc[0]["median_ape_pct"])


@pytest.mark.slow
def test_fit_recovers_known_efficiencies_from_synthetic_measurements(shipped, measurements):
    priors = priors_only(shipped)
    rows = predictable(measurements)
    rows = rows[(rows["gpu"] == "h100-sxm") & (rows["regime"] == "offline")].reset_index(drop=True)
    model = MeasurementModel(rows, priors)
    truth = {"gemm_memory": model.constants.gemm_memory * 0.8, "attention_memory": model.constants.attention_memory * 0.8,
             "gemm_compute": model.constants.gemm_compute * 1.3, "expert_memory": model.constants.expert_memory * 0.8}
    noise = np.random.default_rng(7).lognormal(0.0, 0.02, len(rows))
    fitted = fit(rows.assign(value=model.predict(truth) * noise), priors)
    recovered = fitted.space.fields(fitted.theta)
    # The priors pull each factor toward its prior value, the compute factor most (offline H100
    # rows are mostly bandwidth-bound), so recovery is within 10%, not exact.
    for field, value in truth.items():
        assert np.median(recovered[field] / value) == pytest.approx(1.0, abs=0.1), field


def test_fitted_rows_describe_measured_gpus_and_their_siblings(shipped, measurements):
    priors = priors_only(shipped)
    rows = predictable(measurements)
    rows = rows[rows["gpu"] == "mi300x"].reset_index(drop=True)
    space = FitSpace(MeasurementModel(rows, priors))
    table = efficiency_rows(Fit(space, np.zeros(len(space.parameters))), priors, rows, "test")
    assert set(table["gpu"]) == {"mi300x", "mi325x"}  # the CDNA 3 sibling is carried over
    gemm = table[(table["operator"] == "gemm") & (table["engine"] == "vllm")].set_index("precision")
    assert gemm.loc["fp8", "n_points"] == len(rows) and gemm.loc["bf16", "n_points"] == 0
    assert (table.loc[table["gpu"] == "mi325x", "n_points"] == 0).all()
    assert table.loc[table["gpu"] == "mi325x", "notes"].str.contains("transferred from mi300x").all()
    catalogs = with_efficiency(shipped, table)  # zero offsets reproduce the priors exactly
    assert MeasurementModel(rows, catalogs).predict() == pytest.approx(MeasurementModel(rows, priors).predict())


def test_replacing_constants_moves_predictions(shipped, measurements):
    rows = predictable(measurements).head(20)
    model = MeasurementModel(rows, shipped)
    slower = model.predict({"gemm_memory": model.constants.gemm_memory / 2})
    assert (slower <= model.predict() * (1 + 1e-9)).all()
    assert replace(model.constants).gemm_memory is model.constants.gemm_memory


@pytest.mark.parametrize(("column", "value", "message"), [
    ("input_len", "1e308", r"row 3, column input_len: must be a whole number >= 1 and <= 1e\+08"),
    ("output_len", "", r"row 3, column output_len: must be a whole number >= 1 .*, got blank$"),
    ("value", "abc", r"row 3, column value: must be a number > 0 and <= 1e\+12, got 'abc'$"),
    ("value", "-1", r"row 3, column value: must be a number > 0"),
    ("tp", "0", r"row 3, column tp: must be a whole number >= 1 and <= 1024"),
    ("n_gpus", "1.5", r"row 3, column n_gpus: must be a whole number"),
])
def test_a_measurement_number_out_of_range_names_its_row(tmp_path, column, value, message):
    rows = pd.read_csv(shipped_measurements_path(), dtype=str, keep_default_na=False).head(4)
    rows.loc[1, column] = value
    path = tmp_path / "mine.csv"
    rows.to_csv(path, index=False)
    with pytest.raises(InvalidValueError, match=f"^mine.csv {message}"):
        load_measurements(path)


def test_missing_file_and_column_errors(tmp_path):
    with pytest.raises(InvalidValueError, match="measurements file .*nope.csv does not exist"):
        load_measurements(tmp_path / "nope.csv")
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"gpu": ["l40s"]}).to_csv(bad, index=False)
    with pytest.raises(InvalidValueError, match="bad.csv: missing column tp"):
        load_measurements(bad)
