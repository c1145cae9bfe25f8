"""Named assumption sets of the performance model, and how per-call overrides apply.

Efficiency factors (MBU, MFU, step overhead) come from the ``efficiency`` catalog (fitted to
published measurements by ``scripts/fit_efficiency.py``), looked up by (GPU, compute precision)
with ``*`` rows as fallbacks. The other assumptions are module constants documented here, never
numbers buried in a formula. Every one can be overridden per call (``sweep(..., mbu=0.7)``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np
import pandas as pd

from fleetplan.errors import InvalidValueError, check_range, did_you_mean

WILDCARD = "*"


# Lever -> (low, high, integer): the allowed range of each serving lever.
LEVER_RANGES = {"pp": (1, 64, True), "prefix_hit_rate": (0.0, 0.99, False), "spec_tokens": (0, 16, True),
                "spec_acceptance": (0.0, 0.99, False), "spec_draft_cost": (0.0, 1.0, False),
                "dequant_overhead": (0.0, 5.0, False), "prefill_chunk_tokens": (0, 1_000_000, True)}
LEVERS = tuple(LEVER_RANGES)


@dataclass(frozen=True)
class Assumptions:
    """Per-call model assumptions; ``None`` means "take it from the efficiency catalog".

    Attributes
    ----------
    engine : serving engine whose efficiency rows to use (e.g. ``vllm``); ``None`` = the ``*`` rows
    mbu : memory-bandwidth utilization of a decode step [fraction]
    mfu : model FLOPs utilization of decode matmuls [fraction]
    mfu_prefill : model FLOPs utilization of prefill matmuls [fraction]; ``None`` = the catalog's,
        which defaults to ``mfu``
    step_overhead_ms : fixed time added to every forward step [ms]
    tp_scaling : share of MBU and MFU kept per doubling of the tensor-parallel degree [fraction]
    request_overhead_ms : time a request spends outside the forward steps before its prefill
        (HTTP, tokenization, hand-off to the engine), added to TTFT [ms]
    reserve_fraction : share of GPU memory kept for activations and fragmentation [fraction];
        0.10 matches vLLM's default ``gpu_memory_utilization=0.9``
    allreduce_latency_us : fixed latency of one tensor-parallel all-reduce [us]; NCCL's small
        message all-reduce over NVLink takes roughly 5-10 us
    activation_bytes : bytes per activation element exchanged by all-reduce [bytes]
    max_num_seqs : the serving engine's cap on concurrent sequences [sequences]; TensorRT-LLM's
        default max_batch_size is 2048, vLLM's max_num_seqs 256 to 1024
    usd_per_gpu_hour : price of one GPU-hour [USD]; ``None`` = the median on-demand price of that
        GPU in the prices catalog
    network_gb_s : inter-node bandwidth per GPU for pipeline hops [GB/s]; 50 = one 400 Gb/s NIC
    pp_hop_latency_us : fixed latency of one activation hop between pipeline stages [us]

    Levers (each off by default; each can be a sweep axis):

    pp : pipeline-parallel stages across nodes [stages]; 1 = off
    prefix_hit_rate : share of each prompt already in the prefix cache [fraction]; 0 = off
    spec_tokens : tokens drafted per speculative step [tokens]; 0 = off
    spec_acceptance : probability each drafted token is accepted [fraction]
    spec_draft_cost : draft cost per drafted token as a share of the verification step [fraction];
        about 0.05 for a 1B draft of a 70B model, less for multi-token-prediction heads
    dequant_overhead : extra matmul time of weight-only quantized models [fraction]; 0 = off
    prefill_chunk_tokens : chunked prefill, tokens per chunk [tokens]; 0 = off (a prompt runs whole
        in one step)
    """

    engine: str | None = None
    mbu: float | None = None
    mfu: float | None = None
    mfu_prefill: float | None = None
    step_overhead_ms: float | None = None
    tp_scaling: float | None = None
    request_overhead_ms: float | None = None
    reserve_fraction: float = 0.10
    allreduce_latency_us: float = 8.0
    activation_bytes: float = 2.0
    max_num_seqs: int = 2048
    usd_per_gpu_hour: float | None = None
    network_gb_s: float = 50.0
    pp_hop_latency_us: float = 20.0
    pp: int = 1
    prefix_hit_rate: float = 0.0
    spec_tokens: int = 0
    spec_acceptance: float = 0.0
    spec_draft_cost: float = 0.0
    dequant_overhead: float = 0.0
    prefill_chunk_tokens: int = 0

    def validated(self) -> Assumptions:
        """Check every value is in its allowed range; return self."""
        ranges = {"mbu": (0.0, 1.0), "mfu": (0.0, 1.0), "mfu_prefill": (0.0, 1.0), "step_overhead_ms": (0.0, 1000.0), "tp_scaling": (0.5, 1.0), "request_overhead_ms": (0.0, 1000.0),
                  "reserve_fraction": (0.0, 0.95), "allreduce_latency_us": (0.0, 1e4),
                  "activation_bytes": (0.5, 8.0), "max_num_seqs": (1, 1e7),
                  "usd_per_gpu_hour": (0.0, 1e4), "network_gb_s": (0.1, 1e5), "pp_hop_latency_us": (0.0, 1e5),
                  **{name: (low, high) for name, (low, high, _) in LEVER_RANGES.items()}}
        for name, (low, high) in ranges.items():
            value = getattr(self, name)
            if value is None:
                continue
            exclusive_low = name in ("mbu", "mfu", "mfu_prefill", "usd_per_gpu_hour", "network_gb_s")
            check_range(name, value, low, high, low_inclusive=not exclusive_low,
                        integer=name in ("max_num_seqs", "pp", "spec_tokens", "prefill_chunk_tokens"))
        return self


ASSUMPTION_NAMES = tuple(f.name for f in fields(Assumptions))


def assumptions_from(overrides: dict) -> Assumptions:
    """Build validated ``Assumptions`` from keyword overrides, rejecting unknown names."""
    unknown = sorted(set(overrides) - set(ASSUMPTION_NAMES))
    if unknown:
        raise did_you_mean(unknown[0], ASSUMPTION_NAMES, kind="model assumption")
    given = {k: v for k, v in overrides.items() if v is not None}
    return replace(Assumptions(), **given).validated()


def efficiency_for(efficiency: pd.DataFrame, gpu: pd.Series, precision: pd.Series, engine=None) -> pd.DataFrame:
    """MBU, MFU, step overhead and TP scaling for each (gpu, precision) pair, most specific row first.

    ``engine`` (one name or one per pair; None = any) picks an engine's own rows where the catalog
    has them. Lookup order: exact (gpu, precision), then (gpu, *), (*, precision), (*, *) among the
    engine's rows, then the same among engine ``*`` rows.
    """
    wanted = pd.DataFrame({"gpu": np.asarray(gpu, dtype=object), "precision": np.asarray(precision, dtype=object)})
    wanted["engine"] = np.broadcast_to(np.asarray(WILDCARD if engine is None else engine, dtype=object), len(wanted))
    wanted["engine"] = wanted["engine"].fillna(WILDCARD)
    factors = ["mbu", "mfu", "mfu_prefill", "step_overhead_ms", "tp_scaling", "request_overhead_ms"]
    result = pd.DataFrame(index=wanted.index, columns=factors, dtype=float)
    table = efficiency.set_index(["engine", "gpu", "precision"]).reindex(columns=factors)
    any_engine = np.full(len(wanted), WILDCARD, dtype=object)
    for engine_keys in (wanted["engine"].to_numpy(dtype=object), any_engine):
        for gpu_key, precision_key in (("gpu", "precision"), ("gpu", "*"), ("*", "precision"), ("*", "*")):
            keys = pd.MultiIndex.from_arrays([
                engine_keys,
                wanted[gpu_key] if gpu_key != "*" else any_engine,
                wanted[precision_key] if precision_key != "*" else any_engine,
            ])
            found = table.reindex(keys).set_axis(wanted.index)
            result = result.fillna(found)
    result["tp_scaling"] = result["tp_scaling"].fillna(1.0)
    result["mfu_prefill"] = result["mfu_prefill"].fillna(result["mfu"])
    result["request_overhead_ms"] = result["request_overhead_ms"].fillna(0.0)
    if result.isna().any().any():
        message = "efficiency catalog has no '*,*' default row and no row for some GPUs"
        raise InvalidValueError(message)
    return result


def check_engine(efficiency: pd.DataFrame, engine: str | None) -> None:
    """An engine must have rows in the efficiency catalog (``*`` or None = any engine)."""
    if engine is None or engine == WILDCARD:
        return
    known = sorted(set(efficiency["engine"].astype(str)) - {WILDCARD})
    if engine not in known:
        raise did_you_mean(engine, [*known, WILDCARD], kind="engine (efficiency catalog)")
