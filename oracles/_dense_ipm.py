"""(Private.) A small dense primal-dual interior-point method: a central point of {A x <= b, A_eq x = b_eq}, and
the same iteration for the min-norm QP.

Mehrotra predictor-corrector on  A x + s = b, A_eq x = b_eq, s >= 0  with a zero objective, from an
infeasible start. With c = 0 the iterates end at a relative-interior point (near the central path, not
necessarily the analytic centre) whose slack is ~0 exactly on the implicit equalities and clearly positive
elsewhere, while z converges to a certificate (z >= 0, Aᵀz + A_eqᵀy = 0) supported on them. Each
iteration costs one dense AᵀDA (m n² flops) and a Cholesky: on dense 3000x200 data the whole solve
(~5 iterations) is ~20x cheaper than one HiGHS IPM solve.

This is a heuristic accelerator with no failure mode of its own: callers must certify what they read
from it (``oracles.affine`` certifies the equalities and falls back to HiGHS; ``oracles.geometry``
checks the KKT conditions and falls back to Clarabel).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
from threadpoolctl import ThreadpoolController


@dataclass
class CentralPoint:
    """x, slacks s = b - A x, multipliers z (inequalities) and y (equalities); status: "converged",
    "stalled" (the normal equations became singular; the last iterate is returned) or "max_iter"."""

    x: np.ndarray
    s: np.ndarray
    z: np.ndarray
    y: np.ndarray
    iterations: int
    status: str
    primal_residual: float


@functools.lru_cache(maxsize=1)
def _controller() -> ThreadpoolController:
    """threadpoolctl's view of the BLAS libraries loaded in this process (numpy's and scipy's are loaded by
    this module's imports), built once: building it scans the loaded libraries."""
    return ThreadpoolController()


_BLAS = threading.local()  # whether this thread is inside a single_thread_blas block


@contextlib.contextmanager
def single_thread_blas() -> Iterator[None]:
    """Run BLAS single-threaded inside the block (restored afterwards), through threadpoolctl. For
    n ~ 100-300 the threaded GEMM gains little and, on oversubscribed cores, is 10-50x slower. A block inside
    another costs nothing (threadpoolctl's limit and restore take 0.1 ms each time)."""
    if getattr(_BLAS, "inside", False):
        yield
        return
    with _controller().limit(limits=1, user_api="blas"):
        _BLAS.inside = True
        try:
            yield
        finally:
            _BLAS.inside = False


def _step(v: np.ndarray, dv: np.ndarray) -> float:
    neg = dv < 0
    return min(1.0, float(np.min(-v[neg] / dv[neg]))) if np.any(neg) else 1.0


def central_point(
    A: np.ndarray,
    b: np.ndarray,
    A_eq: np.ndarray | None = None,
    b_eq: np.ndarray | None = None,
    *,
    tol: float = 1e-9,
    max_iter: int = 60,
) -> CentralPoint:
    """Near-analytic-centre point of {A x <= b, A_eq x = b_eq} (dense arrays; rows ideally unit-norm).

    An empty or badly scaled system makes the iterates blow up: that ends the run ("stalled"), silently."""
    with np.errstate(all="ignore"), single_thread_blas():
        return _central_point(A, b, A_eq, b_eq, tol, max_iter)


def min_norm_ipm(
    A: np.ndarray,
    b: np.ndarray,
    A_eq: np.ndarray | None = None,
    b_eq: np.ndarray | None = None,
    *,
    tol: float = 1e-10,
    max_iter: int = 80,
) -> CentralPoint:
    """The same iteration for min ½‖x‖² over {A x <= b, A_eq x = b_eq} (normal matrix I + AᵀDA).

    A guess for ``oracles.min_norm_point``, which accepts it only after an exact KKT check."""
    with np.errstate(all="ignore"), single_thread_blas():
        return _central_point(A, b, A_eq, b_eq, tol, max_iter, quadratic=True)


def _central_point(
    A: np.ndarray,
    b: np.ndarray,
    A_eq: np.ndarray | None,
    b_eq: np.ndarray | None,
    tol: float,
    max_iter: int,
    quadratic: bool = False,
) -> CentralPoint:
    m, n = A.shape
    E = np.zeros((0, n)) if A_eq is None else A_eq
    e = np.zeros(0) if b_eq is None else b_eq
    me = E.shape[0]
    x = np.linalg.lstsq(E, e, rcond=None)[0] if me else np.zeros(n)
    s = np.maximum(b - A @ x, 1.0)
    z = np.ones(m)
    y = np.zeros(me)
    scale = 1.0 + float(np.max(np.abs(b), initial=0.0))
    status, it = "max_iter", 0
    for it in range(max_iter):
        rd = A.T @ z + E.T @ y + (x if quadratic else 0.0)
        rp = A @ x + s - b
        re = E @ x - e
        mu = float(s @ z) / m
        pres = max(float(np.max(np.abs(rp))), float(np.max(np.abs(re), initial=0.0)))
        if (
            pres <= tol * scale
            and mu <= tol * scale
            and float(np.max(np.abs(rd))) <= tol * (1.0 + float(z.max()) + float(np.max(np.abs(x))))
        ):
            status = "converged"
            break
        d = z / s
        K = (A.T * d) @ A
        if quadratic:
            K[np.diag_indices(n)] += 1.0
        if not np.all(np.isfinite(K)):
            status = "stalled"
            break
        cf = None
        for reg in (1e-14, 1e-11, 1e-8):
            K2 = K.copy()
            K2[np.diag_indices(n)] += reg * (np.trace(K) / n + 1.0)
            try:
                cf = sla.cho_factor(K2, lower=True, check_finite=False)
                break
            except np.linalg.LinAlgError:
                continue
        if cf is None or not np.all(np.isfinite(cf[0])):
            status = "stalled"
            break
        if me:
            KiEt = sla.cho_solve(cf, E.T, check_finite=False)
            S = E @ KiEt

        def solve(rc: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
            r1 = -rd - A.T @ ((rc + z * rp) / s)
            if me:
                t = sla.cho_solve(cf, r1, check_finite=False)
                dy = np.linalg.lstsq(S, E @ t + re, rcond=None)[0]
                dx = t - KiEt @ dy
            else:
                dx, dy = sla.cho_solve(cf, r1, check_finite=False), np.zeros(0)
            ds = -rp - A @ dx
            return dx, ds, (rc - z * ds) / s, dy

        dx, ds, dz, dy = solve(-s * z)  # predictor (affine scaling)
        ap, ad = _step(s, ds), _step(z, dz)
        sigma = (float((s + ap * ds) @ (z + ad * dz)) / m / mu) ** 3
        dx, ds, dz, dy = solve(-s * z + sigma * mu - ds * dz)  # corrector
        if not (np.all(np.isfinite(dx)) and np.all(np.isfinite(dz))):
            status = "stalled"
            break
        ap, ad = 0.995 * _step(s, ds), 0.995 * _step(z, dz)
        x, s, z, y = x + ap * dx, s + ap * ds, z + ad * dz, y + ad * dy
    else:
        it = max_iter
    s_true = b - A @ x
    pres = max(float(np.max(-s_true, initial=0.0)), float(np.max(np.abs(E @ x - e), initial=0.0)))
    return CentralPoint(x, s_true, z, y, it, status, pres)
