"""Solver backends behind one registry (first cut: HiGHS through scipy; extended by the solvers helper).

``solve_lp(c, A_ub, b_ub, A_eq, b_eq, bounds=None, solver=None) -> LPSolution`` minimises c @ x.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linprog

from ..errors import EmptyBodyError, SolverError, UnboundedError


@dataclass
class LPSolution:
    """Result of one LP: minimiser x, value c @ x, backend name, and the backend's raw status."""

    x: np.ndarray
    value: float
    backend: str
    status: str
    info: dict = field(default_factory=dict)


def available() -> list[str]:
    return ["HIGHS"]


def default(problem: str = "lp") -> str:
    return "HIGHS"


def solve_lp(c, A_ub=None, b_ub=None, A_eq=None, b_eq=None, bounds=None, *, solver: str | None = None,
             method: str = "highs-ipm") -> LPSolution:
    c = np.asarray(c, dtype=float)
    n = c.shape[0]
    A_ub = None if A_ub is None or np.size(A_ub) == 0 else np.asarray(A_ub, dtype=float)
    A_eq = None if A_eq is None or np.size(A_eq) == 0 else np.asarray(A_eq, dtype=float)
    res = linprog(c, A_ub=A_ub, b_ub=None if A_ub is None else b_ub, A_eq=A_eq,
                  b_eq=None if A_eq is None else b_eq,
                  bounds=bounds if bounds is not None else [(None, None)] * n, method=method)
    if res.status == 2:
        raise EmptyBodyError("LP infeasible: the body is empty")
    if res.status == 3:
        raise UnboundedError("LP unbounded: the objective is unbounded over the body")
    if res.status != 0:
        raise SolverError(f"HiGHS failed: {res.message}", backend="HIGHS", status=str(res.status))
    return LPSolution(np.asarray(res.x), float(res.fun), "HIGHS", "optimal", {"result": res})


def maximize_explicit(body, c, *, solver: str | None = None):
    import cvxpy as cp

    x = cp.Variable(body.dim)
    prob = cp.Problem(cp.Maximize(c @ x), body.cvxpy_constraints(x))
    prob.solve(solver=cp.CLARABEL)
    if prob.status in ("infeasible", "infeasible_inaccurate"):
        raise EmptyBodyError("the body is empty")
    if prob.status in ("unbounded", "unbounded_inaccurate"):
        raise UnboundedError("objective unbounded over the body")
    if prob.status != "optimal":
        raise SolverError(f"CLARABEL returned {prob.status}", backend="CLARABEL", status=prob.status)
    return float(prob.value), np.asarray(x.value)
