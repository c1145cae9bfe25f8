"""``fleetplan estimate``: one configuration (or every row of a CSV of cases) at its operating point."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from fleetplan.catalogs import DEFAULT_MAX_PRICE_AGE_DAYS, DEFAULT_PRICE_RULE
from fleetplan.catalogs.input_files import read_csv_table
from fleetplan.cli.options import (
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
    levers,
    price_rule,
)
from fleetplan.cli.progress import write_stream
from fleetplan.cli.tables import print_table
from fleetplan.errors import InvalidValueError, relocated
from fleetplan.exports.price_provenance import with_price_provenance
from fleetplan.exports.units import unit_of
from fleetplan.sweeps.columns import LEVER_COLUMNS, LOAD_COLUMNS, SWEEP_COLUMNS
from fleetplan.sweeps.disaggregation import disaggregated
from fleetplan.sweeps.estimate import estimate_cases

#: Latency percentiles under the names vLLM's serving benchmark gives them.
VLLM_NAMES = {"tpot_p90_ms": "p90_tpot_ms", "tpot_p99_ms": "p99_tpot_ms", "ttft_p90_ms": "p90_ttft_ms",
              "ttft_p99_ms": "p99_ttft_ms"}
MODE_TEXT = {"batch": "at the given batch", "slo": "the knee, the largest batch meeting the SLOs",
             "offline": "the memory-limited maximum throughput", "rate": "under load at the given rate",
             "max_rate": "the largest request rate whose loaded TPOT and TTFT meet the SLOs",
             "concurrency": "a closed loop holding the given number of requests in flight"}


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
    allow_invalid: Annotated[bool, typer.Option(
        help="Print the figures of a configuration that cannot run instead of exiting with code 2")] = False,
    price_choice: PriceRuleOption = DEFAULT_PRICE_RULE, provider: ProviderOption = None, region: RegionOption = None,
    max_price_age_days: MaxAgeOption = DEFAULT_MAX_PRICE_AGE_DAYS, mix_providers: MixOption = False,
) -> None:
    """Memory, latency, throughput and cost of one configuration (or of every row of --cases).

    Give the mode: --batch B, an SLO (--tpot-slo-ms/--ttft-slo-ms: the knee), --rate R, --max-rate
    with SLOs, --concurrency N, or --offline (the default when none is given, said on stderr).
    """
    given = factors(mbu, mfu, step_overhead_ms, price, reserve_fraction, max_num_seqs, engine)
    catalogs = catalogs_from(catalog, price_rule(price_choice, provider, region, max_price_age_days,
                                                 mix_providers))
    if prefill_gpu is not None:
        slos = {"tpot_slo_ms": tpot_slo_ms, "ttft_slo_ms": ttft_slo_ms}
        _print_disaggregated(gpu, model, quant, kv_quant, tp, input_len, output_len, slos, prefill_gpu,
                             prefill_tp, catalogs, given, as_json, allow_invalid)
        return
    if cases is not None:
        frame = _with_ids(_read_cases(cases))
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
    # a case's row as a spreadsheet shows the file (header = row 1), as catalog files' errors do
    file_row = None if cases is None else (lambda row: f"{cases} row {row + 1}")
    with relocated(r"cases row (\d+)", file_row):
        result = estimate_cases(frame, catalogs, capacity_quantile=capacity_quantile.strip().lower(),
                                **given)
    gpus = result["gpu"].astype(str).unique()
    chosen = catalogs.chosen_prices(gpus, ["on_demand"])
    if "usd_per_gpu_hour" not in given:
        echo_price_warnings(chosen, gpus)
    result = with_price_provenance(result, chosen).rename(columns=VLLM_NAMES)
    if cases is None:
        _check_runs(result.iloc[0], allow_invalid)
        if not (offline or max_rate or batch is not None or rate is not None or concurrency is not None
                or tpot_slo_ms or ttft_slo_ms):
            typer.echo("note: no mode given, so offline (the memory-limited maximum throughput); give "
                       "--batch, --tpot-slo-ms, --rate, --concurrency or --offline", err=True)
    else:
        _count_invalid(result)
    if output is not None:
        recorded = {"engine": ",".join(sorted(result["engine"].astype(str).unique())),
                    "capacity_quantile": capacity_quantile}
        write_stream(iter([result]), len(result), output, params={"cases": str(cases or ""), **given, **recorded},
                     catalogs=catalogs)
        typer.echo(f"wrote {output}", err=True)
    elif as_json:
        typer.echo(result.to_json(orient="records", indent=2, double_precision=15))
    else:
        _print_estimate(result)


def _with_ids(frame: pd.DataFrame) -> pd.DataFrame:
    """Cases numbered from 1 in an ``id`` column unless they bring their own."""
    if "id" not in frame.columns:
        frame.insert(0, "id", range(1, len(frame) + 1))
    return frame


def _runs(row: pd.Series) -> bool:
    return bool(row.get("valid", True)) and bool(row.get("fits", True))


def _check_runs(row: pd.Series, allow_invalid: bool) -> None:
    """An estimate of a configuration that cannot run is an input error unless allowed."""
    if _runs(row):
        return
    reason = str(row.get("reason") or "it does not fit")
    if allow_invalid:
        typer.echo(f"warning: this configuration cannot run: {reason}", err=True)
        return
    message = f"this configuration cannot run: {reason} (--allow-invalid prints its figures anyway)"
    raise InvalidValueError(message)


def _count_invalid(result: pd.DataFrame) -> None:
    bad = int((~(result["valid"].astype(bool) & result["fits"].astype(bool))).sum())
    if bad:
        typer.echo(f"warning: {bad} of {len(result)} cases cannot run (see their reason column)", err=True)


def _print_disaggregated(gpu, model, quant, kv_quant, tp, input_len, output_len, slos, prefill_gpu, prefill_tp,
                         catalogs, given, as_json, allow_invalid) -> None:
    if gpu is None or model is None:
        message = "a disaggregated estimate needs --gpu (the decode pool) and --model"
        raise InvalidValueError(message)
    case = pd.DataFrame([{"model": model, "quant": quant, "kv_quant": kv_quant, "input_len": input_len,
                          "output_len": output_len, "prefill_gpu": prefill_gpu, "prefill_tp": prefill_tp,
                          "decode_gpu": gpu, "decode_tp": tp, **slos}])
    result = disaggregated(case, catalogs, **given)
    _check_runs(result.iloc[0], allow_invalid)
    gpus = catalogs.require("gpu", [gpu, prefill_gpu])
    chosen = catalogs.chosen_prices(gpus, ["on_demand"])
    if "usd_per_gpu_hour" not in given:
        echo_price_warnings(chosen, gpus)
    if as_json:
        typer.echo(result.to_json(orient="records", indent=2, double_precision=15))
        return
    row = result.iloc[0]
    title = (f"{row['model']}: prefill on {row['prefill_tp']} x {row['prefill_gpu']}, decode on "
             f"{row['decode_tp']} x {row['decode_gpu']} ({row['quant']})")
    rows = [(name, value, unit_of(name)) for name, value in row.items()
            if name not in ("model", "quant", "prefill_gpu", "decode_gpu") and pd.notna(value) and value != ""]
    prices = [f"{g} ${p:,.2f} per GPU-hour from {v} {r}, as of {a}" for g, p, v, r, a in
              chosen[["gpu", "usd_per_gpu_hour", "provider", "region", "as_of"]].itertuples(index=False)]
    caption = ("Prices as given." if "usd_per_gpu_hour" in given
               else "Prices on demand: " + "; ".join(prices) + ".")
    print_table(title, ["metric", "value", "unit"], rows, numeric=[False, True, False], caption=caption)


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
    """The cases table, read as every user file is (text, size, separator checked)."""
    if not path.exists():
        message = f"cases file {path} does not exist"
        raise InvalidValueError(message)
    return read_csv_table(path, "cases file",
                          dtype={"gpu": str, "model": str, "quant": str, "kv_quant": str, "mode": str})


def _print_estimate(result: pd.DataFrame) -> None:
    row = result.iloc[0]
    mode = str(row["mode"])
    title = (f"{row['model']} on {int(row['tp'])} x {row['gpu']} ({row['quant']}, KV {row['kv_quant']}); "
             f"mode {mode}: {MODE_TEXT.get(mode, mode)}")
    names = [VLLM_NAMES.get(n, n) for n in (*SWEEP_COLUMNS, *LEVER_COLUMNS, *LOAD_COLUMNS)]
    skipped = ("gpu", "model", "quant", "kv_quant", "tp", "mode")
    rows = [(name, row[name], _unit(name)) for name in names
            if name in result and name not in skipped and result[name].notna().all() and row[name] != ""]
    print_table(title, ["metric", "value", "unit"], rows, numeric=[False, True, False],
                caption=f"Engine {row['engine']}; calibration {row['calibration']}. {_price_caption(row)}")


def _unit(name: str) -> str:
    column = {**SWEEP_COLUMNS, **LEVER_COLUMNS}.get(name)
    return column.unit if column else unit_of(name)


def _price_caption(row: pd.Series) -> str:
    stages = row.get("pp", 1.0)
    price = row["usd_per_hour"] / (row["tp"] * (stages if pd.notna(stages) else 1.0))
    provider = row.get("price_provider", "")
    if pd.isna(price):
        return f"Price: none listed for {row['gpu']} (give --price or a --catalog prices row)."
    if pd.isna(provider) or provider in ("", "given"):
        return f"Price: ${price:,.2f} per GPU-hour as given."
    return (f"Price: ${price:,.2f} per GPU-hour on demand from {provider}, as of {row['price_as_of']} "
            f"({row['price_source']}).")


def register(app: typer.Typer) -> None:
    app.command("estimate")(estimate_command)
