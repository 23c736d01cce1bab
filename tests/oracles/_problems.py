"""Random test bodies shared by the ellipsoid / cutting-plane / hull tests (pure numpy + scipy LP)."""
from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from oracles import Polytope


def random_polytope(rng: np.random.Generator, n: int, *, m: int | None = None, box: float = 2.0,
                    shift: tuple[float, float] = (0.3, 1.5)) -> tuple[Polytope, np.ndarray]:
    """{x : a_iᵀx <= a_iᵀx0 + s_i, |x - x0|_∞ <= box} with unit rows a_i, s_i ~ U(shift): contains x0."""
    m = 3 * n if m is None else m
    x0 = rng.normal(size=n)
    A = rng.normal(size=(m, n))
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    b = A @ x0 + rng.uniform(*shift, size=m)
    A = np.vstack([A, np.eye(n), -np.eye(n)])
    b = np.concatenate([b, x0 + box, box - x0])
    return Polytope(A, b), x0


def chebyshev_margin(P: Polytope, lo: float = -50.0, hi: float = 50.0) -> float:
    """max r s.t. a_iᵀx + r‖a_i‖ <= b_i (r may be negative): > 0 iff P has interior (LP, HiGHS)."""
    n = P.dim
    A, b = P.A, P.b
    norms = np.linalg.norm(A, axis=1)
    c = np.zeros(n + 1)
    c[-1] = -1.0
    res = linprog(c, A_ub=np.hstack([A, norms[:, None]]), b_ub=b,
                  bounds=[(lo, hi)] * n + [(-100.0, 1.0)], method="highs")
    assert res.status == 0, res.message
    return float(res.x[-1])


def sample_polytope(P: Polytope, x0: np.ndarray, rng: np.random.Generator, k: int = 200) -> np.ndarray:
    """k points of P: x0 + t·d along random directions d, t uniform in the feasible chord (vectorised)."""
    n = P.dim
    D = rng.normal(size=(k, n))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    slack = P.b - P.A @ x0  # >= 0
    rate = D @ P.A.T  # (k, m)
    with np.errstate(divide="ignore"):
        tmax = np.where(rate > 0, slack / np.where(rate > 0, rate, 1.0), np.inf).min(axis=1)
    t = rng.uniform(0.0, 1.0, size=k) * np.minimum(tmax, 1e3)
    return x0 + t[:, None] * D


def lp_min(P: Polytope, c: np.ndarray) -> float:
    res = linprog(c, A_ub=P.A, b_ub=P.b, bounds=[(None, None)] * P.dim, method="highs")
    assert res.status == 0, res.message
    return float(res.fun)


def flat_polytope(rng: np.random.Generator, n: int, k: int, *, m: int | None = None,
                  scale_rows: bool = False) -> tuple[Polytope, np.ndarray, np.ndarray, np.ndarray]:
    """k hidden equalities F x = F x0 written as pairs of inequalities, plus random inequalities around x0."""
    m = 3 * n if m is None else m
    x0 = rng.normal(size=n)
    F = rng.normal(size=(k, n))
    g = F @ x0
    A = rng.normal(size=(m, n))
    b = A @ x0 + rng.uniform(0.5, 2.0, size=m) * np.linalg.norm(A, axis=1)
    A_all = np.vstack([A, F, -F])
    b_all = np.concatenate([b, g, -g])
    if scale_rows:
        s = rng.uniform(0.1, 10.0, size=A_all.shape[0])
        A_all, b_all = A_all * s[:, None], b_all * s
    perm = rng.permutation(A_all.shape[0])
    return Polytope(A_all[perm], b_all[perm]), F, g, x0
