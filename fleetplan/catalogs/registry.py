"""The loaded catalogs and their lookups: ids with "did you mean", versions and sources.

``Catalogs`` holds seven validated DataFrames: ``gpus``, ``models``, ``quants`` and ``engines``
(serving-engine profiles) indexed by ``id``; ``prices``, ``efficiency`` and ``ownership`` (what
buying and hosting a server costs) with a RangeIndex and their key columns as columns (``prices``
also has ``override``: True for rows from the user's own files). It also carries the price rule
every price lookup follows.
Build it with ``fleetplan.catalogs.load_catalogs``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import PRICING_TYPES
from fleetplan.catalogs.prices import PriceRule, choose_prices, price_usd_per_gpu_hour
from fleetplan.catalogs.schema import (
    CATALOG_NAMES,
    INDEXED_CATALOGS,
    KEYS,
    TFLOPS_PREFIX,
    WILDCARD,
    catalog_name,
)
from fleetplan.errors import did_you_mean

_ID_KINDS = {"gpu": "gpus", "model": "models", "quant": "quants", "engine": "engines"}
SOURCE_COLUMNS = ("catalog", "key", "source", "as_of")


@dataclass(frozen=True, eq=False)
class Catalogs:
    """GPUs, models, quants, prices, efficiency factors, ownership costs and engine profiles (see
    module doc)."""

    gpus: pd.DataFrame
    models: pd.DataFrame
    quants: pd.DataFrame
    prices: pd.DataFrame
    efficiency: pd.DataFrame
    ownership: pd.DataFrame
    engines: pd.DataFrame
    override_files: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    price_rule: PriceRule = field(default_factory=PriceRule)

    def copy(self) -> Catalogs:
        """Deep copies of every table, so edits to them stay private to the caller."""
        tables = {name: self.table(name).copy(deep=True) for name in CATALOG_NAMES}
        return Catalogs(**tables, override_files=dict(self.override_files), price_rule=self.price_rule)

    def with_price_rule(self, rule: PriceRule) -> Catalogs:
        """The same tables priced by ``rule``."""
        return replace(self, price_rule=rule)

    # --- prices (``fleetplan.catalogs.prices``)

    def chosen_prices(self, gpus: Iterable[str], pricing_types: Iterable[str] = PRICING_TYPES,
                      today: dt.date | None = None) -> pd.DataFrame:
        """The price row the rule chooses per (GPU, pricing type), with its provenance."""
        return choose_prices(self.prices, gpus, pricing_types, self.price_rule, today)

    def price_of(self, gpus: Iterable[str], pricing_type: str = "on_demand") -> np.ndarray:
        """The rule's price of each element of ``gpus`` [USD/GPU-hour]; NaN where none."""
        return price_usd_per_gpu_hour(self.prices, gpus, self.price_rule, pricing_type)

    def table(self, name: str) -> pd.DataFrame:
        """The table of catalog ``name`` (``gpus`` or ``gpu``, ...; did-you-mean if unknown)."""
        return getattr(self, catalog_name(name))

    # --- ids

    def require(self, kind: str, names: str | Iterable[str]) -> list[str]:
        """Canonical (lower-cased, trimmed) ids of ``kind`` gpu|model|quant, in the given order.

        ``require("gpu", " H100-SXM ")`` returns ``["h100-sxm"]``; an unknown id raises
        ``UnknownNameError`` naming the closest ids.
        """
        table = self._id_table(kind)
        wanted = [names] if isinstance(names, str) else list(names)
        ids = [str(name).strip().lower() for name in wanted]
        for name, canonical in zip(wanted, ids):
            if canonical not in table.index:
                raise did_you_mean(str(name), table.index, kind=_kind(kind))
        return ids

    def alias_map(self, kind: str) -> dict[str, str]:
        """Lower-cased names -> canonical id for ``kind`` gpu|quant: each id itself and the names
        in its ``aliases`` column (``;``-separated), as measurement files and benchmark tables
        write them (``"H100 80GB HBM3 (SXM)"`` -> ``h100-sxm``)."""
        table = self._id_table(kind)
        names = {str(i): str(i) for i in table.index}
        if "aliases" in table:
            for canonical, text in table["aliases"].items():
                for alias in str(text).split(";"):
                    if alias.strip():
                        names[alias.strip().lower()] = str(canonical)
        return names

    def gpu(self, gpu_id: str) -> pd.Series:
        """The gpus row of ``gpu_id`` (a copy)."""
        return self._row("gpu", gpu_id)

    def model(self, model_id: str) -> pd.Series:
        """The models row of ``model_id`` (a copy)."""
        return self._row("model", model_id)

    def quant(self, quant_id: str) -> pd.Series:
        """The quants row of ``quant_id`` (a copy)."""
        return self._row("quant", quant_id)

    def _row(self, kind: str, name: str) -> pd.Series:
        (canonical,) = self.require(kind, [name])
        return self._id_table(kind).loc[canonical].copy()

    def _id_table(self, kind: str) -> pd.DataFrame:
        return self.table(_ID_KINDS.get(_kind(kind), "") or _unknown_kind(kind))

    # --- derived views

    def native_gpus(self) -> pd.DataFrame:
        """Boolean table, quants by gpus: True where the GPU has a peak-throughput figure for
        the quant's compute precision (``tflops_<compute_precision>``), i.e. runs it natively."""
        columns = TFLOPS_PREFIX + self.quants["compute_precision"]
        has_peak = self.gpus.reindex(columns=columns.unique()).notna()
        native = has_peak.loc[:, columns].T
        native.index = self.quants.index
        native.columns.name = "gpu"
        return native.astype(bool)

    def native_gpu_lists(self, separator: str = ", ") -> pd.Series:
        """Per quant id, the GPUs that run it natively joined by ``separator``."""
        native = self.native_gpus()
        names = native.columns.to_numpy()
        return pd.Series([separator.join(names[row]) for row in native.to_numpy()],
                         index=native.index, name="native_gpus", dtype="str")

    # --- provenance

    def versions(self) -> dict[str, dict]:
        """Per catalog: sha256 of the table's CSV, rows, as_of range and merged override files."""
        return {name: self._version(name) for name in CATALOG_NAMES}

    def _version(self, name: str) -> dict:
        table = self.table(name)
        as_of = table["as_of"]
        csv_bytes = table.to_csv(lineterminator="\n").encode("utf-8")
        return {
            "sha256": hashlib.sha256(csv_bytes).hexdigest(),
            "rows": len(table),
            "as_of_min": None if table.empty else str(as_of.min()),
            "as_of_max": None if table.empty else str(as_of.max()),
            "overrides": list(self.override_files.get(name, ())),
        }

    def sources(self, kind: str, ids: str | Iterable[str] | None = None) -> pd.DataFrame:
        """Rows used, with columns catalog, key, source and as_of.

        ``kind`` is a catalog name (singular or plural). ``ids`` selects rows: model/gpu/quant
        ids for those catalogs, GPU ids for prices, efficiency (whose ``*`` rows always apply)
        and ownership; ``None`` selects every row.
        """
        name = catalog_name(kind)
        rows = self._rows_for(name, ids)
        keys = _key_strings(rows, name)
        return pd.DataFrame({"catalog": name, "key": keys,
                             "source": rows["source"].to_numpy(),
                             "as_of": rows["as_of"].to_numpy()},
                            columns=list(SOURCE_COLUMNS))

    def _rows_for(self, name: str, ids: str | Iterable[str] | None) -> pd.DataFrame:
        table = self.table(name)
        if ids is None:
            return table
        if name in INDEXED_CATALOGS:
            return table.loc[self.require(name.removesuffix("s"), ids)]
        gpus = self.require("gpu", ids)
        return table[table["gpu"].isin([*gpus, WILDCARD])]


def _kind(kind: str) -> str:
    return str(kind).strip().lower().removesuffix("s")


def _unknown_kind(kind: str) -> str:
    raise did_you_mean(str(kind), list(_ID_KINDS), kind="catalog kind")


def _key_strings(rows: pd.DataFrame, name: str) -> list[str]:
    if name in INDEXED_CATALOGS:
        return [str(i) for i in rows.index]
    return ["/".join(map(str, values)) for values in rows[list(KEYS[name])].to_numpy()]
