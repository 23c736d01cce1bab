"""Phase 1 (sculpt.phases.sum_w): crude and trimmed single-token estimates of Σ_i W_i."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import gaussian_like

from sculpt.data import plant, sample_inputs
from sculpt.model import MultiHeadAttention
from sculpt.phases.sum_w import crude_sum_w, estimate_sum_w, single_token_residuals
from sculpt.settings import Settings, SumWSettings


def learn_settings(X: np.ndarray, m: int) -> SumWSettings:
    """Phase 1's settings as ``learn`` resolves them for this data and head count."""
    N, k, d = X.shape
    return Settings().resolve(d, k, m, N).sum_w


@settings(max_examples=15, deadline=None)
@given(
    d=st.integers(2, 6),
    k=st.integers(2, 5),
    m=st.integers(1, 3),
    seed=st.integers(0, 10_000),
    dist=st.sampled_from(["boolean", "gaussian"]),
    data=st.data(),
)
def test_crude_is_unbiased_when_attention_is_uniform(d, k, m, seed, dist, data):
    # Θ = 0: Y = (1/k) J X ΣW, so Ŵ⁰ = Ĉ ΣW exactly with Ĉ = (1/kN) Σ s sᵀ and E[Ĉ] = I.
    # The W_i are drawn structured; the 4000 inputs stay a seeded sample (the second check is statistical).
    rng = np.random.default_rng(seed)
    ws = data.draw(gaussian_like((m, d, d)), label="ws")
    model = MultiHeadAttention(np.zeros((m, d, d)), ws)
    X = sample_inputs(4000, k, d, rng=rng, distribution=dist)
    Y = model(X)
    s = X.sum(1)
    C = s.T @ s / (k * X.shape[0])
    np.testing.assert_allclose(crude_sum_w(X, Y), C @ ws.sum(0), atol=1e-10 * (1 + np.abs(ws).sum()))
    assert np.linalg.norm(C - np.eye(d)) < 8 * np.sqrt(d * d / X.shape[0]) * 2


def test_improved_beats_crude_and_records_truth():
    model = plant(6, 3, 2, seed=3)
    X = sample_inputs(8000, 3, 6, rng=4)
    Y = model(X)
    W, rec = estimate_sum_w(X, Y, learn_settings(X, 2), truth=model)
    S = model.ws.sum(0)
    err = np.linalg.norm(W - S) / np.linalg.norm(S)
    assert rec.name == "1-sum-w"
    assert rec.truth["err_sum_w"] == pytest.approx(err)
    assert err < 0.5 * rec.truth["err_crude"]
    assert len(rec.figures["trimmed_steps"]) == len(rec.truth["err_per_step"])


def test_single_token_residual_is_zero_on_one_hot_rows():
    rng = np.random.default_rng(0)
    X = sample_inputs(50, 4, 5, rng=rng)
    W = rng.standard_normal((5, 5))
    pick = rng.integers(0, 4, size=(50, 4))
    Y = np.take_along_axis(X, pick[..., None], 1) @ W
    j, rel = single_token_residuals(X, Y, W)
    assert np.all(rel < 1e-6)
    np.testing.assert_allclose(np.take_along_axis(X, j[..., None], 1), np.take_along_axis(X, pick[..., None], 1))


@pytest.mark.parametrize("chunk", [1, 7, 10**6])
def test_chunked_residuals_and_simplex_fits_match_the_per_example_ones(monkeypatch, chunk):
    """single_token_residuals and simplex_lstsq work a chunk of examples at a time (and on ``examples`` gathered a
    chunk at a time): every chunk size gives each example the result it gets alone."""
    import sculpt.phases._simplex as sx
    import sculpt.phases.sum_w as sw

    rng = np.random.default_rng(3)
    X = sample_inputs(40, 4, 6, rng=rng)
    Y, W = rng.standard_normal((40, 4, 6)), rng.standard_normal((6, 6))
    alone = [single_token_residuals(X[n : n + 1], Y[n : n + 1], W) for n in range(40)]
    fits = [sx.simplex_lstsq(X[n : n + 1], Y[n : n + 1], W) for n in range(40)]
    monkeypatch.setattr(sw, "error_chunk", lambda k, d: chunk)
    monkeypatch.setattr(sx, "error_chunk", lambda k, d: chunk)
    j, rel = single_token_residuals(X, Y, W)
    assert np.array_equal(j, np.vstack([a[0] for a in alone]))
    np.testing.assert_allclose(rel, np.vstack([a[1] for a in alone]), rtol=1e-12, atol=0)
    pick = rng.permutation(40)[:25]
    j2, rel2 = single_token_residuals(X, Y, W, pick)
    assert np.array_equal(j2, j[pick]) and np.array_equal(rel2, rel[pick])
    fit = sx.simplex_lstsq(X, Y, W)
    np.testing.assert_allclose(fit.q, np.concatenate([f.q for f in fits]), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fit.rel, np.concatenate([f.rel for f in fits]), rtol=1e-10, atol=1e-14)


def test_without_improvement_returns_crude():
    model = plant(4, 3, 2, seed=1)
    X = sample_inputs(500, 3, 4, rng=2)
    W, rec = estimate_sum_w(X, model(X), learn_settings(X, 2).merged(improve=False))
    np.testing.assert_allclose(W, crude_sum_w(X, model(X)))
    assert "crude" in rec.figures["estimator"]


@pytest.mark.parametrize(
    "bad",
    [
        dict(X=np.full((10, 3, 4), np.nan)),
        dict(Y=np.zeros((10, 3, 5))),
        dict(fractions=(0.5, 0.0)),
        dict(min_rows=1),
        dict(vp_rows=3),
    ],
)
def test_bad_input(bad):
    """Malformed data, fractions outside (0, 1] and min_rows or vp_rows below d = 4 are ValueErrors."""
    rng = np.random.default_rng(0)
    args = dict(X=sample_inputs(10, 3, 4, rng=rng), Y=rng.standard_normal((10, 3, 4)))
    args.update(bad)
    X, Y = args.pop("X"), args.pop("Y")
    with pytest.raises(ValueError):
        estimate_sum_w(X, Y, SumWSettings().merged(args))


def test_agreement_refit_is_exact_for_one_head():
    # m = 1: every row agrees, the variable-projection objective is 0 exactly at the true W
    model = plant(5, 3, 1, seed=8)
    X = sample_inputs(3000, 3, 5, rng=9)
    Y = model(X)
    W, rec = estimate_sum_w(X, Y, learn_settings(X, 1), truth=model)
    assert rec.truth["err_trimmed"] > 1e-3
    assert rec.truth["err_sum_w"] < 1e-7
    assert rec.figures["agreement_refit"][-1]["rms_per_iter"][-1] < 1e-7
    assert rec.figures["exact_agreement"]  # one pattern fits every row: phase 3 has nothing to refine


def test_refit_settings_bound_its_steps():
    """vp_max_iter caps the Gauss–Newton steps of a refit (one head: one step leaves Σ̂W short of exact, the
    default reaches it); with vp_rounds = 0 no refit runs and Σ̂W is the trimmed estimate."""
    model = plant(5, 3, 1, seed=8)
    X = sample_inputs(3000, 3, 5, rng=9)
    Y = model(X)
    s = learn_settings(X, 1)
    _, one = estimate_sum_w(X, Y, s.merged(vp_max_iter=1), truth=model)
    _, full = estimate_sum_w(X, Y, s, truth=model)
    assert len(one.figures["agreement_refit"][0]["rms_per_iter"]) == 1
    assert one.truth["err_sum_w"] > 100 * full.truth["err_sum_w"]
    W0, none = estimate_sum_w(X, Y, s.merged(vp_rounds=0), truth=model)
    assert none.figures["agreement_refit"] == [] and none.truth["err_sum_w"] == none.truth["err_trimmed"]


def test_ill_conditioned_estimate_from_uniform_attention_is_not_called_degenerate() -> None:
    """With nearly uniform heads no row is single-token: a failed cond check says so (max_cond forced low)."""
    from sculpt.errors import PhaseFailed

    for scale, phrase in [(0.5, "nearly uniform"), (2.5, "degenerate instance")]:
        model = plant(8, 4, 2, seed=0, scale=scale)
        X = sample_inputs(1500, 4, 8, rng=1)
        with pytest.raises(PhaseFailed, match=phrase):
            estimate_sum_w(X, model(X), learn_settings(X, 2).merged(max_cond=1.0))


@settings(max_examples=30, deadline=None)
@given(d=st.integers(3, 9), c=st.integers(0, 3), seed=st.integers(0, 2**16), dependent=st.booleans())
def test_complement_projectors_match_the_pseudoinverse(d, c, seed, dependent):
    """I − T T⁺ for a stack of (d, c) matrices, through a batched QR with the pinv kept for (near-)dependent
    columns: symmetric, idempotent and equal to the pseudoinverse formula, rank-deficient members included."""
    from sculpt.phases.sum_w import _complement_projectors

    rng = np.random.default_rng(seed)
    T = rng.standard_normal((20, d, c))
    if dependent and c > 1:
        T[::3, :, -1] = T[::3, :, 0] * 2.0  # every third member loses a rank
    P = _complement_projectors(T)
    ref = np.eye(d) - T @ np.linalg.pinv(T)
    np.testing.assert_allclose(P, ref, atol=1e-10)
    np.testing.assert_allclose(P @ P, P, atol=1e-10)
    np.testing.assert_allclose(P, P.transpose(0, 2, 1), atol=1e-12)


@pytest.mark.parametrize("k, kept", [(4, True), (8, False)])
def test_refit_is_kept_only_when_it_lowers_the_heldout_agreement_residual(k: int, kept: bool) -> None:
    """At (8,4,2) the agreement refit improves Σ̂W and is kept; at (8,8,2), where the agreement test is blind
    (m(k − 1) > d), it makes Σ̂W worse and is rejected: the returned estimate is then the trimmed one."""
    model = plant(8, k, 2, seed=1)
    X = sample_inputs(3000, k, 8, rng=2)
    W, rec = estimate_sum_w(X, model(X), learn_settings(X, 2), truth=model)
    agree = rec.figures["refit_criterion"]
    assert rec.figures["refit_accepted"] is kept
    assert (agree["refit"] < agree["trimmed"]) is kept
    t = rec.truth
    if kept:
        assert t["err_sum_w"] == t["err_refit"] < t["err_trimmed"]
    else:
        assert t["err_sum_w"] == t["err_trimmed"] < t["err_refit"]
    assert rec.figures["holdout_examples"] == 300  # every tenth example judges the refit


@settings(max_examples=40, deadline=None)
@given(d=st.integers(2, 7), r=st.floats(0.0, 0.5), seed=st.integers(0, 2**16))
def test_cond_lower_bound_holds_for_every_matrix_within_the_error(d: int, r: float, seed: int) -> None:
    """Weyl: every W + E with ‖E‖_F <= r‖W‖_F has a condition number >= cond_lower_bound(W, r), and the bound
    is cond(W) itself at r = 0."""
    from sculpt.phases.sum_w import cond_lower_bound

    rng = np.random.default_rng(seed)
    W = rng.standard_normal((d, d))
    low = cond_lower_bound(W, r)
    assert low >= 1.0
    for _ in range(20):
        E = rng.standard_normal((d, d))
        E *= r * np.linalg.norm(W) / np.linalg.norm(E) * rng.uniform(0, 1)
        assert np.linalg.cond(W + E) >= low * (1 - 1e-9)
    assert cond_lower_bound(W, 0.0) == pytest.approx(np.linalg.cond(W), rel=1e-9)


def test_ill_conditioned_but_uncertain_estimate_blames_the_examples_not_the_instance() -> None:
    """At k = 16 the estimate is uncertain (single-token rows are rare): with max_cond forced below its
    condition number the failure says too few examples for phase 1 at k = 16, not a degenerate instance; the
    record sizes the uncertainty above the true error."""
    from sculpt.errors import PhaseFailed

    model = plant(8, 16, 2, seed=0)
    X = sample_inputs(1500, 16, 8, rng=1)
    Y = model(X)
    W, rec = estimate_sum_w(X, Y, learn_settings(X, 2), truth=model)
    assert rec.figures["rel_uncertainty"] > rec.truth["err_sum_w"]
    assert rec.figures["cond_lower"] < rec.figures["cond"]
    with pytest.raises(PhaseFailed, match="too few examples for phase 1 at k = 16") as exc:
        estimate_sum_w(X, Y, learn_settings(X, 2).merged(max_cond=rec.figures["cond"] / 2))
    assert not exc.value.reason.startswith("degenerate") and "method='auto'" in exc.value.reason


def test_gauss_newton_step_by_conjugate_gradients_matches_the_dense_solve(monkeypatch):
    """From GN_CG_FROM unknowns the Gauss–Newton step is solved matrix-free by conjugate gradients: the same step
    as the dense normal equations (to 1e-9 relative), with and without a basis restricting it; and its
    projectors I − Q Qᵀ are the dense ones, for dependent token directions too."""
    import sculpt.phases.sum_w as sw
    from sculpt.phases._simplex import affine_weights

    model = plant(6, 4, 2, seed=3)
    X = sample_inputs(400, 4, 6, rng=4)
    Y = model(X)
    W = model.ws.sum(0) + 0.05 * np.random.default_rng(5).standard_normal((6, 6))
    Xr, Yr = X, Y[:, 0]  # every example's first output row: (R, k, d) tokens, (R, d) outputs
    B = Xr @ W
    qq = affine_weights(B, np.einsum("rjd,rd->rj", B, Yr)[..., None])[..., 0]
    r = Yr - np.einsum("rj,rjd->rd", qq, B)
    basis = np.linalg.qr(np.random.default_rng(6).standard_normal((6, 4)))[0].T  # (4, 6)
    for bas in (None, basis):
        monkeypatch.setattr(sw, "GN_CG_FROM", 10**9)
        dense = sw._gauss_newton_step(Xr, B, qq, r, bas)
        monkeypatch.setattr(sw, "GN_CG_FROM", 1)
        cg = sw._gauss_newton_step(Xr, B, qq, r, bas)
        assert np.linalg.norm(dense) > 1e-3
        np.testing.assert_allclose(cg, dense, rtol=0, atol=1e-9 * np.linalg.norm(dense))
    T = (B[:, 1:] - B[:, :1]).transpose(0, 2, 1).copy()
    T[:5, :, 2] = T[:5, :, 0] + T[:5, :, 1]  # dependent directions: rank 2 of 3
    T[5] = 0.0  # no direction at all
    Q = sw._absorbed_bases(T)
    P = np.eye(6) - Q @ Q.transpose(0, 2, 1)
    np.testing.assert_allclose(P, sw._complement_projectors(T), atol=1e-10)


def test_pruned_trimmed_rounds_keep_the_rows_of_the_full_computation(monkeypatch):
    """From TRIM_PRUNE_FROM on, a trimmed round recomputes residuals only for the examples whose bounds let a row
    be kept: every round keeps the same rows as recomputing every residual, so Σ̂W and the rounds' figures agree
    to rounding (forced here at d² = 36)."""
    import sculpt.phases.sum_w as sw

    model = plant(6, 4, 2, seed=1)
    X = sample_inputs(3000, 4, 6, rng=2)
    Y = model(X)
    s = learn_settings(X, 2)
    W0 = crude_sum_w(X, Y)
    calls: list[int] = []
    original = sw.single_token_residuals

    def counted(
        X_: np.ndarray, Y_: np.ndarray, W: np.ndarray, examples: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        calls.append(X_.shape[0] if examples is None else examples.size)
        return original(X_, Y_, W, examples)

    monkeypatch.setattr(sw, "single_token_residuals", counted)
    monkeypatch.setattr(sw, "TRIM_PRUNE_FROM", 10**9)
    W_full, full = sw.trimmed_rounds(X, Y, W0, s.fractions, min_rows=s.min_rows)
    monkeypatch.setattr(sw, "TRIM_PRUNE_FROM", 1)
    calls.clear()
    W_pruned, pruned = sw.trimmed_rounds(X, Y, W0, s.fractions, min_rows=s.min_rows)
    assert len(calls) == len(s.fractions) and calls[0] == 3000 and min(calls) < 3000  # the later rounds read less
    np.testing.assert_allclose(W_pruned, W_full, rtol=0, atol=1e-12 * np.abs(W_full).max())
    for a, b in zip(pruned, full, strict=True):
        assert a.keys() == b.keys() and a["rows"] == b["rows"]
        assert a["residual_max_kept"] == pytest.approx(b["residual_max_kept"], rel=1e-9)
