"""Sweeps on Dask: an in-process cluster writes the same rows as the single-process sweep."""

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
import pytest

from fleetplan.errors import InvalidValueError
from fleetplan.sweeps import SWEEP_COLUMNS, sweep
from fleetplan.sweeps.sweep_grid import make_grid

distributed = pytest.importorskip("distributed")
AXES = {"gpus": ["h100-sxm", "l40s"], "models": ["llama-3.1-8b", "mixtral-8x7b"], "quants": ["bf16", "fp8"],
        "tps": [1, 2], "contexts": [512, 4096], "batches": [1, 16, 128]}
LABELS = [name for name, column in SWEEP_COLUMNS.items() if column.dtype == "category"]


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, processes=False, dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as connected:
        yield connected


def comparable(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.astype({name: str for name in LABELS})
    keys = ["gpu", "model", "quant", "tp", "context_len", "batch"]
    return frame[sorted(frame.columns)].sort_values(keys).reset_index(drop=True)


def test_dask_dataset_equals_the_local_sweep(tmp_path, client):
    from fleetplan.exports.sweep_dataset import sweep_dataset

    grid = make_grid(AXES["gpus"], AXES["models"], AXES["quants"], tps=AXES["tps"], contexts=AXES["contexts"],
                     batches=AXES["batches"])
    path = tmp_path / "grid"
    rows = sweep_dataset(grid, path, metadata={"test": True}, chunk_rows=5, client=client)
    local = sweep(**AXES)
    assert rows == len(local) == grid.n_rows
    folders = sorted(p.relative_to(path).as_posix() for p in path.glob("*/*"))
    assert folders == ["gpu=h100-sxm/model=llama-3.1-8b", "gpu=h100-sxm/model=mixtral-8x7b",
                       "gpu=l40s/model=llama-3.1-8b", "gpu=l40s/model=mixtral-8x7b"]
    read = ds.dataset(path, format="parquet", partitioning="hive").to_table().to_pandas()
    pd.testing.assert_frame_equal(comparable(read), comparable(local), check_dtype=False)


def test_partitions_are_contiguous_config_ranges():
    grid = make_grid(["h100-sxm", "l40s"], ["llama-3.1-8b", "mistral-7b"], ["bf16", "fp8"], tps=[1, 2])
    parts = grid.partitions()
    assert [p[0] for p in parts][:2] == [{"gpu": "h100-sxm", "model": "llama-3.1-8b"},
                                         {"gpu": "h100-sxm", "model": "mistral-7b"}]
    assert [(s.start, s.stop) for _, s in parts] == [(0, 4), (4, 8), (8, 12), (12, 16)]
    assert np.all(grid.configs.loc[0:3, "model"] == "llama-3.1-8b")


def test_local_cluster_needs_workers():
    from fleetplan.sweeps.distributed import dask_client

    with pytest.raises(InvalidValueError, match="workers must be >= 1 to start a local Dask cluster, got 0"), \
            dask_client(workers=0):
        pass


def test_cli_on_a_scheduler_from_the_environment(tmp_path, capsys, monkeypatch):
    from fleetplan.cli import main

    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster:
        monkeypatch.setenv("FLEETPLAN_SCHEDULER", cluster.scheduler_address)
        code = main(["sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b,mistral-7b", "--batch", "1-8",
                     "-o", str(tmp_path / "out")])
        assert code == 0, capsys.readouterr().err
    read = ds.dataset(tmp_path / "out", format="parquet", partitioning="hive").to_table()
    assert read.num_rows == 2 * 4
    assert main(["sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--workers", "1"]) == 2
    assert "give -o FOLDER" in capsys.readouterr().err
