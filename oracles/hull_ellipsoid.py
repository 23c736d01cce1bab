"""Affine hull from a separation oracle alone: the ellipsoid's thin axes (the Grötschel-Lovász-Schrijver idea).

The body K is enlarged to K_t = {x : separate(x, t) is None} (t = oracle_tol), which has volume even when K
is flat. A shallow-cut ellipsoid E = {y_c + J z : ‖z‖ <= 1} ⊇ K_t ∩ F is run in local coordinates
y of the current flat F = p + span(B): while the centre is outside K_t, deep cuts; once it is inside,
semi-axes below ``tol`` give equations uᵀx = uᵀc (K_t lies within tol of that hyperplane) and the problem
is projected onto u^⊥ through the centre (the projected ellipsoid is the section along the other principal
axes); otherwise the 2k probes c ± β s_i u_i (β = 1/(k+1)) are queried, and the first one outside K_t
gives a shallow cut. When every probe is inside, K_t ⊇ conv(probes) ⊇ c + (β/√k)(E - c): all remaining
directions are wide, and aff(K) ≈ F.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ._validate import as_count, as_vector, norm, positive
from .affine_subspace import AffineSubspace
from .bodies import ConvexBody, checked_separate
from .ellipsoid import Ellipsoid, _check_body
from .errors import EmptyBodyError, SolverError

__all__ = ["affine_hull_by_ellipsoid"]


def predicted_calls(k: int, radius: float, tol: float) -> int:
    """Oracle calls the run needs, roughly, in dimension k: every central cut shrinks the ellipsoid's volume by
    at least exp(-1/(2(k+1))), and the flat axes must shrink from ``radius`` to ``tol``, so about
    2(k+1)·k·ln(radius/tol) calls when most directions are flat (measured within 2x on flux polytopes)."""
    return int(2 * (k + 1) * k * max(np.log(max(radius, tol) / tol), 1.0)) + 1


def affine_hull_by_ellipsoid(
    body: ConvexBody,
    center: ArrayLike,
    radius: float,
    *,
    tol: float = 1e-7,
    max_iter: int | None = None,
    oracle_tol: float | None = None,
    flat: tuple[np.ndarray, np.ndarray] | None = None,
) -> AffineSubspace:
    """aff(K) for K ⊆ B(center, radius) from ``body.separate`` only.

    The returned flat contains a point within t = oracle_tol of K; on random flat polytopes (n <= 20) its
    normals match the true ones to ~1e-15 and the equations hold on K to ~t.

    Parameters
    ----------
    body : ConvexBody
        The body K; it needs a separation oracle.
    center, radius : array_like of shape (n,), float
        A ball B(center, radius) containing K.
    tol : float
        Absolute half-width below which a direction counts as flat; every equation uᵀx = uᵀc of the result
        holds on K to within about tol (|uᵀ(x - c)| <= tol for x in K_t at detection time).
    max_iter : int, optional
        The oracle-call budget (default 400·k² + 2000, k the starting dimension); exceeding it raises
        SolverError.
    oracle_tol : float, optional
        The enlargement t of K used in the oracle (default 1e-3·tol). It must be well below tol so that K_t's
        flat directions fall under tol: K_t reaches about t/σ_min(normals) along the near-null direction of
        nearly dependent hidden equalities.
    flat : tuple of ndarray, optional
        (p, B) with B orthonormal (n x k): a flat known to contain K (e.g. a polytope's explicit equalities);
        the run starts inside it, in k dimensions, instead of rediscovering it.

    Returns
    -------
    AffineSubspace
        The hull. EmptyBodyError when K has no point in the ball (a cut missed the ellipsoid, or it got
        thinner than t/2 before a point was found).

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import OracleBody, Polytope, affine_hull_by_ellipsoid
    >>> line = Polytope(np.array([[1.0, 1.0], [-1.0, -1.0], [1.0, 0.0], [-1.0, 0.0]]), np.array([1.0, -1.0, 2.0, 2.0]))
    >>> affine_hull_by_ellipsoid(OracleBody(2, separate=line.separate), np.zeros(2), 5.0).dim
    1
    """
    _check_body(body)
    n = body.dim
    c0 = as_vector(center, "center", n)
    R = positive(radius, "radius")
    tol = positive(tol, "tol")
    t = 1e-3 * tol if oracle_tol is None else positive(oracle_tol, "oracle_tol")
    if t >= tol:
        raise ValueError(f"oracle_tol must be below tol, got oracle_tol={t}, tol={tol}")
    if flat is not None:
        p0, B0 = as_vector(flat[0], "flat point", n), np.asarray(flat[1], dtype=float)
        if B0.ndim != 2 or B0.shape[0] != n:
            raise ValueError(f"flat basis must have shape ({n}, k), got {B0.shape}")
    k = n if flat is None else B0.shape[1]
    if max_iter is None:
        max_iter = 400 * k * k + 2000
    max_iter = as_count(max_iter, "max_iter")
    run = _HullRun(body, c0, R, tol, t)
    if flat is not None:
        run.p, run.B = p0.copy(), B0.copy()
        run.E = Ellipsoid.ball(np.zeros(k), R) if k else run.E
        if k == 0:
            run.point = p0.copy()
    return run.solve(int(max_iter))


_LocalCut = tuple[np.ndarray, float, float]  # (Bᵀa, b - aᵀp, ‖a‖): a cut restricted to the flat


class _HullRun:
    """State of one run: flat F = p + span(B) (B orthonormal), the ellipsoid E in local coordinates y of F
    (x = p + B y), and the last body point found."""

    def __init__(self, body: ConvexBody, c0: np.ndarray, R: float, tol: float, t: float) -> None:
        self.body, self.tol, self.t = body, tol, t
        n = c0.shape[0]
        self.p = c0.copy()
        self.B = np.eye(n)
        self.E = Ellipsoid.ball(np.zeros(n), R)
        self.point: np.ndarray | None = None
        self.calls = 0
        # rounding at the start radius: an emptiness claim must clear it (without, a box searched from radius
        # 1e50 looks empty); see ellipsoid()
        self.drift = 16.0 * n * float(np.finfo(float).eps) * (R + float(np.linalg.norm(c0)))
        self.R = R

    def _unresolved(self, what: str) -> SolverError:
        return SolverError(
            f"{what}, within rounding: float64 resolves the ellipsoid only to about {self.drift:.1e} "
            f"at radius {self.R:.3g}; start from a smaller ball around the body"
        )

    def _query(self, y: np.ndarray) -> _LocalCut | None:
        """separate at the global point p + B y, the cut restricted to the flat: (Bᵀa, b - aᵀp) or None."""
        self.calls += 1
        x = self.p + self.B @ y
        cut = checked_separate(self.body, x, self.t)
        if cut is None:
            return None
        nrm = norm(cut.normal)
        # relaxed by t so that it is valid for K_t (which the ellipsoid must keep), not only for K
        return self.B.T @ cut.normal, float(cut.offset + self.t * nrm - cut.normal @ self.p), nrm

    def _cut(self, local: _LocalCut) -> None:
        a, b, nrm = local
        if float(np.linalg.norm(a)) <= 1e-14 * nrm:
            if self.point is None:
                raise EmptyBodyError("a cut excludes the whole current flat: the body is empty")
            raise SolverError("a cut excludes the whole current flat after a projection; use a larger tol")
        if self.E._cut(a, b) == "empty":
            miss = float(a @ self.E._c) - b - self.E._half_width(a)
            if self.point is None and not miss > self.drift * float(np.linalg.norm(a)):
                raise self._unresolved(f"a cut missed the ellipsoid by {miss:.1e}")
            if self.point is None:
                raise EmptyBodyError("a cut missed the ellipsoid: the body has no point in the ball")
            raise SolverError("a cut missed the ellipsoid after a body point was found (inconsistent oracle)")

    def _project(self, s: np.ndarray, U: np.ndarray, flat: np.ndarray) -> None:
        """Fix the flat axes: F <- centre + span(B U_wide); E <- diag(s_wide) around the new origin."""
        yc = self.E._c
        self.p = self.p + self.B @ yc
        wide = ~flat
        self.B = self.B @ U[:, wide]
        k = self.B.shape[1]
        if k:
            self.E = Ellipsoid.from_factor(np.zeros(k), np.diag(s[wide]))

    def solve(self, max_iter: int) -> AffineSubspace:
        while self.calls < max_iter:
            k = self.B.shape[1]
            if k == 0:
                break
            yc = self.E._c
            cut = self._query(yc)
            if cut is not None:
                self._cut(cut)
                if self.point is None and self.calls % k == 0:
                    s = self.E.semi_axes()[0]
                    if s[0] + self.drift < 0.5 * self.t:
                        raise EmptyBodyError("the ellipsoid became thinner than the oracle tolerance: empty body")
                    if s[0] < 0.5 * self.t:
                        raise self._unresolved("the ellipsoid became thinner than the oracle tolerance")
                continue
            self.point = self.p + self.B @ yc
            s, U = self.E.semi_axes()
            flat = s <= self.tol
            if np.any(flat):
                self._project(s, U, flat)
                continue
            if self._probe(s, U):
                break
        else:
            raise SolverError(f"affine_hull_by_ellipsoid: no answer within max_iter={max_iter} oracle calls")
        if self.B.shape[1] == 0:
            self.point = self.p.copy()  # the (feasible) centre at which the last axes were fixed
        assert self.point is not None
        return AffineSubspace(self.point, self.B)

    def _probe(self, s: np.ndarray, U: np.ndarray) -> bool:
        """Query c ± β s_i u_i; apply the first cut found and return False, or True if all are inside."""
        k = s.shape[0]
        beta = 1.0 / (k + 1.0)
        yc = self.E._c.copy()
        for j in range(k - 1, -1, -1):  # widest first
            for sign in (1.0, -1.0):
                cut = self._query(yc + sign * beta * s[j] * U[:, j])
                if cut is not None:
                    self._cut(cut)
                    return False
        return True
