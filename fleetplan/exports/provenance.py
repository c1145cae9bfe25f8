"""Where an export came from: fleetplan version, catalog versions, parameters, creation time.

The same dictionary goes into Parquet key/value metadata (one JSON value per key) and into a
workbook's ``Read me`` and ``Sources`` sheets and document properties.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping
from typing import Any

import fleetplan
from fleetplan.catalogs import Catalogs, load_catalogs
from fleetplan.catalogs.jsonable import jsonable
from fleetplan.exports.price_provenance import prices_used

log = logging.getLogger(__name__)

#: Parquet key/value metadata keys written by fleetplan, in this order.
METADATA_KEYS: tuple[str, ...] = ("fleetplan_version", "created", "kind", "catalog_versions",
                                  "parameters", "price_rule", "prices_used")
_TEXT_KEYS = ("fleetplan_version", "created", "kind", "price_rule")


def to_json(value: Any) -> str:
    """Compact, deterministic JSON of ``jsonable(value)``."""
    return json.dumps(jsonable(value), sort_keys=True, separators=(",", ":"), allow_nan=False)


def catalog_versions(catalogs: Catalogs | None = None) -> dict[str, Any]:
    """``catalogs.versions()``, loading the shipped catalogs when none are given.

    Returns an empty dict when the catalogs cannot be loaded, so an export never fails for
    want of provenance.
    """
    try:
        if catalogs is None:
            catalogs = load_catalogs()
        return jsonable(catalogs.versions())
    except (AttributeError, ValueError, OSError) as error:
        log.debug("catalog versions unavailable: %s", error)
        return {}


def now_utc() -> dt.datetime:
    """The current time in UTC, to the second."""
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def provenance(kind: str, metadata: Mapping[str, Any] | None = None, *,
               catalogs: Catalogs | None = None, prices: Any = None) -> dict[str, Any]:
    """The provenance record of one export.

    ``metadata`` holds the sweep or scenario parameters; a ``catalog_versions`` entry in it (as a
    FleetPlan's assumptions carry) wins over loading the catalogs again. ``price_rule`` and
    ``prices_used`` (the price rows chosen, as records) come from ``metadata`` or else from
    ``catalogs``' rule and the ``prices`` table.
    """
    parameters = dict(metadata or {})
    rule = parameters.pop("price_rule", None)
    if rule is None and catalogs is not None and hasattr(catalogs, "price_rule"):
        rule = catalogs.price_rule.describe()
    used = parameters.pop("prices_used", None)
    if used is None and prices is not None:
        used = prices_used(prices)
    versions = parameters.pop("catalog_versions", None)
    if versions is None and isinstance(parameters.get("catalogs"), Mapping):
        versions = parameters.pop("catalogs")  # the sweep CLI's run record
    if versions is None:
        versions = catalog_versions(catalogs)
    created = parameters.pop("created", None) or now_utc().isoformat()
    parameters.pop("fleetplan_version", None)
    parameters.pop("kind", None)
    nested = parameters.pop("parameters", None)
    if isinstance(nested, Mapping):
        parameters = {**nested, **parameters}
    return {
        "fleetplan_version": fleetplan.__version__,
        "created": str(created),
        "kind": kind,
        "catalog_versions": jsonable(versions),
        "parameters": jsonable(parameters),
        "price_rule": str(rule or ""),
        "prices_used": jsonable(used or []),
    }


def to_key_values(record: Mapping[str, Any]) -> dict[bytes, bytes]:
    """Parquet key/value metadata: strings stay strings, everything else is JSON."""
    pairs = {}
    for key, value in record.items():
        text = value if isinstance(value, str) else to_json(value)
        pairs[str(key).encode()] = text.encode()
    return pairs


def from_key_values(pairs: Mapping[bytes, bytes] | None) -> dict[str, Any]:
    """Inverse of :func:`to_key_values` for fleetplan's keys (others are ignored)."""
    record = {}
    for key in METADATA_KEYS:
        raw = (pairs or {}).get(key.encode())
        if raw is None:
            continue
        text = raw.decode()
        record[key] = text if key in _TEXT_KEYS else json.loads(text)
    return record
