"""Atomic writes: a failed export leaves no partial output and keeps an existing good file."""

from __future__ import annotations

import os
import stat

import pandas as pd
import pyarrow.parquet as pq
import pytest

from fleetplan.errors import InvalidValueError
from fleetplan.exports import write_sweep
from fleetplan.exports.atomic import (
    OUTPUT_MARKER,
    atomic_dir,
    atomic_open,
    atomic_path,
    write_text_atomic,
)
from tests.exports.samples import synthetic_sweep


class Boom(RuntimeError):
    pass


def _failing_chunks(good: pd.DataFrame, after: int = 1):
    for number in range(after):
        yield good
    raise Boom("the sweep engine failed midway")


def test_atomic_open_replaces_only_on_success(tmp_path):
    target = tmp_path / "out.txt"
    write_text_atomic(target, "good")
    with pytest.raises(Boom), atomic_open(target, "w") as stream:
        stream.write("partial")
        raise Boom
    assert target.read_text() == "good"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_atomic_path_gives_normal_permissions(tmp_path):
    target = tmp_path / "out.bin"
    with atomic_path(target) as temporary:
        temporary.write_bytes(b"x")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".xlsx"])
def test_failed_sweep_export_keeps_existing_file(tmp_path, suffix):
    target = tmp_path / f"sweep{suffix}"
    good = synthetic_sweep()
    write_sweep(good, target)
    before = target.read_bytes()
    with pytest.raises(Boom):
        write_sweep(_failing_chunks(good), target)
    assert target.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == [target.name]


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".xlsx"])
def test_failed_sweep_export_leaves_nothing(tmp_path, suffix):
    with pytest.raises(Boom):
        write_sweep(_failing_chunks(synthetic_sweep(), after=2), tmp_path / f"sweep{suffix}")
    assert os.listdir(tmp_path) == []


def test_failed_partitioned_export_keeps_existing_folder(tmp_path):
    target = tmp_path / "sweep"
    good = synthetic_sweep()
    write_sweep(good, target.with_suffix(".parquet"), partition_by=["gpu"])
    folder = target.with_suffix(".parquet")
    files_before = sorted(p.relative_to(folder) for p in folder.rglob("*.parquet"))
    with pytest.raises(Boom):
        write_sweep(_failing_chunks(good), folder, partition_by=["gpu"])
    assert sorted(p.relative_to(folder) for p in folder.rglob("*.parquet")) == files_before
    assert pq.read_table(folder).num_rows == len(good)
    assert os.listdir(tmp_path) == [folder.name]


def test_atomic_dir_replaces_existing_folder(tmp_path):
    target = tmp_path / "tables"
    with atomic_dir(target) as folder:
        (folder / "old.txt").write_text("old")
    with atomic_dir(target) as folder:
        (folder / "new.txt").write_text("new")
    assert sorted(os.listdir(target)) == [OUTPUT_MARKER, "new.txt"]
    assert os.listdir(tmp_path) == ["tables"]


def test_atomic_dir_never_replaces_a_folder_it_did_not_write(tmp_path):
    target = tmp_path / "data"
    target.mkdir()
    (target / "precious.txt").write_text("keep me")
    with pytest.raises(InvalidValueError, match="already exists and is not a fleetplan output"):
        with atomic_dir(target) as folder:
            (folder / "new.txt").write_text("new")
    assert sorted(os.listdir(target)) == ["precious.txt"]
    assert os.listdir(tmp_path) == ["data"]
    (tmp_path / "empty").mkdir()
    with atomic_dir(tmp_path / "empty") as folder:
        (folder / "new.txt").write_text("new")
    assert (tmp_path / "empty" / "new.txt").is_file()


def test_missing_output_folder_is_one_line_error(tmp_path):
    with pytest.raises(InvalidValueError, match="output folder .* does not exist"):
        write_sweep(synthetic_sweep(), tmp_path / "nope" / "sweep.csv")


def test_folder_as_file_target_is_refused(tmp_path):
    (tmp_path / "x.csv").mkdir()
    with pytest.raises(InvalidValueError, match="is a folder"):
        write_sweep(synthetic_sweep(), tmp_path / "x.csv")


def test_file_as_folder_target_is_refused(tmp_path):
    (tmp_path / "x.parquet").write_text("not a folder")
    with pytest.raises(InvalidValueError, match="is a file"):
        write_sweep(synthetic_sweep(), tmp_path / "x.parquet", partition_by=["gpu"])
    with pytest.raises(InvalidValueError, match="does not exist"):
        with atomic_dir(tmp_path / "missing" / "x"):
            pass


def test_workbook_failing_while_zipping_keeps_existing_file(tmp_path, monkeypatch):
    from fleetplan.exports.xlsx_rows import BulkSheet

    target = tmp_path / "sweep.xlsx"
    write_sweep(synthetic_sweep(), target)
    before = target.read_bytes()
    real_blocks = BulkSheet.row_blocks

    def fail_after_first_block(self):
        blocks = real_blocks(self)
        yield next(blocks)
        raise Boom("disk full")

    monkeypatch.setattr(BulkSheet, "row_blocks", fail_after_first_block)
    with pytest.raises(Boom):
        write_sweep(synthetic_sweep(), target)
    assert target.read_bytes() == before
    assert os.listdir(tmp_path) == ["sweep.xlsx"]
