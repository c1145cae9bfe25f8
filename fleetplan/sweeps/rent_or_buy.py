"""Procurement comparison: for one workload, what each GPU option needs and costs to rent or to buy.

For every GPU option the replica capacity comes from the performance engine (the largest request
rate meeting the SLOs under load, or the offline ceiling without SLOs), at each TP degree that
fits a node; the TP degree needing the fewest GPUs wins. Renting is priced by the catalogs' price
rule (``fleetplan.catalogs.prices``: the user's own rows first, then cheapest, median or one
provider; reserved prices from the on-demand row's provider where it lists them), and each option
says in one sentence how its reserved prices compare with the same provider's on-demand price;
buying at the ownership catalog's server price recovered over its life at a cost of capital, less
its resale value, plus power and hosting.

Formulas (one function each below): replicas ``n = ceil(demand / (capacity * utilization))``;
GPUs ``n * tp``; nodes ``ceil(GPUs / gpus_per_node)``; rent per month ``GPUs * price * hours``;
buy per month ``nodes * capital + power + hosting``, with ``capital`` the level monthly payment
that repays a server's price less the present value of its resale at the cost of capital
(straight-line ``price * (1 - resale) / (12 * life)`` at a cost of capital of 0) and power
``nodes * kW * load * PUE * hours * $/kWh``; TCO over ``m`` months (cash paid, undiscounted,
before any resale) renting ``m * rent``, buying ``nodes * price_node + m * (power + hosting)``;
break-even ``capex / (rent - opex)`` months.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.catalogs.conventions import HOURS_PER_MONTH, PRICING_TYPES
from fleetplan.errors import InvalidValueError, check_range
from fleetplan.sweeps import estimate_cases
from fleetplan.sweeps.inputs import catalog_or_default

RENT_TYPES = PRICING_TYPES
#: The financing inputs of buying, kept in a comparison table's columns of these names.
FINANCING = ("cost_of_capital", "residual_value")


def replicas_needed(demand_req_s, capacity_req_s, utilization):
    """Replicas to serve ``demand`` at ``utilization`` of each replica's capacity [replicas].

    >>> int(replicas_needed(100.0, 12.0, 0.8))
    11
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        need = np.ceil(np.asarray(demand_req_s, dtype=float) / (np.asarray(capacity_req_s) * utilization) - 1e-9)
    return np.where(np.asarray(capacity_req_s) > 0, need, np.nan)


def rent_usd_per_month(gpus, usd_per_gpu_hour, hours_per_month=HOURS_PER_MONTH):
    """Renting ``gpus`` GPUs all month [USD/month].

    >>> float(rent_usd_per_month(8, 2.0))
    11680.0
    """
    return np.asarray(gpus, dtype=float) * usd_per_gpu_hour * hours_per_month


def power_usd_per_month(nodes, node_power_kw, load, pue, usd_per_kwh, hours_per_month=HOURS_PER_MONTH):
    """Electricity of ``nodes`` servers drawing ``load`` of their maximum, with cooling (PUE) [USD/month].

    >>> round(float(power_usd_per_month(2, 10.2, 0.75, 1.4, 0.10)), 2)
    1563.66
    """
    return np.asarray(nodes, dtype=float) * node_power_kw * load * pue * hours_per_month * usd_per_kwh


def monthly_rate(annual_rate):
    """The monthly rate compounding to ``annual_rate`` [fraction per month].

    ``r = (1 + i) ** (1 / 12) - 1`` for an effective annual rate ``i`` [fraction per year].

    >>> round(float(monthly_rate(0.08)), 6)
    0.006434
    """
    return (1.0 + np.asarray(annual_rate, dtype=float)) ** (1.0 / 12.0) - 1.0


def capital_recovery_factor(rate, periods):
    """Level payment per period that repays 1 USD borrowed now over ``periods`` periods at
    ``rate`` per period [1/period].

    ``CRF = r (1 + r)^n / ((1 + r)^n - 1)``, ``1 / n`` at ``r = 0`` [1]: 10 yearly payments
    of $163 repay $1,000 at 10%.

    References
    ----------
    [1] "Capital recovery factor", Wikipedia
        (https://en.wikipedia.org/wiki/Capital_recovery_factor); PyPSA's ``annuity(n, r)`` is
        the same factor.

    >>> round(float(capital_recovery_factor(0.10, 10)), 4), float(capital_recovery_factor(0.0, 4))
    (0.1627, 0.25)
    """
    rate = np.asarray(rate, dtype=float)
    periods = np.asarray(periods, dtype=float)
    growth = (1.0 + rate) ** periods
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(rate > 0, rate * growth / (growth - 1.0), 1.0 / periods)


def capital_usd_per_month(usd_per_node, life_years, cost_of_capital=0.0, residual_value=0.0):
    """Owning one server: the level monthly payment that repays its price, less the present
    value of what it sells for at the end of its life, at the cost of capital [USD/month].

    Parameters
    ----------
    usd_per_node : server price ``P`` [USD]
    life_years : life ``L`` [years], ``n = 12 L`` months
    cost_of_capital : effective annual rate ``i`` (discount rate, WACC) [fraction per year]
    residual_value : resale value at the end of its life ``s`` [fraction of the price]

    Notes
    -----
    ``C = (P - s P (1 + r)^-n) CRF(r, n)`` with ``r = (1 + i)^(1/12) - 1`` (:func:`monthly_rate`,
    :func:`capital_recovery_factor`): Excel's ``PMT(r, n, -P, s P)``; straight-line
    ``P (1 - s) / n`` at ``i = 0``.

    >>> float(capital_usd_per_month(240000.0, 5)), float(capital_usd_per_month(240000.0, 5, 0, 0.1))
    (4000.0, 3600.0)
    >>> round(float(capital_usd_per_month(240000.0, 5, 0.08)), 2)
    4834.33
    """
    rate = monthly_rate(cost_of_capital)
    months = 12.0 * np.asarray(life_years, dtype=float)
    price = np.asarray(usd_per_node, dtype=float)
    recovered = price * (1.0 - np.asarray(residual_value, dtype=float) * (1.0 + rate) ** -months)
    return recovered * capital_recovery_factor(rate, months)


def buy_usd_per_month(nodes, usd_per_node, life_years, power_usd, hosting_usd_per_node_month,
                      cost_of_capital=0.0, residual_value=0.0):
    """Owning ``nodes`` servers: each one's capital recovery (:func:`capital_usd_per_month`)
    plus power and hosting [USD/month].

    >>> float(buy_usd_per_month(1, 240000.0, 5, 1000.0, 2000.0))
    7000.0
    """
    nodes = np.asarray(nodes, dtype=float)
    capital = capital_usd_per_month(usd_per_node, life_years, cost_of_capital, residual_value)
    return nodes * capital + power_usd + nodes * hosting_usd_per_node_month


def financing_of(table: pd.DataFrame) -> dict[str, float]:
    """The cost of capital and resale value a comparison table was priced at (its columns of
    those names, :func:`compare`), 0 where it has none."""
    return {name: float(table[name].iloc[0]) if name in table and len(table) else 0.0
            for name in FINANCING}


def financing_words(cost_of_capital: float, residual_value: float) -> str:
    """What a buy price is recovered at, for a sentence (empty at 0 and 0).

    >>> financing_words(0.08, 0.1)
    ' at a cost of capital of 8.0% a year, less a resale value of 10% of the price'
    """
    rate = f" at a cost of capital of {cost_of_capital:.1%} a year" if cost_of_capital > 0 else ""
    resale = (f", less a resale value of {residual_value:.0%} of the price" if residual_value > 0
              else "")
    return rate + resale


def break_even_months(capex_usd, rent_usd_per_month, opex_usd_per_month):
    """Months after which buying has cost less than renting; infinite if renting stays cheaper,
    NaN where a price is unknown (no rent price listed, or no ownership row).

    >>> float(break_even_months(240000.0, 13000.0, 3000.0))
    24.0
    >>> [float(m) for m in break_even_months([240000.0, 1.0, np.nan], [2000.0, np.nan, 9.0], 3000.0)]
    [inf, nan, nan]
    """
    capex = np.asarray(capex_usd, dtype=float)
    saving = np.asarray(rent_usd_per_month, dtype=float) - opex_usd_per_month
    unknown = np.isnan(saving) | np.isnan(capex)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(saving > 0, capex / saving, np.where(unknown, np.nan, np.inf))


def rent_prices(catalogs, gpus: list[str]) -> pd.DataFrame:
    """The price rule's row per (gpu, pricing type), indexed by both, with its provenance."""
    return catalogs.chosen_prices(gpus).set_index(["gpu", "pricing_type"])


def saving_fraction(price, reference):
    """How much cheaper ``price`` is than ``reference`` [fraction; negative = dearer].

    >>> round(float(saving_fraction(5.418, 6.88)), 3)
    0.212
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 - np.asarray(price, dtype=float) / np.asarray(reference, dtype=float)


def check_inputs(demand_req_s: float, utilization: float, usd_per_kwh: float, pue: float,
                 load: float, cost_of_capital: float = 0.0, residual_value: float = 0.0) -> None:
    """One-line errors naming the input and its allowed range."""
    check_range("demand_req_s", demand_req_s, 0, None, low_inclusive=False)
    check_range("utilization", utilization, 0, 1, low_inclusive=False)
    check_range("usd_per_kwh", usd_per_kwh, 0, 10)
    check_range("pue", pue, 1, 5)
    check_range("power_load", load, 0, 1, low_inclusive=False)
    check_range("cost_of_capital", cost_of_capital, 0, 1)
    check_range("residual_value", residual_value, 0, 1)


def _capacities(workload: dict, gpus: list[str], catalogs) -> pd.DataFrame:
    tps = [1, 2, 4, 8]
    cases = pd.DataFrame([{**workload, "gpu": gpu, "tp": tp} for gpu in gpus for tp in tps])
    has_slo = pd.notna(workload.get("tpot_slo_ms")) or pd.notna(workload.get("ttft_slo_ms"))
    cases["mode"] = "max_rate" if has_slo else "offline"
    out = estimate_cases(cases, catalogs)
    capacity = out["rate_req_s"] if has_slo else out["req_s"]
    return out.assign(capacity_req_s=capacity.where(out["valid"] & out["fits"], 0.0))


def compare(workload: dict, gpus: list[str], catalogs: Catalogs | None = None, *, utilization: float = 0.8, usd_per_kwh: float = 0.10,
            pue: float = 1.4, power_load: float = 0.75, hours_per_month: float = HOURS_PER_MONTH,
            cost_of_capital: float = 0.0, residual_value: float = 0.0) -> pd.DataFrame:
    """One row per GPU option: sizing, rent and buy costs, TCO over 1 and 3 years, break-even.

    ``cost_of_capital`` [fraction per year] and ``residual_value`` [fraction of the server price
    at the end of its life] set the capital recovery of buying (:func:`capital_usd_per_month`);
    both are kept in the table's columns of the same names."""
    catalogs = catalog_or_default(catalogs)
    check_inputs(workload["demand_req_s"], utilization, usd_per_kwh, pue, power_load,
                 cost_of_capital, residual_value)
    gpus = catalogs.require("gpu", gpus)
    options = _capacities({k: v for k, v in workload.items() if k != "demand_req_s"}, gpus, catalogs)
    options["replicas"] = replicas_needed(workload["demand_req_s"], options["capacity_req_s"], utilization)
    options["gpus_needed"] = options["replicas"] * options["tp"]
    best = options.sort_values(["gpu", "gpus_needed", "tp"], na_position="last").drop_duplicates("gpu")
    financing = dict(zip(FINANCING, (float(cost_of_capital), float(residual_value)), strict=True))
    return _costs(best.set_index("gpu").reindex(gpus).reset_index(), workload, catalogs, usd_per_kwh, pue,
                  power_load, hours_per_month, financing)


def _costs(best: pd.DataFrame, workload: dict, catalogs, usd_per_kwh, pue, load, hours,
           financing: dict[str, float]) -> pd.DataFrame:
    per_node = catalogs.gpus["gpus_per_node"].reindex(best["gpu"]).to_numpy(dtype=float)
    owned = catalogs.ownership.set_index("gpu").reindex(best["gpu"])
    out = best[["gpu", "tp", "replicas", "gpus_needed", "capacity_req_s",
                *(c for c in ("calibration", "error_p10_pct", "error_p90_pct") if c in best)]].copy()
    out["nodes"] = np.ceil(out["gpus_needed"] / per_node)
    out["power_kw"] = out["nodes"] * owned["node_power_kw"].to_numpy(dtype=float)
    tokens_per_month = workload["demand_req_s"] * workload["output_len"] * hours * 3600.0
    prices = rent_prices(catalogs, list(best["gpu"]))
    for column in ("usd_per_node", "node_power_kw", "life_years", "hosting_usd_per_node_month"):
        out[column] = owned[column].to_numpy(dtype=float)
    for kind in RENT_TYPES:
        chosen = prices.reindex(pd.MultiIndex.from_arrays([best["gpu"], [kind] * len(best)]))
        price = chosen["usd_per_gpu_hour"].to_numpy(dtype=float)
        out[f"price_{kind}_usd_per_gpu_hour"] = price
        out[f"rent_{kind}_usd_per_month"] = rent_usd_per_month(out["gpus_needed"], price, hours)
        out[f"price_{kind}_provider"] = (chosen["provider"].fillna("") + " " + chosen["region"].fillna("")).str.strip().to_numpy()
        for field in ("source", "as_of", "warning"):
            out[f"price_{kind}_{field}"] = chosen[field].fillna("").astype(str).to_numpy()
        out[f"price_{kind}_same_provider_on_demand_usd_per_gpu_hour"] = chosen[
            "same_provider_on_demand_usd_per_gpu_hour"].to_numpy(dtype=float)
    power = power_usd_per_month(out["nodes"], owned["node_power_kw"].to_numpy(), load, pue, usd_per_kwh, hours)
    hosting = owned["hosting_usd_per_node_month"].to_numpy(dtype=float)
    out["capex_usd"] = out["nodes"] * owned["usd_per_node"].to_numpy(dtype=float)
    for name, value in financing.items():
        out[name] = value
    out["buy_capital_usd_per_month"] = out["nodes"] * capital_usd_per_month(
        owned["usd_per_node"].to_numpy(dtype=float), owned["life_years"].to_numpy(dtype=float),
        **financing)
    opex = power + out["nodes"] * hosting
    out["buy_opex_usd_per_month"] = opex
    out["buy_usd_per_month"] = out["buy_capital_usd_per_month"] + opex  # buy_usd_per_month's sum
    out["output_tokens_per_month"] = tokens_per_month
    out["usd_per_m_output_tokens_on_demand"] = out["rent_on_demand_usd_per_month"] / tokens_per_month * 1e6
    out["usd_per_m_output_tokens_buy"] = out["buy_usd_per_month"] / tokens_per_month * 1e6
    for months, label in ((12, "1y"), (36, "3y")):
        out[f"tco_{label}_on_demand_usd"] = out["rent_on_demand_usd_per_month"] * months
        reserved = "reserved_1y" if months == 12 else "reserved_3y"
        out[f"tco_{label}_reserved_usd"] = out[f"rent_{reserved}_usd_per_month"] * months
        out[f"tco_{label}_buy_usd"] = out["capex_usd"] + opex * months
    out["break_even_months_vs_on_demand"] = break_even_months(out["capex_usd"], out["rent_on_demand_usd_per_month"], opex)
    out["break_even_months_vs_reserved_3y"] = break_even_months(out["capex_usd"], out["rent_reserved_3y_usd_per_month"], opex)
    out["ownership_source"] = owned["source"].to_numpy()
    out["reserved_vs_on_demand"] = reserved_sentences(out)
    out["note"] = np.where(out["replicas"].isna(), "no configuration of this GPU meets the workload", "")
    if out["replicas"].isna().all():
        message = "no GPU option can serve this workload (check the SLOs, the model and the quantization)"
        raise InvalidValueError(message)
    return out


def reserved_sentences(out: pd.DataFrame) -> list[str]:
    """Per option, one sentence on its reserved prices against the same provider's on-demand."""
    return [_reserved_sentence(row) for row in out.to_dict("records")]


def _reserved_sentence(row: dict) -> str:
    on_demand = row["price_on_demand_usd_per_gpu_hour"]
    renter = row["price_on_demand_provider"].split(" ")[0] or "no provider"
    terms = [(label, row[f"price_{kind}_usd_per_gpu_hour"], row[f"price_{kind}_provider"].split(" ")[0],
              row[f"price_{kind}_same_provider_on_demand_usd_per_gpu_hour"])
             for kind, label in (("reserved_1y", "1-year"), ("reserved_3y", "3-year"))]
    listed = [t for t in terms if np.isfinite(t[1])]
    if not listed and not np.isfinite(on_demand):
        return (f"No price is listed for {row['gpu']}: give one in a --catalog prices row to cost "
                f"renting it.")
    if not listed:
        return f"No reserved price is listed for {row['gpu']}: renting is on demand only ({renter} ${on_demand:,.2f}/GPU-hour)."
    seller = listed[0][2]
    parts = [f"{label} ${price:,.2f} ({_percent(saving_fraction(price, reference))} below {seller} on-demand "
             f"${reference:,.2f})" for label, price, _, reference in listed]
    text = f"{seller} reserves {row['gpu']} at " + " and ".join(parts)
    if seller == renter or not np.isfinite(on_demand):
        return text + "."
    cheaper = min(listed, key=lambda t: t[1])
    versus = saving_fraction(on_demand, cheaper[1])
    relation = f"{_percent(versus)} below" if versus >= 0 else f"{_percent(-versus)} above"
    return (text + f"; on-demand comes from {renter} at ${on_demand:,.2f}, {relation} {seller}'s "
            f"{cheaper[0]} reservation.")


def _percent(fraction) -> str:
    return f"{float(fraction) * 100:,.0f}%"
