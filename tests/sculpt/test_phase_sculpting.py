"""Phase 2 (sculpt.phases.sculpting and the batched simplex regression in sculpt.phases._simplex)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog, minimize
from strategies import gaussian_like, grid_arrays, pm_one, well_conditioned

from oracles import Polytope, RankOneRows
from sculpt.data import plant, sample_inputs
from sculpt.errors import PhaseFailed
from sculpt.phases._simplex import SMALL_K, affine_weights, simplex_lstsq, token_distances
from sculpt.phases.sculpting import BodyMode, SculptedBody, SpanRule, sculpt
from sculpt.settings import BodySettings, Settings


def learn_body(X: np.ndarray, m: int, mode: BodyMode = "halfspaces", **overrides: object) -> BodySettings:
    """The body settings ``learn`` resolves for this data: phase 2's half-space body (``sculpt``) or K*
    (``refine.slabs``), with ``overrides``."""
    N, k, d = X.shape
    s = Settings().resolve(d, k, m, N)
    return (s.sculpt if mode == "halfspaces" else s.refine.slabs).merged(overrides)


def _affine_reference(B: np.ndarray, y: np.ndarray) -> np.ndarray:
    """argmin_{Σq=1} ‖y − qᵀB‖ by the null-space method (one row)."""
    k = B.shape[0]
    q0 = np.full(k, 1.0 / k)
    N = np.linalg.svd(np.ones((1, k)))[2][1:].T            # basis of {v: Σv = 0}
    z = np.linalg.lstsq(B.T @ N, y - B.T @ q0, rcond=None)[0]
    return q0 + N @ z


@settings(max_examples=25, deadline=None)
@given(k=st.integers(2, 5), d=st.integers(5, 8), data=st.data())
def test_batched_fit_matches_per_row_reference(k, d, data):
    # independent tokens and an invertible W (condition numbers <= 10): each row's fit is unique
    X = np.stack([data.draw(well_conditioned(k, d, scale=3.0), label=f"X[{n}]") for n in range(6)])
    W = data.draw(well_conditioned(d, d, scale=3.0), label="W")
    Y = data.draw(gaussian_like((6, k, d)), label="Y")
    fit = simplex_lstsq(X, Y, W)
    for n in range(6):
        for a in range(k):
            q = _affine_reference(X[n] @ W, Y[n, a])
            np.testing.assert_allclose(fit.q[n, a], q, rtol=1e-6, atol=1e-6)
            res = np.linalg.norm(Y[n, a] - q @ X[n] @ W)
            assert fit.residual[n, a] == pytest.approx(res, rel=1e-6, abs=1e-9)


@settings(max_examples=25, deadline=None)
@given(k=st.integers(2, 5), data=st.data())
def test_single_pattern_rows_are_recovered_exactly(k, data):
    d = 8
    X = data.draw(pm_one((20, k, d)), label="X")
    W = data.draw(well_conditioned(d, d, scale=3.0), label="W")
    q = data.draw(grid_arrays((20, k, k), 0.0, 1.0), label="weights") + 1e-3
    q /= q.sum(axis=-1, keepdims=True)                        # row a of example n uses pattern q[n, a]
    Y = q @ (X @ W)
    ok = np.linalg.matrix_rank(X @ W) == k
    fit = simplex_lstsq(X, Y, W)
    np.testing.assert_allclose(fit.q[ok], q[ok], atol=1e-7)
    assert np.all(fit.rel[ok] < 1e-8)


@pytest.mark.parametrize("k", [3, SMALL_K, SMALL_K + 2])
def test_affine_weights_solve_the_kkt_system_on_both_paths(k):
    """The Schur-complement Cholesky path (k <= SMALL_K) and numpy's LU of the KKT matrix (larger k) give the
    constrained minimiser: weights summing to 1 and the KKT solution's fitted rows, duplicate tokens included."""
    rng = np.random.default_rng(k)
    B = rng.standard_normal((40, k, 9))
    B[:5, 1] = B[:5, 0]  # duplicate tokens: G is singular but for the ridge
    R = B @ rng.standard_normal((40, 9, 2))
    Q = affine_weights(B, R)
    G = B @ B.transpose(0, 2, 1)
    K = np.zeros((40, k + 1, k + 1))
    K[:, :k, :k] = G + 1e-12 * (np.einsum("nii->n", G) / k)[:, None, None] * np.eye(k)
    K[:, :k, k] = K[:, k, :k] = 1.0
    ref = np.linalg.solve(K, np.concatenate([R, np.ones((40, 1, 2))], 1))[:, :k]
    np.testing.assert_allclose(Q.sum(1), 1.0, atol=1e-9)
    np.testing.assert_allclose(Q[5:], ref[5:], atol=1e-8)
    # the duplicate-token systems (pivots 1e12 apart) are solved by the same LU as the reference
    np.testing.assert_allclose(Q[:5], ref[:5], rtol=1e-12, atol=1e-12)
    fitted = lambda q: np.einsum("nja,njd->nad", q, B)  # noqa: E731
    np.testing.assert_allclose(fitted(Q), fitted(ref), atol=1e-8)


def test_simplex_solution_agrees_with_constrained_solver_when_nonnegative():
    rng = np.random.default_rng(5)
    k, d = 4, 6
    X = rng.standard_normal((30, k, d))
    W = rng.standard_normal((d, d))
    Y = rng.dirichlet(np.ones(k), size=(30, k)) @ (X @ W) + 0.01 * rng.standard_normal((30, k, d))
    fit = simplex_lstsq(X, Y, W)
    checked = 0
    for n in range(30):
        for a in range(k):
            if fit.q[n, a].min() < 1e-3:
                continue
            B = X[n] @ W
            r = minimize(lambda q: np.sum((Y[n, a] - q @ B) ** 2), np.full(k, 1 / k), method="SLSQP",
                         bounds=[(0, 1)] * k, constraints=[{"type": "eq", "fun": lambda q: q.sum() - 1}],
                         options={"ftol": 1e-14, "maxiter": 500})
            np.testing.assert_allclose(fit.q[n, a], r.x, atol=1e-4)
            checked += 1
    assert checked > 10


def test_token_distances_are_twice_root_hamming_for_boolean_tokens():
    X = sample_inputs(5, 4, 9, rng=0)
    D = token_distances(X)
    H = (X[:, :, None, :] != X[:, None, :, :]).sum(-1)
    np.testing.assert_allclose(D, 2 * np.sqrt(H), atol=1e-9)


@pytest.fixture(scope="module")
def planted():
    model = plant(6, 4, 2, seed=11)
    X = sample_inputs(12000, 4, 6, rng=12)
    return model, X, model(X)


def test_halfspace_body_contains_heads_with_exact_sum_w(planted):
    model, X, Y = planted
    body, rec = sculpt(X, Y, model.ws.sum(0), learn_body(X, 2), truth=model)
    assert isinstance(body, SculptedBody) and isinstance(body.polytope, Polytope)
    assert body.polytope.dim == 36 and body.F.shape == (0, 36)
    assert rec.figures["halfspaces_kept"] > 100
    # documented slack: the heads lie in K or within half a nat of it; almost every constraint holds outright
    assert rec.truth["max_violation"] <= 0.5
    assert rec.truth["halfspace_violated_frac_raw"] < 0.01
    th = model.thetas.reshape(2, -1)
    A, b = body.constraints()
    assert np.all(th @ A.T - b <= rec.truth["max_violation"] + 1e-9)
    assert np.all(np.abs(th) <= body.box)


def test_slab_body_fills_equalities_consistent_with_heads(planted):
    model, X, Y = planted
    body, rec = sculpt(X, Y, model.ws.sum(0), learn_body(X, 2, "slabs"), mode="slabs", truth=model)
    n = body.F.shape[0]
    assert n > 36 and body.g.shape == (n,) and body.weights.shape == (n,)
    assert np.all(body.weights >= 0.02)
    # the equalities hold for every head up to a weighted RMS error well below their spread (nats)
    r = model.thetas.reshape(2, -1) @ body.F.T - body.g
    rms = np.sqrt(np.average(r ** 2, weights=np.broadcast_to(body.weights, r.shape)))
    assert rms < 0.6 < np.sqrt(np.average(body.g ** 2, weights=body.weights))
    assert rec.truth["span_angle_deg"] < 10.0
    # the slabs are in the polytope: the weighted least-squares point of F θ ≈ g lies in it (up to the box)
    assert body.polytope.n_constraints == rec.figures["n_constraints"]


def test_slab_body_polytope_is_built_on_first_read_from_its_stated_rows(planted):
    """``SculptedBody.polytope`` is assembled when first read, once, and is exactly {A θ <= b} ∩ {|F θ − g| <=
    slab_widths} ∩ {|θ_p| <= box}: membership of random points agrees with those rows evaluated directly."""
    model, X, Y = planted
    body, rec = sculpt(X, Y, model.ws.sum(0), learn_body(X, 2, "slabs"), mode="slabs")
    assert body._polytope is None and body.n_constraints == rec.figures["n_constraints"]
    poly = body.polytope
    assert body.polytope is poly and poly.n_constraints == body.n_constraints and poly.dim == body.dim == 36
    A, b = body.halfspaces
    rng = np.random.default_rng(0)
    # a point of the stated rows (an LP over them, not over the polytope), and points around it
    rows = np.vstack([A, body.F, -body.F])
    rhs = np.concatenate([b, body.g + body.slab_widths, body.slab_widths - body.g])
    lp = linprog(np.zeros(36), A_ub=rows, b_ub=rhs, bounds=[(-body.box, body.box)] * 36, method="highs")
    assert lp.status == 0
    pts = lp.x + rng.standard_normal((400, 36)) * rng.choice([0.0, 1e-3, 1e-2, 0.1], (400, 1))
    inside = (
        np.all(pts @ A.T <= b + 1e-9, axis=1)
        & np.all(np.abs(pts @ body.F.T - body.g) <= body.slab_widths + 1e-9, axis=1)
        & np.all(np.abs(pts) <= body.box + 1e-9, axis=1)
    )
    assert 0 < inside.sum() < len(pts)  # points on both sides
    assert [poly.contains(x) for x in pts] == inside.tolist()


def test_slab_body_with_too_few_equalities_for_phase_4_stops_before_its_lps(planted, monkeypatch):
    """``need_equalities`` above what the rows give phase 4 (the span rows, a superset of K*'s slab rows):
    PhaseFailed naming both counts, and no LP was started."""
    import sculpt.phases.sculpting as sculpting

    model, X, Y = planted
    kstar = learn_body(X, 2, "slabs")
    body, _ = sculpt(X, Y, model.ws.sum(0), kstar, mode="slabs")
    have = body.span_F.shape[0]
    assert have >= body.F.shape[0] > 0

    def no_lp(*args, **kwargs):
        raise AssertionError("an LP or feasibility search ran")

    for name in _FEASIBILITY_SEARCHES:
        monkeypatch.setattr(sculpting, name, no_lp)
    with pytest.raises(PhaseFailed, match=f"has {have} equality rows, fewer than the {have + 1}") as info:
        sculpt(X, Y, model.ws.sum(0), kstar, mode="slabs", need_equalities=have + 1)
    assert info.value.phase == "2-sculpt"  # its own record's name: the pipeline names the phase that called it


#: every LP or feasibility search phase 2 may run (names in sculpt.phases.sculpting)
_FEASIBILITY_SEARCHES = (
    "hinge_feasible_point",
    "feasible_point_on_flat",
    "first_order_feasible_point",
    "min_total_violation",
    "min_max_violation",
)


def test_sum_w_error_breaks_containment_more(planted):
    model, X, Y = planted
    S = model.ws.sum(0)
    _, good = sculpt(X, Y, S, learn_body(X, 2), truth=model)
    E = np.random.default_rng(0).standard_normal(S.shape)
    _, bad = sculpt(X, Y, S + 0.3 * np.linalg.norm(S) * E / np.linalg.norm(E), learn_body(X, 2), truth=model)
    assert bad.truth["halfspace_violated_frac_raw"] > good.truth["halfspace_violated_frac_raw"]


@pytest.mark.parametrize("kw, match", [
    (dict(mode="both"), "mode"),
    (dict(W_sum=np.zeros((5, 5))), "W_sum"),
    (dict(W_sum=np.full((6, 6), np.nan)), "W_sum"),
    (dict(X=np.zeros((4, 1, 6)), Y=np.zeros((4, 1, 6))), "k >= 2"),
])
def test_bad_input(planted, kw, match):
    model, X, Y = planted
    args = dict(X=X[:200], Y=Y[:200], W_sum=model.ws.sum(0))
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        sculpt(args.pop("X"), args.pop("Y"), args.pop("W_sum"), learn_body(X, 2), **args)


@pytest.mark.parametrize("bad", [{"box": -1.0}, {"n_rows": 0}, {"eta0": -0.1}, {"lp_max_variables": 0}])
def test_bad_body_settings_are_refused_before_any_work(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        BodySettings().merged(bad)


def test_unresolved_settings_resolve_for_the_mode_as_for_one_head(planted):
    """``sculpt`` fills "auto" fields itself: with none given it builds the body ``learn`` builds for m <= 2."""
    model, X, Y = planted
    Xs, Ys = X[:3000], Y[:3000]
    for mode in ("halfspaces", "slabs"):
        body, rec = sculpt(Xs, Ys, model.ws.sum(0), mode=mode)
        ref, ref_rec = sculpt(Xs, Ys, model.ws.sum(0), learn_body(Xs, 2, mode), mode=mode)
        assert rec.figures["rows_accepted"] == ref_rec.figures["rows_accepted"]
        assert np.array_equal(body.halfspaces[1], ref.halfspaces[1]) and np.array_equal(body.F, ref.F)


def test_eta_star_route_is_recorded_and_exact():
    """η* (the least uniform slack making the body non-empty) is found by a route the record names; when a
    checked feasible point proves η* = 0, no true constraint was loosened beyond η₀."""
    from sculpt.data import plant as _plant
    from sculpt.data import sample_inputs as _sample
    from sculpt.phases.sculpting import sculpt as _sculpt

    model = _plant(6, 4, 1, seed=2)
    X = _sample(3000, 4, 6, rng=3)
    Y = model(X)
    body, rec = _sculpt(X, Y, model.ws.sum(0), learn_body(X, 1, "slabs"), mode="slabs", truth=model)
    route = rec.figures["eta_star_by"]
    assert isinstance(route, str) and route
    assert rec.figures["eta_star"] >= 0
    if rec.figures["eta_star"] == 0:
        A, b = body.constraints()
        assert np.all(A @ model.thetas[0].reshape(-1) <= b + 1e-6)   # the true head satisfies every row


def test_a_body_too_large_for_lps_is_bounded_at_the_hinge_point(monkeypatch):
    """Above lp_max_entries (rows × variables) an infeasible half-space system gets no LP: half-spaces the
    hinge point violates by more than hinge_infeasible are trimmed and η* is the kept rows' worst violation
    there, so the body is non-empty (an LP over it finds a point with zero slack)."""
    import sculpt.phases.sculpting as sculpting
    from oracles import min_max_violation
    from sculpt.phases.sum_w import estimate_sum_w
    from sculpt.settings import SumWSettings

    model = plant(8, 4, 3, seed=0)
    X = sample_inputs(1500, 4, 8, rng=1)
    Y = model(X)
    # two refits on 2,000 rows: a Σ̂W whose half-space system is (barely) infeasible as built, as this test needs
    W, _ = estimate_sum_w(X, Y, SumWSettings(vp_rounds=2, vp_rows=2000))
    _, ref = sculpt(X, Y, W, learn_body(X, 3))
    assert ref.figures["eta_star"] > 0  # infeasible as built: the LP route needed a slack

    def no_lp(*args, **kwargs):
        raise AssertionError("an LP ran")

    with monkeypatch.context() as mp:
        for name in _FEASIBILITY_SEARCHES[1:]:  # the hinge descent is the one search left
            mp.setattr(sculpting, name, no_lp)
        body, rec = sculpt(X, Y, W, learn_body(X, 3, lp_max_entries=1))
    assert rec.figures["eta_star_by"].startswith("hinge point") and rec.figures["eta_star"] > 0
    A, b = body.constraints()
    assert A.shape[0] == rec.figures["halfspaces_kept"] + 2 * rec.figures["equalities_kept"]
    t, x = min_max_violation(A, b, -body.box, body.box)
    assert t <= 1e-9 and np.all(A @ x <= b + 1e-7)


def test_k_star_equality_rows_are_among_phase_4s_rows_whatever_span_tau(planted):
    """Phase 4's rank check relies on K*'s equality rows being a subset of the span rows: the span rows take
    every agreeing row up to max(span_tau, tau_max), so that holds even for a span_tau below tau_max."""
    model, X, Y = planted
    s = learn_body(X, 2, "slabs", span_tau=0.001)
    body, rec = sculpt(X, Y, model.ws.sum(0), s, mode="slabs")
    assert body.F.shape[0] > 0 and rec.figures["span_equalities"] >= body.F.shape[0]
    # phase 4's scans reuse exactly this rule (rel_max never below tau_max)
    assert s.tau_max == 0.05 and body.span_rule == SpanRule(q_tol=1e-3, rel_max=0.05, q_min=0.02, rel_floor=0.01)
    rows = {r.tobytes() for r in body.span_F.dense()}
    assert all(r.tobytes() in rows for r in body.F)


def test_wide_bodies_bound_eta_at_the_hinge_point_without_lps(monkeypatch):
    """Above lp_max_variables (d² variables) K*'s slack comes from the hinge point when the descent finds no
    feasible point, never from the L1 or η* LPs (at d = 16, m = 3 they took 1.2–2.4 s); at d = 8 they stay.
    Both body modes: the half-space body of phase 2 and the slab body K*."""
    import sculpt.phases.sculpting as sculpting
    from sculpt.phases.sum_w import estimate_sum_w
    from sculpt.settings import SumWSettings

    assert 64 <= BodySettings().lp_max_variables < 256
    model = plant(8, 4, 3, seed=0)
    X = sample_inputs(1500, 4, 8, rng=1)
    Y = model(X)
    # two refits on 2,000 rows: a Σ̂W whose half-space system is (barely) infeasible as built, as this test needs
    W, _ = estimate_sum_w(X, Y, SumWSettings(vp_rounds=2, vp_rows=2000))
    _, ref = sculpt(X, Y, W, learn_body(X, 3))
    assert not ref.figures["eta_star_by"].startswith("hinge point")  # d² = 64: the LP route

    def no_lp(*args, **kwargs):
        raise AssertionError("an LP ran")

    with monkeypatch.context() as mp:
        for name in ("min_total_violation", "min_max_violation"):
            mp.setattr(sculpting, name, no_lp)
        _, rec = sculpt(X, Y, W, learn_body(X, 3, lp_max_variables=63))
        _, rec_slabs = sculpt(X, Y, W, learn_body(X, 3, "slabs", lp_max_variables=63), mode="slabs")
    assert learn_body(X, 3, "slabs").min_equalities == 640  # 10d² with m = 3
    for r in (rec, rec_slabs):
        by = r.figures["eta_star_by"]
        assert by.startswith("hinge point") and "63 variables" in by or by.startswith("feasible point"), by
    assert rec.figures["eta_star_by"].startswith("hinge point")


@pytest.mark.parametrize("rows,p", [(120, 200), (400, 60)])
def test_slab_fit_by_normal_equations_matches_the_pivoted_qr(rows: int, p: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Large slab fits solve the normal equations of the smaller side (Cholesky): the same trimmed rows, fit and
    widths as gelsy's minimum-norm least squares, under- and over-determined, with an outlier to trim; a stack
    with repeated rows (singular normal equations) falls back to gelsy."""
    import scipy.linalg

    import sculpt.phases.sculpting as sc

    rng = np.random.default_rng(7)
    F = rng.choice([-2.0, 0.0, 2.0], size=(rows, p))
    g = F @ rng.standard_normal(p) * 0.1 + 1e-3 * rng.standard_normal(rows)
    g[3] += 5.0  # an outlier the over-determined fit trims
    w = rng.uniform(0.05, 1.0, rows)
    monkeypatch.setattr(sc, "SLAB_GRAM_FROM", float("inf"))
    ref = sc._fit_slabs(F, g, w, 0.01)
    monkeypatch.setattr(sc, "SLAB_GRAM_FROM", 1.0)
    got = sc._fit_slabs(F, g, w, 0.01)
    assert ref.fit is not None and got.fit is not None
    assert got.F.shape == ref.F.shape and (rows < p or got.F.shape[0] < rows)
    np.testing.assert_allclose(got.fit, ref.fit, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(got.widths, ref.widths, rtol=1e-6, atol=1e-9)
    F[1] = F[0]  # repeated rows: A Aᵀ singular when under-determined
    solver = sc._SlabSolver(F * np.sqrt(w)[:, None], g * np.sqrt(w))
    keep = np.ones(rows, bool)
    gelsy = scipy.linalg.lstsq(solver.A, solver.c, lapack_driver="gelsy", check_finite=False)[0]
    if rows < p:  # singular: gelsy's own answer
        assert solver._normal(solver.A, solver.c, keep) is None
        np.testing.assert_array_equal(solver.solve(keep), gelsy)
    else:  # a repeated row leaves AᵀA well conditioned
        np.testing.assert_allclose(solver.solve(keep), gelsy, rtol=1e-8, atol=1e-10)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 40), st.integers(2, 6), st.sampled_from(["boolean", "gaussian"]))
def test_rank_one_rows_are_factored_exactly_and_other_rows_refused(seed: int, n: int, d: int, dist: str) -> None:
    """``_factored`` reads rows x_a ⊗ (x_r − x_j) back as factors that rebuild them (exactly for ±1 tokens, to a
    few ulps for Gaussian ones), zero rows included; a row of rank two makes it refuse (None)."""
    import sculpt.phases.sculpting as sc

    rng = np.random.default_rng(seed)
    X = sample_inputs(n, 3, d, rng=rng, distribution=dist)
    M = np.einsum("np,nq->npq", X[:, 0], X[:, 1] - X[:, 2]).reshape(n, d * d)
    M[0] = 0.0
    old = sc.FACTORED_FROM
    try:
        sc.FACTORED_FROM = 1
        f = sc._factored(M)
        assert f is not None and f.shape == M.shape
        if dist == "boolean":
            np.testing.assert_array_equal(f.dense(), M)
        np.testing.assert_allclose(f.dense(), M, rtol=0, atol=1e-14 * np.abs(M).max(initial=1.0))
        assert sc._factored(np.vstack([M, (np.eye(d)[:1].T @ np.eye(d)[:1]).reshape(1, -1)])) is not None  # rank one
        assert sc._factored(np.vstack([M, (np.eye(d) * (np.arange(d) < 2)).reshape(-1)])) is None  # rank two
        sc.FACTORED_FROM = d * d + 1
        assert sc._factored(M) is None  # below FACTORED_FROM variables: the rows stay whole
    finally:
        sc.FACTORED_FROM = old


def test_slab_body_from_factored_rows_matches_the_dense_fit(planted, monkeypatch):
    """From FACTORED_FROM variables on, the rows are kept as factors and the slab fit and the hinge start work on
    them: the same kept slab and half-space rows (as factors: ``RankOneRows``), the same η* route, the slab fit
    and widths to rounding, the same polytope (forced here at d² = 36)."""
    import sculpt.phases.sculpting as sc

    model, X, Y = planted
    W = model.ws.sum(0) + 0.01 * np.random.default_rng(3).standard_normal((6, 6))
    s = learn_body(X, 2, "slabs")
    monkeypatch.setattr(sc, "SLAB_GRAM_FROM", 1.0)  # the normal equations, the path of large fits
    ref, ref_rec = sculpt(X, Y, W, s, mode="slabs")
    monkeypatch.setattr(sc, "FACTORED_FROM", 1)
    got, rec = sculpt(X, Y, W, s, mode="slabs")
    assert isinstance(got.F, RankOneRows) and isinstance(got.halfspaces[0], RankOneRows)
    assert got.F.shape == ref.F.shape and np.array_equal(got.F.dense(), ref.F) and ref.F.shape[0] > 36
    assert rec.figures["eta_star_by"] == ref_rec.figures["eta_star_by"]
    assert rec.figures["eta_star"] == pytest.approx(ref_rec.figures["eta_star"], abs=1e-9)
    np.testing.assert_allclose(got.slab_widths, ref.slab_widths, rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(got.halfspaces[0].dense(), ref.halfspaces[0])
    np.testing.assert_array_equal(got.polytope.A, ref.polytope.A)
