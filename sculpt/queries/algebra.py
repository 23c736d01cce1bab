"""The linear algebra of learning from queries: rational fits of copy families, head matching, attention rows
and logit equations, and the two least-squares solves (Θ for known W, W for known Θ).

A copy family is the token x followed by n copies of y = x + δ, for n = 1..L. With one head's logit difference
ℓ_i = xᵀΘ_iδ and r_i = exp(ℓ_i), x's output row is xΣW + Σ_i n r_i/(1 + n r_i) δW_i, so

    H(n) = δΣW − (row_x(n) − xΣW) = Σ_i v_i / (1 + n r_i),   v_i = δW_i,   n = 0..L,

a vector rational function of n with m poles −1/r_i and residues v_i (H(0) = δΣW needs no query). Multiplying by
P(n) = Π_i (1 + n r_i) leaves a vector polynomial of degree m − 1, a linear condition on P's coefficients: its
roots start a variable-projection Gauss–Newton fit of the ℓ_i, whose residues are then the rows δW_i.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares, linear_sum_assignment

from ..toolkit import features

__all__ = [
    "FamilyFit",
    "fit_family",
    "match_to_reference",
    "match_by_sums",
    "logit_equations",
    "LogitEquations",
    "solve_thetas",
    "refit_ws",
]


#: logit differences are clipped here inside the fit (exp stays finite; a saturated head is a bad family)
_MAX_LOGIT = 40.0


@dataclass
class FamilyFit:
    """One copy family's fit: the logit differences ``ell`` (m,), the residues ``residues`` (m, d) = δW_i, and
    the relative residual of the fit, the condition number of its design Φ (residues' error ∝ it), the second
    block's poles ``ell2`` and the residual's root mean square ``rms`` (to compare with a noise level)."""

    ell: np.ndarray
    residues: np.ndarray
    residual: float
    condition: float = 1.0
    ell2: np.ndarray | None = None
    rms: float = 0.0

    @property
    def largest_logit(self) -> float:
        """The largest |logit difference| of either block."""
        both = self.ell if self.ell2 is None else np.concatenate([self.ell, self.ell2])
        return float(np.max(np.abs(both)))


def _phi(ell: np.ndarray, ns: np.ndarray) -> np.ndarray:
    """Φ[n, i] = 1/(1 + n exp(ℓ_i))."""
    return 1.0 / (1.0 + ns[:, None] * np.exp(np.clip(ell, -_MAX_LOGIT, _MAX_LOGIT))[None, :])


def _pole_start(H: np.ndarray, ns: np.ndarray, m: int) -> np.ndarray | None:
    """The ℓ_i from the roots of P: (P(n)H(n))_n lies in the degree-(m−1) polynomials, column by column
    (n scaled to [0, 1] for the Vandermonde's conditioning). None when the roots are not m positive r_i."""
    top = float(ns[-1])
    t = ns / top
    Q, _ = np.linalg.qr(np.vander(t, m, increasing=True))
    B = np.eye(len(ns)) - Q @ Q.T
    Vp = np.vander(t, m + 1, increasing=True)
    M = np.einsum("ab,bc,bj->acj", B, H, Vp).reshape(-1, m + 1)  # rows (n, column), the m+1 coefficients
    p = np.linalg.svd(M, full_matrices=False)[2][-1]
    roots = np.roots(p[::-1])
    if len(roots) != m or np.any(np.abs(roots.imag) > 1e-6 * np.abs(roots)) or np.any(roots.real >= 0):
        return None
    return np.sort(np.log(-1.0 / (top * roots.real)))  # t = n/top = −1/(top r)


def _start(H: np.ndarray, ns: np.ndarray, m: int) -> np.ndarray:
    start = _pole_start(H, ns, m)
    return np.linspace(-1.0, 1.0, m) if start is None else start


def _paired_start(H: np.ndarray, G: np.ndarray, m: int) -> np.ndarray:
    """Starts of both blocks' poles, the second block's heads put in the first's order by their residues."""
    n1, n2 = np.arange(H.shape[0], dtype=float), np.arange(1, G.shape[0] + 1, dtype=float)
    ell, ell2 = _start(H, n1, m), _start(G, n2, m)
    V1 = np.linalg.lstsq(_phi(ell, n1), H, rcond=None)[0]
    V2 = np.linalg.lstsq(_phi(ell2, n2), G, rcond=None)[0]
    perm = match_to_reference(V1, V2)[0]
    return np.concatenate([ell, ell2[perm]])


def fit_family(H: np.ndarray, m: int, G: np.ndarray | None = None) -> FamilyFit:
    """Poles and residues of H(n) = Σ_i v_i/(1 + n exp(ℓ_i)), n = 0..L, jointly with the second token's rows
    G(n) = Σ_i v_i/(1 + n exp(ℓ'_i)), n = 1..L, when given (same residues, other poles).

    Parameters
    ----------
    H : numpy.ndarray
        (L + 1, d), L >= m + 1: the rational function's values at n = 0..L.
    m : int
        Heads (poles).
    G : numpy.ndarray, optional
        (L, d): the second token's block.

    Returns
    -------
    FamilyFit
        ℓ sorted increasing, residues in the same order, relative residual ‖D − ΦV‖/‖D‖ (D = [H; G]).
    """
    n1 = np.arange(H.shape[0], dtype=float)
    n2 = np.arange(1, 1 + (0 if G is None else G.shape[0]), dtype=float)
    D = H if G is None else np.concatenate([H, G])
    start = _start(H, n1, m) if G is None else _paired_start(H, G, m)
    dn = max(float(np.linalg.norm(D)), np.finfo(float).tiny)

    def design(p: np.ndarray) -> np.ndarray:
        return _phi(p, n1) if G is None else np.concatenate([_phi(p[:m], n1), _phi(p[m:], n2)])

    def resid(p: np.ndarray) -> np.ndarray:
        Phi = design(p)
        V = np.linalg.lstsq(Phi, D, rcond=None)[0]
        return ((D - Phi @ V) / dn).ravel()

    sol = least_squares(resid, start, method="lm", xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=200 * (len(start) + 1))
    order = np.argsort(sol.x[:m])
    p = sol.x if G is None else np.concatenate([sol.x[:m][order], sol.x[m:][order]])
    p = p[order] if G is None else p
    Phi = design(p)
    V = np.linalg.lstsq(Phi, D, rcond=None)[0]
    ell2 = None if G is None else p[m:]
    res = float(np.linalg.norm(D - Phi @ V))
    return FamilyFit(p[:m], V, res / dn, float(np.linalg.cond(Phi)), ell2, res / np.sqrt(D.size))


def match_to_reference(ref: np.ndarray, other: np.ndarray) -> tuple[np.ndarray, float]:
    """The permutation π with other[π[i]] ≈ ref[i] (both (m, d): residues of one δ), and the largest relative
    mismatch ‖ref_i − other_π(i)‖/‖ref_i‖."""
    cost = np.linalg.norm(ref[:, None] - other[None], axis=2)
    rows, cols = linear_sum_assignment(cost)
    perm = cols[np.argsort(rows)]
    gap = cost[np.arange(len(perm)), perm] / np.maximum(np.linalg.norm(ref, axis=1), np.finfo(float).tiny)
    return perm, float(np.max(gap))


def match_by_sums(first: np.ndarray, other: np.ndarray, sums: np.ndarray) -> tuple[np.ndarray, float]:
    """The permutation π of ``other``'s heads (residues u·W_l) onto ``first``'s (v·W_i) that the residues of
    ``sums`` ((v + u)·W_j, any order) confirm: first[i] + other[π[i]] is one of ``sums``.

    Returns
    -------
    perm : numpy.ndarray
        π.
    gap : float
        The largest relative mismatch of the chosen sums.
    """
    pair = first[:, None, :] + other[None, :, :]  # (i, l, d)
    dist = np.linalg.norm(pair[:, :, None, :] - sums[None, None], axis=3)  # (i, l, t)
    scale = np.maximum(np.linalg.norm(sums, axis=1).max(), np.finfo(float).tiny)
    best = dist.min(axis=2) / scale
    rows, cols = linear_sum_assignment(best)
    perm = cols[np.argsort(rows)]
    return perm, float(np.max(best[np.arange(len(perm)), perm]))


@dataclass
class LogitEquations:
    """Linear equations ⟨Θ_i, x_a (x_g − x_a)ᵀ⟩ = log-ratio, shared design over heads: ``design`` (E, d²),
    ``rhs`` (E, m), ``weight`` (E, m) (0: the equation is unusable for that head)."""

    design: np.ndarray
    rhs: np.ndarray
    weight: np.ndarray

    @staticmethod
    def stack(parts: list[LogitEquations], d: int, m: int) -> LogitEquations:
        if not parts:
            return LogitEquations(np.zeros((0, d * d)), np.zeros((0, m)), np.zeros((0, m)))
        return LogitEquations(
            np.concatenate([p.design for p in parts]),
            np.concatenate([p.rhs for p in parts]),
            np.concatenate([p.weight for p in parts]),
        )


def logit_equations(
    Xd: np.ndarray, mult: np.ndarray, Yd: np.ndarray, sum_w: np.ndarray, ws: np.ndarray, rows: tuple[int, ...]
) -> LogitEquations:
    """The attention rows of every head at the given rows, then their log-ratio equations on Θ.

    With W known, row a's output minus x_aΣW is Σ_i Σ_{g≠a} α_ig (x_g − x_a)W_i: a linear system of d equations in
    the m(G − 1) weights α_ig (G distinct tokens, m(G − 1) <= d). The self weight is 1 − Σ_g α_ig, and
    log(α_ig/c_g) − log(α_ii/c_a) = x_aᵀΘ_i(x_g − x_a) with c the tokens' multiplicities.

    Parameters
    ----------
    Xd : numpy.ndarray
        (n, G, d) distinct tokens of n queries sharing one layout.
    mult : numpy.ndarray
        (G,) how often each distinct token occurs in the query.
    Yd : numpy.ndarray
        (n, G, d) the output row of each distinct token.
    sum_w, ws : numpy.ndarray
        ΣW (d, d) and the W_i (m, d, d).
    rows : tuple of int
        The distinct tokens whose rows are read.

    Returns
    -------
    LogitEquations
        One equation per (query, row, other token); weight ∝ the smaller attention weight (log's error ∝ 1/α).
    """
    n, G, d = Xd.shape
    m = ws.shape[0]
    parts = []
    for a in rows:  # G <= d + 1 rows, each vectorised over the n queries
        others = [g for g in range(G) if g != a]
        D = Xd[:, others] - Xd[:, a : a + 1]  # (n, G−1, d)
        B = np.einsum("ngd,mde->nemg", D, ws).reshape(n, d, m * (G - 1))
        r = Yd[:, a] - Xd[:, a] @ sum_w
        alpha = np.einsum("nij,nj->ni", np.linalg.pinv(B), r).reshape(n, m, G - 1)
        own = 1.0 - alpha.sum(axis=2)  # (n, m)
        ok = (alpha > 0) & (own[:, :, None] > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            lr = np.log(alpha / mult[others]) - np.log(own / mult[a])[:, :, None]
        w = np.where(ok, np.minimum(alpha, own[:, :, None]), 0.0)
        design = np.einsum("nd,nge->ngde", Xd[:, a], D).reshape(n * (G - 1), d * d)
        parts.append(
            LogitEquations(
                design,
                np.where(ok, lr, 0.0).transpose(0, 2, 1).reshape(-1, m),
                w.transpose(0, 2, 1).reshape(-1, m),
            )
        )
    return LogitEquations.stack(parts, d, m)


def solve_thetas(eqs: LogitEquations, m: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Θ_i by weighted least squares on its usable equations.

    Returns
    -------
    thetas : numpy.ndarray
        (m, d, d).
    ranks : numpy.ndarray
        (m,) the rank of each head's system (d² when Θ_i is determined).
    """
    thetas = np.zeros((m, d, d))
    ranks = np.zeros(m, dtype=int)
    for i in range(m):  # m <= a few heads, each one dense solve
        use = eqs.weight[:, i] > 0
        w = eqs.weight[use, i][:, None]
        A = eqs.design[use] * w
        b = eqs.rhs[use, i] * w[:, 0]
        sol, _, rank, _ = np.linalg.lstsq(A, b, rcond=None)
        thetas[i] = sol.reshape(d, d)
        ranks[i] = rank
    return thetas, ranks


def refit_ws(thetas: np.ndarray, batches: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """W = argmin Σ ‖Y − Σ_i A_i(X) X W_i‖² over every (X, Y) batch (output rows already selected: Y rows that
    were not read are NaN and skipped).

    Returns
    -------
    numpy.ndarray
        The W_i, (m, d, d).
    """
    m, d = thetas.shape[0], thetas.shape[1]
    Zs, Ys = [], []
    for X, Y in batches:
        Z = features(thetas, X)  # (n k, m d)
        Yf = Y.reshape(-1, d)
        keep = np.isfinite(Yf).all(axis=1)
        Zs.append(Z[keep])
        Ys.append(Yf[keep])
    Wst = np.linalg.lstsq(np.concatenate(Zs), np.concatenate(Ys), rcond=None)[0]
    return Wst.reshape(m, d, d)
