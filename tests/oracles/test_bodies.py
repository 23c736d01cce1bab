"""The existing bodies: contains/separate agree, cuts keep the body and cut the query, bad input, oracles."""
from __future__ import annotations

import numpy as np
import pytest
from _problems import sample_polytope
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import balls, gaussian_like, nonzero_vectors, polytopes

from oracles import Ball, Cut, Intersection, MissingOracleError, OracleBody, OracleError, Polytope


def ball_points(center: np.ndarray, radius: float, rng: np.random.Generator, k: int = 200) -> np.ndarray:
    Z = rng.normal(size=(k, center.shape[0]))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    return center + radius * rng.uniform(0, 1, size=(k, 1)) * Z


def check_oracle(body, queries: np.ndarray, body_points: np.ndarray, tol: float = 1e-9) -> int:
    """For each query: separate is None iff contains; a cut is violated by the query (beyond tol, in units
    of ‖normal‖) and holds at every body point. Returns the number of cuts seen."""
    cuts = 0
    for x in queries:
        cut = body.separate(x, tol)
        assert (cut is None) == body.contains(x, tol)
        if cut is not None:
            cuts += 1
            assert isinstance(cut, Cut)
            nrm = np.linalg.norm(cut.normal)
            assert cut.violation(x) > tol * nrm * (1 - 1e-12)
            assert np.all(body_points @ cut.normal <= cut.offset + 1e-9 * max(1.0, nrm))
    return cuts


def queries_around(data, x0: np.ndarray, count: int, spread: float, outside: float | None = None) -> np.ndarray:
    """``count`` drawn queries x0 + q, |q_j| <= 3·spread, plus (when ``outside`` is given) the query
    x0 + outside·e_0, which a body inside the box |x − x0|_∞ < outside must cut away."""
    Q = x0 + data.draw(gaussian_like((count, x0.shape[0]), scale=spread), label="queries")
    if outside is not None:
        Q = np.vstack([Q, x0 + outside * np.eye(x0.shape[0])[0]])
    return Q


@settings(max_examples=20, deadline=None)
@given(case=polytopes(n=(1, 6)), data=st.data())
def test_polytope_oracle(case, data):
    P, x0 = case.poly, case.x0
    pts = sample_polytope(P, x0, np.random.default_rng(0))
    queries = queries_around(data, x0, 60, 2.0, outside=case.box + 1.0)
    assert check_oracle(P, queries, pts) > 0
    assert all(P.contains(p, 1e-9) for p in pts)


@settings(max_examples=15, deadline=None)
@given(case=polytopes(n=(2, 6)), data=st.data())
def test_polytope_with_equalities_oracle(case, data):
    P0, x0 = case.poly, case.x0
    n = P0.dim
    F = data.draw(nonzero_vectors(n), label="F")[None]
    P = Polytope(P0.A, P0.b, F, F @ x0)
    null = np.linalg.svd(F)[2][1:].T
    pts = x0 + 0.05 * np.random.default_rng(0).normal(size=(100, n - 1)) @ null.T
    pts = pts[[P0.contains(p) for p in pts]]
    queries = np.vstack([queries_around(data, x0, 40, 1.0), pts[:5] + 1e-3 * F[0]])
    assert check_oracle(P, queries, pts) > 0
    assert all(P.contains(p, 1e-9) for p in pts)


@settings(max_examples=15, deadline=None)
@given(B=balls(n=(1, 6), radius=(0.0, 3.0)), data=st.data())
def test_ball_oracle(B, data):
    c, radius, n = B.center, B.radius, B.dim
    pts = ball_points(c, radius, np.random.default_rng(0))
    queries = queries_around(data, c, 50, 2.0)
    check_oracle(B, queries, pts)
    value, x = B.maximize(np.ones(n))
    assert np.isclose(value, np.ones(n) @ c + radius * np.sqrt(n)) and np.isclose(np.linalg.norm(x - c), radius)


@settings(max_examples=15, deadline=None)
@given(case=polytopes(n=(1, 5)), data=st.data())
def test_intersection_oracle_returns_the_deepest_cut(case, data):
    P, x0 = case.poly, case.x0
    n = P.dim
    B = Ball(x0, 0.7)
    K = P & B
    assert isinstance(K, Intersection) and K.dim == n
    pts = sample_polytope(P, x0, np.random.default_rng(0))
    pts = pts[np.linalg.norm(pts - x0, axis=1) <= 0.7]
    queries = queries_around(data, x0, 40, 1.5)
    check_oracle(K, queries, pts)
    for x in queries:
        cut = K.separate(x)
        if cut is not None:
            depths = [c.depth(x) for c in (P.separate(x), B.separate(x)) if c is not None]
            assert np.isclose(cut.depth(x), max(depths))


def test_oracle_body_with_separation_only():
    B = Ball(np.zeros(3), 1.0)
    body = OracleBody(3, separate=lambda x: None if B.contains(x) else (B.separate(x).normal, B.separate(x).offset))
    rng = np.random.default_rng(0)
    check_oracle(body, rng.normal(scale=2.0, size=(30, 3)), ball_points(np.zeros(3), 1.0, rng))
    assert body.has_separate and not body.has_maximize


def test_oracle_body_missing_oracles():
    only_contains = OracleBody(2, contains=lambda x: bool(np.all(x <= 1)))
    assert only_contains.contains(np.zeros(2)) and not only_contains.has_separate
    with pytest.raises(MissingOracleError, match="separat"):
        only_contains.separate(np.zeros(2))
    with pytest.raises(MissingOracleError, match="maximize"):
        only_contains.maximize(np.ones(2))
    only_max = OracleBody(2, maximize=lambda c: (float(np.abs(c).sum()), np.sign(c)))
    with pytest.raises(MissingOracleError, match="membership|separation"):
        only_max.contains(np.zeros(2))
    assert only_max.maximize(np.array([1.0, -2.0]))[0] == 3.0
    with pytest.raises(MissingOracleError):
        OracleBody(2, separate=lambda x: None).cvxpy_constraints(None)
    with pytest.raises(MissingOracleError, match="explicit"):
        Intersection([Ball(np.zeros(2), 1.0), only_max]).maximize(np.ones(2))


def test_oracle_body_bad_answers_and_construction():
    bad = OracleBody(2, separate=lambda x: (np.ones(3), 0.0))
    with pytest.raises(OracleError, match="separate oracle returned a cut normal of shape"):
        bad.separate(np.ones(2))
    with pytest.raises(ValueError, match="at least one oracle"):
        OracleBody(2)
    with pytest.raises(TypeError, match="callable"):
        OracleBody(2, separate=3)
    with pytest.raises(ValueError, match="dim"):
        OracleBody(0, separate=lambda x: None)
    weird = OracleBody(2, maximize=lambda c: (0.0, np.zeros(3)))
    with pytest.raises(OracleError, match="maximize oracle returned the maximiser"):
        weird.maximize(np.ones(2))


@pytest.mark.parametrize("make, exc, match", [
    (lambda: Polytope(np.ones(3), np.ones(3)), ValueError, "2-D"),
    (lambda: Polytope(np.array([[1.0, np.nan]]), [1.0]), ValueError, "NaN"),
    (lambda: Polytope(np.eye(2), np.ones(3)), ValueError, "b"),
    (lambda: Polytope(np.eye(2), np.ones(2), A_eq=np.eye(2)), ValueError, "together"),
    (lambda: Polytope(np.eye(2), np.ones(2), dim=3), ValueError, "dim"),
    (lambda: Polytope(np.eye(2), np.ones(2)).add_slabs(np.eye(2), np.zeros(2), -np.ones(2)), ValueError, "eta"),
    (lambda: Polytope(np.eye(2), np.ones(2)).contains(np.ones(3)), ValueError, "x"),
    (lambda: Polytope(np.eye(2), np.ones(2)).separate(np.array([np.inf, 0.0])), ValueError, "x"),
    (lambda: Ball(np.zeros(2), -1.0), ValueError, "radius"),
    (lambda: Ball(np.zeros((2, 2)), 1.0), ValueError, "center"),
    (lambda: Ball(np.zeros(2), 1.0).maximize(np.ones(3)), ValueError, "c"),
    (lambda: Intersection([Ball(np.zeros(2), 1.0), Ball(np.zeros(3), 1.0)]), ValueError, "dimensions"),
    (lambda: Intersection([Ball(np.zeros(2), 1.0), "ball"]), TypeError, "ConvexBody"),
    (lambda: Cut(np.array([np.nan]), 0.0), ValueError, "finite"),
])
def test_bad_input(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_polytope_growth_slabs_and_maximize():
    P = Polytope(np.zeros((0, 2)), np.zeros(0), dim=2)
    assert P.contains(np.array([1e6, -1e6]))
    P.add_slabs(np.eye(2), np.array([1.0, 2.0]), np.array([0.5, 0.0]))
    assert P.n_constraints == 4
    assert P.contains(np.array([1.4, 2.0])) and not P.contains(np.array([1.6, 2.0]))
    cut = P.separate(np.array([1.0, 2.1]))
    assert cut is not None and np.allclose(cut.normal, [0.0, 1.0]) and np.isclose(cut.offset, 2.0)
    value, x = P.maximize(np.array([1.0, 1.0]))
    assert np.isclose(value, 3.5) and np.allclose(x, [1.5, 2.0])
    Q = P.copy().add_halfspaces(np.array([[1.0, 0.0]]), [1.2])
    assert Q.n_constraints == 5 and P.n_constraints == 4
    assert np.isclose((P & Q).maximize(np.array([1.0, 0.0]))[0], 1.2)


def test_zero_row_infeasible_gives_a_valid_cut():
    """0·x <= -1 makes the body empty: every point is cut, and the cut is a finite Cut."""
    P = Polytope(np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([-1.0, 5.0]))
    cut = P.separate(np.zeros(2))
    assert cut is not None and not P.contains(np.zeros(2))
    assert cut.violation(np.zeros(2)) > 0


@pytest.mark.parametrize("method", ["ellipsoid", "cutting_plane"])
def test_an_oracle_saying_empty_is_believed_until_it_contradicts_itself(method):
    """A zero cut 0·x <= b < 0 is the oracle saying "empty": the run ends "empty" when no point was accepted,
    and it is an OracleError naming the body when the oracle says so after accepting a point."""
    from oracles import cutting_plane, ellipsoid

    run = {"ellipsoid": ellipsoid, "cutting_plane": cutting_plane}[method]
    never = OracleBody(2, separate=lambda x, tol=0.0: (np.zeros(2), -1.0))
    res = run(never, np.zeros(2), 1.0)
    assert res.status == "empty" and res.x is None and "0·x <= b" in res.message
    calls = []

    def accepts_once(x, tol=0.0):
        calls.append(x)
        return None if len(calls) == 1 else (np.zeros(2), -1.0)

    with pytest.raises(OracleError, match="after it accepted a point"):
        run(OracleBody(2, separate=accepts_once), np.zeros(2), 1.0, objective=np.array([1.0, 0.0]))


@settings(max_examples=40, deadline=None)
@given(scale=st.sampled_from([1e-200, 1e-160, 1e-140, 1e-6, 1.0, 1e140, 1e160, 1e200]), seed=st.integers(0, 2**16))
def test_row_norms_are_exact_at_every_scale(scale, seed):
    """``row_norms`` takes √Σa² in one pass where that is a normal float and rescales the rest: the norms agree
    with the scaled reference to rounding from 1e-200 to 1e200, zero rows included."""
    from oracles._validate import row_norms

    rng = np.random.default_rng(seed)
    A = rng.standard_normal((12, 7))
    A[3] = 0.0
    A[5] *= scale
    A[7, 1:] = 0.0
    A[7, 0] = scale
    top = np.abs(A).max(1)
    ref = np.array([t * np.linalg.norm(a / t) if t > 0 else 0.0 for a, t in zip(A, top)])
    np.testing.assert_allclose(row_norms(A), ref, rtol=1e-14, atol=0)
