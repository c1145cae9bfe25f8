"""The ``fleetplan`` command line: a thin shell over the library.

Each command group is one module of this package with a ``register(app)`` function, imported
here statically: a module that fails to import is a bug that fails loudly. ``main`` is the one
error boundary: an input error prints one line on stderr and returns exit code 2.
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

import fleetplan
from fleetplan.cli import calibration, catalog, compare, estimate, export, plan, sweep, whatif
from fleetplan.errors import FleetplanError

app = typer.Typer(
    name="fleetplan",
    help="How many of which GPUs an LLM service needs, and what it costs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for _group in (catalog, sweep, estimate, calibration, plan, compare, whatif, export):
    _group.register(app)


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"fleetplan {fleetplan.__version__}")
        raise typer.Exit(0)


@app.callback()
def _options(version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True, help="Print the version and exit")] = False) -> None:
    """How many of which GPUs an LLM service needs, and what it costs."""


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; input errors print one line and return exit code 2."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        returned = app(args=argv, standalone_mode=False)
    except FleetplanError as error:
        typer.echo(f"error: {error}", err=True)
        return 2
    except typer.Exit as done:
        return done.exit_code
    except typer.Abort:
        typer.echo("aborted", err=True)
        return 1
    except Exception as click_error:  # click's usage errors carry their own exit code
        exit_code = getattr(click_error, "exit_code", None)
        if exit_code is None:
            raise
        show = getattr(click_error, "show", None)
        if show is not None:
            show()
        return exit_code
    return returned if isinstance(returned, int) else 0


if __name__ == "__main__":
    sys.exit(main())
