"""oracles.flats: the homogeneous SVD fit of a flat to affine equations and the gap rule for its dimension."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import gaussian_like, orthonormal, unit_vectors, well_conditioned

from oracles.flats import FULL_EIGH_UP_TO, _right_singular, _smallest_shift_invert, fit_flat, singular_gap_dimension


def principal_angle_deg(A: np.ndarray, B: np.ndarray) -> float:
    s = np.linalg.svd(np.linalg.qr(A)[0].T @ np.linalg.qr(B)[0], compute_uv=False)
    return float(np.degrees(np.arccos(np.clip(s.min(), 0.0, 1.0))))


def sin_angle(A: np.ndarray, B: np.ndarray) -> float:
    """Sine of the largest principal angle, ‖(I − Q_A Q_Aᵀ) Q_B‖ (accurate where arccos near 1 is not)."""
    Qa, Qb = np.linalg.qr(A)[0], np.linalg.qr(B)[0]
    return float(np.linalg.norm(Qb - Qa @ (Qa.T @ Qb), 2))


@settings(max_examples=15, deadline=None)
@given(n=st.integers(5, 30), r=st.integers(0, 3), data=st.data())
def test_fit_flat_recovers_exact_flat(n: int, r: int, data) -> None:
    """Noise-free equations of an r-flat: the fit returns that flat, its span, and the gap finds r."""
    r = min(r, n - 2)
    basis = data.draw(orthonormal(n, r), label="basis")
    normal = np.linalg.svd(np.column_stack([basis, np.zeros(n)]), full_matrices=True)[0][:, r:]
    # a flat that misses the origin (its linear span then has dimension r + 1): p's part normal to the flat
    # is a unit vector, its part along the flat is drawn
    p = normal @ data.draw(unit_vectors(n - r), label="p normal") + basis @ data.draw(gaussian_like(r), label="p along")
    # rows orthogonal to the flat's directions, spanning all of them (full column rank n - r)
    A = data.draw(well_conditioned(3 * n, n - r), label="A") @ normal.T
    b = A @ p
    fit = fit_flat(A, b)
    assert fit.dim == r == fit.dim_estimate
    pts = p + data.draw(gaussian_like((4, r)), label="pts") @ basis.T if r else p[None]
    assert np.all(fit.flat.distance(pts) <= 1e-8 * (1 + np.linalg.norm(pts, axis=1)))
    assert fit.span.shape == (n, r + 1)
    assert principal_angle_deg(fit.span, np.column_stack([p, basis])) < 1e-5
    assert fit.residual < 1e-8 * (1 + np.linalg.norm(b))


@pytest.mark.parametrize("r", [1, 2])
def test_fit_flat_of_homogeneous_equations(r: int) -> None:
    """b = 0 (a flat through the origin): the lifted null space holds an exactly zero singular value next to
    a round-off one; the gap rule must still find r (it found 0 when the ratio 4e-16/0 counted)."""
    n = 7
    rng = np.random.default_rng(r)
    basis = np.linalg.qr(rng.standard_normal((n, r)))[0]
    normal = np.linalg.svd(basis, full_matrices=True)[0][:, r:]
    A = rng.standard_normal((3 * n, n - r)) @ normal.T
    fit = fit_flat(A, np.zeros(3 * n))
    assert fit.dim == r == fit.dim_estimate
    assert np.all(fit.flat.distance(rng.standard_normal((4, r)) @ basis.T) <= 1e-10)


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
@given(noise=st.floats(1e-6, 1e-3), data=st.data())
def test_fit_flat_noisy_equations_weighted(noise: float, data) -> None:
    """Noisy b: the flat moves by O(noise); zero-weight rows (arbitrary junk) are ignored."""
    n, r = 12, 1
    p, u = data.draw(gaussian_like(n), label="p"), data.draw(orthonormal(n, r), label="u")
    P = np.eye(n) - u @ u.T
    # 60 rows spanning the complement of u (condition number <= 10 there), so the fit is well posed
    A = data.draw(well_conditioned(60, n), label="A") @ P
    b = A @ p + noise * data.draw(gaussian_like(60), label="noise")
    junk = data.draw(gaussian_like((5, n)), label="junk")
    fit = fit_flat(np.vstack([A, junk]), np.concatenate([b, data.draw(gaussian_like(5), label="junk b")]), dim=r,
                   weights=np.concatenate([np.ones(60), np.zeros(5)]))
    assert fit.flat.distance(p) < 100 * noise * (1 + np.linalg.norm(p))
    assert principal_angle_deg(fit.flat.basis, u) < 1e3 * noise * 57.3


def test_min_ratio_is_the_documented_gap_threshold() -> None:
    """Ratios 3 | 1.6 | 1.05: at min_ratio 1.5 (the default) the 1.6 jump is the null space's edge (q = 2),
    at 2 only the 3 is (q = 1); fit_flat passes min_ratio through and rejects a ratio below 1."""
    s = np.array([0.1, 0.3, 0.48, 0.504])
    assert singular_gap_dimension(s)[0] == 2
    assert singular_gap_dimension(s, min_ratio=2.0)[0] == 1
    assert singular_gap_dimension(s, min_ratio=5.0)[0] == 1      # none reaches 5: the largest ratio's q
    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, 5))
    with pytest.raises(ValueError, match="min_ratio"):
        fit_flat(A, rng.standard_normal(40), min_ratio=0.5)
    fit = fit_flat(A, rng.standard_normal(40), min_ratio=1e6)    # no gap that large: the largest ratio's
    assert 0 <= fit.dim_estimate <= 4


@settings(max_examples=25, deadline=None)
@given(noise=st.sampled_from([0.0, 1e-12, 1e-3, 3e-2]), r=st.integers(0, 2), data=st.data())
def test_fit_flat_auto_method_matches_the_svd(noise: float, r: int, data) -> None:
    """"auto" takes the eigh-of-MᵀM route only where its squared round-off cannot matter: its flat matches the
    SVD's to 1e-8 whichever route it took, and on an exact system (noise 0) it holds the true flat to 1e-9."""
    n = 15
    p = data.draw(gaussian_like(n), label="p")
    u = data.draw(orthonormal(n, r), label="u")
    P = np.eye(n) - u @ u.T
    A = data.draw(well_conditioned(90, n), label="A") @ P
    b = A @ p + noise * data.draw(gaussian_like(90), label="noise")
    svd = fit_flat(A, b, dim=r, method="svd")
    auto = fit_flat(A, b, dim=r)
    assert svd.info["method"] == "svd" and auto.info["method"] in ("svd", "gram")
    scale = 1 + np.linalg.norm(svd.flat.point)
    assert np.linalg.norm(auto.flat.point - svd.flat.point) <= 1e-8 * scale
    if r:
        assert sin_angle(auto.flat.basis, svd.flat.basis) < 1e-8
    # the gram route resolves singular values only down to ~1e-8·σ_max (documented)
    np.testing.assert_allclose(auto.singular_values, svd.singular_values, rtol=1e-6, atol=1e-7 * svd.singular_values[-1])
    if noise == 0.0:  # an exact system: whichever route "auto" took, the flat holds p to round-off
        assert svd.flat.distance(p) <= 1e-9 * (1 + np.linalg.norm(p))
        assert auto.flat.distance(p) <= 1e-9 * (1 + np.linalg.norm(p))
        if r:
            assert sin_angle(auto.flat.basis, u) < 1e-8


def test_fit_flat_gram_route_on_a_noisy_tall_system() -> None:
    """A noisy 2,000 × 40 system: "auto" takes the gram route, within 1e-9 of the SVD; a bad method is refused."""
    rng = np.random.default_rng(3)
    n, r = 40, 1
    u = np.linalg.qr(rng.standard_normal((n, r)))[0]
    A = rng.standard_normal((2000, n)) @ (np.eye(n) - u @ u.T)
    p = rng.standard_normal(n) / np.sqrt(n)
    b = A @ p + 0.05 * rng.standard_normal(2000)
    auto, svd = fit_flat(A, b, dim=r), fit_flat(A, b, dim=r, method="svd")
    assert auto.info["method"] == "gram" and fit_flat(A, b, dim=r, method="gram").info["method"] == "gram"
    assert np.linalg.norm(auto.flat.point - svd.flat.point) <= 1e-9
    assert sin_angle(auto.flat.basis, svd.flat.basis) < 1e-9
    with pytest.raises(ValueError, match="method"):
        fit_flat(A, b, method="qr")


def _assert_few_eigenpairs_match_full(A: np.ndarray, b: np.ndarray, r: int) -> None:
    """``smallest=6``: 7 values (6 smallest, σ_max), the same values, point and directions as the full gram fit."""
    full = fit_flat(A, b, dim=r, max_dim=3, method="gram")
    few = fit_flat(A, b, dim=r, max_dim=3, method="gram", smallest=6)
    assert few.singular_values.shape == (7,) and few.dim == full.dim == r
    top = full.singular_values[-1]
    np.testing.assert_allclose(few.singular_values[:6], full.singular_values[:6], rtol=1e-6, atol=1e-7 * top)
    assert few.singular_values[-1] == pytest.approx(top, rel=1e-8)
    assert np.linalg.norm(few.flat.point - full.flat.point) <= 1e-8 * (1 + np.linalg.norm(full.flat.point))
    if r:
        assert sin_angle(few.flat.basis, full.flat.basis) < 1e-8


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("r", [0, 2])
def test_fit_flat_smallest_past_the_full_eigh_size_uses_a_subset_with_the_same_flat(seed: int, r: int) -> None:
    """Past ``FULL_EIGH_UP_TO`` unknowns ``smallest`` takes a subset eigh and σ_max by Lanczos: the same values,
    flat and shapes as the full decomposition (below it both paths are the full eigh, tested above)."""
    n = FULL_EIGH_UP_TO + 20
    rng = np.random.default_rng(seed)
    u = np.linalg.qr(rng.standard_normal((n, max(r, 1))))[0][:, :r]
    A = rng.standard_normal((4 * n, n)) @ (np.eye(n) - u @ u.T)
    p = rng.standard_normal(n)
    b = A @ p + 1e-3 * rng.standard_normal(4 * n)
    _assert_few_eigenpairs_match_full(A, b, r)


@settings(max_examples=20, deadline=None)
@given(noise=st.sampled_from([1e-3, 3e-2]), r=st.integers(0, 2), data=st.data())
def test_fit_flat_smallest_computes_the_same_flat_from_a_few_eigenpairs(noise: float, r: int, data) -> None:
    """``smallest`` (with ``max_dim``): only that many smallest singular values and σ_max are computed; the flat
    and those values match the full decomposition (the dimension estimate too, for a point)."""
    n = 16
    p = data.draw(gaussian_like(n), label="p")
    u = data.draw(orthonormal(n, r), label="u")
    A = data.draw(well_conditioned(80, n), label="A") @ (np.eye(n) - u @ u.T)
    b = A @ p + noise * data.draw(gaussian_like(80), label="noise")
    _assert_few_eigenpairs_match_full(A, b, r)
    if not r:
        assert fit_flat(A, b, max_dim=3, smallest=6).dim_estimate == fit_flat(A, b, max_dim=3).dim_estimate
    with pytest.raises(ValueError, match="smallest"):
        fit_flat(A, b, max_dim=3, smallest=5)
    with pytest.raises(ValueError, match="smallest"):
        fit_flat(A, b, smallest=6)


@pytest.mark.parametrize("seed", range(5))
def test_fit_flat_gram_route_with_a_narrow_noise_gap(seed: int) -> None:
    """σ_{r+2}² − σ_{r+1}² of ~1e-5·σ_max² (phase 4's fits at d = 32) is taken by the gram route, and its flat
    still matches the SVD's to 1e-8: the squared round-off there is ~eps/1e-5 ≈ 2e-11."""
    rng = np.random.default_rng(seed)
    n, rows, r = 40, 400, 1
    U = np.linalg.qr(rng.standard_normal((rows, n + 1)))[0]
    V = np.linalg.qr(rng.standard_normal((n + 1, n + 1)))[0]
    s = np.geomspace(1.0, 1e-2, n + 1)
    s[-(r + 1) :] = [2.0e-3, 1.0e-3]  # the r+1 smallest: the flat's null space, next one at 5e-3
    s[-(r + 2)] = 5.0e-3
    M = (U * s) @ V.T
    A, b = M[:, :n], -M[:, n]
    svd = fit_flat(A, b, dim=r, method="svd")
    auto = fit_flat(A, b, dim=r)
    assert auto.info["method"] == "gram"
    scale = 1 + np.linalg.norm(svd.flat.point)
    assert np.linalg.norm(auto.flat.point - svd.flat.point) <= 1e-8 * scale
    assert sin_angle(auto.flat.basis, svd.flat.basis) < 1e-8


def _gapped_rows(rng: np.random.Generator, n: int, small: tuple[float, ...]) -> np.ndarray:
    """A (3n, n) matrix whose smallest singular values are ``small``, the rest spread over [330, 1000]."""
    U = np.linalg.qr(rng.standard_normal((3 * n, n)))[0]
    V = np.linalg.qr(rng.standard_normal((n, n)))[0]
    s = np.concatenate([small, np.sort(rng.uniform(330.0, 1000.0, n - len(small)))])
    return (U * s) @ V.T


@pytest.mark.parametrize("seed", [0, 1])
def test_shift_invert_eigenpairs_agree_with_eigh_on_a_gapped_gram_matrix(seed: int) -> None:
    """From ``iterative_from`` columns on, the few smallest pairs come from shift-invert Lanczos: the same
    eigenvalues (1e-8 relative) and the same gapped subspace (1e-8) as the subset eigh, σ_max alike."""
    rng = np.random.default_rng(seed)
    n, k = 300, 7
    M = _gapped_rows(rng, n, (15.0, 78.0))
    G = M.T @ M
    assert _smallest_shift_invert(G, k, float(np.linalg.eigvalsh(G)[-1])) is not None  # the fast path is taken
    s_fast, V_fast = _right_singular(M, "gram", k, iterative_from=100)
    s_ref, V_ref = _right_singular(M, "gram", k)
    assert s_fast.shape == s_ref.shape and V_fast.shape == V_ref.shape
    np.testing.assert_allclose(s_fast**2, s_ref**2, rtol=1e-8)
    P_fast, P_ref = V_fast[:, :2] @ V_fast[:, :2].T, V_ref[:, :2] @ V_ref[:, :2].T
    assert np.linalg.norm(P_fast - P_ref, 2) < 1e-8
    A, b = M[:, :-1], -M[:, -1]
    fast = fit_flat(A, b, dim=1, max_dim=4, smallest=k, iterative_from=100)
    ref = fit_flat(A, b, dim=1, max_dim=4, smallest=k)
    np.testing.assert_allclose(fast.span @ fast.span.T, ref.span @ ref.span.T, atol=1e-8)
    with pytest.raises(ValueError, match="iterative_from"):
        fit_flat(A, b, max_dim=4, smallest=k, iterative_from=0)


def test_shift_invert_falls_back_to_eigh_when_the_gram_matrix_is_singular() -> None:
    """A rank-deficient Gram matrix (fewer rows than columns) has no Cholesky factor or fails the residual
    check: the pairs are then exactly the subset eigh's."""
    rng = np.random.default_rng(3)
    M = rng.standard_normal((150, 200))
    G = M.T @ M
    assert _smallest_shift_invert(G, 6, float(np.linalg.eigvalsh(G)[-1])) is None
    s_fast, V_fast = _right_singular(M, "gram", 6, iterative_from=100)
    s_ref, V_ref = _right_singular(M, "gram", 6)
    assert np.array_equal(s_fast, s_ref) and np.array_equal(V_fast, V_ref)


def test_streamed_gram_and_a_warm_start_give_the_same_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """MᵀM accumulated over row chunks (never forming the weighted [A, −b] whole) equals the one-product Gram
    matrix to round-off, and a refit started from an earlier fit's ``vectors`` finds the same flat; a start of
    the wrong shape is refused, naming the argument."""
    import oracles.flats as flats

    rng = np.random.default_rng(11)
    n, k = 300, 7
    M = _gapped_rows(rng, n, (15.0, 78.0))
    A, b = M[:, :-1], -M[:, -1]
    w = rng.uniform(0.5, 2.0, A.shape[0])
    lifted = flats._Lifted(A, b, w, 1.0)
    whole = lifted.gram()
    monkeypatch.setattr(flats, "GRAM_CHUNK_ENTRIES", 37 * n)  # chunks of 37 rows of the n columns, a ragged last one
    streamed = lifted.gram()
    np.testing.assert_allclose(streamed, whole, rtol=1e-12, atol=1e-12 * float(np.abs(whole).max()))
    assert np.array_equal(streamed, streamed.T)
    cold = fit_flat(A, b, dim=1, weights=w, max_dim=4, smallest=k, iterative_from=100)
    assert cold.vectors is not None and cold.vectors.shape == (n, k)
    warm = fit_flat(A, b, dim=1, weights=w, max_dim=4, smallest=k, iterative_from=100, start=cold.vectors)
    np.testing.assert_allclose(warm.span @ warm.span.T, cold.span @ cold.span.T, atol=1e-8)
    np.testing.assert_allclose(warm.singular_values, cold.singular_values, rtol=1e-8)
    with pytest.raises(ValueError, match="start"):
        fit_flat(A, b, dim=1, max_dim=4, smallest=k, iterative_from=100, start=np.ones(n - 1))
