"""``fleetplan estimate``: one configuration (or every row of a CSV of cases) at its operating point."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from fleetplan.cli.options import (
    CatalogOption,
    DequantOption,
    EngineOption,
    MaxSeqsOption,
    MbuOption,
    MfuOption,
    OverheadOption,
    PpOption,
    PrefixOption,
    PriceOption,
    ReserveOption,
    SpecAcceptOption,
    SpecCostOption,
    SpecTokensOption,
    catalogs_from,
    factors,
    levers,
)
from fleetplan.cli.progress import write_stream
from fleetplan.errors import InvalidValueError
from fleetplan.sweeps.columns import LEVER_COLUMNS, LOAD_COLUMNS, SWEEP_COLUMNS
from fleetplan.sweeps.disaggregation import disaggregated
from fleetplan.sweeps.estimate import estimate_cases


def estimate_command(
    gpu: Annotated[str | None, typer.Option(help="GPU id")] = None,
    model: Annotated[str | None, typer.Option(help="Model id")] = None,
    quant: Annotated[str, typer.Option(help="Weight quantization id")] = "bf16",
    kv_quant: Annotated[str | None, typer.Option(help="KV-cache quantization id; default: the quant's own")] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree [GPUs]")] = 1,
    input_len: Annotated[int, typer.Option(help="Prompt tokens per request")] = 1024,
    output_len: Annotated[int, typer.Option(help="Output tokens per request")] = 256,
    batch: Annotated[int | None, typer.Option(help="Evaluate at this batch [sequences]")] = None,
    tpot_slo_ms: Annotated[float | None, typer.Option(help="Report the knee: largest batch with TPOT <= this [ms]")] = None,
    ttft_slo_ms: Annotated[float | None, typer.Option(help="... and TTFT <= this [ms]")] = None,
    offline: Annotated[bool, typer.Option(help="Memory-limited maximum throughput (no SLO)")] = False,
    rate: Annotated[float | None, typer.Option(help="Latency under load at this request rate [requests/s]")] = None,
    max_rate: Annotated[bool, typer.Option(help="Largest request rate whose loaded TPOT/TTFT meet the SLOs")] = False,
    concurrency: Annotated[int | None, typer.Option(help="Closed loop: N requests in flight, as a benchmark client "
                                                         "with --max-concurrency N measures it")] = None,
    requests: Annotated[int | None, typer.Option(help="Requests in the benchmark run (--concurrency, or --rate above "
                                                      "capacity); default 1000 with --concurrency")] = None,
    capacity_quantile: Annotated[str, typer.Option(help="p50: throughput as modelled; p90: divided by 1 + the "
                                                        "calibration error band's p90 (pessimistic)")] = "p50",
    prefill_chunk_tokens: Annotated[int | None, typer.Option(help="Chunked prefill: tokens per chunk (0 = off)")] = None,
    prefill_gpu: Annotated[str | None, typer.Option(help="Disaggregate: prefill pool GPU (--gpu/--tp are the decode pool)")] = None,
    prefill_tp: Annotated[int, typer.Option(help="Disaggregate: prefill pool TP degree")] = 1,
    cases: Annotated[Path | None, typer.Option(help="Bulk form: a CSV of cases (columns = flag names)")] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Bulk form: write results (.csv/.parquet/.xlsx)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")] = False,
    catalog: CatalogOption = None,
    mbu: MbuOption = None, mfu: MfuOption = None, step_overhead_ms: OverheadOption = None,
    price: PriceOption = None, reserve_fraction: ReserveOption = None, max_num_seqs: MaxSeqsOption = None,
    engine: EngineOption = None,
    pp: PpOption = None, prefix_hit_rate: PrefixOption = None, spec_tokens: SpecTokensOption = None,
    spec_acceptance: SpecAcceptOption = None, spec_draft_cost: SpecCostOption = None,
    dequant_overhead: DequantOption = None,
) -> None:
    """Memory, latency, throughput and cost of one configuration (or of every row of --cases)."""
    given = factors(mbu, mfu, step_overhead_ms, price, reserve_fraction, max_num_seqs, engine)
    if prefill_gpu is not None:
        slos = {"tpot_slo_ms": tpot_slo_ms, "ttft_slo_ms": ttft_slo_ms}
        _print_disaggregated(gpu, model, quant, kv_quant, tp, input_len, output_len, slos, prefill_gpu,
                             prefill_tp, catalog, given, as_json)
        return
    if cases is not None:
        frame = _read_cases(cases)
    else:
        frame = _single_case(gpu, model, quant, kv_quant, tp, input_len, output_len, batch,
                             tpot_slo_ms, ttft_slo_ms, offline, rate, max_rate, concurrency)
        frame["prefill_chunk_tokens"] = prefill_chunk_tokens
        frame["n_requests"] = requests
    chosen = levers(pp=pp, prefix_hit_rate=prefix_hit_rate, spec_tokens=spec_tokens, spec_acceptance=spec_acceptance,
                    spec_draft_cost=spec_draft_cost, dequant_overhead=dequant_overhead)
    for name, value in chosen.items():
        if isinstance(value, list):
            message = f"--{name.replace('_', '-')} takes one value in estimate (sweep takes lists)"
            raise InvalidValueError(message)
        frame[name] = value
    result = estimate_cases(frame, catalogs_from(catalog), capacity_quantile=capacity_quantile.strip().lower(), **given)
    if output is not None:
        recorded = {"engine": ",".join(sorted(result["engine"].astype(str).unique())),
                    "capacity_quantile": capacity_quantile}
        write_stream(iter([result]), len(result), output, params={"cases": str(cases or ""), **given, **recorded},
                     catalogs=catalogs_from(catalog))
        typer.echo(f"wrote {output}", err=True)
    elif as_json:
        typer.echo(result.to_json(orient="records", indent=2))
    else:
        _print_estimate(result)


def _print_disaggregated(gpu, model, quant, kv_quant, tp, input_len, output_len, slos, prefill_gpu, prefill_tp,
                         catalog, given, as_json) -> None:
    if gpu is None or model is None:
        message = "a disaggregated estimate needs --gpu (the decode pool) and --model"
        raise InvalidValueError(message)
    case = pd.DataFrame([{"model": model, "quant": quant, "kv_quant": kv_quant, "input_len": input_len,
                          "output_len": output_len, "prefill_gpu": prefill_gpu, "prefill_tp": prefill_tp,
                          "decode_gpu": gpu, "decode_tp": tp, **slos}])
    result = disaggregated(case, catalogs_from(catalog), **given)
    if as_json:
        typer.echo(result.to_json(orient="records", indent=2))
        return
    for name, value in result.iloc[0].items():
        typer.echo(f"{name:38} {value:,.4g}" if isinstance(value, float) else f"{name:38} {value}")


def _single_case(gpu, model, quant, kv_quant, tp, input_len, output_len, batch, tpot_slo_ms, ttft_slo_ms, offline,
                 rate=None, max_rate=False, concurrency=None):
    if gpu is None or model is None:
        message = "estimate needs --gpu and --model (or --cases FILE)"
        raise InvalidValueError(message)
    has_slo = tpot_slo_ms is not None or ttft_slo_ms is not None
    chosen = [name for name, on in (("--batch", batch is not None), ("--offline", offline), ("--rate", rate is not None),
                                    ("--concurrency", concurrency is not None), ("an SLO", has_slo and not max_rate)) if on]
    if len(chosen) > 1:
        message = (f"give one of --batch, --tpot-slo-ms/--ttft-slo-ms, --rate, --concurrency or --offline, "
                   f"not {' and '.join(chosen)}")
        raise InvalidValueError(message)
    if max_rate and not has_slo:
        message = "--max-rate needs --tpot-slo-ms or --ttft-slo-ms"
        raise InvalidValueError(message)
    mode = ("max_rate" if max_rate else "batch" if batch is not None else "rate" if rate is not None
            else "concurrency" if concurrency is not None else "offline" if offline or not chosen else "slo")
    return pd.DataFrame([{"gpu": gpu, "model": model, "quant": quant, "kv_quant": kv_quant, "tp": tp,
                          "input_len": input_len, "output_len": output_len, "batch": batch,
                          "tpot_slo_ms": tpot_slo_ms, "ttft_slo_ms": ttft_slo_ms, "rate_req_s": rate,
                          "concurrency": concurrency, "mode": mode}])


def _read_cases(path: Path) -> pd.DataFrame:
    if not path.is_file():
        message = f"cases file {path} does not exist"
        raise InvalidValueError(message)
    try:
        return pd.read_csv(path, dtype={"gpu": str, "model": str, "quant": str, "kv_quant": str, "mode": str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        message = f"cases file {path} is not a readable CSV: {str(error).splitlines()[0]}"
        raise InvalidValueError(message) from None


def _print_estimate(result: pd.DataFrame) -> None:
    row = result.iloc[0]
    table = Table(title=f"{row['model']} on {int(row['tp'])} x {row['gpu']} ({row['quant']}, KV {row['kv_quant']}, "
                        f"{row['mode']}, {row['engine']}; calibration {row['calibration']})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("unit")
    units = {**SWEEP_COLUMNS, **LEVER_COLUMNS}
    shown = [n for n in (*SWEEP_COLUMNS, *LEVER_COLUMNS, *LOAD_COLUMNS) if n in result and result[n].notna().all()]
    for name in shown:
        if name in ("gpu", "model", "quant", "kv_quant", "tp"):
            continue
        column = units.get(name)
        unit = column.unit if column else ("requests/s" if "req_s" in name else "ms" if name.endswith("_ms") else "")
        value = row[name]
        text = f"{value:,.4g}" if isinstance(value, float) else str(value)
        table.add_row(name, text, unit)
    Console(file=sys.stdout, width=110).print(table)


def register(app: typer.Typer) -> None:
    app.command("estimate")(estimate_command)
