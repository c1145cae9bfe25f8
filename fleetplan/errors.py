"""Errors fleetplan raises for bad input.

Validation lives apart from the maths: formulas mark infeasible points with NaN or a reason,
and only bad options, names or files raise. Every error here is a ``ValueError`` whose message is
one line that names the field (or file, row and column) and what would be accepted; the CLI
prints it and exits with code 2 (1 for :class:`NotWritableError`, a problem of the
environment rather than of the input).
"""

from __future__ import annotations

import contextlib
import difflib
import math
import numbers
import re
from collections.abc import Callable, Iterable, Iterator

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


class FleetplanError(ValueError):
    """Base class of every user-facing input error."""

    #: Exit code of the command line for this error.
    exit_code = 2


class NotWritableError(FleetplanError):
    """An output that cannot be written (permissions, read-only or special file systems)."""

    exit_code = 1


class UnknownNameError(FleetplanError, KeyError):
    """An id that no catalog holds."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnavailableError(FleetplanError):
    """A service the command needs cannot be reached (a Dask scheduler)."""

    exit_code = 1


class InvalidValueError(FleetplanError):
    """A value outside its allowed range, or of the wrong kind."""


class CatalogError(FleetplanError):
    """A catalog file that does not satisfy its schema."""


class ScenarioError(FleetplanError):
    """A scenario file that does not validate."""


def did_you_mean(name: str, valid: Iterable[str], *, kind: str) -> UnknownNameError:
    """Build (not raise) the error for an unknown ``name`` among ``valid`` names.

    >>> str(did_you_mean("h100", ["h100-sxm", "h100-pcie", "a10g"], kind="gpu"))
    "unknown gpu 'h100'; did you mean 'h100-pcie' or 'h100-sxm'? (valid: a10g, h100-pcie, h100-sxm)"
    """
    valid = sorted(set(valid))
    key = name.strip().lower()
    close = [v for v in valid if v.startswith(key)] + [v for v in valid if key in v and not v.startswith(key)]
    close += [v for v in difflib.get_close_matches(key, valid, n=3, cutoff=0.6) if v not in close]
    close = close[:3]
    hint = f"; did you mean {_either(close)}?" if close else ""
    shown = ", ".join(valid) if len(valid) <= 40 else ", ".join(valid[:40]) + ", ..."
    return UnknownNameError(f"unknown {kind} '{name}'{hint} (valid: {shown})")


def _either(names: list[str]) -> str:
    quoted = [f"'{n}'" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def one_line(text: str) -> str:
    r"""``text`` with control characters escaped, so it prints as exactly one line.

    >>> one_line("unknown gpu 'h100\nerror: ok'")
    "unknown gpu 'h100\\nerror: ok'"
    """
    return _CONTROL.sub(lambda m: _ESCAPES.get(m.group(), f"\\x{ord(m.group()):02x}"), text)


def shown(value: object) -> str:
    """A value as a person writes it: ``5``, ``0.25``, ``inf``, ``'text'`` (never ``np.int64(5)``).

    >>> import numpy as np
    >>> shown(np.int64(-1)), shown(np.float64(0.5)), shown(float("inf")), shown("x")
    ('-1', '0.5', 'inf', "'x'")
    """
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return f"{float(value):g}"
    return one_line(repr(value) if isinstance(value, str) else str(value))


def check_range(field: str, value: float, low: float | None = None, high: float | None = None,
                *, low_inclusive: bool = True, integer: bool = False) -> None:
    """Raise ``InvalidValueError`` unless ``low <= value <= high`` (and finite, and integral)."""
    bad_type = not isinstance(value, numbers.Real) or isinstance(value, bool)
    if bad_type or math.isnan(value) or math.isinf(value) or (integer and value != int(value)):
        kind = "a whole number" if integer else "a finite number"
        message = f"{field} must be {kind}, got {shown(value)}"
        raise InvalidValueError(message)
    too_low = low is not None and (value < low if low_inclusive else value <= low)
    too_high = high is not None and value > high
    if too_low or too_high:
        lo = "" if low is None else (f">= {low:g}" if low_inclusive else f"> {low:g}")
        hi = "" if high is None else f"<= {high:g}"
        allowed = " and ".join(p for p in (lo, hi) if p)
        message = f"{field} must be {allowed}, got {value:g}"
        raise InvalidValueError(message)


@contextlib.contextmanager
def relocated(pattern: str, where: Callable[[int], str] | None) -> Iterator[None]:
    """Re-raise a :class:`FleetplanError` whose message begins with ``pattern`` (a regular
    expression with one group of digits) with that beginning replaced by ``where(number)``:
    a table's ``cases row 2`` or a scenario's ``fleet.current[1].gpu: `` told as the file's row
    or line a reader finds. ``where`` None (the rows came from no file) changes nothing."""
    try:
        yield
    except FleetplanError as error:
        found = re.match(pattern, str(error))
        if where is None or found is None:
            raise
        raise type(error)(where(int(found.group(1))) + str(error)[found.end():]) from None


#: File names an error message may begin with (``fleet.csv: line 2: ...``).
_FILE_NAME = r"\S+\.(?:csv|tsv|txt|ya?ml|toml|json|xlsx|xlsm|parquet):"


def field_pattern(fields: Iterable[str]) -> str:
    """A regular expression for a message that begins with a path of one of ``fields``
    (``fleet.gpus[0].id: ...``), not with a file's name that starts like one (``fleet.csv:``).

    >>> import re
    >>> [bool(re.match(field_pattern(["fleet"]), m)) for m in ("fleet.gpus[0]: x", "fleet.csv: x")]
    [True, False]
    """
    names = "|".join(re.escape(field) for field in fields)
    return rf"(?!{_FILE_NAME})(?:{names})\b[\[.:]"


@contextlib.contextmanager
def within(source: str | None, pattern: str) -> Iterator[None]:
    """Re-raise a :class:`FleetplanError` whose message begins with ``pattern`` (a regular
    expression: a field path of the file ``source``) as ``source: message``, so a check made
    after the file was read (an unknown GPU in ``fleet.gpus[0].id``) names the file as the
    file's own checks do. ``source`` None (no file) changes nothing."""
    try:
        yield
    except FleetplanError as error:
        if source is None or re.match(pattern, str(error)) is None:
            raise
        raise type(error)(f"{source}: {error}") from None
