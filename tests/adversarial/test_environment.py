"""Failures of the environment, not of the input: exit 1 with one line; --debug shows the
traceback; signals unwind the writers."""

from __future__ import annotations

import signal

import pytest

from fleetplan.cli import Interrupted

pytest.importorskip("distributed")


def test_an_unreachable_scheduler_is_one_line_exit_1(sandbox, monkeypatch):
    import fleetplan.sweeps.distributed as distributed_sweeps

    monkeypatch.setattr(distributed_sweeps, "CONNECT_TIMEOUT_S", 0.5)
    sandbox.fails(["sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--batch", "1-8", "-o", "grid",
                   "--scheduler", "tcp://127.0.0.1:9"], 1, r"cannot reach the Dask scheduler at tcp://127\.0\.0\.1:9")


def test_debug_shows_the_traceback(sandbox):
    with pytest.raises(KeyError, match="unknown gpu 'h10'"):
        sandbox.run("--debug", "estimate", "--gpu", "h10", "--model", "llama-3.1-8b", "--batch", "1")


def test_an_unreadable_input_is_an_environment_error(sandbox, monkeypatch):
    path = sandbox.scenario()
    monkeypatch.setattr("pathlib.Path.read_bytes", _denied)
    sandbox.fails(["plan", path, "-q", "-o", "plan.json"], 1, r"scenario\.yaml': permission denied")


def _denied(self):
    raise PermissionError(13, "Permission denied", str(self))


@pytest.mark.parametrize(("number", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_a_write_leaves_nothing(sandbox, monkeypatch, number, code):
    from fleetplan.exports import atomic

    def interrupted(path):
        assert path.is_file()  # the whole output is in its temporary, about to be moved into place
        raise Interrupted(number)  # what the handler raises when the signal arrives

    monkeypatch.setattr(atomic, "_fsync", interrupted)
    path = sandbox.scenario()
    sandbox.fails(["plan", path, "-q", "-o", "plan.json"], code, rf"interrupted by {signal.Signals(number).name}")


@pytest.mark.parametrize(("raised", "code", "pattern"), [
    (KeyboardInterrupt(), 130, r"^error: interrupted; nothing was written$"),
    (RuntimeError("boom"), 1, r"RuntimeError: boom \(this is a fleetplan bug; run with --debug for the traceback\)"),
])
def test_unexpected_failures_are_one_line(sandbox, monkeypatch, raised, code, pattern):
    import fleetplan.cli.plan as plan_cli

    def fail(*args, **kwargs):
        raise raised

    monkeypatch.setattr(plan_cli, "plan_scenario", fail)
    sandbox.fails(["plan", sandbox.scenario(), "-q", "-o", "plan.json"], code, pattern)
