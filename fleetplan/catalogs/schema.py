"""Catalog schemas: which columns each catalog file has, their types, units and ranges.

Each ``data/<catalog>.csv`` is described by ``data/<catalog>.schema.csv`` (columns
``column,type,unit,required,min,max,default,description``), as PyPSA describes its component
attributes. This module reads those schema files and turns validated text cells into typed
columns; the checks that produce error messages live in ``fleetplan.catalogs.checks``.

Typed columns: ``float`` -> float64 (NaN when empty); ``int`` -> int64 when required, float64
(NaN when empty) when optional, so numpy kernels never meet ``pd.NA``; ``bool`` -> bool when
required, nullable ``boolean`` when optional; ``id``, ``str`` and ``date`` -> text
(``date`` stays an ISO ``YYYY-MM-DD`` string, which sorts chronologically).
"""

from __future__ import annotations

import functools
import io
from dataclasses import dataclass, field
from importlib import resources

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import PRICING_TYPES
from fleetplan.errors import CatalogError, did_you_mean

CATALOG_NAMES = ("gpus", "models", "quants", "prices", "efficiency", "ownership", "engines")
KEYS: dict[str, tuple[str, ...]] = {
    "gpus": ("id",),
    "models": ("id",),
    "quants": ("id",),
    "prices": ("gpu", "provider", "region", "pricing_type"),
    "efficiency": ("engine", "gpu", "operator", "precision"),
    "ownership": ("gpu",),
    "engines": ("id",),
}
INDEXED_CATALOGS = ("gpus", "models", "quants", "engines")
#: Operators of the per-operator step time whose efficiencies the efficiency catalog holds.
OPERATORS = ("gemm", "expert_gemm", "attention", "allreduce", "iteration")
KV_MEMORY_RULES = ("fraction_of_free", "fraction_of_total", "static_fraction")
#: Efficiency precision keys of weight-only formats, whose GEMMs dequantize to 16-bit compute.
WEIGHT_ONLY_PRECISIONS = ("w4a16", "w8a16")
PROVENANCE_COLUMNS = ("source", "as_of")
WILDCARD = "*"
TYPES = ("id", "str", "float", "int", "bool", "date")
ID_PATTERN = r"[a-z0-9]+(?:[.-][a-z0-9]+)*"
ID_RULE = "a lowercase kebab-case id (a-z, 0-9, '-' and '.', e.g. 'llama-3.1-8b')"
DATE_PATTERN = r"\d{4}-\d{2}-\d{2}"
BOOL_WORDS = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}
TFLOPS_PREFIX = "tflops_"

# Enumerations the schema files describe in prose; the precisions come from the gpus schema.
_FIXED_CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("models", "attention"): ("mha", "gqa", "mla"),
    ("prices", "pricing_type"): PRICING_TYPES,
    ("gpus", "memory_unit"): ("GiB", "GB"),
}

_SCHEMA_FIELDS = ("column", "type", "unit", "required", "min", "max", "default", "description")


@dataclass(frozen=True)
class Column:
    """One column of a catalog: its type, unit, whether it may be empty and its numeric range."""

    name: str
    type: str
    unit: str = ""
    required: bool = False
    low: float | None = None
    high: float | None = None
    default: str = ""
    description: str = ""
    choices: tuple[str, ...] = ()

    @property
    def numeric(self) -> bool:
        return self.type in ("float", "int")


@dataclass(frozen=True)
class Schema:
    """The columns of one catalog, in file order, and the columns that form its key."""

    catalog: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    by_name: dict[str, Column] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {c.name: c for c in self.columns})

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def required_key(self) -> tuple[str, ...]:
        """Key columns a file must have: those without a default (a missing defaulted key column,
        such as the efficiency catalog's ``engine``, takes its default)."""
        return tuple(k for k in self.key if not self.by_name[k].default)

    @property
    def override_minimum(self) -> tuple[str, ...]:
        """Columns every override file must have: the required key plus provenance."""
        return tuple(dict.fromkeys(self.required_key + PROVENANCE_COLUMNS))

    def with_key_defaults(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` with each missing defaulted key column added, filled with its default."""
        missing = {k: self.by_name[k].default for k in self.key if k not in frame.columns}
        return frame.assign(**missing) if missing else frame


def data_dir() -> resources.abc.Traversable:
    """The folder of the shipped catalogs inside the installed package."""
    return resources.files("fleetplan.catalogs").joinpath("data")


@functools.lru_cache(maxsize=None)
def load_schema(catalog: str) -> Schema:
    """Read ``data/<catalog>.schema.csv`` from the package."""
    label = f"{catalog}.schema.csv"
    text = data_dir().joinpath(label).read_text(encoding="utf-8-sig")
    table = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    _check_schema_table(table, label)
    choices = _choices(catalog)
    columns = tuple(_column(row, choices, label, number)
                    for number, row in enumerate(table.to_dict("records"), start=2))
    return Schema(catalog, columns, KEYS[catalog])


def precisions() -> tuple[str, ...]:
    """Compute precisions with a peak-throughput column in the gpus schema (bf16, fp8, ...)."""
    names = load_schema("gpus").names
    return tuple(n.removeprefix(TFLOPS_PREFIX) for n in names if n.startswith(TFLOPS_PREFIX))


def _choices(catalog: str) -> dict[str, tuple[str, ...]]:
    found = {col: values for (cat, col), values in _FIXED_CHOICES.items() if cat == catalog}
    if catalog == "quants":
        found["compute_precision"] = precisions()
    if catalog == "efficiency":
        found["precision"] = (*precisions(), *WEIGHT_ONLY_PRECISIONS, WILDCARD)
        found["operator"] = OPERATORS
    if catalog == "engines":
        found["kv_memory_rule"] = KV_MEMORY_RULES
    return found


def _check_schema_table(table: pd.DataFrame, label: str) -> None:
    missing = [f for f in _SCHEMA_FIELDS if f not in table.columns]
    if missing:
        expected = ", ".join(_SCHEMA_FIELDS)
        message = f"{label} row 1: missing column '{missing[0]}' (expected {expected})"
        raise CatalogError(message)


def _column(row: dict[str, str], choices: dict, label: str, number: int) -> Column:
    if row["type"] not in TYPES:
        allowed, got = ", ".join(TYPES), row["type"]
        message = f"{label} row {number}, column type: must be one of {allowed}, got {got!r}"
        raise CatalogError(message)
    return Column(
        name=row["column"].strip(), type=row["type"], unit=row["unit"],
        required=BOOL_WORDS.get(row["required"].strip().lower(), False),
        low=_bound(row["min"]), high=_bound(row["max"]), default=row["default"].strip(),
        description=row["description"], choices=choices.get(row["column"].strip(), ()),
    )


def _bound(text: str) -> float | None:
    return float(text) if text.strip() else None


# --- cell parsing: text Series in, (parsed Series, bad-cell mask) out; empty cells are never bad


def parse_number(raw: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Parse decimal text to float64; bad where a non-empty cell is not a finite number."""
    values = pd.to_numeric(raw.where(raw != ""), errors="coerce").astype("float64")
    return values, (raw != "") & ~np.isfinite(values)


def parse_whole(raw: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Parse whole numbers (``8`` or ``8.0``) to float64; bad where not integral."""
    values, bad = parse_number(raw)
    return values, bad | (values.notna() & (values % 1 != 0))


def parse_bool(raw: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Parse true/false/1/0/yes/no (any case) to booleans (None when empty)."""
    words = raw.str.lower()
    return words.map(BOOL_WORDS), (raw != "") & ~words.isin(list(BOOL_WORDS))


def parse_date(raw: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Keep ``YYYY-MM-DD`` text; bad where the pattern or the calendar date is wrong."""
    shaped = raw.str.fullmatch(DATE_PATTERN).fillna(False).astype(bool)
    dates = pd.to_datetime(raw.where(shaped), format="%Y-%m-%d", errors="coerce")
    return raw, (raw != "") & dates.isna()


def parse_id(raw: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Keep ids that are lowercase kebab-case with digits and dots."""
    valid = raw.str.fullmatch(ID_PATTERN).fillna(False).astype(bool)
    return raw, (raw != "") & ~valid


def parse_text(raw: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Free text: always valid."""
    return raw, pd.Series(False, index=raw.index)


PARSERS = {"float": parse_number, "int": parse_whole, "bool": parse_bool,
           "date": parse_date, "id": parse_id, "str": parse_text}


def typed_column(raw: pd.Series, column: Column) -> pd.Series:
    """Convert an already validated text column to the schema dtype (see module docstring)."""
    values, _ = PARSERS[column.type](raw)
    if column.type == "int" and column.required:
        return values.astype("int64")
    if column.type == "bool":
        return values.astype("bool" if column.required else "boolean")
    if column.type in ("id", "str", "date"):
        return values.astype("str")
    return values


def typed_table(raw: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """All schema columns of ``raw`` converted to their dtypes, in schema order."""
    return pd.DataFrame({c.name: typed_column(raw[c.name], c) for c in schema.columns},
                        index=raw.index)


_SINGULAR = {"gpu": "gpus", "model": "models", "quant": "quants", "price": "prices"}


def catalog_name(name: str) -> str:
    """The canonical catalog name for ``name`` (``gpu`` or ``GPUs`` -> ``gpus``)."""
    wanted = str(name).strip().lower()
    wanted = _SINGULAR.get(wanted, wanted)
    if wanted not in CATALOG_NAMES:
        raise did_you_mean(str(name), CATALOG_NAMES, kind="catalog")
    return wanted
