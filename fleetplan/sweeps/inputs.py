"""Input validation for the engine's public functions: ids, numeric axes and ranges, and the
columns and modes of ``estimate_cases``.

Kept apart from the maths: the kernel marks infeasible points, this module raises for bad input
with one-line messages that name the field.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs, load_catalogs
from fleetplan.errors import InvalidValueError, UnknownNameError, did_you_mean
from fleetplan.sweeps.assumptions import ASSUMPTION_RANGES, LEVER_RANGES, PER_CASE_ASSUMPTIONS

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


#: Most values one axis may hold: a longer one is a typo (a missing step) and would build a
#: grid of billions of rows.
MAX_AXIS_VALUES = 100_000


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
        if len(values) > MAX_AXIS_VALUES:
            message = f"'{text}' has more than {MAX_AXIS_VALUES:,} values; an axis holds at most {MAX_AXIS_VALUES:,}"
            raise InvalidValueError(message)
    return values


def _expand_range(text: str, low: str, high: str, step: str | None) -> list[int]:
    low_value, high_value = int(low), int(high)
    if low_value < 1 or high_value < low_value or (step is not None and int(step) < 1):
        message = f"range '{text.strip()}' must go from a positive start up to an end >= start"
        raise InvalidValueError(message)
    if step is not None:
        count = (high_value - low_value) // int(step) + 1
        if count > MAX_AXIS_VALUES:
            message = (f"range '{text.strip()}' has {count:,} values; an axis holds at most "
                       f"{MAX_AXIS_VALUES:,} (use a larger step)")
            raise InvalidValueError(message)
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


# --- estimate_cases input

LOAD_MODES = ("rate", "max_rate", "concurrency")
REQUIRED = ("gpu", "model", "quant", "tp", "input_len", "output_len")
OPTIONAL_NUMBERS = {  # column -> (low, low inclusive, high)
    "batch": (1, True, 10_000_000), "tpot_slo_ms": (0, False, 1e7), "ttft_slo_ms": (0, False, 1e8),
    "rate_req_s": (0, False, 1e7), "concurrency": (1, True, 10_000_000), "n_requests": (1, True, 10_000_000),
    **{name: (low, inclusive, high) for name, (low, high, inclusive, _) in ASSUMPTION_RANGES.items()
       if name in PER_CASE_ASSUMPTIONS},
}
INTEGER_COLUMNS = ("batch", "concurrency", "n_requests", "max_num_seqs", "max_batched_tokens")
POSITIVE_INTEGERS = {"tp": 1024, "input_len": 100_000_000, "output_len": 10_000_000}
MODES = ("batch", "slo", "offline", *LOAD_MODES)
LEVER_NUMBERS = {name: (low, True, high) for name, (low, high, _) in LEVER_RANGES.items()}


def checked_cases(cases: pd.DataFrame, catalogs: Catalogs) -> pd.DataFrame:
    """Validated copy of ``cases`` with ids canonical and optional columns filled."""
    if not isinstance(cases, pd.DataFrame) or cases.empty:
        message = "cases must be a non-empty table with columns " + ", ".join(REQUIRED)
        raise InvalidValueError(message)
    missing = [c for c in REQUIRED if c not in cases.columns]
    if missing:
        message = f"cases lack the required column {missing[0]} (required: {', '.join(REQUIRED)})"
        raise InvalidValueError(message)
    cases = cases.copy()
    for kind in ("gpu", "model", "quant"):
        cases[kind] = _known_ids(catalogs, kind, cases[kind])
    _check_numbers(cases)
    if "kv_quant" not in cases or cases["kv_quant"].isna().all():
        cases["kv_quant"] = np.nan
    default_kv = catalogs.quants["default_kv_quant"].reindex(cases["quant"]).to_numpy()
    given_kv = cases["kv_quant"].where(cases["kv_quant"].notna() & (cases["kv_quant"].astype(str) != ""))
    cases["kv_quant"] = np.where(given_kv.isna(), default_kv, given_kv.astype(str))
    cases["kv_quant"] = _known_ids(catalogs, "quant", pd.Series(cases["kv_quant"], name="kv_quant"))
    cases["mode"] = _modes(cases)
    return cases


def _known_ids(catalogs: Catalogs, kind: str, column: pd.Series) -> list[str]:
    """Canonical ids of ``kind`` in ``column``; an unknown one is named with its row."""
    try:
        return catalogs.require(kind, column.astype(str).tolist())
    except UnknownNameError as error:
        known = getattr(catalogs, f"{kind}s").index.astype(str)
        canonical = column.astype(str).str.strip().str.lower().to_numpy()
        row = int(np.flatnonzero(~np.isin(canonical, known))[0])
        message = f"cases row {row + 1}, column {column.name}: {error}"
        raise UnknownNameError(message) from None


def _check_numbers(cases: pd.DataFrame) -> None:
    for column, high in POSITIVE_INTEGERS.items():
        check_number_column(cases, column, 1, True, high, integer=True, required=True)
    for column, (low, inclusive, high) in OPTIONAL_NUMBERS.items():
        if column not in cases:
            cases[column] = np.nan
        check_number_column(cases, column, low, inclusive, high,
                            integer=column in INTEGER_COLUMNS, required=False)
    for column, (low, inclusive, high) in LEVER_NUMBERS.items():
        if column in cases:
            check_number_column(cases, column, low, inclusive, high,
                                integer=LEVER_RANGES[column][2], required=False)


def _case_row(row: int) -> str:
    return f"cases row {row + 1}"


def check_number_column(cases: pd.DataFrame, column: str, low: float, inclusive: bool,
                        high: float, *, integer: bool, required: bool,
                        row_name: Callable[[int], str] = _case_row) -> None:
    """Make ``cases[column]`` numbers after checking each is finite, within ``low`` (``inclusive``
    or not) and ``high``, whole where ``integer``, and not blank where ``required``; the first bad
    cell is named by ``row_name(position)`` and its column."""
    raw = cases[column]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    blank = raw.isna().to_numpy() | (raw.astype(str).str.strip() == "").to_numpy()
    too_low = values < low if inclusive else values <= low
    bad = (np.isnan(values) & (required | ~blank)) | too_low | (values > high) | ~np.isfinite(values) & ~blank
    bad |= raw.map(type).isin([bool, np.bool_]).to_numpy()  # True would count as 1
    if integer:
        bad |= ~np.isnan(values) & (values != np.round(values))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        kind = "a whole number" if integer else "a number"
        bound = f"{'>=' if inclusive else '>'} {low:g} and <= {high:g}"
        value = raw.iloc[row]
        shown = "blank" if blank[row] else repr(value) if isinstance(value, str) else str(value)
        message = f"{row_name(row)}, column {column}: must be {kind} {bound}, got {shown}"
        raise InvalidValueError(message)
    cases[column] = values.astype(np.int64) if required and integer else np.where(blank, np.nan, values)


def _refuse_two_modes(unnamed: np.ndarray, given: dict[str, np.ndarray]) -> None:
    """A row without a mode that gives the columns of two modes is ambiguous, as the same options
    are to ``fleetplan estimate``: which one it means is not guessed."""
    counts = sum(present.astype(int) for present in given.values())
    ambiguous = unnamed & (counts > 1)
    if ambiguous.any():
        row = int(np.flatnonzero(ambiguous)[0])
        both = " and ".join(name for name, present in given.items() if present[row])
        message = (f"cases row {row + 1}: give one of batch, tpot_slo_ms/ttft_slo_ms, "
                   f"rate_req_s or concurrency, not {both} (or name the row's mode: "
                   f"{', '.join(MODES)})")
        raise InvalidValueError(message)


def _modes(cases: pd.DataFrame) -> np.ndarray:
    has_batch = cases["batch"].notna().to_numpy()
    has_slo = (cases["tpot_slo_ms"].notna() | cases["ttft_slo_ms"].notna()).to_numpy()
    has_rate = cases["rate_req_s"].notna().to_numpy()
    has_concurrency = cases["concurrency"].notna().to_numpy()
    inferred = np.where(has_batch, "batch", np.where(has_rate, "rate", np.where(
        has_concurrency, "concurrency", np.where(has_slo, "slo", "offline"))))
    given = (cases["mode"].astype(object).where(cases["mode"].notna(), "").astype(str).str.strip()
             .str.lower() if "mode" in cases else pd.Series("", index=cases.index))
    _refuse_two_modes(given.to_numpy() == "", {"batch": has_batch, "rate_req_s": has_rate,
                                               "concurrency": has_concurrency, "an SLO": has_slo})
    if "mode" not in cases:
        return inferred
    unknown = ~given.isin(MODES + ("",))
    if unknown.any():
        row = int(np.flatnonzero(unknown.to_numpy())[0])
        message = f"cases row {row + 1}, column mode: must be one of {', '.join(MODES)}, got {cases['mode'].iloc[row]!r}"
        raise InvalidValueError(message)
    mode = np.where(given == "", inferred, given)
    for wanted, present, column in (("batch", has_batch, "batch"), ("rate", has_rate, "rate_req_s"),
                                    ("max_rate", has_slo, "tpot_slo_ms"), ("concurrency", has_concurrency, "concurrency")):
        missing = (mode == wanted) & ~present
        if missing.any():
            row = int(np.flatnonzero(missing)[0])
            message = f"cases row {row + 1}, column {column}: mode '{wanted}' needs a {column}"
            raise InvalidValueError(message)
    return mode
