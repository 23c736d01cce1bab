"""Sparse polytopes and bounds as bounds (issue 14): the same answers as the dense rows they stand for, checked
against per-variable LPs (scipy's linprog, an independent route) and numpy ranks."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog
from strategies import flat_polytopes

from oracles import (
    AffineSubspace,
    EmptyBodyError,
    OracleBody,
    Polytope,
    SolverError,
    affine_hull,
    chebyshev_center,
    implicit_equalities,
    linear_span,
    min_norm_point,
    solvers,
    widths,
)
from oracles._sparse import sparse_null_space


def projector(B: np.ndarray) -> np.ndarray:
    return B @ B.T


@st.composite
def networks(draw, n=(4, 18)):
    """A flux-like polytope {S v = 0, lb <= v <= ub}: a sparse integer S (a few entries per column, some
    columns with one entry: exchange reactions), bounds [0, u] (irreversible) or [-u, u], some lb = ub."""
    n_ = draw(st.integers(*n))
    m_ = draw(st.integers(1, max(1, n_ - 2)))
    S = np.zeros((m_, n_))
    for j in range(n_):
        k = draw(st.integers(1, min(3, m_)))
        rows = draw(st.lists(st.integers(0, m_ - 1), min_size=k, max_size=k, unique=True))
        S[rows, j] = draw(st.lists(st.sampled_from([-2.0, -1.0, 1.0, 2.0]), min_size=k, max_size=k))
    u = np.array(draw(st.lists(st.sampled_from([1.0, 10.0, 1000.0]), min_size=n_, max_size=n_)))
    rev = np.array(draw(st.lists(st.booleans(), min_size=n_, max_size=n_)))
    lb = np.where(rev, -u, 0.0)
    ub = u.copy()
    pin = np.array(draw(st.lists(st.sampled_from([False] * 6 + [True]), min_size=n_, max_size=n_)))
    lb[pin] = ub[pin] = 0.0
    return S, lb, ub


def fva(S, lb, ub):
    """(min, max) of every flux by scipy's linprog (HiGHS through scipy, not through the engine)."""
    n = S.shape[1]
    lo, hi = np.zeros(n), np.zeros(n)
    for j in range(n):
        c = np.zeros(n)
        c[j] = 1.0
        lo[j] = linprog(c, A_eq=S, b_eq=np.zeros(S.shape[0]), bounds=list(zip(lb, ub)), method="highs").fun
        hi[j] = -linprog(-c, A_eq=S, b_eq=np.zeros(S.shape[0]), bounds=list(zip(lb, ub)), method="highs").fun
    return lo, hi


def independent_dim(S, fixed) -> int:
    """aff{S v = 0, lb <= v <= ub} = {S v = 0, v_j = const (j fixed)}: its dimension by numpy's rank."""
    E = np.vstack([S, np.eye(S.shape[1])[fixed]])
    return S.shape[1] - int(np.linalg.matrix_rank(E)) if E.shape[0] else S.shape[1]


@settings(max_examples=25, deadline=None)
@given(net=networks())
def test_flux_like_polytopes_match_fva_and_rank(net):
    S, lb, ub = net
    P = Polytope(A_eq=sp.csr_matrix(S), b_eq=np.zeros(S.shape[0]), lb=lb, ub=ub)
    assert P.is_sparse and P.n_bounds == 2 * S.shape[1]
    lo, hi = fva(S, lb, ub)
    fixed = np.flatnonzero(hi - lo <= 1e-7)
    hull = affine_hull(P)
    assert hull.dim == independent_dim(S, fixed)
    assert np.array_equal(hull.fixed_coordinates(), fixed)
    assert P.contains(hull.interior_point, tol=1e-8)
    res = implicit_equalities(P)
    # a bound is an implicit equality exactly when FVA pins the flux at it
    assert set(res.lower) == {j for j in range(S.shape[1]) if lb[j] < ub[j] and hi[j] - lb[j] <= 1e-7}
    assert set(res.upper) == {j for j in range(S.shape[1]) if lb[j] < ub[j] and ub[j] - lo[j] <= 1e-7}
    assert res.max_width <= res.tol and res.min_slack > res.tol
    assert np.allclose(widths(P, sp.identity(S.shape[1])), hi - lo, atol=1e-6)
    # the dense form with the bounds as 2n rows describes the same flat
    n = S.shape[1]
    D = Polytope(np.vstack([np.eye(n), -np.eye(n)]), np.concatenate([ub, -lb]), S, np.zeros(S.shape[0]))
    hd = affine_hull(D)
    assert hd.dim == hull.dim and np.allclose(projector(hd.basis), projector(hull.basis), atol=1e-7)
    assert np.allclose(hd.point, hull.point, atol=1e-6 * max(1.0, np.abs(ub).max()))


def test_flux_network_that_highs_presolve_called_empty():
    """Found by hypothesis: HiGHS's presolve reported this feasible FRT LP infeasible (EmptyBodyError from a
    body holding v = 0); the backend confirms an infeasible status without presolve."""
    S = np.array([[-2.0, -2.0, -2.0, -2.0, -2.0]])
    lb = np.array([-1.0, -1000.0, -1.0, -1000.0, 0.0])
    ub = np.array([1.0, 1000.0, 1.0, 1000.0, 0.0])
    P = Polytope(A_eq=sp.csr_matrix(S), b_eq=np.zeros(1), lb=lb, ub=ub)
    lo, hi = fva(S, lb, ub)
    hull = affine_hull(P)
    assert hull.dim == independent_dim(S, np.flatnonzero(hi - lo <= 1e-7)) == 3
    assert np.array_equal(hull.fixed_coordinates(), [4]) and P.contains(hull.interior_point, tol=1e-8)
    # an empty body is still empty
    E = Polytope(A_eq=sp.csr_matrix(S), b_eq=np.ones(1), lb=np.zeros(5), ub=np.ones(5))
    with pytest.raises(EmptyBodyError):
        affine_hull(E)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(2, 10), k=st.integers(0, 4), style=st.sampled_from(["pairs", "triples"]), data=st.data())
def test_sparse_storage_gives_the_dense_answer(n, k, style, data):
    k = min(k, n - 1) if style == "pairs" else min(k, (n - 1) // 2)
    case = data.draw(flat_polytopes(n, k, 5 * n, style=style, box=3.0), label="case")
    P = case.poly
    Q = Polytope(sp.csr_matrix(P.A), P.b)
    for fast in ("auto", "off", "backend-ipm"):
        res = implicit_equalities(Q, fast=fast)
        assert np.array_equal(res.rows, case.eq_rows), fast
        assert Q.contains(res.interior_point, tol=1e-8) and res.min_slack > 1e-3
        assert np.all(res.row_widths <= res.tol), (fast, res.row_widths)
    h1, h2 = affine_hull(P), affine_hull(Q)
    assert h1.dim == h2.dim == n - case.rank
    assert np.allclose(projector(h1.basis), projector(h2.basis), atol=1e-8)
    assert np.allclose(h1.point, h2.point, atol=1e-7)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(2, 8), k=st.integers(0, 3), data=st.data())
def test_bounds_as_bounds_equal_bounds_as_rows(n, k, data):
    """A box given as lb/ub and the same box as 2n rows: the same hull, Chebyshev radius, min-norm point and
    widths; the implicit bounds are reported as lower/upper instead of rows."""
    case = data.draw(flat_polytopes(n, min(k, n - 1), 3 * n), label="case")
    P = case.poly
    lb, ub = case.x0 - 2.0, case.x0 + 2.5
    rows = Polytope(np.vstack([P.A, np.eye(n), -np.eye(n)]), np.concatenate([P.b, ub, -lb]))
    for sparse in (False, True):
        A = sp.csr_matrix(P.A) if sparse else P.A
        bnd = Polytope(A, P.b, lb=lb, ub=ub)
        h1, h2 = affine_hull(rows), affine_hull(bnd)
        assert h1.dim == h2.dim and np.allclose(projector(h1.basis), projector(h2.basis), atol=1e-8)
        c1, r1 = chebyshev_center(rows, relative=True)
        c2, r2 = chebyshev_center(bnd, relative=True)
        assert abs(r1 - r2) <= 1e-6 * max(1.0, r1) and bnd.contains(c2, tol=1e-8)
        x1, x2 = min_norm_point(rows), min_norm_point(bnd)
        assert np.allclose(x1, x2, atol=1e-5)
        U = np.vstack([np.eye(n), np.ones((1, n))])
        assert np.allclose(widths(rows, U), widths(bnd, U), atol=1e-6)


def test_a_fixed_variable_and_a_tight_bound_are_reported_as_such():
    # x0 + x1 = 1, 0 <= x <= 1 with x2 in [0, 0] (explicit) and x1 <= 0 forced by x1 >= 1 - x0 >= 0 ... :
    # the hidden equality: x3 <= x0 - x0 (written as x3 - x0 + x0 <= 0) with x3 >= 0 pins x3's lower bound
    A = sp.csr_matrix(np.array([[0.0, 0.0, 0.0, 1.0]]))
    P = Polytope(A, np.array([0.0]), sp.csr_matrix([[1.0, 1.0, 0.0, 0.0]]), np.array([1.0]),
                 lb=[0.0, 0.0, 0.0, 0.0], ub=[1.0, 1.0, 0.0, 5.0])
    res = implicit_equalities(P)
    assert list(res.rows) == [0] and list(res.lower) == [3] and list(res.upper) == []
    assert list(res.fixed_variables) == [2, 3] and list(res.fixed_explicit) == [2]
    assert res.row_widths.shape == (1,) and res.lower_widths.shape == (1,) and res.max_width <= 1e-7
    hull = affine_hull(P)
    assert hull.dim == 1 and list(hull.fixed_coordinates()) == [2, 3]
    assert P.contains(hull.interior_point) and hull.interior_point[0] > 0.1 and hull.interior_point[1] > 0.1


def test_thin_slab_evidence_shows_the_near_tie():
    """A slab of width w: an equality at tol > w (its certified width <= tol), not at tol < w (min_slack > tol
    then says how clearly)."""
    for w, tol, flat in ((1e-9, 1e-7, True), (1e-5, 1e-7, False)):
        P = Polytope(sp.csr_matrix(np.array([[1.0, 0.0], [-1.0, 0.0]])), np.array([w, 0.0]), lb=[-1, -1], ub=[1, 1])
        res = implicit_equalities(P, tol=tol)
        if flat:
            assert sorted(res.rows) == [0, 1] and np.all(res.row_widths <= tol)
            assert np.all(res.row_widths >= w * (1 - 1e-6))  # a bound on the extent cannot be below it
        else:
            assert res.rows.size == 0 and res.min_slack > tol


def test_sparse_null_space_matches_dense():
    rng = np.random.default_rng(0)
    E = sp.random(30, 60, density=0.06, random_state=1, data_rvs=lambda k: rng.integers(-2, 3, k).astype(float))
    E = sp.vstack([E, sp.csr_matrix(np.eye(60)[[3, 7]])])  # two row singletons
    B = sparse_null_space(E)
    d = 60 - np.linalg.matrix_rank(E.toarray())
    assert B.shape == (60, d)
    assert np.allclose(B.T @ B, np.eye(d), atol=1e-10) and np.abs(E @ B).max() <= 1e-10
    assert np.all(B[[3, 7]] == 0.0)


def test_directions_and_ellipsoid_work_on_a_flat_sparse_polytope():
    S = sp.csr_matrix(np.array([[1.0, -1.0, 0.0, 0.0, 0.0], [0.0, 1.0, -1.0, -1.0, 0.0]]))
    P = Polytope(A_eq=S, b_eq=np.zeros(2), lb=[0, 0, 0, -3, 0], ub=[4, 4, 4, 3, 0])
    h = affine_hull(P)
    assert h.dim == 2
    for method in ("directions", "ellipsoid"):
        g = affine_hull(P, method=method, tol=1e-6)
        assert g.dim == 2 and np.allclose(projector(g.basis), projector(h.basis), atol=1e-5), method
    assert linear_span(P).shape == (5, 2)  # the flat passes through 0


def test_ellipsoid_refuses_at_once_when_it_cannot_finish():
    n = 80
    P = Polytope(np.vstack([np.eye(n), -np.eye(n)]), np.ones(2 * n))
    body = OracleBody(n, separate=P.separate)
    with pytest.raises(SolverError, match="dimension 80"):
        affine_hull(body, radius=1e3)
    assert affine_hull(OracleBody(3, separate=Polytope(np.vstack([np.eye(3), -np.eye(3)]), np.ones(6)).separate),
                       radius=3.0, max_calls=10**6).dim == 3


def test_bad_input_is_a_clear_value_error():
    with pytest.raises(ValueError, match="lb > ub"):
        Polytope(np.eye(2), np.ones(2), lb=[0, 2], ub=[1, 1])
    with pytest.raises(ValueError, match="lb contains"):
        Polytope(np.eye(2), np.ones(2), lb=[np.inf, 0])
    with pytest.raises(ValueError, match="shape"):
        Polytope(np.eye(2), np.ones(2), lb=[0, 0, 0])
    with pytest.raises(ValueError, match="NaN"):
        Polytope(sp.csr_matrix(np.array([[np.nan, 1.0]])), np.ones(1))
    with pytest.raises(ValueError, match="columns"):
        Polytope(sp.csr_matrix(np.eye(2)), np.ones(2), sp.csr_matrix(np.eye(3)), np.ones(3))
    with pytest.raises(ValueError, match="fast"):
        implicit_equalities(Polytope(np.eye(2), np.ones(2)), fast="quick")
    with pytest.raises(ValueError, match="exact=True is for small inputs"):
        implicit_equalities(Polytope(np.eye(50), np.ones(50)), exact=True)
    with pytest.raises(EmptyBodyError):
        affine_hull(Polytope(sp.csr_matrix(np.array([[1.0, 0.0]])), np.array([-1.0]), lb=[0, 0], ub=[1, 1]))


def test_polytope_oracles_see_the_bounds():
    P = Polytope(sp.csr_matrix(np.array([[1.0, 1.0]])), np.array([3.0]), lb=[0.0, -1.0], ub=[2.0, 2.0])
    assert P.contains(np.array([1.0, 1.0])) and not P.contains(np.array([2.5, 0.0]))
    cut = P.separate(np.array([2.5, 0.0]))
    assert np.allclose(cut.normal, [1.0, 0.0]) and cut.offset == 2.0
    assert P.maximize(np.array([0.0, -1.0]))[0] == 1.0
    assert "bounds=4" in repr(P) and "sparse" in repr(P)
    Q = P & Polytope(np.array([[0.0, -1.0]]), np.array([0.0]), ub=[1.5, 5.0])
    assert Q.maximize(np.array([1.0, 0.0]))[0] == pytest.approx(1.5)
    assert isinstance(affine_hull(Q), AffineSubspace)


def test_exact_check_agrees_on_small_inputs():
    pytest.importorskip("cdd.gmp", reason="pycddlib with gmp (the exact extra) is not installed")
    A = np.array([[1.0, 1.0, 0.0], [-1.0, -1.0, 0.0], [0.0, 0.0, 1.0]])
    P = Polytope(A, np.array([1.0, -1.0, 0.5]), lb=[0, 0, 0.5], ub=[1, 1, 2])
    res = implicit_equalities(P, exact=True)
    assert res.exact is not None and res.exact.agrees
    assert list(res.rows) == [0, 1, 2] and list(res.lower) == [2]
    # a slab of width 2^-40 (exact in binary): flat at tol 1e-7, full-dimensional in rational arithmetic
    Q = Polytope(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([2.0 ** -40, 0.0]), lb=[-1, -1], ub=[1, 1])
    near = implicit_equalities(Q, exact=True)
    assert sorted(near.rows) == [0, 1] and near.exact.rows.size == 0 and not near.exact.agrees
    assert near.max_width <= 1e-7


def test_auto_takes_the_dense_ipm_only_where_an_iteration_is_cheap():
    """The bounded-cost rule: (m + n)·n² <= 3e8 flops per dense IPM iteration, else one FRT LP; the caller can
    force any path and the answer is the same."""
    from oracles.affine import _pick_path

    small = Polytope(np.vstack([np.eye(30), -np.eye(30)]), np.ones(60))
    assert _pick_path(small, "auto") == (False, "dense-ipm")
    assert implicit_equalities(small).method.startswith("dense-ipm")
    big = Polytope(np.zeros((0, 800)), np.zeros(0), lb=-1.0, ub=1.0)  # 1,600 bounds: (1600 + 800)·800² > 3e8
    assert _pick_path(big, "auto") == (True, "backend-ipm")
    assert _pick_path(Polytope(sp.csr_matrix(small.A), small.b), "auto") == (True, "backend-ipm")
    for fast in ("off", "backend-ipm", False, True):
        res = implicit_equalities(small, fast=fast)
        assert res.rows.size == 0 and res.min_slack > 0.5


def test_warm_started_widths_recover_from_a_highs_unknown_status():
    """A network hypothesis found: the kept HiGHS model's warm-started re-solve ended in status 'Unknown'
    (a SolverError from widths); the model now re-runs such an LP from a cold start and matches FVA."""
    S = np.array([[-2., -2., -2., -2., 0., -1., -1., -2., -2., -2., -2., -2., -1., -2., -2.],
                  [0., -2., 0., -1., 0., 2., 2., 0., 0., 0., 0., 0., 1., 0., 0.],
                  [0., 2., 0., -2., -2., -2., 1., 0., 0., 0., 0., 0., -2., 0., 0.]])
    lb = np.array([0., 0., 0., 0., 0., -10., -1000., -1., 0., 0., -1., -1., 0., 0., 0.])
    ub = np.array([1., 1., 1., 1., 1., 10., 1000., 1., 1., 1., 1., 1., 10., 1., 1.])
    P = Polytope(A_eq=sp.csr_matrix(S), b_eq=np.zeros(3), lb=lb, ub=ub)
    lo, hi = fva(S, lb, ub)
    assert np.allclose(widths(P, sp.identity(15)), hi - lo, atol=1e-6)


# two networks hypothesis found (17 fluxes, bounds up to 1000); they differ in S[0, 7] and S[1, 6]
_S17 = np.array([[-2., 0., -2., -2., -2., -2., -2., -2., -2., -2., 0., -2., -2., -2., 0., -2., -2.],
                 [-2., -1., 0., -1., 2., -2., -1., 0., -2., -2., 0., -2., -2., 1., -2., 0., -2.],
                 [0., 0., 0., 0., 0., 0., -2., 0., 1., -1., 0., 0., -2., -2., 1., 0., 0.],
                 [1., 0., 0., 0., 0., 0., 0., -2., 0., 0., 0., -2., 0., 0., 0., 0., 0.],
                 [0., 0., -2., 0., 0., -2., 0., 0., 0., 0., -2., 0., 0., 0., 0., 0., 0.]])
_LB17 = np.array([0., 0., 0., 0., 0., 0., 0., 0., 0., -1., -1., 0., -1000., 0., 0., 0., 0.])
_UB17 = np.array([1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1000., 1000., 1000., 1., 1.])


def _check_network(S, lb, ub):
    P = Polytope(A_eq=sp.csr_matrix(S), b_eq=np.zeros(S.shape[0]), lb=lb, ub=ub)
    lo, hi = fva(S, lb, ub)
    fixed = np.flatnonzero(hi - lo <= 1e-7)
    hull = affine_hull(P)
    assert hull.dim == independent_dim(S, fixed)
    assert np.array_equal(hull.fixed_coordinates(), fixed)
    assert P.contains(hull.interior_point)  # the default tolerance, 1e-9
    res = implicit_equalities(P)
    assert P.contains(res.interior_point) and res.min_slack > res.tol
    assert np.allclose(widths(P, sp.identity(S.shape[1])), hi - lo, atol=1e-6)


def test_an_ipm_point_is_put_on_the_equalities_before_it_is_returned():
    """HiGHS's IPM without crossover stops on a residual relative to the bounds' norm (1000 here): its point
    missed a unit equality row by 1.1e-8, and with no candidate rows it was returned as the interior point
    (outside P.contains(tol=1e-8)); it is now projected onto the equalities first."""
    _check_network(_S17, _LB17, _UB17)


def test_an_ipm_status_unknown_falls_back_to_the_frt_lp():
    """The same IPM solve ended in status 'Unknown' (its point missed an equality by 1.5e-5, outside HiGHS's
    absolute 1e-7 check), a SolverError out of affine_hull; the FRT LP now answers without the IPM point."""
    S = _S17.copy()
    S[0, 7], S[1, 6] = -1.0, -2.0
    _check_network(S, _LB17, _UB17)


def test_an_interior_point_outside_the_polytope_is_a_solver_error(monkeypatch):
    """The last check on implicit_equalities' point: a path that returned a point missing an equality by
    1.4e-6 is a SolverError, not an answer."""
    import oracles.affine as affine

    real = affine._implicit

    def off(*args, **kwargs):
        res = real(*args, **kwargs)
        res.interior_point = res.interior_point + 1e-6
        return res

    monkeypatch.setattr(affine, "_implicit", off)
    P = Polytope(A_eq=sp.csr_matrix(np.array([[1.0, 1.0]])), b_eq=np.array([1.0]), lb=[0.0, 0.0], ub=[1.0, 1.0])
    with pytest.raises(SolverError, match="misses a row or bound"):
        affine_hull(P)


def test_sparse_min_norm_point_is_polished_like_the_dense_one():
    """A box as bounds plus a hidden equality (the pair e·x <= g, -e·x <= -g) that hypothesis found: the
    min-norm point lies on 4 active rows of which two are that pair, so its multipliers are not unique and
    Clarabel's default-tolerance answer for the sparse form stopped 1.8e-5 from it (the dense form's
    KKT-polished answer, HiGHS's QP and SCS agree to 1e-14). The sparse form is now polished the same way."""
    A = np.array([[1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 1, 0], [0, 0, 2.64, 0, 0],
                  [1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0.84, 0, 0], [0, 0, 2.82, 0, 0],
                  [0.18, -1.53, 0.174, 0.72, 2.97], [0, 1, 0, 0, 0], [2.376, 0.024, 2.4, 1.908, 2.244],
                  [0, 0, 0, 1, 0], [0, 0, 0, 0, 1]])
    b = np.array([0.54, -0.164, 2.38, -1.2755, 6.2832, 0.54, -0.164, 2.38, 1.9992, 6.7116, -0.6064, -0.164, 2.0362,
                  -1.2785, -0.234])
    e = np.array([-0.00809125165381896, 0.06311176289978815, -0.15750969886100977, 0.08253076686895376,
                  -0.06580884678439451])
    g = -0.4377712371453305
    lb = np.array([-1.96, -2.664, -0.12, -3.9, -2.872])
    ub = np.array([2.54, 1.836, 4.38, 0.6, 1.628])
    A, b = np.vstack([A, e, -e]), np.concatenate([b, [g, -g]])
    rows = Polytope(np.vstack([A, np.eye(5), -np.eye(5)]), np.concatenate([b, ub, -lb]))
    x = min_norm_point(rows)
    ref = solvers.solve_qp(np.eye(5), np.zeros(5), rows.A, rows.b, solver="HIGHS").x  # active-set QP
    assert np.allclose(x, ref, atol=1e-9)
    for sparse in (False, True):
        bnd = Polytope(sp.csr_matrix(A) if sparse else A, b, lb=lb, ub=ub)
        assert np.allclose(min_norm_point(bnd), x, atol=1e-9), sparse
        assert np.allclose(min_norm_point(bnd, method="qp"), x, atol=1e-9), sparse
