"""The array-held program: a copy with changed parts keeps everything else."""

from __future__ import annotations

import numpy as np

from fleetplan.optimizer.linear_program import LinearProgram
from fleetplan.optimizer.solver import SolveOptions, open_solver


def cover_program() -> LinearProgram:
    """2 x + 3 y >= 4, x and y whole, x <= 5: at costs 1 and 1.4 the optimum is x = 2."""
    program = LinearProgram()
    program.add_columns(2, upper=np.array([5.0, np.inf]), integer=True)
    program.add_rows(1, np.zeros(2, int), np.arange(2), np.array([2.0, 3.0]), lower=4.0)
    return program


def test_a_copy_with_other_integrality_keeps_its_rows_and_bounds_and_solves_as_such():
    program = cover_program()
    relaxed = program.with_changes(integer=np.array([True, False]))
    assert relaxed.integer.tolist() == [True, False] and program.integer.all()
    assert (relaxed.matrix != program.matrix).nnz == 0
    np.testing.assert_array_equal(relaxed.col_upper, program.col_upper)
    np.testing.assert_array_equal(relaxed.row_lower, program.row_lower)
    cost = np.array([1.0, 1.4])
    whole = open_solver(program, cost, SolveOptions()).solve(time_limit_s=10, mip_gap=0.0)
    part = open_solver(relaxed, cost, SolveOptions()).solve(time_limit_s=10, mip_gap=0.0)
    assert whole.outcome.objective == 2.0
    # y continuous: y = 4/3 costs 1.87, and x = 2 still 2.0; x = 1, y = 2/3 costs 1.93
    assert abs(part.outcome.objective - 1.4 * 4 / 3) < 1e-6
