"""``fleetplan compare``: rent or buy, and which GPU, for one workload."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fleetplan.catalogs import DEFAULT_MAX_PRICE_AGE_DAYS, DEFAULT_PRICE_RULE, PRICING_TYPES
from fleetplan.catalogs.conventions import HOURS_PER_MONTH
from fleetplan.cli.options import (
    CatalogOption,
    MaxAgeOption,
    MixOption,
    PriceRuleOption,
    ProviderOption,
    RegionOption,
    catalogs_from,
    echo_price_warnings,
    named_ids,
    price_rule,
)
from fleetplan.cli.tables import print_table
from fleetplan.exports import write_compare
from fleetplan.exports.compare_summary import buying_basis, not_priced_to_buy
from fleetplan.sweeps.rent_or_buy import compare

#: (column, header with unit) shown on the terminal.
SHOWN = [("gpu", "GPU"), ("gpus_needed", "GPUs"), ("power_kw", "kW"),
         ("rent_on_demand_usd_per_month", "rent USD/month"), ("buy_usd_per_month", "buy USD/month"),
         ("usd_per_m_output_tokens_on_demand", "rent USD/1M output tokens"),
         ("tco_3y_on_demand_usd", "rent 3 years USD"), ("tco_3y_buy_usd", "buy 3 years USD"),
         ("break_even_months_vs_on_demand", "break-even months")]


def compare_command(
    model: Annotated[str, typer.Option(help="Model id")],
    gpus: Annotated[str, typer.Option(help="GPU options, comma-separated")],
    demand_req_s: Annotated[float, typer.Option(help="Peak demand [requests/s]")],
    quant: Annotated[str, typer.Option(help="Quantization id")] = "bf16",
    input_len: Annotated[int, typer.Option(help="Prompt tokens per request")] = 1024,
    output_len: Annotated[int, typer.Option(help="Output tokens per request")] = 256,
    tpot_slo_ms: Annotated[float | None, typer.Option(help="TPOT SLO [ms]")] = None,
    ttft_slo_ms: Annotated[float | None, typer.Option(help="TTFT SLO [ms]")] = None,
    utilization: Annotated[float, typer.Option(help="Target utilization of each replica's capacity (0-1]")] = 0.8,
    usd_per_kwh: Annotated[float, typer.Option(help="Electricity price [USD/kWh]")] = 0.10,
    pue: Annotated[float, typer.Option(help="Power usage effectiveness of the data center [1-5]")] = 1.4,
    power_load: Annotated[float, typer.Option(help="Average draw as a share of the servers' maximum power")] = 0.75,
    cost_of_capital: Annotated[float, typer.Option(
        help="Annual cost of capital (discount rate) of bought servers, e.g. 0.08 "
             "[fraction/year, 0-1]; 0 = straight-line")] = 0.0,
    residual_value: Annotated[float, typer.Option(
        help="What a bought server sells for at the end of its life "
             "[fraction of its price, 0-1]")] = 0.0,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write the full table (.csv, .json or .xlsx)")] = None,
    catalog: CatalogOption = None,
    price_choice: PriceRuleOption = DEFAULT_PRICE_RULE, provider: ProviderOption = None, region: RegionOption = None,
    max_price_age_days: MaxAgeOption = DEFAULT_MAX_PRICE_AGE_DAYS, mix_providers: MixOption = False,
) -> None:
    """For each GPU option: GPUs and nodes needed, rent and buy costs, 1- and 3-year TCO, break-even,
    and how its reserved prices compare with the same provider's on-demand price."""
    catalogs = catalogs_from(catalog, price_rule(price_choice, provider, region, max_price_age_days, mix_providers))
    workload = {"model": model, "quant": quant, "input_len": input_len, "output_len": output_len,
                "tpot_slo_ms": tpot_slo_ms, "ttft_slo_ms": ttft_slo_ms, "demand_req_s": demand_req_s}
    table = compare(workload, named_ids(gpus, "--gpus"), catalogs, utilization=utilization, usd_per_kwh=usd_per_kwh, pue=pue,
                    power_load=power_load, cost_of_capital=cost_of_capital,
                    residual_value=residual_value)
    echo_price_warnings(catalogs.chosen_prices(list(table["gpu"]), PRICING_TYPES), list(table["gpu"]))
    _print(table, catalogs.price_rule.describe())
    if output is not None:
        params = {"hours_per_month": HOURS_PER_MONTH, "usd_per_kwh": usd_per_kwh, "pue": pue,
                  "power_load": power_load}
        write_compare(table, output, params, workload={**workload, "utilization": utilization}, catalogs=catalogs,
                      price_rule=catalogs.price_rule.describe())
        typer.echo(f"wrote {output}", err=True)


def _print(table, rule: str) -> None:
    rows = [[row[name] for name, _ in SHOWN] for row in table.to_dict("records")]
    caption = "\n".join([*(f"{row['gpu']}: {row['reserved_vs_on_demand']}" for row in table.to_dict("records")),
                         _calibration_line(table),
                         f"Prices: {rule}. Buying: {buying_basis(table)}.",
                         *filter(None, [not_priced_to_buy(table)])])
    print_table("Rent or buy, per GPU option", [header for _, header in SHOWN], rows,
                numeric=[name != "gpu" for name, _ in SHOWN], caption=caption)


def _calibration_line(table) -> str:
    """Each option's calibration label and the p10/p90 error of held-out rows like it."""
    if "calibration" not in table:
        return "Calibration: not known."
    parts = [f"{r['gpu']} {r['calibration']} (p10 {r['error_p10_pct']:+.0f}%, p90 {r['error_p90_pct']:+.0f}%)"
             for r in table.to_dict("records") if isinstance(r["calibration"], str)]
    return "Capacity calibration, with the error band of held-out rows like it: " + "; ".join(parts) + "."


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_command)
