"""The polish's variable-projection normal equations against the dense Jacobian of sculpt.gradients."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import gaussian_like, inputs

from sculpt import plant, sample_inputs
from sculpt.gradients import jacobian, pack
from sculpt.phases import polish as polish_module
from sculpt.phases.polish import _gradient, _normal_equations, _state, lm_vp, polish
from sculpt.settings import Settings

LEARN = Settings()  # learn's settings: the polish's and the validation tol


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(1, 4), st.integers(1, 3), st.integers(1, 12), st.integers(1, 5), st.data())
def test_vp_normal_equations_match_the_projected_dense_jacobian(d, k, m, n, chunk, data):
    """S = Σ_c J_cᵀ (I − QQᵀ) J_c and g = Jᵀ r, J = ∂ vec(Z W)/∂Θ at the eliminated W (Kaufman), for any chunking."""
    assume(n * k >= m * d)  # the polish's subsets always have more token rows than features
    thetas = data.draw(gaussian_like((m, d, d), scale=2 / max(d, 1)), label="thetas")
    X = data.draw(inputs((n, k, d), "boolean"), label="X")
    Y = data.draw(gaussian_like((n, k, d)), label="Y")
    Yf = Y.reshape(-1, d)
    P, Zi, Q, ws, res = _state(thetas, X, Yf)
    S, g = _normal_equations(thetas, X, P, Zi, Q, ws, res, chunk)
    J = jacobian(pack(thetas, ws), X, Y, m)[:, : m * d * d].reshape(n * k, d, -1)  # rows (n, a), output c
    Jp = J - np.einsum("rj,sj,scp->rcp", Q, Q, J)  # (I − QQᵀ) per output column
    S_ref = np.einsum("rcp,rcq->pq", Jp, Jp)
    g_ref = np.einsum("rcp,rc->p", J, res)
    scale = max(1.0, float(np.abs(J).max()) ** 2)
    assert np.allclose(S, S_ref, rtol=1e-9, atol=1e-9 * scale)
    assert np.allclose(g, g_ref, rtol=1e-9, atol=1e-9 * scale * max(1.0, float(np.abs(res).max())))


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000), st.data())
def test_lm_vp_recovers_a_planted_layer_from_a_nearby_start(seed, data):
    """From heads 5 % off, VP-LM drives the relative MSE to rounding level and never increases it."""
    d, k, m = data.draw(st.sampled_from([(4, 3, 1), (6, 3, 2), (8, 4, 2)]), label="(d, k, m)")
    layer = plant(d, k, m, seed=seed)
    X = sample_inputs(200, k, d, rng=seed)
    Y = layer(X)
    rng = np.random.default_rng(seed)
    start = layer.thetas + 0.05 * rng.normal(size=layer.thetas.shape) * np.linalg.norm(layer.thetas[0]) / d
    P, Zi, Q, ws, res = _state(start, X, Y.reshape(-1, d))
    cost0 = float(np.sum(res**2) / np.sum(Y**2))
    th, _, cost, it = lm_vp(start, X, Y, LEARN.polish)
    assert cost <= cost0
    assert cost < 1e-20, (cost0, cost, it)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([(3, 2, 1, 5), (4, 3, 2, 9), (5, 4, 3, 7)]), st.integers(1, 4))
def test_chord_gradient_equals_the_normal_equations_gradient(seed, shape, chunk):
    """Chord steps compute Jᵀr alone; it is the g of the full normal equations at any chunking."""
    d, k, m, n = shape
    rng = np.random.default_rng(seed)
    X = sample_inputs(n, k, d, rng=rng)
    Y = plant(d, k, m, seed=seed)(X)
    thetas = rng.normal(size=(m, d, d)) / d
    P, Zi, Q, ws, res = _state(thetas, X, Y.reshape(-1, d))
    _, g = _normal_equations(thetas, X, P, Zi, Q, ws, res, chunk)
    assert np.allclose(_gradient(X, P, Zi, ws, res, chunk), g, rtol=1e-10, atol=1e-12 * max(1.0, np.abs(g).max()))


def test_chord_steps_reach_the_point_full_steps_reach(monkeypatch):
    """Reusing a factorisation changes the path, not the answer: with and without chord steps LM ends at the same
    heads to rounding level, never with more full normal-equation builds, and over three (12,4,2) layers with
    less work counting every chord trial (accepted or dropped) as a quarter of a build, the most a chord step
    costs relative to a full one on the sizes measured."""
    calls = {"build": 0, "chord": 0}
    full, grad = polish_module._normal_equations, polish_module._gradient

    def counted_build(*args):
        calls["build"] += 1
        return full(*args)

    def counted_chord(*args):
        calls["chord"] += 1
        return grad(*args)

    monkeypatch.setattr(polish_module, "_normal_equations", counted_build)
    monkeypatch.setattr(polish_module, "_gradient", counted_chord)
    work = [0.0, 0.0]
    for seed in range(3):
        layer = plant(12, 4, 2, seed=seed)
        X = sample_inputs(64, 4, 12, rng=seed)
        Y = layer(X)
        start = layer.thetas + 0.05 * np.random.default_rng(seed).normal(size=layer.thetas.shape) / 12
        builds, fits = [], []
        for i, chord_start in enumerate((LEARN.polish.chord_start, 0.0)):  # 0: no step qualifies, full steps only
            calls.update(build=0, chord=0)
            fits.append(lm_vp(start, X, Y, LEARN.polish.merged(chord_start=chord_start)))
            builds.append(calls["build"])
            work[i] += calls["build"] + 0.25 * calls["chord"]
        (th_c, _, cost_c, _), (th_f, _, cost_f, _) = fits
        assert cost_c < 1e-25 and cost_f < 1e-25, (seed, cost_c, cost_f)
        assert np.abs(th_c - th_f).max() < 1e-9 * max(1.0, np.abs(th_f).max())
        assert builds[0] <= builds[1], (seed, builds)
    assert work[0] < work[1], work


def test_polish_stops_growing_a_subset_that_is_stuck_in_a_local_minimum():
    """From random heads LM ends far above zero on its own subset; the polish stops there (one stage) and
    says so, where growing the subset would only repeat the same local minimum on more examples."""
    layer = plant(6, 3, 2, seed=4)
    X = sample_inputs(1500, 3, 6, rng=1)
    Y = layer(X)
    start = np.random.default_rng(0).normal(size=layer.thetas.shape) * 3.0
    settings = LEARN.polish.merged(max_iter=15, max_examples=256)
    assert settings.stuck == 1e-2
    res, rec = polish(start, X[:1000], Y[:1000], X[1000:], Y[1000:], settings, tol=LEARN.tol, rng=0)
    stages = rec.figures["stages"]
    assert stages[0]["train_error"] > 1e-2  # 0.26 measured: the start is in a bad basin
    assert len(stages) == 1 and "stuck" in stages[0]["note"] and not res.converged
    assert "local minimum" in rec.message
    _, rec2 = polish(start, X[:1000], Y[:1000], X[1000:], Y[1000:], settings.merged(stuck=1e6), tol=LEARN.tol, rng=0)
    assert len(rec2.figures["stages"]) > 1  # without the rule it grows the subset as before


def test_polish_still_grows_the_subset_under_label_noise():
    """Noise of 5 % of the signal's amplitude levels the fit off near 2.5e-3, below ``stuck``: not a local
    minimum, so the polish keeps growing the subset (more examples average the noise down)."""
    layer = plant(8, 4, 2, seed=1)
    X = sample_inputs(6000, 4, 8, rng=2)
    Y = layer(X)
    Y = Y + 0.05 * np.sqrt(np.mean(Y**2)) * np.random.default_rng(3).normal(size=Y.shape)
    settings = LEARN.polish.merged(max_examples=256, max_iter=10)
    res, rec = polish(layer.thetas, X[:5000], Y[:5000], X[5000:], Y[5000:], settings, tol=LEARN.tol, rng=0)
    stages = rec.figures["stages"]
    assert len(stages) > 1 and not any("stuck" in str(st.get("note", "")) for st in stages)
    assert 1e-3 < stages[-1]["train_error"] < 1e-2


def test_single_precision_far_steps_reach_the_double_precision_fit(monkeypatch):
    """JᵀJ in float32 is JᵀJ to single-precision rounding; LM with the far steps in single precision (the default
    threshold, and 0: every step single until one finds no descent, then float64) ends where all-float64 LM ends,
    at rounding level (threshold 1: never single, as the relative MSE with W eliminated is at most 1)."""
    layer = plant(10, 4, 2, seed=3)
    X = sample_inputs(80, 4, 10, rng=3)
    Y = layer(X)
    start = layer.thetas + 0.1 * np.random.default_rng(3).normal(size=layer.thetas.shape) / 10
    P, Zi, Q, ws, res = _state(start, X, Y.reshape(-1, 10))
    S64, g64 = _normal_equations(start, X, P, Zi, Q, ws, res, 32)
    S32, g32 = _normal_equations(start, X, P, Zi, Q, ws, res, 32, np.float32)
    assert S32.dtype == np.float32 and g32.dtype == np.float64
    assert np.linalg.norm(S32 - S64) <= 1e-5 * np.linalg.norm(S64)
    assert np.array_equal(g32, g64)
    dtypes: list[np.dtype] = []
    full = polish_module._normal_equations

    def recorded(*args):
        out = full(*args)
        dtypes.append(out[0].dtype)
        return out

    monkeypatch.setattr(polish_module, "_normal_equations", recorded)
    fits = {}
    default = LEARN.polish.f32_above
    for threshold in (1.0, default, 0.0):
        dtypes.clear()
        fits[threshold] = lm_vp(start, X, Y, LEARN.polish.merged(f32_above=threshold))
        if threshold == 1.0:
            assert set(dtypes) == {np.dtype(np.float64)}
        else:
            assert dtypes[0] == np.float32
        if threshold == default:  # the near steps are double precision
            assert dtypes[-1] == np.float64
    th_ref = fits[1.0][0]
    for threshold, (th, _, cost, _) in fits.items():
        assert cost < 1e-25, (threshold, cost)
        assert np.abs(th - th_ref).max() < 1e-9 * max(1.0, np.abs(th_ref).max())

    # a single-precision build that yields no descent (here: its Jᵀr reversed) hands the point to float64
    def uphill_when_single(*args):
        S, g = recorded(*args)
        return (S, -g) if S.dtype == np.float32 else (S, g)

    monkeypatch.setattr(polish_module, "_normal_equations", uphill_when_single)
    dtypes.clear()
    th, _, cost, it = lm_vp(start, X, Y, LEARN.polish.merged(f32_above=0.0))
    assert dtypes[0] == np.float32 and np.dtype(np.float64) in dtypes[1:]
    assert cost < 1e-25 and np.abs(th - th_ref).max() < 1e-9 * max(1.0, np.abs(th_ref).max())
    # the hand-over keeps the damping the point came in with: one wasted build, not a dozen damped steps
    assert it <= fits[1.0][3] + 2, (it, fits[1.0][3])


@settings(max_examples=25, deadline=None)
@given(
    scale=st.sampled_from([0.0, 1e-9, 1e-6, 1e-3, 1.0]),
    tol=st.sampled_from([1e-12, 1e-6, 1e-2]),
    seed=st.integers(0, 50),
)
def test_the_start_screen_returns_the_validation_error_or_rules_it_out_correctly(scale, tol, seed):
    """``_validates_at_start`` gives the full validation relative MSE, or inf only when that error is above tol
    (a prefix's squared error over ‖Y_val‖² bounds it from below)."""
    from sculpt.phases.polish import _validates_at_start
    from sculpt.toolkit import layer_relative_mse

    screen = LEARN.polish.screen_examples
    model = plant(6, 3, 2, seed=seed)
    X = sample_inputs(screen + 300, 3, 6, rng=seed)
    Y = model(X)
    th = model.thetas + scale * np.random.default_rng(seed).standard_normal(model.thetas.shape)
    full = layer_relative_mse(th, model.ws, X, Y)
    got = _validates_at_start(th, model.ws, X, Y, tol, screen)
    if np.isinf(got):
        assert full > tol
    else:
        assert got == full
    if full <= tol:
        assert got == full


# --- the matrix-free path (m·d² > PolishSettings.matrix_free_above) -------------------------------------------


def _near(layer, seed: int, err: float) -> np.ndarray:
    """The layer's heads with a relative error ``err`` on each."""
    E = np.random.default_rng(seed).normal(size=layer.thetas.shape)
    scale = np.linalg.norm(layer.thetas, axis=(1, 2), keepdims=True) / np.linalg.norm(E, axis=(1, 2), keepdims=True)
    return layer.thetas + err * scale * E


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 5), st.integers(1, 4), st.integers(1, 3), st.integers(1, 10), st.integers(1, 2000), st.data())
def test_matrix_free_products_are_the_normal_equations(d, k, m, n, elements, data):
    """VPProducts gives (JᵀJ)_K·v = S v, Jᵀr = g of the dense normal equations, and the unprojected diagonal
    Σ J² of sculpt.gradients' Jacobian, whatever the chunking."""
    from sculpt.phases.polish_cg import VPProducts

    assume(n * k >= m * d)
    thetas = data.draw(gaussian_like((m, d, d), scale=2 / max(d, 1)), label="thetas")
    X = data.draw(inputs((n, k, d), "boolean"), label="X")
    Y = data.draw(gaussian_like((n, k, d)), label="Y")
    v = data.draw(gaussian_like((m, d, d)), label="v")
    P, Zi, Q, ws, res = _state(thetas, X, Y.reshape(-1, d))
    S, g = _normal_equations(thetas, X, P, Zi, Q, ws, res, 4)
    ops = VPProducts.at(X, P, Zi, Q, ws, elements)
    J = jacobian(pack(thetas, ws), X, Y, m)[:, : m * d * d]
    scale = max(1.0, float(np.abs(J).max()) ** 2)
    assert np.allclose(ops.normal(v).ravel(), S @ v.ravel(), rtol=1e-9, atol=1e-9 * scale * max(1.0, np.abs(v).max()))
    assert np.allclose(
        ops.vjp(res.reshape(X.shape)).ravel(), g, rtol=1e-9, atol=1e-9 * scale * max(1.0, np.abs(res).max())
    )
    assert np.allclose(ops.diagonal().ravel(), (J * J).sum(axis=0), rtol=1e-9, atol=1e-12 * scale)
    assert np.all(np.diag(S) <= (J * J).sum(axis=0) + 1e-9 * scale)  # the projection only removes


def test_pcg_solves_a_positive_definite_system_and_a_truncated_solve_descends():
    """To tolerance; cut after three products or at a trust-region radius, the step still lowers the model."""
    from sculpt.phases.polish_cg import pcg

    rng = np.random.default_rng(0)
    B = rng.normal(size=(60, 40))
    A = B.T @ B + 1e-3 * np.eye(40)
    b = rng.normal(size=40)
    x, it, edge = pcg(lambda v: A @ v, b, 1.0 / np.diag(A), 1e-12, 500, np.inf)
    assert np.linalg.norm(A @ x - b) <= 1e-12 * np.linalg.norm(b) * 1.0001 and it <= 500 and not edge
    x3, it3, _ = pcg(lambda v: A @ v, b, 1.0 / np.diag(A), 1e-12, 3, np.inf)
    assert it3 == 3 and b @ x3 > 0 and 0.5 * x3 @ A @ x3 - b @ x3 < 0  # lowers the quadratic model
    radius = 0.3 * np.sqrt(x @ (np.diag(A) * x))  # Steihaug: the step stops on the boundary, still descending
    xr, itr, edge = pcg(lambda v: A @ v, b, 1.0 / np.diag(A), 1e-12, 500, radius)
    assert edge and itr < it and np.isclose(np.sqrt(xr @ (np.diag(A) * xr)), radius)
    assert 0.5 * xr @ A @ xr - b @ xr < 0


def test_a_converged_cg_step_is_the_dense_damped_step():
    """Forced below its threshold and run to convergence, the matrix-free step is the one the factorised normal
    equations give for the same damping (JᵀJ + λD + 1e-14·max D) δ = Jᵀr, D the unprojected diagonal."""
    from sculpt.phases.polish_cg import VPProducts

    layer = plant(6, 4, 2, seed=5)
    X = sample_inputs(40, 4, 6, rng=5)
    Y = layer(X)
    Yf = Y.reshape(-1, 6)
    yy = float(np.sum(Yf * Yf))
    at = polish_module._trial(_near(layer, 5, 0.1), X, Yf, yy)
    P, Zi, Q, ws, res = at.state
    S, g = _normal_equations(at.th, X, P, Zi, Q, ws, res, 8)
    D = VPProducts.at(X, P, Zi, Q, ws, 1 << 10).diagonal().ravel()
    tight = LEARN.polish.merged(matrix_free_above=0, cg_forcing=1e-14, cg_tol_min=1e-14, cg_max_iter=5000)
    for lam in (1e-3, 1e-8):
        new, _, drop, _ = polish_module._cg_step(at, lam, np.inf, X, Yf, yy, tight)
        assert drop > 0
        A = S + np.diag(lam * D + 1e-14 * D.max())
        step = np.linalg.solve(A, g)
        assert np.linalg.norm((new.th - at.th).ravel() - step) <= 1e-8 * np.linalg.norm(step)


def test_matrix_free_lm_holds_no_array_of_the_normal_equations_size():
    """Traced allocations (numpy reports its buffers to tracemalloc) over three LM iterations at (32,4,2): the
    dense path's peak exceeds one (m·d²)² float64 matrix (33.5 MB), the matrix-free path's stays below a tenth
    of it (1.1 MB measured: the data's forward quantities and one chunk)."""
    import tracemalloc

    d, k, m = 32, 4, 2
    layer = plant(d, k, m, seed=2, max_cond=100.0)
    X = sample_inputs(40, k, d, rng=2)
    Y = layer(X)
    start = _near(layer, 2, 0.02)
    matrix = (m * d * d) ** 2 * 8
    peaks = {}
    for name, threshold in (("dense", 10**9), ("matrix-free", 0)):
        s = LEARN.polish.merged(matrix_free_above=threshold, cg_chunk_elements=4096, max_iter=3)
        tracemalloc.start()
        try:
            lm_vp(start, X, Y, s)
            peaks[name] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peaks["dense"] > matrix, peaks
    assert peaks["matrix-free"] < matrix / 10, peaks


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([(6, 3, 2), (8, 4, 2), (6, 4, 3)]))
def test_matrix_free_lm_recovers_a_planted_layer(seed, shape):
    """Forced on a small layer, LM with CG steps fits its subset to cg_fit_tol, never raising the cost, and
    the heads it returns are the planted ones; the polish around it validates."""
    d, k, m = shape
    layer = plant(d, k, m, seed=seed)
    X = sample_inputs(2200, k, d, rng=seed)
    Y = layer(X)
    s = LEARN.polish.merged(matrix_free_above=0)
    start = _near(layer, seed, 0.05)
    cost0 = float(np.sum(_state(start, X[:200], Y[:200].reshape(-1, d))[4] ** 2) / np.sum(Y[:200] ** 2))
    th, _, cost, it = lm_vp(start, X[:200], Y[:200], s)
    assert cost <= min(cost0, s.cg_fit_tol), (cost0, cost, it)
    res, rec = polish(start, X[:2000], Y[:2000], X[2000:], Y[2000:], s, tol=LEARN.tol, rng=seed, truth=layer)
    assert res.converged and rec.truth["theta_error"] < 1e-6 and rec.figures["matrix_free"]


def test_cg_steps_solve_no_finer_than_reaching_the_stop_needs(monkeypatch):
    """Each CG solve's relative residual is at least cg_stop_margin·√(stop/cost) (capped by cg_forcing): a finer
    solve cannot lower the cost below the stop by more; LM still ends below the stop."""
    layer = plant(8, 4, 2, seed=3)
    X = sample_inputs(200, 4, 8, rng=3)
    Y = layer(X)
    s = LEARN.polish.merged(matrix_free_above=0)
    asked: list[tuple[float, float]] = []
    real_step, real_pcg = polish_module._cg_step, polish_module.pcg

    def step(at, *args):  # the cost each solve starts from
        asked.append((at.cost, math.nan))
        return real_step(at, *args)

    def pcg(apply, b, inv_diag, tol, max_iter, radius):
        asked[-1] = (asked[-1][0], tol)
        return real_pcg(apply, b, inv_diag, tol, max_iter, radius)

    monkeypatch.setattr(polish_module, "_cg_step", step)
    monkeypatch.setattr(polish_module, "pcg", pcg)
    _, _, cost, _ = lm_vp(_near(layer, 3, 0.05), X, Y, s)
    stop = max(s.fit_tol, s.cg_fit_tol)
    assert cost <= stop and len(asked) >= 2
    for before, tol in asked:
        assert tol >= min(s.cg_forcing, s.cg_stop_margin * math.sqrt(stop / before)) * (1 - 1e-12)


def test_the_threshold_chooses_the_path_and_sizes_the_first_subset(monkeypatch):
    """m·d² above ``matrix_free_above`` takes the CG steps (no normal equations built), at or below it the
    factorised ones; with CG steps the first subset has at least cg_first_ratio·d²/(k(k−1)) examples."""
    from sculpt.settings import ProblemSize

    built = []
    full = polish_module._normal_equations
    monkeypatch.setattr(polish_module, "_normal_equations", lambda *a: built.append(1) or full(*a))
    layer = plant(6, 3, 2, seed=0)
    X = sample_inputs(100, 3, 6, rng=0)
    start = _near(layer, 0, 0.05)
    lm_vp(start, X, layer(X), LEARN.polish.merged(matrix_free_above=72))  # m·d² = 72: dense
    assert built
    built.clear()
    lm_vp(start, X, layer(X), LEARN.polish.merged(matrix_free_above=71))
    assert not built
    s = LEARN.polish
    below = s.resolve(ProblemSize(16, 4, 1))  # 256 parameters: dense
    above = s.resolve(ProblemSize(64, 4, 2))
    assert (
        below.first_examples == 64
        and s.merged(matrix_free_above=0).resolve(ProblemSize(16, 4, 1)).first_examples == 171
    )
    assert above.first_examples >= s.cg_first_ratio * 64 * 64 / 12


def test_head_matching_above_six_heads_is_the_enumerated_minimum(monkeypatch):
    """Past six heads ``head_errors`` matches by an assignment solver; it finds the permutation enumeration finds."""
    from sculpt.phases import projections

    rng = np.random.default_rng(0)
    for _ in range(20):
        T = rng.normal(size=(7, 3, 3))
        th = T[rng.permutation(7)] + 0.8 * rng.normal(size=T.shape)
        fast = projections._nearest_matching(th, T)
        monkeypatch.setattr(projections, "_ENUMERATE_HEADS", 7)
        assert fast == projections._nearest_matching(th, T)
        monkeypatch.setattr(projections, "_ENUMERATE_HEADS", 6)
