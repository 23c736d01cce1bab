"""Fitting a flat to noisy affine equations: the homogeneous (total-least-squares) SVD fit.

Points x of an r-dimensional flat satisfying A x ≈ b lift to (x, 1) in the null space of M = [A, −b]; an
(r+1)-dimensional near-null space of the row-weighted M therefore gives the flat and its linear span in one
SVD, and the gap in M's singular values estimates r.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import scipy.sparse.linalg
from numpy.typing import ArrayLike

from ._validate import as_matrix, as_rhs
from .affine_subspace import AffineSubspace
from .rank_one import RankOneRows
from .results import CompactResult

__all__ = ["FlatFit", "fit_flat", "singular_gap_dimension"]


@dataclass(repr=False)
class FlatFit(CompactResult):
    """Result of :func:`fit_flat`.

    ``flat``: the fitted r-dimensional AffineSubspace; ``span``: orthonormal (n, r+1) basis of the linear
    span of the flat's points; ``singular_values``: singular values of the weighted [A, −b], ascending;
    ``dim``: r used; ``dim_estimate``: r suggested by the largest relative gap; ``gap``: σ_{r+1}/σ_{r+2}
    (ascending, 1-based; small means a clean null space); ``residual``: weighted RMS of A x − b at the
    flat's min-norm point; ``vectors``: the right singular vectors computed, as columns in ascending order
    (all n+1, or the ``smallest`` ones), a ``start`` for a refit.
    """

    flat: AffineSubspace
    span: np.ndarray
    singular_values: np.ndarray
    dim: int
    dim_estimate: int
    gap: float
    residual: float
    info: dict[str, object] = field(default_factory=dict)
    vectors: np.ndarray | None = field(default=None, repr=False)


def singular_gap_dimension(
    s: np.ndarray, max_null: int | None = None, min_ratio: float = 1.5
) -> tuple[int, np.ndarray]:
    """Null-space size q from ascending singular values s: the largest q ≤ ``max_null`` whose ratio
    σ_{q+1}/σ_q is at least max(``min_ratio``, (largest ratio)^¼) (q ≥ 1; the largest ratio's q when no
    ratio reaches that).

    Taking the largest such q, not simply the largest ratio, keeps a noisy null space whose own values
    spread (e.g. 0.003, 0.07 | 0.32, 0.37) from being split. ``min_ratio`` is the smallest jump that counts
    as the edge of the null space: it must sit above the ratios between neighbouring values of the bulk
    (about 1.0–1.2 for well-spread rows) and below the edge's own ratio (1.6–20 on the noisy systems it was
    tuned on; an exact null space gives ~1e10). With noisier data or a bulk of spread values, raise it, or
    pass the dimension when it is known. Values below the round-off level size·eps·max(s) count as that
    level: an exactly zero value next to a round-off one (e.g. 0 and 4e-16, exact homogeneous equations
    b = 0) would otherwise give a ratio of ~1e300 and swamp the real edge.

    Parameters
    ----------
    s : ndarray
        Singular values, ascending.
    max_null : int, optional
        The largest q considered (default: all but one value).
    min_ratio : float
        The smallest ratio that counts as the edge of the null space.

    Returns
    -------
    tuple of (int, ndarray)
        q, and ratios[j] = s[j+1]/s[j] on the floored values.

    Examples
    --------
    >>> import numpy as np
    >>> singular_gap_dimension(np.array([1e-9, 2e-9, 0.5, 0.6, 0.7]))[0]
    2
    """
    s = np.asarray(s, dtype=float)
    if s.size < 2:
        return int(s.size), np.empty(0)
    lim = s.size - 1 if max_null is None else max(1, min(int(max_null), s.size - 1))
    floored = np.maximum(s, max(s.size * np.finfo(float).eps * float(np.max(np.abs(s))), 1e-300))
    ratios = floored[1:] / floored[:-1]
    r = ratios[:lim]
    thr = max(float(min_ratio), float(r.max()) ** 0.25)
    ok = np.nonzero(r >= thr)[0]
    q = int(ok[-1]) + 1 if ok.size else int(np.argmax(r)) + 1
    return q, ratios


def fit_flat(
    A: ArrayLike | RankOneRows,
    b: ArrayLike,
    *,
    dim: int | None = None,
    weights: ArrayLike | None = None,
    max_dim: int | None = None,
    scale: float | None = None,
    min_ratio: float = 1.5,
    method: str = "auto",
    smallest: int | None = None,
    iterative_from: int | None = None,
    start: ArrayLike | None = None,
) -> FlatFit:
    """Fit an affine flat to the equations A x ≈ b by the homogeneous SVD of diag(w)·[A, −s·b] (TLS).

    The r+1 right singular vectors with the smallest singular values span {(x, 1/s)} over the flat.

    Parameters
    ----------
    A : array_like of shape (m, n), or RankOneRows
        The equations' rows; ``RankOneRows`` (factors of rows vec(a bᵀ)) give the gram method their Gram matrix.
    b : array_like of shape (m,)
        Their right-hand sides.
    dim : int, optional
        The flat's dimension r (default: the gap estimate of ``singular_gap_dimension`` with ``min_ratio``,
        searched up to ``max_dim``; ``dim_estimate`` is reported either way).
    weights : array_like of shape (m,), optional
        Non-negative row weights w (default 1).
    max_dim : int, optional
        The largest dimension the gap estimate considers.
    scale : float, optional
        s, the factor of the b column (default 1: the lifted points are (x, 1/s)); it trades how much of the
        noise the fit attributes to b rather than to A.
    min_ratio : float
        The smallest singular-value ratio that counts as the edge of the null space.
    method : {"auto", "svd", "gram"}
        "svd": QR, then the SVD of the square factor. "gram": eigh of MᵀM, 4–5× faster on tall systems (13
        against 60 ms on 2,500 × 257), but its eigenvalues carry an absolute error ~eps·σ_max², so singular
        values below ~1e-8·σ_max are not resolved. "auto": "gram", kept only when the next singular value is
        far enough for the squared round-off not to matter ((σ_{r+2}² − σ_{r+1}²) ≥ 1e-4·σ_max² for an exact
        fit, σ_{r+1} < 1e-6·σ_max, so the null space errs by < ~2e-12; ≥ 1e-7·σ_max² for a noisy one,
        < ~2e-9), else "svd".
    smallest : int, optional
        With ``max_dim``, at least max_dim + 3: the gram method computes only that many smallest eigenpairs
        (LAPACK's MRRR on a subset, σ_max by Lanczos; the full eigh up to ``FULL_EIGH_UP_TO`` columns of
        [A, −b], where it is cheaper), so ``singular_values`` holds those and then σ_max: 0.15 s per fit
        against 0.26 s at 1,025 unknowns, 0.9 against 1.8 s at 2,001. The SVD method ignores it.
    iterative_from : int, optional
        With ``smallest``: from this many columns of [A, −b] on, the gram method finds those pairs by
        shift-invert Lanczos on one Cholesky factor of MᵀM (n³/3 flops, against the tridiagonal reduction's
        4n³/3), checks each pair's residual ‖G v − λ v‖ ≤ 1e-11·λ_max and falls back to the subset eigh when a
        check (or the factorisation) fails. Default None: always the exact eigh.
    start : array_like of shape (n+1,) or (n+1, j), optional
        A guess of the smallest right singular vectors of [A, −b] (``vectors`` of an earlier fit of nearly the
        same rows): the shift-invert Lanczos starts from their sum. Ignored by the other methods.

    Returns
    -------
    FlatFit
        The flat, its span, the singular values, the dimension used and estimated, the gap, the weighted
        residual, the right singular ``vectors``; ``info["method"]``: the factorisation that produced the fit.

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import fit_flat
    >>> A = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])   # x0 = 1, x1 = 2: a line
    >>> fit = fit_flat(A, np.array([1.0, 2.0, 3.0]))
    >>> fit.dim, (np.round(fit.flat.point, 9) + 0.0).tolist()
    (1, [1.0, 2.0, 0.0])
    """
    A, b, w, scale = _fit_inputs(A, b, dim, weights, max_dim, scale, min_ratio, method, smallest, iterative_from)
    n = A.shape[1]
    lifted = _Lifted(A, b, w, scale)
    used = "svd" if method == "svd" else "gram"
    s_asc, V_asc = _right_singular(lifted, used, smallest, iterative_from, _start_vector(start, n + 1))
    q_est, ratios = singular_gap_dimension(s_asc, None if max_dim is None else max_dim + 1, min_ratio)
    r = q_est - 1 if dim is None else int(dim)
    if method == "auto" and not _gram_resolves(s_asc, r):
        used = "svd"
        s_asc, V_asc = _right_singular(lifted, used)
        q_est, ratios = singular_gap_dimension(s_asc, None if max_dim is None else max_dim + 1, min_ratio)
        r = q_est - 1 if dim is None else int(dim)
    flat = _flat_from_null(V_asc[:, : r + 1], n, scale)
    span_basis = np.linalg.svd(np.column_stack([flat.point, flat.basis]), full_matrices=False)[0]
    gap = float(s_asc[r] / s_asc[r + 1]) if r + 1 < s_asc.size and s_asc[r + 1] > 0 else float("nan")
    res = A @ flat.point - b
    residual = float(np.sqrt(np.sum(w * w * res * res) / max(np.sum(w * w), 1e-300)))
    return FlatFit(
        flat=flat,
        span=span_basis,
        singular_values=s_asc,
        dim=r,
        dim_estimate=q_est - 1,
        gap=gap,
        residual=residual,
        info={"scale": scale, "gap_ratios": ratios[:16], "method": used},
        vectors=V_asc,
    )


def _fit_inputs(
    A: ArrayLike | RankOneRows,
    b: ArrayLike,
    dim: int | None,
    weights: ArrayLike | None,
    max_dim: int | None,
    scale: float | None,
    min_ratio: float,
    method: str,
    smallest: int | None,
    iterative_from: int | None,
) -> tuple[np.ndarray | RankOneRows, np.ndarray, np.ndarray, float]:
    """``fit_flat``'s arguments checked (ValueError naming the bad one): returns (A, b, weights, scale)."""
    if not isinstance(A, RankOneRows):  # factored rows are checked (finite, real) when they are made
        A = as_matrix(A, "A")
    n_rows, n = A.shape
    b = as_rhs(b, "b", n_rows)
    if not (isinstance(A, RankOneRows) or np.all(np.isfinite(A))) or not np.all(np.isfinite(b)):
        raise ValueError("A and b must be finite")
    w = np.ones(n_rows) if weights is None else as_rhs(weights, "weights", n_rows)
    if np.any(w < 0):
        raise ValueError("weights must be non-negative")
    if dim is not None and not (0 <= int(dim) <= n - 1):
        raise ValueError(f"dim must lie in [0, {n - 1}], got {dim}")
    if n_rows == 0:
        raise ValueError("fit_flat needs at least one equation")
    if not (np.isfinite(min_ratio) and min_ratio >= 1.0):
        raise ValueError(f"min_ratio must be a finite ratio >= 1, got {min_ratio}")
    scale = 1.0 if scale is None else float(scale)
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale}")
    if method not in ("auto", "svd", "gram"):
        raise ValueError(f"method must be 'auto', 'svd' or 'gram', got {method!r}")
    if smallest is not None:
        if max_dim is None or isinstance(smallest, bool) or not isinstance(smallest, (int, np.integer)):
            raise ValueError(f"smallest needs max_dim and must be an integer, got smallest={smallest!r}")
        if smallest < int(max_dim) + 3:
            raise ValueError(f"smallest must be at least max_dim + 3 = {int(max_dim) + 3}, got {smallest}")
    if iterative_from is not None and (isinstance(iterative_from, bool) or not int(iterative_from) >= 1):
        raise ValueError(f"iterative_from must be a positive column count, got {iterative_from!r}")
    return A, b, w, scale


def _flat_from_null(Vn: np.ndarray, n: int, scale: float) -> AffineSubspace:
    """The flat {x : (x, 1/s) ∈ span(Vn)} from the (n+1, r+1) null-space basis Vn of the lifted system."""
    r = Vn.shape[1] - 1
    V_x, v_h = Vn[:n], Vn[n]
    nh = float(np.linalg.norm(v_h))
    if nh < 1e-12:
        raise ValueError(
            f"the {r + 1} smallest singular directions of [A, −b] have no homogeneous component: "
            f"A has a null space of dimension ≥ {r + 1} (too few or degenerate equations) or b ≈ 0, "
            "so no affine flat of that dimension is determined"
        )
    a0 = v_h / nh**2  # v_hᵀ a0 = 1
    point = (V_x @ a0) / scale
    # directions: V_x restricted to the null space of v_hᵀ
    if r > 0:
        _, _, Wt = np.linalg.svd(v_h[None, :], full_matrices=True)
        dirs = V_x @ Wt[1:].T
    else:
        dirs = np.zeros((n, 0))
    return AffineSubspace(point, dirs)


#: column count up to which ``_right_singular``'s gram method takes the full eigh even when few pairs are asked for
FULL_EIGH_UP_TO = 160


#: the largest residual ‖G v − λ v‖ / λ_max the shift-invert pairs may keep (eigh's own backward error is
#: ~n·eps ≈ 1e-12 at 4,097 columns); a vector then errs by at most that over its relative eigenvalue gap
ITERATIVE_RESIDUAL = 1e-11


#: floats of [A, −b] one chunk of the streamed Gram matrix holds (128 MB): MᵀM is accumulated chunk by chunk, so
#: the weighted lifted system is never formed whole (below it, one chunk: the plain product)
GRAM_CHUNK_ENTRIES = 1 << 24


class _Lifted:
    """The weighted lifted system M = diag(w)·[A, −s·b], formed only in row chunks (``rows``) or whole (``full``)."""

    def __init__(self, A: np.ndarray | RankOneRows, b: np.ndarray, w: np.ndarray, scale: float) -> None:
        self.A, self.b, self.w, self.scale = A, b, w, scale
        self.shape = (A.shape[0], A.shape[1] + 1)

    def rows(self, lo: int, hi: int) -> np.ndarray:
        """Rows lo:hi of M."""
        A = self.A.take(slice(lo, hi)).dense() if isinstance(self.A, RankOneRows) else self.A[lo:hi]
        return np.hstack([A, -self.scale * self.b[lo:hi, None]]) * self.w[lo:hi, None]

    def full(self) -> np.ndarray:
        """M whole."""
        return self.rows(0, self.shape[0])

    def gram(self) -> np.ndarray:
        """MᵀM, streamed: chunks of ``GRAM_CHUNK_ENTRIES`` floats accumulated by a symmetric rank-k update."""
        if isinstance(self.A, RankOneRows) and self.A.grouped_gram_pays():
            return self._factored_gram(self.A)
        n_rows, n1 = self.shape
        step = max(1, GRAM_CHUNK_ENTRIES // n1)
        if n_rows <= step:
            M = self.full()
            return M.T @ M
        G = np.zeros((n1, n1), order="F")
        for lo in range(0, n_rows, step):
            G = scipy.linalg.blas.dsyrk(1.0, self.rows(lo, lo + step), beta=1.0, c=G, trans=1, overwrite_c=1)
        upper = np.triu(G)
        return np.ascontiguousarray(upper + np.triu(G, 1).T)

    def _factored_gram(self, A: RankOneRows) -> np.ndarray:
        """MᵀM from the factors: [[Aᵀ W² A, −s·Aᵀ W² b], [·, s²·bᵀ W² b]] (``RankOneRows.gram`` for the A block)."""
        n = A.shape[1]
        w2 = self.w * self.w
        G = np.empty((n + 1, n + 1))
        A.gram(self.w, out=G[:n, :n])
        G[:n, n] = G[n, :n] = -self.scale * A.rmatvec(w2 * self.b)
        G[n, n] = self.scale**2 * float(np.sum(w2 * self.b * self.b))
        return G


def _start_vector(start: ArrayLike | None, n1: int) -> np.ndarray | None:
    """Lanczos's start vector from ``start`` (the sum of its columns), None without one; ValueError when its
    shape does not match or it is not finite."""
    if start is None:
        return None
    V = np.asarray(start, dtype=float)
    V = V[:, None] if V.ndim == 1 else V
    if V.ndim != 2 or V.shape[0] != n1 or not np.all(np.isfinite(V)):
        raise ValueError(f"start must be finite with {n1} rows (n + 1), got shape {np.shape(start)}")
    v0 = V.sum(axis=1)
    return v0 if float(np.linalg.norm(v0)) > 0 else None


def _right_singular(
    M: _Lifted | np.ndarray,
    method: str,
    smallest: int | None = None,
    iterative_from: int | None = None,
    v0: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Singular values of M (ascending, padded with zeros to M's column count) and the matching right singular
    vectors as columns: by QR + SVD of the square factor ("svd") or by eigh of MᵀM ("gram", streamed); with
    ``smallest`` the gram method returns only the ``smallest`` smallest pairs, then σ_max (no vector), by
    shift-invert Lanczos (from ``v0`` when given) from ``iterative_from`` columns on."""
    if isinstance(M, np.ndarray):  # a matrix given whole: its last column plays −b, unweighted
        M = _Lifted(M[:, :-1], -M[:, -1], np.ones(M.shape[0]), 1.0)
    n1 = M.shape[1]
    if method == "gram":
        G = M.gram()
        # a subset eigh plus ARPACK for σ_max pays off only past ~160 columns (65: 1.7 against 0.5 ms for the
        # full eigh; 145: 3.4 against 2.1; 257: 7.2 against 9.0; 577: 33 against 49)
        if smallest is not None and smallest + 1 < n1 and n1 > FULL_EIGH_UP_TO:
            # σ_max serves as a scale (round-off floors, the gram test): Lanczos to 1e-10 relative, half the
            # iterations of full precision (1.7 against 3.3 ms at 257 unknowns, the same value to 3e-15 there)
            top = float(
                scipy.sparse.linalg.eigsh(G, k=1, which="LA", v0=np.ones(n1), tol=1e-10, return_eigenvectors=False)[0]
            )
            pairs = None
            if iterative_from is not None and n1 >= iterative_from:
                pairs = _smallest_shift_invert(G, smallest, top, v0)
            if pairs is None:
                pairs = scipy.linalg.eigh(G, subset_by_index=[0, smallest - 1], driver="evr", check_finite=False)
            ev, V = pairs
            return np.sqrt(np.maximum(np.append(ev, max(top, float(ev[-1]))), 0.0)), V
        ev, V = np.linalg.eigh(G)  # ascending
        if smallest is not None and smallest + 1 < n1:  # the same shapes as the subset path
            ev, V = np.append(ev[:smallest], ev[-1]), V[:, :smallest]
        return np.sqrt(np.maximum(ev, 0.0)), V
    A = M.full()
    if A.shape[0] > n1:
        # QR first: same singular values and right vectors, cheaper SVD on the square factor (scipy's
        # mode="r" skips forming Q: 29 against 41 ms on 2,500 × 257)
        A = scipy.linalg.qr(A, mode="r", check_finite=False)[0][:n1]
    _, s_desc, Vt = np.linalg.svd(A, full_matrices=True)
    s_all = np.zeros(n1)
    s_all[: s_desc.size] = s_desc
    order = np.arange(n1 - 1, -1, -1)
    return s_all[order], Vt[order].T


#: ARPACK's tolerance for the shift-invert pairs: the residual check (``ITERATIVE_RESIDUAL``) is what certifies
#: them (at 4,097 columns 1e-8 passed it with a margin of 15 in 95 solves, full precision took 145; 1e-9 keeps
#: a wider margin); a failed check retries at full precision before the subset eigh
ITERATIVE_TOL = 1e-9


def _smallest_shift_invert(
    G: np.ndarray, k: int, top: float, v0: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """The k smallest eigenpairs of the SPD matrix G (ascending) by Lanczos on G⁻¹ through one Cholesky factor
    (from ``v0``, else a vector of ones), a Rayleigh–Ritz step on the vectors found, then each pair's residual
    checked against ``top`` = λ_max; None when G is not numerically positive definite, Lanczos does not converge
    or a residual is too large even at full precision."""
    n1 = G.shape[0]
    try:
        factor = scipy.linalg.cho_factor(G, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    solve = scipy.sparse.linalg.LinearOperator(
        (n1, n1), matvec=lambda x: scipy.linalg.cho_solve(factor, x, check_finite=False), dtype=G.dtype
    )
    start = np.ones(n1) if v0 is None else v0
    for tol in (ITERATIVE_TOL, 0.0):
        try:
            _, X = scipy.sparse.linalg.eigsh(G, k=k, sigma=0.0, which="LM", OPinv=solve, v0=start, tol=tol)
        except scipy.sparse.linalg.ArpackError:
            return None
        Q = np.linalg.qr(X)[0]
        GQ = G @ Q
        ev, U = np.linalg.eigh(Q.T @ GQ)
        V = Q @ U
        residual = np.linalg.norm(GQ @ U - V * ev, axis=0)
        if np.all(np.isfinite(residual)) and float(residual.max()) <= ITERATIVE_RESIDUAL * top:
            return ev, V
    return None


def _gram_resolves(s_asc: np.ndarray, r: int) -> bool:
    """Whether eigh of MᵀM (absolute eigenvalue error ~eps·σ_max²) pins the (r+1)-dimensional null space: its
    rounding error is about eps·σ_max²/(σ_{r+2}² − σ_{r+1}²), so the next singular value must be separated by
    1e-4·σ_max² when the fit is exact (σ_{r+1} < 1e-6·σ_max: error < ~2e-12) and by 1e-7·σ_max² when it is
    noisy (error < ~2e-9, far below the noise's own)."""
    top = float(s_asc[-1])
    if not top > 0 or r + 1 >= s_asc.size:
        return False
    need = 1e-7 if s_asc[r] >= 1e-6 * top else 1e-4
    return bool(s_asc[r + 1] ** 2 - s_asc[r] ** 2 >= need * top**2)
