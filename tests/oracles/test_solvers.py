"""The solver registry: availability, MOSEK licence handling, input checks, LP/QP agreement, LPModel."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
from conftest import backend_param
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import gaussian_like, grid_arrays, nonzero_vectors

from oracles import EmptyBodyError, Polytope, SolverError, UnboundedError, solvers
from oracles.solvers import backend_mosek


def test_available_is_usable_subset_with_defaults():
    avail = solvers.available()
    assert set(avail) <= set(solvers.registered())
    assert {"HIGHS", "CLARABEL", "SCS"} <= set(avail)
    for kind in solvers.KINDS:
        assert solvers.default(kind) in solvers.available(kind)
        assert kind in solvers.capabilities(solvers.default(kind))
    assert solvers.default("lp") == "HIGHS"
    assert solvers.default("qp") in ("CLARABEL", "MOSEK")


def test_unknown_solver_and_kind_are_value_errors():
    with pytest.raises(ValueError, match="solver"):
        solvers.solve_lp(np.ones(2), np.eye(2), np.ones(2), solver="GUROBI_NOT_HERE")
    with pytest.raises(ValueError, match="solver"):
        solvers.get(3)
    with pytest.raises(ValueError, match="kind"):
        solvers.default("sdp-ish")


@pytest.mark.skipif(solvers.unavailable_reason("MOSEK") is None, reason="MOSEK is licensed here: nothing to refuse")
def test_explicit_mosek_without_licence_says_why():
    why = solvers.unavailable_reason("MOSEK")
    assert "MOSEK" not in solvers.available()
    with pytest.raises(SolverError, match="MOSEK") as info:
        solvers.solve_lp(np.ones(2), -np.eye(2), np.zeros(2), solver="mosek")
    assert info.value.backend == "MOSEK" and info.value.status == "unavailable"
    assert why in str(info.value)


def test_licence_probe_catches_a_failing_checkout(monkeypatch):
    """A mosek module that imports but cannot check out a licence makes MOSEK unusable, with the reason."""
    fake = types.ModuleType("mosek")

    class Error(Exception):
        pass

    class Env:
        def checkoutlicense(self, feature):
            raise Error("rescode.err_missing_license_file(1008): License cannot be located")

    fake.Error, fake.Env = Error, Env
    fake.feature = types.SimpleNamespace(pton="pton")
    monkeypatch.setitem(sys.modules, "mosek", fake)
    backend_mosek.licence_status.cache_clear()
    try:
        ok, why = backend_mosek.licence_status()
        assert not ok and "licence" in why and "1008" in why
    finally:
        backend_mosek.licence_status.cache_clear()


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(c=[1.0, np.nan], A_ub=np.eye(2), b_ub=np.ones(2)), "c"),
        (dict(c=[1.0, 1.0], A_ub=np.eye(3), b_ub=np.ones(3)), "A_ub"),
        (dict(c=[1.0, 1.0], A_ub=np.eye(2), b_ub=np.ones(3)), "b_ub"),
        (dict(c=[1.0, 1.0], A_ub=np.eye(2), b_ub=[1.0, np.inf]), "b_ub"),
        (dict(c=[1.0, 1.0], A_eq=np.ones((1, 2)), b_eq=None), "b_eq"),
        (dict(c=[1.0, 1.0], bounds=[(0, 1)]), "bounds"),
        (dict(c=[1.0, 1.0], bounds=(2.0, 1.0)), "bounds"),
        (dict(c=np.ones((2, 2))), "c"),
    ],
)
def test_bad_lp_input_names_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        solvers.solve_lp(**kwargs)


def _random_lp(seed: int, n: int, m: int):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((m, n))
    x0 = rng.standard_normal(n)
    b = A @ x0 + rng.uniform(0.1, 1.0, m)
    E = rng.standard_normal((1, n))
    return rng.standard_normal(n), A, b, E, E @ x0


@st.composite
def random_lps(draw, n=st.integers(1, 6), m=st.integers(1, 12)):
    """(c, A, b, E, e) as ``_random_lp``, drawn structured: m inequalities with slack in [0.1, 1] at a point
    x0 and one equality through x0."""
    n_, m_ = draw(n), draw(m)
    A = draw(gaussian_like((m_, n_)))
    x0 = draw(gaussian_like(n_))
    b = A @ x0 + draw(grid_arrays(m_, 0.1, 1.0))
    E = draw(nonzero_vectors(n_))[None]
    return draw(gaussian_like(n_)), A, b, E, E @ x0


@pytest.mark.parametrize("backend", backend_param("lp"))
@settings(max_examples=8, deadline=None)
@given(lp=random_lps())
def test_lp_matches_highs_and_satisfies_kkt(backend, lp):
    c, A, b, E, e = lp
    box = (-3.0, 3.0)  # keeps every LP bounded
    ref = solvers.solve_lp(c, A, b, E, e, box, solver="HIGHS")
    sol = solvers.solve_lp(c, A, b, E, e, box, solver=backend)
    assert sol.backend == backend
    assert abs(sol.value - ref.value) <= 1e-6 * (1 + abs(ref.value))
    assert np.max(A @ sol.x - b) <= 1e-7 and np.max(np.abs(E @ sol.x - e)) <= 1e-7
    assert np.all(sol.x >= box[0] - 1e-7) and np.all(sol.x <= box[1] + 1e-7)
    assert np.all(sol.dual_ub >= 0)


@pytest.mark.parametrize("backend", backend_param("qp"))
def test_qp_duals_satisfy_kkt(backend):
    """min ½‖x‖² with active constraints: x + Aᵀλ + Eᵀμ = 0, λ >= 0, λ ⊥ slack."""
    rng = np.random.default_rng(7)
    n, m = 6, 25
    A = rng.standard_normal((m, n))
    x0 = np.full(n, 2.0)
    b = A @ x0 + rng.uniform(0.0, 1.0, m)
    E = rng.standard_normal((1, n))
    sol = solvers.solve_qp(np.eye(n), np.zeros(n), A, b, E, E @ x0, solver=backend)
    x = sol.x
    assert np.linalg.norm(x) > 0.1  # the origin is cut off: constraints are active
    assert np.max(A @ x - b) <= 1e-7
    assert np.max(np.abs(x + A.T @ sol.dual_ub + E.T @ sol.dual_eq)) <= 1e-5
    assert np.min(sol.dual_ub) >= 0
    assert abs(sol.dual_ub @ (b - A @ x)) <= 1e-6
    assert abs(sol.value - 0.5 * x @ x) <= 1e-6


@pytest.mark.parametrize("backend", backend_param("lp"))
def test_status_mapping(backend):
    with pytest.raises(EmptyBodyError):
        solvers.solve_lp(np.ones(2), np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([0.0, -1.0]), solver=backend)
    with pytest.raises(UnboundedError):
        solvers.solve_lp(-np.ones(2), -np.eye(2), np.zeros(2), solver=backend)


def test_interior_solve_gives_a_relative_interior_point(flat_case):
    case = flat_case(3, 8, 2, 60)
    P = case.poly
    x = solvers.solve_lp(np.zeros(P.dim), P.A, P.b, interior=True).x
    slack = (P.b - P.A @ x) / np.linalg.norm(P.A, axis=1)
    others = np.setdiff1d(np.arange(P.A.shape[0]), case.eq_rows)
    assert np.max(slack[case.eq_rows]) < 1e-6 < 1e-2 < np.min(slack[others])


@pytest.mark.parametrize("backend", backend_param("lp"))
@pytest.mark.parametrize("with_eq", [False, True])
def test_lp_model_resolves_and_grows(backend, with_eq):
    c, A, b, E, e = _random_lp(11, 5, 30)
    poly = Polytope(A, b, E, e) if with_eq else Polytope(A, b)
    model = solvers.LPModel(poly, solver=backend)
    rng = np.random.default_rng(0)
    for _ in range(3):
        c = rng.standard_normal(5)
        got = model.minimize(c).value
        want = solvers.solve_lp(c, poly.A, poly.b, *((E, e) if with_eq else (None, None))).value
        assert abs(got - want) <= 1e-6 * (1 + abs(want))
    value, x = model.maximize(c)
    assert abs(value - c @ x) <= 1e-6 * (1 + abs(value))
    # a new row cutting off the last maximiser changes the optimum; the kept model must see it
    model.add_halfspaces(c[None, :], [value - 0.1])
    poly.add_halfspaces(c[None, :], [value - 0.1])
    value2, x2 = model.maximize(c)
    assert abs(value2 - (value - 0.1)) <= 1e-6 * (1 + abs(value))
    assert poly.contains(x2, tol=1e-6)
    assert model.n_solves == 5


def test_lp_model_rejects_bad_costs():
    model = solvers.LPModel(np.eye(2), np.ones(2), bounds=(-5, None))
    with pytest.raises(ValueError, match="c"):
        model.minimize([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="algorithm"):
        solvers.LPModel(np.eye(2), np.ones(2), algorithm="barrier")


def test_maximize_explicit_matches_closed_form():
    from oracles import Ball

    body = Polytope(np.vstack([np.eye(3), -np.eye(3)]), np.ones(6)) & Ball(np.zeros(3), 1.2)
    c = np.array([1.0, 2.0, -0.5])
    for backend in solvers.available("conic"):
        value, x = solvers.maximize_explicit(body, c, solver=backend)
        assert abs(value - c @ x) <= 1e-5
        assert body.contains(x, tol=1e-6)
        # the ball touches the cube's faces only where |x_i| <= 1: compare with the Ball's own maximiser
        # when that lies inside the cube, otherwise just check optimality against a fine cvxpy-free bound
        assert value <= 1.2 * np.linalg.norm(c) + 1e-6 and value <= np.abs(c).sum() + 1e-6


@pytest.mark.skipif(solvers.unavailable_reason("MOSEK") is None, reason="MOSEK is licensed here")
def test_backend_failure_inside_cvxpy_is_a_solver_error(monkeypatch):
    """Even if the probe wrongly said yes, a failing MOSEK solve surfaces as oracles.SolverError."""
    monkeypatch.setitem(solvers._probe_cache, "MOSEK", (True, "ok (forced by the test)"))
    with pytest.raises(SolverError) as info:
        solvers.solve_lp(np.ones(2), -np.eye(2), np.zeros(2), solver="MOSEK")
    assert info.value.backend == "MOSEK"


@pytest.mark.parametrize("name", solvers.registered())
def test_backends_declare_their_capabilities(name):
    """kinds follow the SUPPORTS_* attributes; WARM_START / FIRST_ORDER_LP promise working methods."""
    be = solvers._REGISTRY[name]
    assert isinstance(be, solvers.Backend)
    assert be.kinds == {
        k for k, ok in (("lp", be.SUPPORTS_LP), ("qp", be.SUPPORTS_QP), ("conic", be.SUPPORTS_CONIC)) if ok
    }
    assert solvers.capabilities(name) == be.kinds
    lp = solvers.ProblemData(
        np.ones(2), np.eye(2), np.ones(2), np.zeros((0, 2)), np.zeros(0), np.zeros(2), np.full(2, np.inf)
    )
    assert be.supports(lp) == be.SUPPORTS_LP and be.supports("qp") == be.SUPPORTS_QP
    assert isinstance(be.SMALL_LP_OPTIONS, dict)
    if not be.WARM_START:
        with pytest.raises(NotImplementedError):
            be.kept_model(lp)
    if not be.FIRST_ORDER_LP:
        with pytest.raises(NotImplementedError):
            be.first_order_options(10)


def test_warm_start_and_first_order_backends_work():
    be = solvers.get("HIGHS")
    assert be.WARM_START and be.FIRST_ORDER_LP and be.INTERIOR_SOLUTIONS
    assert not solvers.get("SCS").INTERIOR_SOLUTIONS
    model = solvers.LPModel(np.vstack([np.eye(2), -np.eye(2)]), np.ones(4), solver="HIGHS")
    assert model._kept is not None
    assert model.maximize(np.array([1.0, 2.0]))[0] == pytest.approx(3.0)
    sol = solvers.solve_lp(
        np.array([1.0, 1.0]),
        -np.eye(2),
        -np.ones(2),
        bounds=(-5.0, 5.0),
        solver="HIGHS",
        options=be.first_order_options(max_iter=5000),
    )
    assert sol.value == pytest.approx(2.0, abs=1e-3)


# max a x over 4 rows in 3 free variables: HiGHS 1.16's IPX never stops on it (938,000 iterations in 20 s)
_IPX_CYCLES = (
    np.array(
        [[-0.258, -2.7298, 0.2652], [1.06, -0.1343, 1.9851], [0.3473, 1.2107, -0.4645], [-0.7081, 0.7223, -1.2665]]
    ),
    np.array([0.428, -2.2754, 0.205, 1.8769]),
    np.array([-0.9217, 0.1506, -0.3575]),
)


def test_an_lp_ipx_cycles_on_is_solved_by_the_simplex_instead():
    """The HiGHS backend caps IPX's iterations (IPM_ITERATION_LIMIT) and solves again with the simplex: the
    optimum the simplex alone finds, for one solve and for a kept model."""
    from oracles.solvers._base import prepare
    from oracles.solvers.backend_highs import IPM_ITERATION_LIMIT, HighsModel

    A, b, a = _IPX_CYCLES
    free = (np.full(3, -np.inf), np.full(3, np.inf))
    ref = solvers.solve_lp(-a, A, b, bounds=free, options={"solver": "simplex"})
    sol = solvers.solve_lp(-a, A, b, bounds=free)
    assert sol.value == pytest.approx(ref.value, abs=1e-9) and np.all(A @ sol.x <= b + 1e-9)
    assert IPM_ITERATION_LIMIT <= 10_000
    model = HighsModel(prepare(-a, A, b, None, None, free), algorithm="ipm")
    for c in (-a, a):  # the kept model goes on with the IPM for the next objective
        assert model.minimize(c).value == pytest.approx(
            solvers.solve_lp(c, A, b, bounds=free, options={"solver": "simplex"}).value, abs=1e-9
        )


def test_highs_models_take_the_size_of_the_thread_s_scheduler():
    """Every model the engine makes sets ``threads`` to this thread's scheduler size (probed once): HiGHS runs
    it (an explicit size that differs is refused), in this thread and in a new one."""
    import threading

    import highspy

    from oracles.solvers.backend_highs import HighsBackend, scheduler_threads

    def check(out: list[object]) -> None:
        k = scheduler_threads()
        h = HighsBackend.new_model(algorithm="simplex")
        h.addVar(0.0, 1.0)
        out.extend([k, h.getOptions().threads, h.run()])

    here: list[object] = []
    check(here)
    assert here[0] == here[1] and here[2] == highspy.HighsStatus.kOk
    there: list[object] = []
    t = threading.Thread(target=check, args=(there,))
    t.start()
    t.join()
    assert there[0] == there[1] and there[2] == highspy.HighsStatus.kOk


def test_a_run_refused_for_its_thread_count_is_solved_with_the_default():
    """A model made while the probed size was stale (the scheduler was reset to another size since): HiGHS
    refuses the run, the backend runs it again with threads = 0, and the next model is probed afresh."""
    import highspy

    from oracles.solvers import backend_highs as bh

    k = bh.scheduler_threads()
    raw = highspy.Highs()
    raw.setOptionValue("output_flag", False)
    raw.setOptionValue("threads", k + 1)
    raw.addVar(0.0, 1.0)
    assert raw.run() == highspy.HighsStatus.kError  # (what the guard is for)
    A = np.array([[1.0, 1.0], [1.0, -1.0]])
    b = np.array([1.0, 0.5])
    ref = solvers.solve_lp(np.array([-1.0, -2.0]), A, b, bounds=(0.0, None))
    bh._SCHEDULER.threads = k + 1
    try:
        sol = solvers.solve_lp(np.array([-1.0, -2.0]), A, b, bounds=(0.0, None))
        assert sol.value == pytest.approx(ref.value, abs=1e-12)
        assert getattr(bh._SCHEDULER, "threads", None) is None
        assert bh.scheduler_threads() == k
    finally:
        bh._SCHEDULER.threads = k
    # a model already solved, run again unchanged with a refused size (HiGHS then keeps the old model status):
    # run again with the default
    raw.setOptionValue("threads", k)
    bh.run(raw)
    raw.setOptionValue("threads", k + 1)
    bh.run(raw)
    assert raw.getOptions().threads == 0 and raw.getModelStatus() == highspy.HighsModelStatus.kOptimal
