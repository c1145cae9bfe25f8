"""CLI commands of the performance model: ``fleetplan sweep`` and ``fleetplan estimate``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from fleetplan.errors import InvalidValueError
from fleetplan.sweeps.validate import parse_axis

_AXIS = "Comma-separated whole numbers or ranges: 1,2,8 | 1-512 (powers of two) | 128-4096:128 (step)"
CatalogOption = Annotated[list[Path] | None, typer.Option("--catalog", help="Catalog override file (CSV/XLSX); repeatable")]


def _ids(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _catalogs(paths):
    from fleetplan.catalogs import load_catalogs

    return load_catalogs(overrides=list(paths or ()))


def _factors(mbu, mfu, step_overhead_ms, price, reserve_fraction, max_num_seqs, engine=None) -> dict:
    given = {"mbu": mbu, "mfu": mfu, "step_overhead_ms": step_overhead_ms, "usd_per_gpu_hour": price,
             "reserve_fraction": reserve_fraction, "max_num_seqs": max_num_seqs,
             "engine": engine.strip().lower() if engine else None}
    return {k: v for k, v in given.items() if v is not None}


MbuOption = Annotated[float | None, typer.Option(help="Memory-bandwidth utilization (0-1]; default: efficiency catalog")]
MfuOption = Annotated[float | None, typer.Option(help="Model FLOPs utilization (0-1]; default: efficiency catalog")]
OverheadOption = Annotated[float | None, typer.Option(help="Fixed time per forward step [ms]")]
PriceOption = Annotated[float | None, typer.Option("--price", help="USD per GPU-hour; default: median on-demand price")]
ReserveOption = Annotated[float | None, typer.Option(help="Share of GPU memory kept back [0-0.95]; default 0.10")]
MaxSeqsOption = Annotated[int | None, typer.Option(help="Serving engine's cap on concurrent sequences; default 2048")]
EngineOption = Annotated[str | None, typer.Option(help="Use this engine's efficiency rows (e.g. from `fleetplan calibrate`); default: the * rows")]


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
ChunkOption = Annotated[str | None, typer.Option(help="Chunked prefill: prompt tokens per step (0 = off); a list sweeps it")]
PrefillGpuOption = Annotated[str | None, typer.Option(
    help="Disaggregate: prefill replica GPU ids, 'none' = colocated; a list sweeps it (--gpu/--tp: the decode replica)")]
PrefillTpOption = Annotated[str | None, typer.Option(help="Disaggregate: prefill replica TP degrees (default 1). " + _AXIS)]


def _numbers(name: str, text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        message = f"--{name.replace('_', '-')} must be numbers separated by commas, got '{text}'"
        raise InvalidValueError(message) from None


def _levers(**given) -> dict:
    """Lever options as given: one value stays a scalar, several become a sweep axis."""
    levers = {}
    for name, text in given.items():
        if text is not None:
            values = _numbers(name, text)
            levers[name] = values[0] if len(values) == 1 else values
    return levers


def sweep_command(
    gpu: Annotated[str, typer.Option(help="GPU ids, comma-separated")],
    model: Annotated[str, typer.Option(help="Model ids, comma-separated")],
    quant: Annotated[str, typer.Option(help="Quantization ids, comma-separated")] = "bf16",
    kv_quant: Annotated[str | None, typer.Option(help="KV-cache quantization ids; default: each quant's own")] = None,
    tp: Annotated[str, typer.Option(help=_AXIS)] = "1",
    context: Annotated[str, typer.Option(help="Context lengths [tokens]. " + _AXIS)] = "2048",
    input_len: Annotated[str | None, typer.Option(help="Prompt lengths [tokens]; default: = context")] = None,
    output_len: Annotated[str, typer.Option(help="Output lengths [tokens]. " + _AXIS)] = "256",
    batch: Annotated[str, typer.Option(help="Batch sizes [sequences]. " + _AXIS)] = "1-512",
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write .csv, .parquet or .xlsx; default: print")] = None,
    drop_invalid: Annotated[bool, typer.Option(help="Drop rows that cannot run or do not fit")] = False,
    chunk_rows: Annotated[int, typer.Option(help="Rows evaluated per chunk when streaming")] = 1_000_000,
    partition_by: Annotated[str | None, typer.Option(help="Parquet only: hive-partition by these columns, e.g. gpu,model")] = None,
    top_n: Annotated[int | None, typer.Option(help="Workbook only: keep the N cheapest rows plus a summary")] = None,
    tpot_slo_ms: Annotated[float | None, typer.Option(help="Workbook only: SLO line and knees on the frontier chart [ms]")] = None,
    scheduler: Annotated[str | None, typer.Option(help="Run on this Dask scheduler (or $FLEETPLAN_SCHEDULER); writes a gpu/model-partitioned dataset")] = None,
    workers: Annotated[int | None, typer.Option(help="Run on a local Dask cluster of this many worker processes")] = None,
    catalog: CatalogOption = None,
    mbu: MbuOption = None, mfu: MfuOption = None, step_overhead_ms: OverheadOption = None,
    price: PriceOption = None, reserve_fraction: ReserveOption = None, max_num_seqs: MaxSeqsOption = None,
    engine: EngineOption = None,
    pp: PpOption = None, prefix_hit_rate: PrefixOption = None, spec_tokens: SpecTokensOption = None,
    spec_acceptance: SpecAcceptOption = None, spec_draft_cost: SpecCostOption = None,
    dequant_overhead: DequantOption = None, prefill_chunk_tokens: ChunkOption = None,
    prefill_gpu: PrefillGpuOption = None, prefill_tp: PrefillTpOption = None,
) -> None:
    """Evaluate every combination of the axes: memory, TPOT, TTFT, throughput and cost."""
    from fleetplan.sweeps.engine import iter_sweep, make_grid
    from fleetplan.sweeps.stream import write_stream

    if chunk_rows < 1:
        message = f"chunk-rows must be >= 1, got {chunk_rows}"
        raise InvalidValueError(message)
    overrides = {**_factors(mbu, mfu, step_overhead_ms, price, reserve_fraction, max_num_seqs, engine),
                 **_levers(pp=pp, prefix_hit_rate=prefix_hit_rate, spec_tokens=spec_tokens,
                           spec_acceptance=spec_acceptance, spec_draft_cost=spec_draft_cost,
                           dequant_overhead=dequant_overhead, prefill_chunk_tokens=prefill_chunk_tokens)}
    grid = make_grid(_ids(gpu), _ids(model), _ids(quant), kv_quants=_ids(kv_quant) if kv_quant else None,
                     tps=parse_axis(tp), contexts=parse_axis(context),
                     input_lens=parse_axis(input_len) if input_len else None,
                     output_lens=parse_axis(output_len), batches=parse_axis(batch), catalogs=_catalogs(catalog),
                     prefill_gpus=_ids(prefill_gpu) if prefill_gpu is not None else None,
                     prefill_tps=parse_axis(prefill_tp) if prefill_tp is not None else None, **overrides)
    if scheduler or workers is not None or os.environ.get("FLEETPLAN_SCHEDULER"):
        _sweep_on_dask(grid, output, scheduler, workers, chunk_rows, drop_invalid, catalog, locals())
        return
    chunks = iter_sweep(None, None, None, grid=grid, chunk_rows=chunk_rows, drop_invalid=drop_invalid)
    if output is None:
        frame = pd.concat(list(chunks), ignore_index=True)
        typer.echo(frame.to_csv(index=False), nl=False)
        return
    params = {"gpus": gpu, "models": model, "quants": quant, "kv_quants": kv_quant, "tps": tp, "contexts": context,
              "input_lens": input_len, "output_lens": output_len, "batches": batch, "drop_invalid": drop_invalid,
              **({"prefill_gpus": prefill_gpu, "prefill_tps": prefill_tp or "1"} if prefill_gpu is not None else {}),
              **overrides}  # model assumptions and levers given on the command line, swept or not
    options = {"partition_by": _ids(partition_by) if partition_by else None, "top_n": top_n,
               "tpot_slo_ms": tpot_slo_ms}
    write_stream(chunks, grid.n_rows, output, params=params, catalogs=_catalogs(catalog),
                 **{k: v for k, v in options.items() if v is not None})
    typer.echo(f"wrote {output}", err=True)


def _sweep_on_dask(grid, output, scheduler, workers, chunk_rows, drop_invalid, catalog, arguments) -> None:
    from fleetplan.sweeps.distributed import sweep_dataset

    if output is None or drop_invalid:
        message = "a Dask sweep writes every row to a dataset folder: give -o FOLDER (and no --drop-invalid)"
        raise InvalidValueError(message)
    params = {k: v for k, v in arguments.items() if isinstance(v, (str, int, float)) and k not in ("grid",)}
    metadata = {"catalog_versions": _catalogs(catalog).versions(), **params}
    rows = sweep_dataset(grid, output, metadata=metadata, chunk_rows=chunk_rows, scheduler=scheduler, workers=workers)
    typer.echo(f"wrote {rows:,} rows to {output}", err=True)


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
    from fleetplan.sweeps.estimate import estimate_cases

    factors = _factors(mbu, mfu, step_overhead_ms, price, reserve_fraction, max_num_seqs, engine)
    if prefill_gpu is not None:
        slos = {"tpot_slo_ms": tpot_slo_ms, "ttft_slo_ms": ttft_slo_ms}
        _print_disaggregated(gpu, model, quant, kv_quant, tp, input_len, output_len, slos, prefill_gpu,
                             prefill_tp, catalog, factors, as_json)
        return
    if cases is not None:
        frame = _read_cases(cases)
    else:
        frame = _single_case(gpu, model, quant, kv_quant, tp, input_len, output_len, batch,
                             tpot_slo_ms, ttft_slo_ms, offline, rate, max_rate)
        frame["prefill_chunk_tokens"] = prefill_chunk_tokens
    levers = _levers(pp=pp, prefix_hit_rate=prefix_hit_rate, spec_tokens=spec_tokens, spec_acceptance=spec_acceptance,
                     spec_draft_cost=spec_draft_cost, dequant_overhead=dequant_overhead)
    for name, value in levers.items():
        if isinstance(value, list):
            message = f"--{name.replace('_', '-')} takes one value in estimate (sweep takes lists)"
            raise InvalidValueError(message)
        frame[name] = value
    result = estimate_cases(frame, _catalogs(catalog), **factors)
    if output is not None:
        from fleetplan.sweeps.stream import write_stream

        write_stream(iter([result]), len(result), output, params={"cases": str(cases or ""), **factors},
                     catalogs=_catalogs(catalog))
        typer.echo(f"wrote {output}", err=True)
    elif as_json:
        typer.echo(result.to_json(orient="records", indent=2))
    else:
        _print_estimate(result)


def _print_disaggregated(gpu, model, quant, kv_quant, tp, input_len, output_len, slos, prefill_gpu, prefill_tp,
                         catalog, factors, as_json) -> None:
    from fleetplan.sweeps.disaggregation import disaggregated

    if gpu is None or model is None:
        message = "a disaggregated estimate needs --gpu (the decode pool) and --model"
        raise InvalidValueError(message)
    case = pd.DataFrame([{"model": model, "quant": quant, "kv_quant": kv_quant, "input_len": input_len,
                          "output_len": output_len, "prefill_gpu": prefill_gpu, "prefill_tp": prefill_tp,
                          "decode_gpu": gpu, "decode_tp": tp, **slos}])
    result = disaggregated(case, _catalogs(catalog), **factors)
    if as_json:
        typer.echo(result.to_json(orient="records", indent=2))
        return
    for name, value in result.iloc[0].items():
        typer.echo(f"{name:38} {value:,.4g}" if isinstance(value, float) else f"{name:38} {value}")


def _single_case(gpu, model, quant, kv_quant, tp, input_len, output_len, batch, tpot_slo_ms, ttft_slo_ms, offline,
                 rate=None, max_rate=False):
    if gpu is None or model is None:
        message = "estimate needs --gpu and --model (or --cases FILE)"
        raise InvalidValueError(message)
    has_slo = tpot_slo_ms is not None or ttft_slo_ms is not None
    chosen = [name for name, on in (("--batch", batch is not None), ("--offline", offline), ("--rate", rate is not None),
                                    ("an SLO", has_slo and not max_rate)) if on]
    if len(chosen) > 1:
        message = f"give one of --batch, --tpot-slo-ms/--ttft-slo-ms, --rate or --offline, not {' and '.join(chosen)}"
        raise InvalidValueError(message)
    if max_rate and not has_slo:
        message = "--max-rate needs --tpot-slo-ms or --ttft-slo-ms"
        raise InvalidValueError(message)
    mode = ("max_rate" if max_rate else "batch" if batch is not None else "rate" if rate is not None
            else "offline" if offline or not chosen else "slo")
    return pd.DataFrame([{"gpu": gpu, "model": model, "quant": quant, "kv_quant": kv_quant, "tp": tp,
                          "input_len": input_len, "output_len": output_len, "batch": batch,
                          "tpot_slo_ms": tpot_slo_ms, "ttft_slo_ms": ttft_slo_ms, "rate_req_s": rate,
                          "mode": mode}])


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
    from rich.console import Console
    from rich.table import Table

    from fleetplan.sweeps.columns import LEVER_COLUMNS, SWEEP_COLUMNS
    from fleetplan.sweeps.estimate_load import LOAD_COLUMNS

    row = result.iloc[0]
    table = Table(title=f"{row['model']} on {int(row['tp'])} x {row['gpu']} ({row['quant']}, KV {row['kv_quant']}, {row['mode']})")
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
    from fleetplan.sweeps import calibration_commands

    app.command("sweep")(sweep_command)
    app.command("estimate")(estimate_command)
    calibration_commands.register(app)

