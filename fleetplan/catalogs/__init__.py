"""Catalogs of GPUs, models, quantization schemes, prices, efficiency factors and ownership costs.

Each catalog is a CSV file in ``fleetplan/catalogs/data`` described by a schema CSV beside it;
every row says where it came from (``source``) and when (``as_of``). Users extend or override
rows with their own CSV or XLSX files::

    from fleetplan.catalogs import load_catalogs
    catalogs = load_catalogs(overrides=["my_prices.csv"])
    catalogs.require("gpu", ["h100-sxm"])
    catalogs.prices.head()

Prices are chosen by one rule for every command (``fleetplan.catalogs.prices``)::

    catalogs.with_price_rule(PriceRule("median")).chosen_prices(["h100-sxm"])
"""

from fleetplan.catalogs.checks import CatalogErrors
from fleetplan.catalogs.conventions import (
                                            FLEXIBLE_PRICING,
                                            HOURS_PER_MONTH,
                                            PRICING_TYPES,
                                            RESERVED_PRICING,
                                            RESERVED_TERM_MONTHS,
)
from fleetplan.catalogs.jsonable import jsonable
from fleetplan.catalogs.loader import check_files, clear_cache, load_catalogs
from fleetplan.catalogs.prices import (
                                            DEFAULT_MAX_PRICE_AGE_DAYS,
                                            DEFAULT_PRICE_RULE,
                                            PRICE_RULES,
                                            PriceRule,
                                            choose_prices,
                                            parse_price_rule,
                                            price_usd_per_gpu_hour,
                                            unpriced_gpus,
                                            warning_lines,
)
from fleetplan.catalogs.registry import Catalogs
from fleetplan.catalogs.schema import CATALOG_NAMES, KEYS, Column, Schema, load_schema

__all__ = [
                                            "CATALOG_NAMES",
                                            "DEFAULT_MAX_PRICE_AGE_DAYS",
                                            "DEFAULT_PRICE_RULE",
                                            "FLEXIBLE_PRICING",
                                            "HOURS_PER_MONTH",
                                            "KEYS",
                                            "PRICE_RULES",
                                            "PRICING_TYPES",
                                            "RESERVED_PRICING",
                                            "RESERVED_TERM_MONTHS",
                                            "CatalogErrors",
                                            "Catalogs",
                                            "Column",
                                            "PriceRule",
                                            "Schema",
                                            "check_files",
                                            "choose_prices",
                                            "clear_cache",
                                            "jsonable",
                                            "load_catalogs",
                                            "load_schema",
                                            "parse_price_rule",
                                            "price_usd_per_gpu_hour",
                                            "unpriced_gpus",
                                            "warning_lines",
]
