"""The one price rule: which prices-catalog row prices a GPU for a pricing type, and why.

Every command prices GPUs through :func:`choose_prices`, so ``estimate``, ``sweep``, ``plan``,
``whatif`` and ``compare`` agree for the same rule. For each (GPU, pricing type):

1. rows outside the ``provider`` and ``region`` filters are dropped;
2. ``provider:NAME`` keeps NAME's rows where NAME lists the pair (elsewhere every provider's
   rows stay, and the chosen row says NAME lists none);
3. if the user's own rows (``--catalog`` files, column ``override``) remain, only they stay:
   a negotiated quote beats every public listing of its (GPU, pricing type, provider);
4. the rule picks one row: ``cheapest`` (ties by provider, then region), ``median`` (the middle
   row in price order, the lower one of an even count, so the price is always a real listing)
   or ``provider:NAME`` (NAME's cheapest row);
5. unless ``mix_providers``, every pricing type of a GPU comes from the provider of its
   on-demand row where that provider lists it. Where it does not, the rule's row from another
   provider stays, and ``same_provider_on_demand_usd_per_gpu_hour`` holds that provider's own
   on-demand price, so a reserved discount is always measured against the same provider.

Each chosen row carries its provider, region, source, as_of and a ``warning`` when its price is
older than ``max_age_days`` or only one provider lists the pair.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import PRICING_TYPES
from fleetplan.errors import InvalidValueError, did_you_mean

#: The rules ``--price-rule`` accepts besides ``provider:NAME``.
PRICE_RULES: tuple[str, ...] = ("cheapest", "median")
#: The rule every command uses unless told otherwise.
DEFAULT_PRICE_RULE = "cheapest"
#: Prices older than this many days get a warning [days].
DEFAULT_MAX_PRICE_AGE_DAYS = 180
PROVIDER_PREFIX = "provider:"
OVERRIDE = "override"

#: Columns of :func:`choose_prices`' table, in order.
CHOSEN_COLUMNS = ["gpu", "pricing_type", "usd_per_gpu_hour", "provider", "region", "instance",
                  "includes_host", "source", "as_of", "origin", "providers_listing", "age_days",
                  "same_provider_on_demand_usd_per_gpu_hour", "warning"]
_KEYS = ["gpu", "pricing_type"]
_ORDER = ["usd_per_gpu_hour", "provider", "region"]


@dataclass(frozen=True)
class PriceRule:
    """How one price per (GPU, pricing type) is chosen from the prices catalog.

    ``choice``: ``cheapest``, ``median`` or ``provider:NAME``; ``provider``/``region``: keep
    only rows of that provider/region; ``max_age_days``: warn above this age [days];
    ``mix_providers``: choose each pricing type on its own instead of from the on-demand
    row's provider.
    """

    choice: str = DEFAULT_PRICE_RULE
    provider: str | None = None
    region: str | None = None
    max_age_days: int = DEFAULT_MAX_PRICE_AGE_DAYS
    mix_providers: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "choice", parse_price_rule(self.choice))
        if not isinstance(self.max_age_days, int) or self.max_age_days < 0:
            message = f"max price age must be a whole number of days >= 0, got {self.max_age_days!r}"
            raise InvalidValueError(message)

    @property
    def preferred_provider(self) -> str | None:
        """NAME of a ``provider:NAME`` rule, else None."""
        if self.choice.startswith(PROVIDER_PREFIX):
            return self.choice[len(PROVIDER_PREFIX):]
        return None

    def narrowed(self, provider: str | None, region: str | None) -> PriceRule:
        """The same rule with these provider/region filters where they are given."""
        return replace(self, provider=provider or self.provider, region=region or self.region)

    def describe(self) -> str:
        """One line for outputs, e.g. ``cheapest listed price; one provider per GPU``."""
        name = self.preferred_provider
        words = {"cheapest": "cheapest listed price", "median": "median listed price"}
        text = words.get(self.choice) or f"{name}'s cheapest price (others where {name} lists none)"
        filters = [f"provider {self.provider}" if self.provider else "",
                   f"region {self.region}" if self.region else ""]
        text += "".join(f", {f} only" for f in filters if f)
        text += "; your own rows first"
        text += "; each pricing type on its own" if self.mix_providers else "; one provider per GPU"
        return f"{text}; warn above {self.max_age_days} days"


def parse_price_rule(text: str) -> str:
    """The canonical rule for ``text``: ``cheapest``, ``median`` or ``provider:NAME``.

    >>> parse_price_rule(" Median "), parse_price_rule("provider:AWS")
    ('median', 'provider:aws')
    """
    rule = str(text).strip().lower()
    if rule in PRICE_RULES:
        return rule
    if rule.startswith(PROVIDER_PREFIX) and rule[len(PROVIDER_PREFIX):].strip():
        return PROVIDER_PREFIX + rule[len(PROVIDER_PREFIX):].strip()
    error = did_you_mean(str(text), [*PRICE_RULES, "provider:NAME"], kind="price rule")
    raise InvalidValueError(str(error))


def choose_prices(prices: pd.DataFrame, gpus: Iterable[str],
                  pricing_types: Iterable[str] = PRICING_TYPES, rule: PriceRule | None = None,
                  today: dt.date | None = None) -> pd.DataFrame:
    """One row per (GPU, pricing type) that has a price under ``rule`` (columns CHOSEN_COLUMNS).

    ``prices`` is the prices catalog (an ``override`` column marks the user's rows); ``today``
    dates the age warnings (default: the current date).
    """
    rule = rule or PriceRule()
    candidates = _candidates(prices, list(gpus), list(pricing_types), rule)
    if candidates.empty:
        return pd.DataFrame(columns=CHOSEN_COLUMNS)
    chosen = _pick(candidates, rule.choice)
    if not rule.mix_providers:
        chosen = _same_provider(candidates, chosen, rule.choice)
    chosen = _with_reference(chosen, _filtered(prices, chosen["gpu"].unique(), rule))
    listing = candidates.groupby(_KEYS)["provider"].nunique().rename("providers_listing")
    chosen = chosen.merge(listing.reset_index(), on=_KEYS, how="left")
    chosen["origin"] = np.where(chosen[OVERRIDE].to_numpy(bool), "your file", "catalog")
    chosen["age_days"] = _age_days(chosen["as_of"], today or dt.date.today())
    chosen["warning"] = _warnings(chosen, rule)
    order = {p: i for i, p in enumerate(PRICING_TYPES)}
    chosen = chosen.sort_values(["gpu", "pricing_type"], key=lambda s: s.map(order).fillna(len(order))
                                if s.name == "pricing_type" else s, kind="stable")
    return chosen[CHOSEN_COLUMNS].reset_index(drop=True)


def _filtered(prices: pd.DataFrame, gpus, rule: PriceRule) -> pd.DataFrame:
    rows = prices[prices["gpu"].isin(list(gpus))]
    for column, wanted in (("provider", rule.provider), ("region", rule.region)):
        if wanted:
            rows = rows[rows[column].astype(str).str.lower() == wanted.strip().lower()]
    rows = rows.copy()
    if OVERRIDE not in rows:
        rows[OVERRIDE] = False
    rows[OVERRIDE] = rows[OVERRIDE].fillna(False).astype(bool)
    return rows


def _candidates(prices: pd.DataFrame, gpus: list[str], types: list[str],
                rule: PriceRule) -> pd.DataFrame:
    """Rows the rule may choose from, per (GPU, pricing type): steps 1-3 of the module doc."""
    rows = _filtered(prices, gpus, rule)
    rows = rows[rows["pricing_type"].isin(types)].copy()
    name = rule.preferred_provider
    rows["preferred_missing"] = False
    if name is not None:
        preferred = rows["provider"].astype(str).str.lower() == name
        listed = preferred.groupby([rows["gpu"], rows["pricing_type"]]).transform("any")
        rows = rows[preferred | ~listed].copy()
        rows["preferred_missing"] = ~listed[rows.index].to_numpy()
    own = rows.groupby(_KEYS)[OVERRIDE].transform("any")
    return rows[rows[OVERRIDE] | ~own].sort_values(_ORDER, kind="stable")


def _pick(rows: pd.DataFrame, choice: str) -> pd.DataFrame:
    """One row per (GPU, pricing type) from rows sorted by price (step 4)."""
    if choice != "median":
        return rows.drop_duplicates(_KEYS)
    position = rows.groupby(_KEYS).cumcount().to_numpy()
    count = rows.groupby(_KEYS)["gpu"].transform("size").to_numpy()
    return rows[position == (count - 1) // 2]


def _same_provider(rows: pd.DataFrame, chosen: pd.DataFrame, choice: str) -> pd.DataFrame:
    """Step 5: other pricing types from the provider of each GPU's on-demand row."""
    first = chosen.assign(rank=chosen["pricing_type"].map(
        {p: i for i, p in enumerate(PRICING_TYPES)})).sort_values(["gpu", "rank"])
    anchor = first.drop_duplicates("gpu").set_index("gpu")[["provider", "pricing_type"]]
    at = anchor.reindex(rows["gpu"])
    own = ((rows["provider"].to_numpy() == at["provider"].to_numpy())
           & (rows["pricing_type"].to_numpy() != at["pricing_type"].to_numpy()))
    at_anchor = _pick(rows[own], choice)
    elsewhere = chosen.merge(at_anchor[_KEYS], on=_KEYS, how="left", indicator=True)
    kept = chosen[(elsewhere["_merge"] == "left_only").to_numpy()]
    return pd.concat([at_anchor, kept], ignore_index=True)


def _with_reference(chosen: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """The on-demand price of each chosen row's own provider: same region first, else its
    cheapest on-demand row [USD/GPU-hour]."""
    on_demand = rows[rows["pricing_type"] == "on_demand"]
    own = on_demand[on_demand[OVERRIDE]]
    on_demand = pd.concat([own, on_demand[~on_demand[OVERRIDE]]]).sort_values(
        OVERRIDE, ascending=False, kind="stable")  # the user's own on-demand rows first
    by_region = on_demand.groupby(["gpu", "provider", "region"])["usd_per_gpu_hour"].first()
    by_provider = on_demand.sort_values("usd_per_gpu_hour", kind="stable").groupby(
        ["gpu", "provider"])["usd_per_gpu_hour"].first()
    region_key = pd.MultiIndex.from_frame(chosen[["gpu", "provider", "region"]])
    provider_key = pd.MultiIndex.from_frame(chosen[["gpu", "provider"]])
    same = by_region.reindex(region_key).to_numpy()
    fallback = by_provider.reindex(provider_key).to_numpy()
    reference = np.where(np.isnan(same), fallback, same)
    on_demand_row = (chosen["pricing_type"] == "on_demand").to_numpy()
    reference = np.where(on_demand_row, chosen["usd_per_gpu_hour"].to_numpy(float), reference)
    return chosen.assign(same_provider_on_demand_usd_per_gpu_hour=reference)


def _age_days(as_of: pd.Series, today: dt.date) -> np.ndarray:
    dates = pd.to_datetime(as_of, errors="coerce")
    age = (pd.Timestamp(today) - dates).dt.days
    return age.to_numpy(dtype=float)


def _warnings(chosen: pd.DataFrame, rule: PriceRule) -> np.ndarray:
    """Why a chosen price deserves a second look ('' when it does not)."""
    parts = []
    old = chosen["age_days"].to_numpy(float) > rule.max_age_days
    parts.append(np.where(old, "price is " + chosen["age_days"].fillna(0).astype(int).astype(str)
                          + " days old (as of " + chosen["as_of"].astype(str) + ")", ""))
    unrestricted = rule.provider is None and rule.preferred_provider is None
    single = (chosen["providers_listing"].to_numpy() == 1) & (chosen["origin"] == "catalog").to_numpy()
    parts.append(np.where(single & unrestricted, "only one provider lists it", ""))
    missing = chosen["preferred_missing"].to_numpy(bool)
    parts.append(np.where(missing, f"{rule.preferred_provider} lists no such price; another "
                          "provider's used", ""))
    joined = pd.Series(["; ".join(p for p in row if p) for row in zip(*parts)], dtype=object)
    return joined.to_numpy(dtype=object)


def warning_lines(chosen: pd.DataFrame) -> list[str]:
    """One line per chosen price with a warning, e.g. for a command's stderr."""
    flagged = chosen[chosen["warning"].astype(str) != ""]
    return [f"{gpu} {pricing} ${price:,.2f}/GPU-hour from {provider} {region}: {warning}"
            for gpu, pricing, price, provider, region, warning in
            flagged[["gpu", "pricing_type", "usd_per_gpu_hour", "provider", "region",
                     "warning"]].itertuples(index=False)]


def unpriced_gpus(chosen: pd.DataFrame, gpus: Iterable[str], pricing_type: str = "on_demand") -> list[str]:
    """The ``gpus`` for which the rule found no ``pricing_type`` row (``chosen``: from
    :func:`choose_prices`), in their order."""
    priced = set(chosen.loc[chosen["pricing_type"] == pricing_type, "gpu"].astype(str))
    return [gpu for gpu in dict.fromkeys(map(str, gpus)) if gpu not in priced]


def price_usd_per_gpu_hour(prices: pd.DataFrame, gpus: Iterable[str], rule: PriceRule | None = None,
                           pricing_type: str = "on_demand") -> np.ndarray:
    """The rule's price of each element of ``gpus`` for one pricing type; NaN if none
    [USD/GPU-hour].

    >>> import pandas as pd
    >>> rows = pd.DataFrame({"gpu": ["h100-sxm"] * 3, "provider": ["a", "b", "c"],
    ...     "region": "any", "pricing_type": "on_demand", "usd_per_gpu_hour": [3.0, 2.0, 9.0],
    ...     "instance": "", "includes_host": True, "source": "s", "as_of": "2026-01-01"})
    >>> float(price_usd_per_gpu_hour(rows, ["h100-sxm"], PriceRule("median"))[0])
    3.0
    """
    gpus = pd.Index(list(gpus))
    chosen = choose_prices(prices, gpus.unique(), [pricing_type], rule)
    return chosen.set_index("gpu")["usd_per_gpu_hour"].reindex(gpus).to_numpy(dtype=float)
