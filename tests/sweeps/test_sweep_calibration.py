"""Sweep rows say how sure they are: the calibration label and error band of their configuration,
the same as ``estimate_cases`` gives for the same configuration, in memory, in Parquet and in the
sweep workbook."""

from __future__ import annotations

import duckdb
import numpy as np
import openpyxl
import pandas as pd
import pyarrow.parquet as pq
import pytest

from fleetplan.exports import write_sweep
from fleetplan.sweeps import estimate_cases, iter_sweep, sweep
from fleetplan.sweeps.efficiencies import CALIBRATION_LABELS, least_sure
from fleetplan.sweeps.uncertainty import error_band_pct, error_bands_path

# One configuration of each label with the shipped catalogs (vllm is the default engine).
GPUS, MODELS, QUANTS = ["mi300x", "h100-sxm"], ["llama-3.1-8b"], ["bf16", "fp8", "fp4"]
AXES = {"tps": [1, 2], "contexts": [512, 4096], "batches": [1, 32]}


@pytest.fixture(scope="module")
def grid():
    return sweep(GPUS, MODELS, QUANTS, **AXES)


@pytest.fixture(scope="module")
def bands():
    return pd.read_csv(error_bands_path()).set_index("calibration")


def _config_labels(frame: pd.DataFrame) -> pd.DataFrame:
    keys = ["gpu", "model", "quant", "tp"]
    return (frame.astype({k: str for k in keys}).astype({"calibration": str})
            .groupby(keys)[["calibration", "error_p10_pct", "error_p90_pct"]].agg(["min", "max"]))


def test_every_label_occurs_and_each_configuration_has_one(grid):
    labels = _config_labels(grid)
    assert set(labels[("calibration", "min")]) == set(CALIBRATION_LABELS)
    for column in ("calibration", "error_p10_pct", "error_p90_pct"):
        assert (labels[(column, "min")] == labels[(column, "max")]).all()


def test_labels_and_bands_match_the_estimate_of_the_same_configuration(grid):
    configs = grid[grid["batch"] == 32].drop_duplicates(["gpu", "quant", "tp"])
    cases = configs[["gpu", "model", "quant", "tp", "batch"]].astype({"gpu": str, "model": str, "quant": str})
    estimated = estimate_cases(cases.assign(input_len=512, output_len=128).reset_index(drop=True))
    assert configs["calibration"].astype(str).tolist() == estimated["calibration"].tolist()
    for column in ("error_p10_pct", "error_p90_pct"):
        np.testing.assert_allclose(configs[column].to_numpy(dtype=float), estimated[column], rtol=1e-6)


def test_bands_are_the_shipped_rows_of_each_label(grid, bands):
    by_label = grid.astype({"calibration": str}).groupby("calibration")[["error_p10_pct", "error_p90_pct"]].first()
    expected = bands.loc[by_label.index, ["error_p10_pct", "error_p90_pct"]]
    np.testing.assert_allclose(by_label.to_numpy(dtype=float), expected.to_numpy(dtype=float), rtol=1e-6)
    assert str(grid["calibration"].dtype) == "category"
    assert list(grid["calibration"].cat.categories) == list(CALIBRATION_LABELS)  # fixed across chunks
    assert grid["error_p90_pct"].dtype == np.float32


def test_streamed_chunks_carry_the_same_labels(grid):
    chunks = pd.concat(iter_sweep(GPUS, MODELS, QUANTS, chunk_rows=7, **AXES), ignore_index=True)
    pd.testing.assert_series_equal(chunks["calibration"], grid["calibration"])
    pd.testing.assert_series_equal(chunks["error_p10_pct"], grid["error_p10_pct"])


@pytest.mark.parametrize(("first", "second", "expected"), [
    ("measured", "measured", "measured"), ("measured", "transferred", "transferred"),
    ("prior", "measured", "prior"), ("transferred", "prior", "prior"),
])
def test_least_sure_of_two_labels(first, second, expected):
    assert least_sure([first], [second]).tolist() == [expected]


def test_a_split_configuration_is_as_sure_as_its_less_sure_replica():
    split = sweep(["mi300x"], ["llama-3.1-8b"], ["fp8"], batches=[8], prefill_gpus=["none", "h100-sxm"])
    labels = dict(zip(split["prefill_gpu"].astype(str), split["calibration"].astype(str)))
    alone = sweep(["h100-sxm"], ["llama-3.1-8b"], ["fp8"], batches=[8])["calibration"].astype(str).iloc[0]
    assert labels["none"] == "measured"
    assert labels["h100-sxm"] == least_sure(["measured"], [alone])[0] != "measured"
    band = error_band_pct([labels["h100-sxm"]])["error_p90_pct"][0]
    assert split.loc[split["prefill_gpu"] == "h100-sxm", "error_p90_pct"].iloc[0] == pytest.approx(band)


def test_parquet_keeps_labels_and_band_units(tmp_path, grid):
    path = write_sweep(grid, tmp_path / "grid.parquet")
    schema = pq.read_schema(path)
    assert schema.field("error_p10_pct").metadata[b"unit"] == b"%"
    assert str(schema.field("calibration").type) == "dictionary<values=string, indices=int32, ordered=0>"
    counts = duckdb.sql(f"SELECT calibration, count(*) AS n FROM read_parquet('{path}') GROUP BY 1").df()
    assert set(counts["calibration"]) == set(CALIBRATION_LABELS)
    assert counts["n"].sum() == len(grid)


def test_workbook_shows_labels_as_text_and_bands_on_the_summary(tmp_path, grid):
    path = write_sweep(grid, tmp_path / "grid.xlsx")
    book = openpyxl.load_workbook(path)
    sheet = book["Sweep"]
    header = [cell.value for cell in sheet[1]]
    column = header.index("Calibration") + 1
    values = {sheet.cell(row=r, column=column).value for r in range(2, sheet.max_row + 1)}
    assert values == set(CALIBRATION_LABELS)
    band = sheet.cell(row=2, column=header.index("Error band, p90 (%)") + 1).value
    assert isinstance(band, float)
    summary = [cell.value for row in book["Summary"].iter_rows() for cell in row]
    assert "Calibration" in summary and set(CALIBRATION_LABELS) & set(summary)
