"""A mixed-integer linear program held as arrays: column bounds and integrality, row bounds and
one sparse matrix.

Builders add whole blocks at once: ``add_columns`` for a table of variables, ``add_rows`` for a
family of constraints given as (row, column, coefficient) triplets. Triplets that repeat a
(row, column) pair are summed when the matrix is assembled, so a variable that enters a row twice
(the routing share of a prefill/decode pair, loading both stages of one pool) counts twice.
``restricted`` cuts out the rows of some periods and the columns they use, so one built model
serves every per-period solve.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

INF = float("inf")


@dataclass
class LinearProgram:
    """Columns and rows added block by block; ``matrix`` assembles them (cached)."""

    n_cols: int = 0
    n_rows: int = 0
    _cols: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    _rows: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    _entries: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    _assembled: tuple | None = None

    def add_columns(self, count: int, *, lower=0.0, upper=INF, integer=False) -> np.ndarray:
        """``count`` new columns; returns their indices."""
        index = np.arange(self.n_cols, self.n_cols + count)
        self._cols.append(tuple(np.broadcast_to(np.asarray(v, dtype=dtype), (count,))
                                for v, dtype in ((lower, float), (upper, float), (integer, bool))))
        self.n_cols += count
        self._assembled = None
        return index

    def add_rows(self, count: int, row: np.ndarray, col: np.ndarray, coef: np.ndarray, *,
                 lower=-INF, upper=INF) -> np.ndarray:
        """``count`` new rows: lower <= sum of coef * x[col] over the triplets of each local
        ``row`` (0..count-1) <= upper; returns their indices."""
        index = np.arange(self.n_rows, self.n_rows + count)
        self._rows.append((np.broadcast_to(np.asarray(lower, dtype=float), (count,)),
                           np.broadcast_to(np.asarray(upper, dtype=float), (count,))))
        self._entries.append((np.asarray(row, dtype=np.int64) + self.n_rows,
                              np.asarray(col, dtype=np.int64), np.asarray(coef, dtype=float)))
        self.n_rows += count
        self._assembled = None
        return index

    def _assemble(self) -> tuple:
        if self._assembled is None:
            def joined(parts, i, dtype):
                return np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, dtype)
            rows = joined(self._entries, 0, np.int64)
            matrix = sp.csr_matrix((joined(self._entries, 2, float),
                                    (rows, joined(self._entries, 1, np.int64))),
                                   shape=(self.n_rows, self.n_cols))
            matrix.sum_duplicates()
            self._assembled = (matrix, joined(self._cols, 0, float), joined(self._cols, 1, float),
                               joined(self._cols, 2, bool), joined(self._rows, 0, float),
                               joined(self._rows, 1, float))
        return self._assembled

    @property
    def matrix(self) -> sp.csr_matrix:
        """The constraint matrix, rows x columns, repeated entries summed."""
        return self._assemble()[0]

    @property
    def col_lower(self) -> np.ndarray:
        return self._assemble()[1]

    @property
    def col_upper(self) -> np.ndarray:
        return self._assemble()[2]

    @property
    def integer(self) -> np.ndarray:
        return self._assemble()[3]

    @property
    def row_lower(self) -> np.ndarray:
        return self._assemble()[4]

    @property
    def row_upper(self) -> np.ndarray:
        return self._assemble()[5]

    def with_changes(self, *, matrix: sp.csr_matrix | None = None,
                     row_lower: np.ndarray | None = None,
                     row_upper: np.ndarray | None = None,
                     integer: np.ndarray | None = None) -> LinearProgram:
        """A copy with another matrix (same shape), other row bounds or other integrality
        (bool per column); column bounds unchanged."""
        matrix = self.matrix if matrix is None else matrix
        program = LinearProgram()
        program.add_columns(self.n_cols, lower=self.col_lower, upper=self.col_upper,
                            integer=self.integer if integer is None else integer)
        coo = matrix.tocoo()
        program.add_rows(self.n_rows, coo.row, coo.col, coo.data,
                         lower=self.row_lower if row_lower is None else row_lower,
                         upper=self.row_upper if row_upper is None else row_upper)
        return program

    def activity(self, values: np.ndarray) -> np.ndarray:
        """Left-hand side of every row at ``values``."""
        return self.matrix @ values

    def violation(self, values: np.ndarray) -> float:
        """Largest violation of a row or column bound at ``values`` (0 when feasible)."""
        return max(float(np.max(excess, initial=0.0)) for excess, _ in self._excesses(values))

    def relative_violation(self, values: np.ndarray) -> float:
        """Largest violation of a row or column bound at ``values``, each over 1 + the bound's
        size: a solver's tolerance on a row in dollars (a budget of $100,000) is not one on a
        row in replicas."""
        worst = 0.0
        for excess, bound in self._excesses(values):
            finite = np.isfinite(bound)
            scaled = excess / (1.0 + np.abs(np.where(finite, bound, 0.0)))
            worst = max(worst, float(np.max(np.where(finite, scaled, 0.0), initial=0.0)))
        return worst

    def _excesses(self, values: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """(amount past the bound, the bound) for the rows' and columns' lower and upper
        bounds at ``values``."""
        activity = self.activity(values)
        return [(self.row_lower - activity, self.row_lower),
                (activity - self.row_upper, self.row_upper),
                (self.col_lower - values, self.col_lower),
                (values - self.col_upper, self.col_upper)]


@dataclass(frozen=True)
class Restriction:
    """Some rows of a program and the columns they use, as a program of their own.

    ``rows`` and ``cols`` map the restricted program's rows and columns back to the full one.
    """

    program: LinearProgram
    rows: np.ndarray
    cols: np.ndarray

    def lift(self, values: np.ndarray, into: np.ndarray) -> None:
        """Write a solution of the restricted program into a full solution vector."""
        into[self.cols] = values


def restricted(program: LinearProgram, rows: np.ndarray, *,
               extra_cols: np.ndarray | None = None) -> Restriction:
    """The program made of ``rows`` and every column they use (plus ``extra_cols``)."""
    part = program.matrix[rows]
    used = column_set(program.n_cols, part.indices,
                      *([] if extra_cols is None else [extra_cols]))
    local = sp.csr_matrix(part[:, used])
    sub = LinearProgram()
    sub.add_columns(len(used), lower=program.col_lower[used], upper=program.col_upper[used],
                    integer=program.integer[used])
    coo = local.tocoo()
    sub.add_rows(len(rows), coo.row, coo.col, coo.data, lower=program.row_lower[rows],
                 upper=program.row_upper[rows])
    return Restriction(sub, np.asarray(rows), used)


def column_set(n_cols: int, *columns: np.ndarray) -> np.ndarray:
    """The distinct column indices of ``columns`` (each in ``[0, n_cols)``), sorted.

    A mask over the program's columns, not ``np.unique``: numpy 2.4's hash-based unique took
    2.07 s on 2.7 million distinct indices, the mask 0.006 s (``bench_large_lp.py``)."""
    mask = np.zeros(n_cols, dtype=bool)
    for part in columns:
        mask[np.asarray(part, dtype=np.int64)] = True
    return np.flatnonzero(mask)
