"""sample_inputs, plant and nondegeneracy."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import gaussian_like, well_conditioned

from sculpt import MultiHeadAttention, nondegeneracy, plant, sample_inputs
from sculpt.data import DEFAULT_THRESHOLDS

SETTINGS = settings(max_examples=15, deadline=None)


# ------------------------------------------------------------------------------------------ sample_inputs
def test_sample_inputs_boolean():
    X = sample_inputs(500, 4, 8, rng=0)
    assert X.shape == (500, 4, 8) and X.dtype == np.float64
    assert set(np.unique(X)) == {-1.0, 1.0}
    assert abs(X.mean()) < 0.03  # 16,000 Rademacher entries: std of the mean ≈ 0.008
    cov = np.einsum("np,nq->pq", X.reshape(-1, 8), X.reshape(-1, 8)) / 2000
    assert np.max(np.abs(cov - np.eye(8))) < 0.12  # independent coordinates


def test_sample_inputs_gaussian_and_reproducible():
    G = sample_inputs(1000, 3, 5, rng=1, distribution="gaussian")
    assert G.shape == (1000, 3, 5) and abs(G.mean()) < 0.06 and abs(G.std() - 1) < 0.05
    assert np.array_equal(sample_inputs(10, 3, 4, rng=7), sample_inputs(10, 3, 4, rng=7))
    assert not np.array_equal(sample_inputs(10, 3, 4, rng=7), sample_inputs(10, 3, 4, rng=8))
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    assert np.array_equal(sample_inputs(5, 2, 2, rng=g1), sample_inputs(5, 2, 2, rng=g2))


@pytest.mark.parametrize("args, kwargs, exc", [
    ((0, 2, 2), {}, ValueError), ((2, 0, 2), {}, ValueError), ((2, 2, -1), {}, ValueError),
    ((2.5, 2, 2), {}, TypeError), ((2, 2, 2), {"distribution": "uniform"}, ValueError),
    ((2, 2, 2), {"rng": "seed"}, TypeError), ((2, 2, 2), {"rng": -3}, ValueError),
])
def test_sample_inputs_bad_arguments(args, kwargs, exc):
    with pytest.raises(exc):
        sample_inputs(*args, **kwargs)


# ------------------------------------------------------------------------------------------------- plant
@SETTINGS
@given(st.integers(2, 8), st.integers(2, 6), st.integers(1, 3), st.integers(0, 10_000))
def test_plant_passes_its_own_nondegeneracy_report_reproducibly(d, k, m, seed):
    model = plant(d, k, m, seed=seed)
    again = plant(d, k, m, seed=seed)
    assert np.array_equal(model.thetas, again.thetas) and np.array_equal(model.ws, again.ws)
    report = nondegeneracy(model, k=k, n_inputs=300)
    assert report.ok, report.problems
    assert report.cond_sum_w <= 10.0
    s1 = 2.5 * 1.5 / 2.5
    if m > 1:
        assert report.min_head_distance >= 0.5 * s1
    assert 0.05 < report.entropy < 0.995 and report.top_weight < 0.98


def test_plant_scales_and_seeds():
    one = plant(6, 3, 1, scale=3.0, seed=1)
    assert np.linalg.norm(one.thetas[0]) == pytest.approx(3.0, rel=1e-12)
    model = plant(8, 4, 3, scale=2.5, seed=2)
    norms = np.linalg.norm(model.thetas.reshape(3, -1), axis=1)
    assert np.all(np.abs(norms - 2.5) < 0.6)  # Θ_0 + Δ_i with nearly orthogonal parts: ≈ √(2² + 1.5²)
    centre = model.thetas.mean(axis=0)
    # the shared part dominates: heads are closer to each other than to the origin
    assert np.linalg.norm(centre) > np.max(np.linalg.norm((model.thetas - centre).reshape(3, -1), axis=1))
    assert not np.array_equal(plant(8, 4, 2, seed=3).thetas, plant(8, 4, 2, seed=4).thetas)
    gen_a, gen_b = np.random.default_rng(5), np.random.default_rng(5)
    assert np.array_equal(plant(4, 2, 2, seed=gen_a).ws, plant(4, 2, 2, seed=gen_b).ws)
    w = plant(16, 4, 2, seed=0).ws  # d = 16: cond ≤ 10 accepted only ~0.1 % of the time
    assert np.linalg.cond(w.sum(axis=0)) <= 10


def test_plant_attention_statistics_follow_the_research_table():
    # docs/method.md#recon-plant: scale 2.5 gives H/log k ≈ 0.49 and max attention ≈ 0.72 at (8, 4, 2).
    reports = [nondegeneracy(plant(8, 4, 2, seed=s), k=4, n_inputs=1000, seed=s) for s in range(3)]
    assert 0.4 < np.median([r.entropy for r in reports]) < 0.6
    assert 0.65 < np.median([r.top_weight for r in reports]) < 0.8
    hot = nondegeneracy(plant(8, 4, 2, scale=4.3, seed=0), k=4, n_inputs=1000)
    assert hot.entropy < reports[0].entropy


def test_plant_hard_regime_knobs():
    weak = plant(8, 4, 2, seed=0, weak_head=0.01)
    norms = np.linalg.norm(weak.ws.reshape(2, -1), axis=1)
    assert norms[1] / norms[0] < 0.05
    report = nondegeneracy(weak, k=4, n_inputs=200)
    assert not report.ok and not report.checks["w_ratio"] and report.checks["sum_w"]
    close = plant(8, 4, 2, seed=0, separation=0.03)
    report = nondegeneracy(close, k=4, n_inputs=200)
    rel = report.min_head_distance / report.mean_theta_norm
    assert 0.015 < rel < 0.06
    assert not report.checks["head_separation"] and report.checks["affine_offset"]
    assert report.mean_theta_norm == pytest.approx(2.5, rel=0.2)


@pytest.mark.parametrize("args, kwargs, exc", [
    ((0, 4, 2), {}, ValueError), ((8, 0, 2), {}, ValueError), ((8, 4, 0), {}, ValueError),
    ((8, 4, 2), {"scale": 0.0}, ValueError), ((8, 4, 2), {"scale": -1.0}, ValueError),
    ((8, 4, 2), {"scale": float("nan")}, ValueError), ((8.0, 4, 2), {}, TypeError),
    ((8, 4, 1), {"weak_head": 0.01}, ValueError), ((8, 4, 2), {"weak_head": 0.0}, ValueError),
    ((8, 4, 2), {"separation": -0.1}, ValueError), ((8, 4, 2), {"separation": 2.0}, ValueError),
    ((1, 2, 3), {}, ValueError),  # d = 1 cannot hold 3 distinct, affinely independent heads
    ((8, 4, 2), {"max_cond": 0.5}, ValueError),
])
def test_plant_bad_arguments(args, kwargs, exc):
    with pytest.raises(exc):
        plant(*args, **kwargs)


# ----------------------------------------------------------------------------------------- nondegeneracy
def min_norm_point_kkt(thetas: np.ndarray) -> np.ndarray:
    """argmin ‖Σ c_i Θ_i‖ s.t. Σ c_i = 1, by the KKT system of the Gram matrix."""
    m = thetas.shape[0]
    V = thetas.reshape(m, -1)
    kkt = np.block([[2 * V @ V.T, np.ones((m, 1))], [np.ones((1, m)), np.zeros((1, 1))]])
    c = np.linalg.lstsq(kkt, np.r_[np.zeros(m), 1.0], rcond=None)[0][:m]
    return c @ V


@SETTINGS
@given(st.integers(2, 5), st.integers(1, 4), st.data())
def test_affine_offset_is_the_min_norm_point(d, m, data):
    # linearly independent heads (m <= d², condition number <= 10), so the affine hull misses the origin
    thetas = data.draw(well_conditioned(m, d * d, scale=3.0), label="thetas").reshape(m, d, d)
    ws = data.draw(gaussian_like((m, d, d)), label="ws")
    report = nondegeneracy(MultiHeadAttention(thetas, ws), k=None)
    point = min_norm_point_kkt(thetas)
    assert report.affine_offset == pytest.approx(np.linalg.norm(point), rel=1e-8, abs=1e-10)
    # the min-norm identity <Θ_i, Θ̄> = ‖Θ̄‖² (docs/method.md#recon-phase-3)
    np.testing.assert_allclose(thetas.reshape(m, -1) @ point, point @ point, rtol=1e-8)


def test_report_figures_match_direct_computation():
    model = plant(6, 3, 3, seed=9)
    report = nondegeneracy(model, k=3, n_inputs=500, seed=4)
    sw = model.ws.sum(axis=0)
    assert report.cond_sum_w == pytest.approx(np.linalg.cond(sw), rel=1e-10)
    assert report.sigma_min_sum_w == pytest.approx(np.linalg.svd(sw, compute_uv=False)[-1], rel=1e-10)
    centred = model.thetas.reshape(3, -1) - model.thetas.reshape(3, -1).mean(axis=0)
    assert report.centred_sv == pytest.approx(np.linalg.svd(centred, compute_uv=False)[1], rel=1e-10)
    P = model.attention(sample_inputs(500, 3, 6, rng=4))
    assert report.entropy == pytest.approx(float(-(P * np.log(P)).sum(-1).mean() / math.log(3)), rel=1e-10)
    assert report.top_weight == pytest.approx(float(P.max(-1).mean()), rel=1e-10)
    assert report.k == 3 and report.m == 3 and report.d == 6
    no_k = nondegeneracy(model, k=None)
    assert math.isnan(no_k.entropy) and "entropy" not in no_k.checks


def test_report_flags_degenerate_layers():
    base = plant(6, 4, 2, seed=1)
    ws_singular = base.ws.copy()
    ws_singular[1] = -ws_singular[0]  # Σ W = 0
    r = nondegeneracy(MultiHeadAttention(base.thetas, ws_singular))
    assert not r.ok and not r.checks["sum_w"] and r.cond_sum_w > 1e10
    same = np.stack([base.thetas[0], base.thetas[0] + 1e-6])
    r = nondegeneracy(MultiHeadAttention(same, base.ws))
    assert not r.checks["head_separation"] and not r.checks["centred_sv"] and not r.ok
    opposite = np.stack([base.thetas[0], -base.thetas[0]])  # aff hull through the origin
    r = nondegeneracy(MultiHeadAttention(opposite, base.ws))
    assert not r.checks["affine_offset"] and r.affine_offset < 1e-12
    hot = nondegeneracy(MultiHeadAttention(base.thetas * 40, base.ws), k=4, n_inputs=200)
    assert not hot.checks["top_weight"] and any(p.startswith("top_weight") for p in hot.problems)
    cold = nondegeneracy(MultiHeadAttention(base.thetas * 1e-3, base.ws), k=4, n_inputs=200)
    assert not cold.checks["entropy"]
    assert all(t > 0 for t in (DEFAULT_THRESHOLDS.max_cond_sum_w, DEFAULT_THRESHOLDS.min_head_separation))


def test_nondegeneracy_bad_arguments():
    with pytest.raises(TypeError):
        nondegeneracy("model")
    model = plant(4, 2, 1, seed=0)
    with pytest.raises(ValueError):
        nondegeneracy(model, k=0)
    with pytest.raises(ValueError):
        nondegeneracy(model, k=2, n_inputs=0)


def test_default_report_has_attention_statistics():
    """nondegeneracy(model) alone reports entropy and top weight (k = 4 tokens by default); k=None skips them."""
    model = plant(8, 4, 2, seed=3)
    rep = nondegeneracy(model, n_inputs=300)
    assert rep.k == 4 and 0.0 < rep.entropy < 1.0 and 0.25 <= rep.top_weight <= 1.0
    assert {"entropy", "top_weight"} <= set(rep.checks)
    skipped = nondegeneracy(model, k=None)
    assert np.isnan(skipped.entropy) and "entropy" not in skipped.checks
