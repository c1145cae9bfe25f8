"""Prefill/decode disaggregation as a sweep axis: the row formulas of a disaggregated configuration.

A disaggregated row pairs the grid's replica (``gpu``, ``tp``: the decode replica, at batch ``B``
and context ``L``) with a prefill replica (``prefill_gpu``, ``prefill_tp``) that runs each
prompt of ``S`` tokens and ships its KV cache to the decode replica. The decode replica does no
prompt work, so per decode replica (``G`` output tokens per request)::

    TPOT             = decode step at (B, L)                                     [ms]
    TTFT             = prefill latency(S) + S * kv / (min(tp_p, tp_d) * BW) + TPOT [ms]
    req_s            = B / (G * TPOT)                                            [requests/s]
    prefill_replicas = req_s * prefill work(S)                                   [replicas]
    usd_per_hour     = price_d * gpus_d + prefill_replicas * price_p * gpus_p    [USD/hour]

the formulas of ``fleetplan.sweeps.disaggregation.disaggregated`` at a given decode batch.
Colocated rows (``prefill_tp`` 0, ``prefill_gpu`` "none") keep the colocated kernel's values.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from fleetplan.sweeps import latency, throughput
from fleetplan.sweeps.configurations import PREFILL_PREFIX
from fleetplan.sweeps.row_kernel import Rows, memory_limits
from fleetplan.sweeps.step_times import prefill_ms


class PrefillSide(Mapping):
    """The prefill replica's constants of gathered rows, read under their own names."""

    def __init__(self, constants):
        self._constants = constants

    def __getitem__(self, name):
        return self._constants[PREFILL_PREFIX + name]

    def __iter__(self):
        return (name[len(PREFILL_PREFIX):] for name in self._constants if name.startswith(PREFILL_PREFIX))

    def __len__(self):
        return sum(1 for _ in self)


def kv_transfer_ms(input_len, kv_bytes_per_token_model, network_gb_s, prefill_tp, decode_tp):
    """Time to move one prompt's KV cache to the decode replica [ms].

    ``S [tokens] * kv [bytes/token, whole model] / (min(tp_p, tp_d) links * BW [GB/s])``: each
    GPU of the narrower side sends or receives its shard over its own link.

    >>> round(float(kv_transfer_ms(4000, 163840, 50.0, 4, 2)), 4)
    6.5536
    """
    kv_bytes = np.asarray(input_len, dtype=float) * kv_bytes_per_token_model
    return latency.kv_transfer_time_ms(kv_bytes, network_gb_s, np.minimum(prefill_tp, decode_tp))


def disaggregated_ttft_ms(prefill_latency_ms, transfer_ms, tpot_ms):
    """Time to first token: prompt prefill [ms] + KV transfer [ms] + one decode step [ms].

    >>> float(disaggregated_ttft_ms(300.0, 6.5, 20.0))
    326.5
    """
    return np.asarray(prefill_latency_ms, dtype=float) + transfer_ms + tpot_ms


def decode_only_req_s(batch, tpot_ms, output_len):
    """Requests/s a decode replica completes without prompt work: ``B / (G * TPOT)`` [requests/s].

    >>> float(decode_only_req_s(64, 20.0, 500))
    6.4
    """
    return throughput.request_rate_req_s(batch, tpot_ms, output_len, 0.0)


def prefill_replicas_per_decode_replica(decode_req_s, prefill_work_ms):
    """Prefill replicas that keep one decode replica fed: ``req_s * t_prefill / 1e3`` [replicas].

    ``decode_req_s`` [requests/s], ``prefill_work_ms`` [ms of prefill replica time per prompt].

    >>> float(prefill_replicas_per_decode_replica(6.4, 125.0))
    0.8
    """
    return np.asarray(decode_req_s, dtype=float) * prefill_work_ms / 1e3


def replica_usd_per_hour(usd_per_gpu_hour, gpus):
    """Price of one replica: ``price [USD/GPU-hour] * GPUs`` [USD/hour].

    >>> float(replica_usd_per_hour(2.5, 4))
    10.0
    """
    return np.asarray(usd_per_gpu_hour, dtype=float) * gpus


def pair_usd_per_hour(decode_usd_per_hour, prefill_replicas, prefill_usd_per_hour):
    """Price of a decode replica with its share of prefill replicas [USD/hour].

    ``decode [USD/hour] + prefill_replicas [replicas] * prefill [USD/hour per replica]``.

    >>> float(pair_usd_per_hour(8.0, 0.8, 10.0))
    16.0
    """
    prefill_share = np.asarray(prefill_replicas, dtype=float) * prefill_usd_per_hour
    return np.asarray(decode_usd_per_hour, dtype=float) + prefill_share


def holds_one_prompt(prefill, input_len):
    """Whether the prefill replica's memory holds the KV cache of one ``input_len``-token prompt."""
    max_batch, _ = memory_limits(prefill, input_len)
    return max_batch >= 1


def evaluate(c, rows: Rows, colocated: dict) -> dict:
    """The metrics of ``rows`` with disaggregated configurations (``prefill_tp`` > 0) replaced by
    their pair's values; ``colocated`` is ``kernel.evaluate`` of the same rows. Adds the
    ``prefill_replicas`` and ``kv_transfer_ms`` columns (0 where colocated) and ``prefill_fits``.
    """
    prefill = PrefillSide(c)
    latency_ms, work_ms = prefill_ms(prefill, rows.input_len)
    transfer_ms = kv_transfer_ms(rows.input_len, prefill["kv_bytes_per_token_model"], prefill["network_gb_s"],
                                 prefill["tp"], c["tp"])
    tpot_ms = colocated["tpot_ms"]
    req_s = decode_only_req_s(rows.batch, tpot_ms, rows.output_len)
    replicas = prefill_replicas_per_decode_replica(req_s, work_ms)
    usd_per_hour = pair_usd_per_hour(colocated["usd_per_hour"], replicas,
                                     replica_usd_per_hour(prefill["usd_per_gpu_hour"], prefill["gpus"]))
    holds = holds_one_prompt(prefill, rows.input_len)
    output_tok_s = req_s * rows.output_len
    split = {
        "ttft_ms": disaggregated_ttft_ms(latency_ms, transfer_ms, tpot_ms), "req_s": req_s,
        "output_tok_s": output_tok_s, "usd_per_hour": usd_per_hour, "fits": colocated["fits"] & holds,
        "prefill_tok_s": throughput.prefill_tok_s(rows.input_len, work_ms),
        "usd_per_m_output_tokens": throughput.usd_per_m_tokens(usd_per_hour, output_tok_s),
        "usd_per_m_total_tokens": throughput.usd_per_m_tokens(usd_per_hour, req_s * (rows.input_len + rows.output_len)),
        "usd_per_k_requests": throughput.usd_per_k_requests(usd_per_hour, req_s),
        "prefill_replicas": replicas, "kv_transfer_ms": transfer_ms, "prefill_fits": holds,
    }
    is_split = c["prefill_tp"] > 0
    fallback = {"prefill_replicas": 0.0, "kv_transfer_ms": 0.0, "prefill_fits": True}
    return {**colocated, **{name: np.where(is_split, value, colocated.get(name, fallback.get(name)))
                            for name, value in split.items()}}
