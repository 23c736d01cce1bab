"""(Private.) Min-norm point and width of a body known only through its separation oracle, by cutting
planes: what ``min_norm_point(method="ellipsoid")`` and ``width`` run on a separation-only body.

* ``_min_norm_by_cuts``: min t over the epigraph K' = {(x, t) : x ∈ K, ‖x‖ <= t} (``bodies.NormEpigraph``),
  whose separation oracle is K's cut (lifted with a 0 in t) or, for x ∈ K with ‖x‖ > t, the cut
  (x/‖x‖)·y − s <= 0; every cut is read within the oracle tolerance, so a flat K still works. The
  ellipsoid method minimises t to ``tol``: ‖x̂‖ − ‖x*‖ <= tol and, by strong convexity of ‖·‖² on K,
  ‖x̂ − x*‖² <= 2‖x̂‖·tol. On ``benchmarks/engine_separation.py`` (random polytopes with 3n rows and a box,
  3 seeds) n = 5 / 10 / 20 / 40 take 0.04 / 0.15 / 0.47 / 2.0 s, ‖x̂ − x*‖ <= 7e-5. ACCPM on the same
  epigraph takes 0.9–1.9 s at n = 20 and 15 s on a flat 3-d body that the relaxed ellipsoid finishes in
  0.01 s.
* ``_width_by_cuts``: two ellipsoid minimisations of ±u·x (cuts read within ``oracle_tol``, no flat stop):
  n = 5 / 10 / 20 / 40 take 0.07 / 0.3 / 1.1 / 4.9 s, error <= 6e-8. ACCPM needs fewer oracle calls on
  full-dimensional bodies but exhausts its 1,900-iteration budget on a flat 3-d body.

Both need a ball B(center, radius) that contains the body (or at least its min-norm point / extreme points).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from ._validate import as_vector
from .bodies import ConvexBody, NormEpigraph
from .ellipsoid import ellipsoid
from .errors import EmptyBodyError, MissingOracleError, OracleError
from .results import EllipsoidResult


def _start(body: ConvexBody, what: str, center: ArrayLike | None, radius: float | None) -> tuple[np.ndarray, float]:
    if not body.has_separate:
        raise MissingOracleError(
            f"{what} needs an explicit body{', a maximize oracle' if what == 'width' else ''} "
            f"or a separation oracle; this {type(body).__name__} has none of these"
        )
    if radius is None:
        raise MissingOracleError(
            f"{what} on a separation-only body runs cutting planes from a ball containing "
            "the body: pass radius= (and center=, default 0)"
        )
    c = np.zeros(body.dim) if center is None else as_vector(center, "center", body.dim)
    r = float(radius)
    if not math.isfinite(r) or r <= 0:
        raise ValueError(f"radius must be positive and finite, got {radius}")
    return c, r


def _solved(res: EllipsoidResult, what: str) -> np.ndarray:
    if res.status == "empty":
        raise EmptyBodyError(f"{what}: the body has no point in the given ball")
    if res.status != "optimal":
        raise OracleError(
            f"{what}: the cutting-plane method stopped with status {res.status!r} after "
            f"{res.iterations} iterations (raise max_iter or loosen tol)"
        )
    assert res.x is not None  # an optimal result carries its point
    return res.x


def _min_norm_by_cuts(
    body: ConvexBody,
    *,
    center: ArrayLike | None = None,
    radius: float | None = None,
    tol: float = 1e-8,
    oracle_tol: float = 1e-9,
    max_iter: int | None = None,
    solver: str | None = None,
) -> np.ndarray:
    """argmin_{x ∈ K} ‖x‖ through K's separation oracle (the ellipsoid method on the epigraph, cuts read
    within ``oracle_tol``): ‖x̂‖ within tol of the minimum, x̂ within ~oracle_tol of K."""
    c, r = _start(body, "min_norm_point", center, radius)
    top = float(np.linalg.norm(c)) + r  # ‖x*‖ <= top for x* in B(c, r)
    res = ellipsoid(
        NormEpigraph(body),
        np.append(c, top),
        math.hypot(r, top) * 1.01,
        objective=np.append(np.zeros(body.dim), 1.0),
        tol=tol,
        max_iter=max_iter,
        flat_tol=0.0,
        oracle_tol=oracle_tol,
        solver=solver,
    )
    return _solved(res, "min_norm_point")[:-1]


_RESTARTS = 2  # fresh ellipsoids started, after one lost float64 resolution, from a ball around the last one


def _restarting(run: Callable[[np.ndarray, float], EllipsoidResult], c: np.ndarray, r: float) -> EllipsoidResult:
    """``run(center, radius)``, started again when it lost float64 resolution (a semi-axis ratio below
    ~6e-14) before certifying its answer: from the ball B(x̂, 2r) around its best point x̂, which holds the
    body (x̂ lies in B(c, r), which holds the body) and starts round, with the resolution back. The final
    ellipsoid itself is no guide: it can be a needle (semi-axes 6e8 and 1e-13 on a random 4-d polytope)."""
    res = run(c, r)
    for _ in range(_RESTARTS):
        if res.status != "max_iter" or "lost float64 resolution" not in res.message or res.x is None:
            break
        res = run(res.x.copy(), 2.0 * r)
    return res


def _width_by_cuts(
    body: ConvexBody,
    u: np.ndarray,
    *,
    center: ArrayLike | None = None,
    radius: float | None = None,
    tol: float = 1e-8,
    oracle_tol: float = 1e-9,
    max_iter: int | None = None,
    solver: str | None = None,
) -> float:
    """max u·x − min u·x over K through its separation oracle (two ellipsoid minimisations of ±u·x, each to
    tol, cuts read within ``oracle_tol``)."""
    c, r = _start(body, "width", center, radius)
    ends = []
    for sign in (1.0, -1.0):

        def run(c0: np.ndarray, r0: float, sign: float = sign) -> EllipsoidResult:
            return ellipsoid(
                body,
                c0,
                r0,
                objective=sign * u,
                tol=tol,
                max_iter=max_iter,
                flat_tol=0.0,
                oracle_tol=oracle_tol,
                solver=solver,
            )

        ends.append(float(u @ _solved(_restarting(run, c, r), "width")))
    return max(ends[1] - ends[0], 0.0)
