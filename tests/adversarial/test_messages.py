"""Messages people can act on: every id gets "did you mean" in every file type, values are shown
as people write them, and rounding never contradicts the comparison it reports."""

from __future__ import annotations

import re

import pytest


@pytest.mark.parametrize(("args", "pattern"), [
    (["estimate", "--gpu", "h100", "--model", "llama-3.1-8b", "--batch", "1"], r"unknown gpu 'h100'; did you mean"),
    (["estimate", "--gpu", "h100-sxm", "--model", "llama3-8b", "--batch", "1"], r"unknown model .*did you mean"),
    (["estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--quant", "fp9", "--batch", "1"],
     r"unknown quant 'fp9'; did you mean"),
    (["estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--kv-quant", "fp7", "--batch", "1"],
     r"unknown quant 'fp7'; did you mean"),
    (["sweep", "--gpu", "l4s", "--model", "llama-3.1-8b"], r"unknown gpu 'l4s'; did you mean"),
    (["compare", "--model", "llama-3.1-8b", "--gpus", "mi300", "--demand-req-s", "1"],
     r"unknown gpu 'mi300'; did you mean"),
    (["catalog", "show", "gpu-s"], r"unknown catalog 'gpu-s'; did you mean"),
    (["catalog", "show", "gpus", "--columns", "memroy_gb"], r"unknown column 'memroy_gb'; did you mean"),
])
def test_unknown_names_on_the_command_line(sandbox, args, pattern):
    sandbox.fails(args, 2, pattern)


@pytest.mark.parametrize(("args", "pattern"), [
    (["estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--tp", "abc"],
     r"^error: Invalid value for '--tp': .*integer \(see 'fleetplan estimate --help'\)$"),
    (["estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--bogus", "1"],
     r"No such option: --bogus .*\(see 'fleetplan estimate --help'\)$"),
    (["compare", "--model", "llama-3.1-8b", "--demand-req-s", "1"], r"Missing option '--gpus' \(see"),
    (["plann"], r"No such command 'plann'\. Did you mean 'plan'\? \(see 'fleetplan --help'\)$"),
    (["catalog", "shwo"], r"Did you mean 'show'\? \(see 'fleetplan catalog --help'\)$"),
])
def test_the_parsers_own_errors_are_one_line_too(sandbox, args, pattern):
    """Bad, missing or unknown options and commands: one line, not the parser's usage block."""
    sandbox.fails(args, 2, pattern)


@pytest.mark.parametrize(("args", "pattern"), [
    (["compare", "--model", "llama-3.1-8b", "--gpus", ",", "--demand-req-s", "1"],
     r"--gpus must name at least one id, got ','"),
    (["catalog", "show", "prices", "--gpu", ""], r"--gpu must name at least one id, got ''"),
    (["catalog", "gpus", "--gpu", " , "], r"--gpu must name at least one id, got ' , '"),
])
def test_an_id_list_with_no_ids_is_refused(sandbox, args, pattern):
    sandbox.fails(args, 2, pattern)


def workload(field, value):
    def edit(data):
        data["workloads"][0][field] = value
    return edit


@pytest.mark.parametrize(("edit", "pattern"), [
    (workload("model", "llama-3-8b"), r"workloads\[0\]\.model: unknown model .*did you mean"),
    (workload("quants", ["bf16", "fp88"]), r"workloads\[0\]\.quants: unknown quant 'fp88'; did you mean"),
    (lambda d: d["fleet"].update(gpus=["l40"]), r"fleet\.gpus\[0\]\.id: unknown gpu 'l40'; did you mean"),
    (lambda d: d["fleet"].update(engine="trtllm"),
     r"fleet\.engine: unknown engine.*'trtllm'; did you mean 'tensorrt-llm'"),
    (lambda d: d["fleet"].update(pricing=["ondemand"]), r"fleet\.pricing\[0\].*on_demand"),
    (lambda d: d["fleet"].update(gpu=["l40s"]), r"fleet\.gpu: unknown field; did you mean 'gpus'"),
])
def test_unknown_names_in_a_scenario(sandbox, edit, pattern):
    path = sandbox.scenario(edit=edit)  # named with its file, as the file's own checks are
    sandbox.fails(["plan", path, "-q", "-o", "plan.json"], 2, re.escape(f"{path}: ") + pattern)


ENGINE_ROWS = ("id,name,version,kv_memory_rule,memory_fraction,workspace_gib,activation_bytes_per_token_hidden,"
               "max_num_seqs,max_batched_tokens,chunked_prefill,reserves_full_sequence,source,as_of\n"
               "lmdeploy,LMDeploy,0.9,fraction_of_free,0.8,1.0,24,256,8192,true,false,our profile,2026-11-01\n")
EFFICIENCY_ROWS = ("engine,gpu,operator,precision,memory_efficiency,n_points,source,as_of\n"
                   "lmdeploy,*,gemm,*,0.7,12,our fit,2026-11-01\n")


def test_unknown_engine_gets_did_you_mean_among_the_catalog_engines(sandbox):
    """A user's calibrated engine is offered next to the shipped engines."""
    engine = sandbox.write("engines.csv", ENGINE_ROWS)
    rows = sandbox.write("efficiency.csv", EFFICIENCY_ROWS)
    sandbox.fails(["estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--engine", "lmdeplo", "--batch",
                   "1", "--catalog", engine, "--catalog", rows], 2, r"unknown engine.*'lmdeplo'; did you mean 'lmdeploy'")


def test_unknown_gpu_in_cases_file(sandbox):
    cases = sandbox.write("cases.csv", "gpu,model,quant,tp,input_len,output_len,batch\n"
                                       "h100-sx,llama-3.1-8b,bf16,1,512,128,8\n")
    sandbox.fails(["estimate", "--cases", cases], 2,
                  r"cases.csv row 2, column gpu: unknown gpu 'h100-sx'; did you mean")


def test_a_bad_case_names_its_files_spreadsheet_row(sandbox):
    cases = sandbox.write("cases.csv", "gpu,model,quant,kv_quant,tp,input_len,output_len,batch,"
                                       "tpot_slo_ms\n"
                                       "h100-sxm,llama-3.1-8b,bf16,,1,512,128,8,\n"
                                       "h100-sxm,llama-3.1-8b,bf16,fp9,1,512,128,8,\n"
                                       "h100-sxm,llama-3.1-8b,bf16,,1,512,128,8,30\n")
    sandbox.fails(["estimate", "--cases", cases], 2,
                  r"cases.csv row 3, column kv_quant: unknown quant 'fp9'; did you mean 'fp8'")
    fixed = sandbox.write("fixed.csv", cases.read_text(encoding="utf-8").replace("fp9", ""))
    sandbox.fails(["estimate", "--cases", fixed], 2, r"fixed.csv row 4: give one of batch, "
                  r"tpot_slo_ms/ttft_slo_ms, rate_req_s or concurrency, not batch and an SLO")


def test_unknown_gpu_in_a_catalog_override(sandbox):
    prices = sandbox.write("prices.csv", "gpu,provider,region,pricing_type,usd_per_gpu_hour,instance,includes_host,"
                                         "source,as_of\nh10,me,eu,on_demand,1.0,x,false,quote,2026-11-01\n")
    sandbox.fails(["catalog", "check", prices], 2, r"column gpu: unknown gpu 'h10'; did you mean 'h100")


def test_unknown_whatif_axis_gets_did_you_mean(sandbox):
    base = sandbox.scenario("base.yaml")
    grid = sandbox.write("grid.yaml", f"base: {base.name}\naxes:\n  demand_multiplyer: [1.0]\n")
    sandbox.fails(["whatif", grid, "-o", "grid.csv", "--workers", "1"], 2,
                  r"demand_multiplyer.*did you mean 'demand_multiplier'")


def test_unknown_whatif_gpu_in_an_axis(sandbox):
    base = sandbox.scenario("base.yaml")
    grid = sandbox.write("grid.yaml", f"base: {base.name}\naxes:\n  max_gpus: {{l4s: [4]}}\n")
    sandbox.fails(["whatif", grid, "-o", "grid.csv", "--workers", "1"], 2,
                  re.escape(f"{grid}: axes.max_gpus: ") + r".*'l4s'.*did you mean 'l40s'")


def test_an_unknown_gpu_of_a_grids_base_names_the_base_file(sandbox):
    base = sandbox.scenario("base.yaml", edit=lambda d: d["fleet"].update(gpus=["l40"]))
    grid = sandbox.write("grid.yaml", f"base: {base.name}\naxes:\n  demand_multiplier: [1.0]\n")
    sandbox.fails(["whatif", grid, "-o", "grid.csv", "--workers", "1"], 2,
                  re.escape(f"{base}: fleet.gpus[0].id: unknown gpu 'l40'; did you mean"))


def test_numbers_are_shown_as_written(sandbox):
    path = sandbox.scenario(edit=workload("redundancy_k", -1))
    result = sandbox.fails(["plan", path, "-q", "-o", "plan.json"], 2, r"redundancy_k: must be >= 0, got -1$")
    assert "np." not in result.err


def test_rounding_never_contradicts_the_comparison(sandbox):
    result = sandbox.run("estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--tpot-slo-ms", "5.01",
                         "--json")
    text = result.out + result.err
    assert "5.01 ms is below the best achievable 5 ms" not in text
    assert "below the best achievable 5.0" not in text or "5.01" not in text


def test_unknown_gpu_in_an_allowed_set(sandbox):
    base = sandbox.scenario("base.yaml")
    grid = sandbox.write("grid.yaml", f"base: {base.name}\naxes:\n  allowed_gpus: {{nv: [l40s, h100-sx]}}\n")
    sandbox.fails(["whatif", grid, "-o", "grid.csv", "--workers", "1"], 2,
                  re.escape(f"{grid}: ") + r"axes\.allowed_gpus\.nv: unknown gpu 'h100-sx'; "
                  r"did you mean 'h100-sxm'")


def test_a_file_named_like_a_field_is_named_once(sandbox, monkeypatch):
    # a current-fleet CSV called fleet.csv, a scenario called fleet.yaml, given by relative
    # names: each error names its own file once, and a file's name is never taken for a field
    monkeypatch.chdir(sandbox.folder)
    sandbox.scenario("fleet.yaml", edit=lambda d: d["fleet"].update(gpus=["l40"]))
    sandbox.fails(["plan", "fleet.yaml", "-q", "-o", "plan.json"], 2,
                  "^" + re.escape("error: fleet.yaml: fleet.gpus[0].id: unknown gpu 'l40'"))
    sandbox.write("fleet.csv", "gpu,pricing_type,count\nh10,owned,2\n")
    sandbox.scenario("s.yaml")
    sandbox.fails(["plan", "s.yaml", "--current", "fleet.csv", "-q", "-o", "plan.json"], 2,
                  "^" + re.escape("error: fleet.csv: line 2: gpu: unknown gpu 'h10'"))
    sandbox.scenario("base.yaml", edit=lambda d: d["fleet"].update(gpus=["l40"]))
    sandbox.write("axes.yaml", "base: base.yaml\naxes:\n  demand_multiplier: [1.0]\n")
    sandbox.fails(["whatif", "axes.yaml", "-o", "grid.csv", "--workers", "1"], 2,
                  "^" + re.escape("error: base.yaml: fleet.gpus[0].id: unknown gpu 'l40'"))
