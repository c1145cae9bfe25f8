"""``fleetplan plan``, ``fleetplan schema`` and ``fleetplan example``: outputs and exit codes."""

from __future__ import annotations

import json
import re

import pytest
import yaml

import fleetplan.optimizer.candidates
from fleetplan.cli import main
from fleetplan.exports.plan_json import read_plan_json
from tests.optimizer.test_candidates import FakeEngine, scenario


@pytest.fixture
def fake_engine(monkeypatch):
    monkeypatch.setattr(fleetplan.optimizer.candidates, "estimate_cases", FakeEngine())


@pytest.fixture
def scenario_file(tmp_path):
    path = tmp_path / "scenario.yaml"
    data = scenario()
    data["what_if"] = {"enabled": False}
    path.write_text(yaml.safe_dump(data))
    return path


def test_example_prints_a_valid_scenario(capsys, tmp_path):
    assert main(["example"]) == 0
    text = capsys.readouterr().out
    (tmp_path / "mine.yaml").write_text(text)
    assert yaml.safe_load(text)["workloads"][0]["name"] == "chat"


def test_schema_prints_json_or_writes_a_file(capsys, tmp_path):
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "fleetplan scenario"
    assert main(["schema", "-o", str(tmp_path / "s.json")]) == 0
    assert json.loads((tmp_path / "s.json").read_text())["type"] == "object"


def test_plan_writes_json_and_prints_the_summary(fake_engine, scenario_file, tmp_path, capsys):
    output = tmp_path / "plan.json"
    assert main(["plan", str(scenario_file), "-o", str(output)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("status: optimal")
    assert f"wrote {output}" in captured.err
    assert read_plan_json(output).status == "optimal"


def test_plan_writes_a_folder_of_csv_tables(fake_engine, scenario_file, tmp_path):
    assert main(["plan", str(scenario_file), "-o", str(tmp_path / "plan.csv"), "-q"]) == 0
    assert (tmp_path / "plan" / "fleet.csv").is_file()


def test_plan_without_output_writes_the_workbook_here(fake_engine, scenario_file, tmp_path,
                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["plan", str(scenario_file), "-q"]) == 0
    assert (tmp_path / "fleetplan-plan.xlsx").is_file()


def test_plan_never_replaces_a_folder_it_did_not_write(fake_engine, scenario_file, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    (data / "precious.txt").write_text("keep me")
    assert main(["plan", str(scenario_file), "-q", "-o", str(data)]) == 2
    assert "already exists and is not a fleetplan output" in capsys.readouterr().err
    assert sorted(p.name for p in data.iterdir()) == ["precious.txt"]
    assert main(["plan", str(scenario_file), "-q", "-o", str(tmp_path / "tables")]) == 0
    assert main(["plan", str(scenario_file), "-q", "-o", str(tmp_path / "tables")]) == 0  # its own output


def test_an_infeasible_plan_exits_1_and_is_still_written(fake_engine, tmp_path, capsys):
    data = scenario()
    data["workloads"][0]["tpot_slo_ms"] = 1
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    output = tmp_path / "plan.json"
    assert main(["plan", str(path), "-o", str(output)]) == 1
    assert "below the best achievable" in capsys.readouterr().out
    assert read_plan_json(output).status == "infeasible"


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d["workloads"][0].update(tpot_slo_ms=-5),
     r"workloads\[0\].tpot_slo_ms: must be > 0, got -5"),
    (lambda d: d["fleet"].update(gpus=["h100"]), r"fleet.gpus\[0\].id: unknown gpu 'h100'"),
])
def test_bad_scenarios_exit_2_with_one_line(fake_engine, tmp_path, capsys, edit, message):
    data = scenario()
    edit(data)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["plan", str(path)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("error: ")
    assert re.search(message, error)


@pytest.mark.parametrize(("arguments", "message"), [
    (["-o", "plan.txt"], "must end with .xlsx, .parquet, .json or .csv"),
    (["--time-limit", "0"], "--time-limit must be > 0, got 0"),
])
def test_bad_options_exit_2(fake_engine, scenario_file, tmp_path, capsys, arguments, message):
    assert main(["plan", str(scenario_file), *arguments]) == 2
    assert message in capsys.readouterr().err


def test_missing_scenario_exits_2(capsys, tmp_path):
    assert main(["plan", str(tmp_path / "none.yaml")]) == 2
    assert "scenario file not found" in capsys.readouterr().err
