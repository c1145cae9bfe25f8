"""Every file fleetplan reads, given binary, non-UTF-8, empty, folder or missing input: one line,
exit 2, nothing written."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.adversarial.conftest import tiny_scenario

BINARY = b"\x00\x01\x02PK\x03\x04\xff\xfe\x00garbage\x89PNG"
LATIN1 = "gpu,model,caf\xe9\n".encode("latin-1")
CONTENTS = {
    "binary": (BINARY, r"not (UTF-8 )?text|binary|NUL|not a readable|not valid"),
    "latin1": (LATIN1, r"not UTF-8|not valid UTF-8|not a readable|encoding"),
    "empty": (b"", r"empty|no columns|not a readable|must be a mapping|no rows|holds nothing"),
}


def _scenario_with(sandbox, key, value):
    def edit(data):
        if key == "hourly_profile":
            data["workloads"][0]["hourly_profile"] = value
        else:
            data[key] = value
    return sandbox.scenario(edit=edit)


# (name, suffix of the hostile file, how the command reads it)
ENTRY_POINTS = {
    "plan-yaml": (".yaml", lambda s, p: ["plan", p, "-q", "-o", "plan.json"]),
    "plan-toml": (".toml", lambda s, p: ["plan", p, "-q", "-o", "plan.json"]),
    "catalog-check-csv": (".csv", lambda s, p: ["catalog", "check", p]),
    "catalog-check-xlsx": (".xlsx", lambda s, p: ["catalog", "check", p]),
    "estimate-catalog": (".csv", lambda s, p: ["estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b",
                                                "--batch", "8", "--catalog", p]),
    "sweep-catalog": (".csv", lambda s, p: ["sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b",
                                             "--batch", "8", "--catalog", p]),
    "estimate-cases": (".csv", lambda s, p: ["estimate", "--cases", p, "-o", "out.csv"]),
    "validate-csv": (".csv", lambda s, p: ["validate", p]),
    "calibrate-csv": (".csv", lambda s, p: ["calibrate", p, "-o", "factors.csv"]),
    "validate-json": (".json", lambda s, p: ["validate", p, "--gpu", "h100-sxm", "--tp", "1"]),
    "export-plan-json": (".json", lambda s, p: ["export", p, "-o", "plan.xlsx"]),
    "export-sweep-parquet": (".parquet", lambda s, p: ["export", p, "-o", "sweep.csv"]),
    "whatif-grid": (".yaml", lambda s, p: ["whatif", p, "-o", "grid.csv", "--workers", "1"]),
    "hourly-profile-csv": (".csv", lambda s, p: ["plan", _scenario_with(s, "hourly_profile", p.name), "-q",
                                                 "-o", "plan.json"]),
    "capacity-profile-csv": (".csv", lambda s, p: ["plan", _scenario_with(s, "capacity_profiles", p.name), "-q",
                                                   "-o", "plan.json"]),
    "compare-catalog": (".csv", lambda s, p: ["compare", "--model", "llama-3.1-8b", "--gpus", "l40s",
                                               "--demand-req-s", "1", "--catalog", p]),
}


@pytest.mark.parametrize("content", sorted(CONTENTS))
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_unreadable_content_is_one_line(sandbox, entry, content):
    suffix, command = ENTRY_POINTS[entry]
    data, pattern = CONTENTS[content]
    path = sandbox.write(f"hostile{suffix}", data)
    sandbox.fails(command(sandbox, path), 2, pattern)


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_folder_where_a_file_belongs_is_one_line(sandbox, entry):
    suffix, command = ENTRY_POINTS[entry]
    path = sandbox.path(f"folder{suffix}")
    path.mkdir()
    if entry == "export-sweep-parquet":  # a sweep may be a folder dataset: an empty one holds nothing
        sandbox.fails(command(sandbox, path), 2, r"no Parquet|holds nothing|empty|no sweep")
        return
    sandbox.fails(command(sandbox, path), 2, r"is a folder|not a file|does not exist|not found|no such")


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_missing_file_is_one_line(sandbox, entry):
    suffix, command = ENTRY_POINTS[entry]
    sandbox.fails(command(sandbox, sandbox.path(f"missing{suffix}")), 2, r"not found|does not exist|no such")


def test_a_huge_scenario_file_is_refused_before_parsing(sandbox):
    path = sandbox.write("huge.yaml", "name: x\ndescription: '" + "a" * (12 * 2**20) + "'\n")
    sandbox.fails(["plan", path, "-q", "-o", "plan.json"], 2, r"larger than|too large|MB")


def test_nul_bytes_in_a_catalog_override_are_refused(sandbox):
    path = sandbox.write("prices.csv", "gpu,provider,region,pricing_type,usd_per_gpu_hour,source,as_of\n"
                                      "l40s,me,eu,on_demand,1\x00.5,quote,2026-11-01\n")
    sandbox.fails(["catalog", "check", path], 2, r"NUL|control|binary|not text")


@pytest.mark.parametrize(("body", "pattern"), [
    ("{not json", r"not (a )?(valid|readable) .*JSON|JSON"),
    (json.dumps({"status": "optimal"}), r"not a fleetplan plan|missing|lacks"),
    (json.dumps([1, 2, 3]), r"not a fleetplan plan|must be"),
    (json.dumps({"status": "optimal", "tables": {"fleet": "oops"}}), r"not a fleetplan plan|table"),
])
def test_export_of_a_damaged_plan_json_is_one_line(sandbox, body, pattern):
    path = sandbox.write("plan.json", body)
    sandbox.fails(["export", path, "-o", "plan.xlsx"], 2, pattern)


def test_export_of_a_damaged_parquet_is_one_line(sandbox):
    path = sandbox.write("sweep.parquet", b"PAR1" + b"\x00" * 64 + b"PAR1")
    sandbox.fails(["export", path, "-o", "sweep.csv"], 2, r"not a readable Parquet|Parquet")


def test_duplicate_yaml_keys_are_refused(sandbox):
    text = yaml.safe_dump(tiny_scenario(), sort_keys=False) + "name: again\n"
    path = sandbox.write("dup.yaml", text)
    sandbox.fails(["plan", path, "-q", "-o", "plan.json"], 2, r"duplicate key 'name'.*line")


def test_a_yaml_alias_bomb_is_refused_quickly(sandbox):
    bomb = "\n".join(["a: &a ['lol','lol','lol','lol','lol','lol','lol','lol','lol']"]
                     + [f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},"
                        f"*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},"
                        f"*{chr(97 + i)}]" for i in range(8)]) + "\nname: *i\n"
    path = sandbox.write("bomb.yaml", bomb)
    sandbox.fails(["plan", path, "-q", "-o", "plan.json"], 2, r"alias|too many|expands")


def test_sixty_thousand_workloads_are_refused_before_validation(sandbox):
    data = tiny_scenario()
    data["workloads"] = [dict(data["workloads"][0], name=f"w{i}") for i in range(60_000)]
    path = sandbox.write("many.yaml", json.dumps(data))  # JSON is YAML, and fast to write
    sandbox.fails(["plan", path, "-q", "-o", "plan.json"], 2, r"workloads.*at most 500|500")
