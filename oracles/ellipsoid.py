"""The ellipsoid method: feasibility and linear minimisation with a separation oracle only.

E = {c + J z : ‖z‖ <= 1} = {y : (y - c)ᵀ (J Jᵀ)⁻¹ (y - c) <= 1}. A cut aᵀy <= b with α = (aᵀc - b)/‖Jᵀa‖
replaces E by the least-volume ellipsoid containing E ∩ {aᵀy <= b} (the deep-cut update):
c' = c - (1 + nα)/(n + 1) · J v,  J' = √δ · J (I - k v vᵀ),  v = Jᵀa/‖Jᵀa‖,
δ = n²(1 - α²)/(n² - 1),  (1 - k)² = 1 - σ,  σ = 2(1 + nα)/((n + 1)(1 + α)).
The factor J is updated instead of the shape P = J Jᵀ, so P stays symmetric positive semidefinite by
construction and thin semi-axes (flat bodies) are resolved to eps·‖J‖ rather than √eps·‖J‖.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from ._validate import as_count, as_matrix, as_vector, norm, positive
from ._validate import radius as check_radius
from .backends import backend_name
from .bodies import ConvexBody, checked_separate, says_empty
from .cuts import Cut, ParallelCut
from .errors import MissingOracleError
from .results import EllipsoidResult, Status

__all__ = ["Ellipsoid", "ellipsoid"]

UpdateStatus = Literal["success", "empty", "no_effect"]
_Halfspace = tuple[np.ndarray, float]  # (a, b): the cut aᵀy <= b

# a cut at a point of the flat with ‖Vᵀa‖ <= _STEEP ‖a‖ is almost orthogonal to it: the flat leaves the body's
# tolerance band there, so it is tilted against the body and the optimum over the section may be that of a slice
_STEEP = 1e-2
_ALPHA_MAX = 1.0 - 1e-12  # alpha in [_ALPHA_MAX, 1] leaves (at most) one point: keep a sliver instead


def _resolution(n: int) -> float:
    """Smallest semi-axis ratio s_min/s_max at which the factor J still locates the thin directions (below it
    rounding in J swamps them: a unit ball searched from radius 1e50 is lost at ratio 1e-17)."""
    return 64.0 * n * float(np.finfo(float).eps)


class Ellipsoid:
    """E = {center + factor @ z : ‖z‖ <= 1}; ``shape = factor @ factorᵀ`` is the matrix P of (y-c)ᵀP⁻¹(y-c) <= 1.

    ``update(cut)`` supports central (α = 0), deep (α > 0), shallow (-1/n < α < 0) and parallel cuts and
    returns ``"success"``, ``"empty"`` (α > 1: the cut misses E) or ``"no_effect"`` (α <= -1/n, or a cut
    direction along which E has zero width). ``log_volume`` = log(vol E / vol unit ball) never increases.

    Parameters
    ----------
    center : array_like of shape (n,)
        The centre c.
    shape : array_like of shape (n, n)
        The symmetric positive definite P (``Ellipsoid.ball`` and ``Ellipsoid.from_factor`` build one from a
        radius or a factor instead).

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import Cut, Ellipsoid
    >>> E = Ellipsoid.ball(np.zeros(2), 1.0)
    >>> E.update(Cut(np.array([1.0, 0.0]), 0.0)), bool(E.center[0] < 0)   # central cut: keep x0 <= 0
    ('success', True)
    """

    def __init__(self, center: ArrayLike, shape: ArrayLike) -> None:
        c = as_vector(center, "center")
        P = as_matrix(shape, "shape", c.shape[0])
        if P.shape[0] != c.shape[0]:
            raise ValueError(f"shape must be ({c.shape[0]}, {c.shape[0]}), got {P.shape}")
        if not np.allclose(P, P.T, rtol=1e-10, atol=1e-12 * max(1.0, float(np.abs(P).max()))):
            raise ValueError("shape must be symmetric")
        try:
            J = np.linalg.cholesky(0.5 * (P + P.T))
        except np.linalg.LinAlgError:
            raise ValueError("shape must be positive definite") from None
        self._init(c, J)

    def _init(self, c: np.ndarray, J: np.ndarray) -> None:
        self._c = np.array(c, dtype=float)
        self._J = np.array(J, dtype=float)
        self.dim = self._c.shape[0]
        sign, logdet = np.linalg.slogdet(self._J)
        self._log_volume = float(logdet) if sign != 0 else -math.inf

    @classmethod
    def ball(cls, center: ArrayLike, radius: float) -> Ellipsoid:
        """The ball B(center, radius)."""
        c = as_vector(center, "center")
        r = check_radius(radius, "radius")
        return cls.from_factor(c, r * np.eye(c.shape[0]))

    @classmethod
    def from_factor(cls, center: ArrayLike, factor: ArrayLike) -> Ellipsoid:
        """E = {center + factor @ z : ‖z‖ <= 1} for a square non-singular factor."""
        c = as_vector(center, "center")
        J = as_matrix(factor, "factor", c.shape[0])
        if J.shape[0] != c.shape[0]:
            raise ValueError(f"factor must be ({c.shape[0]}, {c.shape[0]}), got {J.shape}")
        E = cls.__new__(cls)
        E._init(c, J)
        return E

    def copy(self) -> Ellipsoid:
        """An independent ellipsoid with the same centre and factor."""
        return Ellipsoid.from_factor(self._c, self._J)

    def __repr__(self) -> str:
        return f"Ellipsoid(dim={self.dim}, log_volume={self._log_volume:.4g})"

    # -- views ------------------------------------------------------------------------------------
    @property
    def center(self) -> np.ndarray:
        return self._c.copy()

    @property
    def factor(self) -> np.ndarray:
        return self._J.copy()

    @property
    def shape(self) -> np.ndarray:
        """P = J Jᵀ (symmetric positive semidefinite by construction)."""
        return self._J @ self._J.T

    @property
    def log_volume(self) -> float:
        """log(vol E / vol of the unit ball) = log |det J|."""
        return self._log_volume

    def half_width(self, normal: ArrayLike) -> float:
        """max over E of aᵀ(y - c) = ‖Jᵀa‖ (for a unit a: the half-width of E along a)."""
        return float(np.linalg.norm(self._J.T @ as_vector(normal, "normal", self.dim)))

    def semi_axes(self) -> tuple[np.ndarray, np.ndarray]:
        """(lengths ascending, directions as columns): E = {c + Σ t_i l_i u_i : ‖t‖ <= 1}."""
        U, s, _ = np.linalg.svd(self._J)
        order = np.argsort(s)
        return s[order], U[:, order]

    def thin_axes(self, width: float) -> tuple[np.ndarray, np.ndarray]:
        """(directions as columns, semi-axes) of the semi-axes shorter than ``width``: E, hence every set it
        contains, lies in the slab |uᵀ(y - c)| <= s along each such direction u."""
        s, U = self.semi_axes()
        k = int(np.sum(s < width))
        return U[:, :k], s[:k]

    def contains(self, points: ArrayLike, tol: float = 0.0) -> np.ndarray | bool:
        """‖J⁻¹(y - c)‖ <= 1 + tol for a point (bool) or each row of a 2-D array (bool array)."""
        Y = as_vector(points, "points", self.dim) if np.ndim(points) == 1 else as_matrix(points, "points", self.dim)
        D = (np.atleast_2d(Y) - self._c).T
        try:
            Z = np.linalg.solve(self._J, D)
            inside = np.linalg.norm(Z, axis=0) <= 1.0 + tol
        except np.linalg.LinAlgError:  # a degenerate (flat) ellipsoid: points off its span are outside
            Z = np.linalg.pinv(self._J) @ D
            off = np.linalg.norm(self._J @ Z - D, axis=0) > 1e-12 * max(1.0, float(np.abs(D).max(initial=0.0)))
            inside = (np.linalg.norm(Z, axis=0) <= 1.0 + tol) & ~off
        return bool(inside[0]) if Y.ndim == 1 else inside

    def alpha(self, cut: Cut) -> float:
        """Depth of the cut in units of E's half-width along it: (aᵀc - b)/‖Jᵀa‖ (inf if that width is 0)."""
        tau = self.half_width(cut.normal)
        viol = float(cut.normal @ self._c - cut.offset)
        if tau == 0.0:
            return math.inf if viol > 0 else -math.inf
        return viol / tau

    # -- updates ----------------------------------------------------------------------------------
    def update(self, cut: Cut | ParallelCut) -> UpdateStatus:
        """Replace E by the least-volume ellipsoid containing E ∩ cut; see the module docstring."""
        if isinstance(cut, ParallelCut):
            return self._update_parallel(cut)
        if not isinstance(cut, Cut):
            raise TypeError(f"cut must be a Cut or ParallelCut, got {type(cut).__name__}")
        a = self._check_normal(cut.normal)
        nrm = norm(a)  # a unit normal: ‖Jᵀa‖² of a normal near 1e200 would overflow
        return self._cut(a / nrm, cut.offset / nrm)

    def _cut(self, a: np.ndarray, b: float) -> UpdateStatus:
        """update for the cut aᵀy <= b without argument checks (the drivers' hot path)."""
        w = self._J.T @ a
        tau = math.sqrt(float(w @ w))
        if not tau > 0.0:
            return "empty" if float(a @ self._c) > b else "no_effect"
        return self._single(w / tau, (float(a @ self._c) - b) / tau)

    def _alpha(self, a: np.ndarray, b: float) -> float:
        w = self._J.T @ a
        tau = math.sqrt(float(w @ w))
        viol = float(a @ self._c) - b
        if tau == 0.0:
            return math.inf if viol > 0 else -math.inf
        return viol / tau

    def _half_width(self, a: np.ndarray) -> float:
        w = self._J.T @ a
        return math.sqrt(float(w @ w))

    def _check_normal(self, normal: np.ndarray) -> np.ndarray:
        if normal.shape != (self.dim,):
            raise ValueError(f"cut.normal must have shape ({self.dim},), got {normal.shape}")
        if not np.any(normal):
            raise ValueError("cut.normal must be non-zero")
        return normal

    def _single(self, v: np.ndarray, alpha: float) -> UpdateStatus:
        """Cut {z : vᵀz <= -alpha} of the unit ball in the coordinates y = c + J z (‖v‖ = 1)."""
        n = self.dim
        if alpha > 1.0:
            return "empty"
        if n == 1:
            if alpha <= -1.0:
                return "no_effect"
            alpha = min(alpha, _ALPHA_MAX)
            Jv = self._J @ v
            self._c -= 0.5 * (1.0 + alpha) * Jv
            self._J *= 0.5 * (1.0 - alpha)
            self._log_volume += math.log(0.5 * (1.0 - alpha))
            return "success"
        if alpha <= -1.0 / n:
            return "no_effect"
        alpha = min(alpha, _ALPHA_MAX)
        rho = (1.0 + n * alpha) / (n + 1.0)
        one_minus_sigma = (n - 1.0) * (1.0 - alpha) / ((n + 1.0) * (1.0 + alpha))
        delta = n * n * (1.0 - alpha) * (1.0 + alpha) / (n * n - 1.0)
        self._apply(v, rho, one_minus_sigma, delta)
        return "success"

    def _apply(self, v: np.ndarray, rho: float, one_minus_sigma: float, delta: float) -> None:
        """c -= ρ J v;  J <- √δ J (I - k v vᵀ) with (1 - k)² = 1 - σ;  log vol += (n/2) log δ + ½ log(1 - σ)."""
        Jv = self._J @ v
        self._c -= rho * Jv
        k = 1.0 - math.sqrt(one_minus_sigma)
        self._J -= k * np.outer(Jv, v)
        self._J *= math.sqrt(delta)
        self._log_volume += 0.5 * self.dim * math.log(delta) + 0.5 * math.log(one_minus_sigma)

    def _update_parallel(self, cut: ParallelCut) -> UpdateStatus:
        """Slab lower <= aᵀy <= upper: the two-sided update (Bland–Goldfarb–Todd; ellalgo's (ρ, σ, δ))."""
        a = self._check_normal(cut.normal)
        nrm = norm(a)
        a, lower_b, upper_b = a / nrm, cut.lower / nrm, cut.upper / nrm
        w = self._J.T @ a
        tau = float(np.linalg.norm(w))
        u0 = float(a @ self._c)
        if not tau > 0.0:
            return "no_effect" if lower_b <= u0 <= upper_b else "empty"
        v = w / tau
        zl, zu = (lower_b - u0) / tau, (upper_b - u0) / tau  # slab zl <= vᵀz <= zu in the unit ball
        if zl > 1.0 or zu < -1.0:
            return "empty"
        n = self.dim
        upper_active, lower_active = zu < 1.0, zl > -1.0
        if not (upper_active and lower_active):
            if upper_active:
                return self._single(v, -zu)
            if lower_active:
                return self._single(-v, zl)
            return "no_effect"
        if n == 1:
            width = 0.5 * (zu - zl)
            if width <= 0.0:
                width = 0.5 * (1.0 - _ALPHA_MAX)
            Jv = self._J @ v
            self._c += 0.5 * (zl + zu) * Jv
            self._J *= width
            self._log_volume += math.log(width)
            return "success"
        b0, b1 = -zu, -zl  # ellalgo's convention: b0 <= b1, cut vᵀz + b0 <= 0 and vᵀz + b1 >= 0
        eta = 1.0 + n * b0 * b1
        single = max((-zu, v), (zl, -v), key=lambda t: t[0])
        if eta <= 0.0:
            return self._single(single[1], single[0])
        z0, z1 = 1.0 - b0 * b0, 1.0 - b1 * b1
        xi = math.sqrt(max(z0 * z1 + (0.5 * n * (b1 * b1 - b0 * b0)) ** 2, 0.0))
        sigma = 2.0 * eta / (1.0 + b0 * b1 + 0.5 * n * (b0 + b1) ** 2 + xi)
        rho = 0.5 * sigma * (b0 + b1)
        delta = n * n / (n * n - 1.0) * (0.5 * (z0 + z1) + xi / n)
        one_minus_sigma = 1.0 - sigma
        if not (one_minus_sigma > 0.0 and delta > 0.0):
            one_minus_sigma = max(one_minus_sigma, (1.0 - _ALPHA_MAX) ** 2)
        if not delta > 0.0 or 0.5 * n * math.log(delta) + 0.5 * math.log(one_minus_sigma) >= 0.0:
            return self._single(single[1], single[0])
        self._apply(v, rho, one_minus_sigma, delta)
        return "success"


class _CutStore:
    """Ring buffer of unit-normal cuts already returned by the oracle (valid for the body, reused for free)."""

    def __init__(self, dim: int, capacity: int) -> None:
        self.A = np.empty((max(capacity, 0), dim))
        self.b = np.empty(max(capacity, 0))
        self.size = 0
        self._next = 0

    def add(self, normal: np.ndarray, offset: float) -> None:
        cap = self.A.shape[0]
        if cap == 0:
            return
        nrm = math.sqrt(float(normal @ normal))
        self.A[self._next] = normal / nrm
        self.b[self._next] = offset / nrm
        self._next = (self._next + 1) % cap
        self.size = min(self.size + 1, cap)

    def deepest(self, E: Ellipsoid) -> tuple[np.ndarray, float] | None:
        """The stored cut of largest α among those the centre violates, or None."""
        if self.size == 0:
            return None
        A, b = self.A[: self.size], self.b[: self.size]
        viol = A @ E._c - b
        idx = np.flatnonzero(viol > 0.0)
        if idx.size == 0:
            return None
        taus = np.linalg.norm(A[idx] @ E._J, axis=1)
        with np.errstate(over="ignore"):  # (a cut across which the ellipsoid is flat is infinitely deep: α = inf)
            alphas = viol[idx] / np.maximum(taus, 1e-300)
        i = idx[int(np.argmax(alphas))]
        return A[i].copy(), float(b[i])


class _InFlat(ConvexBody):
    """The body seen inside the flat {x0 + V z} (V orthonormal columns): z is in it when x0 + V z is in the
    body. A cut aᵀx <= b at x0 + V z becomes (Vᵀa)ᵀz <= b - aᵀx0 + tol·(‖a‖ - ‖Vᵀa‖), so that the caller's
    relaxation by tol·‖Vᵀa‖ adds up to the tol·‖a‖ the ambient cut needs to stay valid for K_tol."""

    def __init__(self, body: ConvexBody, x0: np.ndarray, V: np.ndarray) -> None:
        self.body, self.x0, self.V = body, x0, V
        self.dim = V.shape[1]
        self.steep = 0  # cuts with ‖Vᵀa‖ <= _STEEP ‖a‖

    def separate(self, x: ArrayLike, tol: float = 1e-9) -> Cut | None:
        z = np.asarray(x, dtype=float)
        cut = checked_separate(self.body, self.x0 + self.V @ z, tol)
        if cut is None:
            return None
        a = cut.normal
        a_in = self.V.T @ a
        if norm(a_in) <= _STEEP * norm(a):
            self.steep += 1
        relax = tol * max(norm(a) - norm(a_in), 0.0)
        return Cut(a_in, cut.offset - float(a @ self.x0) + relax)


def _check_body(body: ConvexBody) -> None:
    if not isinstance(body, ConvexBody):
        raise TypeError(f"body must be a ConvexBody, got {type(body).__name__}")
    if not body.has_separate:
        raise MissingOracleError(f"{type(body).__name__} has no separate oracle (a separation oracle is required)")


def _check_common(
    body: ConvexBody, center: ArrayLike, radius: float, objective: ArrayLike | None, max_iter: int | None
) -> tuple[int, np.ndarray, float, np.ndarray | None, int]:
    """Checked (n, center, radius, objective or None, max_iter) shared by ``ellipsoid`` and ``cutting_plane``."""
    _check_body(body)
    n = body.dim
    c = as_vector(center, "center", n)
    r = check_radius(radius, "radius")
    obj = None if objective is None else as_vector(objective, "objective", n)
    if obj is not None and not np.any(obj):
        raise ValueError("objective must be non-zero")
    if max_iter is None:
        max_iter = 100 * n * n + 1000
    return n, c, r, obj, as_count(max_iter, "max_iter")


class _Run:
    """One run of the ellipsoid method: the ellipsoid, the stored cuts, the best point and the counters.

    ``step()`` selects a cut, updates the ellipsoid and applies the stopping tests; ``result()`` assembles
    the answer from the current state.
    """

    def __init__(
        self,
        body: ConvexBody,
        c0: np.ndarray,
        R: float,
        obj: np.ndarray | None,
        *,
        tol: float,
        oracle_tol: float,
        flat_tol: float,
        central: bool,
        memory: int,
        budget: int,
        start: Ellipsoid | None = None,
    ) -> None:
        n = c0.shape[0]
        self.body, self.n, self.c0, self.R, self.obj = body, n, c0, R, obj
        self.obj_norm = 0.0 if obj is None else norm(obj)
        self.tol, self.oracle_tol, self.central, self.budget = tol, oracle_tol, central, budget
        self.store = _CutStore(n, memory)
        self.E = Ellipsoid.ball(c0, R) if start is None else start
        self.log_volumes = [self.E.log_volume]
        self.best_x: np.ndarray | None = None
        self.best_val = math.inf
        self.lower = -math.inf
        self.calls = self.recycled = self.it = 0
        self.check_every = max(1, n)
        self.flat_thr = self.flat_level = flat_tol * R
        self.flat: tuple[np.ndarray, np.ndarray] | None = None  # thin axes seen before a point, with an objective
        self.flat_report: tuple[np.ndarray, np.ndarray] | None = None  # thin axes the result reports (no restriction)
        self.flat_note = ""
        self.empty_thr = 0.5 * oracle_tol
        # rounding while E was large: every claim that rests on E containing the body ("empty", "optimal",
        # "flat") holds up to this absolute drift (a 1-d box found from radius 1e11 drifts by 0.17·eps·R)
        self.drift = 16.0 * n * float(np.finfo(float).eps) * (R + float(np.linalg.norm(c0)))
        self.drift_note = (
            f"float64 resolves the ellipsoid only to about {self.drift:.1e} at radius {R:.3g} (start from a "
            "smaller ball around the body, or loosen oracle_tol / tol)"
        )

    # -- one update ---------------------------------------------------------------------------------------
    def step(self) -> EllipsoidResult | None:
        """One update of the ellipsoid; the result when the run ends here, else None."""
        xc = self.E._c
        sep = self._free_cut(xc)
        if sep is None:
            asked = self._oracle_cut(xc)
            if isinstance(asked, EllipsoidResult):
                return asked
            sep = asked
        had_point = self.best_x is not None
        step = self._choose(xc, sep)
        if step is None:
            self.best_x = xc.copy()
            return self.result("feasible", "the centre of the ellipsoid is in the body")
        if self.flat is not None and not had_point and self.best_x is not None:
            return self._in_flat()
        status = self.E._cut(*step)
        self.it += 1
        self.log_volumes.append(self.E._log_volume)
        if status == "empty":
            return self._missed(step)
        if status == "no_effect":
            return self.result("max_iter", "a cut had no effect (the ellipsoid has zero width along it)")
        if self.obj is not None and self.best_x is not None:
            done = self._gap_test(self.obj)
            if done is not None:
                return done
        if self.best_x is None and self.it % self.check_every == 0:
            return self._thin_test()
        return None

    def _free_cut(self, xc: np.ndarray) -> _Halfspace | None:
        """A cut that costs no oracle call: the stored cut of largest depth that the centre violates, else the
        start ball's tangent plane when the centre lies outside B(c0, R + oracle_tol); None otherwise."""
        sep = self.store.deepest(self.E) if self.store.size else None
        if sep is None:
            off = xc - self.c0
            dist = math.sqrt(float(off @ off))
            if not dist > self.R + self.oracle_tol:
                return None
            u = off / dist
            sep = (u, float(u @ self.c0) + self.R)
        self.recycled += 1
        return sep

    def _oracle_cut(self, xc: np.ndarray) -> _Halfspace | EllipsoidResult | None:
        """The oracle's cut at the centre, relaxed by oracle_tol (valid for K_t = {separate(., oracle_tol) is
        None}, which E keeps) and stored; None when the centre is in the body; the "empty" result when the
        oracle answers 0·x <= b < 0."""
        self.calls += 1
        found = checked_separate(self.body, xc.copy(), self.oracle_tol)
        if found is None:
            return None
        if says_empty(self.body, found, accepted=self.best_x is not None):
            return self.result("empty", "the oracle returned the cut 0·x <= b with b < 0: the body is empty")
        a = found.normal
        b = found.offset + self.oracle_tol * math.sqrt(float(a @ a))
        self.store.add(a, b)
        return (a, float(a @ xc) if self.central else b)

    def _choose(self, xc: np.ndarray, sep: _Halfspace | None) -> _Halfspace | None:
        """The cut to apply: the separating cut, or the objective cut objective @ y <= best when the centre is
        feasible (recording a new best) or when that cut is the deeper one; None for a feasible centre
        without an objective."""
        obj = self.obj
        if sep is None:
            if obj is None:
                return None
            val = float(obj @ xc)
            if val < self.best_val:
                self.best_x, self.best_val = xc.copy(), val
            return (obj, self.best_val)
        if obj is not None and self.best_x is not None and self.E._alpha(obj, self.best_val) > self.E._alpha(*sep):
            return (obj, self.best_val)
        return sep

    # -- stopping tests -----------------------------------------------------------------------------------
    def _missed(self, step: _Halfspace) -> EllipsoidResult:
        """The cut missed the ellipsoid: "optimal" or "empty" when the miss exceeds rounding, else "max_iter"."""
        if (why := self._unresolved()) is not None:
            return self.result("max_iter", why)
        a_s, b_s = step
        miss = float(a_s @ self.E._c) - b_s - self.E._half_width(a_s)
        if not miss > self.drift * norm(a_s):
            return self.result(
                "max_iter", f"a cut missed the ellipsoid by {miss:.1e}, within rounding: {self.drift_note}"
            )
        if self.best_x is not None:
            self.lower = self.best_val
            return self.result("optimal", "no point of the body improves on the best value")
        return self.result("empty", "a cut missed the ellipsoid: the body has no point in the starting ball")

    def _gap_test(self, obj: np.ndarray) -> EllipsoidResult | None:
        """Raise the lower bound to min over E of the objective (less the rounding allowance) and stop when
        best - lower <= tol is certified, or can never be."""
        E = self.E
        self.lower = max(self.lower, float(obj @ E._c) - E._half_width(obj) - self.drift * self.obj_norm)
        if not self.best_val - self.lower <= self.tol + self.drift * self.obj_norm:
            return None
        if (why := self._unresolved()) is not None:
            self.lower = -math.inf
            return self.result("max_iter", why)
        if self.best_val - self.lower <= self.tol:
            return self.result("optimal", "the gap best - min over the ellipsoid is within tol")
        if self.drift * self.obj_norm >= self.tol:  # the certified gap can never fall below tol
            return self.result(
                "max_iter",
                f"the gap reached the rounding level {self.best_val - self.lower:.1e} > tol: {self.drift_note}",
            )
        # the gap is within tol but not yet with the rounding allowance (< tol) added: cut on. Stopping here
        # would fail a run whose gap first comes within tol in that window (8.5e-13 wide at R = 8.5,
        # ‖objective‖ = 4.7)
        return None

    def _thin_test(self) -> EllipsoidResult | None:
        """Before a point is found: "empty" when E is thinner than oracle_tol/2, "flat" when semi-axes fall
        below flat_tol·radius, "max_iter" when the thin axes are rounding noise."""
        empty_thr, flat_thr, drift = self.empty_thr, self.flat_thr, self.drift
        U, s = self.E.thin_axes(max(flat_thr, empty_thr))
        if not s.size:
            return None
        # below the resolution a computed semi-axis is rounding noise of size res·s_max at most
        floor = _resolution(self.n) * float(np.linalg.norm(self.E._J, 2))
        s = np.maximum(s, floor) + drift
        if s[0] < empty_thr:
            return self.result("empty", "the ellipsoid became thinner than the oracle tolerance")
        if s[0] - drift < empty_thr or (floor >= empty_thr and s[0] - drift <= floor):
            return self.result(
                "max_iter",
                self._unresolved()
                or f"the ellipsoid became thinner than the oracle tolerance, within rounding: {self.drift_note}",
            )
        keep = s < flat_thr
        if np.any(keep) and flat_thr > 0 and self.obj is not None:  # find a point, then optimise in the flat
            self.flat, self.flat_thr = (U[:, keep], s[keep]), 0.0
            return None
        if np.any(keep) and flat_thr > 0:
            return self.result(
                "flat",
                f"{int(keep.sum())} semi-axes below flat_tol·radius = {flat_thr:.3g} "
                f"before a point was found: the body lies within {float(s[keep].max()):.3g} of "
                "the centre along flat_directions (a full-dimensional body this thin "
                "relative to the radius is reported flat too; flat_tol=0 searches on)",
                (U[:, keep], s[keep]),
            )
        return None

    def _unresolved(self) -> str | None:
        """None while E's factor resolves its thin axes, else the honest "max_iter" message (an answer that
        rests on E's geometry, "empty", "optimal" or "flat", cannot be certified any more)."""
        sv = np.linalg.svd(self.E._J, compute_uv=False)
        ratio = float(sv[-1] / sv[0]) if sv[0] > 0 else 0.0
        if ratio >= _resolution(self.n):
            return None
        return (
            f"lost float64 resolution: the ellipsoid's semi-axes span a ratio {ratio:.1e} (below "
            f"{_resolution(self.n):.0e}) before an answer was certified; start from a smaller ball around the body "
            f"(radius {self.R:.3g} against the body's scale)"
        )

    def run(self) -> EllipsoidResult:
        """Steps until an answer or until ``budget`` updates."""
        while self.it < self.budget:
            done = self.step()
            if done is not None:
                return done
        return self.result("max_iter", f"no answer within max_iter={self.budget} updates")

    # -- a flat body with an objective --------------------------------------------------------------------
    def _in_flat(self) -> EllipsoidResult:
        """The body was found flat and the centre is its first point x0: minimise over the flat x0 + span(V),
        V the ellipsoid's semi-axes at least flat_tol·radius long, by a run in k = dim V dimensions from the
        ellipsoid's section there (the thin axes at x0 are dropped), and lift its answer back."""
        assert self.obj is not None and self.best_x is not None
        s, U = self.E.semi_axes()
        thin = s < self.flat_level
        # what E's thin axes vouch for, as in the flat test: rounding noise below the resolution, plus the drift
        s = np.where(thin, np.maximum(s, _resolution(self.n) * float(np.linalg.norm(self.E._J, 2))) + self.drift, s)
        V, x0 = U[:, ~thin], self.best_x.copy()
        k, obj_in = V.shape[1], V.T @ self.obj
        note = (
            f"the body is flat: {int(thin.sum())} semi-axes fell below flat_tol·radius = {self.flat_level:.3g} "
            f"before a point was found; after {self.it} updates the run went on in the {k}-dimensional flat "
            "through the body's first point"
        )
        slack = self._thin_slack(U[:, thin], s[thin])
        if k == 0 or not norm(obj_in) > 1e-12 * self.obj_norm:
            self.lower = self.best_val - slack
            status: Status = "optimal" if slack <= self.tol + self.drift * self.obj_norm else "flat"
            return self.result(status, f"the objective is constant on the flat ({note})", (U[:, thin], s[thin]))
        R_in = float(s[~thin].max())
        section = _InFlat(self.body, x0, V)
        inner = _Run(
            section,
            np.zeros(k),
            R_in,
            obj_in,
            tol=max(self.tol - slack, 0.1 * self.tol),  # room for the thin axes' slack in the certified gap
            oracle_tol=self.oracle_tol,
            flat_tol=self.flat_level / R_in,
            central=self.central,
            memory=self.store.A.shape[0],
            budget=self.budget - self.it,
            start=Ellipsoid.from_factor(np.zeros(k), np.diag(s[~thin])),
        )
        inner.drift, inner.drift_note = max(inner.drift, self.drift), self.drift_note
        res = inner.run()
        if section.steep == 0 or res.x is None:
            return self._lifted(res, x0, V, (U[:, thin], s[thin]), note)
        return self._in_full(res, x0, V, (U[:, thin], s[thin]), section.steep)

    def _in_full(
        self, res: EllipsoidResult, x0: np.ndarray, V: np.ndarray, thin: tuple[np.ndarray, np.ndarray], steep: int
    ) -> EllipsoidResult:
        """The flat through x0 was tilted against the body (cuts nearly orthogonal to it): its answer may be
        the optimum of a slice only. Keep its best point and go on in all n dimensions from the ellipsoid at
        the restriction, which still contains the body, so the answer is certified as without a flat."""
        assert self.obj is not None and res.x is not None
        x = x0 + V @ res.x
        val = float(self.obj @ x)
        if val < self.best_val:
            self.best_x, self.best_val = x, val
        self.it += res.iterations
        self.calls += res.oracle_calls
        self.recycled += res.recycled_cuts
        self.flat, self.flat_report = None, thin
        self.flat_note = (
            f" (the body is flat in {thin[1].size} directions; {steep} cuts inside its flat were nearly "
            "orthogonal to it, so the run went on in all dimensions)"
        )
        return self.run()

    def _lifted(
        self, res: EllipsoidResult, x0: np.ndarray, V: np.ndarray, thin: tuple[np.ndarray, np.ndarray], note: str
    ) -> EllipsoidResult:
        """The in-flat run's answer in the ambient coordinates x = x0 + V z: the ellipsoid keeps the thin axes,
        the counters and log-volumes continue the outer run's."""
        assert self.obj is not None
        Ut, st = thin
        x = None if res.x is None else x0 + V @ res.x
        base = float(self.obj @ x0)
        slack = self._thin_slack(Ut, st)  # the optimum in the flat is the body's only up to its thin extent
        gap = math.inf if res.lower_bound is None or res.value is None else res.value - res.lower_bound + slack
        ok = gap <= self.tol + self.drift * self.obj_norm  # the gap the run itself certifies "optimal" at
        status = res.status if res.status != "optimal" or ok else "flat"
        return EllipsoidResult(
            status=status,
            x=x,
            value=None if x is None else float(self.obj @ x),
            iterations=self.it + res.iterations,
            oracle_calls=self.calls + res.oracle_calls,
            center=x0 + V @ res.center,
            shape=V @ res.shape @ V.T + (Ut * st**2) @ Ut.T,
            lower_bound=None if res.lower_bound is None else res.lower_bound + base - slack,
            log_volumes=np.concatenate(
                [self.log_volumes, res.log_volumes + float(np.sum(np.log(np.maximum(st, 1e-300))))]
            ),
            flat_directions=np.hstack([Ut, V @ res.flat_directions]),
            flat_widths=np.concatenate([st, res.flat_widths]),
            recycled_cuts=self.recycled + res.recycled_cuts,
            message=f"{res.message} ({note})",
        )

    def _thin_slack(self, Ut: np.ndarray, st: np.ndarray) -> float:
        """How far the objective can fall across the thin axes: the body spans at most 2 s_j along axis u_j of
        E, so Σ_j 2 s_j |cᵀu_j| bounds what the optimum over the flat through x0 can miss."""
        assert self.obj is not None
        return float(2.0 * np.sum(st * np.abs(Ut.T @ self.obj)))

    # -- the answer ---------------------------------------------------------------------------------------
    def result(
        self, status: Status, message: str, flat: tuple[np.ndarray, np.ndarray] | None = None
    ) -> EllipsoidResult:
        """The run's answer with the current ellipsoid, best point and counters."""
        flat = flat if flat is not None else self.flat_report
        dirs, widths = flat if flat is not None else (np.zeros((self.n, 0)), np.zeros(0))
        best_x, obj = self.best_x, self.obj
        return EllipsoidResult(
            status=status,
            x=None if best_x is None else best_x.copy(),
            value=None if best_x is None or obj is None else self.best_val,
            iterations=self.it,
            oracle_calls=self.calls,
            center=self.E.center,
            shape=self.E.shape,
            lower_bound=None if obj is None else self.lower,
            log_volumes=np.asarray(self.log_volumes),
            flat_directions=dirs,
            flat_widths=widths,
            recycled_cuts=self.recycled,
            message=message + self.flat_note,
        )


def ellipsoid(
    body: ConvexBody,
    center: ArrayLike,
    radius: float,
    *,
    objective: ArrayLike | None = None,
    tol: float = 1e-8,
    max_iter: int | None = None,
    cut: Literal["deep", "central"] = "deep",
    flat_tol: float = 1e-7,
    oracle_tol: float = 1e-9,
    memory: int | None = None,
    solver: str | None = None,
) -> EllipsoidResult:
    """Find a point of the body, or minimise ``objective @ x`` over it, starting from E_0 = B(center, radius).

    Each step cuts E_k with a stored cut the centre violates (no oracle call) or else with
    ``body.separate(center, oracle_tol)``; with an objective, a feasible centre gives the cut
    objective @ y <= best value (central when the centre is the new best), and the stop is
    best - min_{E_k} objective <= tol. Emptiness is certified by a cut missing E_k or by E_k's smallest
    semi-axis falling below oracle_tol/2 (a non-empty body, enlarged by oracle_tol, would contain such a
    ball). A centre outside B(center, radius) is cut by the ball's tangent plane without an oracle call, so
    the method works on body ∩ ball.

    Parameters
    ----------
    body : ConvexBody
        The body; it needs a separation oracle.
    center, radius : array_like of shape (n,), float
        The starting ball B(center, radius).
    objective : array_like of shape (n,), optional
        Minimise ``objective @ x`` over the body (None: find a point).
    tol : float
        Optimality gap best - lower bound at which the minimisation stops.
    max_iter : int, optional
        Update budget (default 100·n² + 1000).
    cut : {"deep", "central"}
        "central" moves every separating cut through the centre (and stores none).
    flat_tol : float
        Before a point is found, semi-axes below flat_tol·radius mean the body is flat (0: never tested).
        Without an objective the run stops with status "flat" and the thin directions. With one it goes on
        to a point x0 of the body, then minimises over the flat through x0 spanned by the wide semi-axes (a
        run in that many dimensions, from the ellipsoid's section) and returns that answer lifted back, with
        ``flat_directions``/``flat_widths`` set and the flat named in ``message``: status "optimal" when the
        objective can fall by at most tol across the thin axes, else "flat" with the point, its value and a
        lower bound that allows for them (set flat_tol=0 to optimise over a thin full-dimensional body).
    oracle_tol : float
        Tolerance passed to the separation oracle; every cut is relaxed by it.
    memory : int, optional
        Number of oracle cuts kept for reuse (default 10·n; 0: the textbook method).
    solver : str, optional
        Accepted like every engine routine's and checked, but unused: the method needs only the oracles.

    Returns
    -------
    EllipsoidResult
        Status "feasible", "optimal", "empty", "flat" or "max_iter", the point and value
        found, the final ellipsoid, the lower bound, log-volumes and counters.

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import Polytope, ellipsoid
    >>> box = Polytope(np.vstack([np.eye(2), -np.eye(2)]), np.array([2.0, 2.0, -1.0, -1.0]))  # [1, 2]²
    >>> res = ellipsoid(box, np.zeros(2), 10.0, objective=np.array([1.0, 1.0]))
    >>> res.status, round(res.value, 6)
    ('optimal', 2.0)
    """
    n, c0, R, obj, max_iter = _check_common(body, center, radius, objective, max_iter)
    if solver is not None:
        backend_name(solver)
    tol = positive(tol, "tol")
    oracle_tol = positive(oracle_tol, "oracle_tol", strict=False)
    flat_tol = positive(flat_tol, "flat_tol", strict=False)
    if cut not in ("deep", "central"):
        raise ValueError(f"cut must be 'deep' or 'central', got {cut!r}")
    memory = as_count(10 * n if memory is None else memory, "memory", 0)
    run = _Run(
        body,
        c0,
        R,
        obj,
        tol=tol,
        oracle_tol=oracle_tol,
        flat_tol=flat_tol,
        central=(cut == "central"),
        memory=memory if cut == "deep" else 0,
        budget=max_iter,
    )
    return run.run()
