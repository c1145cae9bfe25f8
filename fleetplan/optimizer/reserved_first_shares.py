"""How the reserved-first solve (``reserved_first.py``) shares out its time and its gap.

Each share is of the time (or the accepted gap) left when the step starts, so a step that
finishes early leaves its time to the next; the steps' order is in ``reserved_first``'s module
docstring.
"""

#: Share of the time left the first reserved candidate's periods may take.
FIRST_PLAN_SHARE = 0.6

#: Share of the time left the representative-period problem may take.
REPRESENTATIVE_SHARE = 0.25

#: Least time left for which the whole MILP is run at the end [s]. HiGHS checks its time limit
#: only between root cut rounds: given under 2 s, the 7,465-column MILP of bench_optimizer.py's
#: case (b) ran past the call's deadline.
WHOLE_MIN_S = 2.0

#: Share of the time left a fallback plan's completion may take (presolve settles most).
COMPLETION_SHARE = 0.1

#: Share of the time left the rounded-up LP may take, with its re-solves when the rounding
#: breaks a cap (``rounding.rounded_within_limits``).
ROUNDING_SHARE = 0.25

#: Share of the time left the floor bound's LP may take (it takes well under a second).
FLOOR_SHARE = 0.2

#: Share of the accepted gap (of the plan's cost) the periods may leave open, split by hours:
#: the rest is left for the reserved choice.
GAP_SHARE = 0.5

#: Share of the accepted gap the Lagrangian periods may leave when solved again.
TIGHT_GAP_SHARE = 0.1

#: Share of the time the local search leaves that the pools' bound over the whole horizon may
#: take (``ReservedBounds.pool_bound``); tightening the Lagrangian periods and the whole MILP
#: get the rest.
POOL_BOUND_SHARE = 0.75

#: Least time worth giving the pools' bound [s]: under it each pool's MILP barely leaves its
#: root.
POOL_BOUND_MIN_S = 1.0

#: Share of the time the local search leaves that tightening the bound may take; the whole
#: MILP gets the rest (on the portfolio benchmark's year case it improved neither side).
TIGHTEN_SHARE = 0.75

#: Share of the time left after the candidates that the local search over reserved counts
#: may take (``reserved_search.py``); tightening the bound and the whole MILP get the rest.
SEARCH_SHARE = 0.6

#: The same on a model whose whole MILP was tried first, which gets the rest: HiGHS proves
#: such a model better than the Lagrangian bound.
SMALL_SEARCH_SHARE = 0.5

#: The same share when the best plan's periods are polished: its reserved choice is the one
#: kept, so the gap left is the periods'.
POLISH_GAP_SHARE = 0.05
