"""The one converter from Python, numpy and pandas values to JSON-compatible data."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

import pandas as pd


def jsonable(value: Any) -> Any:
    """``value`` as JSON-compatible data: numpy scalars unwrapped, NaN/inf/NA as ``None``, dates
    and paths as text, mappings and sequences converted item by item.

    >>> jsonable({"a": float("nan"), "b": (1, 2.5)})
    {'a': None, 'b': [1, 2.5]}
    """
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(item) for item in value]
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)
