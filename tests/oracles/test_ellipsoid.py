"""The Ellipsoid update (central / deep / shallow / parallel) and the ellipsoid method."""
from __future__ import annotations

import math

import numpy as np
import pytest
from _problems import chebyshev_margin, flat_polytope, lp_min, random_polytope, sample_polytope
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import ellipsoids, nonzero_vectors, polytopes

from oracles import Ball, Cut, MissingOracleError, OracleBody, ParallelCut, Polytope
from oracles.ellipsoid import Ellipsoid, ellipsoid


def points_in(E: Ellipsoid, rng: np.random.Generator, k: int = 400) -> np.ndarray:
    """k points of E, including many near its boundary."""
    n = E.dim
    Z = rng.normal(size=(k, n))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    Z *= rng.uniform(0.0, 1.0, size=(k, 1)) ** (1.0 / (4 * n))
    return E.center + Z @ E.factor.T


def assert_spd(P: np.ndarray) -> None:
    assert np.allclose(P, P.T, atol=1e-12 * np.abs(P).max())
    assert np.linalg.eigvalsh(P).min() > 0


def cut_at_alpha(E: Ellipsoid, a: np.ndarray, alpha: float) -> Cut:
    """The cut aᵀy <= aᵀc - α‖Jᵀa‖ (depth alpha in E's units)."""
    return Cut(a, float(a @ E.center) - alpha * E.half_width(a))


# -- the update ---------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(E=ellipsoids(n=(1, 8)), frac=st.floats(-0.99, 0.999), data=st.data())
def test_single_cut_keeps_spd_shrinks_and_keeps_points(E, frac, data):
    """central (α=0), deep (α>0), shallow (-1/n<α<0): P stays SPD, log vol drops, E ∩ H ⊆ E'."""
    n = E.dim
    alpha = frac if frac >= 0 else frac / n  # shallow cuts live in (-1/n, 0)
    a = data.draw(nonzero_vectors(n), label="a")
    cut = cut_at_alpha(E, a, alpha)
    pts = points_in(E, np.random.default_rng(0))
    kept = pts[pts @ a <= cut.offset]
    before = E.log_volume
    assert math.isclose(E.alpha(cut), alpha, abs_tol=1e-9)
    assert E.update(cut) == "success"
    assert_spd(E.shape)
    assert E.log_volume < before
    sign, logdet = np.linalg.slogdet(E.shape)
    assert sign > 0 and math.isclose(0.5 * logdet, E.log_volume, rel_tol=1e-9, abs_tol=1e-9)
    assert np.all(E.contains(kept, tol=1e-9))


@settings(max_examples=20, deadline=None)
@given(E=ellipsoids(n=(2, 8)), data=st.data())
def test_central_cut_volume_factor(E, data):
    """A central cut shrinks the volume by at least exp(-1/(2(n+1))) (the textbook guarantee)."""
    n = E.dim
    a = data.draw(nonzero_vectors(n), label="a")
    before = E.log_volume
    E.update(Cut(a, float(a @ E.center)))
    assert E.log_volume - before <= -1.0 / (2 * (n + 1)) + 1e-12


@settings(max_examples=60, deadline=None)
@given(E=ellipsoids(n=(1, 8)), lo=st.floats(-1.5, 1.0), width=st.floats(0.01, 2.5), data=st.data())
def test_parallel_cut_keeps_spd_never_grows_and_keeps_points(E, lo, width, data):
    a = data.draw(nonzero_vectors(E.dim), label="a")
    tau, u0 = E.half_width(a), float(a @ E.center)
    cut = ParallelCut(a, u0 + lo * tau, u0 + (lo + width) * tau)
    pts = points_in(E, np.random.default_rng(0))
    proj = pts @ a
    kept = pts[(proj >= cut.lower) & (proj <= cut.upper)]
    before = E.log_volume
    status = E.update(cut)
    misses = lo + width < -1.0 or lo > 1.0
    touches = abs(lo + width + 1.0) < 1e-9 or abs(lo - 1.0) < 1e-9
    if misses or (touches and status == "empty"):  # the slab misses E (or only touches it)
        assert status == "empty" and kept.shape[0] == 0
        return
    assert status in ("success", "no_effect")
    assert_spd(E.shape)
    assert E.log_volume <= before + 1e-12
    if status == "no_effect":
        assert E.log_volume == before
    assert np.all(E.contains(kept, tol=1e-9))


@settings(max_examples=20, deadline=None)
@given(E=ellipsoids(n=(2, 8)), alpha=st.floats(-0.9, 0.9), data=st.data())
def test_update_matches_ellalgo(E, alpha, data):
    """Same centre and shape as ellalgo 0.9's Ell.update_bias_cut on deep and central cuts."""
    ellalgo = pytest.importorskip("ellalgo", reason="ellalgo (the reference implementation) not installed")
    alpha = abs(alpha)  # ellalgo refuses shallow cuts
    a = data.draw(nonzero_vectors(E.dim), label="a")
    ref = ellalgo.Ell(E.shape.copy(), E.center.copy())
    ref._mq = E.shape.copy()
    ref._kappa = 1.0
    beta = alpha * E.half_width(a)
    ref.update_bias_cut((a, beta))
    E.update(cut_at_alpha(E, a, alpha))
    assert np.allclose(E.center, ref.xc(), atol=1e-10)
    assert np.allclose(E.shape, ref._kappa * ref._mq, rtol=1e-8, atol=1e-10)


def test_update_statuses_and_unchanged_when_no_effect():
    E = Ellipsoid.ball(np.zeros(3), 1.0)
    a = np.array([1.0, 0.0, 0.0])
    assert E.update(Cut(a, -1.5)) == "empty"  # alpha = 1.5 > 1
    c, P = E.center, E.shape
    assert E.update(Cut(a, 0.5)) == "no_effect"  # alpha = -0.5 <= -1/3
    assert np.array_equal(E.center, c) and np.array_equal(E.shape, P)
    assert E.update(ParallelCut(a, 2.0, 3.0)) == "empty"
    assert E.update(ParallelCut(a, -2.0, 2.0)) == "no_effect"
    assert E.update(Cut(a, -0.2)) == "success"


def test_one_dimensional_cuts_are_exact_intervals():
    E = Ellipsoid.ball(np.array([0.0]), 1.0)
    assert E.update(Cut(np.array([2.0]), 1.0)) == "success"  # x <= 0.5 -> [-1, 0.5]
    assert np.allclose(E.center, [-0.25]) and np.allclose(E.shape, [[0.75 ** 2]])
    assert E.update(ParallelCut(np.array([1.0]), -0.5, 0.0)) == "success"  # [-0.5, 0]
    assert np.allclose(E.center, [-0.25]) and np.allclose(E.shape, [[0.25 ** 2]])


def test_semi_axes_and_containment():
    E = Ellipsoid(np.ones(2), np.diag([4.0, 0.25]))
    s, U = E.semi_axes()
    assert np.allclose(s, [0.5, 2.0]) and np.allclose(np.abs(U), [[0, 1], [1, 0]])
    assert E.contains(np.array([2.9, 1.0])) and not E.contains(np.array([1.0, 1.6]))
    assert np.array_equal(E.contains(np.array([[1.0, 1.0], [4.0, 1.0]])), [True, False])
    U, w = E.thin_axes(1.0)
    assert np.allclose(w, [0.5]) and np.allclose(np.abs(U[:, 0]), [0.0, 1.0])
    assert E.thin_axes(0.1)[1].size == 0


@pytest.mark.parametrize("args, match", [
    ((np.zeros(2), np.eye(3)), "shape"),
    ((np.zeros(2), np.array([[1.0, 2.0], [0.0, 1.0]])), "symmetric"),
    ((np.zeros(2), -np.eye(2)), "positive definite"),
    ((np.array([np.nan, 0.0]), np.eye(2)), "center"),
])
def test_ellipsoid_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        Ellipsoid(*args)


def test_zero_normal_and_wrong_cut_type():
    E = Ellipsoid.ball(np.zeros(2), 1.0)
    with pytest.raises(ValueError, match="non-zero"):
        E.update(Cut(np.zeros(2), 1.0))
    with pytest.raises(ValueError, match="shape"):
        E.update(Cut(np.ones(3), 1.0))
    with pytest.raises(TypeError, match="Cut"):
        E.update((np.ones(2), 1.0))
    with pytest.raises(ValueError, match="radius"):
        Ellipsoid.ball(np.zeros(2), -1.0)


# -- the method ---------------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(case=polytopes(n=(1, 7), slack=(-0.6, 1.0)), memory=st.sampled_from([0, None]))
def test_feasibility_agrees_with_lp(case, memory):
    """Random polytopes, some empty: "feasible" (with a point of P) iff the LP finds interior."""
    P, x0 = case.poly, case.x0
    n = P.dim
    margin = chebyshev_margin(P)
    assume(abs(margin) > 1e-3)
    R = float(np.linalg.norm(x0)) + 2.0 * math.sqrt(n) + 1.0
    res = ellipsoid(P, np.zeros(n), R, memory=memory)
    if margin > 0:
        assert res.status == "feasible"
        assert P.contains(res.x, tol=1e-9)
    else:
        assert res.status == "empty" and res.x is None
    assert np.all(np.diff(res.log_volumes) <= 1e-12)
    assert res.oracle_calls + res.recycled_cuts >= res.iterations


@settings(max_examples=15, deadline=None)
@given(case=polytopes(n=(2, 6), slack=(0.01, 0.05), box=0.05), stop=st.integers(1, 60), data=st.data())
def test_no_body_point_is_cut_away(case, stop, data):
    """After any number of updates, every sampled point of the body lies in the final ellipsoid."""
    P, x0 = case.poly, case.x0
    n = P.dim
    pts = sample_polytope(P, x0, np.random.default_rng(0))
    c = data.draw(nonzero_vectors(n), label="c")
    for objective in (None, c):
        res = ellipsoid(P, np.zeros(n), float(np.linalg.norm(x0)) + 1.0, objective=objective, max_iter=stop)
        E = Ellipsoid(res.center, res.shape)
        keep = pts if objective is None or res.value is None else pts[pts @ c <= res.value]
        assert np.all(E.contains(keep, tol=1e-7))


@settings(max_examples=12, deadline=None)
@given(case=polytopes(n=(1, 6)), data=st.data())
def test_minimisation_agrees_with_lp(case, data):
    P, x0 = case.poly, case.x0
    n = P.dim
    c = data.draw(nonzero_vectors(n), label="c")
    tol = 1e-6
    res = ellipsoid(P, np.zeros(n), float(np.linalg.norm(x0)) + 2.0 * math.sqrt(n) + 1.0, objective=c, tol=tol)
    opt = lp_min(P, c)
    assert res.status == "optimal"
    assert P.contains(res.x, tol=1e-9)
    assert res.value == pytest.approx(float(c @ res.x))
    assert opt - 1e-7 <= res.value <= opt + tol
    assert res.lower_bound <= opt + 1e-7 and res.value - res.lower_bound <= tol


def test_central_cut_mode_finds_a_point():
    rng = np.random.default_rng(7)
    P, x0 = random_polytope(rng, 5)
    res = ellipsoid(P, np.zeros(5), 10.0, cut="central")
    assert res.status == "feasible" and P.contains(res.x)
    assert res.recycled_cuts == 0


def test_flat_body_reported():
    """Hidden equalities, oracle tolerance 1e-12: the ellipsoid turns thin along their normals first."""
    rng = np.random.default_rng(3)
    P, F, g, x0 = flat_polytope(rng, 6, 2)
    res = ellipsoid(P, np.zeros(6), 20.0, flat_tol=1e-8, oracle_tol=1e-12)
    assert res.status == "flat" and res.is_flat and res.x is None
    assert np.all(res.flat_widths < 20.0 * 1e-8)
    U = res.flat_directions
    Fo = np.linalg.qr(F.T)[0]  # orthonormal basis of the true normal space
    assert np.allclose(np.linalg.norm(Fo.T @ U, axis=0), 1.0, atol=1e-6)  # flat directions are true normals
    # with flatness detection off it keeps cutting and finds a point of the (tolerance-)body
    res2 = ellipsoid(P, np.zeros(6), 20.0, flat_tol=0.0, oracle_tol=1e-9)
    assert res2.status == "feasible" and P.contains(res2.x, tol=1e-9)


def _disc_in_r4(centre: np.ndarray, radius: float) -> OracleBody:
    """The disc {x : x2 = x3 = 0, ‖x01 - centre‖ <= radius} in R^4, known only by its separation oracle
    (the deeper of the two violated cuts)."""

    def separate(x: np.ndarray) -> tuple[np.ndarray, float] | None:
        cuts = []
        off = float(np.linalg.norm(x[2:]))
        if off > 0:
            cuts.append((off, np.concatenate([[0.0, 0.0], x[2:] / off]), 0.0))
        d = x[:2] - centre
        r = float(np.linalg.norm(d))
        if r > radius:
            u = d / r
            cuts.append((r - radius, np.concatenate([u, [0.0, 0.0]]), float(u @ centre) + radius))
        if not cuts:
            return None
        _, a, b = max(cuts, key=lambda t: t[0])
        return a, b

    return OracleBody(4, separate=separate)


@pytest.mark.parametrize("seed", range(4))
def test_flat_disc_with_an_objective_is_optimised_in_its_flat(seed):
    """With an objective a flat body is not a stop: the run restricts to the flat and minimises there; x is
    feasible and optimal within tol, and the flat is reported."""
    rng = np.random.default_rng(seed)
    centre, radius, c = rng.normal(size=2), float(rng.uniform(0.5, 2.0)), rng.normal(size=4)
    body = _disc_in_r4(centre, radius)
    tol = 1e-7
    res = ellipsoid(body, rng.normal(size=4) * 0.1, 5.0 + float(np.linalg.norm(centre)), objective=c, tol=tol)
    exact = float(c[:2] @ centre) - radius * float(np.linalg.norm(c[:2]))
    assert res.status == "optimal", res.message
    assert body.contains(res.x, tol=1e-8) and abs(res.value - float(c @ res.x)) <= 1e-12
    assert exact - 1e-8 <= res.value <= exact + tol and res.value - res.lower_bound <= tol
    assert res.is_flat and res.flat_directions.shape == (4, 2) and "flat" in res.message
    # the thin directions are the disc's normals e2, e3
    assert np.allclose(np.linalg.norm(res.flat_directions[2:], axis=0), 1.0, atol=1e-6)


def test_flat_segment_and_polytopes_by_separation_agree_with_lp():
    """A segment in R^4 (three thin directions) and separation-only polytopes with hidden equalities."""
    seg = Polytope(np.vstack([np.eye(4), -np.eye(4)]), np.array([1.0, 0.5, 0.5, 0.5, 1.0, -0.5, -0.5, -0.5]))
    body = OracleBody(4, separate=seg.separate)  # x0 in [-1, 1], x1 = x2 = x3 = 0.5
    c = np.array([-1.0, 2.0, 0.3, -0.7])
    res = ellipsoid(body, np.zeros(4), 4.0, objective=c, tol=1e-7)
    assert res.status == "optimal" and seg.contains(res.x, tol=1e-8) and res.flat_widths.size == 3
    assert abs(res.value - lp_min(seg, c)) <= 1e-7
    for seed in range(3):
        rng = np.random.default_rng(seed)
        P, F, g, x0 = flat_polytope(rng, 5 + seed, 2)
        c = rng.normal(size=P.dim)
        res = ellipsoid(OracleBody(P.dim, separate=P.separate), np.zeros(P.dim), float(np.linalg.norm(x0)) + 10.0,
                        objective=c, tol=1e-6)
        opt = lp_min(P, c)
        assert res.status == "optimal" and P.contains(res.x, tol=1e-8), res.message
        assert opt - 1e-7 <= res.value <= opt + 1e-6 and res.lower_bound <= opt + 1e-7


def test_flat_run_goes_on_in_all_dimensions_when_the_flat_is_tilted(monkeypatch):
    """Cuts nearly orthogonal to the flat mean the flat is tilted against the body: the section's optimum is
    not trusted and the run goes on, certified, in all dimensions (forced here by counting every cut as steep)."""
    import importlib

    module = importlib.import_module("oracles.ellipsoid")  # the attribute oracles.ellipsoid is the function
    monkeypatch.setattr(module, "_STEEP", 2.0)
    body = _disc_in_r4(np.array([0.2, -0.1]), 1.0)
    c = np.array([1.0, -2.0, 0.4, 0.1])
    res = ellipsoid(body, np.full(4, 0.1), 5.0, objective=c, tol=1e-7)
    exact = float(c[:2] @ np.array([0.2, -0.1])) - float(np.linalg.norm(c[:2]))
    assert res.status == "optimal" and "went on in all dimensions" in res.message
    assert body.contains(res.x, tol=1e-8) and exact - 1e-8 <= res.value <= exact + 1e-7
    assert res.lower_bound <= exact + 1e-8
    # the thin axes reported when the flat was found (one or both of the disc's two normals, depending on
    # which had fallen below the flat level by then) lie in the disc's normal space span(e2, e3)
    assert 1 <= res.flat_widths.size <= 2 and res.flat_directions.shape == (4, res.flat_widths.size)
    assert np.abs(res.flat_directions[:2]).max() <= 1e-6


def test_thin_empty_body_certified_by_width():
    """x_0 <= 0 and x_0 >= 1e-6: the ellipsoid gets thinner than the oracle tolerance -> empty."""
    P = Polytope(np.array([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]]), np.array([0.0, -1e-6]))
    res = ellipsoid(P, np.zeros(3), 10.0, flat_tol=0.0, oracle_tol=1e-8)
    assert res.status == "empty"


def test_ball_and_oracle_body():
    res = ellipsoid(Ball(np.full(4, 3.0), 0.5), np.zeros(4), 10.0)
    assert res.status == "feasible" and np.linalg.norm(res.x - 3.0) <= 0.5 + 1e-9
    body = OracleBody(2, separate=lambda x: None if x[0] >= 1 else (np.array([-1.0, 0.0]), -1.0))
    res = ellipsoid(body, np.zeros(2), 5.0)
    assert res.status == "feasible" and res.x[0] >= 1 - 1e-9
    res = ellipsoid(Ball(np.zeros(2), 1.0), np.full(2, 50.0), 1.0)  # the body misses the start ball
    assert res.status == "empty"


def test_max_iter_status():
    rng = np.random.default_rng(0)
    P, x0 = random_polytope(rng, 8, shift=(0.001, 0.002), box=0.001)
    res = ellipsoid(P, np.zeros(8), 10.0, max_iter=5)
    assert res.status == "max_iter" and res.iterations == 5 and not res.success


def test_missing_separation_oracle():
    body = OracleBody(3, contains=lambda x: True)
    with pytest.raises(MissingOracleError, match="separate"):
        ellipsoid(body, np.zeros(3), 1.0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(center=np.zeros(2)), "center"),
    (dict(center=np.array([0.0, np.nan, 0.0])), "center"),
    (dict(radius=-1.0), "radius"),
    (dict(radius=np.inf), "radius"),
    (dict(objective=np.ones(2)), "objective"),
    (dict(objective=np.zeros(3)), "objective"),
    (dict(tol=0.0), "tol"),
    (dict(max_iter=0), "max_iter"),
    (dict(cut="shallow"), "cut"),
    (dict(memory=-1), "memory"),
    (dict(memory=2.5), "memory"),
    (dict(flat_tol=-1.0), "flat_tol"),
])
def test_bad_input(kwargs, match):
    args = dict(center=np.zeros(3), radius=1.0)
    args.update(kwargs)
    center, radius = args.pop("center"), args.pop("radius")
    with pytest.raises(ValueError, match=match):
        ellipsoid(Ball(np.zeros(3), 1.0), center, radius, **args)
    with pytest.raises(TypeError, match="ConvexBody"):
        ellipsoid("not a body", np.zeros(3), 1.0)


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("share", [0.3, 0.9])
def test_a_rounding_allowance_below_tol_still_ends_optimal(n, share):
    """From a radius where the rounding allowance 16·n·eps·R is `share` of tol (R ~ 3e5-1e6 at tol 1e-8): the
    gap first comes within tol with the allowance still on top; that stopped 'max_iter' ("the gap reached
    the rounding level 1.3e-08 > tol") on every one of these runs. Only an allowance >= tol may stop so."""
    R = share * 1e-8 / (16 * n * np.finfo(float).eps)
    c = np.ones(n) / np.sqrt(n)
    for body in (Ball(np.zeros(n), 1.0), Polytope(np.vstack([-np.eye(n), np.ones((1, n))]), np.r_[np.ones(n), 1.0])):
        res = ellipsoid(OracleBody(n, separate=body.separate), np.zeros(n), R, objective=c, tol=1e-8, flat_tol=0.0)
        assert res.status == "optimal", res.message
        low = -1.0 if isinstance(body, Ball) else -np.sqrt(n)
        assert abs(res.value - low) <= 1e-8 and res.value - res.lower_bound <= 1e-8 and res.lower_bound <= low
