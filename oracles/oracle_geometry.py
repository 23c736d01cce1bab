"""Min-norm point and width of a body known only through its separation oracle, by cutting planes.

* ``min_norm_by_cuts``: min t over the epigraph K' = {(x, t) : x ∈ K, ‖x‖ <= t}, whose separation oracle is
  K's cut (lifted with a 0 in t) or, for x ∈ K with ‖x‖ > t, the cut (x/‖x‖)·y − s <= 0 (valid since
  (x/‖x‖)·y <= ‖y‖ <= s). ``cutting_plane`` (ACCPM) minimises t to ``tol``, so ‖x̂‖ − ‖x*‖ <= tol and, by
  strong convexity of ‖·‖² on K, ‖x̂ − x*‖² <= ‖x̂‖² − ‖x*‖² <= 2‖x̂‖·tol.
* ``width_by_cuts``: two ACCPM minimisations of ±u·x.

Both need a ball B(center, radius) that contains the body (or at least its min-norm point / extreme points).
"""
from __future__ import annotations

import math

import numpy as np

from ._validate import as_vector
from .bodies import ConvexBody, OracleBody
from .cuts import Cut
from .cutting_plane import cutting_plane
from .errors import EmptyBodyError, MissingOracleError, OracleError

__all__ = ["min_norm_by_cuts", "width_by_cuts"]


def _start(body: ConvexBody, what: str, center, radius) -> tuple[np.ndarray, float]:
    if not body.has_separate:
        raise MissingOracleError(f"{what} needs an explicit body, a maximize oracle or a separation oracle; "
                                 f"{type(body).__name__} has none of them")
    if radius is None:
        raise MissingOracleError(f"{what} on a separation-only body runs cutting planes from a ball containing "
                                 "the body: pass radius= (and center=, default 0)")
    c = np.zeros(body.dim) if center is None else as_vector(center, "center", body.dim)
    r = float(radius)
    if not math.isfinite(r) or r <= 0:
        raise ValueError(f"radius must be positive and finite, got {radius}")
    return c, r


def _solved(res, what: str) -> np.ndarray:
    if res.status == "empty":
        raise EmptyBodyError(f"{what}: the body has no point in the given ball")
    if res.status != "optimal":
        raise OracleError(f"{what}: the cutting-plane method stopped with status {res.status!r} after "
                          f"{res.iterations} iterations (raise max_iter or loosen tol)")
    return res.x


def min_norm_by_cuts(body: ConvexBody, *, center=None, radius: float | None = None, tol: float = 1e-8,
                     max_iter: int | None = None, solver: str | None = None) -> np.ndarray:
    """argmin_{x ∈ K} ‖x‖ through K's separation oracle (ACCPM on the epigraph); ‖x̂‖ within tol of the min."""
    c, r = _start(body, "min_norm_point", center, radius)
    n = body.dim

    def separate(z: np.ndarray) -> Cut | None:
        x, t = z[:n], z[n]
        cut = body.separate(x)
        if cut is not None:
            return Cut(np.append(cut.normal, 0.0), cut.offset)
        nx = float(np.linalg.norm(x))
        if nx > t and nx > 0:
            return Cut(np.append(x / nx, -1.0), 0.0)
        return None

    top = float(np.linalg.norm(c)) + r          # ‖x*‖ <= top for x* in B(c, r)
    z0 = np.append(c, top)
    res = cutting_plane(OracleBody(n + 1, separate=separate), z0, math.hypot(r, top) * 1.01,
                        objective=np.append(np.zeros(n), 1.0), tol=tol, max_iter=max_iter, solver=solver)
    return _solved(res, "min_norm_point")[:n]


def width_by_cuts(body: ConvexBody, u: np.ndarray, *, center=None, radius: float | None = None,
                  tol: float = 1e-8, max_iter: int | None = None, solver: str | None = None) -> float:
    """max u·x − min u·x over K through its separation oracle (two ACCPM minimisations, each to tol)."""
    c, r = _start(body, "width", center, radius)
    ends = []
    for sign in (1.0, -1.0):
        res = cutting_plane(body, c, r, objective=sign * u, tol=tol, max_iter=max_iter, solver=solver)
        ends.append(float(u @ _solved(res, "width")))
    return max(ends[1] - ends[0], 0.0)
