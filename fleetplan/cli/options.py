"""Options shared by several commands, and the small parsers behind them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fleetplan.catalogs import Catalogs, load_catalogs
from fleetplan.errors import InvalidValueError

AXIS_HELP = "Comma-separated whole numbers or ranges: 1,2,8 | 1-512 (powers of two) | 128-4096:128 (step)"

CatalogOption = Annotated[list[Path] | None, typer.Option(
    "--catalog", help="Your CSV/XLSX rows merged over the shipped ones, e.g. negotiated prices or fitted "
                      "factors (repeatable)")]
MbuOption = Annotated[float | None, typer.Option(help="Memory-bandwidth utilization (0-1]; default: efficiency catalog")]
MfuOption = Annotated[float | None, typer.Option(help="Model FLOPs utilization (0-1]; default: efficiency catalog")]
OverheadOption = Annotated[float | None, typer.Option(help="Fixed time per forward step [ms]")]
PriceOption = Annotated[float | None, typer.Option("--price", help="USD per GPU-hour; default: median on-demand price")]
ReserveOption = Annotated[float | None, typer.Option(help="Share of GPU memory kept back [0-0.95]; default 0.10")]
MaxSeqsOption = Annotated[int | None, typer.Option(help="Serving engine's cap on concurrent sequences; default 2048")]
EngineOption = Annotated[str | None, typer.Option(
    help="Use this engine's efficiency rows (e.g. from `fleetplan calibrate`); default: the * rows")]

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


def catalogs_from(paths) -> Catalogs:
    """The shipped catalogs merged with the ``--catalog`` files."""
    return load_catalogs(overrides=list(paths or ()))


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
