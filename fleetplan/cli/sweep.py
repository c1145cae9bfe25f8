"""``fleetplan sweep``: the cartesian grid of configurations, printed, written or run on Dask."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from fleetplan.catalogs import DEFAULT_MAX_PRICE_AGE_DAYS, DEFAULT_PRICE_RULE
from fleetplan.cli.options import (
    AXIS_HELP,
    CatalogOption,
    DequantOption,
    EngineOption,
    MaxAgeOption,
    MaxSeqsOption,
    MbuOption,
    MfuOption,
    MixOption,
    OverheadOption,
    PpOption,
    PrefixOption,
    PriceOption,
    PriceRuleOption,
    ProviderOption,
    RegionOption,
    ReserveOption,
    SpecAcceptOption,
    SpecCostOption,
    SpecTokensOption,
    catalogs_from,
    echo_price_warnings,
    factors,
    ids,
    levers,
    price_rule,
)
from fleetplan.cli.progress import print_chunks, write_stream
from fleetplan.errors import InvalidValueError
from fleetplan.exports.price_provenance import prices_used, with_price_provenance
from fleetplan.exports.sweep_dataset import sweep_dataset
from fleetplan.sweeps.inputs import parse_axis
from fleetplan.sweeps.sweep_grid import iter_sweep, make_grid
from fleetplan.sweeps.sweep_table import table_columns

ChunkOption = Annotated[str | None, typer.Option(help="Chunked prefill: prompt tokens per step (0 = off); a list sweeps it")]
PrefillGpuOption = Annotated[str | None, typer.Option(
    help="Disaggregate: prefill replica GPU ids, 'none' = colocated; a list sweeps it (--gpu/--tp: the decode replica)")]
PrefillTpOption = Annotated[str | None, typer.Option(help="Disaggregate: prefill replica TP degrees (default 1). " + AXIS_HELP)]


def sweep_command(
    gpu: Annotated[str, typer.Option(help="GPU ids, comma-separated")],
    model: Annotated[str, typer.Option(help="Model ids, comma-separated")],
    quant: Annotated[str, typer.Option(help="Quantization ids, comma-separated")] = "bf16",
    kv_quant: Annotated[str | None, typer.Option(help="KV-cache quantization ids; default: each quant's own")] = None,
    tp: Annotated[str, typer.Option(help=AXIS_HELP)] = "1",
    context: Annotated[str, typer.Option(help="Context lengths [tokens]. " + AXIS_HELP)] = "2048",
    input_len: Annotated[str | None, typer.Option(help="Prompt lengths [tokens]; default: = context")] = None,
    output_len: Annotated[str, typer.Option(help="Output lengths [tokens]. " + AXIS_HELP)] = "256",
    batch: Annotated[str, typer.Option(help="Batch sizes [sequences]. " + AXIS_HELP)] = "1-512",
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write .csv, .parquet or .xlsx; default: print")] = None,
    drop_invalid: Annotated[bool, typer.Option(help="Drop rows that cannot run or do not fit")] = False,
    columns: Annotated[str | None, typer.Option(
        help="Only these columns, comma-separated (print, CSV, Parquet); default: all")] = None,
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
    price_choice: PriceRuleOption = DEFAULT_PRICE_RULE, provider: ProviderOption = None, region: RegionOption = None,
    max_price_age_days: MaxAgeOption = DEFAULT_MAX_PRICE_AGE_DAYS, mix_providers: MixOption = False,
) -> None:
    """Evaluate every combination of the axes: memory, TPOT, TTFT, throughput and cost.

    Each row's price comes from the price rule; CSV and Parquet rows name it (price_provider,
    price_as_of, price_source), a workbook lists it on Assumptions.
    """
    if chunk_rows < 1:
        message = f"chunk-rows must be >= 1, got {chunk_rows}"
        raise InvalidValueError(message)
    catalogs = catalogs_from(catalog, price_rule(price_choice, provider, region, max_price_age_days,
                                                 mix_providers))
    overrides = {**factors(mbu, mfu, step_overhead_ms, price, reserve_fraction, max_num_seqs, engine),
                 **levers(pp=pp, prefix_hit_rate=prefix_hit_rate, spec_tokens=spec_tokens,
                          spec_acceptance=spec_acceptance, spec_draft_cost=spec_draft_cost,
                          dequant_overhead=dequant_overhead, prefill_chunk_tokens=prefill_chunk_tokens)}
    grid = make_grid(ids(gpu), ids(model), ids(quant), kv_quants=ids(kv_quant) if kv_quant else None,
                     tps=parse_axis(tp), contexts=parse_axis(context),
                     input_lens=parse_axis(input_len) if input_len else None,
                     output_lens=parse_axis(output_len), batches=parse_axis(batch), catalogs=catalogs,
                     prefill_gpus=ids(prefill_gpu) if prefill_gpu is not None else None,
                     prefill_tps=parse_axis(prefill_tp) if prefill_tp is not None else None, **overrides)
    gpus = list(dict.fromkeys([*catalogs.require("gpu", ids(gpu)), *_prefill_gpus(catalogs, prefill_gpu)]))
    chosen = catalogs.chosen_prices(gpus, ["on_demand"])
    if "usd_per_gpu_hour" not in overrides:
        echo_price_warnings(chosen, gpus)
    on_dask = bool(scheduler or workers is not None or os.environ.get("FLEETPLAN_SCHEDULER"))
    chosen_columns = ids(columns) if columns is not None else None
    if chosen_columns is not None:
        _check_columns(grid, chosen_columns, output, on_dask)
    if on_dask:
        _sweep_on_dask(grid, output, scheduler, workers, chunk_rows, drop_invalid, catalogs,
                       {**locals(), "price_rule": catalogs.price_rule.describe()})
        return
    chunks = iter_sweep(None, None, None, grid=grid, chunk_rows=chunk_rows, drop_invalid=drop_invalid,
                        columns=chosen_columns)
    if output is None or output.suffix.lower() != ".xlsx":  # a workbook lists prices on Assumptions
        chunks = (with_price_provenance(chunk, chosen) for chunk in chunks)
    if output is None:
        print_chunks(chunks, grid.n_rows)
        return
    params = {"gpus": gpu, "models": model, "quants": quant, "kv_quants": kv_quant, "tps": tp, "contexts": context,
              "input_lens": input_len, "output_lens": output_len, "batches": batch, "drop_invalid": drop_invalid,
              **({"columns": columns} if columns is not None else {}),
              **({"prefill_gpus": prefill_gpu, "prefill_tps": prefill_tp or "1"} if prefill_gpu is not None else {}),
              **overrides, "engine": grid.engine,  # assumptions and levers given on the command line, and the engine
              "prices_used": prices_used(chosen)}
    options = {"partition_by": ids(partition_by) if partition_by else None, "top_n": top_n,
               "tpot_slo_ms": tpot_slo_ms}
    write_stream(chunks, grid.n_rows, output, params=params, catalogs=catalogs,
                 **{k: v for k, v in options.items() if v is not None})
    typer.echo(f"wrote {output}", err=True)


def _check_columns(grid, chosen: list[str], output: Path | None, on_dask: bool) -> None:
    """``--columns`` names known columns, and the output can hold a part of the table."""
    table_columns(grid.extra_columns, chosen)
    if output is not None and output.suffix.lower() == ".xlsx":
        message = "--columns: the sweep workbook needs every column for its live formulas; write .csv or .parquet"
        raise InvalidValueError(message)
    if on_dask:
        message = "--columns: a Dask sweep writes every column to its dataset; run without --columns"
        raise InvalidValueError(message)


def _prefill_gpus(catalogs, text: str | None) -> list[str]:
    named = [g for g in ids(text or "") if g.lower() != "none"]
    return catalogs.require("gpu", named) if named else []


def _sweep_on_dask(grid, output, scheduler, workers, chunk_rows, drop_invalid, catalogs, arguments) -> None:
    if output is None or drop_invalid:
        message = "a Dask sweep writes every row to a dataset folder: give -o FOLDER (and no --drop-invalid)"
        raise InvalidValueError(message)
    params = {k: v for k, v in arguments.items() if isinstance(v, (str, int, float)) and k not in ("grid",)}
    params["engine"] = grid.engine
    params["prices_used"] = prices_used(arguments["chosen"])
    metadata = {"catalog_versions": catalogs.versions(), **params}
    rows = sweep_dataset(grid, output, metadata=metadata, chunk_rows=chunk_rows, scheduler=scheduler, workers=workers)
    typer.echo(f"wrote {rows:,} rows to {output}", err=True)


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_command)
