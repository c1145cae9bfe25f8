"""Invariants of merging and loading, checked on generated rows."""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.catalogs import load_catalogs
from fleetplan.catalogs.checks import ORIGIN_FILE, ORIGIN_ROW
from fleetplan.catalogs.loader import merge_rows
from fleetplan.errors import CatalogError
from tests.catalogs.conftest import FIXTURE_DATA

KEY = ["gpu", "provider"]
CELLS = ["usd", "instance"]
words = st.sampled_from(["", "a", "b", "c"])


@st.composite
def text_tables(draw, label: str) -> pd.DataFrame:
    keys = draw(st.lists(st.tuples(st.sampled_from(["x", "y", "z"]),
                                   st.sampled_from(["aws", "gcp"])), unique=True, max_size=6))
    rows = [{"gpu": g, "provider": p, "usd": draw(words), "instance": draw(words),
             ORIGIN_FILE: label, ORIGIN_ROW: n} for n, (g, p) in enumerate(keys, start=2)]
    return pd.DataFrame(rows, columns=[*KEY, *CELLS, ORIGIN_FILE, ORIGIN_ROW])


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(KEY).reset_index(drop=True)[[*KEY, *CELLS]].astype(str)


@settings(max_examples=60, deadline=None)
@given(base=text_tables("base.csv"), override=text_tables("mine.csv"))
def test_merging_an_override_twice_equals_merging_it_once(base, override):
    once = merge_rows(base, override, KEY)
    twice = merge_rows(once, override, KEY)
    pd.testing.assert_frame_equal(_sorted(once), _sorted(twice))


@settings(max_examples=60, deadline=None)
@given(base=text_tables("base.csv"), override=text_tables("mine.csv"))
def test_merge_keeps_cells_the_override_leaves_empty(base, override):
    merged = merge_rows(base, override, KEY).set_index(KEY)
    given_cells = override.set_index(KEY)[CELLS]
    old = base.set_index(KEY)[CELLS]
    for key in old.index:
        for column in CELLS:
            mine = given_cells[column].get(key, "")
            expected = mine if mine != "" else old.loc[key, column]
            assert merged.loc[key, column] == expected
    assert set(merged.index) == set(old.index) | set(given_cells.index)


price_rows = st.fixed_dictionaries({
    "gpu": st.sampled_from(["h100-sxm", "a100-80gb-sxm", "mi300x"]),
    "provider": st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True),
    "region": st.sampled_from(["any", "us-east-1", "europe-west4"]),
    "pricing_type": st.sampled_from(["on_demand", "spot", "reserved_1y", "reserved_3y"]),
    "usd_per_gpu_hour": st.floats(0.01, 1000, allow_nan=False),
    "instance": st.text("abcdefgh0123456789.-", min_size=1, max_size=12),
    "includes_host": st.sampled_from(["true", "FALSE", "Yes", "no", "1", "0"]),
    "source": st.just("generated"),
    "as_of": st.dates(dt.date(2000, 1, 1), dt.date.today()).map(dt.date.isoformat),  # not later
})


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(row=price_rows)
def test_a_valid_generated_price_row_always_loads(row):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "generated.csv"
        pd.DataFrame([row]).to_csv(path, index=False)
        prices = load_catalogs([path], data_dir=FIXTURE_DATA).prices
    key = tuple(row[c] for c in ("gpu", "provider", "region", "pricing_type"))
    loaded = prices.set_index(["gpu", "provider", "region", "pricing_type"]).loc[key]
    assert loaded["usd_per_gpu_hour"] == row["usd_per_gpu_hour"]
    assert loaded["as_of"] == row["as_of"]
    assert bool(loaded["includes_host"]) == (row["includes_host"].lower() in ("true", "yes", "1"))


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(row=price_rows, days_ahead=st.integers(1, 20_000))
def test_a_price_row_dated_after_today_never_loads(row, days_ahead):
    later = dt.date.today() + dt.timedelta(days=days_ahead)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "generated.csv"
        pd.DataFrame([{**row, "as_of": later.isoformat()}]).to_csv(path, index=False)
        with pytest.raises(CatalogError, match=r"column as_of: must not be after today"):
            load_catalogs([path], data_dir=FIXTURE_DATA)
