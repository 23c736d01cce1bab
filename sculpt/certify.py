"""Certificates for a learned attention layer: local identifiability, noise, standard errors, intervals.

``certify(model, X, Y)`` works for any ``MultiHeadAttention`` (whatever route produced it) and labelled data
(X, Y), ideally held out from the fit or at least the data the model was fitted to by least squares.
Everything rests on the Jacobian J of the residual vector r = vec(F(X) − Y) (N k d entries, row-major over
(N, k, d)) with respect to all 2 m d² parameters in the flat layout of ``MultiHeadAttention.params()``
([vec Θ_1..Θ_m, vec W_1..W_m], row-major).

What is computed
----------------
* **Gram matrix.** JᵀJ is accumulated over chunks of examples from the factorised Jacobian
  ∂F[a, c]/∂Θ_i[p, q] = x_a[p] T_i[a, q, c] with T_i[a, q, c] = Σ_b p_ab x_b[q] (V_i[b, c] − (P_i V_i)[a, c]),
  V_i = X W_i, and ∂F[a, c]/∂W_i[p, q] = (P_i X)[a, p] δ_cq, without forming J: the Θ–Θ block is
  Σ_{n,a} (x_a x_aᵀ) ⊗ (T_a T_aᵀ), the W–W block (Σ_{n,a} A_a A_aᵀ) ⊗ I_d, so the cost is O(N k m² d⁴)
  flops (not N k m² d⁵) and the memory is bounded by the chunk size, never by N.
* **Singular values.** ``singular_values`` are s_j = sqrt(λ_j(JᵀJ) / (N k d)), ascending: the root-mean-square
  change of one residual entry per unit change of the parameters along the j-th right singular vector
  (no column normalisation, so they are in units of Y per unit of parameter).
* **Rank.** rank = #{j : s_j > rtol · s_max} with ``rtol`` = 1e-6 by default. Computing the singular values
  from JᵀJ in float64 resolves them down to about 1e-7 · s_max; exact degeneracies (a silent head, two
  coinciding heads) give s_j at that rounding level, while generic planted layers have s_min / s_max of
  0.04–0.14 (measured at (d, k, m) from (4, 2, 1) to (8, 4, 3), Boolean and Gaussian inputs), so the
  threshold sits orders of magnitude away from both.
* **Verdict.** ``locally_unique`` is rank == n_params: the least-squares objective has a non-singular
  Gauss–Newton matrix at the model, so no continuous family of layers through the model fits the data
  to first order. Otherwise ``unidentifiable`` names the null directions in parameter terms.
* **Noise.** σ̂² = RSS / (N k d − rank), unless ``noise`` is given.
* **Covariance.** "gauss-newton": σ² (JᵀJ)⁺; "sandwich": (JᵀJ)⁺ (Σ_n g_n g_nᵀ) (JᵀJ)⁺ · c with the
  per-example scores g_n = J_nᵀ r_n (robust to noise whose variance differs between examples and to correlation
  between the k d entries of one example) and the small-sample factor c = N/(N − 1) · (Nkd − 1)/(Nkd − rank).
  The pseudo-inverse keeps only the identified directions; a parameter entry whose coordinate has a
  component (≥ 1e-6 in squared norm) in the null space gets an infinite standard error and the interval
  (−inf, inf).
* **Intervals.** estimate ± q · se with q the two-sided ``level`` quantile of Student's t with N k d − rank
  degrees of freedom when σ is estimated (Gauss–Newton), of the normal distribution otherwise.

Symmetries (derived, and checked on the null space of J)
--------------------------------------------------------
* Softmax is invariant to adding a constant to a row of logits. A change Θ ↦ Θ + Δ is of that kind only if
  x_aᵀ Δ (x_b − x_c) = 0 for all tokens of all inputs; tokens whose differences span R^d (any k ≥ 2 with
  ±1 or Gaussian entries) force Δ = 0. So there is **no continuous symmetry**, and generic layers have
  rank = n_params = 2 m d² (checked numerically at (4,2,1), (4,2,2), (4,3,2), (8,2,2), (8,4,1), (8,4,2),
  (8,4,3), Boolean and Gaussian). With k = 1 the softmax is constant and every Θ_i is unidentifiable.
* Head permutation is a discrete symmetry: it does not reduce the rank, but at its fixed points it does.
  Heads i, j with Θ_i = Θ_j: only W_i + W_j is seen (d² null directions W_i − W_j); if moreover
  W_j = λ W_i, the directions Θ_j − λ Θ_i are null too (another d²). A head with W_i = 0 hides Θ_i (d²).
  The intervals refer to the heads as labelled in ``model``: match heads (``MultiHeadAttention.distance``)
  before comparing with another layer.
* Nearly coinciding heads (Θ_j = Θ_i + ε Δ): d² singular values shrink ∝ ε and two of them ∝ ε² (measured
  at (8, 4, 3), ε = 1e-1 … 1e-4), so below ε ≈ 1e-3·‖Δ‖-scale the rank test reports the W_i − W_j
  directions as unidentifiable; above it the verdict is "locally unique" with a "weakly identified" note
  when s_min / s_max < 1e-3, and the intervals along those directions are correspondingly wide.
* Not degenerate, although they may look so: a head with Θ_i = 0 among others (uniform attention; the
  first-order change x_aᵀ Δ C(X) W_i with C the token covariance of the input vanishes for all inputs only
  if Δ = 0 when W_i ≠ 0), a singular Σ_i W_i, rank-deficient W_i or W_i sharing a null vector: all locally
  identifiable (Σ W_i singular breaks an assumption of the sculpting route, which ``notes`` mentions).

``body_widths`` measures a convex body (e.g. the sculpted K* over vec Θ) along directions normal to a
recovered span with the engine's ``oracles.widths``.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from ._checks import SeedLike, as_generator, check_data, check_inputs
from .model import MultiHeadAttention, concat_thetas, forward_chunk
from .toolkit import JSON, single_blas_thread

__all__ = ["certify", "Certificate", "body_widths", "BodyWidths", "normal_equations", "COVARIANCES"]

COVARIANCES = ("gauss-newton", "sandwich")
DEFAULT_RTOL = 1e-6
#: relative residual RSS / Σ Y² above which the summary says the model does not fit the data (it explains less
#: than half of the labels' energy, as ``Settings.misfit_residual``): uniqueness and intervals of such a
#: least-squares point describe no layer behind the data
NO_FIT_RESIDUAL = 0.5
_NULL_LEAK = 1e-6  # squared null-space component of a coordinate above which its se is infinite
_CHUNK_FLOATS = 1 << 21  # ~16 MB per chunk intermediate
_WEAK = 1e-3  # s_min / s_max below this (but above rtol): "weakly identified" note
_SMALL = 1e-6  # relative size under which a W_i, Θ_i − Θ_j, … counts as zero in the explanations
_MAX_GENERIC = 4  # unexplained null directions described one by one


# ------------------------------------------------------------------------------------------ the kernel
class _Kernel:
    """Chunked Jacobian pieces of the layer at fixed parameters (see the module docstring for the formulas)."""

    def __init__(self, model: MultiHeadAttention, k: int) -> None:
        self.m, self.d, self.k = model.m, model.d, k
        self.ws = model.ws
        self.theta_cat = concat_thetas(model.thetas)
        self.w_cat = model.ws.reshape(self.m * self.d, self.d)
        self.wv_cat = np.ascontiguousarray(model.ws.transpose(1, 0, 2).reshape(self.d, self.m * self.d))
        m, d = self.m, self.d
        per_seq = k * max(m * m * d * d, m * d * d, d * d * 2)
        self.step = max(1, _CHUNK_FLOATS // per_seq)

    def pieces(self, Xc: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(F (n,k,d), A (n,k,m,d) = P_i X rows, T (n,k,m,d,d) indexed [n, a, i, q, c])."""
        m, d = self.m, self.d
        n, k, _ = Xc.shape
        P, A, F = forward_chunk(self.theta_cat, self.w_cat, Xc, m)
        Pt = P.reshape(n, k, k, m).transpose(0, 3, 2, 1)  # [n, i, a, b]
        V = (Xc.reshape(n * k, d) @ self.wv_cat).reshape(n, k, m, d)  # V[n, b, i, c] = (X W_i)[b, c]
        XV = Xc[:, :, None, :, None] * V[:, :, :, None, :]  # [n, b, i, q, c]
        XV = XV.transpose(0, 2, 1, 3, 4).reshape(n, m, k, d * d)
        first = (Pt @ XV).reshape(n, m, k, d, d)  # Σ_b p_ab x_bq V_bc, [n, i, a, q, c]
        Am = A.reshape(n, k, m, d)  # [n, a, i, p]
        O = Pt @ V.transpose(0, 2, 1, 3)  # head outputs P_i V_i, [n, i, a, c]
        T = first.transpose(0, 2, 1, 3, 4) - Am[..., :, None] * O.transpose(0, 2, 1, 3)[:, :, :, None, :]
        return F, Am, T

    def dense(self, Xc: np.ndarray) -> np.ndarray:
        """The Jacobian rows of the chunk, (n k d, 2 m d²) (same layout as ``sculpt.gradients.jacobian``)."""
        m, d = self.m, self.d
        n, k, _ = Xc.shape
        _, Am, T = self.pieces(Xc)
        J = np.zeros((n, k, d, 2, m, d, d))
        J[:, :, :, 0] = np.einsum("nap,naiqc->nacipq", Xc, T)
        idx = np.arange(d)
        J[:, :, idx, 1, :, :, idx] = Am[None]  # advanced indices c = q come first: (d, n, k, m, p)
        return J.reshape(n * k * d, 2 * m * d * d)


def _accumulate(
    kern: _Kernel, X: np.ndarray, Y: np.ndarray, scores: bool
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray | None]:
    """(JᵀJ, Jᵀr, RSS, Σ_n g_n g_nᵀ or None) over all examples, chunked."""
    m, d = kern.m, kern.d
    N, k, _ = X.shape
    md, md2 = m * d, m * d * d
    iu, ju = np.triu_indices(d)  # x_a x_aᵀ is symmetric: only its p <= r entries are multiplied
    g_tt = np.zeros((iu.size, md * md))  # [(p <= r), (i, q, j, s)]
    g_tw = np.zeros((d * md, md2))  # [(p, j, r), (i, q, s)]
    g_ww = np.zeros((md, md))  # [(i, p), (j, r)]
    grad_t = np.zeros((m, d, d))
    grad_w = np.zeros((m, d, d))
    meat = np.zeros((2 * md2, 2 * md2)) if scores else None
    rss = 0.0
    for s in range(0, N, kern.step):
        Xc, Yc = X[s : s + kern.step], Y[s : s + kern.step]
        n = Xc.shape[0]
        F, Am, T = kern.pieces(Xc)
        R = F - Yc
        rss += float(np.einsum("nac,nac->", R, R))
        rows = n * k
        Xf = Xc.reshape(rows, d)
        T2 = T.reshape(rows, md, d)
        M = T2 @ T2.transpose(0, 2, 1)  # [(n, a), (i, q), (j, s)]
        Z = Xf[:, iu] * Xf[:, ju]
        g_tt += Z.T @ M.reshape(rows, md * md)
        A2 = Am.reshape(rows, md)
        U = (Xf[:, :, None] * A2[:, None, :]).reshape(rows, d * md)
        g_tw += U.T @ T.reshape(rows, md2)
        g_ww += A2.T @ A2
        TR = np.einsum("naiqc,nac->naiq", T, R)  # Σ_c T r
        st = np.einsum("nap,naiq->nipq", Xc, TR)  # per-example Θ scores
        sw = np.einsum("naip,naq->nipq", Am, R)  # per-example W scores
        grad_t += st.sum(axis=0)
        grad_w += sw.sum(axis=0)
        if meat is not None:
            S = np.concatenate([st.reshape(n, md2), sw.reshape(n, md2)], axis=1)
            meat += S.T @ S
    G = np.empty((2 * md2, 2 * md2))
    full = np.empty((d, d, md * md))
    full[iu, ju] = g_tt
    full[ju, iu] = g_tt
    tt = full.reshape(d, d, m, d, m, d).transpose(2, 0, 3, 4, 1, 5).reshape(md2, md2)  # [i,p,q,j,r,s]
    tw = g_tw.reshape(d, m, d, m, d, d).transpose(3, 0, 4, 1, 2, 5).reshape(md2, md2)  # [i,p,q,j,r,s]
    ww = np.einsum("ipjr,qs->ipqjrs", g_ww.reshape(m, d, m, d), np.eye(d)).reshape(md2, md2)
    G[:md2, :md2] = tt
    G[:md2, md2:] = tw
    G[md2:, :md2] = tw.T
    G[md2:, md2:] = ww
    G = 0.5 * (G + G.T)
    return G, np.concatenate([grad_t.ravel(), grad_w.ravel()]), rss, meat


def normal_equations(model: MultiHeadAttention, X: ArrayLike, Y: ArrayLike) -> tuple[np.ndarray, np.ndarray, float]:
    """(JᵀJ, Jᵀr, RSS) of the residual r = vec(F(X) − Y) at ``model``, accumulated over chunks of examples
    without forming J. A Gauss–Newton step is ``params − solve(JᵀJ, Jᵀr)``.

    Parameters
    ----------
    model
        The layer (TypeError otherwise).
    X, Y
        Examples (N, k, d) with the model's d and labels of the same shape.

    Returns
    -------
    tuple
        JᵀJ (2md², 2md²) and Jᵀr (2md²,) in the flat layout of ``model.params()``, and the residual sum of squares.
    """
    if not isinstance(model, MultiHeadAttention):
        raise TypeError(f"model must be a MultiHeadAttention, got {type(model).__name__}")
    X3, Y3 = check_data(X, Y)
    if X3.shape[2] != model.d:
        raise ValueError(f"X has token dimension {X3.shape[2]}, the model has d = {model.d}")
    G, g, rss, _ = _accumulate(_Kernel(model, X3.shape[1]), X3, Y3, scores=False)
    return G, g, rss


# ------------------------------------------------------------------------------------ body widths
@dataclass
class BodyWidths:
    """Widths of a convex body along ``normal_directions`` (rows, unit vectors orthogonal to the span) and
    along the span's own basis vectors (``along``); ``max_normal`` = the largest normal width."""

    normal: np.ndarray
    along: np.ndarray
    normal_directions: np.ndarray

    @property
    def max_normal(self) -> float:
        return float(np.max(self.normal)) if self.normal.size else 0.0

    def to_dict(self) -> dict[str, JSON]:
        return {
            "normal": _jsonable(self.normal),
            "along": _jsonable(self.along),
            "max_normal": _finite_or_none(self.max_normal),
        }


def body_widths(
    body: object,
    span_basis: ArrayLike,
    *,
    directions: ArrayLike | None = None,
    max_directions: int = 32,
    seed: SeedLike = 0,
    solver: str | None = None,
    **width_options: Any,  # passed on to oracles.widths (center, radius, tol)
) -> BodyWidths:
    """Widths of a convex body along directions normal to a span: a thin body along every normal direction is
    evidence that no layer far from the span satisfies the body's constraints.

    ``directions`` (rows) are projected onto the orthogonal complement of the span and normalised; when None,
    the whole complement is used if it has at most ``max_directions`` dimensions, else ``max_directions``
    random unit vectors of it. The widths are computed by ``oracles.widths``.

    Parameters
    ----------
    body
        An ``oracles`` convex body, or an object with a ``.polytope`` such as the sculpted body (TypeError
        otherwise).
    span_basis
        The span's spanning columns, (n, r) (orthonormalised here).
    directions
        Directions to measure, rows of (count, n); None: the complement as above.
    max_directions
        Largest number of directions drawn when ``directions`` is None.
    seed
        Seed or Generator of the random directions.
    solver, width_options
        Passed on to ``oracles.widths`` (``center``, ``radius``, ``tol``).

    Returns
    -------
    BodyWidths
        Widths along the normal directions and along the span's own basis vectors.
    """
    import oracles

    target = getattr(body, "polytope", body)
    if not isinstance(target, (oracles.ConvexBody, oracles.AffineSubspace)):
        raise TypeError(f"body must be an oracles convex body (or have a .polytope), got {type(body).__name__}")
    n = target.ambient_dim if isinstance(target, oracles.AffineSubspace) else target.dim
    B = np.asarray(span_basis, dtype=np.float64)
    if B.ndim == 1:
        B = B[:, None]
    if B.ndim != 2 or B.shape[0] != n or not np.all(np.isfinite(B)):
        raise ValueError(f"span_basis must be a finite ({n}, r) array, got shape {np.shape(span_basis)}")
    if B.shape[1]:
        Ub, sb, _ = np.linalg.svd(B, full_matrices=False)
        Q = Ub[:, sb > 1e-10 * max(float(sb.max()), 1e-300)]
    else:
        Q = np.zeros((n, 0))
    comp = np.eye(n) - Q @ Q.T
    if directions is None:
        Uc, sc, _ = np.linalg.svd(comp)
        C = Uc[:, sc > 0.5]  # orthonormal basis of the complement
        if C.shape[1] <= max_directions:
            D = C.T
        else:
            gen = as_generator(seed, "seed")
            D = gen.standard_normal((max_directions, C.shape[1])) @ C.T
    else:
        D = np.asarray(directions, dtype=np.float64)
        if D.ndim == 1:
            D = D[None]
        if D.ndim != 2 or D.shape[1] != n or not np.all(np.isfinite(D)):
            raise ValueError(f"directions must be a finite (count, {n}) array, got shape {np.shape(directions)}")
        D = D @ comp
    norms = np.linalg.norm(D, axis=1)
    D = D[norms > 1e-12] / norms[norms > 1e-12, None]
    normal = (
        np.asarray(oracles.widths(target, D, solver=solver, **width_options), dtype=float)
        if D.shape[0]
        else np.zeros(0)
    )
    along = (
        np.asarray(oracles.widths(target, Q.T, solver=solver, **width_options), dtype=float)
        if Q.shape[1]
        else np.zeros(0)
    )
    return BodyWidths(normal=normal, along=along, normal_directions=D)


# ------------------------------------------------------------------------------------------ certificate
def _finite_or_none(x: float | np.floating | np.ndarray) -> float | None:
    v = float(x)
    return v if math.isfinite(v) else None


def _jsonable(a: ArrayLike) -> JSON:
    """Nested lists of floats with non-finite entries replaced by None."""
    arr = np.asarray(a, dtype=float)
    if arr.ndim == 0:
        return _finite_or_none(arr)
    obj = arr.astype(object)
    obj[~np.isfinite(arr)] = None
    return obj.tolist()


@dataclass
class Certificate:
    """What the data say about a learned layer (see the ``sculpt.certify`` module docstring for the formulas).

    Contract fields: ``locally_unique``, ``rank``, ``n_params`` (= 2 m d²), ``singular_values`` (ascending,
    s_j = sqrt(λ_j(JᵀJ) / n_residuals)), ``unidentifiable`` (names of the null directions; empty when locally
    unique), ``noise`` (the σ used), ``theta_se`` / ``w_se`` (shaped like model.thetas / model.ws, inf for
    unidentified entries), ``theta_interval`` / ``w_interval`` ((lower, upper) at ``level``).
    Also: ``rtol`` (rank threshold relative to s_max), ``noise_estimate`` (σ̂ from the residual, nan without
    degrees of freedom), ``noise_given``, ``rss``, ``n_residuals``, ``dof`` = n_residuals − rank,
    ``relative_residual`` = RSS / Σ Y², ``gradient_norm`` = ‖Jᵀr‖ / sqrt(n_residuals) (≈ 0 at a least-squares
    fit), ``covariance_kind``, ``covariance`` ((2md², 2md²), flat layout, pseudo-inverse form), ``notes``
    (observations that do not change the verdict), ``widths`` (``BodyWidths`` or None), ``seconds``.
    ``prediction_se`` / ``prediction_interval`` give the uncertainty of F on fresh inputs.
    """

    model: MultiHeadAttention
    locally_unique: bool
    rank: int
    n_params: int
    singular_values: np.ndarray
    rtol: float
    unidentifiable: list[str]
    noise: float
    noise_estimate: float
    noise_given: bool
    rss: float
    n_residuals: int
    dof: int
    relative_residual: float
    gradient_norm: float
    level: float
    quantile: float
    covariance_kind: str
    covariance: np.ndarray
    theta_se: np.ndarray
    w_se: np.ndarray
    theta_interval: tuple[np.ndarray, np.ndarray]
    w_interval: tuple[np.ndarray, np.ndarray]
    notes: list[str] = field(default_factory=list)
    widths: BodyWidths | None = None
    seconds: float = 0.0

    # ---------------------------------------------------------------------------------------- figures
    @property
    def condition(self) -> float:
        """s_max / s_min over all singular values (inf when rank-deficient)."""
        s = self.singular_values
        return float(s[-1] / s[0]) if s.size and s[0] > 0 else math.inf

    @property
    def fits(self) -> bool:
        """Whether the model fits the data: relative residual at most ``NO_FIT_RESIDUAL`` (nan counts as a fit)."""
        return not self.relative_residual > NO_FIT_RESIDUAL

    @property
    def smallest_relative_singular_value(self) -> float:
        s = self.singular_values
        return float(s[0] / s[-1]) if s.size and s[-1] > 0 else 0.0

    # -------------------------------------------------------------------------------------- prediction
    def prediction_se(self, X_new: ArrayLike) -> np.ndarray:
        """Standard error of every output entry of F̂(X_new) (same shape as X_new): sqrt(diag(J Σ Jᵀ)) with Σ
        the certificate's covariance and J the Jacobian at the fresh inputs (delta method). Directions the
        data do not identify are left out of Σ; they are valid to ignore only for inputs from the
        distribution of the certified data (on which the layer's function, unlike its parameters, is
        identified)."""
        X3, single = check_inputs(X_new, "X_new", d=self.model.d)
        kern = _Kernel(self.model, X3.shape[1])
        w, V = np.linalg.eigh(self.covariance)
        L = V * np.sqrt(np.clip(w, 0.0, None))
        out = np.empty(X3.shape)
        step = max(1, kern.step // max(1, self.model.d))
        for s in range(0, X3.shape[0], step):
            Xc = X3[s : s + step]
            JL = kern.dense(Xc) @ L
            out[s : s + step] = np.sqrt(np.einsum("ij,ij->i", JL, JL)).reshape(Xc.shape)
        return out[0] if single else out

    def prediction_interval(self, X_new: ArrayLike, *, kind: str = "mean") -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) at ``level`` for every output entry on fresh inputs: kind="mean" bounds F(X_new)
        (the noiseless layer output), kind="observation" a fresh noisy label (adds σ² to the variance)."""
        if kind not in ("mean", "observation"):
            raise ValueError(f"kind must be 'mean' or 'observation', got {kind!r}")
        X3, single = check_inputs(X_new, "X_new", d=self.model.d)
        se = self.prediction_se(X3)
        if kind == "observation":
            se = np.sqrt(se**2 + self.noise**2)
        F = self.model(X3)
        lo, hi = F - self.quantile * se, F + self.quantile * se
        return (lo[0], hi[0]) if single else (lo, hi)

    # ------------------------------------------------------------------------------------------ output
    def summary(self) -> str:
        """A few lines for a terminal."""
        s = self.singular_values
        head = "locally unique" if self.locally_unique else "NOT locally unique"
        if not self.fits:
            head = (
                f"the model does NOT fit the data (relative residual {self.relative_residual:.3g} > "
                f"{NO_FIT_RESIDUAL:g}), so nothing is certified; at this point the fit is {head}"
            )
        lines = [
            f"certificate: {head} (rank {self.rank} / {self.n_params} parameters; "
            f"s_min/s_max = {self.smallest_relative_singular_value:.3g}, s_max = {s[-1] if s.size else 0:.3g})",
            f"  noise σ = {self.noise:.3g} ({'given' if self.noise_given else 'estimated'}), "
            f"relative residual {self.relative_residual:.3g}, {self.covariance_kind} covariance, "
            f"level {self.level:g}",
            f"  median se: Θ {_median_finite(self.theta_se):.3g}, W {_median_finite(self.w_se):.3g}",
        ]
        lines += [f"  unidentifiable: {u}" for u in self.unidentifiable]
        lines += [f"  note: {n}" for n in self.notes]
        if self.widths is not None and self.widths.normal.size:
            lines.append(
                f"  body width normal to the span: max {self.widths.max_normal:.3g} over "
                f"{self.widths.normal.size} directions"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, JSON]:
        """JSON-ready (strict: non-finite numbers become None; the covariance matrix is left out)."""
        return {
            "locally_unique": bool(self.locally_unique),
            "fits": bool(self.fits),
            "rank": int(self.rank),
            "n_params": int(self.n_params),
            "m": self.model.m,
            "d": self.model.d,
            "singular_values": _jsonable(self.singular_values),
            "rtol": self.rtol,
            "unidentifiable": list(self.unidentifiable),
            "notes": list(self.notes),
            "noise": _finite_or_none(self.noise),
            "noise_estimate": _finite_or_none(self.noise_estimate),
            "noise_given": bool(self.noise_given),
            "rss": _finite_or_none(self.rss),
            "n_residuals": int(self.n_residuals),
            "dof": int(self.dof),
            "relative_residual": _finite_or_none(self.relative_residual),
            "gradient_norm": _finite_or_none(self.gradient_norm),
            "level": self.level,
            "quantile": _finite_or_none(self.quantile),
            "covariance_kind": self.covariance_kind,
            "theta_se": _jsonable(self.theta_se),
            "w_se": _jsonable(self.w_se),
            "theta_interval": [_jsonable(self.theta_interval[0]), _jsonable(self.theta_interval[1])],
            "w_interval": [_jsonable(self.w_interval[0]), _jsonable(self.w_interval[1])],
            "widths": None if self.widths is None else self.widths.to_dict(),
            "seconds": _finite_or_none(self.seconds),
        }


def _median_finite(a: np.ndarray) -> float:
    f = a[np.isfinite(a)]
    return float(np.median(f)) if f.size else math.inf


# ------------------------------------------------------------------------------------- explanations
def _blocks(v: np.ndarray, m: int, d: int) -> np.ndarray:
    """Flat vector(s) → (…, 2, m, d, d): [kind (0 Θ, 1 W), head, p, q]."""
    return v.reshape(v.shape[:-1] + (2, m, d, d))


def _top_entries(B: np.ndarray, name: str, count: int = 2) -> str:
    flat = np.argsort(-np.abs(B.ravel()))[:count]
    d = B.shape[1]
    return ", ".join(f"{name}[{j // d},{j % d}] {B.ravel()[j]:+.2f}" for j in flat)


def _template(m: int, d: int, parts: list[tuple[int, int, float]]) -> np.ndarray:
    """Orthonormal basis (p, d²) of {Σ coef · Δ placed in block (kind, head)} over all d×d Δ."""
    blocks = np.zeros((2, m, d * d, d * d))
    for kind, head, coef in parts:
        blocks[kind, head] = coef * np.eye(d * d)
    T = blocks.reshape(2 * m * d * d, d * d)
    return T / np.linalg.norm(T[:, 0])


class _Explainer:
    """Names null directions: greedy matching of structural templates, then a generic description."""

    def __init__(self, model: MultiHeadAttention, null: np.ndarray, k: int) -> None:
        self.model, self.null, self.k = model, null, k
        self.m, self.d = model.m, model.d
        self.found = np.zeros((null.shape[0], 0))
        self.messages: list[str] = []

    def _take(self, T: np.ndarray) -> tuple[int, np.ndarray | None]:
        """Directions of T lying in the null space that are new to ``found``: (count, first direction, None iff count is 0)."""
        U, s, _ = np.linalg.svd(T.T @ self.null, full_matrices=False)
        inside = T @ U[:, s > 0.99]
        if inside.shape[1] == 0:
            return 0, None
        resid = inside - self.found @ (self.found.T @ inside)
        Ur, sr, _ = np.linalg.svd(resid, full_matrices=False)
        new = Ur[:, sr > 0.1]
        if new.shape[1] == 0:
            return 0, None
        self.found = np.concatenate([self.found, new], axis=1)
        return new.shape[1], new[:, 0]

    def _along(self, count: int, v: np.ndarray, kind: int, head: int, name: str) -> str:
        dd = self.d * self.d
        if count == dd:
            return f"all {dd} directions"
        B = _blocks(v, self.m, self.d)[kind, head]
        return f"{count} of {dd} directions, e.g. along Δ with {_top_entries(B / np.linalg.norm(B), name)}"

    def run(self) -> list[str]:
        """Messages naming the null directions: a head's Θ block, W_i − W_j of heads that attend alike,
        Θ_j − λ Θ_i of heads that coincide up to the scale of W, then what no template explains."""
        m, th, ws = self.m, self.model.thetas, self.model.ws
        w_norm = np.linalg.norm(ws.reshape(m, -1), axis=1)
        t_norm = np.linalg.norm(th.reshape(m, -1), axis=1)
        w_ref, t_ref = max(float(w_norm.max()), 1e-300), max(float(t_norm.max()), 1e-300)
        for i in range(m):
            self._theta_block(i, w_norm, w_ref)
        pairs = [(i, j) for i in range(m) for j in range(i + 1, m)]
        for i, j in pairs:
            self._same_attention(i, j, t_ref)
        for i, j in pairs:
            self._coinciding(i, j, w_norm, w_ref, t_ref)
        self._unexplained()
        return self.messages

    def _theta_block(self, i: int, w_norm: np.ndarray, w_ref: float) -> None:
        """Null directions inside head i's Θ block."""
        cnt, v = self._take(_template(self.m, self.d, [(0, i, 1.0)]))
        if v is None:  # cnt == 0
            return
        along = self._along(cnt, v, 0, i, f"Θ_{i + 1}")
        if self.k == 1:
            why = f"k = 1 (softmax over a single token is constant): Θ_{i + 1} of head {i + 1}"
        elif w_norm[i] <= _SMALL * w_ref:
            why = f"head {i + 1} has W ≈ 0 (‖W_{i + 1}‖_F = {w_norm[i]:.2g}), so Θ_{i + 1}"
        else:
            why = f"Θ_{i + 1} of head {i + 1}"
        self.messages.append(f"{why} is unidentifiable in {along}")

    def _same_attention(self, i: int, j: int, t_ref: float) -> None:
        """Coinciding attention patterns of heads i and j: only W_i + W_j is seen."""
        cnt, v = self._take(_template(self.m, self.d, [(1, i, 1.0), (1, j, -1.0)]))
        if v is None:  # cnt == 0
            return
        gap = float(np.linalg.norm(self.model.thetas[i] - self.model.thetas[j]))
        if self.k == 1:
            why = f"k = 1, so heads {i + 1} and {j + 1} attend identically"
        elif gap <= 1e-3 * t_ref:
            why = f"heads {i + 1} and {j + 1} have Θ_{i + 1} ≈ Θ_{j + 1} (‖Θ_{i + 1} − Θ_{j + 1}‖_F = {gap:.2g})"
        elif cnt == self.d * self.d:
            why = (
                f"heads {i + 1} and {j + 1} attend identically on these data "
                f"(although ‖Θ_{i + 1} − Θ_{j + 1}‖_F = {gap:.2g})"
            )
        else:
            why = f"the data do not separate the outputs of heads {i + 1} and {j + 1}"
        self.messages.append(
            f"{why}: only W_{i + 1} + W_{j + 1} is identified, W_{i + 1} − W_{j + 1} is unidentifiable "
            f"in {self._along(cnt, v, 1, i, f'W_{i + 1}')}"
        )

    def _coinciding(self, i: int, j: int, w_norm: np.ndarray, w_ref: float, t_ref: float) -> None:
        """Heads i and j equal up to the scale of W (Θ_i ≈ Θ_j, W_j ≈ λ W_i): Θ_j − λ Θ_i is unseen."""
        th, ws = self.model.thetas, self.model.ws
        if w_norm[i] <= _SMALL * w_ref or np.linalg.norm(th[i] - th[j]) > 1e-3 * t_ref + 1e-12:
            return
        lam = float(np.sum(ws[i] * ws[j]) / w_norm[i] ** 2)
        if np.linalg.norm(ws[j] - lam * ws[i]) > 1e-3 * max(w_norm[j], 1e-300) or lam == 0.0:
            return
        cnt, v = self._take(_template(self.m, self.d, [(0, i, -lam), (0, j, 1.0)]))
        if v is None:  # cnt == 0
            return
        unit = abs(lam - 1) < 1e-3
        comb = f"Θ_{j + 1} − Θ_{i + 1}" if unit else f"Θ_{j + 1} {'−' if lam > 0 else '+'} {abs(lam):.3g}·Θ_{i + 1}"
        self.messages.append(
            f"{comb} is unidentifiable in {self._along(cnt, v, 0, j, f'Θ_{j + 1}')}: heads {i + 1} "
            f"and {j + 1} coincide (Θ_{i + 1} ≈ Θ_{j + 1}, W_{j + 1} ≈ "
            f"{'' if unit else f'{lam:.3g}·'}W_{i + 1})"
        )

    def _unexplained(self) -> None:
        """The null directions no template matched, described one by one (at most ``_MAX_GENERIC``)."""
        rest = self.null - self.found @ (self.found.T @ self.null)
        Ur, sr, _ = np.linalg.svd(rest, full_matrices=False) if rest.size else (rest, np.zeros(0), None)
        R = Ur[:, sr > 0.5] if sr.size else rest[:, :0]
        for c in range(min(R.shape[1], _MAX_GENERIC)):
            self.messages.append(f"unidentified direction {self._describe(R[:, c])}")
        if R.shape[1] > _MAX_GENERIC:
            self.messages.append(f"… and {R.shape[1] - _MAX_GENERIC} more unidentified directions")

    def _describe(self, v: np.ndarray) -> str:
        B = _blocks(v / np.linalg.norm(v), self.m, self.d)
        energy = np.sqrt(np.sum(B**2, axis=(2, 3)))  # (2, m)
        order = np.argsort(-energy.ravel())
        terms: list[str] = []
        entries: list[str] = []
        lead: dict[int, tuple[int, int]] = {}
        for idx in order:
            kind, head = divmod(int(idx), self.m)
            if energy[kind, head] < 0.2 * energy.max():
                break
            name = f"{'ΘW'[kind]}_{head + 1}"
            coef = float(energy[kind, head])
            if kind in lead:  # signed against the leading block of the same kind when (anti-)parallel to it
                ref = B[lead[kind]]
                cos = float(np.sum(B[kind, head] * ref) / (np.linalg.norm(ref) * energy[kind, head]))
                coef = math.copysign(coef, cos) if abs(cos) > 0.9 else coef
            else:
                lead[kind] = (kind, head)
            sign = "−" if coef < 0 else "+"
            terms.append(f"{'' if not terms else sign + ' '}{abs(coef):.2f}·Δ{name}")
            entries.append(_top_entries(B[kind, head], name, 1))
        return " ".join(terms) + " (largest entries: " + ", ".join(entries) + ")"


def _notes(
    model: MultiHeadAttention, s: np.ndarray, rank: int, V: np.ndarray, n_res: int, dof: int, noise_given: bool
) -> list[str]:
    notes = []
    m = model.m
    if n_res < model.n_params:
        notes.append(f"fewer residuals ({n_res}) than parameters ({model.n_params}): more data are needed")
    if rank == s.size and s.size and s[0] < _WEAK * s[-1]:
        expl = _Explainer(model, np.zeros((s.size, 0)), 2)
        notes.append(
            f"weakly identified: s_min/s_max = {s[0] / s[-1]:.2g} (above rtol) along "
            f"{expl._describe(V[:, 0])}; the intervals along it are wide"
        )
    sw = np.linalg.svd(model.ws.sum(axis=0), compute_uv=False)
    if sw[-1] <= 1e-8 * max(sw[0], 1e-300):
        notes.append(
            f"Σ W_i is singular (σ_min/σ_max = {sw[-1] / max(sw[0], 1e-300):.2g}): this does not "
            "affect local identifiability of the least-squares fit, but the sculpting route assumes "
            "Σ W_i invertible"
        )
    t_norm = np.linalg.norm(model.thetas.reshape(m, -1), axis=1)
    for i in np.flatnonzero(t_norm <= _SMALL * max(float(t_norm.max()), 1e-300)) if m > 1 else []:
        notes.append(f"head {i + 1} has Θ ≈ 0 (uniform attention); that alone does not break identifiability")
    if not noise_given and dof <= 0:
        notes.append("no degrees of freedom left for a noise estimate: pass noise=σ")
    return notes


# -------------------------------------------------------------------------------------------- certify
def _check_unit(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not 0.0 < v < 1.0:
        raise ValueError(f"{name} must lie in (0, 1), got {value}")
    return v


def _checked(
    model: object, X: ArrayLike, Y: ArrayLike, covariance: str
) -> tuple[MultiHeadAttention, np.ndarray, np.ndarray]:
    """(model, X, Y) after ``certify``'s argument checks (``level`` and ``rtol`` are checked by the caller)."""
    if not isinstance(model, MultiHeadAttention):
        raise TypeError(f"model must be a MultiHeadAttention, got {type(model).__name__}")
    X3, Y3 = check_data(X, Y)
    if X3.shape[2] != model.d:
        raise ValueError(f"X has token dimension {X3.shape[2]}, the model has d = {model.d}")
    if X3.shape[0] == 0:
        raise ValueError("X holds no examples")
    if covariance not in COVARIANCES:
        raise ValueError(f"covariance must be one of {COVARIANCES}, got {covariance!r}")
    return model, X3, Y3


def _check_noise(noise: object) -> float | None:
    if noise is None:
        return None
    if isinstance(noise, bool) or not isinstance(noise, numbers.Real):
        raise TypeError(f"noise must be a real number or None, got {type(noise).__name__}")
    if not (math.isfinite(float(noise)) and float(noise) >= 0):
        raise ValueError(f"noise must be finite and >= 0, got {noise}")
    return float(noise)


@dataclass
class _Spectrum:
    """JᵀJ = V diag(lam) Vᵀ: the singular values s = sqrt(lam / n_residuals) (ascending), the kept (identified)
    directions and the null ones."""

    lam: np.ndarray
    V: np.ndarray
    s: np.ndarray
    keep: np.ndarray

    @classmethod
    def of(cls, G: np.ndarray, n_res: int, rtol: float) -> _Spectrum:
        with single_blas_thread():  # syevd gains little from threads and suffers badly on a loaded machine
            lam, V = np.linalg.eigh(G)
        lam = np.clip(lam, 0.0, None)
        s = np.sqrt(lam / n_res)  # ascending
        cut = rtol * s[-1] if s[-1] > 0 else math.inf
        return cls(lam, V, s, s > cut)

    @property
    def rank(self) -> int:
        return int(self.keep.sum())

    @property
    def null(self) -> np.ndarray:
        return self.V[:, ~self.keep]

    def pinv(self) -> np.ndarray:
        """(JᵀJ)⁺ on the identified directions."""
        Vr = self.V[:, self.keep]
        return (Vr / self.lam[self.keep]) @ Vr.T


def _covariance(
    spec: _Spectrum,
    kind: str,
    sigma: float,
    meat: np.ndarray | None,
    N: int,
    n_res: int,
    level: float,
    noise_given: bool,
) -> tuple[np.ndarray, float]:
    """(parameter covariance, interval quantile): Gauss–Newton σ² (JᵀJ)⁺ with Student's t when σ is estimated,
    or the sandwich (JᵀJ)⁺ (Σ g_n g_nᵀ) (JᵀJ)⁺ with its small-sample factor and the normal quantile."""
    G_pinv = spec.pinv()
    p = G_pinv.shape[0]
    dof = n_res - spec.rank
    if kind == "gauss-newton":
        cov = sigma**2 * G_pinv if math.isfinite(sigma) else np.full((p, p), math.nan)
        if not noise_given and dof > 0:
            q = float(stats.t.ppf(0.5 + level / 2, dof))
        else:
            q = float(stats.norm.ppf(0.5 + level / 2))
    else:
        assert meat is not None  # accumulated for the sandwich
        factor = (N / (N - 1) if N > 1 else math.nan) * ((n_res - 1) / dof if dof > 0 else math.nan)
        cov = factor * (G_pinv @ meat @ G_pinv)
        q = float(stats.norm.ppf(0.5 + level / 2))
    return 0.5 * (cov + cov.T), q


def certify(
    model: MultiHeadAttention,
    X: ArrayLike,
    Y: ArrayLike,
    *,
    noise: float | None = None,
    level: float = 0.95,
    covariance: str = "gauss-newton",
    rtol: float = DEFAULT_RTOL,
    body: object = None,
    span_basis: ArrayLike | None = None,
    width_options: Mapping[str, Any] | None = None,
) -> Certificate:
    """A ``Certificate`` for ``model`` on data (X, Y).

    The parameter intervals are those of the least-squares estimate from (X, Y): pass the data the model was
    fitted to (``gradient_norm`` ≈ 0 confirms a least-squares fit; a model fitted elsewhere is certified as
    if it had been fitted to (X, Y), i.e. the covariance is that of a fit of this size). A noise level
    estimated on held-out residuals can be passed as ``noise``.

    Parameters
    ----------
    model
        The layer to certify (TypeError otherwise).
    X, Y
        Examples (N, k, d) (or (k, d)) with the model's d, and labels of the same shape (ValueError otherwise).
    noise
        The label noise σ if known; None: estimated from the residual.
    level
        Confidence level of the intervals, in (0, 1).
    covariance
        "gauss-newton" (homoscedastic noise) or "sandwich" (per-example heteroscedastic-robust).
    rtol
        Rank threshold relative to the largest singular value, in (0, 1).
    body, span_basis
        A convex body over vec Θ (e.g. a sculpted K*) and the recovered span (d², r), given together:
        ``widths`` then holds ``body_widths(body, span_basis, **width_options)``.
    width_options
        Passed on to ``body_widths``.

    Returns
    -------
    Certificate
        The verdict, singular values, noise, covariance and intervals.
    """
    t0 = time.perf_counter()
    model, X3, Y3 = _checked(model, X, Y, covariance)
    level = _check_unit(level, "level")
    rtol = _check_unit(rtol, "rtol")
    noise = _check_noise(noise)
    if (body is None) != (span_basis is None):
        raise ValueError("body and span_basis must be given together")
    N, k, d = X3.shape
    n_res, p = N * k * d, model.n_params
    G, grad, rss, meat = _accumulate(_Kernel(model, k), X3, Y3, scores=covariance == "sandwich")
    spec = _Spectrum.of(G, n_res, rtol)
    rank = spec.rank
    dof = n_res - rank
    sigma_hat = math.sqrt(rss / dof) if dof > 0 else math.nan
    sigma = noise if noise is not None else sigma_hat
    cov, q = _covariance(spec, covariance, sigma, meat, N, n_res, level, noise is not None)
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    null = spec.null
    se[np.einsum("ij,ij->i", null, null) > _NULL_LEAK] = math.inf
    est = model.params()
    lo, hi = est - q * se, est + q * se
    half, shape = p // 2, model.thetas.shape
    y_energy = float(np.einsum("nac,nac->", Y3, Y3))
    return Certificate(
        model=model.copy(),
        locally_unique=rank == p,
        rank=rank,
        n_params=p,
        singular_values=spec.s,
        rtol=rtol,
        unidentifiable=[] if rank == p else _Explainer(model, null, k).run(),
        noise=sigma,
        noise_estimate=sigma_hat,
        noise_given=noise is not None,
        rss=rss,
        n_residuals=n_res,
        dof=dof,
        relative_residual=rss / y_energy if y_energy > 0 else (0.0 if rss == 0 else math.inf),
        gradient_norm=float(np.linalg.norm(grad)) / math.sqrt(n_res),
        level=level,
        quantile=q,
        covariance_kind=covariance,
        covariance=cov,
        theta_se=se[:half].reshape(shape),
        w_se=se[half:].reshape(shape),
        theta_interval=(lo[:half].reshape(shape), hi[:half].reshape(shape)),
        w_interval=(lo[half:].reshape(shape), hi[half:].reshape(shape)),
        notes=_notes(model, spec.s, rank, spec.V, n_res, dof, noise is not None),
        widths=None if body is None or span_basis is None else body_widths(body, span_basis, **(width_options or {})),
        seconds=time.perf_counter() - t0,
    )
