"""Lookups of the efficiency catalog (per operator) and of the engines catalog (engine profiles).

Efficiency rows are keyed (engine, GPU, operator, precision) with ``*`` as a wildcard. For each
case the most specific row wins, cell by cell: (engine, GPU, precision), (engine, GPU, ``*``),
(engine, ``*``, precision), (engine, ``*``, ``*``), then the same among engine ``*`` rows; the
catalog's (``*``, ``*``, operator, ``*``) rows are documented priors. An engine id with a release
(``tensorrt-llm@0.14``) looks first among that release's rows, then among its engine's. The row that supplied a
case's GEMM efficiencies also says how well the case is calibrated (``calibration_labels``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.catalogs.conventions import engine_base
from fleetplan.errors import InvalidValueError, did_you_mean

WILDCARD = "*"
DEFAULT_ENGINE = "vllm"  # the engine whose profile applies when none is named
VALUE_COLUMNS = ("compute_efficiency", "prefill_efficiency", "memory_efficiency", "tp_scaling", "overhead_ms",
                 "overhead_us_per_sequence", "overhead_us_per_layer", "expert_tile_tokens", "routing_ns_per_token", "latency_us", "request_overhead_ms",
                 "crossing_efficiency")
CALIBRATION_LABELS = ("measured", "transferred", "prior")


def operator_efficiencies(efficiency: pd.DataFrame, engine, gpu, operator: str, precision) -> pd.DataFrame:
    """The efficiency values of ``operator`` for each (engine, gpu, precision) triple, most specific
    row first, and the key and ``n_points`` of the first row that matched (``matched_*``).

    Each distinct triple is resolved once (a catalog-sized loop), then spread onto the cases.
    """
    wanted = pd.DataFrame({"engine": np.asarray(engine, dtype=object), "gpu": np.asarray(gpu, dtype=object),
                           "precision": np.asarray(precision, dtype=object)})
    rows = efficiency[efficiency["operator"] == operator]
    columns = [*VALUE_COLUMNS, "n_points"]
    table = {key: values for key, values in zip(
        zip(rows["engine"], rows["gpu"], rows["precision"]),
        rows.reindex(columns=columns).to_numpy(dtype=float))}
    keys, inverse = np.unique(wanted.to_numpy(dtype=str), axis=0, return_inverse=True)
    resolved = np.full((len(keys), len(columns)), np.nan)
    matched = np.full((len(keys), 3), None, dtype=object)
    for index, (engine_key, gpu_key, precision_key) in enumerate(keys):
        for engine_id in engine_lookup_order(engine_key):
            for g, p in ((gpu_key, precision_key), (gpu_key, WILDCARD), (WILDCARD, precision_key), (WILDCARD, WILDCARD)):
                found = table.get((engine_id, g, p))
                if found is None:
                    continue
                if matched[index, 0] is None:
                    matched[index] = (engine_id, g, p)
                resolved[index] = np.where(np.isnan(resolved[index]), found, resolved[index])
    inverse = np.asarray(inverse).reshape(-1)
    out = pd.DataFrame(resolved[inverse], columns=columns, index=wanted.index)
    for i, name in enumerate(("matched_engine", "matched_gpu", "matched_precision")):
        out[name] = matched[inverse, i]
    return out


def calibration_labels(matched: pd.DataFrame, engine, gpu, precision) -> np.ndarray:
    """How well each case is calibrated, from the row that supplied its GEMM efficiencies.

    ``measured``: a row of this engine, GPU and precision fitted to measurements (``n_points`` > 0);
    ``transferred``: a row of this GPU fitted for another engine or precision, or carried over
    from a measured GPU of the same architecture; ``prior``: only the documented ``*`` priors.
    """
    same_gpu = matched["matched_gpu"].to_numpy(dtype=object) == np.asarray(gpu, dtype=object)
    fitted = matched["n_points"].fillna(0).to_numpy() > 0
    exact = ((matched["matched_engine"].to_numpy(dtype=object) == np.asarray(engine, dtype=object))
             & (matched["matched_precision"].to_numpy(dtype=object) == np.asarray(precision, dtype=object)))
    return np.where(same_gpu & fitted & exact, CALIBRATION_LABELS[0],
                    np.where(same_gpu, CALIBRATION_LABELS[1], CALIBRATION_LABELS[2])).astype(object)


def least_sure(first, second) -> np.ndarray:
    """Per case, the less sure of two calibration labels (``prior`` < ``transferred`` < ``measured``),
    e.g. of a disaggregated configuration's decode and prefill replicas."""
    ranks = [pd.Categorical(np.asarray(labels, dtype=object), categories=CALIBRATION_LABELS).codes
             for labels in (first, second)]
    return np.asarray(CALIBRATION_LABELS, dtype=object)[np.maximum(*ranks)]


def engine_ids(catalogs: Catalogs, engine) -> np.ndarray:
    """Canonical engine ids per case: the given one, or ``DEFAULT_ENGINE`` where none or ``*``.

    An id may name a release, ``engine@MAJOR.MINOR`` (``tensorrt-llm@0.14``), that the efficiency
    catalog has rows for: its efficiencies come from that release's fitted rows where it was
    measured, its engine's elsewhere; its profile is the engine's.
    """
    given = pd.Series(np.broadcast_to(np.asarray(engine if engine is not None else "", dtype=object), (1,))
                      if np.ndim(engine) == 0 else np.asarray(engine, dtype=object))
    text = given.fillna("").astype(str).str.strip().str.lower()
    ids = text.where(~text.isin(["", WILDCARD, "nan", "none"]), DEFAULT_ENGINE).to_numpy(dtype=object)
    fitted = set(catalogs.efficiency["engine"].astype(str))
    for name in pd.unique(ids):
        base = engine_base(name)
        if base not in catalogs.engines.index:
            raise did_you_mean(base, list(catalogs.engines.index), kind="engine")
        if name != base and name not in fitted:  # a release is only as good as its fitted rows
            releases = sorted(e for e in fitted if engine_base(e) == base and e != base)
            raise did_you_mean(str(name), releases or [base], kind="engine release")
    return ids


def engine_chain(catalogs: Catalogs, engine) -> set[str]:
    """The engine ids whose efficiency rows a case of ``engine`` (``None`` or ``*``:
    ``DEFAULT_ENGINE``) looks up: its release, its engine and ``*``."""
    return set(engine_lookup_order(str(engine_ids(catalogs, engine)[0])))


def engine_lookup_order(engine_id: str) -> tuple[str, ...]:
    """The engine ids an efficiency lookup tries for ``engine_id``, first match first: the
    release (``vllm@0.6``), its engine (``vllm``), then the ``*`` priors."""
    return tuple(dict.fromkeys((engine_id, engine_base(engine_id), WILDCARD)))


def base_engine_ids(engines) -> np.ndarray:
    """The engine of each engine id, without its release (``tensorrt-llm@0.14`` -> ``tensorrt-llm``)."""
    ids = pd.Series(np.asarray(engines, dtype=object)).astype(str)
    return ids.map({name: engine_base(name) for name in ids.unique()}).to_numpy(dtype=object)


def engine_profiles(catalogs: Catalogs, engines: np.ndarray, memory_gib) -> pd.DataFrame:
    """Each case's engine profile (a release runs its engine's), with the small-GPU defaults
    applied below their memory threshold."""
    profile = catalogs.engines.reindex(base_engine_ids(engines)).reset_index(drop=True)
    small = (np.asarray(memory_gib, dtype=float) < profile["small_gpu_below_gib"].to_numpy(dtype=float))
    for column in ("max_num_seqs", "max_batched_tokens"):
        smaller = profile[f"{column}_small_gpu"].to_numpy(dtype=float)
        profile[column] = np.where(small & ~np.isnan(smaller), smaller, profile[column].to_numpy(dtype=float))
    return profile


def require_values(values: pd.DataFrame, columns, operator: str) -> None:
    """Every case found a value for each of ``columns`` (the catalog's priors guarantee it)."""
    missing = [c for c in columns if values[c].isna().any()]
    if missing:
        message = f"efficiency catalog has no {operator} row with {missing[0]} for some cases (add a '*' prior row)"
        raise InvalidValueError(message)
