"""Input validation for the engine's public functions: ids, numeric axes and ranges.

Kept apart from the maths: the kernel marks infeasible points, this module raises for bad input
with one-line messages that name the field.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs, load_catalogs
from fleetplan.errors import InvalidValueError, UnknownNameError, did_you_mean
from fleetplan.sweeps.assumptions import LEVER_RANGES

_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*(?::\s*(\d+)\s*)?$")


def catalog_or_default(catalogs: Catalogs | None) -> Catalogs:
    """The given catalogs, or the shipped ones."""
    if catalogs is not None:
        return catalogs

    return load_catalogs()


def resolve_ids(catalogs: Catalogs, kind: str, names, *, field: str | None = None) -> list[str]:
    """Canonical ids for ``names`` of ``kind``; unknown ones raise with 'did you mean'."""
    if isinstance(names, str):
        names = [names]
    names = list(names)
    if not names:
        message = f"{field or kind + 's'} must name at least one {kind}"
        raise InvalidValueError(message)
    return list(dict.fromkeys(catalogs.require(kind, names)))


def parse_axis(text: str) -> list[int]:
    """Integers from a CLI axis: ``"1,2,8"``, ``"1-512"`` (powers of two), ``"128-4096:128"`` (step).

    >>> parse_axis("1-16"), parse_axis("100-300:100"), parse_axis("7,1")
    ([1, 2, 4, 8, 16], [100, 200, 300], [7, 1])
    """
    values: list[int] = []
    for part in str(text).split(","):
        match = _RANGE.match(part)
        if match:
            values += _expand_range(part, *match.groups())
        elif part.strip().lstrip("+").isdigit():
            values.append(int(part))
        else:
            message = f"'{part.strip()}' is not a whole number or a range such as 1-512 or 128-4096:128"
            raise InvalidValueError(message)
    return values


def _expand_range(text: str, low: str, high: str, step: str | None) -> list[int]:
    low_value, high_value = int(low), int(high)
    if low_value < 1 or high_value < low_value or (step is not None and int(step) < 1):
        message = f"range '{text.strip()}' must go from a positive start up to an end >= start"
        raise InvalidValueError(message)
    if step is not None:
        return list(range(low_value, high_value + 1, int(step)))
    values, value = [], low_value
    while value <= high_value:
        values.append(value)
        value *= 2
    if values[-1] != high_value:
        values.append(high_value)
    return values


def axis_values(field: str, values, *, low: int = 1, high: int) -> np.ndarray:
    """A validated integer axis: non-empty, whole numbers in ``[low, high]``, duplicates removed."""
    if isinstance(values, str):
        values = parse_axis(values)
    array = np.atleast_1d(np.asarray(values, dtype=float))
    if array.size == 0:
        message = f"{field} must hold at least one value"
        raise InvalidValueError(message)
    bad = ~np.isfinite(array) | (array != np.round(array)) | (array < low) | (array > high)
    if bad.any():
        message = f"{field} must be whole numbers from {low} to {high:,}, got {array[bad][0]:g}"
        raise InvalidValueError(message)
    return np.asarray(list(dict.fromkeys(array.astype(np.int64).tolist())), dtype=np.int64)


def lever_values(name: str, values) -> np.ndarray:
    """A validated lever axis (see ``assumptions.LEVER_RANGES``), duplicates removed."""
    low, high, integer = LEVER_RANGES[name]
    array = np.atleast_1d(np.asarray(values, dtype=float))
    bad = ~np.isfinite(array) | (array < low) | (array > high) | (integer & (array != np.round(array)))
    if array.size == 0 or bad.any():
        shown = "nothing" if array.size == 0 else f"{array[bad][0]:g}"
        kind = "whole numbers" if integer else "numbers"
        message = f"{name} must be {kind} from {low:g} to {high:g}, got {shown}"
        raise InvalidValueError(message)
    return np.asarray(list(dict.fromkeys(array.tolist())), dtype=float)


COLOCATED = "none"  # the prefill_gpus value of a configuration without a separate prefill replica


def prefill_pairs(catalogs: Catalogs, prefill_gpus, prefill_tps) -> pd.DataFrame | None:
    """The disaggregation axis: one row per (prefill_gpu, prefill_tp), ``None`` when it is off.

    ``"none"`` (colocated) is one pair with ``prefill_tp`` 0; every GPU id is crossed with every
    TP degree of ``prefill_tps`` (default 1). A string may list ids separated by commas.
    """
    if prefill_gpus is None:
        if prefill_tps is not None:
            message = "prefill_tps needs prefill_gpus (prefill replica GPU ids, or 'none' for colocated)"
            raise InvalidValueError(message)
        return None
    names = prefill_gpus.split(",") if isinstance(prefill_gpus, str) else list(prefill_gpus)
    if not names:
        message = f"prefill_gpus must name at least one gpu or '{COLOCATED}'"
        raise InvalidValueError(message)
    ids = list(dict.fromkeys(_prefill_gpu_id(catalogs, name) for name in names))
    tps = axis_values("prefill_tps", (1,) if prefill_tps is None else prefill_tps, high=1024)
    pairs: list[tuple[str, int]] = []
    for gpu in ids:
        pairs += [(gpu, 0)] if gpu == COLOCATED else [(gpu, int(tp)) for tp in tps]
    return pd.DataFrame(pairs, columns=["prefill_gpu", "prefill_tp"])


def _prefill_gpu_id(catalogs: Catalogs, name) -> str:
    key = str(name).strip().lower()
    valid = [str(gpu) for gpu in catalogs.gpus.index]
    if key != COLOCATED and key not in valid:
        message = f"prefill_gpus: {did_you_mean(str(name), [*valid, COLOCATED], kind='gpu')}"
        raise UnknownNameError(message)
    return key
