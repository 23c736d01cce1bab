"""Analytic-centre cutting-plane method (ACCPM): feasibility and linear minimisation with a separation oracle.

The localisation set is P = {x : C x <= d, lo <= x <= hi} (the cuts so far plus the box around the start
ball). Each query point is its analytic centre argmin -Σ w_i log(d_i - c_iᵀx) - Σ log(x - lo) - Σ log(hi - x),
found by infeasible-start Newton on (x, s) with C x + s = d (Boyd & Vandenberghe §10.3) warm-started
from the previous centre. Cuts are kept while there are at most ``max_cuts``; beyond that the least
relevant ones (largest slack in Dikin-ellipsoid units, s_i/‖c_i‖_{H⁻¹}) are dropped down to ``keep_cuts``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ._validate import as_count, positive
from .backends import backend_name
from .bodies import ConvexBody, checked_separate, says_empty
from .ellipsoid import _check_common
from .errors import SolverError
from .results import EllipsoidResult, Status

__all__ = ["cutting_plane"]


class _CutArchive:
    """Every cut of a run as unit rows C x <= d, in a buffer that doubles when full."""

    def __init__(self, n: int) -> None:
        self.C = np.empty((16, n))
        self.d = np.empty(16)
        self.size = 0

    def add(self, normal: np.ndarray, offset: float) -> None:
        if self.size == self.d.shape[0]:
            self.C = np.vstack([self.C, np.empty_like(self.C)])
            self.d = np.concatenate([self.d, np.empty_like(self.d)])
        nrm = float(np.linalg.norm(normal))
        self.C[self.size] = normal / nrm
        self.d[self.size] = offset / nrm
        self.size += 1

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        return self.C[: self.size], self.d[: self.size]


class _Localisation:
    """Cuts C x <= d (unit rows, weights w) inside the box [lo, hi], and their analytic centre x."""

    def __init__(self, lo: np.ndarray, hi: np.ndarray, solver: str | None = None) -> None:
        self.solver = solver
        self.lo, self.hi = lo, hi
        n = lo.shape[0]
        self.C = np.zeros((0, n))
        self.d = np.zeros(0)
        self.w = np.zeros(0)
        self.x = 0.5 * (lo + hi)
        self.H = np.diag(8.0 / (hi - lo) ** 2)
        self.s = np.zeros(0)
        self.empty_slack = 0.0
        self.ambiguous = False  # the last phase-one LP could not tell whether the cuts leave slack empty_slack
        self.ambiguous_why = ""

    @property
    def m(self) -> int:
        return self.d.shape[0]

    def add(self, normal: np.ndarray, offset: float, weight: float = 1.0) -> None:
        nrm = float(np.linalg.norm(normal))
        self.C = np.vstack([self.C, normal[None, :] / nrm])
        self.d = np.append(self.d, offset / nrm)
        self.w = np.append(self.w, weight)

    def set_row(self, i: int, offset: float, weight: float) -> None:
        self.d[i], self.w[i] = offset, weight

    def keep(self, idx: np.ndarray) -> None:
        self.C, self.d, self.w = self.C[idx], self.d[idx], self.w[idx]
        self.s = self.s[idx]

    # -- analytic centre ------------------------------------------------------------------------------
    def _box(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        a, b = x - self.lo, self.hi - x
        return a, b, -1.0 / a + 1.0 / b, 1.0 / a**2 + 1.0 / b**2

    def _phi(self, x: np.ndarray, d: np.ndarray) -> float:
        """-Σ w log(d - Cx) - Σ log(x - lo) - Σ log(hi - x) (inf outside the domain)."""
        s = d - self.C @ x
        a, b = x - self.lo, self.hi - x
        if np.any(s <= 0) or np.any(a <= 0) or np.any(b <= 0):
            return math.inf
        return float(-self.w @ np.log(s) - np.sum(np.log(a)) - np.sum(np.log(b)))

    def centre(self, *, max_newton: int = 100, decrement_tol: float = 1e-6) -> bool:
        """Move x to the analytic centre by damped Newton from a strictly feasible start.

        The start is the previous centre if it is still strictly inside, else a point on a ray from it
        (along -H⁻¹c_i, then -c_i, for the violated row i) past row i and before any other row, else the
        phase-one LP point. Returns False when the phase-one LP finds no common slack >= ``empty_slack``.
        """
        x = self._strict_start()
        if x is None:
            return False
        for _ in range(max_newton):
            s = self.d - self.C @ x
            _, _, g_b, h_b = self._box(x)
            ws = self.w / s
            grad = self.C.T @ ws + g_b
            H = (self.C.T * (ws / s)) @ self.C
            H[np.diag_indices_from(H)] += h_b
            dx = -_spd_solve(H, grad)
            lam2 = float(-grad @ dx)
            if lam2 <= decrement_tol:
                break
            t = 1.0 if lam2 < 0.25 else 1.0 / (1.0 + math.sqrt(lam2))  # damped step stays in the domain
            phi0 = self._phi(x, self.d)
            while t > 1e-12 and self._phi(x + t * dx, self.d) > phi0 - 0.25 * t * lam2:
                t *= 0.5
            if t <= 1e-12:
                break
            x = x + t * dx
        slack = self.d - self.C @ x
        self.x, self.s = x, slack
        _, _, _, h_b = self._box(x)
        H = (self.C.T * (self.w / slack**2)) @ self.C
        H[np.diag_indices_from(H)] += h_b
        self.H = H
        return True

    def _interior(self, y: np.ndarray) -> bool:
        """Every row and box side has slack > 1e-9·(box width): a safe Newton start."""
        eps = 1e-9 * float(np.min(self.hi - self.lo))
        return bool(np.all(self.C @ y < self.d - eps) and np.all(y > self.lo + eps) and np.all(y < self.hi - eps))

    def _strict_start(self) -> np.ndarray | None:
        x = self.x
        if self._interior(x):
            return x
        viol = self.C @ x - self.d
        i = int(np.argmax(viol))
        if np.sum(viol >= -1e-9 * float(np.min(self.hi - self.lo))) == 1:
            others = np.arange(self.m) != i
            for u in (_spd_solve(self.H, self.C[i]), self.C[i]):
                y = self._ray_point(x, -u, i, others)
                if y is not None:
                    return y
        z, xz, margin = self.phase_one()
        if z < self.empty_slack:
            self.ambiguous = z >= self.empty_slack - margin
            h = 0.5 * float(np.max(self.hi - self.lo))
            self.ambiguous_why = (
                f"the phase-one LP cannot tell whether the cuts leave slack oracle_tol/2: at radius {h:.3g} it "
                f"solves in units {h / 1e12:.1e} times the box's (start from a ball of radius <= 1e12 around the body)"
            )
            return None
        # past radii of ~1e20 the LP's point can round onto a box side (x = hi = 7.1e20), where the barrier is
        # infinite: keep it inside by _interior's margin
        eps = 1e-9 * (self.hi - self.lo)
        y = np.clip(xz, self.lo + eps, self.hi - eps)
        if not math.isfinite(self._phi(y, self.d)):
            y = self._polish_vertex(y, z)
        if not math.isfinite(self._phi(y, self.d)):
            # the LP claims slack z but its point violates a row: the cuts leave less room than the LP's
            # feasibility tolerance (a Newton run from there would leave the domain)
            self.ambiguous = True
            self.ambiguous_why = (
                f"the cuts leave a region thinner than the phase-one LP resolves (it reports slack {z:.1e} at a "
                "point that violates a cut)"
            )
            return None
        return y

    def _polish_vertex(self, y: np.ndarray, z: float) -> np.ndarray:
        """The phase-one LP's vertex recomputed in float64: the rows (cuts and box sides) within the LP's
        feasibility tolerance of slack z solved as [C_A 1][x; z] = d_A by least squares. The LP's own point can
        violate a row by its tolerance (1e-9 relative in HiGHS) when the cuts leave a slab of width ~1e-9
        (a flat body relaxed by oracle_tol), where Newton's barrier is infinite."""
        n = y.shape[0]
        rows = np.vstack([self.C, np.eye(n), -np.eye(n)])
        rhs = np.concatenate([self.d, self.hi, -self.lo])
        scale = 1.0 + float(np.max(np.abs(rhs)))
        active = rhs - rows @ y <= z + 1e-7 * scale
        if not np.any(active):
            return y
        M = np.hstack([rows[active], np.ones((int(active.sum()), 1))])
        sol = np.linalg.lstsq(M, rhs[active], rcond=None)[0]
        return sol[:n] if sol[n] > 0 else y

    def _ray_point(self, x: np.ndarray, u: np.ndarray, i: int, others: np.ndarray) -> np.ndarray | None:
        """x + t u with t midway between entering row i's half-space and leaving the others (or None)."""
        rate = float(self.C[i] @ u)
        if rate >= 0:
            return None
        t_in = (float(self.C[i] @ x) - self.d[i]) / -rate
        Co = self.C[others]
        cu = Co @ u
        so = self.d[others] - Co @ x
        exits = [so[cu > 0] / cu[cu > 0], (self.hi - x)[u > 0] / u[u > 0], (self.lo - x)[u < 0] / u[u < 0]]
        t_out = min((float(np.min(e)) for e in exits if e.size), default=math.inf)
        if not t_in < t_out:
            return None
        t = 0.5 * (t_in + t_out) if math.isfinite(t_out) else 2.0 * t_in + 1e-12
        y = x + t * u
        return y if self._interior(y) else None

    def relevance(self) -> np.ndarray:
        """s_i / sqrt(c_iᵀ H⁻¹ c_i): how many Dikin radii row i is from the centre (large = irrelevant)."""
        Hinv_Ct = _spd_solve(self.H, self.C.T)
        return self.s / np.sqrt(np.maximum(np.sum(self.C.T * Hinv_Ct, axis=0), 1e-300))

    def phase_one(self) -> tuple[float, np.ndarray, float]:
        """max z s.t. C x + z <= d, lo <= x <= hi (LP): the largest common slack, its point, and the slack's
        uncertainty from rescaling (0 for boxes of half-width up to 1e12).

        A wider box is solved in units x = s y with s a power of two (exact) bringing the box within 1e12, so
        the LP never reaches the backends' "infinite" bound (1e20 in HiGHS, where a box of half-width 1e20
        makes the phase-one LP unbounded); the slack is then known to about 1e-7·s only."""
        from . import solvers

        n = self.x.shape[0]
        h = 0.5 * float(np.max(self.hi - self.lo))
        scale = 1.0 if h <= 1e12 else float(2.0 ** math.ceil(math.log2(h / 1e12)))
        z_cap = 2.0 * h / scale
        c = np.zeros(n + 1)
        c[-1] = -1.0
        A = np.hstack([self.C, np.ones((self.m, 1))])
        # box rows as constraints so that their slack counts as well
        box = np.vstack([np.hstack([np.eye(n), np.ones((n, 1))]), np.hstack([-np.eye(n), np.ones((n, 1))])])
        A_ub = np.vstack([A, box])
        b_ub = np.concatenate([self.d, self.hi, -self.lo]) / scale
        bounds = [(None, None)] * n + [(None, z_cap)]
        sol = solvers.solve_lp(c, A_ub, b_ub, bounds=bounds, solver=self.solver)
        # beyond 1e12 the body's features can sit below the LP's tolerance in these units (a ball of radius 0.1
        # in a box of 1e20 looks empty): a slack below empty_slack certifies nothing there
        return -sol.value * scale, sol.x[:n] * scale, (0.0 if scale == 1.0 else math.inf)


class _Run:
    """One ACCPM run: the localisation set, the objective row, the best point, the bounds and the counters.

    ``step()`` adds the cut at the current query, re-centres and applies the stopping tests; ``prune()``
    drops the least relevant cuts; ``result()`` assembles the answer from the current state.
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
        obj_weight: float,
        stall: int,
        solver: str | None,
    ) -> None:
        n = c0.shape[0]
        self.body, self.n, self.c0, self.R, self.obj = body, n, c0, R, obj
        self.tol, self.oracle_tol, self.obj_weight, self.stall = tol, oracle_tol, obj_weight, stall
        self.loc = _Localisation(c0 - R, c0 + R, solver)
        self.drift = (
            16.0 * n * float(np.finfo(float).eps) * (R + float(np.linalg.norm(c0)))
        )  # rounding at the box's scale
        self.obj_row: int | None = None  # index of the objective cut among the rows
        self.best_x: np.ndarray | None = None
        self.best_val = math.inf
        self.lower = -math.inf
        self.obj_norm = 1.0 if obj is None else float(np.linalg.norm(obj))
        self.calls = self.free = self.it = 0
        self.progress_at, self.last = 0, (math.inf, -math.inf)
        self.archive = _CutArchive(n)  # every cut added, for the LP bound (pruning drops rows from loc only)
        self.lp_every = max(5, n)  # iterations without progress between LP bounds
        self.loc.empty_slack = 0.5 * oracle_tol

    # -- one query ----------------------------------------------------------------------------------------
    def step(self) -> EllipsoidResult | None:
        """Cut at the current query and re-centre; the result when the run ends here, else None."""
        done = self._cut_query(self.loc.x)
        if done is not None:
            return done
        self.it += 1
        try:
            found = self.loc.centre()
        except SolverError as exc:  # pragma: no cover - backend trouble
            return self.result("max_iter", f"phase-one LP failed: {exc}")
        if not found:
            return self._no_interior()
        if self.obj is not None and self.best_x is not None and self.obj_row is not None:
            return self._gap_test(self.obj_row)
        return None

    def _cut_query(self, x: np.ndarray) -> EllipsoidResult | None:
        """Add the cut for the query x: the start ball's tangent plane when x lies outside the ball (free),
        else the oracle's cut relaxed by oracle_tol, or the objective cut when x is feasible."""
        off = x - self.c0
        dist = float(np.linalg.norm(off))
        if dist > self.R + self.oracle_tol:  # outside the start ball: its tangent cut is free
            u = off / dist
            self.loc.add(u, float(u @ self.c0) + self.R)
            self.archive.add(u, float(u @ self.c0) + self.R)
            self.free += 1
            return None
        self.calls += 1
        if not np.all(np.isfinite(x)):
            return self.result("max_iter", "numerical failure: the analytic centre is not finite")
        cut = checked_separate(self.body, x.copy(), self.oracle_tol)
        if says_empty(self.body, cut, accepted=self.best_x is not None):
            return self.result("empty", "the oracle returned the cut 0·x <= b with b < 0: the body is empty")
        if cut is not None:
            nrm = float(np.linalg.norm(cut.normal))
            self.loc.add(cut.normal, cut.offset + self.oracle_tol * nrm)
            self.archive.add(cut.normal, cut.offset + self.oracle_tol * nrm)
            return None
        if self.obj is None:
            self.best_x = x.copy()
            return self.result("feasible", "the analytic centre is in the body")
        self._objective_cut(x, self.obj)
        return None

    def _objective_cut(self, x: np.ndarray, obj: np.ndarray) -> None:
        """Record a feasible query and set the row objective @ x <= best, weighted by obj_weight × (rows)."""
        val = float(obj @ x)
        if val < self.best_val:
            self.best_x, self.best_val = x.copy(), val
        weight = float(max(self.loc.m, 1)) * self.obj_weight
        if self.obj_row is None:
            self.loc.add(obj, self.best_val, weight)
            self.obj_row = self.loc.m - 1
        else:
            self.loc.set_row(self.obj_row, self.best_val / self.obj_norm, weight)

    # -- stopping tests -----------------------------------------------------------------------------------
    def _no_interior(self) -> EllipsoidResult:
        """The phase-one LP found no slack oracle_tol/2: "optimal" with a best point, else "empty" (or
        "max_iter" when the LP cannot tell at this scale)."""
        if self.loc.ambiguous:
            if self.obj_row is not None:
                self.lower = max(self.lower, self._lp_lower(self.obj_row) - self.drift * self.obj_norm)
                if self.best_val - self.lower <= self.tol:
                    return self.result("optimal", "best - lower bound from an LP over every cut so far is within tol")
            return self.result("max_iter", self.loc.ambiguous_why)
        if self.best_x is not None:
            self.lower = self.best_val
            return self.result("optimal", "no point of the cuts improves on the best value")
        return self.result("empty", "the cuts leave no point with slack oracle_tol/2 in the start box")

    def _gap_test(self, obj_row: int) -> EllipsoidResult | None:
        """Raise the dual lower bound; stop when best - lower <= tol, when that can never be certified, or
        when neither bound has improved for ``stall`` iterations."""
        drift, obj_norm, tol = self.drift, self.obj_norm, self.tol
        self.lower = max(self.lower, _dual_bound(self.loc, obj_row) * obj_norm - drift * obj_norm)
        best_val, lower = self.best_val, self.lower
        if best_val - lower <= tol:
            return self.result("optimal", "best - dual lower bound is within tol")
        if best_val - lower <= tol + drift * obj_norm and drift * obj_norm >= tol:
            # the certified gap can never fall below tol (below that level: cut on, as in ellipsoid)
            return self.result(
                "max_iter",
                f"best - dual lower bound reached the rounding level "
                f"{best_val - lower:.1e} > tol: float64 resolves the bound only to about "
                f"{drift * obj_norm:.1e} at radius {self.R:.3g} (start from a smaller ball)",
            )
        if best_val < self.last[0] or lower > self.last[1]:
            self.progress_at, self.last = self.it, (best_val, lower)
            return None
        idle = self.it - self.progress_at
        if idle % self.lp_every == 0 or idle >= self.stall:
            self.lower = max(self.lower, self._lp_lower(obj_row) - drift * obj_norm)
            if best_val - self.lower <= tol:
                return self.result("optimal", "best - lower bound from an LP over every cut so far is within tol")
            if self.lower > self.last[1]:
                self.progress_at, self.last = self.it, (best_val, self.lower)
                return None
        if idle >= self.stall:
            return self.result("stalled", self._stall_message(best_val - self.lower))
        return None

    def _lp_lower(self, obj_row: int) -> float:
        """The best weak-duality bound from every cut so far (pruned ones too): the multipliers λ >= 0 of the
        LP min ĉᵀx over all cuts and the box, put into -λᵀd + min_box (ĉ + Cᵀλ)ᵀx, which is a valid bound
        whatever the LP's accuracy (-inf when the LP gives no multipliers, fails, or the box is beyond 1e12).

        The analytic centre's own multipliers lose the pruned cuts and weight every cut by its barrier
        term: on the 6-d ball B(0, 3) with tol = 1e-6 they certify no gap below 1.1e-6, this LP 9e-8."""
        from . import solvers

        loc = self.loc
        if self.archive.size == 0 or float(np.max(loc.hi - loc.lo)) > 2e12:
            return -math.inf
        C, d = self.archive.rows()
        chat = loc.C[obj_row]
        try:
            sol = solvers.solve_lp(chat, C, d, bounds=list(zip(loc.lo, loc.hi)), solver=loc.solver)
        except SolverError:
            return -math.inf
        if sol.dual_ub is None or not np.all(np.isfinite(sol.dual_ub)):
            return -math.inf
        lam = np.maximum(sol.dual_ub, 0.0)
        r = chat + C.T @ lam
        return (-float(lam @ d) + float(np.sum(np.minimum(r * loc.lo, r * loc.hi)))) * self.obj_norm

    def _stall_message(self, gap: float) -> str:
        return (
            f"stalled: neither the best value nor the lower bound (the analytic centre's, and an LP's over all "
            f"{self.archive.size} cuts) improved in {self.stall} iterations; best - lower bound = {gap:.3g} > "
            f"tol = {self.tol:.3g}. x is the best point found (raise stall, or loosen tol)"
        )

    # -- cut management and the answer --------------------------------------------------------------------
    def prune(self, keep_cuts: int) -> None:
        """Keep the ``keep_cuts`` most relevant rows (the objective row always), in their order."""
        loc = self.loc
        rel = loc.relevance()
        protect = np.zeros(loc.m, dtype=bool)
        if self.obj_row is not None:
            protect[self.obj_row] = True
        rel[protect] = -np.inf
        idx = np.sort(np.argsort(rel, kind="stable")[:keep_cuts])
        if self.obj_row is not None:
            self.obj_row = int(np.searchsorted(idx, self.obj_row))
        loc.keep(idx)

    def result(self, status: Status, message: str) -> EllipsoidResult:
        """The run's answer: the best point, the bound, and the analytic centre with m²H⁻¹ as the ellipsoid."""
        loc, n = self.loc, self.n
        mm = float(np.sum(loc.w)) + 2 * n
        try:
            shape = mm * mm * _spd_solve(loc.H, np.eye(n))
        except np.linalg.LinAlgError:
            shape = np.full((n, n), np.nan)
        best_x, obj = self.best_x, self.obj
        return EllipsoidResult(
            status=status,
            x=None if best_x is None else best_x.copy(),
            value=None if best_x is None or obj is None else self.best_val,
            iterations=self.it,
            oracle_calls=self.calls,
            center=loc.x.copy(),
            shape=0.5 * (shape + shape.T),
            lower_bound=None if obj is None else self.lower,
            recycled_cuts=self.free,
            message=message,
        )


def cutting_plane(
    body: ConvexBody,
    center: ArrayLike,
    radius: float,
    *,
    objective: ArrayLike | None = None,
    tol: float = 1e-8,
    max_iter: int | None = None,
    oracle_tol: float = 1e-9,
    max_cuts: int | None = None,
    keep_cuts: int | None = None,
    obj_weight: float = 1.0,
    solver: str | None = None,
    stall: int | None = None,
) -> EllipsoidResult:
    """ACCPM: find a point of the body (or minimise ``objective @ x``) starting from the box around B(center, radius).

    Query = analytic centre of the cuts so far (each cut relaxed by oracle_tol, so a flat body keeps an
    interior); a query outside the ball gets the ball's tangent cut without an oracle call. A feasible
    query with an objective adds the cut objective @ x <= best, weighted in the barrier by
    obj_weight × (number of rows). The stop is best - LB <= tol with the dual bound
    LB = -Σλ_i d_i + min_box (c + Σλ_i c_i)ᵀx, λ_i = (w_i/s_i)/(w_0/s_0) at the analytic centre or λ the
    multipliers of the LP min cᵀx over every cut so far (used once the bounds stop improving), or the
    phase-one LP finding no interior below the best value. When no warm start is strictly inside the cuts, a phase-one LP over them
    decides: a common slack below oracle_tol/2 certifies "empty".

    Parameters
    ----------
    body : ConvexBody
        The body; it needs a separation oracle.
    center, radius : array_like of shape (n,), float
        The starting ball B(center, radius); the method searches the box around it.
    objective : array_like of shape (n,), optional
        Minimise ``objective @ x`` over the body (None: find a point).
    tol : float
        Optimality gap best - lower bound at which the minimisation stops.
    max_iter : int, optional
        Query budget (default 100·n² + 1000).
    oracle_tol : float
        Tolerance passed to the separation oracle; every cut is relaxed by it.
    max_cuts, keep_cuts : int, optional
        Beyond ``max_cuts`` rows (default 5·n) the least relevant (largest slack in Dikin-ellipsoid units) are
        dropped down to ``keep_cuts`` (default 3·n).
    obj_weight : float
        Barrier weight of the objective cut per row: heavier means fewer oracle calls, more Newton work.
    solver : str, optional
        LP backend of the phase-one LP (default: the engine's LP default; checked before the first oracle
        call).
    stall : int, optional
        With an objective, stop with status "stalled" (the gap reached and why in ``message``) once neither
        the best value nor the lower bound has improved for this many iterations (default max(100, 20·n)).
        After every max(5, n) such iterations the lower bound is also taken from an LP over every cut so far.

    Returns
    -------
    EllipsoidResult
        Status, point, value and lower bound as for ``ellipsoid``; ``center``/``shape`` are the analytic
        centre and m²H⁻¹ (H the barrier Hessian, m the total barrier weight), an ellipsoid that contains the
        localisation polytope at an exact centre.

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import Polytope, cutting_plane
    >>> box = Polytope(np.vstack([np.eye(2), -np.eye(2)]), np.array([2.0, 2.0, -1.0, -1.0]))  # [1, 2]²
    >>> res = cutting_plane(box, np.zeros(2), 10.0, objective=np.array([1.0, 1.0]))
    >>> res.status, round(res.value, 6)
    ('optimal', 2.0)
    """
    n, c0, R, obj, max_iter = _check_common(body, center, radius, objective, max_iter)
    tol = positive(tol, "tol")
    oracle_tol = positive(oracle_tol, "oracle_tol", strict=False)
    max_cuts = as_count(5 * n if max_cuts is None else max_cuts, "max_cuts", 0)
    keep_cuts = as_count(3 * n if keep_cuts is None else keep_cuts, "keep_cuts", 0)
    obj_weight = positive(obj_weight, "obj_weight")
    if keep_cuts < 1 or max_cuts < keep_cuts:
        raise ValueError(f"need 1 <= keep_cuts <= max_cuts, got keep_cuts={keep_cuts}, max_cuts={max_cuts}")
    if solver is not None:
        solver = backend_name(solver)
    stall = as_count(max(100, 20 * n) if stall is None else stall, "stall")
    run = _Run(body, c0, R, obj, tol=tol, oracle_tol=oracle_tol, obj_weight=obj_weight, stall=stall, solver=solver)
    while run.it < max_iter:
        done = run.step()
        if done is not None:
            return done
        if run.loc.m > max_cuts:
            run.prune(keep_cuts)
    return run.result("max_iter", f"no answer within max_iter={max_iter} queries")


def _spd_solve(H: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """H⁻¹ rhs for a symmetric positive (semi)definite H: Cholesky, else an eigenvalue-clipped inverse."""
    try:
        L = np.linalg.cholesky(H)
        return np.linalg.solve(L.T, np.linalg.solve(L, rhs))
    except np.linalg.LinAlgError:
        w, V = np.linalg.eigh(0.5 * (H + H.T))
        w = np.maximum(w, 1e-14 * max(float(w[-1]), 1e-300))
        return V @ ((V.T @ rhs) / (w if rhs.ndim == 1 else w[:, None]))


def _dual_bound(loc: _Localisation, obj_row: int) -> float:
    """Weak duality: ĉᵀx >= -Σλ_i d_i + min_box (ĉ + Σλ_i c_i)ᵀx for λ >= 0 (ĉ the unit objective row)."""
    s = loc.s
    if not np.all(s > 0):  # not an interior point: the multipliers below would have the wrong signs
        return -math.inf
    nu = loc.w / s
    lam = nu / nu[obj_row]
    lam[obj_row] = 0.0
    r = loc.C[obj_row] + loc.C.T @ lam
    box_min = float(np.sum(np.minimum(r * loc.lo, r * loc.hi)))
    return -float(lam @ loc.d) + box_min
