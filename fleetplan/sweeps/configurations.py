"""Serving configurations: one row per (gpu, model, quant, kv_quant, tp) with every constant the
row kernel needs, gathered from the catalogs once so that the grid itself is pure array work
(the kernel reads them as ``ReplicaConstants.from_frame(frame)``).

A configuration that cannot run (precision not native, TP not dividing the heads, a KV format
that cannot hold a cache, TP wider than a node) keeps its row with a ``config_reason``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.catalogs.prices import median_price_usd_per_gpu_hour
from fleetplan.sweeps import levers, memory
from fleetplan.sweeps.assumptions import LEVERS, Assumptions, check_engine, efficiency_for
from fleetplan.sweeps.replica_constants import PREFILL_PREFIX

CONFIG_KEYS = ["gpu", "model", "quant", "kv_quant", "tp"]


def config_frame(catalogs: Catalogs, keys: pd.DataFrame, assumptions: Assumptions,
                 per_config: pd.DataFrame | None = None) -> pd.DataFrame:
    """Configuration constants for each row of ``keys`` (columns ``CONFIG_KEYS``).

    ``per_config`` may carry per-row overrides (mbu, mfu, step_overhead_ms, usd_per_gpu_hour);
    NaN cells fall back to ``assumptions`` and then to the catalogs.
    """
    gpus = catalogs.gpus.reindex(keys["gpu"]).reset_index(drop=True)
    models = catalogs.models.reindex(keys["model"]).reset_index(drop=True)
    quants = catalogs.quants.reindex(keys["quant"]).reset_index(drop=True)
    kv_quants = catalogs.quants.reindex(keys["kv_quant"]).reset_index(drop=True)
    frame = keys.reset_index(drop=True).copy()
    frame["tp"] = frame["tp"].astype(np.int64)
    precision = quants["compute_precision"]
    frame["precision"] = precision
    frame["peak_tflops"] = _peak_tflops(gpus, precision)
    for column in ("memory_gb", "memory_bw_tb_s", "interconnect_gb_s", "gpus_per_node"):
        frame[column] = gpus[column].to_numpy(dtype=float)
    for column in ("params_total_b", "params_active_b", "n_layers", "hidden_size", "n_heads",
                   "head_dim", "n_experts", "n_experts_active", "max_context"):
        frame[column] = models[column].to_numpy(dtype=float)
    frame["bytes_per_weight"] = quants["bytes_per_weight"].to_numpy(dtype=float)
    _add_factors(frame, catalogs, assumptions, per_config)
    _add_levers(frame, assumptions, per_config, quants["weight_only"].to_numpy(dtype=bool))
    per_stage = levers.stage_fraction(frame["n_layers"], frame["pp"])  # layers on the busiest stage
    frame["kv_bytes_per_token_model"] = _kv_bytes_per_token_model(models, kv_quants)
    shard = memory.kv_shard_fraction(models["n_kv_heads"].to_numpy(dtype=float), frame["tp"].to_numpy(dtype=float),
                                     (models["attention"] == "mla").to_numpy())
    frame["kv_bytes_per_token"] = frame["kv_bytes_per_token_model"] * shard * per_stage
    frame["weight_gb"] = memory.weight_gb(frame["params_total_b"], frame["bytes_per_weight"]) * per_stage / frame["tp"]
    frame["config_reason"] = _config_reasons(frame, gpus, models, quants, kv_quants)
    return frame


def with_prefill_side(catalogs: Catalogs, frame: pd.DataFrame, assumptions: Assumptions, levers=()) -> pd.DataFrame:
    """``frame`` (with ``prefill_gpu``, ``prefill_tp``) plus its prefill replica's numeric constants,
    prefixed ``prefill.``, from a second ``config_frame`` of (prefill_gpu, model, quant, kv_quant,
    prefill_tp, same levers).

    Colocated configurations (``prefill_tp`` 0) stand in their own gpu and tp so every constant is
    finite; the kernel does not use them there. A prefill-side reason reads ``"prefill: <reason>"``
    where the configuration itself can run.
    """
    split = frame["prefill_tp"].to_numpy() > 0
    keys = frame[CONFIG_KEYS + list(levers)].copy()
    keys["gpu"] = np.where(split, frame["prefill_gpu"], frame["gpu"])
    keys["tp"] = np.where(split, frame["prefill_tp"], frame["tp"])
    prefill = config_frame(catalogs, keys, assumptions, per_config=keys)
    own = frame["config_reason"].to_numpy(dtype=object)
    other = prefill["config_reason"].to_numpy(dtype=object)
    combined = pd.concat([frame, prefill.select_dtypes(include="number").add_prefix(PREFILL_PREFIX)], axis=1)
    combined["config_reason"] = np.where(split & (own == "") & (other != ""), "prefill: " + other, own)
    return combined


def _peak_tflops(gpus: pd.DataFrame, precision: pd.Series) -> np.ndarray:
    peak = np.full(len(gpus), np.nan)
    for name in pd.unique(precision.dropna()):
        column = f"tflops_{name}"
        if column in gpus:
            rows = (precision == name).to_numpy()
            peak[rows] = gpus.loc[rows, column].to_numpy(dtype=float)
    return peak


def _kv_bytes_per_token_model(models: pd.DataFrame, kv_quants: pd.DataFrame) -> np.ndarray:
    """KV bytes per token of the whole model (all layers, all KV heads) [bytes/token]."""
    element = kv_quants["kv_bytes_per_element"].to_numpy(dtype=float)
    layers = models["n_layers"].to_numpy(dtype=float)
    dense = memory.kv_bytes_per_token(layers, models["n_kv_heads"].to_numpy(dtype=float),
                                      models["head_dim"].to_numpy(dtype=float), element)
    latent = memory.kv_bytes_per_token_mla(layers, models["kv_lora_rank"].to_numpy(dtype=float),
                                           models["qk_rope_head_dim"].to_numpy(dtype=float), element)
    return np.where((models["attention"] == "mla").to_numpy(), latent, dense)


def _add_factors(frame: pd.DataFrame, catalogs: Catalogs, assumptions: Assumptions, per_config) -> None:
    check_engine(catalogs.efficiency, assumptions.engine)
    engine = assumptions.engine
    if per_config is not None and "engine" in per_config:  # per case (e.g. a measurement's engine)
        given = per_config["engine"].reset_index(drop=True).astype(object)
        engine = given.where(given.notna() & (given.astype(str) != ""), engine).to_numpy(dtype=object)
    factors = efficiency_for(catalogs.efficiency, frame["gpu"], frame["precision"].fillna("*"), engine)
    prices = median_price_usd_per_gpu_hour(catalogs.prices, pd.Index(frame["gpu"]))
    defaults = {"mbu": factors["mbu"], "mfu": factors["mfu"], "mfu_prefill": factors["mfu_prefill"],
                "step_overhead_ms": factors["step_overhead_ms"],
                "tp_scaling": factors["tp_scaling"], "request_overhead_ms": factors["request_overhead_ms"],
                "usd_per_gpu_hour": prices}
    for name, catalog_value in defaults.items():
        value = pd.Series(np.asarray(catalog_value, dtype=float), index=frame.index)
        if getattr(assumptions, name) is not None:
            value[:] = getattr(assumptions, name)
        if per_config is not None and name in per_config:
            override = pd.to_numeric(per_config[name], errors="coerce").reset_index(drop=True)
            value = override.where(override.notna(), value)
        frame[name] = value.to_numpy(dtype=float)
    _prefill_follows_decode(frame, assumptions, per_config)
    tp_loss = frame["tp_scaling"] ** np.log2(frame["tp"])  # efficiency lost to sharding, per doubling
    frame["mbu"] *= tp_loss
    frame["mfu"] *= tp_loss
    frame["mfu_prefill"] *= tp_loss
    for name in ("reserve_fraction", "allreduce_latency_us", "activation_bytes", "max_num_seqs"):
        frame[name] = float(getattr(assumptions, name))


def _prefill_follows_decode(frame: pd.DataFrame, assumptions: Assumptions, per_config) -> None:
    """A caller who sets MFU without a prefill MFU means it for both (the seed's single MFU)."""
    given_mfu = np.full(len(frame), assumptions.mfu is not None)
    given_prefill = np.full(len(frame), assumptions.mfu_prefill is not None)
    if per_config is not None:
        for name, given in (("mfu", given_mfu), ("mfu_prefill", given_prefill)):
            if name in per_config:
                given |= pd.to_numeric(per_config[name], errors="coerce").notna().to_numpy()
    follow = given_mfu & ~given_prefill
    frame.loc[follow, "mfu_prefill"] = frame.loc[follow, "mfu"]


def _add_levers(frame: pd.DataFrame, assumptions: Assumptions, per_config, weight_only: np.ndarray) -> None:
    """Lever values per configuration: a per-configuration column wins over the call's scalar."""
    for name in LEVERS:
        value = pd.Series(float(getattr(assumptions, name)), index=frame.index)
        if per_config is not None and name in per_config:
            override = pd.to_numeric(per_config[name], errors="coerce").reset_index(drop=True)
            value = override.where(override.notna(), value)
        frame[name] = value.to_numpy(dtype=float)
    frame["dequant_cost"] = np.where(weight_only, frame["dequant_overhead"], 0.0)
    frame["gpus"] = frame["tp"] * frame["pp"]
    frame["network_gb_s"] = float(assumptions.network_gb_s)
    frame["pp_hop_latency_us"] = float(assumptions.pp_hop_latency_us)


def _config_reasons(frame, gpus, models, quants, kv_quants) -> np.ndarray:
    """One reason string per configuration ('' when it can run), first problem wins."""
    tp = frame["tp"].to_numpy()
    heads = frame["n_heads"].to_numpy()
    reserve = memory.runtime_reserve_gb(frame["memory_gb"].to_numpy(), frame["reserve_fraction"].to_numpy())
    checks = [
        (np.isnan(frame["peak_tflops"].to_numpy()),
         frame["gpu"] + " has no native " + frame["precision"].astype(str)),
        (kv_quants["kv_bytes_per_element"].isna().to_numpy(),
         frame["kv_quant"] + " cannot store the KV cache"),
        ((kv_quants["compute_precision"] == "fp4").to_numpy() & gpus["tflops_fp4"].isna().to_numpy(),
         frame["gpu"] + " has no native fp4 for an fp4 KV cache"),
        (heads % tp != 0,
         "tp " + frame["tp"].astype(str) + " does not divide " + models["n_heads"].astype(int).astype(str)
         + " attention heads"),
        (frame["pp"].to_numpy() > frame["n_layers"].to_numpy(),
         "pp " + frame["pp"].astype(int).astype(str) + " exceeds " + models["n_layers"].astype(int).astype(str)
         + " layers"),
        (tp > frame["gpus_per_node"].to_numpy(),
         "tp " + frame["tp"].astype(str) + " exceeds " + gpus["gpus_per_node"].astype(int).astype(str)
         + " GPUs per node"),
        (frame["weight_gb"].to_numpy() + reserve > frame["memory_gb"].to_numpy(),
         "weights " + frame["weight_gb"].round(1).astype(str) + " GB per GPU plus a "
         + pd.Series(reserve).round(1).astype(str) + " GB reserve exceed " + frame["memory_gb"].astype(str) + " GB"),
    ]
    reason = np.full(len(frame), "", dtype=object)
    for failed, message in reversed(checks):
        reason = np.where(failed, message.to_numpy(dtype=object), reason)
    return reason
