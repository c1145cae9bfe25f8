"""The ``fleetplan`` command line: a thin shell over the library.

Each command group is one module of this package with a ``register(app)`` function, imported
here statically: a module that fails to import is a bug that fails loudly. ``main`` is the one
error boundary: every expected failure prints one line on stderr (control characters escaped)
and returns exit code 2 for bad input, 1 for the environment (files that cannot be read or
written, an unreachable scheduler) and 128 + the signal number when interrupted. A traceback
appears only with ``--debug`` (or ``FLEETPLAN_DEBUG=1``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from collections.abc import Iterator
from typing import Annotated

import typer

import fleetplan
from fleetplan.cli import calibration, catalog, compare, estimate, export, plan, sweep, whatif
from fleetplan.cli.command_clock import start_command
from fleetplan.cli.options import checked_number, checked_output
from fleetplan.errors import FleetplanError, one_line

app = typer.Typer(
    name="fleetplan",
    help="How many of which GPUs an LLM service needs, and what it costs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # help texts give units in brackets ([ms]): not Rich markup
)

for _group in (catalog, sweep, estimate, calibration, plan, compare, whatif, export):
    _group.register(app)

log = logging.getLogger(__name__)
#: Exit code of an interruption by SIGINT (128 + 2).
INTERRUPTED = 130
_state = {"debug": False}
#: The parser's usage errors (bad or missing options, unknown commands): Click's class, which
#: recent Typer releases vendor, so it is found through Typer's own BadParameter.
USAGE_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


class Interrupted(BaseException):
    """SIGTERM or SIGINT: unwinds like KeyboardInterrupt, so writers remove their temporaries."""

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.number = number


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"fleetplan {fleetplan.__version__}")
        raise typer.Exit(0)


@app.callback()
def _options(
        version: Annotated[bool, typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit")] = False,
        debug: Annotated[bool, typer.Option("--debug", help="Show the traceback of a failure")] = False) -> None:
    """How many of which GPUs an LLM service needs, and what it costs."""
    _state["debug"] = _state["debug"] or debug


def _add_checks(command, name: str = ""):
    """Give every ``-o/--output`` option a check of the path, and every numeric option a check
    of its value, that run while the command line is parsed, before any work starts."""
    for param in command.params:
        if param.name == "output":
            param.callback = _chained(param.callback, lambda value, name=name: checked_output(name, value))
        else:
            param.callback = _chained(param.callback, lambda value, option=param.name: checked_number(option, value))
    for sub_name, sub in getattr(command, "commands", {}).items():
        _add_checks(sub, sub_name)
    return command


def _chained(previous, check):
    def callback(ctx, param, value):
        return check(previous(ctx, param, value) if previous is not None else value)
    return callback


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """SIGTERM and SIGINT raise :class:`Interrupted` in the main thread while a command runs."""
    def handler(number, frame):
        raise Interrupted(number)

    previous = {}
    with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
        for number in (signal.SIGTERM, signal.SIGINT):
            previous[number] = signal.signal(number, handler)
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def _fail(text: str, code: int) -> int:
    typer.echo(f"error: {one_line(text)}", err=True)
    return code


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; every failure is one line on stderr and an exit code (see the module doc)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    _state["debug"] = os.environ.get("FLEETPLAN_DEBUG", "") not in ("", "0")
    start_command(at_process_start=argv is None)  # argv None: this process runs one command
    try:
        command = _add_checks(typer.main.get_command(app))
        with _signals_raise():
            returned = command.main(args=argv, prog_name="fleetplan", standalone_mode=False)
    except typer.Exit as done:
        return done.exit_code
    except typer.Abort:
        return _fail("aborted", 1)
    except (FleetplanError, OSError, Interrupted, KeyboardInterrupt, Exception) as error:
        usage_exit = _usage_exit(error)
        if usage_exit is not None:
            return usage_exit
        if _state["debug"]:
            raise
        return _report(error)
    if returned == INTERRUPTED:  # the parser turns a KeyboardInterrupt into this exit code, silently
        return _fail("interrupted; nothing was written", INTERRUPTED)
    return returned if isinstance(returned, int) else 0


def _usage_exit(error: BaseException) -> int | None:
    """The exit code of the command-line parser's own errors (usage, --help), after it printed them."""
    exit_code = getattr(error, "exit_code", None)
    if exit_code is None or isinstance(error, FleetplanError):
        return None
    if isinstance(error, USAGE_ERROR) and type(error).__name__ != "NoArgsIsHelpError":
        path = error.ctx.command_path if error.ctx is not None else "fleetplan"
        return _fail(f"{error.format_message().rstrip('.')} (see '{path} --help')", exit_code)
    show = getattr(error, "show", None)
    if show is not None:
        show()
    return exit_code


def _report(error: BaseException) -> int:
    """One line for a failure that ended a command, and its exit code."""
    if isinstance(error, FleetplanError):
        return _fail(str(error), error.exit_code)
    if isinstance(error, Interrupted):
        return _fail(f"interrupted by {signal.Signals(error.number).name}; nothing was written", 128 + error.number)
    if isinstance(error, KeyboardInterrupt):
        return _fail("interrupted; nothing was written", INTERRUPTED)
    if isinstance(error, OSError):
        where = f"'{error.filename}': " if error.filename else ""
        return _fail(f"{where}{(error.strerror or str(error)).lower()}", 1)
    log.debug("unexpected failure", exc_info=error)
    detail = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return _fail(f"{type(error).__name__}: {detail} (this is a fleetplan bug; run with --debug for the traceback)", 1)


if __name__ == "__main__":
    sys.exit(main())
