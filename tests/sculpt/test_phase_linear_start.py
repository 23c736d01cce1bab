"""The linear route (sculpt.phases.linear_start): the lifted linear-attention regression and its split."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sculpt.data import sample_inputs
from sculpt.phases.linear_start import (
    _theta_design,
    _w_design,
    fit_lifted,
    lifted_feature_count,
    linear_route_applies,
    split_lifted,
)
from sculpt.settings import LinearSettings, Settings


def _linear_attention(X: np.ndarray, thetas: np.ndarray, ws: np.ndarray) -> np.ndarray:
    """y_a = x̄ᵀ Σ_i W_i + x_aᵀ Σ_i Θ_i C W_i, C = (1/k) Σ_j x_j x_jᵀ − x̄ x̄ᵀ: the layer's first-order expansion
    around uniform attention, written out directly."""
    k = X.shape[1]
    xb = X.mean(1)
    C = np.einsum("njq,njr->nqr", X, X) / k - xb[:, :, None] * xb[:, None, :]
    M = np.einsum("ipq,nqr,ire->npe", thetas, C, ws)
    return (xb @ ws.sum(0))[:, None, :] + np.einsum("nap,npe->nae", X, M)


def _sym_lifted(thetas: np.ndarray, ws: np.ndarray) -> np.ndarray:
    """lifted[p, (q, r), e] for q <= r: the symmetric part of Σ_i Θ_i[p,q] W_i[r,e] in (q, r)."""
    d = thetas.shape[1]
    L = np.einsum("ipq,ire->pqre", thetas, ws)
    iq, ir = np.triu_indices(d)
    return 0.5 * (L[:, iq, ir, :] + L[:, ir, iq, :])


@settings(max_examples=25, deadline=None)
@given(d=st.integers(2, 6), m=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_both_designs_give_the_symmetric_lifted_parameter(d: int, m: int, seed: int) -> None:
    """The Θ-design (given W) and the W-design (given Θ) reproduce sym(Σ_i Θ_i ⊗ W_i) exactly."""
    rng = np.random.default_rng(seed)
    thetas, ws = rng.standard_normal((2, m, d, d))
    ref = _sym_lifted(thetas, ws)
    T = d * (d + 1) // 2
    via_theta = (_theta_design(ws) @ thetas.transpose(0, 2, 1).reshape(m * d, d)).T.reshape(d, T, d)
    via_w = (_w_design(thetas) @ ws.reshape(m * d, d)).reshape(d, T, d)
    np.testing.assert_allclose(via_theta, ref, atol=1e-12)
    np.testing.assert_allclose(via_w, ref, atol=1e-12)


@pytest.mark.parametrize("dist", ["boolean", "gaussian"])
def test_lifted_regression_is_exact_on_linear_attention(dist: str) -> None:
    """On data from the linear-attention model itself the regression recovers Σ W_i and the lifted parameter's
    symmetric part to rounding, and its held-out relative MSE is ~0."""
    rng = np.random.default_rng(3)
    d, k, m = 5, 6, 2
    thetas, ws = rng.standard_normal((2, m, d, d)) / np.sqrt(d)
    X = sample_inputs(600, k, d, rng=4, distribution=dist)
    fit = fit_lifted(X, _linear_attention(X, thetas, ws))
    np.testing.assert_allclose(fit.sum_w, ws.sum(0), atol=1e-6)
    if dist == "gaussian":  # ±1 tokens make the diagonal of x xᵀ constant: those lifted entries are unseen
        np.testing.assert_allclose(fit.lifted, _sym_lifted(thetas, ws), atol=1e-6)
    assert fit.rel_residual < 1e-12
    assert fit.lifted.shape == (d, d * (d + 1) // 2, d) and lifted_feature_count(d) == d + d * d * (d + 1) // 2


def test_split_recovers_one_head_exactly() -> None:
    """m = 1: the lifted parameter of one head splits back into Θ (the scale fixed by Σ W = W) exactly."""
    rng = np.random.default_rng(5)
    d, k = 4, 6
    thetas, ws = rng.standard_normal((2, 1, d, d))
    X = sample_inputs(800, k, d, rng=6, distribution="gaussian")
    fit = fit_lifted(X, _linear_attention(X, thetas, ws))
    splits = split_lifted(fit, 1, LinearSettings(), rng=np.random.default_rng(0))
    assert [r for _, _, r in splits] == sorted(r for _, _, r in splits)
    th, w, rel = splits[0]
    assert rel < 1e-6
    np.testing.assert_allclose(th, thetas, atol=1e-5)
    np.testing.assert_allclose(w, ws, atol=1e-5)


def test_the_route_applies_where_the_body_route_is_refused_and_the_fit_is_affordable() -> None:
    """(8,32,2) and (16,8,8): refused body route, affordable fit; (8,4,2): the body route runs; (32,8,4): the
    fit's 16,928 features exceed max_features; disabled: never."""
    s = Settings()
    assert linear_route_applies(8, 32, 2, s.resolve(8, 32, 2, 0))
    assert linear_route_applies(16, 8, 8, s.resolve(16, 8, 8, 0))
    assert not linear_route_applies(8, 4, 2, s.resolve(8, 4, 2, 0))
    assert not linear_route_applies(32, 8, 4, s.resolve(32, 8, 4, 0))
    off = s.merged(linear={"enabled": False})
    assert not linear_route_applies(8, 32, 2, off.resolve(8, 32, 2, 0))


def test_structured_normal_equations_match_the_features(monkeypatch: pytest.MonkeyPatch) -> None:
    """The normal equations accumulated from per-example Kronecker blocks of symmetric factors equal FᵀF and FᵀY
    of the explicit features."""
    import sculpt.phases.linear_start as ls

    rng = np.random.default_rng(7)
    X = sample_inputs(30, 5, 4, rng=8, distribution="gaussian")
    Y = rng.standard_normal(X.shape)
    monkeypatch.setattr(ls, "CHUNK", 7)  # several blocks, the last one short
    G, B = ls._normal_equations(X, Y)
    F = ls.lifted_features(X)
    np.testing.assert_allclose(G, F.T @ F, atol=1e-9)
    np.testing.assert_allclose(B, F.T @ Y.reshape(-1, 4), atol=1e-9)
