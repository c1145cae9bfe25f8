"""The one converter from Python, numpy and pandas values to JSON-compatible data, value by
value (:func:`jsonable`) or a whole column at once (:func:`jsonable_column`)."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

import numpy as np
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


def jsonable_column(column: pd.Series) -> list[Any]:
    """A column's values as JSON-compatible Python values: numbers and booleans unwrapped at
    once, non-finite numbers and missing text as None, anything else by ``jsonable``.

    >>> jsonable_column(pd.Series([1.5, float("inf"), float("nan")]))
    [1.5, None, None]
    >>> jsonable_column(pd.Series(["a", None], dtype="str")), jsonable_column(pd.Series([2, 3]))
    (['a', None], [2, 3])
    """
    dtype = column.dtype
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_integer_dtype(dtype):
        if not column.hasnans:  # nullable integers with NA take the general path
            return column.tolist()
    if pd.api.types.is_float_dtype(dtype) and isinstance(dtype, np.dtype):
        values = column.to_numpy()
        return np.where(np.isfinite(values), values.astype(object), None).tolist()
    if pd.api.types.is_string_dtype(dtype) and dtype != object:  # pandas' own text dtype
        return column.astype(object).where(column.notna(), None).tolist()
    return [jsonable(value) for value in column.tolist()]
