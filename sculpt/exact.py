"""The exact algebraic route for one head (m = 1, k < d): two linear least-squares problems.

With one head Y = A X W, A = softmax(X Θ Xᵀ) row-stochastic. For rank(X) = k < d the inverse M = W⁻¹
satisfies the linear equations Y M (I − X⁺X) = 0 and Y M X⁺ 1 = 1; then A = Y M X⁺ and Θ solves the
linear log-ratio equations log(A_aj / A_ar) = ⟨Θ, x_a (x_j − x_r)ᵀ⟩ (r = argmax of row a).
Derivation and measurements: docs/method.md. Settings: ``ExactSettings`` (``sculpt.settings``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from ._checks import check_data, check_m
from .model import MultiHeadAttention, attention_patterns
from .result import LearnResult, PhaseRecord
from .settings import ExactSettings, ProblemSize
from .toolkit.forward_pass import relative_mse

__all__ = ["exact_single_head", "exact_sample_size", "exact_equation_counts"]


def exact_equation_counts(d: int, k: int) -> tuple[int, int]:
    """Independent equations one example with rank(X) = k adds to each system.

    Parameters
    ----------
    d, k
        Token dimension and tokens per example.

    Returns
    -------
    tuple of int
        (W⁻¹-system k(d−k+1), Θ-system k(k−1)).
    """
    return k * (d - k + 1), k * (k - 1)


def exact_sample_size(d: int, k: int) -> int:
    """Examples the exact route should be given (its budget): max(⌈d²/(k(k−1))⌉, ⌈d²/(k(d−k+1))⌉) + 3.

    The first term (Θ-system) is the larger one whenever k ≤ (d + 2)/2, so this is ⌈d²/(k(k−1))⌉ + 3 in the
    usual regime; the +3 absorbs examples dropped for dependent tokens and chance rank losses.

    Parameters
    ----------
    d, k
        Token dimension and tokens per example, 2 <= k < d (ValueError otherwise).

    Returns
    -------
    int
        The budget.
    """
    d, k = int(d), int(k)
    if d < 2 or k < 2 or k >= d:
        raise ValueError(f"the exact route needs 2 <= k < d, got d = {d}, k = {k}")
    per_w, per_theta = exact_equation_counts(d, k)
    return max(math.ceil(d * d / per_theta), math.ceil(d * d / per_w)) + 3


# --------------------------------------------------------------------------------------------------
# Streaming least squares
# --------------------------------------------------------------------------------------------------


@dataclass
class _LstsqSolution:
    """Least-squares solution of a stacked system: ``x``, numerical ``rank``, ``singular_values`` (of the
    system matrix, descending), ``residual`` ‖Ax − b‖ and ``rhs_norm`` ‖b‖, ``rows`` stacked."""

    x: np.ndarray
    rank: int
    singular_values: np.ndarray
    residual: float
    rhs_norm: float
    rows: int

    @property
    def relative_residual(self) -> float:
        return self.residual / self.rhs_norm if self.rhs_norm > 0 else self.residual

    @property
    def condition(self) -> float:
        s = self.singular_values
        return float(s[0] / s[-1]) if s.size and s[-1] > 0 else math.inf


def _streaming_lstsq(blocks: Iterator[tuple[np.ndarray, np.ndarray]], n: int, rank_tol: float) -> _LstsqSolution:
    """min ‖A x − b‖ with the rows of [A | b] given block by block (TSQR: R of [R; block] each step).

    Memory stays O(n² + block); the rank counts singular values of A above ``rank_tol``·σ_max; a
    rank-deficient system gets the minimum-norm solution on its numerical range.
    """
    R = np.zeros((0, n + 1))
    rows, rhs_sq = 0, 0.0
    for A_blk, b_blk in blocks:
        if A_blk.shape[0] == 0:
            continue
        rows += A_blk.shape[0]
        rhs_sq += float(b_blk @ b_blk)
        # numpy's stubs type every mode as QRResult; mode="r" returns the array R alone
        R = cast(np.ndarray, np.linalg.qr(np.vstack([R, np.column_stack([A_blk, b_blk])]), mode="r"))
    if rows == 0:
        return _LstsqSolution(np.zeros(n), 0, np.zeros(0), 0.0, 0.0, 0)
    R = np.vstack([R, np.zeros((max(0, n + 1 - R.shape[0]), n + 1))])
    Ra, c, tail = R[:n, :n], R[:n, n], abs(R[n, n])
    U, s, Vt = np.linalg.svd(Ra)
    keep = s > rank_tol * s[0] if s[0] > 0 else np.zeros_like(s, dtype=bool)
    rank = int(keep.sum())
    coef = U[:, keep].T @ c
    x = Vt[keep].T @ (coef / s[keep])
    # residual² = ‖c minus its projection on the kept range‖² + tail² (formed directly: no cancellation)
    c_perp = c - U[:, keep] @ coef
    resid_sq = float(c_perp @ c_perp) + tail * tail
    return _LstsqSolution(x, rank, s, math.sqrt(resid_sq), math.sqrt(rhs_sq), rows)


def _chunks(n_items: int, size: int) -> Iterator[slice]:
    for start in range(0, n_items, size):
        yield slice(start, min(start + size, n_items))


# --------------------------------------------------------------------------------------------------
# The two systems
# --------------------------------------------------------------------------------------------------


@dataclass
class _TokenGeometry:
    """Per example (rank(X) = k): pseudo-inverse X⁺ (d, k) and an orthonormal basis of null(X) as rows (d−k, d)."""

    pinv: np.ndarray
    null: np.ndarray


def _independent_tokens(X: np.ndarray, token_tol: float) -> np.ndarray:
    """Mask of the examples with rank(X) = k: σ_min(X) > token_tol·σ_max(X)."""
    s = np.linalg.svd(X, compute_uv=False)
    return s[:, -1] > token_tol * s[:, 0]


def _token_geometry(X: np.ndarray) -> _TokenGeometry:
    """Full SVD of every X (n, k, d) of rank k: X⁺ = V Σ⁻¹ Uᵀ and null(X) = V_⊥."""
    k = X.shape[1]
    U, s, Vt = np.linalg.svd(X, full_matrices=True)
    pinv = np.einsum("nkd,nk,nak->nda", Vt[:, :k, :], 1.0 / s, U)
    null = Vt[:, k:, :]
    return _TokenGeometry(pinv, null)


def _inverse_projection_blocks(
    Y: np.ndarray, geo: _TokenGeometry, per_block: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Rows of the W⁻¹-system in vec(M) (row-major): kron(y_a, u_c) · vec M = 0 for u_c ∈ null(X), and
    kron(y_a, X⁺1) · vec M = 1."""
    d = Y.shape[2]
    ones_pinv = geo.pinv.sum(axis=2)  # X⁺ 1, (n, d)
    for sl in _chunks(Y.shape[0], per_block):
        y = Y[sl]
        hom = np.einsum("nap,ncq->nacpq", y, geo.null[sl]).reshape(-1, d * d)
        inh = np.einsum("nap,nq->napq", y, ones_pinv[sl]).reshape(-1, d * d)
        yield np.vstack([hom, inh]), np.concatenate([np.zeros(hom.shape[0]), np.ones(inh.shape[0])])


def _log_ratio_blocks(
    X: np.ndarray, A: np.ndarray, per_block: int, floor: float, weighting: str, counter: dict[str, int]
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Rows of the Θ-system: w · kron(x_a, x_j − x_r) · vec Θ = w · log(A_aj / A_ar), r = argmax_j A_aj,
    over j ≠ r with A_aj, A_ar > floor; w = (A_aj⁻² + A_ar⁻²)^(−1/2) ("inverse-variance") or 1."""
    n_all, k, d = X.shape
    for sl in _chunks(n_all, per_block):
        x, a = X[sl], A[sl]
        r = np.argmax(a, axis=2)  # (n, k)
        a_r = np.take_along_axis(a, r[:, :, None], axis=2)  # (n, k, 1)
        x_r = np.take_along_axis(x, r[:, :, None], axis=1)  # (n, k, d): x_{r(a)}
        diff = x[:, None, :, :] - x_r[:, :, None, :]  # (n, a, j, d)
        not_ref = np.arange(k)[None, None, :] != r[:, :, None]
        usable = not_ref & (a > floor) & (a_r > floor)
        counter["equations"] += int(usable.sum())
        counter["guarded"] += int((not_ref & ~usable).sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            rhs = np.log(a / a_r)
            w = (a**-2.0 + a_r**-2.0) ** -0.5 if weighting == "inverse-variance" else np.ones_like(a)
        rows = np.einsum("nap,najq->najpq", x, diff)[usable].reshape(-1, d * d)
        wu = w[usable]
        yield rows * wu[:, None], rhs[usable] * wu


def _rel_err(est: np.ndarray, true: np.ndarray) -> float:
    return float(np.linalg.norm(est - true) / max(np.linalg.norm(true), 1e-300))


def _truth_params(truth: MultiHeadAttention) -> tuple[np.ndarray, np.ndarray]:
    thetas, ws = np.asarray(truth.thetas, dtype=float), np.asarray(truth.ws, dtype=float)
    if thetas.shape[0] != 1:
        raise ValueError(f"truth must have one head for the exact route, got {thetas.shape[0]}")
    return thetas[0], ws[0]


def _block_examples(row_count: int, n: int) -> int:
    """Examples per block so that a block has about max(4n, 8192) rows."""
    return max(1, max(4 * n, 8192) // max(row_count, 1))


# --------------------------------------------------------------------------------------------------
# The route
# --------------------------------------------------------------------------------------------------


@dataclass
class _Context:
    """One call of the route: the examples read (N), their sizes, how many were dropped for dependent tokens,
    the budget, the true head when given, and the phase records so far."""

    start: float
    N: int
    d: int
    k: int
    dropped: int
    recommended: int
    truth: tuple[np.ndarray, np.ndarray] | None
    phases: list[PhaseRecord]

    @property
    def drop_note(self) -> str:
        n, dropped = self.N, self.dropped
        return f" ({dropped} of {n} examples dropped: tokens linearly dependent)" if dropped else ""

    def more_needed(self, rank: int, per_example: int, valid: int) -> int:
        """Examples to draw: the missing rank over the per-example count (at least up to the recommended
        total), scaled up by the fraction of examples dropped so far."""
        usable = max(math.ceil((self.d * self.d - rank) / per_example), self.recommended - valid, 1)
        usable_fraction = (self.N - self.dropped) / self.N
        return math.ceil(usable / usable_fraction) if self.dropped else usable

    def fail(self, record: PhaseRecord, reason: str, samples: int) -> LearnResult:
        """No model: ``record`` is the phase that failed and says why."""
        record.status, record.message = "failed", reason
        self.phases.append(record)
        return LearnResult(
            model=None,
            method="exact",
            train_error=math.inf,
            converged=False,
            time=time.perf_counter() - self.start,
            samples_used=samples,
            phases=self.phases,
            reason=reason,
            info={"recommended_samples": self.recommended, "examples_given": self.N},
        )


def _solved(sol: _LstsqSolution) -> dict[str, object]:
    """A system's figures for its phase record."""
    return {"rank": sol.rank, "rows": sol.rows, "relative_residual": sol.relative_residual, "condition": sol.condition}


def _inverse_phase(
    ctx: _Context, Xk: np.ndarray, Yk: np.ndarray, s: ExactSettings
) -> tuple[np.ndarray, _TokenGeometry] | LearnResult:
    """Phase "exact-w": M = W⁻¹ from the stacked linear system on the chosen examples; (M, their token
    geometry), or the failed result."""
    t0 = time.perf_counter()
    d, n_unknown, n_valid = ctx.d, ctx.d * ctx.d, Xk.shape[0]
    rec = PhaseRecord(
        "exact-w",
        figures={
            "examples_given": ctx.N,
            "examples_used": n_valid,
            "examples_dropped": ctx.dropped,
            "max_examples": s.max_examples,
            "unknowns": n_unknown,
        },
    )
    if n_valid == 0:
        rec.time = time.perf_counter() - t0
        reason = f"no example has k linearly independent tokens{ctx.drop_note}; need about {ctx.recommended} "
        return ctx.fail(rec, reason + "examples with rank(X) = k", 0)
    geo = _token_geometry(Xk)
    per_w = exact_equation_counts(d, ctx.k)[0]
    sol = _streaming_lstsq(
        _inverse_projection_blocks(Yk, geo, _block_examples(per_w, n_unknown)), n_unknown, s.rank_tol
    )
    M = sol.x.reshape(d, d)
    rec.figures.update(_solved(sol))
    rec.time = time.perf_counter() - t0
    if sol.rank < n_unknown:
        more = ctx.more_needed(sol.rank, per_w, n_valid)
        return ctx.fail(
            rec,
            f"W⁻¹-system rank deficient: rank {sol.rank} < d² = {n_unknown} from {n_valid} usable "
            f"examples{ctx.drop_note}; need about {more} more examples (recommended: "
            f"{ctx.recommended} usable ones), or W is singular",
            n_valid,
        )
    try:
        W_from_m = np.linalg.inv(M)
    except np.linalg.LinAlgError:
        return ctx.fail(rec, "the solved W⁻¹ is singular; W cannot be recovered", n_valid)
    if ctx.truth is not None:
        true_w = ctx.truth[1]
        rec.truth = {"w_error": _rel_err(W_from_m, true_w), "w_inverse_error": _rel_err(M, np.linalg.inv(true_w))}
    usable = ctx.N - ctx.dropped
    capped = f" (the first {n_valid} of {usable} usable)" if usable > n_valid else ""
    rec.message = f"W⁻¹ from {n_valid} examples{capped}, rank {sol.rank}/{n_unknown}{ctx.drop_note}"
    ctx.phases.append(rec)
    return M, geo


def _theta_phase(
    ctx: _Context, Xk: np.ndarray, Yk: np.ndarray, M: np.ndarray, geo: _TokenGeometry, s: ExactSettings
) -> tuple[np.ndarray, PhaseRecord] | LearnResult:
    """Phase "exact-theta": A = Y M X⁺, then Θ from the log-ratio equations; (Θ, its unfinished record), or
    the failed result."""
    t0 = time.perf_counter()
    d, n_unknown, n_valid = ctx.d, ctx.d * ctx.d, Xk.shape[0]
    A = np.einsum("nap,pq,nqb->nab", Yk, M, geo.pinv)
    counter = {"equations": 0, "guarded": 0}
    per_theta = exact_equation_counts(d, ctx.k)[1]
    blocks = _log_ratio_blocks(Xk, A, _block_examples(per_theta, n_unknown), s.attention_floor, s.weighting, counter)
    sol = _streaming_lstsq(blocks, n_unknown, s.rank_tol)
    rec = PhaseRecord(
        "exact-theta",
        figures={
            **_solved(sol),
            "guarded_entries": counter["guarded"],
            "weighting": s.weighting,
            "attention_row_sum_error": float(np.max(np.abs(A.sum(axis=2) - 1.0))),
            "attention_min": float(A.min()),
        },
    )
    rec.time = time.perf_counter() - t0
    if sol.rank < n_unknown:
        more = ctx.more_needed(sol.rank, per_theta, n_valid)
        guard = f"; {counter['guarded']} non-positive attention entries skipped" if counter["guarded"] else ""
        return ctx.fail(
            rec,
            f"Θ-system rank deficient: rank {sol.rank} < d² = {n_unknown} from {n_valid} usable "
            f"examples{ctx.drop_note}{guard}; need about {more} more examples (recommended: "
            f"{ctx.recommended} usable ones)",
            n_valid,
        )
    rec.message = f"Θ from {counter['equations']} log-ratio equations, rank {sol.rank}/{n_unknown}"
    return sol.x.reshape(d, d), rec


def _checked(X: ArrayLike, Y: ArrayLike, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The data as float64 (N, k, d) arrays; ValueError unless m = 1 and 2 <= k < d."""
    if check_m(m) != 1:
        raise ValueError(f"the exact route learns a single head (m = 1), got m = {m}")
    X3, Y3 = check_data(X, Y)
    _, k, d = X3.shape
    if k >= d:
        raise ValueError(
            f"the exact route needs k < d (tokens must leave a null space), got k = {k}, d = {d}; "
            "use method='sculpt' or 'gradient'"
        )
    if k < 2:
        raise ValueError(f"the exact route needs k >= 2 (with one token the attention is constant), got k = {k}")
    return X3, Y3


def exact_single_head(
    X: ArrayLike,
    Y: ArrayLike,
    settings: ExactSettings | None = None,
    *,
    m: int = 1,
    truth: MultiHeadAttention | None = None,
) -> LearnResult:
    """Learn one head exactly: solve Y M (I − X⁺X) = 0, Y M X⁺ 1 = 1 for M = W⁻¹, then the log-ratio
    system log(A_aj/A_ar) = ⟨Θ, x_a (x_j − x_r)ᵀ⟩ with A = Y M X⁺, and refit W by least squares on A(Θ) X.

    The route reads the first ``train_examples`` examples; those with rank(X) < k (repeated or opposite
    tokens) are dropped, and the two linear systems use the first ``max_examples`` remaining ones (the systems
    cost O(examples · k · d⁵)), while the W refit and the training error use every example read, so the
    examples left out of the systems check the solution. A rank-deficient system (rank below d², relative
    tolerance ``rank_tol``) gives ``converged=False``, ``model=None`` and a record naming the system and how
    many more examples are needed. ``weighting`` "inverse-variance" weights each log-ratio equation by
    (A_aj⁻² + A_ar⁻²)^(−1/2), the inverse of its first-order error for a uniform error in A.

    Parameters
    ----------
    X, Y
        Examples (N, k, d), 2 <= k < d, and labels of the same shape.
    settings
        ``ExactSettings`` (its defaults when None; the "auto" example counts are resolved for X's size).
    m
        Heads: must be 1 (ValueError otherwise).
    truth
        The true one-head layer, for the records' ``truth`` figures (it never changes the result).

    Returns
    -------
    LearnResult
        Method "exact", phases "exact-w" and "exact-theta"; ``converged`` when both systems have full rank
        and the training relative MSE is at most ``settings.train_tol``.
    """
    start = time.perf_counter()
    X3, Y3 = _checked(X, Y, m)
    s = (settings or ExactSettings()).resolve(ProblemSize.of(X3, 1))
    assert s.max_examples is not None and s.train_examples is not None  # resolved: 2 <= k < d here
    X3, Y3 = X3[: s.train_examples], Y3[: s.train_examples]
    N, k, d = X3.shape
    independent = _independent_tokens(X3, s.token_tol)
    truth_params = _truth_params(truth) if truth is not None else None
    ctx = _Context(start, N, d, k, int(N - independent.sum()), exact_sample_size(d, k), truth_params, [])
    chosen = np.flatnonzero(independent)[: s.max_examples]
    Xk, Yk = X3[chosen], Y3[chosen]
    inverse = _inverse_phase(ctx, Xk, Yk, s)
    if isinstance(inverse, LearnResult):
        return inverse
    theta = _theta_phase(ctx, Xk, Yk, *inverse, s)
    if isinstance(theta, LearnResult):
        return theta
    return _refit(ctx, X3, Y3, *theta, s.train_tol, n_valid=int(chosen.size))


def _refit(
    ctx: _Context, X: np.ndarray, Y: np.ndarray, theta: np.ndarray, rec: PhaseRecord, tol: float, n_valid: int
) -> LearnResult:
    """W refitted given Θ on every example read (dropped ones included), Y ≈ (A(Θ) X) W; the route's result."""
    t0 = time.perf_counter() - rec.time  # the phase's clock continues
    d = ctx.d
    AX = np.einsum("naj,njq->naq", attention_patterns(theta[None], X)[:, 0], X).reshape(-1, d)
    W = np.linalg.lstsq(AX, Y.reshape(-1, d), rcond=None)[0]
    train = relative_mse((AX @ W).reshape(Y.shape), Y)
    rec.figures["train_relative_mse"] = train
    if ctx.truth is not None:
        rec.truth = {"theta_error": _rel_err(theta, ctx.truth[0]), "w_error": _rel_err(W, ctx.truth[1])}
    rec.time = time.perf_counter() - t0
    converged = train <= tol
    if not converged:
        rec.message += f"; training relative MSE {train:.3g} > tol {tol:g} (noisy or non-attention labels?)"
    ctx.phases.append(rec)
    info: dict[str, object] = {
        "recommended_samples": ctx.recommended,
        "examples_given": ctx.N,
        "examples_dropped": ctx.dropped,
    }
    if ctx.truth is not None:
        info["truth"] = {**rec.truth, "w_inverse_error": ctx.phases[0].truth["w_inverse_error"]}
    return LearnResult(
        model=MultiHeadAttention(theta[None], W[None]),
        method="exact",
        train_error=train,
        validation_error=None,
        converged=converged,
        time=time.perf_counter() - ctx.start,
        iterations=0,
        samples_used=n_valid,
        phases=ctx.phases,
        reason=(
            "both linear systems full rank and the training residual is at round-off"
            if converged
            else f"training relative MSE {train:.3g} above tol {tol:g}"
        ),
        info=info,
    )
