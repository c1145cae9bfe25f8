"""Published measurements: reading them, and which of them the model predicts.

The measurement format is the one of ``fleetplan/sweeps/data/measured.csv`` (see
``measured.README.md`` beside it): one published figure per row with its source. Names as the
sources wrote them (``H100 80GB HBM3 (SXM)``, ``Llama-3.1-8B``, ``FP8``, ``TensorRT-LLM (PyTorch
backend)``) are mapped to catalog ids through the catalogs' ``aliases`` columns
(``Catalogs.alias_map``). The ``settings`` column carries engine settings the source states
(``memory_fraction=0.95``), which override the engine profile for that row only.

Each predictable row belongs to one regime (``REGIMES``): ``offline`` (maximum-load throughput
under continuous batching), ``static`` (throughput of a fixed batch processed together),
``e2e`` (end-to-end latency of such a batch), ``ttft`` (time to first token of one prompt) and
``server`` (serving metrics at a fixed request rate). Rows of layouts the model does not
represent (attention data parallel with expert parallelism, ``DEP``) are kept but not predicted.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.catalogs.conventions import RELEASE_MARK
from fleetplan.catalogs.input_files import read_csv_table
from fleetplan.catalogs.schema import WILDCARD
from fleetplan.errors import InvalidValueError, did_you_mean
from fleetplan.sweeps.inputs import OPTIONAL_NUMBERS, catalog_or_default, check_number_column

DEFAULT_RUN_REQUESTS = 1000  # vLLM's benchmark default num_prompts, for runs that do not say
SERVER_METRICS = ("tpot_ms", "ttft_ms", "req_s", "output_tok_s", "total_tok_s")
REGIMES = ("offline", "static", "e2e", "ttft", "server")
REQUIRED = ("gpu", "tp", "model", "precision_weights", "input_len", "output_len", "scenario", "metric", "value")
SETTINGS = {"memory_fraction": float, "max_num_seqs": int, "max_batched_tokens": int}


def shipped_measurements_path() -> Path:
    """The published measurements that ship with fleetplan."""
    return Path(str(resources.files("fleetplan.sweeps") / "data" / "measured.csv"))


def _canonical(name: str, aliases: dict[str, str]) -> str:
    key = str(name).strip().lower()
    return aliases.get(key, re.sub(r"[^a-z0-9.]+", "-", key).strip("-"))


def load_measurements(path: str | Path | None = None, catalogs: Catalogs | None = None) -> pd.DataFrame:
    """Measurements with catalog ids (gpu, model, quant, kv_quant, engine_id), the numeric ``qps``,
    ``static_batch`` and ``n_requests``, the stated settings as columns, and ``regime``."""
    catalogs = catalog_or_default(catalogs)
    path = Path(path) if path is not None else shipped_measurements_path()
    if not path.exists():
        message = f"measurements file {path} does not exist"
        raise InvalidValueError(message)
    frame = read_csv_table(path, "measurements file")
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        message = f"{path.name}: missing column {missing[0]} (required: {', '.join(REQUIRED)})"
        raise InvalidValueError(message)
    _check_numbers(frame, path.name)
    return with_ids(frame, catalogs)


#: column -> (lowest, lowest allowed, highest, whole number, required): a measurement's numbers.
NUMBERS = {"tp": (1, True, 1024, True, False), "n_gpus": (1, True, 100_000, True, False),
           "input_len": (1, True, 100_000_000, True, True),
           "output_len": (1, True, 10_000_000, True, True), "value": (0, False, 1e12, False, True)}


def _check_numbers(frame: pd.DataFrame, label: str) -> None:
    """Each number column holds finite numbers within its range (``NUMBERS``), or is blank where
    it may be; the first bad cell is named by its spreadsheet row (the header is row 1)."""
    present = [column for column in NUMBERS if column in frame]
    checked = frame[present].copy()  # the rows are read as written; only checked here

    def row_name(row: int) -> str:
        return f"{label} row {row + 2}"

    for column in present:
        low, inclusive, high, whole, required = NUMBERS[column]
        check_number_column(checked, column, low, inclusive, high, integer=whole,
                            required=required, row_name=row_name)
    stated = _stated_numbers(frame, row_name)
    for column in stated:
        low, inclusive, high = _STATED_RANGES[column.split(", ")[1]]
        check_number_column(stated, column, low, inclusive, high, required=False,
                            integer=column.endswith(("batch", "seqs", "tokens")), row_name=row_name)


#: A number stated in text (``settings`` or ``concurrency_or_batch``): (lowest, lowest allowed,
#: highest); the settings' ranges are an estimate's.
_STATED_RANGES = {**{name: OPTIONAL_NUMBERS[name] for name in SETTINGS},
                  "QPS": (0, False, 1e7), "static batch": (1, True, 10_000_000)}


def _stated_numbers(frame: pd.DataFrame, row_name) -> pd.DataFrame:
    """The numbers ``settings`` (``name=value;...``) and ``concurrency_or_batch`` (``request rate
    QPS=8``, ``static batch 64``) state, one column per name (``settings, memory_fraction``),
    blank where a row states none; a setting of no known name, or one without a value, is
    refused. ``QPS=INF`` (an infinite rate) is left out."""
    settings = frame["settings"] if "settings" in frame else pd.Series("", index=frame.index)
    pairs = settings.fillna("").astype(str).reset_index(drop=True).str.split(";").explode()
    pairs = pairs.str.strip()[lambda p: p != ""]
    names = pairs.str.split("=", n=1).str[0].str.strip()
    values = pairs.str.split("=", n=1).str[1].str.strip()
    bad = ~names.isin(list(SETTINGS)) | values.isna() | (values == "")
    if bad.any():
        row = int(bad[bad].index[0])
        name = str(names[bad].iloc[0])
        reason = (f"{pairs[bad].iloc[0]!r} must be name=value" if name in SETTINGS
                  else str(did_you_mean(name, SETTINGS, kind="setting")))
        message = f"{row_name(row)}, column settings: {reason}"
        raise InvalidValueError(message)
    stated = pd.DataFrame(index=range(len(frame)))
    for name in SETTINGS:
        mine = values[names == name]
        stated[f"settings, {name}"] = mine[~mine.index.duplicated()].reindex(stated.index)
    load = frame.get("concurrency_or_batch", pd.Series("", index=frame.index))
    load = load.fillna("").astype(str).reset_index(drop=True)
    patterns = {"QPS": r"QPS\s*=?\s*(\S*)", "static batch": r"(?:static batch|^batch)\s*(\S*)"}
    for name, pattern in patterns.items():
        found = load.str.extract(pattern, flags=re.IGNORECASE)[0]
        if (found == "").any():
            row = int(np.flatnonzero(found == "")[0])
            message = (f"{row_name(row)}, column concurrency_or_batch: {load[row]!r} states no "
                       f"number after {name}")
            raise InvalidValueError(message)
        stated[f"concurrency_or_batch, {name}"] = found.where(found.str.upper() != "INF")
    return stated


def with_ids(frame: pd.DataFrame, catalogs: Catalogs) -> pd.DataFrame:
    """``frame`` (measurement rows as the sources wrote them) with catalog ids and derived columns."""
    frame = frame.copy()
    gpu_names, quant_names = catalogs.alias_map("gpu"), catalogs.alias_map("quant")
    frame["gpu_name"], frame["model_name"] = frame["gpu"], frame["model"]
    frame["gpu"] = frame["gpu_name"].map(lambda n: _canonical(n, gpu_names))
    frame["model"] = frame["model_name"].map(lambda n: _canonical(n, {}))
    frame["quant"] = frame["precision_weights"].map(lambda n: _canonical(n, quant_names))
    kv = frame["precision_kv"] if "precision_kv" in frame else pd.Series(np.nan, index=frame.index)
    default_kv = catalogs.quants["default_kv_quant"].reindex(frame["quant"]).to_numpy(dtype=object)
    frame["kv_quant"] = np.where(kv.isna().to_numpy() | (kv.astype(str).str.strip() == "").to_numpy(), default_kv,
                                 kv.map(lambda n: _canonical(n, quant_names)).to_numpy(dtype=object))
    frame["n_gpus"] = pd.to_numeric(frame.get("n_gpus", frame["tp"]), errors="coerce")
    frame["tp"] = pd.to_numeric(frame["tp"], errors="coerce").fillna(frame["n_gpus"]).fillna(1).astype(int)
    frame["n_gpus"] = frame["n_gpus"].fillna(frame["tp"])
    frame["engine_id"] = engine_ids(frame, catalogs)
    frame["engine_release"] = release_ids(frame["engine_id"].to_numpy(dtype=object),
                                          frame.get("engine_version", pd.Series("", index=frame.index)))
    load = frame.get("concurrency_or_batch", pd.Series("", index=frame.index)).astype(str)
    frame["qps"] = _qps(load)
    frame["static_batch"] = pd.to_numeric(load.str.extract(r"(?:static batch|^batch)\s*(\d+)", flags=re.IGNORECASE)[0],
                                          errors="coerce")
    if "n_requests" not in frame:
        counted = frame.get("dataset", pd.Series("", index=frame.index)).astype(str).str.extract(r"(\d+) requests")[0]
        frame["n_requests"] = pd.to_numeric(counted, errors="coerce").fillna(DEFAULT_RUN_REQUESTS)
    _add_settings(frame)
    frame["regime"] = regimes(frame, catalogs)
    return frame


def engine_ids(frame: pd.DataFrame, catalogs: Catalogs | None = None) -> pd.Series:
    """Catalog ids of the rows' serving engines (``TensorRT-LLM (PyTorch backend)`` -> ``tensorrt-llm``);
    ``*`` where unnamed or unknown to the engines catalog."""
    catalogs = catalog_or_default(catalogs)
    names = frame["engine"] if "engine" in frame else pd.Series("", index=frame.index)
    aliases = catalogs.alias_map("engine")
    ids = names.fillna("").astype(str).map(lambda n: _canonical(n, aliases))
    return ids.where(ids.isin(list(catalogs.engines.index)), "*")


def release_ids(engines: np.ndarray, versions: pd.Series) -> np.ndarray:
    """Each row's engine with its release, ``engine@major.minor``, or the plain engine id for its
    newest release among the rows (the one its fitted efficiencies describe; 1.x releases count
    as one) and where no version is stated.

    >>> release_ids(np.array(["tensorrt-llm", "tensorrt-llm", "vllm"]), pd.Series(["0.9.0", "1.0", "0.6.7"])).tolist()
    ['tensorrt-llm@0.9', 'tensorrt-llm', 'vllm']
    """
    found = versions.fillna("").astype(str).str.extract(r"(\d+)\.(\d+)")
    major = pd.to_numeric(found[0], errors="coerce").fillna(-1).to_numpy()
    minor = pd.to_numeric(found[1], errors="coerce").fillna(-1).to_numpy()
    minor = np.where(major >= 1, 0, minor)  # 1.x: one release line
    order = major * 1000 + minor
    newest = pd.Series(order).groupby(pd.Series(engines)).transform("max").to_numpy()
    labelled = pd.Series(engines, dtype=object).astype(str) + RELEASE_MARK + pd.Series(major.astype(int)).astype(str) \
        + "." + pd.Series(minor.astype(int)).astype(str)
    plain = (order == newest) | (major < 0) | (np.asarray(engines, dtype=object) == WILDCARD)
    return np.where(plain, np.asarray(engines, dtype=object), labelled.to_numpy(dtype=object)).astype(object)


def _qps(text: pd.Series) -> np.ndarray:
    found = text.astype(str).str.extract(r"QPS\s*=?\s*([0-9.]+|INF)", flags=re.IGNORECASE)[0]
    return pd.to_numeric(found.str.upper().replace("INF", "inf"), errors="coerce").to_numpy(dtype=float)


def _add_settings(frame: pd.DataFrame) -> None:
    """Columns for the engine settings a row's source states (``settings``: ``name=value;...``)."""
    text = frame.get("settings", pd.Series("", index=frame.index)).fillna("").astype(str)
    for name in SETTINGS:
        found = text.str.extract(rf"(?:^|;)\s*{name}\s*=\s*([0-9.]+)")[0]
        frame[name] = pd.to_numeric(found, errors="coerce")


def regimes(frame: pd.DataFrame, catalogs: Catalogs) -> np.ndarray:
    """The regime each row belongs to, '' where the model does not predict it."""
    scenario, metric = frame["scenario"].astype(str), frame["metric"].astype(str)
    static = frame["static_batch"].notna()
    known = (frame["gpu"].isin(list(catalogs.gpus.index)) & frame["model"].isin(list(catalogs.models.index))
             & frame["quant"].isin(list(catalogs.quants.index)) & frame["kv_quant"].isin(list(catalogs.quants.index)))
    layout = frame.get("parallelism", pd.Series("", index=frame.index)).fillna("").astype(str)
    tensor_parallel = ~layout.str.upper().str.contains("DEP|EP") & frame["tp"].ge(1)
    choices = [
        (scenario == "offline") & (metric == "output_tok_s") & ~static,
        (scenario == "offline") & (metric == "output_tok_s") & static,
        (metric == "e2e_ms") & static,
        (scenario == "latency") & (metric == "ttft_ms") & static,
        (scenario == "server") & metric.isin(SERVER_METRICS) & frame["qps"].notna(),
    ]
    regime = np.select([c.to_numpy() for c in choices], list(REGIMES), "")
    return np.where((known & tensor_parallel).to_numpy(), regime, "").astype(object)


def predictable(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows the model predicts (a regime of ``REGIMES``)."""
    return rows[rows["regime"] != ""].reset_index(drop=True)


def ape_summary(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Rows, median and 90th-percentile absolute percentage error of ``predicted`` vs ``value``, and
    the median signed error [%] (+ = over-predicted)."""
    signed = (frame["predicted"] / frame["value"] - 1.0) * 100.0
    ape = signed.abs()
    keys = [frame[b] for b in by] if by else np.zeros(len(ape))
    grouped = ape.groupby(keys)
    return pd.DataFrame({"rows": grouped.size(), "median_ape_pct": grouped.median(),
                         "p90_ape_pct": grouped.quantile(0.9), "median_signed_pct": signed.groupby(keys).median()})


#: id column -> (catalog kind, the column holding the name as the source wrote it)
NAMED_COLUMNS = {"gpu": ("gpu", "gpu_name"), "model": ("model", "model_name"),
                 "quant": ("quant", "precision_weights"), "kv_quant": ("quant", "precision_kv")}


def unknown_names(frame: pd.DataFrame, catalogs: Catalogs) -> list[str]:
    """One line per name of ``frame`` (measurements with ids) that no catalog holds, with its row
    count and the closest ids: such rows are kept but not predicted."""
    notes = []
    for column, (kind, written) in NAMED_COLUMNS.items():
        known = catalogs.table(kind).index
        unknown = frame[~frame[column].isin(known)]
        if column == "kv_quant":  # a row of unknown weights has no default KV precision either
            unknown = unknown[unknown["quant"].isin(known)]
        names = unknown[written] if written in unknown else unknown[column]
        for name, count in names.astype(str).value_counts(sort=False).sort_index().items():
            reason = str(did_you_mean(name, known, kind=kind)).split(" (valid:")[0]
            notes.append(f"{count} row{'s' * (count != 1)} not predicted: {reason}")
    return notes
