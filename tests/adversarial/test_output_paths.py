"""Output paths checked before any long work: an existing folder, a path under a file, a missing
folder, an unwritable folder or a wrong suffix is one line, exit 2 (1 for the environment), and
nothing is created."""

from __future__ import annotations

import pytest

SCENARIO = "scenario.yaml"


def commands(sandbox) -> dict:
    """Every command that writes, as a function of its output path."""
    sandbox.scenario(SCENARIO)
    cases = sandbox.write("cases.csv", "gpu,model,quant,tp,input_len,output_len,batch\n"
                                       "h100-sxm,llama-3.1-8b,bf16,1,512,128,8\n")
    base = sandbox.scenario("base.yaml")
    grid = sandbox.write("grid.yaml", f"base: {base.name}\naxes:\n  demand_multiplier: [1.0]\n")
    measured = sandbox.write("measured.csv", "gpu,tp,model,precision_weights,input_len,output_len,scenario,"
                                             "metric,value\nH100 SXM,1,Llama-3.1-8B,FP8,128,128,offline,"
                                             "output_tok_s,20000\n")
    return {
        "plan": lambda out: ["plan", SCENARIO, "-q", "-o", out],
        "sweep": lambda out: ["sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--batch", "1-8", "-o", out],
        "estimate": lambda out: ["estimate", "--cases", cases, "-o", out],
        "compare": lambda out: ["compare", "--model", "llama-3.1-8b", "--gpus", "l40s", "--demand-req-s", "1",
                                "-o", out],
        "whatif": lambda out: ["whatif", grid, "-o", out, "--workers", "1", "--no-base-plan"],
        "validate": lambda out: ["validate", measured, "-o", out],
        "calibrate": lambda out: ["calibrate", measured, "-o", out],
        "schema": lambda out: ["schema", "-o", out],
    }


SUFFIX = {"plan": ".json", "sweep": ".csv", "estimate": ".csv", "compare": ".csv", "whatif": ".csv",
          "validate": ".csv", "calibrate": ".csv", "schema": ".json"}
COMMANDS = sorted(SUFFIX)


@pytest.mark.parametrize("command", COMMANDS)
def test_an_existing_folder_is_refused(sandbox, command):
    build = commands(sandbox)[command]
    folder = sandbox.path("taken" + SUFFIX[command])
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    sandbox.fails(build(folder), 2, r"is a folder|already exists")
    assert (folder / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_path_under_a_file_is_refused(sandbox, command):
    build = commands(sandbox)[command]
    sandbox.write("plain.txt", "x")
    sandbox.fails(build(sandbox.path("plain.txt") / ("out" + SUFFIX[command])), 2, r"is a file|not a folder")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_missing_folder_is_refused_not_created(sandbox, command):
    build = commands(sandbox)[command]
    sandbox.fails(build(sandbox.path("missing/deep") / ("out" + SUFFIX[command])), 2, r"does not exist")
    assert not sandbox.path("missing").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unwritable_folder_is_an_environment_error(sandbox, command):
    build = commands(sandbox)[command]
    sandbox.fails(build("/proc/fleetplan-test" + SUFFIX[command]), 1, r"cannot write|not writable|permission")


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "calibrate"])
def test_a_wrong_suffix_is_refused(sandbox, command):
    build = commands(sandbox)[command]
    sandbox.fails(build("out.docx"), 2, r"must end with|\.docx")


def test_plan_checks_its_output_before_solving(sandbox, monkeypatch):
    import fleetplan.cli.plan as plan_cli

    def never(*args, **kwargs):
        raise AssertionError("solved before checking the output path")

    monkeypatch.setattr(plan_cli, "plan_scenario", never)
    commands(sandbox)
    sandbox.write("plain.txt", "x")
    sandbox.fails(["plan", SCENARIO, "-q", "-o", sandbox.path("plain.txt") / "p.json"], 2, r"is a file")
