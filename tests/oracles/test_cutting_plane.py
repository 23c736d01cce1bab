"""The analytic-centre cutting-plane method (ACCPM)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from _problems import chebyshev_margin, flat_polytope, lp_min, random_polytope
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import nonzero_vectors, polytopes

from oracles import Ball, MissingOracleError, OracleBody, Polytope
from oracles.cutting_plane import _Localisation, cutting_plane


def radius_for(x0: np.ndarray, n: int, box: float = 2.0) -> float:
    return float(np.linalg.norm(x0)) + box * math.sqrt(n) + 1.0


@settings(max_examples=25, deadline=None)
@given(case=polytopes(n=(1, 7), slack=(-0.6, 1.0)))
def test_feasibility_agrees_with_lp(case):
    P, x0 = case.poly, case.x0
    n = P.dim
    margin = chebyshev_margin(P)
    assume(abs(margin) > 1e-3)
    res = cutting_plane(P, np.zeros(n), radius_for(x0, n))
    if margin > 0:
        assert res.status == "feasible" and P.contains(res.x, tol=1e-9)
    else:
        assert res.status == "empty" and res.x is None
    assert res.oracle_calls + res.recycled_cuts <= res.iterations + 1  # one query per update, plus the last


@settings(max_examples=12, deadline=None)
@given(case=polytopes(n=(1, 6)), data=st.data())
def test_minimisation_agrees_with_lp(case, data):
    P, x0 = case.poly, case.x0
    n = P.dim
    c = data.draw(nonzero_vectors(n), label="c")
    tol = 1e-6
    res = cutting_plane(P, np.zeros(n), radius_for(x0, n), objective=c, tol=tol)
    opt = lp_min(P, c)
    assert res.status == "optimal"
    assert P.contains(res.x, tol=1e-9) and res.value == pytest.approx(float(c @ res.x))
    assert opt - 1e-7 <= res.value <= opt + tol
    assert res.lower_bound <= opt + 1e-7


def test_cut_dropping_keeps_the_answer():
    """With room for only a few cuts the method still finds a point, and keeps at most max_cuts rows."""
    rng = np.random.default_rng(11)
    P, x0 = random_polytope(rng, 8, shift=(0.01, 0.05), box=0.05)
    seen = []
    orig = _Localisation.centre

    def spy(self, **kw):
        seen.append(self.m)
        return orig(self, **kw)

    _Localisation.centre = spy
    try:
        res = cutting_plane(P, np.zeros(8), radius_for(x0, 8), max_cuts=12, keep_cuts=8)
    finally:
        _Localisation.centre = orig
    assert res.status == "feasible" and P.contains(res.x)
    assert max(seen) <= 13 and res.iterations > 13  # dropping happened and bounded the rows


def test_flat_body_found_within_tolerance():
    """Hidden equalities: cuts are relaxed by the oracle tolerance, so the localisation set keeps interior."""
    rng = np.random.default_rng(5)
    P, F, g, x0 = flat_polytope(rng, 6, 2)
    res = cutting_plane(P, np.zeros(6), 20.0, oracle_tol=1e-7)
    assert res.status == "feasible" and P.contains(res.x, tol=1e-7)


def test_empty_thin_and_missing_ball():
    P = Polytope(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([0.0, -1e-6]))
    assert cutting_plane(P, np.zeros(2), 10.0, oracle_tol=1e-8).status == "empty"
    assert cutting_plane(Ball(np.full(3, 30.0), 1.0), np.zeros(3), 5.0).status == "empty"
    res = cutting_plane(Ball(np.full(3, 2.0), 0.5), np.zeros(3), 5.0)
    assert res.status == "feasible" and np.linalg.norm(res.x - 2.0) <= 0.5 + 1e-9


def test_result_ellipsoid_contains_the_body():
    """The reported (center, shape) = analytic centre, m²H⁻¹ contains the localisation set: here the LP
    minimiser (which survives every cut, the objective cut included) and, without objective, body points."""
    from scipy.optimize import linprog

    rng = np.random.default_rng(2)
    P, x0 = random_polytope(rng, 4)
    c = rng.normal(size=4)
    x_opt = linprog(c, A_ub=P.A, b_ub=P.b, bounds=[(None, None)] * 4, method="highs").x
    for objective, point in ((c, x_opt), (None, x0)):
        res = cutting_plane(P, np.zeros(4), radius_for(x0, 4), objective=objective, max_iter=15)
        d = point - res.center
        assert d @ np.linalg.solve(res.shape, d) <= 1.0


def test_max_iter_and_missing_oracle():
    rng = np.random.default_rng(0)
    P, x0 = random_polytope(rng, 8, shift=(0.001, 0.002), box=0.001)
    res = cutting_plane(P, np.zeros(8), 10.0, max_iter=3)
    assert res.status == "max_iter" and res.iterations == 3
    with pytest.raises(MissingOracleError, match="separate"):
        cutting_plane(OracleBody(2, maximize=lambda c: (0.0, np.zeros(2))), np.zeros(2), 1.0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(center=np.zeros(2)), "center"),
    (dict(center=np.array([np.inf, 0.0, 0.0])), "center"),
    (dict(radius=0.0), "radius"),
    (dict(objective=np.full(3, np.nan)), "objective"),
    (dict(tol=-1.0), "tol"),
    (dict(max_iter=2.5), "max_iter"),
    (dict(max_cuts=2, keep_cuts=5), "keep_cuts"),
    (dict(oracle_tol=-1e-9), "oracle_tol"),
    (dict(obj_weight=0.0), "obj_weight"),
    (dict(max_cuts=7.5), "max_cuts"),
])
def test_bad_input(kwargs, match):
    args = dict(center=np.zeros(3), radius=1.0)
    args.update(kwargs)
    center, radius = args.pop("center"), args.pop("radius")
    with pytest.raises(ValueError, match=match):
        cutting_plane(Ball(np.zeros(3), 1.0), center, radius, **args)


@pytest.mark.parametrize("backend", ["HIGHS", "CLARABEL", "SCS", "MOSEK"])
def test_phase_one_lp_runs_on_every_backend(backend):
    """``solver=`` reaches ACCPM's phase-one LP; the empty/feasible verdicts do not depend on the backend."""
    from oracles import SolverError, solvers

    rng = np.random.default_rng(5)
    empty = Polytope(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([0.0, -1e-3]))
    if backend not in solvers.available():
        with pytest.raises(SolverError, match=backend):
            cutting_plane(empty, np.zeros(2), 10.0, solver=backend)
        pytest.skip(f"{backend} unavailable here: {solvers.unavailable_reason(backend)}")
    assert cutting_plane(empty, np.zeros(2), 10.0, solver=backend).status == "empty"
    P, x0 = random_polytope(rng, 4, shift=(0.2, 1.0))
    res = cutting_plane(P, np.zeros(4), radius_for(x0, 4), solver=backend)
    assert res.status == "feasible" and P.contains(res.x, tol=1e-9)


def test_unknown_solver_is_rejected_before_any_oracle_call():
    from oracles import ellipsoid

    calls = []
    body = OracleBody(2, separate=lambda x, tol=1e-9: calls.append(x))
    for method in (cutting_plane, ellipsoid):
        with pytest.raises(ValueError, match="solver must be one of"):
            method(body, np.zeros(2), 1.0, solver="BOGUS")
    assert calls == []


def test_flat_body_minimisation_is_certified():
    """Over a flat body (x0 + x1 = 1, relaxed by oracle_tol to a slab of width 2e-9) the phase-one LP's point can
    violate a cut by the LP's tolerance; the vertex is re-solved in float64 and the run ends optimal."""
    A = np.vstack([[1.0, 1.0, 0.0], [-1.0, -1.0, 0.0], np.eye(3), -np.eye(3)])
    P = Polytope(A, np.concatenate([[1.0, -1.0], np.full(6, 2.0)]))
    with pytest.raises(ValueError, match="stall"):
        cutting_plane(P, np.zeros(3), 5.0, objective=np.ones(3), stall=0)
    res = cutting_plane(P, np.zeros(3), 5.0, objective=np.array([0.0, 0.0, -1.0]), tol=1e-8, stall=50)
    assert res.status == "optimal", res.message
    assert res.lower_bound <= -2.0 + 1e-8 and abs(res.value + 2.0) <= 1e-8 and P.contains(res.x, tol=1e-8)


def test_stalled_minimisation_stops_early_and_says_so():
    """tol = 1e-12 is below what cuts relaxed by oracle_tol = 1e-9 can certify: the run stops with status
    "stalled", the gap in its message, the best point and a valid bound, long before max_iter."""
    ball = Ball(np.zeros(6), 3.0)
    res = cutting_plane(ball, np.zeros(6), 10.0, objective=np.ones(6), tol=1e-12, stall=20)
    exact = -3.0 * math.sqrt(6.0)
    assert res.status == "stalled" and not res.success and res.iterations < 200
    assert "stalled" in res.message and f"{res.gap:.3g}" in res.message and res.gap > 1e-12
    assert res.lower_bound <= exact + 1e-8 and ball.contains(res.x, tol=1e-8) and res.value <= exact + 1e-6


@pytest.mark.parametrize("radius, start", [(1.5, 10.0), (2.0, 5.0), (3.0, 10.0), (4.0, 10.0), (5.0, 5.0)])
def test_six_dimensional_ball_reaches_tol_with_a_sound_bound(radius, start):
    """The issue's case: min Σx over a 6-d ball B(0, radius) searched from B(0, start), tol 1e-6. The analytic
    centre's multipliers alone certify no gap below 1.1e-6 at (3.0, 10.0) and 2.6e-4 at (5.0, 5.0), and at a
    centre outside the cuts (the phase-one LP's point, off by the LP's tolerance) they give a "bound" above
    the optimum; the LP bound over every cut and the float64 re-solve of the phase-one vertex settle both."""
    ball = Ball(np.zeros(6), radius)
    c = np.ones(6)
    res = cutting_plane(ball, np.zeros(6), start, objective=c, tol=1e-6)
    exact = -radius * math.sqrt(6.0)
    slack = 2e-9 * math.sqrt(6.0)  # x may lie oracle_tol = 1e-9 outside the ball
    assert res.status == "optimal", res.message
    assert res.lower_bound <= exact + slack and res.gap <= 1e-6  # a valid certificate
    assert exact - slack <= res.value <= exact + 1e-6 and ball.contains(res.x, tol=1e-8)


def test_random_six_dimensional_balls_reach_tol():
    """Balls off the origin with random objectives (oracle-only bodies) end optimal with a valid bound."""
    rng = np.random.default_rng(11)
    for _ in range(4):
        centre, radius, c = rng.normal(size=6), float(rng.uniform(1.0, 3.0)), rng.normal(size=6)
        ball = Ball(centre, radius)
        res = cutting_plane(OracleBody(6, separate=ball.separate), np.zeros(6), 10.0, objective=c, tol=1e-6)
        exact = float(c @ centre) - radius * float(np.linalg.norm(c))
        slack = 2e-9 * float(np.linalg.norm(c))
        assert res.status == "optimal" and res.lower_bound <= exact + slack <= res.value + 2 * slack
        assert res.value - exact <= 1e-6
