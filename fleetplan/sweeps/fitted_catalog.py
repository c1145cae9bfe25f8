"""Efficiency-catalog rows from a fit: what ``scripts/fit_efficiency.py`` and ``fleetplan
calibrate`` write.

For every GPU with measurements, one row per operator and precision the GPU runs (``n_points``
counts the rows behind it; 0 where the precision itself has none and the GPU's fit is carried
over through the precision offsets), once for any engine (``*``), once per engine that was
measured on it (its newest measured release), and once per older release measured on it
(``tensorrt-llm@0.14``: the engine's offsets plus the release's, so a measurement of that release
is predicted as that release ran). GPUs without measurements but with a measured sibling of the same architecture
take the siblings' mean offsets (``n_points`` 0, notes say from which GPUs): the estimate calls
them ``transferred``. Everything else keeps the documented priors (``prior``).
"""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.catalogs.conventions import RELEASE_MARK, engine_base
from fleetplan.catalogs.schema import WEIGHT_ONLY_PRECISIONS, precisions
from fleetplan.sweeps.config_efficiencies import SOURCES
from fleetplan.sweeps.efficiencies import operator_efficiencies
from fleetplan.sweeps.fitting import (
    ADDITIVE,
    GROUPS,
    MAX_EFFICIENCY,
    RATIO_FIELDS,
    RELEASE_GROUPS,
    WILDCARD,
    Fit,
)

# Operator -> the ReplicaConstants fields its catalog row holds, by catalog column.
ROW_FIELDS = {op: {column: field for field, (o, column, _) in SOURCES.items() if o == op}
              for op in ("gemm", "expert_gemm", "attention", "allreduce", "iteration")}
PRECISION_OPERATORS = ("gemm", "expert_gemm")  # keyed by precision; the others by '*'
RELEASE_OPERATORS = tuple(sorted({op for group in RELEASE_GROUPS for field in GROUPS[group]
                                  for op, fields in ROW_FIELDS.items() if field in fields.values()}))


def _log_offsets(fit: Fit, gpus: list[str], precision: str, engine: str) -> tuple[dict, dict]:
    """Sum of the fitted offsets that apply to (mean of ``gpus``, precision, engine), per field;
    an ``engine@release`` takes its engine's offsets plus its release's."""
    scale, shift = {}, {}
    base = engine_base(engine)
    for p, value in zip(fit.space.parameters, fit.theta):
        weight = {"global": 1.0, "precision": float(p.key == precision), "engine": float(p.key == base),
                  "release": float(p.key == engine),
                  "gpu": sum(p.key == g for g in gpus) / len(gpus),
                  "gpu_precision": sum(p.key == f"{g}/{precision}" for g in gpus) / len(gpus),
                  "engine_gpu": sum(p.key == f"{base}/{g}" for g in gpus) / len(gpus)}.get(p.level, 0.0)
        if weight:
            target = shift if p.group in ADDITIVE else scale
            for field in GROUPS[p.group]:
                target[field] = target.get(field, 0.0) + weight * value
    return scale, shift


def _values(priors: pd.DataFrame, fit: Fit, operator: str, gpus: list[str], precision: str, engine: str) -> dict:
    """Catalog cells of one operator row: prior times exp(offsets), plus additive offsets."""
    prior = operator_efficiencies(priors, [engine_base(engine)], [WILDCARD], operator, [precision]).iloc[0]
    scale, shift = _log_offsets(fit, gpus, precision, engine)
    cells = {}
    for column, field in ROW_FIELDS[operator].items():
        base = prior[column]
        if pd.isna(base) and column == "prefill_efficiency":
            base = prior["compute_efficiency"]
        if pd.isna(base):
            continue
        value = base * np.exp(scale.get(field, 0.0)) + shift.get(field, 0.0)
        if field in RATIO_FIELDS:
            value = min(value, 1.0)
        elif column.endswith("_efficiency"):
            value = min(value, MAX_EFFICIENCY)
        cells[column] = round(max(float(value), 0.0), 4)
    return cells


def native_precisions(catalogs: Catalogs, gpu: str) -> list[str]:
    """The efficiency precision keys a GPU runs: its peak columns plus the weight-only formats."""
    row = catalogs.gpus.loc[gpu]
    return [p for p in precisions() if pd.notna(row.get(f"tflops_{p}"))] + list(WEIGHT_ONLY_PRECISIONS)


def efficiency_rows(fit: Fit, priors: Catalogs, rows: pd.DataFrame, source: str, as_of: str | None = None) -> pd.DataFrame:
    """Fitted efficiency rows for the GPUs of ``rows`` and their untested siblings (see module doc)."""
    space = fit.space
    # rows behind each (engine, gpu, precision): an engine counts its releases' rows too
    keyed = pd.DataFrame({"engine": np.concatenate([space.engine, space.release]),
                          "gpu": np.tile(space.gpu, 2), "precision": np.tile(space.precision, 2)})
    counts = keyed[keyed["engine"] != ""].groupby(["engine", "gpu", "precision"]).size()
    configs = space.model.configs
    measured = sorted(set(configs["gpu"]))
    out = []
    for gpu in measured:
        out += _gpu_rows(fit, priors, [gpu], gpu, counts, source, f"fitted to {gpu} measurements")
    siblings = _siblings(priors, measured)
    for gpu, sources in siblings.items():
        note = f"transferred from {', '.join(sources)} (same architecture: {priors.gpus.loc[gpu, 'architecture']})"
        out += _gpu_rows(fit, priors, sources, gpu, None, source, note)
    table = pd.DataFrame(out).reindex(columns=priors.efficiency.columns)
    table["as_of"] = as_of or date.today().isoformat()
    return table


def _siblings(catalogs: Catalogs, measured: list[str]) -> dict[str, list[str]]:
    architecture = catalogs.gpus["architecture"]
    return {gpu: sorted(g for g in measured if architecture[g] == arch)
            for gpu, arch in architecture.items()
            if gpu not in measured and any(architecture[g] == arch for g in measured)}


def _gpu_rows(fit: Fit, priors: Catalogs, sources: list[str], gpu: str, counts, source: str, note: str) -> list[dict]:
    engines = sorted({e for (e, g, _) in counts.index if g == gpu}) if counts is not None else []
    rows = []
    for engine in [WILDCARD, *engines]:
        for operator in ROW_FIELDS:
            if operator == "iteration" and engine == WILDCARD:
                continue
            if operator not in RELEASE_OPERATORS and RELEASE_MARK in engine:
                continue  # the release fits nothing here: its engine's row applies
            keys = native_precisions(priors, gpu) if operator in PRECISION_OPERATORS else [WILDCARD]
            for precision in keys:
                cells = _values(priors.efficiency, fit, operator, sources, precision,
                                engine if engine != WILDCARD else "")
                rows.append({"engine": engine, "gpu": gpu, "operator": operator, "precision": precision, **cells,
                             "n_points": _rows_behind(counts, gpu, engine, precision), "source": source,
                             "notes": note})
    return rows


def _rows_behind(counts, gpu: str, engine: str, precision: str) -> int:
    """Measurement rows of ``gpu`` behind a catalog row: of its engine (``*``: of every engine,
    each counted once, not again for its releases) and precision (``*``: any)."""
    if counts is None:
        return 0
    return int(sum(v for (e, g, p), v in counts.items() if g == gpu and precision in (p, WILDCARD)
                   and (e == engine or (engine == WILDCARD and RELEASE_MARK not in e))))
