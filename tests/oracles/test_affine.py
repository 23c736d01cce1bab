"""Affine hull (lp / directions / ellipsoid), implicit equalities and linear span."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import flat_polytopes, grid_arrays, orthonormal, well_conditioned

from oracles import (
    Ball,
    EmptyBodyError,
    MissingOracleError,
    OracleBody,
    Polytope,
    affine_hull,
    implicit_equalities,
    linear_span,
)
from oracles.affine_subspace import AffineSubspace


def projector(B: np.ndarray) -> np.ndarray:
    return B @ B.T


def check_hull(hull: AffineSubspace, case) -> None:
    """dim = n - rank(E); the true equations hold on the flat to 1e-8; x0 lies in it."""
    n = case.poly.dim
    assert hull.dim == n - case.rank
    if case.E.shape[0]:
        En = case.E / np.linalg.norm(case.E, axis=1, keepdims=True)
        assert np.max(np.abs(En @ hull.basis)) <= 1e-8
        assert np.max(np.abs(En @ (hull.point - case.x0))) <= 1e-8
    assert hull.distance(case.x0) <= 1e-8 * max(1.0, np.linalg.norm(case.x0))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 12), kfrac=st.floats(0, 0.9), style=st.sampled_from(["pairs", "triples"]), data=st.data())
def test_lp_hull_of_random_flat_polytopes(n, kfrac, style, data):
    k = int(kfrac * n) if style == "pairs" else int(kfrac * n) // 2
    case = data.draw(flat_polytopes(n, k, 6 * n, style=style), label="case")
    hull = affine_hull(case.poly, method="lp")
    check_hull(hull, case)
    res = implicit_equalities(case.poly)
    assert np.array_equal(np.sort(res.rows), case.eq_rows)
    assert case.poly.contains(res.interior_point, tol=1e-8)
    assert res.min_slack > 1e-3  # a genuine relative-interior point


@settings(max_examples=15, deadline=None)
@given(n=st.integers(2, 10), k=st.integers(0, 4), data=st.data())
def test_hull_invariant_under_row_permutation_and_scaling(n, k, data):
    case = data.draw(flat_polytopes(n, min(k, n - 1), 5 * n), label="case")
    P = case.poly
    perm = np.array(data.draw(st.permutations(range(P.A.shape[0])), label="perm"))
    scale = 10.0 ** data.draw(grid_arrays(P.A.shape[0], -3.0, 3.0, zero=0.0), label="log10 scale")
    Q = Polytope(P.A[perm] * scale[:, None], P.b[perm] * scale)
    h1, h2 = affine_hull(P), affine_hull(Q)
    assert h1.dim == h2.dim
    assert np.allclose(projector(h1.basis), projector(h2.basis), atol=1e-8)
    assert np.allclose(h1.point, h2.point, atol=1e-8)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 7), k=st.integers(0, 3), data=st.data())
def test_methods_agree_lp_vs_directions(seed, n, k, data):
    """``seed`` is the directions method's own random state; the body is drawn structured."""
    case = data.draw(flat_polytopes(n, min(k, n - 1), 4 * n, box=5.0), label="case")
    h_lp = affine_hull(case.poly, method="lp")
    h_dir = affine_hull(case.poly, method="directions", seed=seed)
    check_hull(h_dir, case)
    assert np.allclose(projector(h_lp.basis), projector(h_dir.basis), atol=1e-8)
    assert np.allclose(h_lp.point, h_dir.point, atol=1e-8)
    # the same recipe through a bare maximize oracle (what "auto" picks for such a body)
    body = OracleBody(n, maximize=lambda c: case.poly.maximize(c))
    h_or = affine_hull(body, seed=seed)
    assert h_or.dim == h_lp.dim and np.allclose(h_or.point, h_lp.point, atol=1e-8)


@pytest.mark.parametrize("seed, n, k", [(1, 3, 1), (2, 4, 2), (3, 5, 0)])
def test_three_methods_agree(flat_case, seed, n, k):
    case = flat_case(seed, n, k, 4 * n, box=5.0)
    h_lp = affine_hull(case.poly, method="lp")
    h_dir = affine_hull(case.poly, method="directions")
    radius = float(np.linalg.norm(case.x0)) + 5.0 * np.sqrt(n) + 1.0
    sep = OracleBody(n, separate=case.poly.separate)  # separation only: "auto" must pick the ellipsoid
    h_ell = affine_hull(sep, center=case.x0 * 0, radius=radius, tol=1e-6)
    assert h_lp.dim == h_dir.dim == h_ell.dim
    assert np.allclose(projector(h_lp.basis), projector(h_dir.basis), atol=1e-8)
    assert np.allclose(projector(h_lp.basis), projector(h_ell.basis), atol=1e-4)
    assert np.allclose(h_lp.point, h_ell.point, atol=1e-4 * max(1.0, np.linalg.norm(h_lp.point)))


def test_fast_path_and_frt_agree_and_certify(flat_case):
    case = flat_case(5, 30, 4, 200, style="triples")
    fast = implicit_equalities(case.poly)
    frt = implicit_equalities(case.poly, fast=False)
    assert fast.method == "dense-ipm+certificate" and frt.method == "frt"
    assert np.array_equal(np.sort(fast.rows), case.eq_rows)
    assert np.array_equal(np.sort(frt.rows), case.eq_rows)
    # the certificate: z >= 1 on the rows with Σ z_i a_i/‖a_i‖ = 0 (no equality rows given)
    A = case.poly.A[fast.rows]
    An = A / np.linalg.norm(A, axis=1, keepdims=True)
    assert np.all(fast.certificate >= 1 - 1e-9)
    assert np.linalg.norm(An.T @ fast.certificate) <= 1e-7 * np.linalg.norm(fast.certificate)


@pytest.mark.parametrize("fast", [True, False])
def test_thin_but_not_flat_respects_tol(fast):
    """A slab of width 1e-5: flat at tol=1e-4, full-dimensional at tol=1e-7 (fallback path when fast)."""
    n = 4
    rng = np.random.default_rng(0)
    A = np.vstack([np.eye(n), -np.eye(n), rng.standard_normal((10, n))])
    b = np.concatenate([np.ones(2 * n), np.full(10, 50.0)])  # the cube [-1, 1]^n, loose extra rows
    b[n] = -1.0 + 1e-5  # -x_0 <= -1 + 1e-5: 1 - 1e-5 <= x_0 <= 1
    P = Polytope(A, b)
    assert affine_hull(P, tol=1e-7).dim == n
    thin = implicit_equalities(P, tol=1e-7, fast=fast)
    assert thin.rows.size == 0 and thin.method == ("HIGHS+frt" if fast else "frt")
    assert P.contains(thin.interior_point) and thin.min_slack > 0
    res = implicit_equalities(P, tol=1e-4, fast=fast)
    assert sorted(res.rows) == [0, n]
    assert affine_hull(P, tol=1e-4).dim == n - 1


def test_explicit_equalities_and_intersections(flat_case):
    case = flat_case(9, 6, 1, 30)
    P = case.poly
    E2 = np.random.default_rng(1).standard_normal((1, 6))
    Q = Polytope(P.A, P.b, E2, E2 @ case.x0)
    assert affine_hull(Q).dim == 6 - 2
    both = Polytope(P.A[:15], P.b[:15]) & Polytope(P.A[15:], P.b[15:])
    assert affine_hull(both).dim == affine_hull(P).dim


def test_balls_points_and_flats():
    assert affine_hull(Ball(np.ones(3), 2.0)).dim == 3
    h = affine_hull(Ball(np.ones(3), 0.0))
    assert h.dim == 0 and np.allclose(h.point, np.ones(3))
    flat = AffineSubspace(np.ones(3), np.eye(3)[:, :1])
    assert affine_hull(flat) is flat


def test_errors():
    empty = Polytope(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([0.0, -1.0]))
    for method in ("lp", "directions"):
        with pytest.raises(EmptyBodyError):
            affine_hull(empty, method=method)
    with pytest.raises(ValueError, match="method"):
        affine_hull(empty, method="magic")
    with pytest.raises(ValueError, match="tol"):
        affine_hull(empty, tol=-1.0)
    with pytest.raises(ValueError, match="solver"):
        affine_hull(empty, solver="NOPE")
    with pytest.raises(TypeError, match="body"):
        affine_hull(np.eye(2))
    sep_only = OracleBody(2, separate=lambda x: None)
    with pytest.raises(ValueError, match="radius"):
        affine_hull(sep_only)  # the ellipsoid needs a ball known to contain the body
    with pytest.raises(ValueError, match="radius"):
        affine_hull(sep_only, radius=-1.0)
    with pytest.raises(ValueError, match="center"):
        affine_hull(sep_only, radius=1.0, center=np.zeros(3))
    member_only = OracleBody(2, contains=lambda x: bool(np.linalg.norm(x) <= 1))
    with pytest.raises(MissingOracleError):
        affine_hull(member_only)
    with pytest.raises(MissingOracleError):
        affine_hull(OracleBody(2, separate=lambda x: None), method="lp")


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 10), r=st.integers(0, 10), k=st.integers(1, 30), data=st.data())
def test_linear_span_of_points(n, r, k, data):
    r = min(r, n)
    basis = data.draw(orthonormal(n, r), label="basis")
    # k points spanning min(r, k) dimensions of span(basis) (coefficients of full rank, condition <= 10)
    X = data.draw(well_conditioned(k, r), label="coefficients") @ basis.T if r else np.zeros((k, n))
    B = linear_span(X)
    assert B.shape == (n, min(r, k))
    assert np.allclose(B.T @ B, np.eye(B.shape[1]), atol=1e-10)
    assert np.allclose(X - X @ B @ B.T, 0, atol=1e-9)  # every point lies in the span


def test_linear_span_of_bodies(flat_case):
    case = flat_case(4, 6, 2, 30)
    hull = affine_hull(case.poly)
    B = linear_span(case.poly)
    assert B.shape[1] == hull.dim + 1  # the flat misses the origin
    assert np.allclose(B.T @ B, np.eye(B.shape[1]), atol=1e-10)
    assert np.allclose(projector(B) @ hull.point, hull.point, atol=1e-9)
    through_origin = AffineSubspace(np.zeros(6), hull.basis)
    assert linear_span(through_origin).shape[1] == hull.dim
    with pytest.raises(ValueError, match="body_or_points"):
        linear_span(np.ones(3))
    with pytest.raises(ValueError, match="NaN"):
        linear_span(np.array([[np.nan, 1.0]]))


def test_backend_interior_path_when_the_dense_ipm_fails(flat_case, monkeypatch):
    """If the dense IPM's point cannot be certified, the backend's interior solve takes over."""
    import oracles.affine as affine_mod
    from oracles._dense_ipm import CentralPoint

    case = flat_case(8, 10, 2, 60, style="triples")
    n = case.poly.dim
    bad = CentralPoint(np.full(n, 1e3), np.zeros(0), np.zeros(0), np.zeros(0), 0, "stalled", np.inf)
    monkeypatch.setattr(affine_mod, "central_point", lambda *a, **k: bad)
    res = implicit_equalities(case.poly)
    assert res.method == "HIGHS+certificate"
    assert np.array_equal(np.sort(res.rows), case.eq_rows)
    assert case.poly.contains(res.interior_point, tol=1e-8) and res.min_slack > 1e-3


def test_full_dimensional_needs_no_lp():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, 5))
    P = Polytope(A, np.ones(40))
    res = implicit_equalities(P)
    assert res.rows.size == 0 and res.n_solves == 0 and res.method == "dense-ipm"
    assert res.min_slack > 1e-3 and P.contains(res.interior_point)
    assert affine_hull(P).dim == 5


def test_scs_when_the_dense_ipm_fails(flat_case, monkeypatch):
    """SCS has no central solve: a failed dense IPM sends it straight to the full FRT LP."""
    import oracles.affine as affine_mod
    from oracles._dense_ipm import CentralPoint

    case = flat_case(2, 5, 1, 25, box=3.0)
    nan = np.full(5, np.nan)
    monkeypatch.setattr(affine_mod, "central_point",
                        lambda *a, **k: CentralPoint(nan, nan, nan, nan, 0, "stalled", np.inf))
    res = implicit_equalities(case.poly, solver="SCS")
    assert res.method == "frt" and np.array_equal(np.sort(res.rows), case.eq_rows)


@pytest.mark.parametrize("thin", [3e-7, 5e-6])
def test_directions_lists_a_thin_direction_near_the_line_as_a_near_tie(thin: float) -> None:
    """A box [0, 1]^2 x [0, thin], rotated: at tol 1e-7 the thin side is wide (dimension 3); it is listed as a
    near tie when its width is within 10x the threshold (3e-7), not when it is far above (5e-6)."""
    Q = np.linalg.qr(np.random.default_rng(0).standard_normal((3, 3)))[0]
    A = np.vstack([np.eye(3), -np.eye(3)]) @ Q.T
    b = np.array([1.0, 1.0, thin, 0.0, 0.0, 0.0])
    hull = affine_hull(Polytope(A, b), method="directions", tol=1e-7, seed=1)
    ties = hull.info["near_ties"]
    assert hull.dim == 3 and isinstance(ties, list)
    assert len(ties) == (1 if thin < 1e-6 else 0)
    for width, threshold in ties:
        assert threshold < width <= 10 * threshold
