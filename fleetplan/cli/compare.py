"""``fleetplan compare``: rent or buy, and which GPU, for one workload."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from fleetplan.catalogs.conventions import HOURS_PER_MONTH
from fleetplan.cli.options import CatalogOption, catalogs_from
from fleetplan.exports import write_compare
from fleetplan.sweeps.rent_or_buy import compare

SHOWN = [("gpu", "GPU", "{}"), ("tp", "TP", "{:.0f}"), ("gpus_needed", "GPUs", "{:,.0f}"), ("nodes", "nodes", "{:,.0f}"),
         ("power_kw", "kW", "{:,.1f}"), ("rent_on_demand_usd_per_month", "on-demand $/mo", "${:,.0f}"),
         ("buy_usd_per_month", "buy $/mo", "${:,.0f}"), ("usd_per_m_output_tokens_on_demand", "$/1M tok rent", "${:,.3f}"),
         ("tco_3y_on_demand_usd", "3y rent", "${:,.0f}"), ("tco_3y_buy_usd", "3y buy", "${:,.0f}"),
         ("break_even_months_vs_on_demand", "break-even (mo)", "{:,.1f}")]


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
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write the full table (.csv, .json or .xlsx)")] = None,
    catalog: CatalogOption = None,
) -> None:
    """For each GPU option: GPUs and nodes needed, rent and buy costs, 1- and 3-year TCO, break-even."""
    workload = {"model": model, "quant": quant, "input_len": input_len, "output_len": output_len,
                "tpot_slo_ms": tpot_slo_ms, "ttft_slo_ms": ttft_slo_ms, "demand_req_s": demand_req_s}
    table = compare(workload, [g.strip() for g in gpus.split(",") if g.strip()], catalogs_from(catalog),
                    utilization=utilization, usd_per_kwh=usd_per_kwh, pue=pue, power_load=power_load)
    _print(table)
    if output is not None:
        write_compare(table, output, {"hours_per_month": HOURS_PER_MONTH, "usd_per_kwh": usd_per_kwh, "pue": pue,
                               "power_load": power_load})
        typer.echo(f"wrote {output}", err=True)


def _print(table) -> None:
    view = Table(title="Rent or buy: cheapest listed prices; buying amortized over the server's life")
    for _, header, _ in SHOWN:
        view.add_column(header, justify="left" if header == "GPU" else "right")
    for row in table.to_dict("records"):
        view.add_row(*("-" if row[name] != row[name] else fmt.format(row[name]) for name, _, fmt in SHOWN))
    Console(file=sys.stdout, width=160).print(view)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_command)
