"""The model's value for each predictable measurement row, in one vectorized pass per regime.

``MeasurementModel`` builds the rows' configurations once (each row with its engine release and
the settings its source states); ``predict`` then evaluates every row, optionally with efficiency
constants replaced per row, which is what a fit does thousands of times.

Regimes (``measurements.REGIMES``):

- ``offline``: all requests queued; the engine runs as many sequences as its memory and batch cap
  allow, prompts sharing the GPUs with decode steps: ``G / (t_prefill + G TPOT / B)`` requests/s;
- ``static``: a batch of B prompts prefilled together, then decoded together for G - 1 steps:
  ``B G / (t_prefill(B S) + (G - 1) TPOT(B))``;
- ``e2e``: that batch's end-to-end latency; ``ttft``: its prefill;
- ``server``: the steady-state load model at the offered rate (``queueing``), or, at or above
  capacity, the capacity with a finite run's admission wait in TTFT.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.sweeps import operating_points, queueing, step_times, throughput
from fleetplan.sweeps.estimate import case_arrays
from fleetplan.sweeps.inputs import catalog_or_default
from fleetplan.sweeps.measurements import SETTINGS
from fleetplan.sweeps.replica_constants import ReplicaConstants

# The online-serving table ran TensorRT-LLM's Triton backend, whose example configurations cap
# the batch at 256 sequences; the source states no cap, so this one is an assumption.
SERVING_ASSUMPTIONS = {"max_num_seqs": 256}


class MeasurementModel:
    """Predictions for ``rows`` (predictable rows of ``load_measurements``) under the catalogs."""

    def __init__(self, rows: pd.DataFrame, catalogs: Catalogs | None = None):
        self.rows = rows.reset_index(drop=True)
        self.catalogs = catalog_or_default(catalogs)
        cases = self.rows[["gpu", "model", "quant", "kv_quant", "tp", "input_len", "output_len"]].copy()
        # each row's own engine release where the catalog has fitted rows for it, else its engine
        release = self.rows.get("engine_release", self.rows["engine_id"])
        fitted = release.isin(set(self.catalogs.efficiency["engine"].astype(str)))
        cases["engine"] = release.where(fitted, self.rows["engine_id"]).to_numpy(dtype=object)
        for name in SETTINGS:
            if name in self.rows:
                cases[name] = self.rows[name].to_numpy(dtype=float)
        server = (self.rows["regime"] == "server").to_numpy()
        if server.any() and "max_num_seqs" in cases:
            cases.loc[server, "max_num_seqs"] = cases.loc[server, "max_num_seqs"].fillna(
                SERVING_ASSUMPTIONS["max_num_seqs"])
        _, self.configs, self.constants, self.kernel_rows = case_arrays(cases, self.catalogs)
        self.regime = self.rows["regime"].to_numpy(dtype=object)
        self.per_gpu = self.rows.get("per_gpu", pd.Series(False, index=self.rows.index)).astype(str).str.lower().eq(
            "true").to_numpy()
        self.n_gpus = self.rows["n_gpus"].to_numpy(dtype=float)
        self.offline_batch = operating_points.offline_batch(self.constants, self.kernel_rows).astype(float)

    def predict(self, fields: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """Predicted value of every row; ``fields`` replaces constants of ``ReplicaConstants`` per row."""
        c = replace(self.constants, **fields) if fields else self.constants
        predicted = np.full(len(self.rows), np.nan)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            for regime, evaluate in (("offline", self._offline), ("static", self._static), ("e2e", self._static),
                                     ("ttft", self._static), ("server", self._server)):
                chosen = self.regime == regime
                if chosen.any():
                    predicted[chosen] = evaluate(c, chosen, regime)
        return np.where(self.per_gpu, predicted / self.n_gpus, predicted)

    def _subset(self, c: ReplicaConstants, chosen: np.ndarray):
        index = np.flatnonzero(chosen)
        rows = self.kernel_rows
        return c.gather(index), rows._replace(config=np.arange(len(index)), context_len=rows.context_len[index],
                                              input_len=rows.input_len[index], output_len=rows.output_len[index],
                                              batch=rows.batch[index])

    def _offline(self, c, chosen, _):
        c, rows = self._subset(c, chosen)
        batch = self.offline_batch[chosen]
        tpot, _, _ = step_times.decode_step_ms(c, np.maximum(batch, 1.0), rows.context_len)
        _, work = step_times.prefill_ms(c, rows.input_len)
        req_s = throughput.request_rate_req_s(batch, tpot, rows.output_len, work)
        return np.where(batch > 0, req_s * rows.output_len, 0.0)

    def _static(self, c, chosen, regime):
        c, rows = self._subset(c, chosen)
        batch = self.rows["static_batch"].to_numpy(dtype=float)[chosen]
        prefill = static_prefill_ms(c, batch, rows.input_len)
        if regime == "ttft":
            return prefill
        decode_context = rows.input_len + rows.output_len / 2.0
        tpot, _, _ = step_times.decode_step_ms(c, batch, decode_context)
        e2e = prefill + (rows.output_len - 1.0) * tpot
        return e2e if regime == "e2e" else batch * rows.output_len / e2e * 1e3

    def _server(self, c, chosen, _):
        c, rows = self._subset(c, chosen)
        part = self.rows[chosen]
        return server_values(c, rows, part["qps"].to_numpy(dtype=float), part["n_requests"].to_numpy(dtype=float),
                             part["metric"].to_numpy())


def static_prefill_ms(c: ReplicaConstants, batch, input_len):
    """Prefill of ``batch`` prompts processed together in one step (no request overhead) [ms]."""
    batch = np.asarray(batch, dtype=float)
    pairs = step_times.prompt_pair_layers(c, input_len)
    stage = step_times.stage_step(c, 0.0, 0.0, batch * input_len, batch * pairs, batch)
    return stage.step_ms * c.pp


def server_values(c: ReplicaConstants, rows, offered, n_requests, metric) -> np.ndarray:
    """Each serving row's metric at its offered rate [ms, requests/s, tokens/s].

    Below capacity the steady-state load model applies; at or above it (including an unlimited
    rate) the replica runs at capacity and TTFT includes the admission wait of a finite run of
    ``n_requests`` requests (``queueing.finite_run_wait_ms``).
    """
    capacity = queueing.capacity_req_s(c, rows)
    achieved = np.minimum(offered, capacity)
    state = queueing.at_rate(c, rows, np.minimum(offered, capacity * 0.999))
    slots = operating_points.batch_cap(c, rows)
    _, prompt_work_ms = step_times.prefill_ms(c, rows.input_len)
    queue_ms = queueing.finite_run_wait_ms(offered, capacity, n_requests, slots, prompt_work_ms)
    ttft = np.where(offered < capacity, state["ttft_ms"], state["ttft_ms"] - state["wait_ms"] + queue_ms)
    by_metric = {"tpot_ms": state["tpot_ms"], "ttft_ms": ttft, "req_s": achieved,
                 "output_tok_s": achieved * rows.output_len, "total_tok_s": achieved * (rows.input_len + rows.output_len)}
    return np.select([metric == name for name in by_metric], list(by_metric.values()), np.nan)


def with_prediction(rows: pd.DataFrame, catalogs: Catalogs | None = None,
                    fields: dict[str, np.ndarray] | None = None) -> pd.DataFrame:
    """``rows`` with ``predicted`` and ``error_pct`` (signed relative error, + = over-predicted)."""
    out = rows.reset_index(drop=True).copy()
    out["predicted"] = MeasurementModel(out, catalogs).predict(fields)
    out["error_pct"] = (out["predicted"] / out["value"] - 1.0) * 100.0
    return out
