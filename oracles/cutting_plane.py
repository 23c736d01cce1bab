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

from ._validate import positive
from .bodies import ConvexBody
from .cuts import Cut
from .ellipsoid import _check_common
from .errors import SolverError
from .results import EllipsoidResult


class _Localisation:
    """Cuts C x <= d (unit rows, weights w) inside the box [lo, hi], and their analytic centre x."""

    def __init__(self, lo: np.ndarray, hi: np.ndarray) -> None:
        self.lo, self.hi = lo, hi
        n = lo.shape[0]
        self.C = np.zeros((0, n))
        self.d = np.zeros(0)
        self.w = np.zeros(0)
        self.x = 0.5 * (lo + hi)
        self.H = np.diag(8.0 / (hi - lo) ** 2)
        self.s = np.zeros(0)

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
        return a, b, -1.0 / a + 1.0 / b, 1.0 / a ** 2 + 1.0 / b ** 2

    def _residual(self, x: np.ndarray, s: np.ndarray, nu: np.ndarray) -> float:
        _, _, g_b, _ = self._box(x)
        r_dual_x = g_b + self.C.T @ nu
        r_dual_s = nu - self.w / s
        r_p = self.C @ x + s - self.d
        return float(math.sqrt(r_dual_x @ r_dual_x + r_dual_s @ r_dual_s + r_p @ r_p))

    def centre(self, *, max_newton: int = 200, decrement_tol: float = 1e-8) -> bool:
        """Move x to the analytic centre; False if no strictly feasible point was reached (P may be empty)."""
        x = self.x.copy()
        width = float(np.min(self.hi - self.lo))
        x = np.clip(x, self.lo + 1e-9 * width, self.hi - 1e-9 * width)
        slack = self.d - self.C @ x
        floor = max(float(np.median(slack[slack > 0])) if np.any(slack > 0) else 0.0, 1e-3 * width)
        s = np.where(slack > 0, slack, floor)
        nu = self.w / s
        feasible = bool(np.all(slack > 0))
        for _ in range(max_newton):
            a, b, g_b, h_b = self._box(x)
            r_p = self.d - self.C @ x - s
            ws2 = self.w / s ** 2
            Hm = (self.C.T * ws2) @ self.C
            Hm[np.diag_indices_from(Hm)] += h_b
            rhs = self.C.T @ (ws2 * r_p) - self.C.T @ (self.w / s) - g_b
            try:
                L = np.linalg.cholesky(Hm)
                dx = np.linalg.solve(L.T, np.linalg.solve(L, rhs))
            except np.linalg.LinAlgError:
                dx = np.linalg.lstsq(Hm, rhs, rcond=None)[0]
            ds = r_p - self.C @ dx
            nu_plus = self.w / s - ws2 * ds
            dnu = nu_plus - nu
            if feasible:
                lam2 = float(dx @ Hm @ dx)
                if lam2 <= decrement_tol:
                    break
            # largest step keeping x in the box and s > 0
            t = 1.0
            neg = ds < 0
            if np.any(neg):
                t = min(t, 0.99 * float(np.min(-s[neg] / ds[neg])))
            for arr, step in ((a, dx), (b, -dx)):
                negb = step < 0
                if np.any(negb):
                    t = min(t, 0.99 * float(np.min(-arr[negb] / step[negb])))
            r0 = self._residual(x, s, nu)
            while t > 1e-12:
                x1, s1, nu1 = x + t * dx, s + t * ds, nu + t * dnu
                if self._residual(x1, s1, nu1) <= (1.0 - 0.01 * t) * r0:
                    break
                t *= 0.5
            else:
                break
            x, s, nu = x1, s1, nu1
            if not feasible and t >= 0.99:
                # a full step: the primal residual is (nearly) gone; make s exact
                s_exact = self.d - self.C @ x
                if np.all(s_exact > 0):
                    s, feasible = s_exact, True
            elif feasible:
                s = self.d - self.C @ x
        slack = self.d - self.C @ x
        if not np.all(slack > 0):
            return False
        self.x, self.s = x, slack
        _, _, _, h_b = self._box(x)
        H = (self.C.T * (self.w / slack ** 2)) @ self.C
        H[np.diag_indices_from(H)] += h_b
        self.H = H
        return True

    def relevance(self) -> np.ndarray:
        """s_i / sqrt(c_iᵀ H⁻¹ c_i): how many Dikin radii row i is from the centre (large = irrelevant)."""
        Hinv_Ct = np.linalg.solve(self.H, self.C.T)
        return self.s / np.sqrt(np.maximum(np.sum(self.C.T * Hinv_Ct, axis=0), 1e-300))

    def phase_one(self) -> tuple[float, np.ndarray]:
        """max z s.t. C x + z <= d, lo <= x <= hi (LP): the largest common slack, and its point."""
        from . import solvers

        n = self.x.shape[0]
        z_cap = float(np.max(self.hi - self.lo))
        c = np.zeros(n + 1)
        c[-1] = -1.0
        A = np.hstack([self.C, np.ones((self.m, 1))])
        # box rows as constraints so that their slack counts as well
        box = np.vstack([np.hstack([np.eye(n), np.ones((n, 1))]), np.hstack([-np.eye(n), np.ones((n, 1))])])
        A_ub = np.vstack([A, box])
        b_ub = np.concatenate([self.d, self.hi, -self.lo])
        bounds = [(None, None)] * n + [(None, z_cap)]
        sol = solvers.solve_lp(c, A_ub, b_ub, bounds=bounds)
        return -sol.value, sol.x[:n]


def cutting_plane(body: ConvexBody, center, radius: float, *, objective=None, tol: float = 1e-8,
                  max_iter: int | None = None, oracle_tol: float = 1e-9, max_cuts: int | None = None,
                  keep_cuts: int | None = None) -> EllipsoidResult:
    """ACCPM: find a point of the body (or minimise ``objective @ x``) starting from the box around B(center, radius).

    Query = analytic centre of the cuts so far (each cut relaxed by oracle_tol, so a flat body keeps an
    interior). A feasible query with an objective adds the cut objective @ x <= best (weighted by the
    number of cuts); the stop is best - LB <= tol with the dual bound LB = -Σλ_i d_i + min_box (c + Σλ_i c_i)ᵀx,
    λ_i = (w_i/s_i)/(w_0/s_0). When Newton cannot reach a strictly feasible point, a phase-one LP over the
    cuts decides: common slack below oracle_tol/2 certifies "empty".
    Returned ``center``/``shape``: the analytic centre and m²H⁻¹ (H the barrier Hessian), an ellipsoid that
    contains the localisation polytope at an exact centre.
    """
    n, c0, R, obj, max_iter = _check_common(body, center, radius, objective, max_iter)
    tol = positive(tol, "tol")
    oracle_tol = positive(oracle_tol, "oracle_tol", strict=False)
    max_cuts = 5 * n if max_cuts is None else int(max_cuts)
    keep_cuts = 3 * n if keep_cuts is None else int(keep_cuts)
    if keep_cuts < 1 or max_cuts < keep_cuts:
        raise ValueError(f"need 1 <= keep_cuts <= max_cuts, got keep_cuts={keep_cuts}, max_cuts={max_cuts}")
    loc = _Localisation(c0 - R, c0 + R)
    obj_row: int | None = None  # index of the objective cut among the rows
    best_x: np.ndarray | None = None
    best_val = math.inf
    lower = -math.inf
    obj_norm = 1.0 if obj is None else float(np.linalg.norm(obj))
    calls = 0
    it = 0

    def result(status: str, message: str) -> EllipsoidResult:
        mm = loc.m + 2 * n
        try:
            shape = mm * mm * np.linalg.inv(loc.H)
        except np.linalg.LinAlgError:
            shape = np.full((n, n), np.nan)
        return EllipsoidResult(
            status=status, x=None if best_x is None else best_x.copy(),
            value=None if best_x is None or obj is None else best_val, iterations=it, oracle_calls=calls,
            center=loc.x.copy(), shape=0.5 * (shape + shape.T), lower_bound=None if obj is None else lower,
            message=message)

    while it < max_iter:
        x = loc.x
        calls += 1
        cut = body.separate(x.copy(), oracle_tol)
        if cut is None:
            if obj is None:
                best_x = x.copy()
                return result("feasible", "the analytic centre is in the body")
            val = float(obj @ x)
            if val < best_val:
                best_x, best_val = x.copy(), val
            weight = float(max(loc.m, 1))
            if obj_row is None:
                loc.add(obj, best_val, weight)
                obj_row = loc.m - 1
            else:
                loc.set_row(obj_row, best_val / obj_norm, weight)
        else:
            nrm = float(np.linalg.norm(cut.normal))
            loc.add(cut.normal, cut.offset + oracle_tol * nrm)
        it += 1
        if not loc.centre():
            try:
                z, xz = loc.phase_one()
            except SolverError as exc:  # pragma: no cover - backend trouble
                return result("max_iter", f"phase-one LP failed: {exc}")
            if z < 0.5 * oracle_tol:
                if best_x is not None:
                    lower = best_val
                    return result("optimal", "no point of the cuts improves on the best value")
                return result("empty", "the cuts leave no point with slack oracle_tol/2 in the box")
            loc.x = xz
            if not loc.centre():
                return result("max_iter", "Newton failed from a strictly feasible phase-one point")
        if obj is not None and best_x is not None and obj_row is not None:
            lower = max(lower, _dual_bound(loc, obj_row) * obj_norm)
            if best_val - lower <= tol:
                return result("optimal", "best - dual lower bound is within tol")
        if loc.m > max_cuts:
            rel = loc.relevance()
            protect = np.zeros(loc.m, dtype=bool)
            if obj_row is not None:
                protect[obj_row] = True
            rel[protect] = -np.inf
            idx = np.sort(np.argsort(rel, kind="stable")[:keep_cuts])
            if obj_row is not None:
                obj_row = int(np.searchsorted(idx, obj_row))
            loc.keep(idx)
    return result("max_iter", f"no answer within max_iter={max_iter} queries")


def _dual_bound(loc: _Localisation, obj_row: int) -> float:
    """Weak duality: ĉᵀx >= -Σλ_i d_i + min_box (ĉ + Σλ_i c_i)ᵀx for λ >= 0 (ĉ the unit objective row)."""
    s = loc.s
    nu = loc.w / s
    lam = nu / nu[obj_row]
    lam[obj_row] = 0.0
    r = loc.C[obj_row] + loc.C.T @ lam
    box_min = float(np.sum(np.minimum(r * loc.lo, r * loc.hi)))
    return -float(lam @ loc.d) + box_min
