"""Fit the per-operator efficiencies to measurements, with priors, never per row.

The model is hierarchical in log space: each efficiency of a row is its documented prior (the
efficiency catalog's ``*`` rows) times ``exp`` of a sum of offsets, shared at the level where
data can identify them:

- global offsets (weight and KV reads, decode and prefill FLOPs, expert GEMMs, all-reduce,
  TP scaling), pulled towards the priors with a spread of 0.5 in log space;
- per compute precision (FP8, FP4 against 16-bit), spread 0.5;
- per GPU with data (reads, FLOPs, prefill FLOPs, all-reduce and TP scaling where it has TP
  rows), spread 0.3; per (GPU, precision) where a GPU has two or more precisions, spread 0.2;
- per engine: the iteration overhead ``a + b * batch`` and the request overhead, spread 1.0;
  per (engine, GPU): the per-sequence host time ``b`` (a Grace CPU differs from an x86 host).

Least squares on ``log(predicted / measured)`` plus the prior terms (scipy ``least_squares``
with a sparse Jacobian: an offset only moves the rows of its GPU, precision or engine).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import least_squares
from scipy.sparse import lil_matrix

from fleetplan.catalogs import Catalogs
from fleetplan.sweeps.efficiencies import base_engine_ids
from fleetplan.sweeps.predictions import MeasurementModel

WILDCARD = "*"
MAX_EFFICIENCY = 0.98
# Group -> the ReplicaConstants fields it scales (log space) or shifts (``tp``, ``request_ms``).
GROUPS = {
    "memory": ("gemm_memory", "expert_memory", "attention_memory"),
    "compute": ("gemm_compute", "expert_compute", "attention_compute"),
    "prefill": ("gemm_prefill", "expert_prefill", "attention_prefill"),
    "expert": ("expert_compute", "expert_prefill", "expert_memory"),
    "kv": ("attention_memory",),
    "allreduce": ("allreduce_efficiency",),
    "ar_latency": ("allreduce_latency_us",),
    "crossing": ("crossing_efficiency",),  # only rows whose group spans interconnect domains
    "tp": ("tp_scaling",),
    "iteration_ms": ("iteration_ms",),
    "iteration_us": ("iteration_us_per_seq",),
    "layer_us": ("layer_overhead_us",),
    "tiles": ("expert_tile_tokens",),
    "routing": ("routing_ns_per_token",),
    "request_ms": ("request_overhead_ms",),
}
ADDITIVE = ("tp", "request_ms")
RELEASE_GROUPS = ("memory", "compute", "prefill", "iteration_ms", "iteration_us", "layer_us")  # what a release changes
RATIO_FIELDS = ("tp_scaling", "crossing_efficiency")  # shares of another efficiency, at most 1
EFFICIENCY_FIELDS = tuple(sorted({f for g in ("memory", "compute", "prefill", "expert", "kv", "allreduce")
                                  for f in GROUPS[g]}))  # fractions, capped below 1
SIGMA = {"global": 0.5, "precision": 0.5, "gpu": 0.3, "gpu_precision": 0.2, "engine": 1.0, "engine_gpu": 1.0,
         "release": 0.5}
TP_SIGMA = {"global": 0.1, "gpu": 0.05}
REQUEST_SIGMA_MS = 10.0
TILE_SIGMA = 1.0  # the tile prior is a kernel's tile height, not a measurement
NAN_RESIDUAL = 3.0  # a row the model cannot evaluate counts as a factor-20 miss


@dataclass(frozen=True)
class Parameter:
    """One fitted offset: its group, level and key (``""``, a precision, a GPU, ``gpu/precision``,
    an engine or ``engine/gpu``)."""

    group: str
    level: str
    key: str

    @property
    def sigma(self) -> float:
        if self.group == "tp":
            return TP_SIGMA.get(self.level, 0.05)
        if self.group == "request_ms":
            return REQUEST_SIGMA_MS
        if self.group in ("tiles", "routing", "ar_latency") and self.level in ("global", "gpu"):
            return TILE_SIGMA
        return SIGMA[self.level]


class FitSpace:
    """The parameters a set of measurement rows can identify, and how they map onto the rows."""

    def __init__(self, model: MeasurementModel):
        self.model = model
        rows, configs = model.rows, model.configs
        self.gpu = configs["gpu"].to_numpy(dtype=object)
        self.precision = configs["gemm_precision"].to_numpy(dtype=object)
        # each row's engine with its release where that is not the newest it has measurements of
        engines = rows.get("engine_release", configs["engine"]).to_numpy(dtype=object)
        self.engine = base_engine_ids(engines)
        self.release = np.where(engines == self.engine, "", engines).astype(object)
        self.base = {f: getattr(model.constants, f) for g in GROUPS.values() for f in g}
        tp_rows = configs["tp"].to_numpy() > 1
        server = (rows["regime"] == "server").to_numpy()
        moe = (configs["n_experts"] > configs["n_experts_active"]).to_numpy()
        self.crossing = configs["spans_domains"].to_numpy(dtype=bool)
        self.parameters = self._parameters(tp_rows, server, moe)
        self.masks = [self._mask(p) & (self.crossing if p.group == "crossing" else True) for p in self.parameters]

    def _parameters(self, tp_rows, server, moe) -> list[Parameter]:
        params = [Parameter(g, "global", "") for g in ("memory", "compute", "prefill", "kv")]
        params += [Parameter("expert", "global", ""), Parameter("tiles", "global", ""),
                   Parameter("routing", "global", "")] if moe.any() else []
        params += [Parameter(g, "global", "") for g in ("allreduce", "ar_latency", "tp")] if tp_rows.any() else []
        params += [Parameter("crossing", "global", "")] if self.crossing.any() else []
        for precision in sorted(set(self.precision) - {"bf16", "fp16"}):
            params += [Parameter("compute", "precision", precision), Parameter("prefill", "precision", precision)]
        for gpu in sorted(set(self.gpu)):
            params += [Parameter(g, "gpu", gpu) for g in ("memory", "compute", "prefill")]
            if (tp_rows & (self.gpu == gpu)).any():
                params += [Parameter(g, "gpu", gpu) for g in ("allreduce", "ar_latency", "tp")]
            if (self.crossing & (self.gpu == gpu)).any():
                params += [Parameter("crossing", "gpu", gpu)]
            if (moe & (self.gpu == gpu)).any():
                params += [Parameter("tiles", "gpu", gpu), Parameter("routing", "gpu", gpu)]
            precisions = sorted(set(self.precision[self.gpu == gpu]))
            if len(precisions) > 1:
                params += [Parameter(g, "gpu_precision", f"{gpu}/{p}") for p in precisions for g in ("compute", "prefill")]
        for engine in sorted(set(self.engine)):
            params += [Parameter(g, "engine", engine) for g in ("iteration_ms", "iteration_us", "layer_us")]
            if (server & (self.engine == engine)).any():
                params += [Parameter("request_ms", "engine", engine)]
            params += [Parameter(g, "engine_gpu", f"{engine}/{gpu}") for gpu in sorted(set(self.gpu[self.engine == engine]))
                       for g in ("iteration_us", "layer_us")]
        for release in sorted(set(self.release) - {""}):
            params += [Parameter(g, "release", release) for g in RELEASE_GROUPS]
        return params

    def _mask(self, p: Parameter) -> np.ndarray:
        if p.level == "global":
            return np.ones(len(self.gpu), dtype=bool)
        if p.level == "precision":
            return self.precision == p.key
        if p.level == "gpu":
            return self.gpu == p.key
        if p.level == "gpu_precision":
            gpu, precision = p.key.split("/")
            return (self.gpu == gpu) & (self.precision == precision)
        if p.level == "engine":
            return self.engine == p.key
        if p.level == "release":
            return self.release == p.key
        engine, gpu = p.key.split("/")
        return (self.engine == engine) & (self.gpu == gpu)

    def fields(self, theta: np.ndarray) -> dict[str, np.ndarray]:
        """The rows' efficiency constants under offsets ``theta``."""
        log_scale = {f: np.zeros(len(self.gpu)) for f in self.base}
        shift = {f: np.zeros(len(self.gpu)) for f in self.base}
        for value, p, mask in zip(theta, self.parameters, self.masks):
            target = shift if p.group in ADDITIVE else log_scale
            for field in GROUPS[p.group]:
                target[field] = target[field] + np.where(mask, value, 0.0)
        out = {}
        for field, base in self.base.items():
            value = base * np.exp(log_scale[field]) + shift[field]
            if field in EFFICIENCY_FIELDS or field in RATIO_FIELDS:
                value = np.clip(value, 0.01, MAX_EFFICIENCY if field not in RATIO_FIELDS else 1.0)
            out[field] = np.maximum(value, 0.0)
        return out

    def jacobian_sparsity(self) -> lil_matrix:
        n_rows, n_params = len(self.gpu), len(self.parameters)
        sparsity = lil_matrix((n_rows + n_params, n_params), dtype=int)
        for column, mask in enumerate(self.masks):
            for row in np.flatnonzero(mask):
                sparsity[row, column] = 1
            sparsity[n_rows + column, column] = 1
        return sparsity


def residuals(theta: np.ndarray, space: FitSpace, measured: np.ndarray) -> np.ndarray:
    """Log errors of every row, then the prior terms of every offset."""
    predicted = space.model.predict(space.fields(theta))
    with np.errstate(divide="ignore", invalid="ignore"):
        data = np.log(predicted / measured)
    data = np.where(np.isfinite(data), data, NAN_RESIDUAL)
    prior = theta / np.array([p.sigma for p in space.parameters])
    return np.concatenate([data, prior])


@dataclass(frozen=True)
class Fit:
    """A fitted parameter vector, the space it lives in, and the fit's row count."""

    space: FitSpace
    theta: np.ndarray

    def offsets(self) -> pd.DataFrame:
        """One row per parameter: group, level, key and fitted offset."""
        return pd.DataFrame([{"group": p.group, "level": p.level, "key": p.key, "offset": v}
                             for p, v in zip(self.space.parameters, self.theta)])

    def offset(self, group: str, level: str, key: str) -> float:
        for p, v in zip(self.space.parameters, self.theta):
            if (p.group, p.level, p.key) == (group, level, key):
                return float(v)
        return 0.0


def fit(rows: pd.DataFrame, catalogs: Catalogs, max_nfev: int = 60) -> Fit:
    """Offsets that best explain ``rows`` (predictable measurement rows), starting from the
    catalogs' efficiencies (pass priors-only catalogs, ``priors_only``)."""
    model = MeasurementModel(rows, catalogs)
    space = FitSpace(model)
    measured = model.rows["value"].to_numpy(dtype=float)
    start = np.zeros(len(space.parameters))
    result = least_squares(residuals, start, args=(space, measured), jac_sparsity=space.jacobian_sparsity(),
                           diff_step=1e-3, max_nfev=max_nfev, x_scale=1.0)
    return Fit(space, result.x)


def priors_only(catalogs: Catalogs) -> Catalogs:
    """A copy of ``catalogs`` whose efficiency catalog keeps only the documented priors
    (rows for every GPU, ``n_points`` 0): the starting point of every fit."""
    copy = catalogs.copy()
    efficiency = copy.efficiency
    keep = (efficiency["gpu"] == WILDCARD) & (efficiency["n_points"] == 0)
    object.__setattr__(copy, "efficiency", efficiency[keep].reset_index(drop=True))
    return copy
