"""Property-based fuzzing of the public API (issue 10): on random bad input every public entry point raises
only its documented exception types (docs/errors.md) within a time limit, and where an answer is returned it
is checked against an independent computation (membership by direct evaluation, the min-norm point by a QP on
another solver, dimensions by an SVD, widths and centres of boxes in closed form, cutting-plane statuses
against the body itself).

Every test bounds its examples (``max_examples``) and each call's time (``deadline``), so the whole file runs
in well under a minute on two cores. ``EXAMPLES`` counts the cases it draws (reported in the issue's close).
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import string
import warnings
import zipfile
from datetime import timedelta
from io import BytesIO
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import (
    boxes,
    flat_polytopes,
    floats_between,
    gaussian_like,
    hostile_values,
    oracle_answers,
    polytopes,
    unit_vectors,
)

import oracles
from oracles import (
    AffineSubspace,
    Ball,
    Cut,
    Ellipsoid,
    Intersection,
    NormEpigraph,
    OracleBody,
    OracleError,
    Polytope,
    affine_hull,
    affine_hull_by_ellipsoid,
    chebyshev_center,
    cutting_plane,
    ellipsoid,
    fit_flat,
    linear_span,
    min_norm_point,
    singular_gap_dimension,
    width,
    widths,
)
from sculpt import MultiHeadAttention, SculptError, Settings, learn, nondegeneracy, plant, sample_inputs
from sculpt.learner import METHODS, min_examples

#: What the public API may raise on bad input (docs/errors.md): ValueError / TypeError for input, the engine's
#: OracleError family (EmptyBodyError, UnboundedError, SolverError; MissingOracleError is a TypeError) and
#: sculpt's SculptError family.
DOCUMENTED = (ValueError, TypeError, OracleError, SculptError)

#: max_examples of every test in this file (their sum is what the suite draws; see test_fuzz_cli.py too).
EXAMPLES = {"membership": 60, "min_norm": 25, "hull_dim": 20, "boxes": 25, "statuses": 30, "hull_far": 15,
            "oracles": 80,
            "engine_args": 120, "layer_args": 100, "distance": 40, "prediction": 30, "typos": 60, "learn_args": 60,
            "reasons": 6, "model_files": 60}

FAST = timedelta(seconds=3)


def _fuzz(name: str, deadline: timedelta | None = FAST):
    return settings(max_examples=EXAMPLES[name], deadline=deadline,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


def _documented(call) -> object:
    """call(); an exception outside DOCUMENTED fails the test (returns the exception if documented)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return call()
    except DOCUMENTED as exc:
        return exc


def _violation(A: np.ndarray, b: np.ndarray, x: np.ndarray) -> float:
    """max_i (a_i x − b_i)/‖a_i‖ by direct evaluation (the independent membership test)."""
    if A.shape[0] == 0:
        return -math.inf
    return float(np.max((A @ x - b) / np.linalg.norm(A, axis=1)))


# ============================================================================================ the engine
@_fuzz("membership")
@given(case=polytopes(n=(1, 4), box=None, slack=(0.1, 1.0)), exps=st.lists(st.integers(-300, 300), min_size=1,
                                                                              max_size=12),
       u=st.data(), t=floats_between(0.0, 3.0))
def test_membership_and_cuts_at_any_row_scale(case, exps, u, t) -> None:
    """Rows scaled by 10^-300 … 10^300: contains() agrees with direct evaluation on the unscaled rows, and a
    returned cut is violated by the point and valid at the interior point x0 (class 1: at 1e160 a point outside
    was reported inside)."""
    A0, b0 = case.poly.A, case.poly.b
    s = np.array([10.0 ** exps[i % len(exps)] for i in range(A0.shape[0])])
    P = Polytope(A0 * s[:, None], b0 * s)
    x = case.x0 + t * u.draw(unit_vectors(A0.shape[1]), label="direction")
    v = _violation(A0, b0, x)
    if abs(v - 1e-9) < 1e-9:
        return  # within rounding of the tolerance: either answer is right
    assert P.contains(x, tol=1e-9) == (v <= 1e-9)
    cut = P.separate(x, tol=1e-9)
    assert (cut is None) == (v <= 1e-9)
    if cut is not None:
        assert abs(np.linalg.norm(cut.normal) - 1.0) < 1e-12 and cut.depth(x) > 0
        assert cut.normal @ case.x0 <= cut.offset + 1e-9  # valid for the body


def _least_distance(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """argmin ‖x‖ s.t. A x <= b by Lawson & Hanson's least-distance programming (Solving Least Squares Problems,
    ch. 23): one NNLS on E = [−A, −b]ᵀ, f = e_{n+1}; x = −r_{1..n}/r_{n+1} with r = E u − f. An active-set method
    independent of the engine's interior point, Clarabel and KKT polish."""
    from scipy.optimize import nnls

    n = A.shape[1]
    E = np.vstack([-A.T, -b[None, :]])
    f = np.zeros(n + 1)
    f[-1] = 1.0
    u, _ = nnls(E, f, maxiter=50 * E.shape[1])
    r = E @ u - f
    assert abs(r[-1]) > 1e-12, "LDP says infeasible"
    return -r[:n] / r[-1]


@_fuzz("min_norm", deadline=None)
@given(case=polytopes(n=(1, 4), box=2.0, center_bound=3.0), exps=st.lists(st.integers(-200, 200), min_size=1,
                                                                             max_size=8))
def test_min_norm_point_matches_an_independent_qp(case, exps) -> None:
    """min_norm_point of a row-scaled polytope equals the least-distance-programming answer (an NNLS active set)
    on the unscaled rows, and is feasible by direct evaluation."""
    A0, b0 = case.poly.A, case.poly.b
    s = np.array([10.0 ** exps[i % len(exps)] for i in range(A0.shape[0])])
    x = min_norm_point(Polytope(A0 * s[:, None], b0 * s))
    ref = _least_distance(A0, b0)
    assert _violation(A0, b0, x) <= 1e-7 * max(1.0, float(np.linalg.norm(x)))
    assert np.linalg.norm(x) <= np.linalg.norm(ref) + 1e-6 * max(1.0, float(np.linalg.norm(ref)))
    assert np.linalg.norm(x - ref) <= 1e-4 * max(1.0, float(np.linalg.norm(ref)))


@_fuzz("hull_dim", deadline=None)
@given(n=st.integers(2, 5), data=st.data(), exps=st.lists(st.integers(-150, 150), min_size=1, max_size=6))
def test_affine_hull_dimension_matches_an_svd(n, data, exps) -> None:
    """dim aff(P) = n − rank(E) for the hidden equations E (rank by an SVD), whatever the rows' scales."""
    k = data.draw(st.integers(0, n - 1), label="k")
    case = data.draw(flat_polytopes(n, k, n + 2, box=2.0), label="case")
    A0, b0 = case.poly.A, case.poly.b
    s = np.array([2.0 ** round(3.32 * exps[i % len(exps)]) for i in range(A0.shape[0])])  # exact scalings
    hull = affine_hull(Polytope(A0 * s[:, None], b0 * s))
    rank = int(np.sum(np.linalg.svd(case.E, compute_uv=False) > 1e-9)) if case.E.shape[0] else 0
    assert hull.dim == n - rank
    assert hull.distance(case.x0) <= 1e-6


@_fuzz("boxes", deadline=None)
@given(box=boxes(n=(1, 4)), exps=st.lists(st.integers(-300, 300), min_size=1, max_size=8))
def test_box_widths_and_centres_in_closed_form(box, exps) -> None:
    """A box {lo <= x <= hi} with rows scaled by 10^±300: widths hi − lo, Chebyshev radius min(hi − lo)/2 (class 1:
    at 1e160 the box was called unbounded)."""
    n = box.dim
    hi, lo = box.b[:n], -box.b[n:]
    s = np.array([10.0 ** exps[i % len(exps)] for i in range(2 * n)])
    P = Polytope(box.A * s[:, None], box.b * s)
    w = widths(P, np.eye(n))
    assert np.allclose(w, hi - lo, rtol=1e-7, atol=1e-9)
    assert math.isclose(width(P, np.eye(n)[0]), hi[0] - lo[0], rel_tol=1e-7, abs_tol=1e-9)
    c, r = chebyshev_center(P)
    assert math.isclose(r, float(np.min(hi - lo)) / 2, rel_tol=1e-6, abs_tol=1e-9)
    assert np.all(c >= lo - 1e-7) and np.all(c <= hi + 1e-7)


def _body_case(draw) -> tuple[object, np.ndarray, float, callable, callable]:
    """(body, centre, radius of a ball around it, membership by direct evaluation, min of c·x over it)."""
    n = draw(st.integers(1, 4), label="n")
    if draw(st.booleans(), label="ball"):
        c = draw(gaussian_like((n,), bound=3.0), label="centre")
        r = draw(floats_between(0.1, 2.0), label="r")
        inside = lambda x: float(np.linalg.norm(x - c)) <= r + 1e-6  # noqa: E731
        lowest = lambda u: float(u @ c - r * np.linalg.norm(u))  # noqa: E731
        return Ball(c, r), c, r, inside, lowest
    B = draw(boxes(n=n, min_width=0.2), label="box")
    hi, lo = B.b[:n], -B.b[n:]
    inside = lambda x: bool(np.all(x <= hi + 1e-6) and np.all(x >= lo - 1e-6))  # noqa: E731
    lowest = lambda u: float(np.sum(np.minimum(u * lo, u * hi)))  # noqa: E731
    return B, 0.5 * (hi + lo), 0.5 * float(np.linalg.norm(hi - lo)), inside, lowest


@_fuzz("statuses", deadline=None)
@given(data=st.data(), e=st.integers(0, 150), method=st.sampled_from(["ellipsoid", "cutting_plane"]),
       minimise=st.booleans())
def test_cutting_plane_statuses_stay_true_at_any_radius(data, e, method, minimise) -> None:
    """ellipsoid / cutting_plane from a ball of radius up to 1e150 around a ball or a box: "feasible" points are
    in the body (direct evaluation), "optimal" values match the closed-form minimum, "empty" never happens (the
    start ball holds the body), "flat" slabs hold the body; "max_iter" is always allowed (class 1: radii >= 1e10
    gave "empty", a phase-one LP leaked UnboundedError)."""
    body, centre, extent, inside, lowest = _body_case(data.draw)
    n = body.dim
    R = max(10.0 ** e, 4.0 * extent + 1.0)
    offset = data.draw(unit_vectors(n), label="offset") * data.draw(floats_between(0.0, 0.5), label="frac") * R
    start = centre + offset
    u = data.draw(unit_vectors(n), label="objective") if minimise else None
    run = ellipsoid if method == "ellipsoid" else cutting_plane
    res = run(body, start, R, objective=u, max_iter=600 if method == "ellipsoid" else 120)
    assert res.status in oracles.results.STATUSES
    assert res.status != "empty", res.message
    if res.status in ("feasible", "optimal"):
        assert inside(res.x)
    if res.status == "optimal":
        assert abs(res.value - lowest(u)) <= 1e-6 * max(1.0, abs(lowest(u))) + 1e-6
        assert res.lower_bound <= lowest(u) + 1e-6
    if res.status == "flat":  # the body lies in the slab |uᵀ(y − c)| <= w along each flat direction
        for j in range(res.flat_directions.shape[1]):
            d = res.flat_directions[:, j]
            spread = max(abs(lowest(d) - d @ res.center), abs(-lowest(-d) - d @ res.center))
            assert spread <= res.flat_widths[j] * (1 + 1e-6) + 2e-9


@_fuzz("hull_far", deadline=None)
@given(data=st.data(), e=st.integers(0, 150))
def test_affine_hull_by_ellipsoid_never_calls_a_body_empty(data, e) -> None:
    """affine_hull_by_ellipsoid from a far start in a ball of radius up to 1e150 around a ball or a box: the full
    dimension, or a SolverError saying float64 cannot tell — never EmptyBodyError (a box searched from radius
    1e50 was called empty)."""
    body, centre, extent, _, _ = _body_case(data.draw)
    R = max(10.0 ** e, 4.0 * extent + 1.0)
    start = centre + data.draw(unit_vectors(body.dim), label="offset") * 0.3 * R
    try:
        hull = affine_hull_by_ellipsoid(body, start, R)
    except oracles.SolverError as exc:
        assert "rounding" in str(exc) or "max_iter" in str(exc), str(exc)
    else:
        assert hull.dim == body.dim


class _UserBody(oracles.ConvexBody):
    """A user's own ConvexBody subclass whose separate() is whatever ``fn`` returns."""

    def __init__(self, dim: int, fn) -> None:
        self.dim, self._fn = dim, fn

    def separate(self, x, tol=1e-9):
        return self._fn(x)


def _scripted(answer):
    """A user oracle that returns ``answer`` (or raises it, when it is an exception)."""
    def oracle(*_):
        if isinstance(answer, BaseException):
            raise answer
        return answer
    return oracle


@_fuzz("oracles", deadline=FAST)
@given(n=st.integers(1, 3), data=st.data(), which=st.sampled_from(["separate", "contains", "maximize"]),
       call=st.sampled_from(["direct", "ellipsoid", "cutting_plane", "min_norm", "width", "widths", "hull",
                             "intersection", "epigraph"]))
def test_misbehaving_oracles_are_named(n, data, which, call) -> None:
    """A user's oracle returning junk, NaN or the wrong shape, or raising, is an OracleError naming that oracle
    (class 2: a separate() returning text gave "could not convert string to float", a NaN maximize a NaN
    width) — or, when the junk happens to be a valid answer, a normal result."""
    answer = data.draw(oracle_answers(n), label="answer")
    body = OracleBody(n, **{which: _scripted(answer)})
    if which == "separate" and data.draw(st.booleans(), label="subclass"):
        body = _UserBody(n, _scripted(answer))  # a ConvexBody written outside the engine
    x, R = np.zeros(n), 10.0
    calls = {
        "direct": lambda: (body.separate(x) if which == "separate" else body.contains(x) if which == "contains"
                           else body.maximize(np.ones(n))),
        "ellipsoid": lambda: ellipsoid(body, x, R, max_iter=50),
        "cutting_plane": lambda: cutting_plane(body, x, R, max_iter=20),
        "min_norm": lambda: min_norm_point(body, radius=R, max_iter=50),
        "width": lambda: width(body, np.ones(n), radius=R, max_iter=50),
        "widths": lambda: widths(body, np.eye(n), radius=R),
        "hull": lambda: affine_hull_by_ellipsoid(body, x, R, max_iter=50),
        "intersection": lambda: Intersection([body, Ball(x, 1.0)]).separate(np.full(n, 0.5)),
        "epigraph": lambda: NormEpigraph(body).separate(np.append(x, 1.0)),
    }
    if call == "direct" and isinstance(body, _UserBody) and isinstance(answer, BaseException):
        # the user's own method called directly: no engine code runs, so its exception reaches the caller as is
        with pytest.raises(type(answer)):
            calls[call]()
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            calls[call]()
    except oracles.MissingOracleError:
        pass  # the call needs an oracle this body lacks (a TypeError, documented)
    except OracleError as exc:
        text = str(exc)
        assert isinstance(exc, (oracles.EmptyBodyError, oracles.UnboundedError, oracles.SolverError)) or (
            "oracle" in text or "status" in text), text


ENGINE_CALLS = {
    "Polytope.A": lambda v: Polytope(v, np.ones(3)),
    "Polytope.b": lambda v: Polytope(np.eye(3), v),
    "Polytope.contains": lambda v: Polytope(np.eye(3), np.ones(3)).contains(v),
    "Polytope.add_equalities": lambda v: Polytope(np.eye(3), np.ones(3)).add_equalities(v, [0.0]),
    "Polytope.add_slabs": lambda v: Polytope(np.eye(3), np.ones(3)).add_slabs(np.eye(3), v, 1.0),
    "Polytope.maximize": lambda v: Polytope(np.vstack([np.eye(3), -np.eye(3)]), np.ones(6)).maximize(v),
    "Ball.center": lambda v: Ball(v, 1.0),
    "Ball.radius": lambda v: Ball(np.zeros(3), v),
    "Ball.separate": lambda v: Ball(np.zeros(3), 1.0).separate(v),
    "Cut": lambda v: Cut(v, 0.0).depth(np.ones(3)),
    "Ellipsoid.center": lambda v: Ellipsoid(v, np.eye(3)),
    "Ellipsoid.shape": lambda v: Ellipsoid(np.zeros(3), v),
    "Ellipsoid.ball": lambda v: Ellipsoid.ball(np.zeros(3), v),
    "Ellipsoid.update": lambda v: Ellipsoid.ball(np.zeros(3), 1.0).update(Cut(v, 0.0)),
    "ellipsoid.center": lambda v: ellipsoid(Ball(np.zeros(3), 1.0), v, 2.0),
    "ellipsoid.radius": lambda v: ellipsoid(Ball(np.zeros(3), 1.0), np.zeros(3), v),
    "ellipsoid.objective": lambda v: ellipsoid(Ball(np.zeros(3), 1.0), np.zeros(3), 2.0, objective=v),
    "ellipsoid.tol": lambda v: ellipsoid(Ball(np.zeros(3), 1.0), np.zeros(3), 2.0, tol=v),
    "cutting_plane.radius": lambda v: cutting_plane(Ball(np.zeros(3), 1.0), np.zeros(3), v),
    "cutting_plane.max_iter": lambda v: cutting_plane(Ball(np.zeros(3), 1.0), np.zeros(3), 2.0, max_iter=v),
    "min_norm_point.body": lambda v: min_norm_point(v),
    "min_norm_point.method": lambda v: min_norm_point(Ball(np.ones(3), 1.0), method=v),
    "min_norm_point.radius": lambda v: min_norm_point(OracleBody(3, separate=lambda x: None), radius=v),
    "chebyshev_center.tol": lambda v: chebyshev_center(Polytope(np.vstack([np.eye(3), -np.eye(3)]), np.ones(6)), tol=v),
    "width.u": lambda v: width(Ball(np.zeros(3), 1.0), v),
    "widths.U": lambda v: widths(Polytope(np.vstack([np.eye(3), -np.eye(3)]), np.ones(6)), v),
    "affine_hull.body": lambda v: affine_hull(v),
    "affine_hull.tol": lambda v: affine_hull(Polytope(np.vstack([np.eye(3), -np.eye(3)]), np.ones(6)), tol=v),
    "linear_span.points": lambda v: linear_span(v),
    "fit_flat.A": lambda v: fit_flat(v, np.ones(3)),
    "singular_gap_dimension": lambda v: singular_gap_dimension(v),
    "AffineSubspace.point": lambda v: AffineSubspace(v, np.eye(3)[:, :1]),
    "OracleBody.dim": lambda v: OracleBody(v, separate=lambda x: None),
    "affine_hull_by_ellipsoid.radius": lambda v: affine_hull_by_ellipsoid(Ball(np.zeros(3), 1.0), np.zeros(3), v),
    "Polytope.lb": lambda v: width(Polytope(np.eye(3), np.ones(3), lb=v), np.ones(3)),
    "Polytope.ub": lambda v: Polytope(-np.eye(3), np.ones(3), ub=v).contains(np.zeros(3)),
    "Ellipsoid.contains": lambda v: Ellipsoid.ball(np.zeros(3), 1.0).contains(v),
    "Intersection": lambda v: Intersection([Ball(np.zeros(3), 1.0), v]),
    "NormEpigraph": lambda v: NormEpigraph(v),
    "implicit_equalities": lambda v: oracles.implicit_equalities(v),
    "ellipsoid.memory": lambda v: ellipsoid(Ball(np.zeros(3), 1.0), np.ones(3), 2.0, memory=v),
}


@_fuzz("engine_args")
@given(name=st.sampled_from(sorted(ENGINE_CALLS)), value=hostile_values(3))
def test_engine_entry_points_refuse_bad_arguments_with_documented_errors(name, value) -> None:
    """Hostile arguments (None, text, complex, NaN/inf, 1e300, ragged, wrongly shaped) to every engine entry
    point: ValueError / TypeError / OracleError only (class 2: complex input was only a ComplexWarning)."""
    _documented(lambda: ENGINE_CALLS[name](value))


@pytest.mark.parametrize("value", [np.ones(3) * (1 + 1j), [1j, 0, 0]])
def test_complex_input_is_a_type_error_in_the_engine(value) -> None:
    with pytest.raises(TypeError, match="real"):
        Polytope(np.eye(3), np.ones(3)).contains(value)
    with pytest.raises(TypeError, match="real"):
        Ball(value, 1.0)


def test_out_of_range_inputs_name_the_range() -> None:
    with pytest.raises(ValueError, match="1e150"):
        Polytope(np.array([[1e-300, 0.0]]), np.array([1e-100]))  # a hyperplane 1e200 from the origin
    with pytest.raises(ValueError, match="1e150"):
        ellipsoid(Ball(np.zeros(2), 1.0), np.zeros(2), 1e200)
    with pytest.raises(ValueError, match="1e150"):
        Ball(np.zeros(2), 1.0).contains(np.full(2, 1e200))


# ============================================================================================== sculpt
_LAYER = plant(3, 2, 2, seed=0)
_X = sample_inputs(6, 2, 3, rng=0)

LAYER_CALLS = {
    "MultiHeadAttention.thetas": lambda v: MultiHeadAttention(v, _LAYER.ws),
    "MultiHeadAttention.ws": lambda v: MultiHeadAttention(_LAYER.thetas, v),
    "__call__": lambda v: _LAYER(v),
    "attention": lambda v: _LAYER.attention(v),
    "distance": lambda v: _LAYER.distance(v),
    "prediction_error.X": lambda v: _LAYER.prediction_error(_LAYER, v),
    "from_params.params": lambda v: MultiHeadAttention.from_params(v, 2, 3),
    "from_params.m": lambda v: MultiHeadAttention.from_params(_LAYER.params(), v, 3),
    "save.path": lambda v: _LAYER.save(v) if not isinstance(v, (str, bytes)) else None,
    "load.path": lambda v: MultiHeadAttention.load(v) if not isinstance(v, (str, bytes)) else None,
    "sample_inputs.n": lambda v: sample_inputs(v, 2, 3),
    "sample_inputs.distribution": lambda v: sample_inputs(2, 2, 3, distribution=v),
    "sample_inputs.rng": lambda v: sample_inputs(2, 2, 3, rng=v),
    "plant.d": lambda v: plant(v, 2, 1),
    "plant.scale": lambda v: plant(3, 2, 1, scale=v),
    "plant.seed": lambda v: plant(3, 2, 1, seed=v),
    "nondegeneracy.model": lambda v: nondegeneracy(v),
    "nondegeneracy.k": lambda v: nondegeneracy(_LAYER, k=v, n_inputs=50),
    "Settings.merged": lambda v: Settings().merged(v),
    "Settings.tol": lambda v: Settings(tol=v),
}


@_fuzz("layer_args")
@given(name=st.sampled_from(sorted(LAYER_CALLS)), value=hostile_values(3))
def test_layer_and_data_entry_points_refuse_bad_arguments(name, value) -> None:
    _documented(lambda: LAYER_CALLS[name](value))


def _layer_at(draw, m: int, d: int, e: int) -> tuple[MultiHeadAttention, MultiHeadAttention, float]:
    base = draw(gaussian_like((2, m, d, d), bound=1.0), label="params") + 0.01
    return MultiHeadAttention(base[0], base[1]), MultiHeadAttention(base[0] * 10.0 ** e, base[1] * 10.0 ** e), 10.0 ** e


@_fuzz("distance")
@given(m=st.integers(1, 3), d=st.integers(1, 3), e=st.integers(-140, 140), data=st.data())
def test_head_distance_is_scale_free_and_matches_brute_force(m, d, e, data) -> None:
    """distance() between layers with entries near 10^±140 equals the unscaled distance, whose matching is the
    best of all m! permutations (brute force) — class 5: entries near 1e300 leaked scipy's 'cost matrix is
    infeasible'."""
    A, As, _ = _layer_at(data.draw, m, d, e)
    B, Bs, _ = _layer_at(data.draw, m, d, e)
    got, ref = As.distance(Bs), A.distance(B)
    assert math.isclose(got.theta_error, ref.theta_error, rel_tol=1e-9, abs_tol=1e-300)
    assert math.isclose(got.w_error, ref.w_error, rel_tol=1e-9, abs_tol=1e-300)
    t_sq, w_sq = float(np.sum(A.thetas ** 2)), float(np.sum(A.ws ** 2))

    def cost(perm) -> float:
        return sum(float(np.sum((A.thetas[i] - B.thetas[j]) ** 2)) / t_sq + float(np.sum((A.ws[i] - B.ws[j]) ** 2))
                   / w_sq for i, j in enumerate(perm))

    best = min(cost(p) for p in itertools.permutations(range(m)))
    assert cost(ref.permutation) <= best * (1 + 1e-9) + 1e-15


@_fuzz("prediction")
@given(e=st.integers(-140, 140), data=st.data())
def test_prediction_error_is_scale_free(e, data) -> None:
    """F is linear in W: scaling every W_i by 10^e leaves the relative MSE unchanged (class 1: outputs near 1e250
    gave inf for a relative error of 1)."""
    A, _, _ = _layer_at(data.draw, 2, 3, 0)
    B, _, _ = _layer_at(data.draw, 2, 3, 0)
    s = 10.0 ** e
    ref = A.prediction_error(B, _X)
    got = MultiHeadAttention(A.thetas, A.ws * s).prediction_error(MultiHeadAttention(B.thetas, B.ws * s), _X)
    assert math.isclose(got, ref, rel_tol=1e-9)


def _setting_groups() -> list[tuple[str, list[str]]]:
    out, stack = [], [("", Settings())]
    while stack:
        path, group = stack.pop()
        names = [f.name for f in dataclasses.fields(group)]
        out.append((path, names))
        for f in dataclasses.fields(group):
            sub = getattr(group, f.name)
            if dataclasses.is_dataclass(sub):
                stack.append((f"{path}.{f.name}" if path else f.name, sub))
    return sorted(out)


SETTING_GROUPS = _setting_groups()
_DATA = (sample_inputs(30, 2, 3, rng=1), plant(3, 2, 1, seed=1)(sample_inputs(30, 2, 3, rng=1)))


@_fuzz("typos")
@given(route=st.sampled_from(["sculpt", "exact", "gradient", "auto"]), group=st.sampled_from(SETTING_GROUPS),
       key=st.text(string.ascii_lowercase + "_", min_size=1, max_size=12),
       how=st.sampled_from(["keyword", "settings_dict", "merged"]))
def test_option_typos_are_type_errors_on_every_route(route, group, key, how) -> None:
    """An unknown setting at any depth is a TypeError naming it, whichever route and however it is passed
    (class 3; typed settings, sculpt/settings.py)."""
    path, names = group
    if key in names:
        key += "x"
    nested: dict = {key: 1}
    for part in reversed(path.split(".") if path else []):
        nested = {part: nested}
    qualified = f"{path}.{key}" if path else key
    X, Y = _DATA
    with pytest.raises(TypeError, match=f"unknown setting '{qualified}'"):
        if how == "keyword":
            learn(X, Y, 1, method=route, seed=0, **nested)
        elif how == "settings_dict":
            learn(X, Y, 1, method=route, seed=0, settings=nested)
        else:
            learn(X, Y, 1, method=route, seed=0, settings=Settings().merged(nested))


def _bad_learn_argument(draw) -> dict:
    X, Y = _DATA
    field = draw(st.sampled_from(["X", "Y", "m", "method", "seed", "solver", "truth", "settings", "tol",
                                  "validation_size"]), label="field")
    junk = {
        "X": st.one_of(hostile_values(3), st.just(X[:, :, :2]), st.just(X * 1e120), st.just(X[0])),
        "Y": st.one_of(hostile_values(3), st.just(Y[:-1]), st.just(Y * 1e200), st.just(np.zeros_like(Y))),
        "m": st.one_of(st.sampled_from([0, -1, 1.5, "2", None, True, 10**30, np.nan]), hostile_values(1)),
        "method": st.one_of(st.text(max_size=6).filter(lambda t: t not in METHODS), st.none(), st.integers()),
        "seed": st.sampled_from([-1, 1.5, "x", object(), [1, 2], np.nan]),
        "solver": st.sampled_from(["NOPE", "", "highs!", "xx"]),
        "truth": st.one_of(hostile_values(3).filter(lambda v: v is not None), st.just(plant(4, 2, 1, seed=0))),
        "settings": st.one_of(st.integers(), st.text(max_size=3), st.just([1, 2])),
        "tol": st.sampled_from([-1.0, np.nan, np.inf, "1e-3", None, [1.0]]),
        "validation_size": st.sampled_from([0, -3, 30, 10**9, 2.5, "5"]),
    }[field]
    args = {"X": X, "Y": Y, "m": 1, "method": "gradient", "seed": 0}
    args[field] = draw(junk, label=field)
    return args


@_fuzz("learn_args", deadline=timedelta(seconds=5))
@given(data=st.data())
def test_learn_refuses_bad_arguments_before_any_work(data) -> None:
    """One wrong argument of learn() (everything else valid) is a ValueError / TypeError raised before any work
    starts: the deadline catches a call that would learn instead."""
    kwargs = _bad_learn_argument(data.draw)
    X, Y, m = kwargs.pop("X"), kwargs.pop("Y"), kwargs.pop("m")
    with pytest.raises((ValueError, TypeError)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            learn(X, Y, m, **kwargs)


@_fuzz("reasons", deadline=None)
@given(route=st.sampled_from(["gradient", "auto"]), tol=st.sampled_from([0.0, 1e-300, 1e-12]),
       grad_tol=st.sampled_from([0.0, 1e-20, 1.0]))
def test_reasons_agree_with_converged(route, tol, grad_tol) -> None:
    """The reason never contradicts ``converged`` (class 6: the gradient route said "tol reached" with
    converged=False — the training loss had reached gradient.tol, validation had not reached tol)."""
    X = sample_inputs(40, 2, 3, rng=2)
    Y = plant(3, 2, 1, seed=2)(X)
    res = learn(X, Y, 1, method=route, seed=0, tol=tol, gradient={"tol": grad_tol, "max_iter": 200})
    assert res.reason
    if res.converged:  # exact (validation <= tol) or at the labels' noise floor (tol = 0 is below float64's)
        assert "not converged" not in res.reason and res.status in ("exact", "noise")
        assert res.validation_error <= tol if res.status == "exact" else "noise floor" in res.reason
    elif route == "gradient":
        assert res.reason.startswith("not converged") and f"> tol {tol:.0e}" in res.reason


def test_one_training_example_is_not_called_a_degenerate_instance() -> None:
    N = min_examples("sculpt", 4, 3, 2)
    X = sample_inputs(N, 3, 4, rng=0)
    res = learn(X, plant(4, 3, 2, seed=0)(X), 2, method="sculpt", seed=0, validation_size=N - 1)
    assert not res.converged and "too few training examples" in res.reason


# ------------------------------------------------------------------------------------------ model files
def _npz(members: dict[str, bytes]) -> bytes:
    buf = BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, raw in members.items():
            z.writestr(name, raw)
    return buf.getvalue()


def _npy(arr: np.ndarray | None = None, header: dict | None = None, tail: bytes = b"") -> bytes:
    buf = BytesIO()
    if header is None:
        np.save(buf, arr, allow_pickle=True)
    else:
        np.lib.format.write_array_header_1_0(buf, header)
        buf.write(tail)
    return buf.getvalue()


def _good_bytes(tmp: Path) -> bytes:
    p = tmp / "good.npz"
    _LAYER.save(p)
    return p.read_bytes()


def _meta(**kw) -> np.ndarray:
    import json

    doc = {"format": "sculpt.MultiHeadAttention", "version": 1, "m": 2, "d": 3, **kw}
    return np.array(json.dumps(doc))


HOSTILE_MEMBERS = st.sampled_from([
    ({"metadata.npy": _npy(np.array("[" * 5000 + "]" * 5000))}),
    ({"metadata.npy": _npy(np.array("x" * 300_000))}),
    ({"metadata.npy": _npy(_meta(m=2.0))}),
    ({"metadata.npy": _npy(_meta(m=True))}),
    ({"metadata.npy": _npy(np.array('{"m": ' + "9" * 5000 + "}"))}),
    ({"metadata.npy": _npy(np.array([{"a": 1}], dtype=object))}),
    ({"thetas.npy": _npy(header={"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6, 10**6)},
                                tail=b"\0" * 64)}),
    ({"thetas.npy": _npy(header={"descr": "<f8", "fortran_order": False, "shape": (2, 3, 3)}, tail=b"\0")}),
    ({"thetas.npy": _npy(header={"descr": "|O", "fortran_order": False, "shape": (2,)}, tail=b"\0" * 16)}),
    ({"ws.npy": _npy(np.full((2, 3, 3), np.nan))}),
    ({"ws.npy": _npy(np.full((2, 3, 3), 1e300))}),
    ({"ws.npy": _npy(np.ones((2, 3, 3), dtype=np.complex128))}),
    ({"ws.npy": _npy(np.ones((3, 3, 3)))}),
    ({"ws.npy": b"\x93NUMPY\x09\x00garbage"}),
    ({"ws.npy": b""}),
])


@_fuzz("model_files", deadline=timedelta(seconds=2))
@given(kind=st.sampled_from(["members", "flip", "truncate", "random"]), members=HOSTILE_MEMBERS,
       where=st.integers(0, 10**6), byte=st.integers(0, 255), junk=st.binary(max_size=64))
def test_hostile_model_files_are_value_errors(tmp_path_factory, kind, members, where, byte, junk) -> None:
    """MultiHeadAttention.load on hostile files: nested or huge metadata, absurd shapes, object arrays, NaN,
    flipped / truncated / random bytes — a ValueError, fast, never RecursionError / MemoryError (class 4); a file
    that still loads gives a valid layer."""
    tmp = tmp_path_factory.mktemp("model")
    good = _good_bytes(tmp)
    if kind == "members":
        with zipfile.ZipFile(BytesIO(good)) as z:
            base = {i.filename: z.read(i.filename) for i in z.infolist()}
        raw = _npz({**base, **members})
    elif kind == "flip":
        i = where % len(good)
        raw = good[:i] + bytes([byte]) + good[i + 1:]
    elif kind == "truncate":
        raw = good[: where % len(good)]
    else:
        raw = junk
    path = tmp / "hostile.npz"
    path.write_bytes(raw)
    try:
        model = MultiHeadAttention.load(path)
    except ValueError as exc:
        assert str(path) in str(exc) or repr(str(path)) in str(exc)
    else:
        assert np.all(np.isfinite(model.thetas)) and model.thetas.shape == model.ws.shape


def test_a_model_file_claiming_an_unsupported_zip_version_is_a_value_error(tmp_path) -> None:
    """A flipped byte in the zip directory's "version needed" field makes ``zipfile`` raise NotImplementedError
    while opening the archive (found by the fuzz test above): it is a ValueError naming the file."""
    good = bytearray(_good_bytes(tmp_path))
    at = good.find(b"PK\x01\x02")  # the first central-directory entry; "version needed" at offset 6
    assert at >= 0
    good[at + 6] = 64
    path = tmp_path / "version.npz"
    path.write_bytes(bytes(good))
    with pytest.raises(ValueError, match="not an npz archive"):
        MultiHeadAttention.load(path)


# --------------------------------------------------------------------------------------------------- docs
def test_docs_errors_lists_every_public_name_and_its_examples_run(capsys) -> None:
    """docs/errors.md names every public name of both packages, and its code blocks run as printed."""
    import re

    import sculpt

    doc = (Path(__file__).resolve().parents[1] / "docs" / "errors.md").read_text()
    missing = [n for n in (*oracles.__all__, *sculpt.__all__) if n != "solvers" and f"`{n}" not in doc]
    assert missing == [], f"docs/errors.md does not list {missing}"
    for i, code in enumerate(re.findall(r"```python\n(.*?)```", doc, re.S)):
        exec(compile(code, f"docs/errors.md block {i + 1}", "exec"), {"__name__": "errors_md"})
    out = capsys.readouterr().out
    assert "max_iter" in out and "did you mean 'gradient.tol'" in out
