"""Options shared by several commands, and the small parsers behind them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from fleetplan.catalogs import (
    DEFAULT_MAX_PRICE_AGE_DAYS,
    DEFAULT_PRICE_RULE,
    Catalogs,
    PriceRule,
    load_catalogs,
    unpriced_gpus,
    warning_lines,
)
from fleetplan.errors import InvalidValueError
from fleetplan.exports.atomic import check_output_path

AXIS_HELP = "Comma-separated whole numbers or ranges: 1,2,8 | 1-512 (powers of two) | 128-4096:128 (step)"

CatalogOption = Annotated[list[Path] | None, typer.Option(
    "--catalog", help="Your CSV/XLSX rows merged over the shipped ones, e.g. negotiated prices or fitted "
                      "factors (repeatable)")]
MbuOption = Annotated[float | None, typer.Option(help="Memory-bandwidth utilization (0-1]; default: efficiency catalog")]
MfuOption = Annotated[float | None, typer.Option(help="Model FLOPs utilization (0-1]; default: efficiency catalog")]
OverheadOption = Annotated[float | None, typer.Option(help="Fixed time per forward step [ms]")]
PriceOption = Annotated[float | None, typer.Option(
    "--price", help="USD per GPU-hour for every GPU; default: the --price-rule's catalog price")]
_PRICES = "Prices (the same rule in every command)"
PriceRuleOption = Annotated[str, typer.Option(
    "--price-rule", rich_help_panel=_PRICES,
    help="Which catalog price: cheapest | median | provider:NAME (NAME's, else the cheapest). "
         "Rows from your --catalog files always win")]
ProviderOption = Annotated[str | None, typer.Option(rich_help_panel=_PRICES, help="Prices from this provider only")]
RegionOption = Annotated[str | None, typer.Option(rich_help_panel=_PRICES, help="Prices from this region only")]
MaxAgeOption = Annotated[int, typer.Option(
    "--max-price-age-days", rich_help_panel=_PRICES, help="Warn about prices older than this [days]")]
MixOption = Annotated[bool, typer.Option(
    "--mix-providers", rich_help_panel=_PRICES,
    help="Choose spot and reserved prices on their own; default: from the on-demand price's provider")]
ReserveOption = Annotated[float | None, typer.Option(help="Share of GPU memory kept back [0-0.95]; default 0.10")]
MaxSeqsOption = Annotated[int | None, typer.Option(help="Serving engine's cap on concurrent sequences; default 2048")]
EngineOption = Annotated[str | None, typer.Option(
    help="Serving engine whose profile and efficiency rows to use (tensorrt-llm, vllm, sglang, ...; "
         "NAME@MAJOR.MINOR for an older measured release, e.g. tensorrt-llm@0.14); default: vllm")]

LEVER_HELP = {
    "pp": "Pipeline-parallel stages across nodes (1 = off)",
    "prefix_hit_rate": "Share of each prompt in the prefix cache, 0-0.99 (0 = off)",
    "spec_tokens": "Speculative decoding: tokens drafted per step (0 = off)",
    "spec_acceptance": "Speculative decoding: acceptance rate per drafted token, 0-0.99",
    "spec_draft_cost": "Speculative decoding: draft cost per token as a share of a verification step",
    "dequant_overhead": "Extra matmul time of weight-only quantization (0 = off)",
}
PpOption = Annotated[str | None, typer.Option("--pp", help=LEVER_HELP["pp"] + "; a list sweeps it")]
PrefixOption = Annotated[str | None, typer.Option(help=LEVER_HELP["prefix_hit_rate"] + "; a list sweeps it")]
SpecTokensOption = Annotated[str | None, typer.Option(help=LEVER_HELP["spec_tokens"] + "; a list sweeps it")]
SpecAcceptOption = Annotated[str | None, typer.Option(help=LEVER_HELP["spec_acceptance"] + "; a list sweeps it")]
SpecCostOption = Annotated[str | None, typer.Option(help=LEVER_HELP["spec_draft_cost"] + "; a list sweeps it")]
DequantOption = Annotated[str | None, typer.Option(help=LEVER_HELP["dequant_overhead"] + "; a list sweeps it")]


def ids(text: str) -> list[str]:
    """Comma-separated ids, blanks dropped."""
    return [part.strip() for part in text.split(",") if part.strip()]


def named_ids(text: str, option: str) -> list[str]:
    """Comma-separated ids of an option that must name at least one."""
    found = ids(text)
    if not found:
        message = f"{option} must name at least one id, got {text!r}"
        raise InvalidValueError(message)
    return found


def catalogs_from(paths, rule: PriceRule | None = None) -> Catalogs:
    """The shipped catalogs merged with the ``--catalog`` files, priced by ``rule``."""
    catalogs = load_catalogs(overrides=list(paths or ()))
    return catalogs if rule is None else catalogs.with_price_rule(rule)


def price_rule(choice: str = DEFAULT_PRICE_RULE, provider: str | None = None, region: str | None = None,
               max_age_days: int = DEFAULT_MAX_PRICE_AGE_DAYS, mix_providers: bool = False) -> PriceRule:
    """The price options as one rule."""
    return PriceRule(choice, provider or None, region or None, max_age_days, mix_providers)


def echo_price_warnings(chosen: pd.DataFrame, gpus=()) -> None:
    """Old or single-provider prices, one line each on stderr, and the ``gpus`` with no
    on-demand price at all."""
    for line in warning_lines(chosen):
        typer.echo(f"warning: {line}", err=True)
    missing = unpriced_gpus(chosen, gpus)
    if missing:
        typer.echo(f"warning: no on_demand price for {', '.join(missing)} in the catalogs: its cost "
                   f"columns are empty (give one in a --catalog prices row)", err=True)


def factors(mbu, mfu, step_overhead_ms, price, reserve_fraction, max_num_seqs, engine=None) -> dict:
    """The model assumptions given on the command line (unset ones left out)."""
    given = {"mbu": mbu, "mfu": mfu, "step_overhead_ms": step_overhead_ms, "usd_per_gpu_hour": price,
             "reserve_fraction": reserve_fraction, "max_num_seqs": max_num_seqs,
             "engine": engine.strip().lower() if engine else None}
    return {k: v for k, v in given.items() if v is not None}


def numbers(name: str, text: str) -> list[float]:
    """Comma-separated numbers of option ``--name``."""
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        message = f"--{name.replace('_', '-')} must be numbers separated by commas, got '{text}'"
        raise InvalidValueError(message) from None


def levers(**given) -> dict:
    """Lever options as given: one value stays a scalar, several become a sweep axis."""
    chosen = {}
    for name, text in given.items():
        if text is not None:
            values = numbers(name, text)
            chosen[name] = values[0] if len(values) == 1 else values
    return chosen


#: File name endings each command writes with ``-o`` ("" = a folder of CSV tables).
OUTPUT_SUFFIXES = {
    "plan": (".xlsx", ".parquet", ".json", ".csv", ""),
    "schema": (".json",),
    "sweep": (".csv", ".parquet", ".xlsx", ""),  # "": a Dask sweep's dataset folder
    "estimate": (".csv", ".parquet", ".xlsx"),
    "compare": (".csv", ".json", ".xlsx"),
    "whatif": (".xlsx", ".parquet", ".csv"),
    "validate": (".csv", ".xlsx"),
    "export": (".xlsx", ".parquet", ".csv", ".json"),
}


def checked_output(command: str, path: Path | None) -> Path | None:
    """``-o`` of ``command`` checked before any work: its ending, its folder, writable."""
    if path is None:
        return None
    allowed = OUTPUT_SUFFIXES.get(command)
    if allowed is not None and path.suffix.lower() not in allowed:
        named = [s for s in allowed if s]
        endings = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " or " + named[-1]
        message = f"-o {path}: the {command} output file name must end with {endings}"
        raise InvalidValueError(message)
    check_output_path(path)
    return path


#: Upper bounds of numeric options beyond "finite" (the commands check the lower ones): a
#: value past them is a typo or a lost unit, and would make the solver or the grid explode.
OPTION_BOUNDS = {"demand_req_s": 1e7, "rate": 1e7, "tpot_slo_ms": 1e5, "ttft_slo_ms": 1e6}


def checked_number(name: str, value):
    """A numeric option (or each of a repeated one): finite, and within :data:`OPTION_BOUNDS`."""
    if isinstance(value, (list, tuple)):
        return type(value)(checked_number(name, v) for v in value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    option = "--" + name.replace("_", "-")
    if isinstance(value, float) and not math.isfinite(value):
        message = f"{option} must be a finite number, got {value}"
        raise InvalidValueError(message)
    high = OPTION_BOUNDS.get(name)
    if high is not None and value > high:
        message = f"{option} must be <= {high:g}, got {value:g}"
        raise InvalidValueError(message)
    return value
