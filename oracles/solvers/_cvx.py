"""Solving a cvxpy Problem on one of our backends, with the engine's status mapping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..errors import EmptyBodyError, SolverError, UnboundedError
from ._base import Backend

if TYPE_CHECKING:
    import cvxpy as cp


def solve_problem(problem: cp.Problem, backend: Backend, options: Mapping[str, object] | None = None) -> float:
    """Solve ``problem`` with ``backend`` through cvxpy; returns the optimal value or raises a typed error."""
    if backend.cvxpy_name is None:
        raise SolverError(f"{backend.name} has no cvxpy interface", backend=backend.name, status="unsupported")
    opts = {**backend.cvxpy_options(), **(options or {})}
    try:
        problem.solve(solver=backend.cvxpy_name, **opts)
    except Exception as e:  # cvxpy.SolverError, mosek.Error, ...: never let a raw backend error escape
        raise SolverError(
            f"{backend.name} failed through cvxpy: {type(e).__name__}: {e}", backend=backend.name, status="error"
        ) from e
    st = problem.status
    if st in ("infeasible", "infeasible_inaccurate"):
        raise EmptyBodyError(f"{backend.name}: the body is empty ({st})")
    if st in ("unbounded", "unbounded_inaccurate"):
        raise UnboundedError(f"{backend.name}: the objective is unbounded over the body ({st})")
    if st != "optimal":
        raise SolverError(f"{backend.name} returned status {st!r}", backend=backend.name, status=st)
    return float(problem.value)
