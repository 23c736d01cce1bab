"""Support values of a polytope: how far it reaches along directions, and its slice by a flat in the flat's
own coordinates.

- ``extents(P, U)``: (min u·x, max u·x) = (−h_P(−u), h_P(u)) over P (h_P the support function) for every
  row u of U, from one kept LP model (two LPs per direction); a side whose LP fails (empty, unbounded, solver) is −inf / +inf instead of an error, so a
  caller probing many directions keeps the ones that were answered. ``oracles.widths`` gives the widths
  max − min and raises on any failure.
- ``flat_slice(P, flat)``: P ∩ flat as a polytope in the flat's coordinates y (x = point + basis·y), or None
  when a row constant on the flat excludes it; its extents along the unit vectors are P's extent inside the
  flat.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from . import solvers
from ._validate import as_matrix
from .affine_subspace import AffineSubspace
from .bodies import Polytope
from .errors import OracleError

__all__ = ["extents", "flat_slice"]


def _side(model: solvers.LPModel, u: np.ndarray) -> float:
    """max u·x over the model's feasible set, +inf when the LP fails."""
    try:
        return float(model.maximize(u)[0])
    except OracleError:
        return float(np.inf)


def extents(
    P: Polytope,
    U: ArrayLike,
    *,
    solver: str | None = None,
    algorithm: Literal["ipm", "simplex"] = "ipm",
) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi): lo_i = min u_i·x and hi_i = max u_i·x over P for every row u_i of U.

    One LP model is kept for all directions (only the costs change); for each row, max u·x is solved, then
    max −u·x. A failed LP (P empty, unbounded along u, or a solver failure) gives +inf for hi or −inf for lo.

    Parameters
    ----------
    P : Polytope
        The body (its rows, equalities and bounds).
    U : array_like, shape (r, P.dim)
        Directions, one per row (any length; not normalised here).
    solver : str or None
        LP backend (None: the engine's default).
    algorithm : {"ipm", "simplex"}
        "ipm": interior point + crossover (fastest for unrelated objectives over many rows); "simplex":
        the dual simplex warm-started from the previous basis (fastest for few variables).

    Returns
    -------
    tuple of numpy.ndarray
        ``lo`` (r,) and ``hi`` (r,).

    Raises
    ------
    TypeError
        P is not a Polytope.
    ValueError
        U does not have P.dim columns, or ``algorithm`` is unknown.

    Examples
    --------
    >>> import numpy as np
    >>> square = Polytope(np.vstack([np.eye(2), -np.eye(2)]), [1.0, 2.0, 1.0, 2.0])   # [-1, 1] x [-2, 2]
    >>> lo, hi = extents(square, [[1.0, 0.0], [1.0, 1.0]])
    >>> lo.round(9).tolist(), hi.round(9).tolist()
    ([-1.0, -3.0], [1.0, 3.0])
    """
    if not isinstance(P, Polytope):
        raise TypeError(f"P must be a Polytope, got {type(P).__name__}")
    D = as_matrix(U, "U", P.dim)
    model = solvers.LPModel(P, solver=solver, algorithm=algorithm)
    lo, hi = np.empty(D.shape[0]), np.empty(D.shape[0])
    for i, u in enumerate(D):
        hi[i] = _side(model, u)
        lo[i] = -_side(model, -u)
    return lo, hi


def flat_slice(P: Polytope, flat: AffineSubspace, *, tol: float = 1e-12) -> Polytope | None:
    """P ∩ flat in the flat's coordinates: {y : A(p + B y) <= b, A_eq(p + B y) = b_eq, bounds} with p =
    ``flat.point`` and B = ``flat.basis``.

    Rows whose restriction to the flat vanishes (‖a B‖ <= ``tol``) are constant there: they are dropped when
    the flat's point meets them (within 1e-9) and make the slice empty otherwise (None). P's variable bounds
    become rows of the slice.

    Parameters
    ----------
    P : Polytope
        The body (dense or sparse).
    flat : AffineSubspace
        The flat, of dimension >= 1 and ambient dimension P.dim.
    tol : float
        Norm below which a restricted row counts as zero.

    Returns
    -------
    Polytope or None
        The slice over R^{flat.dim} (possibly with no rows: the whole flat), or None when the flat misses P.

    Raises
    ------
    ValueError
        The flat has dimension 0 or another ambient dimension than P.

    Examples
    --------
    >>> import numpy as np
    >>> cube = Polytope(np.vstack([np.eye(3), -np.eye(3)]), np.ones(6))
    >>> diagonal = AffineSubspace(np.zeros(3), np.ones((3, 1)))
    >>> lo, hi = extents(flat_slice(cube, diagonal), [[1.0]])
    >>> round(float(hi[0]), 9) == round(3 ** 0.5, 9) and round(float(lo[0]), 9) == -round(3 ** 0.5, 9)
    True
    """
    if flat.ambient_dim != P.dim or flat.dim < 1:
        raise ValueError(f"the flat must have dimension >= 1 in R^{P.dim}, got dim {flat.dim} in R^{flat.ambient_dim}")
    A, b = P.dense_rows() if P.has_bounds else (P.A.toarray() if sp.issparse(P.A) else P.A, P.b)
    A_loc = A @ flat.basis
    b_loc = b - A @ flat.point
    keep = np.linalg.norm(A_loc, axis=1) > tol
    if np.any(b_loc[~keep] < -1e-9):
        return None
    out = Polytope(A_loc[keep], b_loc[keep], dim=flat.dim)
    if P.A_eq.shape[0]:
        E = P.A_eq.toarray() if sp.issparse(P.A_eq) else P.A_eq
        E_loc, e_loc = E @ flat.basis, P.b_eq - E @ flat.point
        on = np.linalg.norm(E_loc, axis=1) > tol
        if np.any(np.abs(e_loc[~on]) > 1e-9):
            return None
        if on.any():
            out.add_equalities(E_loc[on], e_loc[on])
    return out
