"""CSV exports quote formula-like text per OWASP and round-trip the numbers."""

from __future__ import annotations

import csv

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.exports import write_sweep
from fleetplan.exports.csv import UNSAFE_LEADING, safe_frame, safe_text, write_csv
from tests.exports.samples import hostile_sweep, synthetic_sweep


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def _read_raw(path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as stream:
        return list(csv.reader(stream))


@pytest.mark.parametrize(("text", "expected"), [
    ('=HYPERLINK("http://x","y")', '\'=HYPERLINK("http://x","y")'),
    ("@SUM(1)", "'@SUM(1)"), ("+1+2", "'+1+2"), ("-2+3", "'-2+3"), ("\tcalc", "'\tcalc"),
    ("\rx", "'\rx"), ("\nx", "'\nx"), ("h100-sxm", "h100-sxm"), ("", ""), ("a=b", "a=b"),
])
def test_safe_text(text, expected):
    assert safe_text(text) == expected


def test_hostile_names_are_quoted_and_numbers_are_not(tmp_path):
    frame = hostile_sweep()
    path = write_sweep(frame, tmp_path / "sweep.csv")
    rows = _read_raw(path)
    header, body = rows[0], rows[1:]
    fields = [field for row in body for field in row]
    assert not [f for f in fields if f.startswith(UNSAFE_LEADING) and not _is_number(f)]  # -17.0 is a number
    assert "'=HYPERLINK(\"http://x\",\"y\")" in fields
    assert "'@SUM(1)" in fields and "'=1/0" in fields and "'-2+3" in fields
    text = path.read_text(encoding="utf-8")
    assert '"\'=HYPERLINK(""http://x"",""y"")"' in text  # quoted, embedded quotes doubled
    back = pd.read_csv(path)
    assert back["tpot_ms"].tolist() == pytest.approx(frame["tpot_ms"].tolist(), rel=1e-7)  # float32 metrics
    assert header == list(frame.columns)


def test_negative_numbers_stay_numbers(tmp_path):
    frame = pd.DataFrame({"label": ["-x", "y"], "delta_usd": [-1.5, 2.0]})
    write_csv(frame, tmp_path / "t.csv")
    back = pd.read_csv(tmp_path / "t.csv")
    assert back["delta_usd"].tolist() == [-1.5, 2.0]
    assert back["label"].tolist() == ["'-x", "y"]


def test_chunks_write_one_header(tmp_path):
    frame = synthetic_sweep()
    halves = [frame.iloc[:10], frame.iloc[10:]]
    write_sweep(iter(halves), tmp_path / "s.csv")
    back = pd.read_csv(tmp_path / "s.csv")
    assert len(back) == len(frame)
    assert back["batch"].tolist() == frame["batch"].tolist()


def test_safe_frame_keeps_categories_unique():
    frame = pd.DataFrame({"name": pd.Categorical(["=a", "'=a", "b"])})
    fixed = safe_frame(frame)["name"]
    assert fixed.cat.categories.is_unique
    assert fixed.tolist()[2] == "b"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=12), min_size=1, max_size=8))
def test_no_field_starts_like_a_formula(tmp_path_factory, names):
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    write_csv(pd.DataFrame({"name": names, "x": range(len(names))}), path)
    fields = [field for row in _read_raw(path)[1:] for field in row[:1]]
    assert not [f for f in fields if f.startswith(UNSAFE_LEADING) and not _is_number(f)]  # -17.0 is a number
    assert fields == [safe_text(name) for name in names]
