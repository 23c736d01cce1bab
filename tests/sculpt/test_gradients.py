"""Analytic gradients, residuals, Jacobians and Jacobian products against finite differences."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import least_squares
from strategies import gaussian_like, inputs, shapes

import sculpt.toolkit.forward_pass as model_mod  # the kernels behind sculpt.model
from sculpt import MultiHeadAttention, plant, sample_inputs
from sculpt.gradients import (
    jacobian,
    jacobian_operator,
    jvp,
    loss_and_grad,
    loss_and_grad_flat,
    pack,
    residuals,
    unpack,
    vjp,
)

SETTINGS = settings(max_examples=20, deadline=None)


def instance(d, k, m, n, seed, distribution="boolean"):
    rng = np.random.default_rng(seed)
    params = np.concatenate([rng.normal(size=m * d * d) * 2 / d, rng.normal(size=m * d * d) / np.sqrt(d)])
    X = sample_inputs(n, k, d, rng=rng, distribution=distribution)
    Y = rng.normal(size=X.shape)
    return params, X, Y


@st.composite
def instances(draw, distribution=st.sampled_from(["boolean", "gaussian"])):
    """(params, X, Y, m) as ``instance`` draws them, structured: Θ entries within 6/d, W entries within 3/√d
    (three standard deviations of ``instance``'s normals), an input batch and arbitrary labels."""
    n, k, d, m = draw(shapes(N=(1, 5), k=(1, 4), d=(1, 4), m=(1, 3)))
    dist = distribution if isinstance(distribution, str) else draw(distribution)
    thetas = draw(gaussian_like(m * d * d, scale=2 / d), label="thetas")
    ws = draw(gaussian_like(m * d * d, scale=1 / np.sqrt(d)), label="ws")
    X = draw(inputs((n, k, d), dist), label="X")
    return np.concatenate([thetas, ws]), X, draw(gaussian_like(X.shape), label="Y"), m


def central_difference(f, x, eps=1e-6):
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e[j] = eps
        cols.append((f(x + e) - f(x - e)) / (2 * eps))
    return np.array(cols).T


@SETTINGS
@given(instances())
def test_gradient_matches_finite_differences(inst):
    p, X, Y, m = inst
    d = X.shape[2]
    loss, g = loss_and_grad_flat(p, X, Y, m)
    fd = central_difference(lambda q: loss_and_grad_flat(q, X, Y, m)[0], p)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * max(1.0, np.abs(fd).max()))
    thetas, ws = unpack(p, m, d)
    assert loss == pytest.approx(np.sum((MultiHeadAttention(thetas, ws)(X) - Y) ** 2), rel=1e-12)


@SETTINGS
@given(instances("boolean"), st.data())
def test_jacobian_matches_finite_differences_and_products(inst, data):
    p, X, Y, m = inst
    n, k, d = X.shape
    J = jacobian(p, X, Y, m)
    assert J.shape == (n * k * d, 2 * m * d * d)
    fd = central_difference(lambda q: residuals(q, X, Y, m), p)
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-7 * max(1.0, np.abs(fd).max()))
    v, u = data.draw(gaussian_like(p.size), label="v"), data.draw(gaussian_like(J.shape[0]), label="u")
    np.testing.assert_allclose(jvp(p, X, m, v), J @ v, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(vjp(p, X, m, u), J.T @ u, rtol=1e-10, atol=1e-10)
    op = jacobian_operator(p, X, Y, m)
    np.testing.assert_allclose(op @ v, J @ v, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(op.rmatvec(u), J.T @ u, rtol=1e-10, atol=1e-10)
    r = residuals(p, X, Y, m)
    np.testing.assert_allclose(loss_and_grad_flat(p, X, Y, m)[1], 2 * J.T @ r, rtol=1e-10, atol=1e-10)


def test_normalised_loss_and_structured_form():
    model = plant(5, 3, 2, seed=0)
    X = sample_inputs(40, 3, 5, rng=1)
    Y = model(X) + 0.1
    loss, gt, gw = loss_and_grad(model.thetas, model.ws, X, Y)
    nloss, ngt, ngw = loss_and_grad(model.thetas, model.ws, X, Y, normalize=True)
    scale = np.sum(Y ** 2)
    assert nloss == pytest.approx(loss / scale, rel=1e-13)
    np.testing.assert_allclose(ngt, gt / scale, rtol=1e-13)
    np.testing.assert_allclose(ngw, gw / scale, rtol=1e-13)
    flat_loss, flat_g = loss_and_grad_flat(pack(model.thetas, model.ws), X, Y, 2, scale=scale)
    assert flat_loss == pytest.approx(nloss, rel=1e-13)
    np.testing.assert_allclose(flat_g, pack(ngt, ngw), rtol=1e-13)
    # at the truth (labels without offset) loss and gradient vanish
    zero, gt0, gw0 = loss_and_grad(model.thetas, model.ws, X, model(X))
    assert zero == 0.0 and not np.any(gt0) and not np.any(gw0)


def test_chunking_does_not_change_results(monkeypatch):
    p, X, Y = instance(4, 3, 2, 50, 7)
    loss, g = loss_and_grad_flat(p, X, Y, 2)
    J = jacobian(p, X, Y, 2)
    monkeypatch.setattr(model_mod, "FORWARD_CHUNK_ELEMENTS", 40)
    assert model_mod.chunk_size(3, 4, 2) < 50
    loss_c, g_c = loss_and_grad_flat(p, X, Y, 2)
    assert loss_c == pytest.approx(loss, rel=1e-13)
    np.testing.assert_allclose(g_c, g, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jacobian(p, X, Y, 2), J, rtol=1e-12, atol=1e-12)


def test_least_squares_with_analytic_jacobian_recovers_from_a_warm_start():
    truth = plant(4, 3, 2, seed=3)
    X = sample_inputs(60, 3, 4, rng=4)
    Y = truth(X)
    rng = np.random.default_rng(5)
    x0 = truth.params() * (1 + 0.05 * rng.normal(size=truth.n_params))
    res = least_squares(residuals, x0, jac=jacobian, args=(X, Y, 2), method="lm", xtol=1e-15, ftol=1e-15)
    assert np.sum(res.fun ** 2) / np.sum(Y ** 2) < 1e-20
    res_op = least_squares(residuals, x0, jac=jacobian_operator, args=(X, Y, 2), method="trf",
                           tr_solver="lsmr", xtol=1e-15, ftol=1e-15, gtol=1e-15)
    assert np.sum(res_op.fun ** 2) / np.sum(Y ** 2) < 1e-16


def test_pack_unpack_roundtrip_and_layout():
    model = plant(3, 2, 2, seed=0)
    p = pack(model.thetas, model.ws)
    assert np.array_equal(p, model.params())
    t, w = unpack(p, 2, 3)
    assert np.array_equal(t, model.thetas) and np.array_equal(w, model.ws)
    assert t[1, 0, 2] == p[1 * 9 + 0 * 3 + 2]  # row-major [vec Θ_1, vec Θ_2, vec W_1, vec W_2]
    with pytest.raises(ValueError):
        unpack(p[:-1], 2, 3)


def test_bad_inputs():
    p, X, Y = instance(3, 2, 2, 4, 0)
    thetas, ws = unpack(p, 2, 3)
    with pytest.raises(ValueError):
        loss_and_grad(thetas, ws, X, Y[:, :1])
    with pytest.raises(ValueError):
        loss_and_grad(thetas, ws, X[..., :2], Y[..., :2])  # d mismatch with parameters
    bad = X.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError):
        loss_and_grad(thetas, ws, bad, Y)
    with pytest.raises(ValueError):
        loss_and_grad(thetas, ws, X, 0 * Y, normalize=True)
    with pytest.raises(ValueError):
        residuals(p, X, Y, 3)  # wrong parameter count for m = 3
    with pytest.raises(ValueError):
        residuals(p, X, Y, 0)
    with pytest.raises(TypeError):
        jacobian(p, X, Y, 1.5)
    with pytest.raises(ValueError):
        jacobian_operator(p, X, Y[:2], 2)
