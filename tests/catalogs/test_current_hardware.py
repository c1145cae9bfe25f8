"""Known values of the GPUs and models procurement compares today, as their vendors publish them.

GPU figures are per GPU from the vendors' datasheets (dense peaks: sparsity figures halved);
memory is in the unit the vendor means (GiB for HBM parts). Model figures are the numbers of each
model's Hugging Face ``config.json``.
"""

from __future__ import annotations

import pytest

GPU_COLUMNS = ("memory_gb", "memory_unit", "memory_bw_tb_s", "tflops_fp8", "tflops_fp4", "architecture")
#: id -> (memory [unit], unit, bandwidth [TB/s], dense FP8 [TFLOPS], dense FP4 [TFLOPS] or None, architecture)
GPUS = {
    "b200": (180, "GiB", 7.7, 4500, 9000, "blackwell"),      # HGX B200: 1.44 TB and 62 TB/s over 8 GPUs
    "gb200": (186, "GiB", 8.0, 5000, 10000, "blackwell"),    # GB200 NVL72: 13.4 TB and 576 TB/s over 72 GPUs
    "h200": (141, "GiB", 4.8, 1979, None, "hopper"),
    "gh200": (96, "GiB", 4.0, 1979, None, "hopper"),          # the HBM3 part
    "mi300x": (192, "GiB", 5.3, 2614.9, None, "cdna3"),
    "mi325x": (256, "GiB", 6.0, 2614.9, None, "cdna3"),
    "mi355x": (288, "GiB", 8.0, 5033.2, 10066.3, "cdna4"),
}

MODEL_COLUMNS = ("attention", "n_layers", "hidden_size", "n_heads", "n_kv_heads", "n_experts", "n_experts_active",
                 "kv_lora_rank", "qk_rope_head_dim", "sliding_window", "sliding_layers", "vocab_size")
MODELS = {
    "deepseek-v3": ("mla", 61, 7168, 128, 128, 256, 8, 512, 64, None, None, 129280),
    "deepseek-r1": ("mla", 61, 7168, 128, 128, 256, 8, 512, 64, None, None, 129280),
    "gpt-oss-20b": ("gqa", 24, 2880, 64, 8, 32, 4, None, None, 128, 12, 201088),    # every other layer slides
    "gpt-oss-120b": ("gqa", 36, 2880, 64, 8, 128, 4, None, None, 128, 18, 201088),
    "qwen3-30b-a3b": ("gqa", 48, 2048, 32, 4, 128, 8, None, None, None, None, 151936),
    "qwen3-235b-a22b": ("gqa", 94, 4096, 64, 4, 128, 8, None, None, None, None, 151936),
}


def _same(actual, expected) -> bool:
    if expected is None:
        return actual != actual or actual is None  # NaN: not applicable
    return actual == pytest.approx(expected) if isinstance(expected, float | int) else actual == expected


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_gpu_rows_match_the_datasheets(shipped, gpu):
    row = shipped.gpus.loc[gpu]
    for column, expected in zip(GPU_COLUMNS, GPUS[gpu], strict=True):
        assert _same(row[column], expected), column
    assert row["source"] and row["as_of"]


@pytest.mark.parametrize("model", sorted(MODELS))
def test_model_rows_match_their_configs(shipped, model):
    row = shipped.models.loc[model]
    for column, expected in zip(MODEL_COLUMNS, MODELS[model], strict=True):
        assert _same(row[column], expected), column


def test_mxfp4_is_four_bits_plus_a_scale_per_32_weights(shipped):
    mxfp4 = shipped.quants.loc["mxfp4"]
    assert mxfp4["bytes_per_weight"] == (4 + 8 / 32) / 8  # E2M1 values, one E8M0 scale per block of 32
    assert mxfp4["weight_only"] and mxfp4["compute_precision"] == "bf16"  # dequantized to 16 bits
