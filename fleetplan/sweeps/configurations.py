"""Serving configurations: one row per (gpu, model, quant, kv_quant, tp) with every constant the
row kernel needs, gathered from the catalogs once so that the grid itself is pure array work
(the kernel reads them as ``ReplicaConstants.from_frame(frame)``).

A configuration that cannot run (precision not native, TP not dividing the heads, a KV format
that cannot hold a cache, TP wider than a node, weights that leave no room for a KV cache) keeps
its row with a ``config_reason``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.catalogs.schema import WEIGHT_ONLY_PRECISIONS
from fleetplan.sweeps import levers, memory, operators
from fleetplan.sweeps.assumptions import LEVERS, Assumptions, check_engine
from fleetplan.sweeps.config_efficiencies import add_efficiencies
from fleetplan.sweeps.efficiencies import engine_ids, engine_profiles, least_sure
from fleetplan.sweeps.replica_constants import PREFILL_PREFIX
from fleetplan.sweeps.uncertainty import error_band_pct

CONFIG_KEYS = ["gpu", "model", "quant", "kv_quant", "tp"]
MLA = "mla"


def config_frame(catalogs: Catalogs, keys: pd.DataFrame, assumptions: Assumptions,
                 per_config: pd.DataFrame | None = None) -> pd.DataFrame:
    """Configuration constants for each row of ``keys`` (columns ``CONFIG_KEYS``).

    ``per_config`` may carry per-row values of ``assumptions.PER_CASE_ASSUMPTIONS``, an ``engine``
    and the efficiency constants themselves (``config_efficiencies.EFFICIENCY_FIELDS``); NaN
    cells fall back to ``assumptions`` and then to the catalogs.
    """
    gpus = catalogs.gpus.reindex(keys["gpu"]).reset_index(drop=True)
    models = catalogs.models.reindex(keys["model"]).reset_index(drop=True)
    quants = catalogs.quants.reindex(keys["quant"]).reset_index(drop=True)
    kv_quants = catalogs.quants.reindex(keys["kv_quant"]).reset_index(drop=True)
    frame = keys.reset_index(drop=True).copy()
    frame["tp"] = frame["tp"].astype(np.int64)
    frame["engine"] = _engines(catalogs, assumptions, per_config, len(frame))
    _add_hardware(frame, gpus, quants, kv_quants)
    _add_model(frame, models, quants, kv_quants)
    _add_levers(frame, assumptions, per_config, quants["weight_only"].to_numpy(dtype=bool))
    add_efficiencies(frame, catalogs, assumptions, per_config)
    _add_memory(frame, catalogs, gpus, models, assumptions, per_config)
    prices = np.asarray(catalogs.price_of(frame["gpu"]), dtype=float)  # the one price rule (fleetplan.catalogs.prices)
    frame["usd_per_gpu_hour"] = _override(prices, "usd_per_gpu_hour", assumptions, per_config)
    frame["config_reason"] = _config_reasons(frame, gpus, models, kv_quants)
    return frame


def with_prefill_side(catalogs: Catalogs, frame: pd.DataFrame, assumptions: Assumptions, levers=()) -> pd.DataFrame:
    """``frame`` (with ``prefill_gpu``, ``prefill_tp``) plus its prefill replica's numeric constants,
    prefixed ``prefill.``, from a second ``config_frame`` of (prefill_gpu, model, quant, kv_quant,
    prefill_tp, same levers).

    Colocated configurations (``prefill_tp`` 0) stand in their own gpu and tp so every constant is
    finite; the kernel does not use them there. A prefill-side reason reads ``"prefill: <reason>"``
    where the configuration itself can run, and a split configuration is only as well calibrated
    as the less sure of its two replicas.
    """
    split = frame["prefill_tp"].to_numpy() > 0
    keys = frame[CONFIG_KEYS + list(levers) + ["engine"]].copy()
    keys["gpu"] = np.where(split, frame["prefill_gpu"], frame["gpu"])
    keys["tp"] = np.where(split, frame["prefill_tp"], frame["tp"])
    prefill = config_frame(catalogs, keys, assumptions, per_config=keys)
    own = frame["config_reason"].to_numpy(dtype=object)
    other = prefill["config_reason"].to_numpy(dtype=object)
    combined = pd.concat([frame, prefill.select_dtypes(include="number").add_prefix(PREFILL_PREFIX)], axis=1)
    combined["config_reason"] = np.where(split & (own == "") & (other != ""), "prefill: " + other, own)
    combined["calibration"] = np.where(split, least_sure(frame["calibration"], prefill["calibration"]),
                                       frame["calibration"].to_numpy(dtype=object))
    for column, values in error_band_pct(combined["calibration"]).items():
        combined[column] = values
    return combined


def _engines(catalogs: Catalogs, assumptions: Assumptions, per_config, n: int) -> np.ndarray:
    check_engine(catalogs.efficiency, assumptions.engine)
    engine = np.full(n, assumptions.engine or "", dtype=object)
    if per_config is not None and "engine" in per_config:  # per case (e.g. a measurement's engine)
        given = per_config["engine"].reset_index(drop=True).astype(object)
        named = given.notna() & ~given.astype(str).str.strip().isin(["", "*", "nan", "None"])
        engine = np.where(named.to_numpy(), given.astype(str).to_numpy(dtype=object), engine)
    return engine_ids(catalogs, engine)


def attention_precision(kv_precision: pd.Series, gpus: pd.DataFrame) -> np.ndarray:
    """Precision attention runs in: FP8 with an FP8 (or FP4) KV cache on GPUs with FP8, else BF16
    (FP16 where a GPU has no BF16 figure)."""
    fp8 = kv_precision.isin(["fp8", "fp4"]).to_numpy() & gpus["tflops_fp8"].notna().to_numpy()
    half = np.where(gpus["tflops_bf16"].notna().to_numpy(), "bf16", "fp16")
    return np.where(fp8, "fp8", half).astype(object)


def gemm_precision(quants: pd.DataFrame) -> np.ndarray:
    """The efficiency catalog's precision key of each quant's GEMMs: its compute precision, or
    ``w4a16`` / ``w8a16`` for weight-only formats that dequantize to 16-bit compute."""
    weight_only = quants["weight_only"].to_numpy(dtype=bool)
    narrow = quants["bytes_per_weight"].to_numpy(dtype=float) < 0.75
    key = np.where(narrow, WEIGHT_ONLY_PRECISIONS[0], WEIGHT_ONLY_PRECISIONS[1])
    return np.where(weight_only, key, quants["compute_precision"].to_numpy(dtype=object)).astype(object)


def _peak_tflops(gpus: pd.DataFrame, precision) -> np.ndarray:
    precision = pd.Series(np.asarray(precision, dtype=object))
    peak = np.full(len(gpus), np.nan)
    for name in pd.unique(precision.dropna()):
        column = f"tflops_{name}"
        if column in gpus:
            rows = (precision == name).to_numpy()
            peak[rows] = gpus.loc[rows, column].to_numpy(dtype=float)
    return peak


def _add_hardware(frame: pd.DataFrame, gpus: pd.DataFrame, quants: pd.DataFrame, kv_quants: pd.DataFrame) -> None:
    frame["precision"] = quants["compute_precision"].to_numpy(dtype=object)
    frame["gemm_precision"] = gemm_precision(quants)
    frame["attention_precision"] = attention_precision(kv_quants["compute_precision"], gpus)
    frame["peak_tflops"] = _peak_tflops(gpus, frame["precision"])
    frame["attention_tflops"] = _peak_tflops(gpus, frame["attention_precision"])
    frame["memory_gib"] = gpus["memory_gb"].to_numpy(dtype=float) * np.where(gpus["memory_unit"] == "GiB", 1.0,
                                                                             1e9 / memory.GIB_BYTES)
    frame["memory_gb"] = memory.capacity_gb(gpus["memory_gb"].to_numpy(dtype=float),
                                            (gpus["memory_unit"] == "GiB").to_numpy())
    for column in ("memory_bw_tb_s", "interconnect_gb_s", "gpus_per_node", "interconnect_domain_gpus",
                   "beyond_domain_gb_s"):
        frame[column] = gpus[column].to_numpy(dtype=float)


def _add_model(frame: pd.DataFrame, models: pd.DataFrame, quants: pd.DataFrame, kv_quants: pd.DataFrame) -> None:
    for column in ("params_total_b", "params_active_b", "n_layers", "hidden_size", "n_heads", "head_dim",
                   "n_experts", "n_experts_active", "max_context"):
        frame[column] = models[column].to_numpy(dtype=float)
    frame["bytes_per_weight"] = quants["bytes_per_weight"].to_numpy(dtype=float)
    frame["expert_params_b"] = operators.expert_params_b(frame["params_total_b"], frame["params_active_b"],
                                                         frame["n_experts"], frame["n_experts_active"])
    frame["dense_params_b"] = operators.dense_params_b(frame["params_total_b"], frame["n_experts"],
                                                       frame["expert_params_b"])
    is_mla = (models["attention"] == MLA).to_numpy()
    rank, rope = models["kv_lora_rank"].to_numpy(dtype=float), models["qk_rope_head_dim"].to_numpy(dtype=float)
    for phase, decode in (("decode", True), ("prefill", False)):
        frame[f"attention_flop_per_pair_{phase}"] = operators.attention_flop_per_pair(
            frame["n_heads"], frame["head_dim"], is_mla, rank, rope, decode)
    frame["sliding_layers"] = models["sliding_layers"].fillna(0).to_numpy(dtype=float)
    frame["full_layers"] = frame["n_layers"] - frame["sliding_layers"]
    frame["sliding_window"] = models["sliding_window"].fillna(np.inf).to_numpy(dtype=float)
    element = kv_quants["kv_bytes_per_element"].to_numpy(dtype=float)
    per_layer = np.where(is_mla, memory.kv_bytes_per_token_mla(1.0, rank, rope, element),
                         memory.kv_bytes_per_token(1.0, models["n_kv_heads"].to_numpy(dtype=float),
                                                   frame["head_dim"], element))
    shard = memory.kv_shard_fraction(models["n_kv_heads"].to_numpy(dtype=float), frame["tp"].to_numpy(dtype=float),
                                     is_mla)
    frame["kv_bytes_per_layer_token_model"] = per_layer
    frame["kv_bytes_per_layer_token"] = per_layer * shard


def _add_levers(frame: pd.DataFrame, assumptions: Assumptions, per_config, weight_only: np.ndarray) -> None:
    """Lever values per configuration: a per-configuration column wins over the call's scalar."""
    for name in LEVERS:
        frame[name] = _override(np.full(len(frame), float(getattr(assumptions, name))), name, None, per_config)
    frame["dequant_cost"] = np.where(weight_only, frame["dequant_overhead"], 0.0)
    frame["gpus"] = frame["tp"] * frame["pp"]
    frame["stage_fraction"] = levers.stage_fraction(frame["n_layers"], frame["pp"])  # layers on the busiest stage
    for name in ("network_gb_s", "pp_hop_latency_us", "activation_bytes"):
        frame[name] = float(getattr(assumptions, name))


def _add_memory(frame: pd.DataFrame, catalogs: Catalogs, gpus: pd.DataFrame, models: pd.DataFrame,
                assumptions: Assumptions, per_config) -> None:
    """Weights per GPU, the engine's KV budget and batch caps (one memory rule for every command)."""
    profile = engine_profiles(catalogs, frame["engine"].to_numpy(dtype=object), frame["memory_gib"])
    frame["weight_gb"] = memory.weight_gb(frame["params_total_b"], frame["bytes_per_weight"]) * (
        frame["stage_fraction"] / frame["tp"])
    for name in ("max_num_seqs", "max_batched_tokens", "memory_fraction"):
        frame[name] = _override(profile[name].to_numpy(dtype=float), name, assumptions, per_config)
    frame["chunked_prefill"] = profile["chunked_prefill"].to_numpy(dtype=float)
    frame["reserves_full_sequence"] = profile["reserves_full_sequence"].to_numpy(dtype=float)
    rule = pd.Series(profile["kv_memory_rule"]).map({r: i for i, r in enumerate(memory.KV_MEMORY_RULES)})
    workspace = memory.engine_workspace_gb(profile["workspace_gib"].to_numpy(dtype=float), frame["max_batched_tokens"],
                                           frame["hidden_size"], profile["activation_bytes_per_token_hidden"]
                                           .to_numpy(dtype=float), frame["tp"])
    reserve = _override(np.full(len(frame), np.nan), "reserve_fraction", assumptions, per_config)
    fixed = ~np.isnan(reserve)  # a reserve replaces the engine's rule: KV = (1 - reserve) * memory - weights
    rule = np.where(fixed, 1, rule.to_numpy(dtype=float))
    fraction = np.where(fixed, 1.0 - np.nan_to_num(reserve), frame["memory_fraction"])
    workspace = np.where(fixed, 0.0, workspace)
    frame["kv_budget_gb"] = memory.engine_kv_budget_gb(rule, frame["memory_gb"], frame["weight_gb"], workspace, fraction)
    frame["reserve_gb"] = frame["memory_gb"] - frame["weight_gb"] - frame["kv_budget_gb"]


def _override(values: np.ndarray, name: str, assumptions: Assumptions | None, per_config) -> np.ndarray:
    """``values`` replaced by the call's assumption ``name`` (if set) and per-row cells (if not NaN)."""
    values = np.asarray(values, dtype=float).copy()
    if assumptions is not None and getattr(assumptions, name, None) is not None:
        values[:] = float(getattr(assumptions, name))
    if per_config is not None and name in per_config:
        cells = pd.to_numeric(per_config[name], errors="coerce").to_numpy(dtype=float)
        values = np.where(np.isnan(cells), values, cells)
    return values


def _config_reasons(frame, gpus, models, kv_quants) -> np.ndarray:
    """One reason string per configuration ('' when it can run), first problem wins."""
    tp = frame["tp"].to_numpy()
    heads = frame["n_heads"].to_numpy()
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
        (frame["kv_budget_gb"].to_numpy() <= 0,
         "weights " + frame["weight_gb"].round(1).astype(str) + " GB per GPU leave no KV cache in "
         + frame["memory_gb"].round(1).astype(str) + " GB under the " + frame["engine"].astype(str)
         + " memory rule"),
    ]
    reason = np.full(len(frame), "", dtype=object)
    for failed, message in reversed(checks):
        reason = np.where(failed, message.to_numpy(dtype=object), reason)
    return reason
