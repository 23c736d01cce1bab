"""Phase 4 (extract_span) and the engine's flat fit, on bodies built from planted instances.

The body is built from the truth: rows where all heads' attention patterns agree (max pairwise TV < tv) give
equalities ⟨Θ, x_a (x_j − x_r)ᵀ⟩ = log(q_j / q_r) with q the mean pattern, which every head satisfies up to
the disagreement; a slab of half-width 6 around each and a box make the polytope.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sculpt import plant, sample_inputs
from sculpt.errors import PhaseFailed
from sculpt.phases._simplex import simplex_lstsq, token_gram_ok
from sculpt.phases.sculpting import EqualityRows, SculptedBody, SpanRule, span_equality_rows
from sculpt.phases.span import (
    ScanPool,
    SpanEstimate,
    adaptive_span,
    extract_span,
    principal_angle_deg,
    scan_span_rows,
)
from sculpt.settings import Settings, SpanSettings


def learn_span(X: np.ndarray, m: int, **overrides: object) -> SpanSettings:
    """Phase 4's settings as ``learn`` resolves them for this data, with ``overrides``."""
    N, k, d = X.shape
    return Settings().resolve(d, k, m, N).span.merged(overrides)


def learn_rule(X: np.ndarray, m: int) -> SpanRule:
    """The agreement rule of K*'s span rows under ``learn``'s settings (what phase 4's scan applies)."""
    N, k, d = X.shape
    s = Settings().resolve(d, k, m, N).refine.slabs
    assert s.q_tol is not None
    return SpanRule(s.q_tol, max(s.span_tau, s.tau_max), s.q_min, s.span_rel_floor)


def slab_body(F: np.ndarray, g: np.ndarray, w: np.ndarray, *, width: float, box: float) -> SculptedBody:
    """A body of slabs |F θ − g| <= width inside the box |θ_p| <= box (no half-spaces)."""
    p = F.shape[1]
    return SculptedBody(
        F,
        g,
        w,
        rows_seen=0,
        rows_accepted=0,
        halfspaces=(np.empty((0, p)), np.empty(0)),
        slab_widths=np.full(g.shape[0], width),
        box=box,
    )


def truth_body(model, X: np.ndarray, *, tv: float = 0.02, q_min: float = 0.02, max_rows: int = 4000) -> SculptedBody:
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
    return slab_body(F, g, w, width=6.0, box=8.0)


# ------------------------------------------------------------------------------------------ phase 4
@pytest.mark.parametrize("d,k,m,n,seed", [(8, 4, 1, 400, 3), (8, 4, 2, 6000, 3), (8, 4, 3, 60000, 0)])
def test_extract_span_on_planted_body(d: int, k: int, m: int, n: int, seed: int) -> None:
    """Span angle small, hull dimension m − 1, m estimated right, heads near the flat, widths reported."""
    model = plant(d, k, m, seed=seed)
    X = sample_inputs(n, k, d, rng=4)
    body = truth_body(model, X, tv=0.02 if m < 3 else 0.05)
    est, rec = extract_span(body, m, learn_span(X, m, width_probes=1, in_flat_extent=True), truth=model, rng=0)
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
        assert len(rec.figures["extent_in_flat"]) == m - 1 and 0 < est.radius <= 2 * max(
            1, np.linalg.norm(est.flat.point)
        )
        assert est.radius <= 1.25 * max(max(abs(lo), abs(hi)) for lo, hi in est.widths["along"]) + 1e-9
    assert rec.status == "ok"
    # m = 3 agreement at TV 0.05 leaves an odd log-ratio a little outside its slab
    assert rec.truth["heads_in_body"] if m < 3 else rec.truth["body_max_violation"] < 0.2


def test_the_fit_certifies_full_rank_and_a_low_rank_stack_still_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """Full column rank comes from the fit's own singular values (no separate rank check of the rows); rows of a
    rank just below what pins the flat still fail with the rank message."""
    import sculpt.phases.span as span_mod

    calls: list[int] = []
    real = span_mod.row_rank
    monkeypatch.setattr(span_mod, "row_rank", lambda M, need: calls.append(need) or real(M, need))
    model = plant(8, 4, 2, seed=3)
    X = sample_inputs(6000, 4, 8, rng=4)
    body = truth_body(model, X)
    _, rec = extract_span(body, 2, learn_span(X, 2))
    assert rec.figures["equality_rank"] == 64 and calls == []
    d, rng = 4, np.random.default_rng(0)
    F = rng.standard_normal((60, 14)) @ rng.standard_normal((14, d * d))  # rank 14 < the 15 a line needs
    with pytest.raises(PhaseFailed, match="rank 14, below the 15"):
        extract_span(slab_body(F, rng.standard_normal(60), np.ones(60), width=1.0, box=1.0), 2, SpanSettings())
    assert calls


def test_extract_span_rejects_empty_or_short_bodies() -> None:
    d = 4
    empty = slab_body(np.zeros((0, d * d)), np.zeros(0), np.zeros(0), width=1.0, box=1.0)
    with pytest.raises(PhaseFailed, match="no equality-type rows") as info:
        extract_span(empty, 2, SpanSettings())
    assert info.value.phase == "4-span"
    short = slab_body(np.ones((3, d * d)), np.ones(3), np.ones(3), width=1.0, box=1.0)
    with pytest.raises(PhaseFailed, match="fewer than"):
        extract_span(short, 2, SpanSettings())
    with pytest.raises(ValueError, match="m must"):
        extract_span(short, 0, SpanSettings())
    rank_one = slab_body(np.ones((40, d * d)), np.ones(40), np.ones(40), width=1.0, box=1.0)
    with pytest.raises(PhaseFailed, match="rank 1, below the 15"):
        extract_span(rank_one, 2, SpanSettings())
    body = slab_body(np.eye(d * d), np.ones(d * d), np.ones(d * d), width=1.0, box=1.0)
    with pytest.raises(ValueError, match="extra_rows"):
        extract_span(body, 1, SpanSettings(), extra_rows=EqualityRows(np.ones((2, 3)), np.ones(2), np.ones(2)))


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
    learn = Settings().resolve(8, 4, 2, 1500)
    W, _ = estimate_sum_w(X, Y, learn.sum_w)
    body, _ = sculpt(X, Y, W, learn.sculpt)
    _, kstar, _ = refine_sum_w(X, Y, W, body, 2, learn.refine)  # no certification on 1,500 examples
    assert kstar.span_F.shape[0] > kstar.F.shape[0] and np.all(kstar.span_weights > 0)
    rows = {r.tobytes() for r in kstar.span_F.dense()}
    assert all(r.tobytes() in rows for r in kstar.F)
    truth_span = model.thetas.reshape(2, -1).T
    est, rec = extract_span(kstar, 2, learn.span)
    assert rec.figures["equality_rows_from"].startswith("span rows") and est.m_estimate == 2
    assert principal_angle_deg(est.span, truth_span) <= 12.0
    plain, _ = extract_span(kstar, 2, learn.span.merged(hull_reweight=0))
    assert principal_angle_deg(plain.span, truth_span) <= 16.0


def test_in_flat_extent_is_a_diagnostic_off_by_default() -> None:
    """The in-flat LPs run only when asked: the estimate (flat, radius) is the same either way."""
    model = plant(8, 4, 2, seed=3)
    X = sample_inputs(6000, 4, 8, rng=4)
    body = truth_body(model, X)
    off, rec_off = extract_span(body, 2, learn_span(X, 2), rng=0)
    on, rec_on = extract_span(body, 2, learn_span(X, 2, in_flat_extent=True), rng=0)
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


@pytest.mark.parametrize(
    "d, k, m", [(8, 4, 2), (8, 4, 3), (8, 4, 4), (16, 4, 3), (10, 3, 4), (6, 5, 2), (2, 4, 2), (3, 5, 2), (3, 5, 1)]
)
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
    res = learn(X, layer(X), 3, method="sculpt", seed=0, span={"scan_examples": 0})
    rec = res.phase("4-span")
    assert rec.figures["agreement_blind_dims"] == 1
    assert "m(k−1) = 9 > d = 8" in rec.message


# ------------------------------------------------------------------------------------------ phase 4's scan
@settings(max_examples=15, deadline=None)
@given(block=st.integers(1, 700), seed=st.integers(0, 3))
def test_scanned_span_rows_do_not_depend_on_the_block_size(block: int, seed: int) -> None:
    """``scan_span_rows`` reads examples block by block: whatever the block, it gives the rows (and weights) of
    K*'s agreement rule and ``span_equality_rows`` applied to all the examples at once."""
    model = plant(6, 4, 2, seed=seed)
    X = sample_inputs(700, 4, 6, rng=seed + 7)
    Y = model(X)
    W = model.ws.sum(0)
    rule = learn_rule(X, 2)
    fit = simplex_lstsq(X, Y, W)
    q, rel = fit.q.reshape(-1, 4), fit.rel.reshape(-1)
    ok = (rel <= rule.rel_max) & (q.min(1) >= -rule.q_tol) & np.repeat(token_gram_ok(X), 4)
    F0, g0, w0 = span_equality_rows(X, q, rel, ok, rule.q_min, rule.rel_floor)
    F, g, w = scan_span_rows(X, Y, W, rule, learn_span(X, 2, scan_block=block))
    assert F0.shape[0] > 36
    key = lambda F_, g_, w_: sorted(zip(map(bytes, np.round(F_.dense(), 12)), np.round(g_, 9), np.round(w_, 9)))  # noqa: E731
    assert key(F, g, w) == key(F0, g0, w0)


def test_scanned_span_rows_keep_the_best_rows_within_their_memory_cap() -> None:
    """Past ``scan_max_entries`` (rows × d²) the scan keeps only the highest-weight rows: the reservoir's memory
    does not grow with N, and no kept row weighs less than a dropped one."""
    model = plant(6, 4, 2, seed=1)
    X = sample_inputs(3000, 4, 6, rng=2)
    Y = model(X)
    rule = learn_rule(X, 2)
    F_all, _, w_all = scan_span_rows(X, Y, model.ws.sum(0), rule, learn_span(X, 2, scan_block=500))
    cap = F_all.shape[0] // 3
    s = learn_span(X, 2, scan_block=500, scan_max_entries=cap * 36)
    F, g, w = scan_span_rows(X, Y, model.ws.sum(0), rule, s)
    assert F.shape == (cap, 36) and g.shape == w.shape == (cap,)
    assert w.min() >= np.sort(w_all)[::-1][cap - 1] - 1e-12


def test_scan_span_rows_rejects_bad_arguments() -> None:
    model = plant(6, 4, 2, seed=1)
    X = sample_inputs(50, 4, 6, rng=2)
    Y, W = model(X), model.ws.sum(0)
    rule = learn_rule(X, 2)
    with pytest.raises(ValueError, match="scan_block"):
        learn_span(X, 2, scan_block=0)
    with pytest.raises(ValueError, match="scan_max_entries"):
        learn_span(X, 2, scan_max_entries=-1.0)
    with pytest.raises(ValueError, match="at least d² = 36"):
        scan_span_rows(X, Y, W, rule, learn_span(X, 2, scan_max_entries=35.0))
    with pytest.raises(ValueError, match="shape"):
        scan_span_rows(X, Y[:, :, :5], W, rule, learn_span(X, 2))


def test_a_growing_scan_reads_each_example_once() -> None:
    """Rows of an earlier scan passed as ``initial`` join the reservoir: scanning the first examples, then the
    rest with ``initial``, gives the rows of one scan over all of them (and the same top rows under a cap)."""
    model = plant(6, 4, 2, seed=5)
    X = sample_inputs(1200, 4, 6, rng=6)
    Y, W = model(X), model.ws.sum(0)
    rule = learn_rule(X, 2)

    def key(r):
        return sorted(zip(map(bytes, np.round(r[0].dense(), 12)), np.round(r[1], 9), np.round(r[2], 9)))

    for cap in (4e7, 300 * 36):
        s = learn_span(X, 2, scan_max_entries=cap)
        first = scan_span_rows(X[:400], Y[:400], W, rule, s)
        both = scan_span_rows(X[400:], Y[400:], W, rule, s, initial=first)
        assert key(both) == key(scan_span_rows(X, Y, W, rule, s))


@pytest.fixture(scope="module")
def kstar_and_pool():
    """K* from phase 1's Σ̂W on the first 1,500 of 20,000 examples at (8,4,2), and the rest to scan."""
    from sculpt.phases.sculpting import sculpt
    from sculpt.phases.sum_w import estimate_sum_w

    model = plant(8, 4, 2, seed=0)
    X = sample_inputs(20000, 4, 8, rng=1)
    Y = model(X)
    learn = Settings().resolve(8, 4, 2, 20000)
    W, _ = estimate_sum_w(X[:1500], Y[:1500], learn.sum_w)
    body, _ = sculpt(X[:1500], Y[:1500], W, learn.refine.slabs, mode="slabs")
    return body, W, ScanPool(X, Y, np.arange(1500, 20000), 1500), learn.span


def test_adaptive_span_grows_the_examples_read_until_its_budget(kstar_and_pool) -> None:
    """With the stop rules off, each growth reads scan_growth times the examples read so far, up to the
    budget; the record says how many were read and why the scan ended."""
    body, W, pool, span = kstar_and_pool
    never = {"scan_gap": 1e-12, "scan_settle_deg": 0.0, "scan_min_gain": 0.0}
    _, rec = adaptive_span(body, 2, span.merged(never), pool=pool, sum_w=W)
    assert [g["examples"] for g in rec.figures["scan"]] == [6000, 20000]
    assert rec.figures["examples"] == 20000 and rec.figures["scan_stopped"] == "read every training example"
    assert rec.figures["equality_rows_scanned"] == rec.figures["scan"][-1]["rows_scanned"] > 0
    _, capped = adaptive_span(body, 2, span.merged(never, scan_examples=5000), pool=pool, sum_w=W)
    assert [g["examples"] for g in capped.figures["scan"]] == [5000]
    assert capped.figures["scan_stopped"] == "read scan_examples = 5000"


def test_adaptive_span_stops_when_the_flat_is_pinned_or_the_span_settles(kstar_and_pool) -> None:
    body, W, pool, span = kstar_and_pool
    est, rec = extract_span(body, 2, span)
    pinned_est, pinned = adaptive_span(body, 2, span.merged(scan_gap=est.gap), pool=pool, sum_w=W)
    assert "scan" not in pinned.figures and pinned.figures["examples"] == 1500
    assert np.array_equal(pinned_est.span, est.span)
    _, settled = adaptive_span(body, 2, span.merged(scan_gap=1e-12, scan_settle_deg=90.0), pool=pool, sum_w=W)
    assert len(settled.figures["scan"]) == 1 and "< scan_settle_deg 90°" in settled.figures["scan_stopped"]


def test_scan_first_fits_once_on_the_rows_of_its_first_growth(kstar_and_pool) -> None:
    """With ``scan_first`` the first growth is read before any fit: the one fit is ``extract_span`` on K*'s rows
    plus the scanned ones, and the record's first growth says it came first."""
    body, W, pool, span = kstar_and_pool
    est, rec = adaptive_span(body, 2, span.merged(scan_first=True, scan_examples=6000), pool=pool, sum_w=W)
    assert [g["examples"] for g in rec.figures["scan"]] == [6000]
    assert rec.figures["scan"][0]["why"].startswith("scan_first")
    extra = scan_span_rows(pool.X[pool.order[:4500]], pool.Y[pool.order[:4500]], W, body.span_rule, span)
    direct, _ = extract_span(body, 2, span, extra_rows=extra)
    assert rec.figures["equality_rows_scanned"] == len(extra.g) > 0
    # the same rows fitted twice agree to round-off (1.2e-6° seen); 100 fewer scanned examples move it by 0.5°
    assert principal_angle_deg(est.span, direct.span) < 1e-4


def test_adaptive_span_reads_nothing_for_one_head_or_without_sum_w(kstar_and_pool) -> None:
    """One head has no flat to pin (its span is a point's); without Σ̂W no row can be tested: no scan."""
    body, W, pool, span = kstar_and_pool
    never = span.merged(scan_gap=1e-12, scan_settle_deg=0.0, scan_min_gain=0.0)
    _, rec = adaptive_span(body, 2, never, pool=pool, sum_w=None)
    assert "scan" not in rec.figures and rec.figures["examples"] == 1500
    _, rec1 = adaptive_span(body, 1, never, pool=pool, sum_w=W)
    assert "scan" not in rec1.figures and rec1.figures["agreement_blind_dims"] == 0


def test_large_d_settings_fit_once_after_scanning() -> None:
    """Up to d² < iterative_eigen_from: two hull refits, the m-estimate up to m + 3, the first fit before any scan.
    From there on: no refit, the m-estimate up to m (fewer Lanczos pairs), the first growth scanned before the
    first fit. An explicit value always wins."""
    for d, reweights, max_m, first in ((8, 2, 5, False), (32, 2, 5, False), (64, 0, 2, True)):
        span = Settings().resolve(d, 8, 2, 80_000).span
        assert span.hull_reweight == reweights == SpanSettings().reweights(d)
        assert (span.max_m, span.scan_first) == (max_m, first)
    assert SpanSettings(hull_reweight=3).reweights(64) == 3
    assert SpanSettings(iterative_eigen_from=10_000).reweights(64) == 2
    assert Settings(span=SpanSettings(scan_first=False, max_m=4)).resolve(64, 8, 2, 80_000).span.scan_first is False


def test_pooling_gathers_the_same_rows_as_stacking_then_selecting() -> None:
    """``_pooled`` keeps the highest-weight rows in their order, gathered part by part: the rows, log-ratios and
    weights of stacking every part and then selecting, within and beyond the limit."""
    from sculpt.phases.span import _pooled

    rng = np.random.default_rng(2)
    parts = [EqualityRows(rng.standard_normal((r, 9)), rng.standard_normal(r), rng.random(r)) for r in (7, 0, 12, 5)]
    F, g, w = (np.concatenate([getattr(p, name) for p in parts]) for name in ("F", "g", "w"))
    for limit in (10, 24, 100):
        got = _pooled(parts, limit, 9)
        keep = np.sort(np.argsort(-w)[: min(limit, w.size)])
        np.testing.assert_array_equal(got.F, F[keep])
        np.testing.assert_array_equal(got.g, g[keep])
        np.testing.assert_array_equal(got.w, w[keep])
    assert _pooled([], 5, 9).F.shape == (0, 9)
