"""Cheap candidate points of {A x <= b, lo <= x <= hi}, each checked against every row before it is returned.

- ``feasible_point_on_flat``: search only the flat p + span(U) (U with few columns) for a point of the
  system: one LP in r + 1 variables, min t s.t. A(p + U c) <= b + t·1, lo <= p + U c <= hi, t >= −1. When a
  good point p and the directions the system leaves free are known (a least-squares fit of the equations
  among the rows, and their weakest right singular vectors), this small LP replaces one in all n variables.
- ``first_order_feasible_point``: a capped first-order LP run (HiGHS's PDLP) on min{t : A x <= b − δ + t·1,
  lo <= x <= hi, t >= 0}; the tightening δ absorbs the method's own feasibility tolerance (~1e-4).

Both answer None when the candidate misses some row: they prove nothing about infeasibility, they only find
points cheaply when there are some. ``oracles.slack`` has the exact LPs (least uniform and total violation).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from . import solvers
from ._validate import as_box, as_matrix, as_rhs, as_vector
from .errors import OracleError, SolverError

__all__ = ["feasible_point_on_flat", "first_order_feasible_point"]


def _meets(A: np.ndarray, b: np.ndarray, x: np.ndarray, lo: float, hi: float) -> bool:
    """Whether x meets every row of A x <= b and the box exactly (no tolerance)."""
    in_box = bool(np.all(x >= lo) and np.all(x <= hi))
    return in_box and (A.shape[0] == 0 or float(np.max(A @ x - b)) <= 0.0)


def feasible_point_on_flat(
    A: ArrayLike,
    b: ArrayLike,
    point: ArrayLike,
    directions: ArrayLike,
    lo: float,
    hi: float,
    *,
    solver: str | None = None,
) -> np.ndarray | None:
    """A point of {A x <= b, lo <= x <= hi} searched on the flat ``point`` + span(``directions``).

    One LP in r + 1 variables (r = columns of ``directions``): min t s.t. A(p + U c) − t·1 <= b,
    lo <= p + U c <= hi (box rows, not slackened), t >= −1. Its minimiser x = p + U c is returned when it
    meets every row and the box exactly (checked here, not taken from the LP's tolerance).

    Parameters
    ----------
    A : array_like, shape (n, p)
        Rows of the system A x <= b (finite).
    b : array_like, shape (n,)
        Right-hand sides (finite).
    point : array_like, shape (p,)
        A point of the flat (need not meet the rows).
    directions : array_like, shape (p, r)
        The flat's directions U (any basis; r >= 1).
    lo, hi : float
        The box lo <= x_j <= hi (finite, lo < hi).
    solver : str or None
        LP backend (None: the engine's default).

    Returns
    -------
    numpy.ndarray or None
        The point x (p,), or None when the LP fails or its minimiser misses a row.

    Raises
    ------
    ValueError
        Malformed A, b, point, directions or box.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.array([[1.0, 1.0], [-1.0, 1.0]]); b = np.array([0.0, 0.0])   # y <= -|x|
    >>> x = feasible_point_on_flat(A, b, [0.0, 1.0], [[0.0], [1.0]], -2.0, 2.0)   # the line x = 0
    >>> bool(np.all(A @ x <= b)) and bool(x[0] == 0.0)
    True
    """
    A_ = as_matrix(A, "A")
    b_ = as_rhs(b, "b", A_.shape[0])
    p = as_vector(point, "point", A_.shape[1])
    U = as_matrix(directions, "directions")
    if U.shape[0] != p.shape[0] or U.shape[1] < 1:
        raise ValueError(f"directions must have shape ({p.shape[0]}, r) with r >= 1, got {U.shape}")
    lo, hi = as_box(lo, hi)
    r = U.shape[1]
    G = np.vstack(
        [
            np.hstack([A_ @ U, -np.ones((A_.shape[0], 1))]),
            np.hstack([U, np.zeros((U.shape[0], 1))]),
            np.hstack([-U, np.zeros((U.shape[0], 1))]),
        ]
    )
    h = np.concatenate([b_ - A_ @ p, hi - p, p - lo])
    c = np.zeros(r + 1)
    c[-1] = 1.0
    try:
        sol = solvers.solve_lp(c, G, h, bounds=[(None, None)] * r + [(-1.0, None)], solver=solver)
    except OracleError:
        return None
    x = p + U @ np.asarray(sol.x[:r])
    return x if _meets(A_, b_, x, lo, hi) else None


def first_order_feasible_point(
    A: ArrayLike,
    b: ArrayLike,
    lo: float,
    hi: float,
    *,
    delta: float = 1e-3,
    max_iter: int = 1000,
    solver: str | None = None,
) -> np.ndarray | None:
    """A point of {A x <= b, lo <= x <= hi} proposed by a capped first-order LP method.

    Runs the backend's first-order LP mode (HiGHS: PDLP) for at most ``max_iter`` iterations on
    min{t : A x − t·1 <= b − δ, lo <= x <= hi, t >= 0}; its x, clipped to the box, is returned when it meets
    every row exactly (checked here). Much cheaper than an exact LP on tall feasible systems; on an infeasible
    one the cap bounds the time lost.

    Parameters
    ----------
    A : array_like, shape (n, p)
        Rows of the system (finite).
    b : array_like, shape (n,)
        Right-hand sides (finite).
    lo, hi : float
        The box (finite, lo < hi).
    delta : float
        How much every row is tightened for the run (absorbs the method's feasibility tolerance).
    max_iter : int
        Iterations of the first-order method at most.
    solver : str or None
        LP backend (None: the engine's default). It must declare a first-order LP mode.

    Returns
    -------
    numpy.ndarray or None
        The point, or None when the run's point misses a row.

    Raises
    ------
    SolverError
        The backend has no first-order LP mode (``status="unsupported"``), or the run failed.
    ValueError
        Malformed A, b or box.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.array([[1.0, 1.0], [-1.0, 0.0]]); b = np.array([1.0, 0.0])   # x + y <= 1, x >= 0
    >>> x = first_order_feasible_point(A, b, -2.0, 2.0)
    >>> x is not None and bool(np.all(A @ x <= b))
    True
    """
    A_ = as_matrix(A, "A")
    b_ = as_rhs(b, "b", A_.shape[0])
    lo, hi = as_box(lo, hi)
    backend = solvers.get(solver, "lp")
    if not backend.FIRST_ORDER_LP:
        raise SolverError(
            f"solver {backend.name!r} has no first-order LP mode", backend=backend.name, status="unsupported"
        )
    n, p = A_.shape
    c = np.zeros(p + 1)
    c[-1] = 1.0
    sol = solvers.solve_lp(
        c,
        np.hstack([A_, -np.ones((n, 1))]),
        b_ - delta,
        bounds=[(lo, hi)] * p + [(0.0, None)],
        solver=backend.name,
        options=backend.first_order_options(max_iter=int(max_iter)),
    )
    x = np.clip(np.asarray(sol.x[:p]), lo, hi)
    return x if _meets(A_, b_, x, lo, hi) else None
