"""The exact algebraic route for one head (m = 1, k < d): two linear least-squares problems.

With one head Y = A X W, A = softmax(X Θ Xᵀ) row-stochastic. For rank(X) = k < d the inverse M = W⁻¹
satisfies the linear equations Y M (I − X⁺X) = 0 and Y M X⁺ 1 = 1; then A = Y M X⁺ and Θ solves the
linear log-ratio equations log(A_aj / A_ar) = ⟨Θ, x_a (x_j − x_r)ᵀ⟩ (r = argmax of row a).
Derivation and measurements: docs/method.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from ._checks import check_data, check_m
from .model import MultiHeadAttention, attention_patterns
from .result import LearnResult, PhaseRecord
from .toolkit.forward_pass import relative_mse

__all__ = ["exact_single_head", "exact_sample_size", "exact_equation_counts"]

_WEIGHTINGS = ("inverse-variance", "none")
_DEFAULT_OVERSAMPLING = 10  # linear systems built from at most 10 × exact_sample_size(d, k) examples


def exact_equation_counts(d: int, k: int) -> tuple[int, int]:
    """Independent equations one example (with rank(X) = k) adds: (W⁻¹-system k(d−k+1), Θ-system k(k−1))."""
    return k * (d - k + 1), k * (k - 1)


def exact_sample_size(d: int, k: int) -> int:
    """Examples the exact route should be given: max(⌈d²/(k(k−1))⌉, ⌈d²/(k(d−k+1))⌉) + 3.

    The first term (Θ-system) is the larger one whenever k ≤ (d + 2)/2, so this is ⌈d²/(k(k−1))⌉ + 3 in the
    usual regime; the +3 absorbs examples dropped for dependent tokens and chance rank losses.
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


def _truth_params(truth: Any) -> tuple[np.ndarray, np.ndarray]:
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


def exact_single_head(
    X: Any,
    Y: Any,
    *,
    m: int = 1,
    rank_tol: float = 1e-9,
    token_tol: float = 1e-8,
    tol: float = 1e-12,
    weighting: str = "inverse-variance",
    attention_floor: float = 1e-12,
    max_examples: int | None = None,
    truth: Any = None,
    seed: Any = None,
    solver: Any = None,
    progress: bool = False,
) -> LearnResult:
    """Learn one head exactly: solve Y M (I − X⁺X) = 0, Y M X⁺ 1 = 1 for M = W⁻¹, then the log-ratio
    system log(A_aj/A_ar) = ⟨Θ, x_a (x_j − x_r)ᵀ⟩ with A = Y M X⁺, and refit W by least squares on A(Θ) X.

    Needs 2 <= k < d (ValueError otherwise) and m = 1. Examples with rank(X) < k (repeated/opposite tokens)
    are dropped; the two linear systems use the first ``max_examples`` remaining examples (default
    10 × exact_sample_size(d, k): noise-free data determine the layer from far fewer, and the systems cost
    O(examples · k · d⁵)), while the W refit and the training error use every example, so the examples left
    out of the systems check the solution. If either system is rank deficient (rank below d², relative
    tolerance ``rank_tol``) the result has ``converged=False``, ``model=None`` and a record naming the system
    and how many more examples are needed. ``converged`` also needs the training relative MSE <= ``tol``.
    ``weighting`` ("inverse-variance" or "none") weights each log-ratio equation by (A_aj⁻² + A_ar⁻²)^(−1/2),
    the inverse of its first-order error for a uniform error in A ("none" is much less accurate when attention
    saturates: Θ error 7e-5 instead of 2e-10 at ‖Θ‖_F = 5, docs/method.md). ``seed``, ``solver`` and
    ``progress`` are accepted for the learner's uniform call and have no effect: the route is deterministic,
    solver-free and two steps long.
    """
    start = time.perf_counter()
    if check_m(m) != 1:
        raise ValueError(f"the exact route learns a single head (m = 1), got m = {m}")
    if weighting not in _WEIGHTINGS:
        raise ValueError(f"weighting must be one of {_WEIGHTINGS}, got {weighting!r}")
    for value, name in ((rank_tol, "rank_tol"), (token_tol, "token_tol"), (tol, "tol")):
        if not (isinstance(value, (int, float)) and 0 < value < 1):
            raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")
    X, Y = check_data(X, Y)
    N, k, d = X.shape
    if k >= d:
        raise ValueError(
            f"the exact route needs k < d (tokens must leave a null space), got k = {k}, d = {d}; "
            "use method='sculpt' or 'gradient'"
        )
    if k < 2:
        raise ValueError(f"the exact route needs k >= 2 (with one token the attention is constant), got k = {k}")
    true_theta, true_w = _truth_params(truth) if truth is not None else (None, None)
    n_unknown = d * d
    per_w, per_theta = exact_equation_counts(d, k)
    recommended = exact_sample_size(d, k)
    if max_examples is None:
        cap = _DEFAULT_OVERSAMPLING * recommended
    elif isinstance(max_examples, bool) or not isinstance(max_examples, (int, np.integer)) or max_examples < 1:
        raise ValueError(f"max_examples must be a positive integer or None, got {max_examples!r}")
    else:
        cap = int(max_examples)
    phases: list[PhaseRecord] = []

    def fail(record: PhaseRecord, reason: str, samples: int) -> LearnResult:
        record.status, record.message = "failed", reason
        phases.append(record)
        return LearnResult(
            model=None,
            method="exact",
            train_error=math.inf,
            converged=False,
            time=time.perf_counter() - start,
            samples_used=samples,
            phases=phases,
            reason=reason,
            info={"recommended_samples": recommended, "examples_given": N},
        )

    def more_needed(rank: int, per_example: int, valid: int) -> int:
        """Examples to draw: the missing rank over the per-example count (at least up to the recommended
        total), scaled up by the fraction of examples dropped so far."""
        usable = max(math.ceil((n_unknown - rank) / per_example), recommended - valid, 1)
        usable_fraction = (N - dropped) / N
        return math.ceil(usable / usable_fraction) if dropped else usable

    # Phase "exact-w": M = W⁻¹ from the stacked linear system.
    t0 = time.perf_counter()
    independent = _independent_tokens(X, token_tol)
    dropped = int(N - independent.sum())
    chosen = np.flatnonzero(independent)[:cap]
    n_valid = int(chosen.size)
    Xk, Yk = X[chosen], Y[chosen]
    geo = _token_geometry(Xk)
    rec_w = PhaseRecord(
        "exact-w",
        figures={
            "examples_given": N,
            "examples_used": n_valid,
            "examples_dropped": dropped,
            "max_examples": cap,
            "unknowns": n_unknown,
        },
    )
    drop_note = f" ({dropped} of {N} examples dropped: tokens linearly dependent)" if dropped else ""
    if n_valid == 0:
        rec_w.time = time.perf_counter() - t0
        return fail(
            rec_w,
            f"no example has k linearly independent tokens{drop_note}; need about "
            f"{recommended} examples with rank(X) = k",
            0,
        )
    sol_m = _streaming_lstsq(
        _inverse_projection_blocks(Yk, geo, _block_examples(per_w, n_unknown)), n_unknown, rank_tol
    )
    M = sol_m.x.reshape(d, d)
    rec_w.figures.update(
        {
            "rank": sol_m.rank,
            "rows": sol_m.rows,
            "relative_residual": sol_m.relative_residual,
            "condition": sol_m.condition,
        }
    )
    rec_w.time = time.perf_counter() - t0
    if sol_m.rank < n_unknown:
        more = more_needed(sol_m.rank, per_w, n_valid)
        return fail(
            rec_w,
            f"W⁻¹-system rank deficient: rank {sol_m.rank} < d² = {n_unknown} from {n_valid} usable "
            f"examples{drop_note}; need about {more} more examples (recommended: "
            f"{recommended} usable ones), or W is singular",
            n_valid,
        )
    try:
        W_from_m = np.linalg.inv(M)
    except np.linalg.LinAlgError:
        return fail(rec_w, "the solved W⁻¹ is singular; W cannot be recovered", n_valid)
    if true_w is not None:
        rec_w.truth = {"w_error": _rel_err(W_from_m, true_w), "w_inverse_error": _rel_err(M, np.linalg.inv(true_w))}
    capped = f" (the first {n_valid} of {N - dropped} usable)" if N - dropped > n_valid else ""
    rec_w.message = f"W⁻¹ from {n_valid} examples{capped}, rank {sol_m.rank}/{n_unknown}{drop_note}"
    phases.append(rec_w)

    # Phase "exact-theta": A = Y M X⁺, then Θ from the log-ratio equations.
    t0 = time.perf_counter()
    A = np.einsum("nap,pq,nqb->nab", Yk, M, geo.pinv)
    counter = {"equations": 0, "guarded": 0}
    sol_t = _streaming_lstsq(
        _log_ratio_blocks(Xk, A, _block_examples(per_theta, n_unknown), attention_floor, weighting, counter),
        n_unknown,
        rank_tol,
    )
    theta = sol_t.x.reshape(d, d)
    rec_t = PhaseRecord(
        "exact-theta",
        figures={
            "rank": sol_t.rank,
            "rows": sol_t.rows,
            "relative_residual": sol_t.relative_residual,
            "condition": sol_t.condition,
            "guarded_entries": counter["guarded"],
            "weighting": weighting,
            "attention_row_sum_error": float(np.max(np.abs(A.sum(axis=2) - 1.0))),
            "attention_min": float(A.min()),
        },
    )
    if sol_t.rank < n_unknown:
        rec_t.time = time.perf_counter() - t0
        more = more_needed(sol_t.rank, per_theta, n_valid)
        guard = f"; {counter['guarded']} non-positive attention entries skipped" if counter["guarded"] else ""
        return fail(
            rec_t,
            f"Θ-system rank deficient: rank {sol_t.rank} < d² = {n_unknown} from {n_valid} usable "
            f"examples{drop_note}{guard}; need about {more} more examples (recommended: "
            f"{recommended} usable ones)",
            n_valid,
        )
    # Refit W given Θ on every example (dropped ones included): Y ≈ (A(Θ) X) W.
    AX = np.einsum("naj,njq->naq", attention_patterns(theta[None], X)[:, 0], X).reshape(-1, d)
    W = np.linalg.lstsq(AX, Y.reshape(-1, d), rcond=None)[0]
    pred = (AX @ W).reshape(Y.shape)
    train = relative_mse(pred, Y)
    rec_t.figures["train_relative_mse"] = train
    if true_theta is not None and true_w is not None:  # both set from the truth, or both None
        rec_t.truth = {"theta_error": _rel_err(theta, true_theta), "w_error": _rel_err(W, true_w)}
    rec_t.time = time.perf_counter() - t0
    converged = train <= tol
    rec_t.message = f"Θ from {counter['equations']} log-ratio equations, rank {sol_t.rank}/{n_unknown}"
    if not converged:
        rec_t.message += f"; training relative MSE {train:.3g} > tol {tol:g} (noisy or non-attention labels?)"
    phases.append(rec_t)

    model = MultiHeadAttention(theta[None], W[None])
    reason = (
        "both linear systems full rank and the training residual is at round-off"
        if converged
        else f"training relative MSE {train:.3g} above tol {tol:g}"
    )
    info: dict[str, Any] = {"recommended_samples": recommended, "examples_given": N, "examples_dropped": dropped}
    if true_theta is not None:
        info["truth"] = {**rec_t.truth, "w_inverse_error": rec_w.truth["w_inverse_error"]}
    return LearnResult(
        model=model,
        method="exact",
        train_error=train,
        validation_error=None,
        converged=converged,
        time=time.perf_counter() - start,
        iterations=0,
        samples_used=n_valid,
        phases=phases,
        reason=reason,
        info=info,
    )
