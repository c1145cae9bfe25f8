"""Large MIP and LP solves in a child process that is stopped at the time limit.

HiGHS checks its time limit between the steps of branch and bound, but some steps of the root
node do not check it: on the 72-period stochastic portfolio (``benchmarks/bench_portfolio.py
--case stochastic``, 41,663 columns) the root's cut loop kept the call running for 371.6 s at
a 60 s limit, and on the 13,967 columns of its day case for 110.8 s at a 5 s limit; no HiGHS
option stops it. A solve in the interpreter cannot be interrupted, so a MIP of at least
:data:`WATCHDOG_COLUMNS` columns runs in a child Python process (``python -m`` this
module: no fork, which hangs highspy, and no re-run of the caller's script) fed the pickled
program on stdin, and is stopped :data:`GRACE_S` after its limit; so does an LP of at least
:data:`LP_WATCHDOG_COLUMNS`, whose presolve does not check the limit either. A stopped solve reports
``time_limit`` with its start as the solution when it was given one (the caller's best plan
stays the best known), else ``no_solution``; its dual bound is lost, never invented.

A child also ends when its parent does, so a killed ``fleetplan plan`` leaves no solver behind.
"""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

#: Smallest MIP solved in a child process [columns]. Smaller ones (the example plan's are under
#: 600) stop in time in practice and would pay the child's start (about a second of imports)
#: for nothing; larger ones need not: the 13,967-column MILP of ``bench_portfolio.py``'s day
#: case ran 110.8 s in HiGHS's root cut loop against a 5 s limit (``--whole 5``), and with the
#: watchdog from 20,000 columns that case took 45.8 s at ``--time-limit 30`` (30.3 s now).
WATCHDOG_COLUMNS = 5_000

#: Smallest LP solved in a child process [columns]. HiGHS's presolve of a large LP does not
#: check the time limit: at a 3 s limit (``benchmarks/bench_large_lp.py --elastic``) the LPs of
#: ``hard_scenarios/random_38.yaml`` (2,066,385 columns, its elastic model 2,712,657) took
#: 20.2 and 21.8 s in the process and 4.1 and 4.2 s watched, while the other hard scenarios'
#: 104 LPs (up to 431,575 columns) ended within 0.3 s of the limit. Before the watch, that
#: scenario's infeasible plan ran 11 s past a 60 s call.
LP_WATCHDOG_COLUMNS = 1_000_000

#: Time a child gets past its limit to return its own answer before it is stopped [s].
GRACE_S = 1.0

#: Shortest limit worth starting a child for [s]: on a MIP this large, HiGHS's presolve and root
#: LP alone take longer, so a shorter solve keeps its start (or has no answer) at once.
MIN_WATCHED_S = 2.0

#: How often a child checks that its parent still runs [s].
PARENT_POLL_S = 0.5

#: Set in a child's environment: its own solves run in-process.
CHILD_FLAG = "FLEETPLAN_SOLVER_CHILD"


def wants_watchdog(n_cols: int, mip: bool) -> bool:
    """True for a MIP of at least :data:`WATCHDOG_COLUMNS` columns or an LP of at least
    :data:`LP_WATCHDOG_COLUMNS`, unless this process is itself a watchdog's child."""
    least = WATCHDOG_COLUMNS if mip else LP_WATCHDOG_COLUMNS
    return n_cols >= least and os.environ.get(CHILD_FLAG) != "1"


def run_with_watchdog(solve: Callable, arguments: tuple, time_limit_s: float):
    """``solve(remaining_s, *arguments)`` in a child Python process, ``remaining_s`` being what is
    left of ``time_limit_s`` once the child has started [s]; None when it is stopped at the
    limit plus :data:`GRACE_S`, ends without an answer, or is not started because
    ``time_limit_s`` is under :data:`MIN_WATCHED_S`. ``solve`` must be a module-level function:
    it is pickled by name, so the child imports its module and no script of the caller's is run
    again."""
    if time_limit_s < MIN_WATCHED_S:
        logger.info("%.2f s is too short for a solve of this size: not started", time_limit_s)
        return None
    deadline = time.time() + time_limit_s  # wall clock: the child's start-up counts
    payload = pickle.dumps((solve, arguments, deadline, os.getpid()), protocol=pickle.HIGHEST_PROTOCOL)
    environment = {**os.environ, CHILD_FLAG: "1"}
    child = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment)
    try:
        answer, errors = child.communicate(payload, timeout=max(deadline - time.time(), 0.0) + GRACE_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        logger.info("the solver ran past its %.1f s limit: stopped", time_limit_s)
        return None
    if child.returncode != 0 or not answer:
        logger.warning("the solver process ended without an answer (exit code %s): %s", child.returncode,
                       errors.decode(errors="replace").strip().splitlines()[-1:] or "")
        return None
    kind, result = pickle.loads(answer)
    if kind == "error":
        raise result
    return result


def _end_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def child_main() -> None:
    """The child: read the pickled call from stdin, write the pickled answer to stdout (the
    solver's own output goes to stderr, so nothing else reaches the answer)."""
    answer = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    solve, arguments, deadline, parent = pickle.load(sys.stdin.buffer)
    threading.Thread(target=_end_with_parent, args=(parent,), daemon=True).start()
    try:
        message = ("result", solve(max(deadline - time.time(), 0.0), *arguments))
    except Exception as error:  # noqa: BLE001 - raised again in the parent
        message = ("error", error)
    pickle.dump(message, answer, protocol=pickle.HIGHEST_PROTOCOL)
    answer.close()


if __name__ == "__main__":
    child_main()
