"""The clock of ``fleetplan plan``, whose time limit is the whole command's: from the process's
start (the interpreter, the imports, reading the scenario) to the last file written.

The library's ``plan_scenario`` counts its limit from its own call; the command tells it how
much of the limit went before (:func:`command_elapsed_s`) and how much to keep for writing the
plan (:func:`writing_s`), so ``fleetplan plan --time-limit 5`` returns in about 5 s, not 5 s
plus a second of start-up and the time the workbook takes.

A command run as the process (``fleetplan ...``, ``python -m fleetplan.cli``: ``main()`` reads
``sys.argv``) starts at the process's start; one run inside a longer-lived process
(``main([...])`` from Python) starts when ``main`` is called.
"""

from __future__ import annotations

import math
import os
import time

_IMPORTED = time.perf_counter()
_command = {"started": None}  # perf_counter() at the command's start

#: Field of ``/proc/[pid]/stat`` that holds the process's start time, in clock ticks after the
#: system booted (field 22 in proc(5), counted from 1; the 20th after the command name).
_START_FIELD_AFTER_NAME = 19


def process_age_s() -> float:
    """Seconds since this process started [s].

    On Linux: ``/proc/self/stat``'s start time [clock ticks after boot] against
    ``CLOCK_BOOTTIME``, the clock the kernel counts it on (proc(5)), so the interpreter's start
    and every import count. Elsewhere, or when ``/proc`` cannot be read: the time since this
    module was imported, which leaves those out.
    """
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()  # the name may hold spaces
        started_s = int(fields[_START_FIELD_AFTER_NAME]) / os.sysconf("SC_CLK_TCK")
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - started_s
    except (OSError, ValueError, IndexError, AttributeError):
        age = math.nan
    if not 0.0 <= age < 86_400.0:  # a clock that disagrees: only what this module saw
        age = time.perf_counter() - _IMPORTED
    return age


#: Seconds to write a plan file [s], by suffix: (a fixed part, a part per demand row) (a
#: workload's bucket in a period with demand), above what ``benchmarks/bench_plan_writing.py``
#: measures on twelve hard scenarios that end with a plan or an elastic one (12-36,288 demand
#: rows, one run each): a workbook 0.33-0.66 s whatever the rows (it holds months, not hours);
#: JSON 0.01-0.40 s; a folder of CSVs 0.04-0.31 s; Parquet 0.04-0.24 s; at most 0.89 of the
#: time kept for any output. A name without a suffix is a folder of CSVs.
WRITE_S = {".xlsx": (0.75, 0.0), ".json": (0.05, 12e-6), ".csv": (0.1, 10e-6),
           ".parquet": (0.25, 2e-6), "": (0.1, 10e-6)}

#: Seconds the printed summary and the FOCUS CSV take [s] (at most 0.18 s and 0.18 s on the
#: same scenarios), and the interpreter's exit after them.
SUMMARY_S = 0.2
FOCUS_S = 0.2
EXIT_S = 0.1


def writing_s(demand_rows, suffix: str, printing: bool, focus: bool) -> float:
    """Seconds to write a plan of ``demand_rows`` demand rows [s]: the plan file by its suffix
    (:data:`WRITE_S`: fixed + per row x rows), the printed summary and the FOCUS CSV when asked
    for, and the exit."""
    fixed_s, per_row_s = WRITE_S[suffix.lower()]
    seconds = fixed_s + per_row_s * demand_rows + EXIT_S
    return seconds + SUMMARY_S * printing + FOCUS_S * focus


def start_command(at_process_start: bool) -> None:
    """Start the command's clock: at the process's start (:func:`process_age_s`) when the
    process runs this one command, else now."""
    _command["started"] = time.perf_counter() - (process_age_s() if at_process_start else 0.0)


def command_elapsed_s() -> float:
    """Seconds since the command started [s]; 0 before :func:`start_command`."""
    started = _command["started"]
    return 0.0 if started is None else time.perf_counter() - started
