"""Min-norm point (KKT), Chebyshev centre (ball inside, optimal), widths (0 along hull normals)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import flat_polytopes, gaussian_like, grid_arrays, polytopes, unit_vectors

from oracles import (
    Ball,
    EmptyBodyError,
    MissingOracleError,
    OracleBody,
    Polytope,
    UnboundedError,
    affine_hull,
    chebyshev_center,
    min_norm_point,
    solvers,
    width,
    widths,
)
from oracles.affine_subspace import AffineSubspace


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 10), k=st.integers(0, 3), shift=st.floats(0.0, 5.0), data=st.data())
def test_min_norm_point_is_optimal(n, k, shift, data):
    """x* in K and min_{y in K} x*·y >= ‖x*‖² (first-order optimality of ½‖x‖², checked by one LP)."""
    case = data.draw(flat_polytopes(n, min(k, n - 1), 4 * n + 2), label="case")
    P = case.poly
    P = Polytope(P.A, P.b + P.A @ np.full(n, shift))  # move the body around (often off the origin)
    x = min_norm_point(P)
    assert P.contains(x, tol=1e-7)
    lowest = solvers.solve_lp(x, P.A, P.b).value
    assert lowest >= x @ x - 1e-6 * max(1.0, x @ x)


def test_min_norm_point_kkt_by_duals(flat_case):
    case = flat_case(2, 8, 2, 40)
    P = case.poly
    x = min_norm_point(P)
    sol = solvers.solve_qp(np.eye(8), np.zeros(8), P.A, P.b)
    assert np.allclose(x, sol.x, atol=1e-7)
    lam = sol.dual_ub
    assert np.linalg.norm(x) > 0.1
    assert np.max(np.abs(x + P.A.T @ lam)) <= 1e-6 and lam.min() >= 0
    assert abs(lam @ (P.b - P.A @ x)) <= 1e-6


def test_min_norm_point_closed_forms_and_conic():
    assert np.allclose(min_norm_point(Ball(np.array([3.0, 4.0]), 1.0)), [2.4, 3.2])
    assert np.allclose(min_norm_point(Ball(np.array([0.3, 0.4]), 1.0)), 0.0)
    flat = AffineSubspace(np.array([1.0, 1.0]), np.array([[1.0], [0.0]]))
    assert np.allclose(min_norm_point(flat), [0.0, 1.0])
    cube = Polytope(np.vstack([np.eye(2), -np.eye(2)]), np.array([3.0, 3.0, -1.0, -1.0]))  # [1, 3]^2
    body = cube & Ball(np.array([2.0, 2.0]), 1.2)
    x = min_norm_point(body)
    assert np.allclose(x, np.full(2, 2.0 - 1.2 / np.sqrt(2)), atol=1e-6)
    with pytest.raises(MissingOracleError):
        min_norm_point(OracleBody(2, separate=lambda x: None))


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 8), m=st.integers(2, 30), data=st.data())
def test_chebyshev_ball_lies_inside_and_is_largest(n, m, data):
    A = np.vstack([data.draw(gaussian_like((m, n)), label="A"), np.eye(n), -np.eye(n)])
    b = data.draw(grid_arrays(A.shape[0], 0.2, 2.0), label="b")
    P = Polytope(A, b)
    c, r = chebyshev_center(P)
    norms = np.linalg.norm(A, axis=1)
    assert r > 0
    assert np.all(A @ c + r * norms <= b + 1e-7)  # the ball B(c, r) lies inside
    # no bigger ball fits: the LP with the radius fixed at r(1 + 1e-4) is infeasible
    bigger = np.hstack([A, norms[:, None]])
    with pytest.raises(EmptyBodyError):
        solvers.solve_lp(np.zeros(n + 1), bigger, b, bounds=[(None, None)] * n + [(r * (1 + 1e-4) + 1e-9, None)])


def test_chebyshev_of_flat_body_returns_relative_centre(flat_case):
    case = flat_case(3, 5, 2, 30)
    P = case.poly
    c, r = chebyshev_center(P)
    assert r == 0.0
    hull = affine_hull(P)
    assert hull.distance(c) <= 1e-8 and P.contains(c, tol=1e-8)
    _, rr = chebyshev_center(P, relative=True)
    assert rr > 0
    # the relative ball (within the flat) lies inside: every row's slack exceeds rr times its in-flat norm
    in_flat = np.linalg.norm(P.A @ hull.basis, axis=1)
    assert np.all(P.b - P.A @ c >= rr * in_flat - 1e-7)


def test_chebyshev_closed_forms_and_errors():
    cube = Polytope(np.vstack([np.eye(3), -np.eye(3)]), np.ones(6))
    c, r = chebyshev_center(cube)
    assert np.allclose(c, 0, atol=1e-7) and abs(r - 1.0) <= 1e-8
    c, r = chebyshev_center(cube & Ball(np.zeros(3), 0.5))
    assert abs(r - 0.5) <= 1e-6
    with pytest.raises(UnboundedError):
        chebyshev_center(Polytope(-np.eye(2), np.zeros(2)))
    with pytest.raises(EmptyBodyError):
        chebyshev_center(Polytope(np.array([[1.0], [-1.0]]), np.array([0.0, -1.0])))
    with pytest.raises(ValueError, match="tol"):
        chebyshev_center(cube, tol=float("nan"))
    with pytest.raises(ValueError, match="solver"):
        chebyshev_center(cube, solver="CPLEX?")
    with pytest.raises(ValueError, match="solver"):
        min_norm_point(cube, solver="CPLEX?")
    with pytest.raises(TypeError, match="body"):
        min_norm_point(np.ones((2, 2)))


@settings(max_examples=15, deadline=None)
@given(n=st.integers(2, 8), k=st.integers(1, 3), data=st.data())
def test_width_zero_along_normals_positive_elsewhere(n, k, data):
    case = data.draw(flat_polytopes(n, min(k, n - 1), 4 * n, box=5.0), label="case")
    P = case.poly
    hull = affine_hull(P)
    normals, _ = hull.equations
    for u in normals:
        assert width(P, u) <= 1e-7
    # directions off the normals: a unit part along the true flat (where K holds a ball of radius >= 0.5
    # around x0: every other row has slack >= 0.5‖a_i‖ there) plus any normal part
    along = np.linalg.svd(case.E)[2][case.rank:].T if case.E.shape[0] else np.eye(n)
    U = np.array([along @ data.draw(unit_vectors(along.shape[1]), label="along")
                  + data.draw(gaussian_like(n), label="normal part") @ (np.eye(n) - along @ along.T)
                  for _ in range(3)])
    w = widths(P, U)
    assert np.all(w > 1e-3)
    for u, wu in zip(U, w):
        lo = solvers.solve_lp(u, P.A, P.b).value
        hi = -solvers.solve_lp(-u, P.A, P.b).value
        assert abs(wu - (hi - lo)) <= 1e-6 * max(1.0, hi - lo)
        assert abs(width(P, u) - wu) <= 1e-6 * max(1.0, wu)


def test_width_closed_forms_and_errors():
    cube = Polytope(np.vstack([np.eye(3), -np.eye(3)]), np.ones(6))
    assert abs(width(cube, np.array([1.0, 0, 0])) - 2.0) <= 1e-9
    assert abs(width(Ball(np.zeros(3), 2.0), np.array([0.0, 3.0, 4.0])) - 20.0) <= 1e-9
    flat = AffineSubspace(np.ones(2), np.array([[1.0], [0.0]]))
    assert width(flat, np.array([0.0, 1.0])) == 0.0
    with pytest.raises(UnboundedError):
        width(flat, np.array([1.0, 1.0]))
    with pytest.raises(ValueError, match="u"):
        width(cube, np.ones(2))
    with pytest.raises(ValueError, match="u"):
        width(cube, np.array([np.nan, 0, 0]))
    with pytest.raises(MissingOracleError):
        width(OracleBody(3, separate=lambda x: None), np.ones(3))


@pytest.mark.parametrize("seed, k", [(0, 0), (1, 2), (2, 4)])
def test_min_norm_fast_path_needs_no_qp_backend(flat_case, monkeypatch, seed, k):
    """solver=None: the dense IPM guess, polished and KKT-checked, answers without a QP backend."""
    case = flat_case(seed, 12, k, 60, box=4.0)
    P = Polytope(case.poly.A, case.poly.b - case.poly.A @ np.full(12, 2.0))  # the origin is outside
    ref = min_norm_point(P, solver="CLARABEL")

    def no_qp(*args, **kwargs):
        raise AssertionError("the QP backend should not be needed")

    monkeypatch.setattr(solvers, "solve_qp", no_qp)
    x = min_norm_point(P)
    assert np.allclose(x, ref, atol=1e-6) and P.contains(x, tol=1e-9)
    assert np.linalg.norm(x) <= np.linalg.norm(ref) + 1e-9


def test_min_norm_of_empty_body_without_solver():
    with pytest.raises(EmptyBodyError):
        min_norm_point(Polytope(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([0.0, -1.0])))


@settings(max_examples=15, deadline=None)
@given(case=polytopes(n=(1, 6), slack=(0.3, 1.5)), data=st.data())
def test_separation_only_body_gets_min_norm_point_and_width(case, data):
    """Through the separation oracle alone (cutting planes from a ball around the body), the answers agree
    with the explicit polytope's: ‖x̂‖ within tol of the minimum, ‖x̂ − x*‖² <= 2‖x̂‖·tol, widths within tol."""
    P, x0 = case.poly, case.x0
    n = P.dim
    R = float(np.linalg.norm(x0)) + 2.0 * np.sqrt(n) + 1.0       # the box |x - x0|_inf <= 2 lies in B(0, R)
    body = OracleBody(n, separate=P.separate)
    tol = 1e-8
    x_star, x_hat = min_norm_point(P), min_norm_point(body, radius=R, tol=tol)
    assert P.contains(x_hat, tol=1e-7)
    assert np.linalg.norm(x_hat) - np.linalg.norm(x_star) <= tol + 1e-9
    assert np.linalg.norm(x_hat - x_star) <= np.sqrt(2 * np.linalg.norm(x_hat) * tol) + 1e-7
    u = data.draw(gaussian_like(n), label="u")
    assert abs(width(body, u, radius=R, tol=tol) - width(P, u)) <= 2 * tol + 1e-7


def test_separation_only_errors():
    sep_only = OracleBody(2, separate=Ball(np.zeros(2), 1.0).separate)
    with pytest.raises(MissingOracleError, match="radius="):
        min_norm_point(sep_only)
    with pytest.raises(MissingOracleError, match="radius="):
        width(sep_only, np.ones(2))
    with pytest.raises(MissingOracleError, match="separation oracle"):
        min_norm_point(OracleBody(2, contains=lambda x: True), radius=1.0)
    with pytest.raises(ValueError, match="radius"):
        min_norm_point(sep_only, radius=-1.0)
    with pytest.raises(MissingOracleError, match="explicit body or a separation oracle"):
        min_norm_point(OracleBody(2, maximize=lambda c: (float(np.abs(c).sum()), np.sign(c))), radius=2.0)
    assert width(sep_only, np.zeros(2), radius=2.0) == 0.0
    np.testing.assert_allclose(widths(sep_only, np.eye(2), radius=2.0), [2.0, 2.0], atol=1e-7)
    far = OracleBody(2, separate=Ball(np.full(2, 10.0), 1.0).separate)
    with pytest.raises(EmptyBodyError):
        min_norm_point(far, radius=2.0)                             # no point of the body in B(0, 2)
    x = min_norm_point(OracleBody(2, separate=Ball(np.array([3.0, 4.0]), 1.0).separate), radius=10.0)
    assert np.linalg.norm(x - [2.4, 3.2]) <= 1e-3                  # the Ball's closed form


def test_separation_only_flat_body():
    """A flat body (x1 + x2 = 1 as two inequalities): cuts read within the oracle tolerance let the ellipsoid
    method enter it; its width is ~0 along the normal and exact along the flat."""
    A = np.vstack([[1.0, 1.0, 0.0], [-1.0, -1.0, 0.0], np.eye(3), -np.eye(3)])
    b = np.concatenate([[1.0, -1.0], np.full(6, 2.0)])
    P = Polytope(A, b)
    x = min_norm_point(OracleBody(3, separate=P.separate), radius=5.0, tol=1e-8)
    assert np.linalg.norm(x - [0.5, 0.5, 0.0]) <= 1e-3 and P.contains(x, tol=1e-7)
    body = OracleBody(3, separate=P.separate)
    assert width(body, np.array([1.0, 1.0, 0.0]), radius=5.0) <= 1e-8
    assert abs(width(body, np.array([0.0, 0.0, 1.0]), radius=5.0) - 4.0) <= 1e-7


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 8), k=st.integers(0, 2))
def test_min_norm_point_methods_agree_on_a_polytope(flat_case, seed, n, k):
    """"ipm", "qp", "working_set", "conic" and "ellipsoid" find the same point of one (possibly flat)
    polytope, and "auto" is "ipm" here (no solver given).

    "working_set" and "conic" return the backend's QP answer unpolished: their objective is accurate to ~1e-9,
    so the point only to about its square root (hypothesis found 1.6e-5 and 2-3e-5 at n = 6): atol 1e-4 for
    them, the KKT-polished "qp" to 1e-6."""
    case = flat_case(seed, n, min(k, n - 1), 4 * n + 2, box=4.0)
    P = Polytope(case.poly.A, case.poly.b - case.poly.A @ np.full(n, 1.0))   # the origin is outside
    ref = min_norm_point(P, method="ipm")
    assert np.array_equal(min_norm_point(P), ref)
    for method, atol in (("qp", 1e-6), ("working_set", 1e-4), ("conic", 1e-4)):
        np.testing.assert_allclose(min_norm_point(P, method=method), ref, atol=atol, err_msg=method)
    R = float(np.linalg.norm(ref)) + 20.0
    x = min_norm_point(P, method="ellipsoid", radius=R, tol=1e-8)
    assert np.linalg.norm(x) <= np.linalg.norm(ref) + 1e-7


def test_min_norm_point_method_and_options_are_checked():
    ball = Ball(np.array([3.0, 4.0]), 1.0)
    assert np.allclose(min_norm_point(ball, method="closed_form"), [2.4, 3.2])
    assert np.allclose(min_norm_point(ball, method="conic"), [2.4, 3.2], atol=1e-6)
    cube = Polytope(np.vstack([np.eye(2), -np.eye(2)]), np.array([3.0, 3.0, -1.0, -1.0]))  # [1, 3]^2
    with pytest.raises(ValueError, match="method must be one of"):
        min_norm_point(cube, method="newton")
    with pytest.raises(ValueError, match="does not apply"):
        min_norm_point(ball, method="ipm")
    with pytest.raises(ValueError, match="does not apply"):
        min_norm_point(cube, method="closed_form")
    with pytest.raises(ValueError, match="does not apply"):
        min_norm_point(OracleBody(2, separate=ball.separate), method="qp")
    with pytest.raises(TypeError, match="takes no options"):
        min_norm_point(cube, method="ipm", options={"start": 3})
    with pytest.raises(TypeError, match="feasibility_tol"):
        min_norm_point(cube, method="working_set", options={"feasability_tol": 1e-6})
    assert np.allclose(min_norm_point(cube, method="working_set", options={"start": 1, "add": 1}), [1.0, 1.0])
    with pytest.raises(ValueError, match="start"):
        min_norm_point(cube, method="working_set", options={"start": 0})


def test_separation_only_width_whose_gap_comes_within_tol_inside_the_rounding_allowance():
    """The example hypothesis found (n = 6, 18 unit rows and the box |x - x0|_inf <= 2): the ellipsoid's
    minimisation of -u·x first had best - lower <= tol = 1e-8 when the gap plus the rounding allowance
    (1.8e-13·‖u‖) was not, and it stopped 'max_iter' after 1337 iterations (an OracleError from width)
    instead of cutting once more; it now ends 'optimal' after 1338."""
    I = np.array([[-369, -170, 253, 40, -152, -222], [-295, 51, 203, -250, -485, 448], [141, -139, -282, 450, -500, 3],
                  [413, -413, -426, -174, -500, 407], [230, -178, 234, 329, 266, 155],
                  [-259, 441, -272, -136, 400, -338], [97, 93, -280, -223, 393, -11], [-244, 205, 358, -248, -146, 170],
                  [-391, 212, -256, -175, 143, 42], [250, 91, -57, 112, 60, 65], [16, 24, 39, -220, -267, 152],
                  [90, -188, -130, -352, 349, 231], [100, -151, 215, 355, 203, -124], [404, 380, -499, 281, -62, 128],
                  [-27, 104, 320, 196, -169, 90], [93, -499, -178, 465, -499, -148], [-431, -7, 275, -190, -4, 192],
                  [206, 104, 16, 236, -201, -500]], dtype=float)
    slack = np.array([436, 314, 389, 100, 719, 564, 404, 264, 138, 57, 222, 19, 26, 832, 159, 580, 204, 248])
    x0 = np.array([0.744, -1.824, -0.716, -0.832, -0.068, 1.248])
    A = I / np.linalg.norm(I, axis=1, keepdims=True)
    b = A @ x0 + 0.3 + 1.2 * slack / 1000
    P = Polytope(np.vstack([A, np.eye(6), -np.eye(6)]), np.concatenate([b, x0 + 2.0, 2.0 - x0]))
    u = np.array([2.994, 1.692, 2.982, -1.044, 0.516, 0.318])
    R = float(np.linalg.norm(x0)) + 2.0 * np.sqrt(6) + 1.0
    body = OracleBody(6, separate=P.separate)
    assert abs(width(body, u, radius=R, tol=1e-8) - width(P, u)) <= 2e-8 + 1e-7


def test_qp_polish_takes_a_row_the_backend_left_2e_5_away(flat_case):
    """The example hypothesis found for test_min_norm_point_methods_agree_on_a_polytope (make_flat seed 3182,
    n = 4, one hidden equality): Clarabel's answer left a row active at x* with slack 2.0e-5 > 1e-5·‖x‖, so
    the polish's active set missed it, failed its KKT test and "qp" returned the raw answer 1.5e-5 off; the
    polish now also tries the rows within 1e-4 and 1e-3 (the KKT test rejects a wrong guess)."""
    case = flat_case(3182, 4, 1, 18, box=4.0)
    P = Polytope(case.poly.A, case.poly.b - case.poly.A @ np.full(4, 1.0))
    ref = min_norm_point(P, method="ipm")
    assert solvers.solve_lp(ref, P.A, P.b).value >= ref @ ref - 1e-9  # first-order optimality
    assert np.allclose(min_norm_point(P, method="qp"), ref, atol=1e-9)


def test_separation_only_width_restarts_when_the_ellipsoid_loses_resolution(monkeypatch):
    """A width whose ellipsoid run lost float64 resolution (semi-axes 6e8 and 1e-13) before certifying its
    answer is started again from a ball around its best point, and agrees with the LP width. The case is one
    hypothesis found: the box [-2, 0.3]^4 with its upper rows thrice, and this u (its floats as drawn)."""
    import oracles._separation_only as so

    n = 4
    A = np.vstack([np.eye(n)] * 4 + [-np.eye(n)])
    P = Polytope(A, np.concatenate([np.full(3 * n, 0.3), np.full(2 * n, 2.0)]))
    u = np.array([0.0, 0.246, 0.3959999999999999, 1.2779999999999996])
    runs = []
    real = so.ellipsoid
    monkeypatch.setattr(so, "ellipsoid", lambda *a, **k: runs.append(1) or real(*a, **k))
    R = 2.0 * np.sqrt(n) + 1.0
    w = width(OracleBody(n, separate=P.separate), u, radius=R, tol=1e-8)
    assert len(runs) > 2  # two ends, and at least one restart
    assert abs(w - width(P, u)) <= 2e-8 + 1e-7
