"""Certificates: the chunked Jacobian algebra against the dense Jacobian, local identifiability verdicts on
generic and degenerate layers, interval coverage under label noise at a least-squares fit, JSON output and
bad input."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import least_squares
from strategies import gaussian_like, independent_tokens, inputs, well_conditioned

from oracles import Polytope
from sculpt import Certificate, MultiHeadAttention, certify, plant, sample_inputs
from sculpt.certify import body_widths, normal_equations
from sculpt.gradients import jacobian, residuals, vjp

SETTINGS = settings(max_examples=15, deadline=None)


def noisy(model, n, sigma, seed, distribution="boolean"):
    rng = np.random.default_rng(seed)
    X = sample_inputs(n, 4 if model.d > 4 else 3, model.d, rng=rng, distribution=distribution)
    return X, model(X) + sigma * rng.standard_normal(X.shape)


def least_squares_fit(model, X, Y):
    """The least-squares estimate near ``model`` by scipy's Levenberg–Marquardt on the dense Jacobian of
    sculpt.gradients (independent of the code under test)."""
    fit = least_squares(residuals, model.params(), jac=jacobian, args=(X, Y, model.m), method="lm",
                        xtol=1e-15, ftol=1e-15, gtol=1e-15)
    return MultiHeadAttention.from_params(fit.x, model.m, model.d)


def flat_intervals(cert, perm):
    lo = np.concatenate([cert.theta_interval[0][perm].ravel(), cert.w_interval[0][perm].ravel()])
    hi = np.concatenate([cert.theta_interval[1][perm].ravel(), cert.w_interval[1][perm].ravel()])
    return lo, hi


# ------------------------------------------------------------------------------------ algebra
@SETTINGS
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), st.integers(1, 9),
       st.sampled_from(["boolean", "gaussian"]), st.data())
def test_normal_equations_match_the_dense_jacobian(d, k, m, n, distribution, data):
    # Θ entries within 6/d (three standard deviations of N(0, (2/d)²)); generic layers and inputs, as random
    # normal draws are: each W_i of norm 1 and condition number <= 10, Gaussian tokens independent and O(1)
    # (with W = 0 and tokens of size 1e-2 the covariance's kept singular values spread over ~12 orders and
    # the two prediction_se computations differ by 1e-5 relative)
    model = MultiHeadAttention(
        data.draw(gaussian_like((m, d, d), scale=2 / d), label="thetas"),
        np.stack([data.draw(well_conditioned(d, d), label=f"W_{i}") for i in range(m)]))
    X = data.draw(inputs((n, k, d), "boolean") if distribution == "boolean"
                  else independent_tokens((n, k, d)), label="X")
    Y = data.draw(gaussian_like(X.shape), label="Y")
    J = jacobian(model.params(), X, Y, m)
    r = residuals(model.params(), X, Y, m)
    G, g, rss = normal_equations(model, X, Y)
    assert np.allclose(G, J.T @ J, rtol=1e-10, atol=1e-10 * max(1.0, np.abs(J).max() ** 2))
    assert np.allclose(g, vjp(model.params(), X, m, r), rtol=1e-10, atol=1e-10)
    assert math.isclose(rss, float(r @ r), rel_tol=1e-12, abs_tol=1e-12)
    cert = certify(model, X, Y, noise=0.1)
    JC = J @ cert.covariance
    se = np.sqrt(np.clip(np.einsum("ij,ij->i", JC, J), 0, None)).reshape(X.shape)
    # the two computations round differently by about eps·κ², κ the kept singular values' spread (d = 1 with two
    # nearly equal heads gave κ ≈ 1e4 and 1e-6 relative)
    sv = cert.singular_values[cert.singular_values > 0]
    rtol = max(1e-6, 1e-13 * float(sv.max() / sv.min()) ** 2) if sv.size else 1e-6
    assert np.allclose(cert.prediction_se(X), se, rtol=rtol, atol=1e-9)


def test_sandwich_meat_is_the_sum_of_per_example_scores():
    model = plant(4, 3, 2, seed=1)
    X, Y = noisy(model, 30, 0.1, 2)
    J = jacobian(model.params(), X, Y, 2)
    r = residuals(model.params(), X, Y, 2)
    S = np.einsum("nrp,nr->np", J.reshape(30, 12, -1), r.reshape(30, 12))
    G = J.T @ J
    Gi = np.linalg.inv(G)
    n, nr, p = 30, r.size, G.shape[0]
    expected = n / (n - 1) * (nr - 1) / (nr - p) * Gi @ (S.T @ S) @ Gi
    cert = certify(model, X, Y, covariance="sandwich")
    assert cert.locally_unique
    assert np.allclose(cert.covariance, expected, rtol=1e-7, atol=1e-12 * np.abs(expected).max())


# -------------------------------------------------------------------------------- identifiability
@pytest.mark.parametrize("d,k,m", [(4, 2, 1), (8, 4, 1), (8, 4, 2), (8, 4, 3), (16, 4, 2)])
@pytest.mark.parametrize("distribution", ["boolean", "gaussian"])
def test_generic_planted_layers_are_locally_unique(d, k, m, distribution):
    """No continuous symmetry: rank = 2 m d² (module docstring), far from the threshold."""
    truth = plant(d, k, m, seed=7)
    n = max(200, 4 * truth.n_params // (k * d) + 50)
    X = sample_inputs(n, k, d, rng=8, distribution=distribution)
    cert = certify(truth, X, truth(X) + 1e-3 * np.random.default_rng(9).standard_normal(X.shape))
    assert isinstance(cert, Certificate)
    assert cert.locally_unique and cert.rank == cert.n_params == 2 * m * d * d
    assert cert.unidentifiable == []
    s = cert.singular_values
    assert s.shape == (cert.n_params,) and np.all(np.diff(s) >= 0)
    assert s[0] > 1e-3 * s[-1]  # three orders of magnitude above rtol = 1e-6
    assert cert.theta_se.shape == truth.thetas.shape and cert.w_se.shape == truth.ws.shape
    assert np.all(np.isfinite(cert.theta_se)) and np.all(cert.theta_se > 0)
    assert 0.5e-3 < cert.noise < 2e-3 and not cert.noise_given


@pytest.fixture(scope="module")
def base():
    truth = plant(6, 4, 3, seed=3)
    X = sample_inputs(400, 4, 6, rng=5)
    return truth, X


def _variant(truth, edit):
    th, ws = truth.thetas.copy(), truth.ws.copy()
    edit(th, ws)
    return MultiHeadAttention(th, ws)


def _cert(model, X, **kw):
    return certify(model, X, model(X) + 1e-3 * np.random.default_rng(11).standard_normal(X.shape), **kw)


def test_silent_head_hides_its_theta(base):
    truth, X = base
    model = _variant(truth, lambda th, ws: ws.__setitem__(1, 0.0))
    cert = _cert(model, X)
    dd = model.d ** 2
    assert not cert.locally_unique and cert.rank == cert.n_params - dd
    assert len(cert.unidentifiable) == 1
    msg = cert.unidentifiable[0]
    assert "head 2" in msg and "W ≈ 0" in msg and "Θ_2" in msg and f"all {dd} directions" in msg
    assert np.all(np.isinf(cert.theta_se[1])) and np.all(np.isfinite(cert.theta_se[[0, 2]]))
    assert np.all(np.isfinite(cert.w_se))
    assert cert.theta_interval[0][1, 0, 0] == -np.inf and cert.theta_interval[1][1, 0, 0] == np.inf


def test_heads_with_equal_theta_see_only_the_sum_of_their_w(base):
    truth, X = base
    model = _variant(truth, lambda th, ws: th.__setitem__(1, th[0]))
    cert = _cert(model, X)
    assert not cert.locally_unique and cert.rank == cert.n_params - model.d ** 2
    assert len(cert.unidentifiable) == 1
    msg = cert.unidentifiable[0]
    assert "heads 1 and 2" in msg and "W_1 − W_2" in msg and "W_1 + W_2 is identified" in msg
    assert np.all(np.isinf(cert.w_se[:2])) and np.all(np.isfinite(cert.w_se[2]))
    assert np.all(np.isfinite(cert.theta_se))


def test_identical_heads(base):
    truth, X = base
    model = _variant(truth, lambda th, ws: (th.__setitem__(1, th[0]), ws.__setitem__(1, ws[0])))
    cert = _cert(model, X)
    assert not cert.locally_unique and cert.rank == cert.n_params - 2 * model.d ** 2
    text = " | ".join(cert.unidentifiable)
    assert "W_1 − W_2" in text and "Θ_2 − Θ_1" in text and "coincide" in text


def test_three_equal_thetas(base):
    truth, X = base
    model = _variant(truth, lambda th, ws: th.__setitem__(slice(None), th[0]))
    cert = _cert(model, X)
    assert cert.rank == cert.n_params - 2 * model.d ** 2  # W_1 − W_2, W_1 − W_3
    assert len(cert.unidentifiable) == 2 and all("only W_1 + W_" in u for u in cert.unidentifiable)


def test_zero_theta_head_is_identifiable(base):
    """Uniform attention of one head is not a degeneracy: the first-order change x_aᵀΔ C(X) W vanishes for
    all inputs only if Δ = 0."""
    truth, X = base
    cert = _cert(_variant(truth, lambda th, ws: th.__setitem__(2, 0.0)), X)
    assert cert.locally_unique and cert.unidentifiable == []
    assert any("head 3 has Θ ≈ 0" in n for n in cert.notes)


def test_singular_sum_of_w_is_identifiable_but_noted(base):
    truth, X = base

    def edit(th, ws):
        U, s, Vt = np.linalg.svd(ws.sum(axis=0))
        ws[2] -= s[-1] * np.outer(U[:, -1], Vt[-1])

    model = _variant(truth, edit)
    assert np.linalg.svd(model.ws.sum(axis=0), compute_uv=False)[-1] < 1e-12
    cert = _cert(model, X)
    assert cert.locally_unique and cert.unidentifiable == []
    assert any("Σ W_i is singular" in n for n in cert.notes)


def test_nearly_coinciding_heads_are_weakly_identified(base):
    truth, X = base
    rng = np.random.default_rng(0)
    model = _variant(truth, lambda th, ws: th.__setitem__(1, th[0] + 0.003 * rng.standard_normal(th[0].shape)))
    cert = _cert(model, X)
    assert cert.locally_unique
    assert any(n.startswith("weakly identified") for n in cert.notes)
    assert np.median(cert.w_se[:2]) > 30 * np.median(cert.w_se[2])


def test_single_token_sequences_hide_every_theta():
    model = plant(4, 2, 2, seed=0)
    X = sample_inputs(100, 1, 4, rng=1)
    cert = certify(model, X, model(X), noise=0.01)
    assert not cert.locally_unique
    assert cert.rank == model.d ** 2  # only W_1 + W_2 remains
    assert sum("k = 1" in u for u in cert.unidentifiable) == 3
    assert np.all(np.isinf(cert.theta_se))


def test_too_little_data(base):
    truth, _ = base
    X = sample_inputs(3, 4, 6, rng=2)
    cert = certify(truth, X, truth(X))
    assert not cert.locally_unique and cert.rank <= X.size
    assert cert.unidentifiable and any("fewer residuals" in n for n in cert.notes)
    assert any("noise" in n for n in cert.notes) or cert.dof > 0


# ----------------------------------------------------------------------------------------- coverage
def test_intervals_cover_the_truth_at_the_least_squares_fit():
    """Nominal 95 % intervals at the least-squares estimate, 3 σ × 3 seeds × 64 entries = 576 entries.
    Under the asymptotic theory each entry is covered with probability 0.95; if the entries were independent
    the binomial s.d. of the pooled rate would be 0.009, so [0.90, 0.98] is −5.5 / +3.3 s.d. (correlation
    within a fit widens the spread; the seeds are fixed, the check is deterministic). The scaled
    Mahalanobis error e ᵀ Σ⁻¹ e / p should average 1 (s.d. of the mean over 9 fits ≈ 0.06)."""
    hits, chi2, pred_hits = [], [], []
    for sigma in (1e-4, 1e-3, 1e-2):
        for seed in range(3):
            truth = plant(4, 3, 2, seed=seed)
            X, Y = noisy(truth, 600, sigma, 100 + seed + int(1e5 * sigma))
            est = least_squares_fit(truth, X, Y)
            cert = certify(est, X, Y)
            assert cert.locally_unique and cert.gradient_norm < 1e-8 * sigma * 1e4
            assert 0.8 * sigma < cert.noise < 1.2 * sigma
            perm = list(truth.distance(est).permutation)
            lo, hi = flat_intervals(cert, perm)
            t = truth.params()
            hits.append((lo <= t) & (t <= hi))
            e = est.params() - MultiHeadAttention(truth.thetas[np.argsort(perm)],
                                                  truth.ws[np.argsort(perm)]).params()
            chi2.append(e @ np.linalg.solve(cert.covariance, e) / e.size)
            Xn = sample_inputs(50, 3, 4, rng=seed)
            plo, phi = cert.prediction_interval(Xn)
            F = truth(Xn)
            pred_hits.append(((plo <= F) & (F <= phi)).ravel())
    rate = np.mean(np.concatenate(hits))
    assert 0.90 <= rate <= 0.98, rate
    assert 0.8 <= np.mean(chi2) <= 1.2, chi2
    assert 0.90 <= np.mean(np.concatenate(pred_hits)) <= 0.99


def test_sandwich_under_heteroscedastic_noise():
    """Noise s.d. varying 20x between examples: the sandwich intervals still cover; under homoscedastic
    noise they agree with Gauss–Newton."""
    truth = plant(4, 3, 2, seed=4)
    rates = {"gauss-newton": [], "sandwich": []}
    ratio = []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        X = sample_inputs(800, 3, 4, rng=rng)
        scale = 1e-3 * np.where(rng.random(800) < 0.8, 0.1, 2.0)[:, None, None]
        Y = truth(X) + scale * rng.standard_normal(X.shape)
        est = least_squares_fit(truth, X, Y)
        t = truth.params()
        for kind in rates:
            cert = certify(est, X, Y, covariance=kind)
            lo, hi = flat_intervals(cert, [0, 1])
            rates[kind].append(np.mean((lo <= t) & (t <= hi)))
        Yh = truth(X) + 1e-3 * rng.standard_normal(X.shape)
        esth = least_squares_fit(truth, X, Yh)
        ratio.append(np.median(certify(esth, X, Yh, covariance="sandwich").theta_se
                               / certify(esth, X, Yh).theta_se))
    assert 0.90 <= np.mean(rates["sandwich"]) <= 0.99, rates
    assert 0.85 <= np.median(ratio) <= 1.15, ratio


def test_given_noise_scales_the_intervals():
    truth = plant(4, 3, 1, seed=0)
    X = sample_inputs(300, 3, 4, rng=0)
    a = certify(truth, X, truth(X), noise=1e-3)
    b = certify(truth, X, truth(X), noise=2e-3)
    assert a.noise == 1e-3 and a.noise_given and a.noise_estimate == 0.0
    assert np.allclose(b.theta_se, 2 * a.theta_se) and np.allclose(b.w_se, 2 * a.w_se)
    half = a.quantile * a.theta_se
    assert np.allclose(a.theta_interval[1] - a.theta_interval[0], 2 * half)
    assert math.isclose(a.quantile, 1.959963984540054, rel_tol=1e-9)  # normal quantile when σ is given
    lo, hi = a.prediction_interval(X[0], kind="observation")
    mlo, mhi = a.prediction_interval(X[0])
    assert lo.shape == X[0].shape and np.all(hi - lo > mhi - mlo) and np.all(hi - lo >= 2 * 1.95e-3)


# ------------------------------------------------------------------------------------------- output
def test_to_dict_is_strict_json(base):
    truth, X = base
    for model in (truth, _variant(truth, lambda th, ws: ws.__setitem__(0, 0.0))):
        cert = _cert(model, X)
        text = json.dumps(cert.to_dict(), allow_nan=False)
        back = json.loads(text)
        assert back["locally_unique"] == cert.locally_unique and back["rank"] == cert.rank
        assert back["n_params"] == 2 * 3 * 36 and len(back["singular_values"]) == back["n_params"]
        assert np.array(back["theta_se"], dtype=float).shape == truth.thetas.shape
        assert len(back["w_interval"]) == 2
    assert back["theta_se"][0][0][0] is None  # inf → null
    assert "NOT locally unique" in cert.summary() and "head 1" in cert.summary()


@SETTINGS
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 2), st.integers(1, 6), st.booleans(), st.booleans(),
       st.data())
def test_to_dict_always_serialises(d, k, m, n, zero_w, noise, data):
    ws = np.zeros((m, d, d)) if zero_w else data.draw(gaussian_like((m, d, d)), label="ws")
    model = MultiHeadAttention(data.draw(gaussian_like((m, d, d)), label="thetas"), ws)
    X = data.draw(inputs((n, k, d)), label="X")
    Y = model(X) + (0.01 * data.draw(gaussian_like(X.shape), label="noise") if noise else 0.0)
    for kind in ("gauss-newton", "sandwich"):
        cert = certify(model, X, Y, covariance=kind)
        json.dumps(cert.to_dict(), allow_nan=False)
        assert cert.locally_unique == (cert.rank == cert.n_params) == (cert.unidentifiable == [])


# -------------------------------------------------------------------------------------- body widths
def test_body_widths_on_a_thin_box():
    eps = 1e-3
    box = Polytope(np.vstack([np.eye(4), -np.eye(4)]), np.array([1, 1, eps, eps] * 2, dtype=float))
    span = np.eye(4)[:, :2] * 3.0  # orthonormalised inside
    w = body_widths(box, span)
    assert w.normal.shape == (2,) and np.allclose(w.normal, 2 * eps, atol=1e-9)
    assert np.allclose(w.along, 2.0, atol=1e-9) and math.isclose(w.max_normal, 2 * eps, rel_tol=1e-6)
    w2 = body_widths(box, span[:, :1], directions=np.array([[1.0, 1.0, 0, 0]]))  # projected to (0, 1, 0, 0)
    assert np.allclose(w2.normal, 2.0) and np.allclose(w2.normal_directions, [[0, 1, 0, 0]])
    w3 = body_widths(box, span, max_directions=1, seed=3)
    assert w3.normal.shape == (1,) and w3.normal[0] <= 2 * eps * math.sqrt(2) + 1e-9
    model = plant(2, 3, 1, seed=0)
    X = sample_inputs(100, 3, 2, rng=0)
    cert = certify(model, X, model(X), noise=0.01, body=box, span_basis=span)
    assert cert.widths is not None and json.loads(json.dumps(cert.to_dict(), allow_nan=False))["widths"]
    with pytest.raises(ValueError):
        body_widths(box, np.ones((3, 1)))
    with pytest.raises(TypeError):
        body_widths("box", span)


# ---------------------------------------------------------------------------------------- bad input
def test_bad_input():
    model = plant(4, 3, 1, seed=0)
    X = sample_inputs(20, 3, 4, rng=0)
    Y = model(X)
    with pytest.raises(ValueError):
        certify(model, X, Y[:10])
    with pytest.raises(ValueError):
        certify(model, X, Y[..., :3])
    bad = X.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError):
        certify(model, bad, Y)
    badY = Y.copy()
    badY[1, 1, 1] = np.inf
    with pytest.raises(ValueError):
        certify(model, X, badY)
    X5 = sample_inputs(20, 3, 5, rng=0)
    with pytest.raises(ValueError, match="d = 4"):
        certify(model, X5, X5)
    with pytest.raises(ValueError):
        certify(model, X[0, 0], Y[0, 0])  # 1-D
    for kw in ({"covariance": "hc3"}, {"level": 1.0}, {"level": 0.0}, {"noise": -1.0}, {"noise": math.nan},
               {"rtol": 0.0}, {"body": Polytope(np.eye(2), np.ones(2))}):
        with pytest.raises(ValueError):
            certify(model, X, Y, **kw)
    with pytest.raises(TypeError):
        certify("model", X, Y)
    with pytest.raises(TypeError):
        certify(model, X, Y, noise="small")
    cert = certify(model, X, Y)
    with pytest.raises(ValueError):
        cert.prediction_se(X5)
    with pytest.raises(ValueError):
        cert.prediction_interval(X, kind="median")
