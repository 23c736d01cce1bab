"""Phases 5–6 and the polish on planted instances: the net on the flat, least squares for W, validation
selection, and the variable-projection Levenberg–Marquardt polish."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import gaussian_like

from oracles.affine_subspace import AffineSubspace
from sculpt import plant, sample_inputs
from sculpt.phases.heads import candidate_heads, flat_grid
from sculpt.phases.polish import polish
from sculpt.phases.projections import attention, fit_projections, head_errors, predict, solve_projections
from sculpt.phases.span import SpanEstimate
from sculpt.settings import Settings

LEARN = Settings()  # learn's settings: phase 5's and the polish's ("auto" fields are resolved per call)


def _data(d: int, k: int, m: int, n: int, seed: int, distribution: str = "boolean"):
    model = plant(d, k, m, seed=seed)
    X = sample_inputs(n, k, d, rng=seed + 1, distribution=distribution)
    return model, X, model(X)


def _span_through(model, tilt: float = 0.0, seed: int = 0) -> SpanEstimate:
    """The flat through the true heads (optionally tilted by a random perturbation of its directions)."""
    T = model.thetas.reshape(model.m, -1)
    rng = np.random.default_rng(seed)
    dirs = (T[1:] - T[0]).T
    dirs = dirs + tilt * np.linalg.norm(dirs, axis=0) * rng.standard_normal(dirs.shape) / np.sqrt(T.shape[1])
    flat = AffineSubspace(T[0], dirs)
    return SpanEstimate(flat=flat, span=np.linalg.qr(np.column_stack([flat.point, flat.basis]))[0],
                        m_estimate=model.m, singular_values=np.zeros(0), gap=0.0,
                        radius=2.0 * max(float(np.linalg.norm(flat.point)), 1.0))


@settings(max_examples=20, deadline=None)
@given(dim=st.integers(1, 3), radius=st.floats(0.1, 10.0), per_axis=st.integers(2, 9))
def test_flat_grid_in_ball(dim: int, radius: float, per_axis: int) -> None:
    pts = flat_grid(dim, radius, per_axis)
    assert pts.shape[1] == dim and pts.shape[0] >= 1
    assert np.all(np.linalg.norm(pts, axis=1) <= radius * (1 + 1e-9))
    if dim == 1:
        assert pts.shape[0] == per_axis


def test_attention_rows_are_distributions() -> None:
    model, X, _ = _data(6, 3, 2, 50, 0)
    P = attention(model.thetas, X)
    assert P.shape == (2, 50, 3, 3)
    assert np.allclose(P.sum(-1), 1.0) and np.all(P > 0)
    assert np.allclose(np.moveaxis(P, 0, 1), model.attention(X))
    assert np.allclose(predict(model.thetas, model.ws, X), model(X))


@pytest.mark.parametrize("distribution", ["boolean", "gaussian"])
def test_projections_exact_given_true_heads(distribution: str) -> None:
    model, X, Y = _data(8, 4, 2, 300, 1, distribution)
    ws, err = solve_projections(model.thetas, X, Y)
    assert err < 1e-20
    assert np.max(np.abs(ws - model.ws)) < 1e-8


def test_fit_projections_selects_true_heads_on_validation() -> None:
    model, X, Y = _data(8, 4, 2, 1200, 2)
    rng = np.random.default_rng(0)
    wrong = [model.thetas + 0.3 * rng.standard_normal(model.thetas.shape) for _ in range(3)]
    cands = wrong[:2] + [model.thetas[::-1]] + wrong[2:]
    fit, rec = fit_projections(cands, X[:1000], Y[:1000], X[1000:], Y[1000:], truth=model)
    assert fit.index == 2 and rec.figures["chosen"] == 2
    assert fit.validation_error < 1e-20 and rec.truth["theta_error"] < 1e-12
    assert rec.truth["permutation"] == [1, 0]
    with pytest.raises(ValueError, match="at least one"):
        fit_projections([], X, Y, X, Y)


def test_head_errors_are_permutation_invariant() -> None:
    model = plant(6, 3, 3, seed=5)
    perm = [2, 0, 1]
    e = head_errors(model.thetas[perm], model.ws[perm], model)
    assert e["theta_error"] == 0.0 and e["w_error"] == 0.0
    assert sorted(e["permutation"]) == [0, 1, 2]
    assert np.allclose(model.thetas[perm][e["permutation"]], model.thetas)


@pytest.mark.parametrize("m", [1, 2, 3])
def test_candidate_heads_on_exact_flat(m: int) -> None:
    """On the flat through the true heads learn's settings find them (up to permutation): m = 1 is the flat's
    point, m = 3 refines the grid's best subset by LM. m = 2 skips that refine (the polish does its work), so its
    best candidate is a grid winner near the heads, and one LM refine reaches them."""
    model, X, Y = _data(8, 4, m, 600, 3)
    span = _span_through(model)
    cands, rec = candidate_heads(span, X, Y, m, LEARN.heads, rng=0, truth=model)
    assert cands.thetas.shape[1:] == (m, 8, 8)
    assert np.all(np.diff(cands.objective) >= 0)
    if m == 2:
        assert rec.figures["refined"] == 0 and rec.truth["best_theta_error"] < 0.1
        cands, rec = candidate_heads(span, X, Y, m, LEARN.heads.merged(n_refine=1), rng=0, truth=model)
    assert rec.truth["best_theta_error"] < (1e-6 if m < 3 else 1e-3)
    assert cands.objective[0] < 1e-8
    if m > 1:
        assert rec.figures["tuples"] >= 1 and rec.figures["refined"] >= 1


def test_candidate_heads_on_tilted_flat_lands_near() -> None:
    """A flat 5 % off still gives heads within ~10 % (what the polish then fixes)."""
    model, X, Y = _data(8, 4, 2, 600, 4)
    cands, rec = candidate_heads(_span_through(model, tilt=0.05), X, Y, 2, LEARN.heads, rng=0, truth=model)
    assert rec.truth["best_theta_error"] < 0.15
    with pytest.raises(ValueError, match="dimension"):
        candidate_heads(_span_through(model), X, Y, 3, LEARN.heads)


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 1000), m=st.integers(1, 3), rel=st.floats(0.01, 0.3), data=st.data())
def test_polish_converges_from_perturbed_heads(seed: int, m: int, rel: float, data) -> None:
    """``seed`` picks the planted layer and its 1500 examples (plant's generator is part of what is tested);
    the perturbation is drawn structured, rescaled to relative size ``rel`` (a zero draw leaves the heads)."""
    model, X, Y = _data(8, 4, m, 1500, seed)
    D = data.draw(gaussian_like(model.thetas.shape), label="direction")
    D *= np.sqrt(D.size) / max(float(np.linalg.norm(D)), 1e-300)   # as many unit-variance entries would be
    start = model.thetas + rel * np.linalg.norm(model.thetas) / np.sqrt(model.thetas.size) * D
    res, rec = polish(start, X[:1000], Y[:1000], X[1000:], Y[1000:], LEARN.polish, tol=LEARN.tol, rng=seed, truth=model)
    assert res.converged and res.validation_error <= 1e-12
    assert rec.truth["theta_error"] < 1e-6 and rec.truth["w_error"] < 1e-6
    assert rec.figures["stages"][0]["examples"] <= 1000


def test_polish_reports_non_convergence_honestly() -> None:
    """Labels from a different layer family (noise): not converged, finite errors, a message."""
    model, X, Y = _data(8, 4, 2, 600, 7)
    Yn = Y + 0.1 * np.random.default_rng(0).standard_normal(Y.shape)
    settings = LEARN.polish.merged(max_examples=500)
    res, rec = polish(model.thetas, X[:500], Yn[:500], X[500:], Yn[500:], settings, tol=LEARN.tol, rng=0)
    assert not res.converged and np.isfinite(res.validation_error) and res.validation_error > 1e-6
    assert "tol" in rec.message


def test_candidate_heads_without_refine_are_the_grid_winners() -> None:
    """n_refine = 0: no LM evaluation; the best candidate is the net's best subset with its own objective.
    n_refine = 1 evaluates the objective and its LM-refined subset beats the grid's on a tilted flat."""
    model, X, Y = _data(6, 3, 2, 300, seed=3)
    span = _span_through(model, tilt=0.05)
    raw, rec0 = candidate_heads(span, X, Y, 2, LEARN.heads.merged(n_refine=0), rng=0)
    lm, rec1 = candidate_heads(span, X, Y, 2, LEARN.heads.merged(n_refine=1), rng=0)
    assert rec0.figures["lm_evaluations"] == 0 and rec0.figures["refined"] == 0
    assert "refine_skipped" in rec0.figures and "refine_skipped" not in rec1.figures
    assert raw.objective[0] == rec0.figures["best_grid_objective"]
    assert rec1.figures["lm_evaluations"] > 0 and lm.objective.size == 2  # the refined subset and the raw one
    assert lm.objective.min() < rec1.figures["best_grid_objective"] == raw.objective[0]


@pytest.mark.parametrize("m", [2, 3])
def test_flat_vp_jacobian_is_kaufmans(m: int) -> None:
    """The refine's analytic Jacobian is the residual's derivative where the fit is exact (Kaufman's Jacobian
    drops only a term proportional to the residual) and the negated projection of ∂(Z Ŵ)/∂c off range Z."""
    from sculpt.phases.heads import _FlatVP

    model, X, Y = _data(6, 3, m, 120, 7)
    T = model.thetas.reshape(m, -1)
    p = T.mean(0)
    U = np.linalg.qr((T[1:] - T[0]).T)[0]
    c = ((T - p) @ U).ravel()
    vp = _FlatVP(p, U, m, X, Y.reshape(-1, 6))
    assert np.sum(vp.residual(c) ** 2) < 1e-20 * np.sum(Y**2)
    h = 1e-6
    fd = np.stack([(vp.residual(c + h * e) - vp.residual(c - h * e)) / (2 * h) for e in np.eye(c.size)], 1)
    J = vp.jacobian(c)
    assert J.shape == fd.shape
    assert np.linalg.norm(J - fd) <= 1e-6 * np.linalg.norm(fd)
    # away from the solution: still orthogonal to range Z in every output column, and not the plain derivative
    c1 = c + 0.3 * np.random.default_rng(0).standard_normal(c.size)
    J1 = vp.jacobian(c1)
    th1 = (p + c1.reshape(m, -1) @ U.T).reshape(m, 6, 6)
    Z = np.moveaxis(attention(th1, X) @ X, 0, 2).reshape(-1, m * 6)
    cols = J1.reshape(Z.shape[0], 6, -1)
    assert np.abs(np.einsum("rz,rcl->zcl", Z, cols)).max() <= 1e-9 * np.abs(cols).max() * Z.shape[0]
    fd1 = np.stack([(vp.residual(c1 + h * e) - vp.residual(c1 - h * e)) / (2 * h) for e in np.eye(c.size)], 1)
    assert np.linalg.norm(J1 - fd1) > 1e-4 * np.linalg.norm(fd1)
