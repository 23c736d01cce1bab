"""oracles.flats: the homogeneous SVD fit of a flat to affine equations and the gap rule for its dimension."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from oracles.flats import fit_flat, singular_gap_dimension


def principal_angle_deg(A: np.ndarray, B: np.ndarray) -> float:
    s = np.linalg.svd(np.linalg.qr(A)[0].T @ np.linalg.qr(B)[0], compute_uv=False)
    return float(np.degrees(np.arccos(np.clip(s.min(), 0.0, 1.0))))


@settings(max_examples=15, deadline=None)
@given(n=st.integers(5, 30), r=st.integers(0, 3), seed=st.integers(0, 10_000))
def test_fit_flat_recovers_exact_flat(n: int, r: int, seed: int) -> None:
    """Noise-free equations of an r-flat: the fit returns that flat, its span, and the gap finds r."""
    rng = np.random.default_rng(seed)
    r = min(r, n - 2)
    basis = np.linalg.qr(rng.standard_normal((n, r)))[0] if r else np.zeros((n, 0))
    p = rng.standard_normal(n)
    normal = np.linalg.svd(np.column_stack([basis, np.zeros(n)]), full_matrices=True)[0][:, r:]
    A = rng.standard_normal((3 * n, n - r)) @ normal.T  # rows orthogonal to the flat's directions
    b = A @ p
    fit = fit_flat(A, b)
    assert fit.dim == r == fit.dim_estimate
    pts = p + rng.standard_normal((4, r)) @ basis.T if r else p[None]
    assert np.all(fit.flat.distance(pts) <= 1e-8 * (1 + np.linalg.norm(pts, axis=1)))
    assert fit.span.shape == (n, r + 1)
    assert principal_angle_deg(fit.span, np.column_stack([p, basis])) < 1e-5
    assert fit.residual < 1e-8 * (1 + np.linalg.norm(b))


def test_fit_flat_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="NaN|finite"):
        fit_flat(np.array([[1.0, np.nan]]), np.array([1.0]))
    with pytest.raises(ValueError, match="dim"):
        fit_flat(np.eye(3), np.ones(3), dim=3)
    with pytest.raises(ValueError, match="homogeneous component"):
        fit_flat(np.array([[1.0, 0, 0], [1.0, 0, 0]]), np.array([0.0, 1.0]), dim=0)  # x2, x3 free


def test_singular_gap_dimension() -> None:
    q, ratios = singular_gap_dimension(np.array([1e-9, 2e-9, 0.5, 0.6, 0.7]))
    assert q == 2 and ratios.shape == (4,)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), noise=st.floats(1e-6, 1e-3))
def test_fit_flat_noisy_equations_weighted(seed: int, noise: float) -> None:
    """Noisy b: the flat moves by O(noise); zero-weight rows (arbitrary junk) are ignored."""
    rng = np.random.default_rng(seed)
    n, r = 12, 1
    p, u = rng.standard_normal(n), np.linalg.qr(rng.standard_normal((n, r)))[0]
    P = np.eye(n) - u @ u.T
    A = rng.standard_normal((60, n)) @ P
    b = A @ p + noise * rng.standard_normal(60)
    junk = rng.standard_normal((5, n))
    fit = fit_flat(np.vstack([A, junk]), np.concatenate([b, rng.standard_normal(5)]), dim=r,
                   weights=np.concatenate([np.ones(60), np.zeros(5)]))
    assert fit.flat.distance(p) < 100 * noise * (1 + np.linalg.norm(p))
    assert principal_angle_deg(fit.flat.basis, u) < 1e3 * noise * 57.3
