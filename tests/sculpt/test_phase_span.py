"""Phase 4 (extract_span) and the engine's flat fit, on bodies built from planted instances.

The body is built from the truth: rows where all heads' attention patterns agree (max pairwise TV < tv) give
equalities ⟨Θ, x_a (x_j − x_r)ᵀ⟩ = log(q_j / q_r) with q the mean pattern, which every head satisfies up to
the disagreement; a slab of half-width 6 around each and a box make the polytope.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from oracles import Polytope
from sculpt import plant, sample_inputs
from sculpt.errors import PhaseFailed
from sculpt.phases.span import SpanEstimate, extract_span


@dataclass
class _Body:
    polytope: Polytope
    F: np.ndarray
    g: np.ndarray
    weights: np.ndarray
    figures: dict = field(default_factory=dict)


def truth_body(model, X: np.ndarray, *, tv: float = 0.02, q_min: float = 0.02, max_rows: int = 4000) -> _Body:
    """Equality rows from agreeing (example, row) pairs of the true model, vectorised."""
    P = model.attention(X)  # (N, m, k, k)
    N, m, k, _ = P.shape
    d = X.shape[2]
    if m > 1:
        diff = 0.5 * np.abs(P[:, :, None] - P[:, None, :]).sum(-1)  # (N, m, m, k)
        agree = diff.max(axis=(1, 2)) < tv  # (N, k)
    else:
        agree = np.ones((N, k), dtype=bool)
    q = P.mean(axis=1)  # (N, k, k)
    n_idx, a_idx = np.nonzero(agree)
    qa = q[n_idx, a_idx]  # (R, k)
    r = qa.argmax(axis=1)
    rows, vals, wts = [], [], []
    for j in range(k):
        ok = (qa[:, j] >= q_min) & (r != j)
        n_, a_, r_ = n_idx[ok], a_idx[ok], r[ok]
        xa, xj, xr = X[n_, a_], X[n_, j], X[n_, r_]
        rows.append(np.einsum("np,nq->npq", xa, xj - xr).reshape(-1, d * d))
        qo = qa[ok]
        vals.append(np.log(qo[:, j] / qo[np.arange(qo.shape[0]), r_]))
        wts.append(qa[ok, j])
    F, g, w = np.vstack(rows)[:max_rows], np.concatenate(vals)[:max_rows], np.concatenate(wts)[:max_rows]
    poly = Polytope(np.vstack([np.eye(d * d), -np.eye(d * d)]), np.full(2 * d * d, 8.0))
    poly.add_slabs(F, g, np.full(g.shape[0], 6.0))
    return _Body(poly, F, g, w)


# ------------------------------------------------------------------------------------------ phase 4
@pytest.mark.parametrize("d,k,m,n,seed", [(8, 4, 1, 400, 3), (8, 4, 2, 6000, 3), (8, 4, 3, 60000, 0)])
def test_extract_span_on_planted_body(d: int, k: int, m: int, n: int, seed: int) -> None:
    """Span angle small, hull dimension m − 1, m estimated right, heads near the flat, widths reported."""
    model = plant(d, k, m, seed=seed)
    X = sample_inputs(n, k, d, rng=4)
    body = truth_body(model, X, tv=0.02 if m < 3 else 0.05)
    est, rec = extract_span(body, m, truth=model, rng=0, width_probes=1, in_flat_extent=True)
    assert isinstance(est, SpanEstimate)
    assert est.flat.dim == m - 1 and est.span.shape == (d * d, m)
    assert est.m_estimate == m == rec.figures["m_estimate"]
    assert rec.truth["span_angle_deg"] < (5.0 if m < 3 else 20.0)
    assert max(rec.truth["hull_distance_rel"]) < (0.05 if m < 3 else 0.25)
    assert rec.figures["sv_gap"] < (0.5 if m < 3 else 0.8)
    assert len(rec.figures["width_along"]) == m - 1 and len(rec.figures["width_normal"]) == 1
    # the body is long along the flat and thin across it; inside the flat it is bounded
    if m > 1:
        assert min(rec.figures["width_along"]) > (2.0 if m < 3 else 1.2) * max(rec.figures["width_normal"])
        assert len(rec.figures["extent_in_flat"]) == m - 1 and 0 < est.radius <= 2 * max(1, np.linalg.norm(est.flat.point))
        assert est.radius <= 1.25 * max(max(abs(lo), abs(hi)) for lo, hi in est.widths["along"]) + 1e-9
    assert rec.status == "ok"
    # m = 3 agreement at TV 0.05 leaves an odd log-ratio a little outside its slab
    assert rec.truth["heads_in_body"] if m < 3 else rec.truth["body_max_violation"] < 0.2


def test_extract_span_rejects_empty_or_short_bodies() -> None:
    d = 4
    poly = Polytope(np.vstack([np.eye(d * d), -np.eye(d * d)]), np.ones(2 * d * d))
    empty = _Body(poly, np.zeros((0, d * d)), np.zeros(0), np.zeros(0))
    with pytest.raises(PhaseFailed, match="no equality-type rows") as info:
        extract_span(empty, 2)
    assert info.value.phase == "4-span"
    short = _Body(poly, np.ones((3, d * d)), np.ones(3), np.ones(3))
    with pytest.raises(PhaseFailed, match="fewer than"):
        extract_span(short, 2)
    with pytest.raises(ValueError, match="m must"):
        extract_span(short, 0)


@pytest.mark.parametrize("seed", [0, 3])
def test_span_rows_of_the_sculpted_body_pin_two_heads(seed: int) -> None:
    """Through phases 1–3 on 1,500 examples at (8,4,2): K*'s slab rows are among the span rows phase 4 fits,
    and those rows (every agreeing row up to span_tau, hull re-weighted) pin the span within 12° with m̂ = 2,
    where K*'s own slab rows left it 18–32° off (docs/method.md, "The span from every agreeing row")."""
    from sculpt.phases.refine import refine_sum_w
    from sculpt.phases.sculpting import sculpt
    from sculpt.phases.span import principal_angle_deg
    from sculpt.phases.sum_w import estimate_sum_w

    model = plant(8, 4, 2, seed=seed)
    X = sample_inputs(1500, 4, 8, rng=seed + 100)
    Y = model(X)
    W, _ = estimate_sum_w(X, Y)
    body, _ = sculpt(X, Y, W)
    _, kstar, _ = refine_sum_w(X, Y, W, body, certify=False)
    assert kstar.span_F.shape[0] > kstar.F.shape[0] and np.all(kstar.span_weights > 0)
    rows = {r.tobytes() for r in kstar.span_F}
    assert all(r.tobytes() in rows for r in kstar.F)
    truth_span = model.thetas.reshape(2, -1).T
    est, rec = extract_span(kstar, 2)
    assert rec.figures["equality_rows_from"].startswith("span rows") and est.m_estimate == 2
    assert principal_angle_deg(est.span, truth_span) <= 12.0
    plain, _ = extract_span(kstar, 2, hull_reweight=0)
    assert principal_angle_deg(plain.span, truth_span) <= 16.0


def test_in_flat_extent_is_a_diagnostic_off_by_default() -> None:
    """The in-flat LPs run only when asked: the estimate (flat, radius) is the same either way."""
    model = plant(8, 4, 2, seed=3)
    X = sample_inputs(6000, 4, 8, rng=4)
    body = truth_body(model, X)
    off, rec_off = extract_span(body, 2, rng=0)
    on, rec_on = extract_span(body, 2, rng=0, in_flat_extent=True)
    assert "extent_in_flat" not in rec_off.figures and len(rec_on.figures["extent_in_flat"]) == 1
    assert np.array_equal(off.flat.point, on.flat.point) and off.radius == on.radius


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("rank_cols", [(40, 40), (39, 40), (38, 40), (12, 40)])
def test_row_rank_certifies_full_rank_and_otherwise_is_the_svd_rank(seed, rank_cols, monkeypatch):
    """Phase 4's rank check: full column rank is certified from a few rows' Gram factor (no SVD); a stack of
    lower rank falls back to the SVD rank, so the check never passes a stack below the rank phase 4 needs."""
    from sculpt.phases import _rank

    rank, n = rank_cols
    rng = np.random.default_rng(seed)
    M = rng.choice([-2.0, 0.0, 2.0], size=(600, rank)) @ rng.standard_normal((rank, n))
    M *= rng.uniform(0.1, 2.0, size=(600, 1))
    svd_calls: list[int] = []
    svd_rank = np.linalg.matrix_rank

    def counted(A, *args, **kwargs):
        svd_calls.append(1)
        return svd_rank(A, *args, **kwargs)

    monkeypatch.setattr(_rank.np.linalg, "matrix_rank", counted)
    got = _rank.row_rank(M, n - 1)
    assert got == int(svd_rank(M)) == rank
    assert len(svd_calls) == (0 if rank == n else 1)


def test_row_rank_does_not_certify_an_ill_conditioned_stack():
    """Rows spanning a Kahan matrix: every Cholesky pivot is large, yet σ_min/σ_max is ~1e-13; the condition
    estimate refuses the certificate and the SVD rank decides."""
    from sculpt.phases._rank import row_rank

    n, c = 60, 0.45
    s = np.sqrt(1 - c**2)
    K = np.diag(s ** np.arange(n)) @ (np.eye(n) - c * np.triu(np.ones((n, n)), 1))
    M = np.vstack([K, np.zeros((200, n))])  # rows enough for the certificate path; they add nothing
    assert row_rank(M, n - 1) == int(np.linalg.matrix_rank(M))


@pytest.mark.parametrize("d, k, m", [(8, 4, 2), (8, 4, 3), (8, 4, 4), (16, 4, 3), (10, 3, 4), (6, 5, 2), (2, 4, 2),
                                     (3, 5, 2), (3, 5, 1)])
@pytest.mark.parametrize("seed", [0, 1])
def test_agreement_blind_dims_is_the_invisible_disagreement(d, k, m, seed):
    """agreement_blind_dims is the dimension of head-pattern deviations (each summing to 0), taken modulo the
    heads moving together, whose output is exactly that of a shared pattern's change: computed here as a null
    space for a generic (Gaussian) example and random W_i, including k − 1 > d, where every disagreement is
    invisible (a few ±1 tokens in d = 3 can be affinely dependent, which only widens the blind set)."""
    from sculpt.phases._simplex import agreement_blind_dims

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((k, d))
    ws = rng.standard_normal((m, d, d))
    Z = np.linalg.svd(np.ones((1, k)))[2][1:].T  # (k, k − 1): a basis of the sum-zero patterns
    heads = np.hstack([(Z.T @ X @ w).T for w in ws])  # (d, m(k − 1)): Σ_i δ_iᵀ X W_i
    shared = (Z.T @ X @ ws.sum(0)).T  # (d, k − 1): what one shared pattern's change absorbs
    # {δ : Σ_i δ_iᵀ X W_i ∈ range(shared)}: the null space of [heads, −shared], less the shared pattern's own
    # null directions (δ = 0), less the heads moving together (k − 1 directions, always in the set)
    A = np.hstack([heads, -shared])
    in_range = A.shape[1] - np.linalg.matrix_rank(A) - (k - 1 - np.linalg.matrix_rank(shared))
    assert in_range - (k - 1) == agreement_blind_dims(m, k, d)


def test_phase_4_record_names_a_blind_agreement_test():
    """At (8,4,3) the phase 4 record carries agreement_blind_dims = 1 and says why the span is loose."""
    from sculpt import learn

    layer = plant(8, 4, 3, seed=0)
    X = sample_inputs(4000, 4, 8, rng=0)
    res = learn(X, layer(X), 3, seed=0, span={"scan_examples": 0})
    rec = res.phase("4-span")
    assert rec.figures["agreement_blind_dims"] == 1
    assert "m(k−1) = 9 > d = 8" in rec.message
