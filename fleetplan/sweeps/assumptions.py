"""Named assumption sets of the performance model, and how per-call overrides apply.

Per-operator efficiencies (GEMMs, expert GEMMs, attention, all-reduce, engine iteration) come
from the ``efficiency`` catalog (fitted to published measurements by
``scripts/fit_efficiency.py``, with documented priors where nothing is measured), and memory
rules and batch caps from the serving engine's profile in the ``engines`` catalog. The other
assumptions are module constants documented here, never numbers buried in a formula. Every one
can be overridden per call (``sweep(..., mbu=0.7)``) or per case (a column of ``estimate_cases``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import pandas as pd

from fleetplan.errors import check_range, did_you_mean

WILDCARD = "*"

# Lever -> (low, high, integer): the allowed range of each serving lever.
LEVER_RANGES = {"pp": (1, 64, True), "prefix_hit_rate": (0.0, 0.99, False), "spec_tokens": (0, 16, True),
                "spec_acceptance": (0.0, 0.99, False), "spec_draft_cost": (0.0, 1.0, False),
                "dequant_overhead": (0.0, 5.0, False), "prefill_chunk_tokens": (0, 1_000_000, True)}
LEVERS = tuple(LEVER_RANGES)

# Assumption -> (low, high, low inclusive, integer): the allowed range of each override.
ASSUMPTION_RANGES = {
    "mbu": (0.0, 1.0, False, False), "mfu": (0.0, 1.0, False, False), "mfu_prefill": (0.0, 1.0, False, False),
    "step_overhead_ms": (0.0, 1000.0, True, False), "step_overhead_us_per_seq": (0.0, 1000.0, True, False),
    "layer_overhead_us": (0.0, 10000.0, True, False),
    "tp_scaling": (0.3, 1.0, True, False), "request_overhead_ms": (0.0, 1000.0, True, False),
    "reserve_fraction": (0.0, 0.95, True, False), "memory_fraction": (0.1, 1.0, True, False),
    "allreduce_latency_us": (0.0, 1e4, True, False), "activation_bytes": (0.5, 8.0, True, False),
    "max_num_seqs": (1, 1e7, True, True), "max_batched_tokens": (1, 1e8, True, True),
    "usd_per_gpu_hour": (0.0, 1e4, False, False), "network_gb_s": (0.0, 1e5, False, False),
    "pp_hop_latency_us": (0.0, 1e5, True, False),
}


@dataclass(frozen=True)
class Assumptions:
    """Per-call model assumptions; ``None`` means "take it from the catalogs".

    Attributes
    ----------
    engine : serving engine whose profile and efficiency rows apply (``engines`` catalog id);
        ``None`` = ``efficiencies.DEFAULT_ENGINE``
    mbu : memory-bandwidth utilization of every weight and KV-cache read [fraction]
    mfu : FLOPs utilization of every decode-step operator [fraction]; also prefill's unless
        ``mfu_prefill`` is given (the seed's single MFU)
    mfu_prefill : FLOPs utilization of prompt tokens [fraction]
    step_overhead_ms : fixed host time of one engine iteration [ms]; given alone, it replaces all of
        the engine's overheads (the per-sequence and per-layer ones become 0)
    step_overhead_us_per_seq : host time per running sequence of one iteration [us]
    layer_overhead_us : GPU time per layer and step outside the operators' rooflines (kernel
        launches and gaps) [us]
    tp_scaling : share of the GEMM efficiencies kept per doubling of the TP degree [fraction]
    request_overhead_ms : time a request spends outside the forward steps before its prefill
        (HTTP, tokenization, hand-off to the engine), added to TTFT [ms]
    reserve_fraction : share of GPU memory kept outside weights and KV cache [fraction]; replaces
        the engine's memory rule (KV = (1 - reserve) * memory - weights); ``None`` = engine rule
    memory_fraction : the engine's kv_cache_free_gpu_mem_fraction / gpu_memory_utilization /
        mem_fraction_static [fraction]; ``None`` = the engine profile's
    allreduce_latency_us : fixed latency of one tensor-parallel all-reduce of two GPUs, growing
        with ``log2(tp)`` [us]; ``None`` = the efficiency catalog's (allreduce rows; NCCL's small
        message all-reduce over NVLink takes roughly 5-10 us, over PCIe several times more)
    activation_bytes : bytes per activation element exchanged by all-reduce [bytes]
    max_num_seqs : the engine's cap on running sequences [sequences]; ``None`` = the profile's
    max_batched_tokens : the engine's token budget per iteration [tokens]; ``None`` = the profile's
    usd_per_gpu_hour : price of one GPU-hour [USD]; ``None`` = the median on-demand price of that
        GPU in the prices catalog
    network_gb_s : inter-node bandwidth per GPU for pipeline hops and KV transfer [GB/s]; 50 = one
        400 Gb/s NIC
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
    step_overhead_us_per_seq: float | None = None
    layer_overhead_us: float | None = None
    tp_scaling: float | None = None
    request_overhead_ms: float | None = None
    reserve_fraction: float | None = None
    memory_fraction: float | None = None
    allreduce_latency_us: float | None = None
    activation_bytes: float = 2.0
    max_num_seqs: int | None = None
    max_batched_tokens: int | None = None
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
        ranges = {**ASSUMPTION_RANGES, **{name: (low, high, True, integer)
                                          for name, (low, high, integer) in LEVER_RANGES.items()}}
        for name, (low, high, inclusive, integer) in ranges.items():
            value = getattr(self, name)
            if value is not None:
                check_range(name, value, low, high, low_inclusive=inclusive, integer=integer)
        return self


ASSUMPTION_NAMES = tuple(f.name for f in fields(Assumptions))
#: Assumptions that may also be given per case (columns of ``estimate_cases``), NaN = the call's.
PER_CASE_ASSUMPTIONS = ("mbu", "mfu", "mfu_prefill", "step_overhead_ms", "step_overhead_us_per_seq", "layer_overhead_us",
                        "allreduce_latency_us",
                        "tp_scaling",
                        "request_overhead_ms", "reserve_fraction", "memory_fraction", "max_num_seqs",
                        "max_batched_tokens", "usd_per_gpu_hour")


def assumptions_from(overrides: dict) -> Assumptions:
    """Build validated ``Assumptions`` from keyword overrides, rejecting unknown names."""
    unknown = sorted(set(overrides) - set(ASSUMPTION_NAMES))
    if unknown:
        raise did_you_mean(unknown[0], ASSUMPTION_NAMES, kind="model assumption")
    given = {k: v for k, v in overrides.items() if v is not None}
    return replace(Assumptions(), **given).validated()


def check_engine(efficiency: pd.DataFrame, engine: str | None) -> None:
    """An engine must have rows in the efficiency catalog (``*`` or None = the default engine)."""
    if engine is None or engine == WILDCARD:
        return
    known = sorted(set(efficiency["engine"].astype(str)) - {WILDCARD})
    if engine not in known:
        raise did_you_mean(engine, [*known, WILDCARD], kind="engine (efficiency catalog)")
