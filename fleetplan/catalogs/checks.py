"""Checks of catalog files against their schemas, producing one-line messages.

Every check takes text tables (all cells strings, ``""`` when empty) or typed tables that carry
two provenance columns, the file label and the 1-based spreadsheet row (the header is row 1), and
returns a list of messages ``"<file> row <n>, column <c>: <what is allowed>, got <value>"``. The
loader collects them and raises one ``CatalogErrors`` whose text is the first message plus a count.
"""

from __future__ import annotations

import datetime as dt
import difflib
import math
from collections.abc import Iterable, Sequence

import pandas as pd

from fleetplan.catalogs.conventions import engine_base
from fleetplan.catalogs.schema import (
    BOOL_WORDS,
    ID_RULE,
    PARSERS,
    WILDCARD,
    Column,
    Schema,
)
from fleetplan.errors import CatalogError, did_you_mean

ORIGIN_FILE = "_origin_file"
ORIGIN_ROW = "_origin_row"
ORIGIN_COLUMNS = (ORIGIN_FILE, ORIGIN_ROW)
AS_OF = "as_of"

_TYPE_RULES = {
    "float": "must be a number",
    "int": "must be a whole number",
    "bool": "must be one of " + ", ".join(BOOL_WORDS),
    "date": "must be a date YYYY-MM-DD",
    "id": "must be " + ID_RULE,
}


class CatalogErrors(CatalogError):
    """Every problem found in catalog files; the text is the first one plus a count of the rest."""

    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = tuple(messages)
        more = f" (and {len(self.messages) - 1} more)" if len(self.messages) > 1 else ""
        super().__init__(self.messages[0] + more)


def raise_if_any(messages: Sequence[str]) -> None:
    """Raise ``CatalogErrors`` when ``messages`` is not empty."""
    if messages:
        raise CatalogErrors(messages)


def at(file: str, row: int | str, column: str | None = None) -> str:
    """The location prefix of a message: ``prices.csv row 7, column usd_per_gpu_hour``."""
    return f"{file} row {row}" + (f", column {column}" if column else "")


def _messages(frame: pd.DataFrame, bad: pd.Series, column: str, rule: str,
              shown: pd.Series | None = None) -> list[str]:
    """One message per bad row: location, the rule, and the offending value."""
    if not bad.any():
        return []
    values = frame.loc[bad, column] if shown is None else shown[bad]
    return [f"{at(file, row, column)}: {rule}, got {_show(value)}"
            for file, row, value in zip(frame.loc[bad, ORIGIN_FILE], frame.loc[bad, ORIGIN_ROW],
                                        values)]


def _show(value: object) -> str:
    """A cell as an error shows it: numbers of more than 15 digits (a spreadsheet's 1e308 reads
    as a 309-digit whole number) in short form, text past 60 characters cut."""
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value)
    if _looks_numeric(text):
        return f"{float(text):g}" if len(text) > 15 else text
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _looks_numeric(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


# --- header


def header_problems(columns: Iterable[str], schema: Schema, file: str,
                    needed: Sequence[str]) -> list[str]:
    """Unknown columns, and ``needed`` columns that are absent."""
    columns = list(columns)
    unknown = [_unknown_column(c, schema, file) for c in columns if c not in schema.by_name]
    missing = [f"{at(file, 1)}: missing column '{c}' (the {schema.catalog} catalog needs "
               f"{', '.join(needed)})" for c in needed if c not in columns]
    return unknown + missing


def _unknown_column(column: str, schema: Schema, file: str) -> str:
    close = difflib.get_close_matches(column, schema.names, n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    allowed = ", ".join(schema.names)
    return f"{at(file, 1, column)}: unknown column{hint} (allowed: {allowed})"


# --- cells


def cell_problems(raw: pd.DataFrame, schema: Schema) -> list[str]:
    """Type, range and allowed-value problems of every schema column present in ``raw``."""
    problems: list[str] = []
    for column in schema.columns:
        if column.name in raw.columns:
            problems += _column_problems(raw, column)
    return problems


def _column_problems(raw: pd.DataFrame, column: Column) -> list[str]:
    values, bad_type = PARSERS[column.type](raw[column.name])
    problems = []
    if bad_type.any():
        problems += _messages(raw, bad_type, column.name, _TYPE_RULES[column.type])
    if column.numeric:
        problems += _range_problems(raw, values.where(~bad_type), column)
    if column.choices:
        problems += _choice_problems(raw, column)
    if column.name == AS_OF:
        problems += _future_dates(raw, bad_type)
    return problems


def _future_dates(raw: pd.DataFrame, bad_type: pd.Series) -> list[str]:
    """``as_of`` is the day a figure was read or quoted, so it cannot be later than today."""
    today = dt.date.today()
    dates = pd.to_datetime(raw[AS_OF].where(~bad_type & (raw[AS_OF] != "")), format="%Y-%m-%d",
                           errors="coerce")
    later = (dates > pd.Timestamp(today)).fillna(False).astype(bool)
    return _messages(raw, later, AS_OF, f"must not be after today ({today.isoformat()}), the "
                     "day the figure was read or quoted")


def _range_problems(raw: pd.DataFrame, values: pd.Series, column: Column) -> list[str]:
    problems = []
    if column.low is not None:
        rule = f"must be >= {column.low:g}"
        problems += _messages(raw, values < column.low, column.name, rule, shown=raw[column.name])
    if column.high is not None:
        rule = f"must be <= {column.high:g}"
        problems += _messages(raw, values > column.high, column.name, rule, shown=raw[column.name])
    return problems


def _choice_problems(raw: pd.DataFrame, column: Column) -> list[str]:
    cells = raw[column.name]
    bad = (cells != "") & ~cells.isin(list(column.choices))
    return _messages(raw, bad, column.name, "must be one of " + ", ".join(column.choices))


def duplicate_problems(raw: pd.DataFrame, schema: Schema) -> list[str]:
    """Rows whose key repeats an earlier row of the same file."""
    key = list(schema.key)
    repeated = raw.duplicated(subset=key, keep="first")
    if not repeated.any():
        return []
    first_rows = raw.drop_duplicates(subset=key).set_index(key)[ORIGIN_ROW]
    name = "+".join(key)
    return [f"{at(file, row, name)}: duplicate key {_key_text(values)} "
            f"(first on row {first_rows.loc[values]})"
            for file, row, values in zip(raw.loc[repeated, ORIGIN_FILE],
                                         raw.loc[repeated, ORIGIN_ROW],
                                         _key_tuples(raw.loc[repeated, key]))]


def _key_tuples(frame: pd.DataFrame) -> list:
    rows = list(frame.itertuples(index=False, name=None))
    return [r[0] if len(r) == 1 else r for r in rows]


def _key_text(values: object) -> str:
    return repr("/".join(values) if isinstance(values, tuple) else values)


def required_problems(raw: pd.DataFrame, schema: Schema) -> list[str]:
    """Empty cells in required columns (after defaults were filled in)."""
    problems = []
    for column in schema.columns:
        if column.required:
            empty = raw[column.name] == ""
            problems += [f"{at(file, row, column.name)}: must not be empty (required)"
                         for file, row in zip(raw.loc[empty, ORIGIN_FILE],
                                              raw.loc[empty, ORIGIN_ROW])]
    return problems


# --- cross-checks on typed tables (with provenance columns)


def unknown_reference_problems(table: pd.DataFrame, column: str, valid: Sequence[str],
                               kind: str, extra: Sequence[str] = ()) -> list[str]:
    """Cells of ``column`` that are not among ``valid`` ids (nor ``extra`` values)."""
    bad = ~table[column].isin([*valid, *extra])
    return [f"{at(file, row, column)}: {did_you_mean(value, valid, kind=kind)}"
            for file, row, value in zip(table.loc[bad, ORIGIN_FILE], table.loc[bad, ORIGIN_ROW],
                                        table.loc[bad, column])]


def price_problems(prices: pd.DataFrame, gpus: pd.DataFrame) -> list[str]:
    """Every price names a known GPU."""
    return unknown_reference_problems(prices, "gpu", list(gpus.index), kind="gpu")


def efficiency_problems(efficiency: pd.DataFrame, gpus: pd.DataFrame, engines: pd.DataFrame) -> list[str]:
    """Every efficiency row names a known GPU and engine (optionally ``engine@release``), or the wildcard."""
    engine_only = efficiency.assign(engine=efficiency["engine"].map(engine_base))  # a release keeps its engine
    return (unknown_reference_problems(efficiency, "gpu", list(gpus.index), kind="gpu", extra=(WILDCARD,))
            + unknown_reference_problems(engine_only, "engine", list(engines.index), kind="engine",
                                         extra=(WILDCARD,)))


def ownership_problems(ownership: pd.DataFrame, gpus: pd.DataFrame) -> list[str]:
    """Every ownership row names a known GPU."""
    return unknown_reference_problems(ownership, "gpu", list(gpus.index), kind="gpu")


def quant_problems(quants: pd.DataFrame) -> list[str]:
    """``default_kv_quant`` names a quant that can hold the KV cache."""
    kv_capable = sorted(quants.index[quants["kv_bytes_per_element"].notna()])
    bad = ~quants["default_kv_quant"].isin(kv_capable)
    rule = ("must be a quant id whose kv_bytes_per_element is set (one of: "
            + ", ".join(kv_capable) + ")")
    return _messages(quants, bad, "default_kv_quant", rule)


def model_problems(models: pd.DataFrame) -> list[str]:
    """Consistency of parameters, experts, heads and the MLA fields of each model."""
    mla = models["attention"] == "mla"
    problems = _order_problems(models, "params_active_b", "params_total_b")
    problems += _order_problems(models, "n_experts_active", "n_experts")
    bad_heads = ~mla & (models["n_heads"] % models["n_kv_heads"] != 0)
    problems += [f"{at(file, row, 'n_kv_heads')}: must divide n_heads ({heads}), got {kv}"
                 for file, row, heads, kv in _rows(models, bad_heads, "n_heads", "n_kv_heads")]
    for column in ("kv_lora_rank", "qk_rope_head_dim"):
        problems += [f"{at(file, row, column)}: must not be empty when attention is mla"
                     for file, row in _rows(models, mla & models[column].isna())]
    return problems


def _order_problems(table: pd.DataFrame, column: str, upper: str) -> list[str]:
    """Rows where ``column`` exceeds the ``upper`` column of the same row."""
    bad = table[column] > table[upper]
    return [f"{at(file, row, column)}: must be <= {upper} ({high:g}), got {value:g}"
            for file, row, value, high in _rows(table, bad, column, upper)]


def _rows(table: pd.DataFrame, bad: pd.Series, *columns: str) -> zip:
    """Provenance and the given column values of the ``bad`` rows."""
    return zip(*(table.loc[bad, c] for c in (*ORIGIN_COLUMNS, *columns)))
