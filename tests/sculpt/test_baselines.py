"""Gradient baselines: L-BFGS recovers planted layers, Adam fits, options and bad inputs."""
from __future__ import annotations

import numpy as np
import pytest

from sculpt import LearnResult, MultiHeadAttention, plant, sample_inputs
from sculpt.baselines import gradient_descent, random_init


@pytest.fixture(scope="module")
def planted_842():
    truth = plant(8, 4, 2, seed=0)
    X = sample_inputs(2000, 4, 8, rng=1)
    return truth, X, truth(X)


def test_lbfgs_recovers_planted_842_exactly(planted_842):
    truth, X, Y = planted_842
    res = gradient_descent(X, Y, 2, method="lbfgs", seed=0, restarts=3)
    assert isinstance(res, LearnResult) and res.method == "lbfgs"
    assert res.converged and res.train_error <= 1e-20
    X_test = sample_inputs(5000, 4, 8, rng=2)
    assert truth.prediction_error(res.model, X_test) < 1e-12
    dist = truth.distance(res.model)
    assert dist.theta_error < 1e-6 and dist.w_error < 1e-6
    assert res.samples_used == 2000 and res.iterations > 0 and res.time > 0
    runs = res.info["restarts"]
    assert len(runs) >= 1 and runs[res.info["best_restart"]]["train_error"] == res.train_error
    assert res.train_error == pytest.approx(
        float(np.sum((res.model(X) - Y) ** 2) / np.sum(Y ** 2)), rel=1e-6, abs=1e-30)


def test_lbfgs_is_reproducible_from_seed(planted_842):
    truth, X, Y = planted_842
    a = gradient_descent(X[:300], Y[:300], 2, seed=5, max_iter=30)
    b = gradient_descent(X[:300], Y[:300], 2, seed=5, max_iter=30)
    assert np.array_equal(a.model.thetas, b.model.thetas) and a.train_error == b.train_error
    assert a.iterations == 30 and not a.converged and "max_iter" in a.reason
    c = gradient_descent(X[:300], Y[:300], 2, seed=5, max_iter=30, single_thread=False)  # BLAS threads only
    np.testing.assert_allclose(c.model.thetas, a.model.thetas, rtol=1e-8, atol=1e-10)
    assert a.info["single_thread_blas"] and not c.info["single_thread_blas"]


def test_restarts_stop_once_converged_and_init_is_used(planted_842):
    truth, X, Y = planted_842
    rng = np.random.default_rng(3)
    warm = MultiHeadAttention(truth.thetas * (1 + 1e-3 * rng.normal(size=truth.thetas.shape)), truth.ws)
    res = gradient_descent(X[:500], Y[:500], 2, init=warm, restarts=4, seed=1)
    assert res.converged and len(res.info["restarts"]) == 1  # later restarts skipped
    assert res.info["restarts"][0]["init"] == "given"
    exact = gradient_descent(X[:500], Y[:500], 2, init=truth, tol=1e-25)
    assert exact.converged and exact.iterations <= 1


def test_stall_and_time_limit_stop_a_run(planted_842):
    truth, X, Y = planted_842
    res = gradient_descent(X[:200], Y[:200], 2, seed=0, time_limit=1e-6, max_iter=10_000)
    assert res.info["restarts"][0]["stop"] == "time limit" and not res.converged
    # noise labels: the loss has a positive minimum, and the run ends there on its own, not at max_iter
    Xn = sample_inputs(200, 3, 2, rng=0)
    Yn = np.random.default_rng(1).normal(size=Xn.shape)
    noisy = gradient_descent(Xn, Yn, 1, seed=0, restarts=2, tol=0.0, max_iter=10_000)
    assert 0.5 < noisy.train_error < 1.0 and not noisy.converged
    assert all(r["stop"] != "max_iter" and r["iterations"] < 10_000 for r in noisy.info["restarts"])


def test_give_up_stops_a_restart_that_is_not_converging_and_spares_one_that_is(planted_842):
    truth, X, Y = planted_842
    weak = plant(8, 4, 2, seed=3, weak_head=0.01)
    Yw = weak(X[:500])
    stopped = gradient_descent(X[:500], Yw, 2, seed=0, max_iter=100, give_up=(60, 1e-6))
    run = stopped.info["restarts"][0]
    assert run["stop"].startswith("gave up") and run["iterations"] == 60 and run["train_error"] > 1e-6
    free = gradient_descent(X[:500], Y[:500], 2, seed=0, max_iter=100, give_up=(60, 1e-6))
    assert free.info["restarts"][0]["iterations"] > 60 and free.converged  # below 1e-6 by iteration 60
    for bad in [(0, 1e-6), (10, 0.0), (10,), "x"]:
        with pytest.raises((ValueError, TypeError)):
            gradient_descent(X[:50], Y[:50], 2, seed=0, give_up=bad)


def test_adam_fits_a_small_planted_layer():
    truth = plant(4, 3, 1, seed=2)
    X = sample_inputs(400, 3, 4, rng=3)
    res = gradient_descent(X, truth(X), 1, method="adam", seed=0, max_iter=1500, tol=1e-12)
    assert res.method == "adam"
    assert truth.prediction_error(res.model, sample_inputs(2000, 3, 4, rng=4)) < 1e-6
    mini = gradient_descent(X, truth(X), 1, method="adam", seed=0, max_iter=200, batch_size=100)
    first = float(np.sum((MultiHeadAttention.from_params(random_init(1, 4, np.random.default_rng(0)), 1, 4)(X)
                          - truth(X)) ** 2) / np.sum(truth(X) ** 2))
    assert mini.train_error < 0.1 * first  # minibatch Adam makes real progress from its random start


def test_random_init_scales():
    p = random_init(2, 16, 0)
    thetas, ws = p[:512].reshape(2, 16, 16), p[512:].reshape(2, 16, 16)
    assert np.allclose(np.linalg.norm(thetas.reshape(2, -1), axis=1), 1.0, atol=0.2)  # entries N(0, 1/d²)
    assert abs(ws.std() - 0.25) < 0.03  # entries N(0, 1/d)


@pytest.mark.parametrize("change, exc", [
    ({"Y": "short"}, ValueError), ({"X": "nan"}, ValueError), ({"Y": "nan"}, ValueError),
    ({"Y": "zero"}, ValueError), ({"m": 0}, ValueError), ({"m": 1.5}, TypeError),
    ({"method": "sgd"}, ValueError), ({"restarts": 0}, ValueError), ({"max_iter": 0}, ValueError),
    ({"tol": -1.0}, ValueError), ({"tol": float("nan")}, ValueError), ({"time_limit": 0.0}, ValueError),
    ({"init": "model"}, TypeError), ({"init": "wrong-shape"}, ValueError), ({"lr": -0.1}, ValueError),
    ({"batch_size": 0}, ValueError), ({"X": "rank2"}, ValueError),
])
def test_bad_inputs(change, exc):
    truth = plant(3, 2, 2, seed=0)
    X = sample_inputs(20, 2, 3, rng=0)
    kwargs = {"X": X, "Y": truth(X), "m": 2}
    for key, value in change.items():
        if value == "short":
            value = kwargs["Y"][:10]
        elif value == "nan":
            value = kwargs[key].copy()
            value[0, 0, 0] = np.nan
        elif value == "zero":
            value = np.zeros_like(kwargs["Y"])
        elif value == "wrong-shape":
            value = plant(3, 2, 1, seed=0)
        elif value == "rank2":
            value = X.reshape(20, 6)
        kwargs[key] = value
    with pytest.raises(exc):
        gradient_descent(kwargs.pop("X"), kwargs.pop("Y"), kwargs.pop("m"), **kwargs)


def test_lbfgs_growing_work_budget_bounds_the_protocol_deterministically():
    """max_work caps Σ examples × iterations × work_unit over every run (each run's iteration cap is what is
    left of it), the protocol stops saying so, and the same seed gives the same stages."""
    from sculpt.baselines import GrowingFit, lbfgs_growing, work_unit

    hard = plant(8, 4, 2, seed=3, weak_head=0.01)  # L-BFGS needs thousands of iterations here
    X = sample_inputs(3000, 4, 8, rng=4)
    Y = hard(X)
    unit = work_unit(4, 8, 2)
    assert unit == 2 * 4 * 8 * (4 + 8)
    budget = 300 * 200 * unit + 123.0  # 200 iterations on 300 examples, and a remainder below one iteration

    def run() -> GrowingFit:
        return GrowingFit.of(lbfgs_growing(X[500:], Y[500:], 2, seed=np.random.default_rng(7),
                                           validation=(X[:500], Y[:500]), first=300, restarts=2, max_work=budget))

    a, b = run(), run()
    spent = sum(s["work"] for s in a.stages)
    assert spent <= budget and spent > budget - 600 * unit  # used up to less than one iteration at 600
    assert all(s["work"] == s["examples"] * s["iterations"] * unit for s in a.stages)
    assert "work budget" in a.reason and a.stop.startswith("work budget") and not a.converged
    assert [(s["examples"], s["iterations"]) for s in a.stages] == [(s["examples"], s["iterations"]) for s in b.stages]
    assert np.array_equal(a.model.thetas, b.model.thetas)
    # without a budget the same protocol runs past it
    free = GrowingFit.of(lbfgs_growing(X[500:], Y[500:], 2, seed=np.random.default_rng(7),
                                       validation=(X[:500], Y[:500]), first=300, restarts=1, max_iter=400,
                                       max_examples=300))
    assert sum(s["examples"] * s["iterations"] for s in free.stages) * unit > budget


def test_settings_are_the_defaults_and_keywords_override_them(planted_842):
    """gradient_descent's numeric defaults are GradientSettings' fields: passing the settings object or the
    same values as keywords gives the same fit, and a keyword overrides the settings' field."""
    from sculpt.settings import GradientSettings

    truth, X, Y = planted_842
    s = GradientSettings(max_iter=25, history=7)
    a = gradient_descent(X[:200], Y[:200], 2, s, seed=4)
    b = gradient_descent(X[:200], Y[:200], 2, seed=4, max_iter=25, history=7)
    assert np.array_equal(a.model.thetas, b.model.thetas) and a.iterations == b.iterations == 25
    assert a.info["history"] == 7 and a.info["max_iter"] == 25
    c = gradient_descent(X[:200], Y[:200], 2, s, seed=4, max_iter=10)
    assert c.iterations == 10 and c.info["history"] == 7
    adam = gradient_descent(X[:100], Y[:100], 2, method="adam", seed=0, max_iter=3)
    assert adam.info["lr"] == GradientSettings().adam_lr and adam.info["batch_size"] == GradientSettings().adam_batch_size
    assert gradient_descent(X[:100], Y[:100], 2, seed=0, restarts=1).info["max_iter"] == 5000  # resolved auto


def test_lbfgs_growing_holds_out_a_split_and_reads_its_defaults_from_settings(planted_842):
    """The user-facing call holds out min(2000, N/10) examples and grows the subset from
    GradientSettings.growing_first; with ``validation`` it fits all of (X, Y) and validates on the split given."""
    from sculpt.baselines import GrowingFit, lbfgs_growing
    from sculpt.settings import GradientSettings

    truth, X, Y = planted_842
    res = lbfgs_growing(X, Y, 2, seed=0)
    s = GradientSettings()
    assert res.method == "lbfgs-growing" and res.converged and res.validation_error <= 1e-12
    assert res.info["validation_examples"] == 200 and res.info["first"] == s.growing_first
    assert res.info["growth"] == s.growth and res.info["restarts"] == s.growing_restarts
    assert res.info["stages"][0]["examples"] == s.growing_first
    assert res.samples_used == res.info["examples"] + 200
    fit = GrowingFit.of(lbfgs_growing(X[:1500], Y[:1500], 2, s.merged(growth=3), seed=1,
                                      validation=(X[1500:], Y[1500:]), first=400, max_iter=40))
    assert [st["examples"] for st in fit.stages][:1] == [400] and fit.examples in (400, 1200, 1500)
    assert all(st["iterations"] <= 40 for st in fit.stages)
    assert fit.converged == (fit.validation_error <= 1e-12)
    with pytest.raises(ValueError, match="growth"):
        lbfgs_growing(X[:100], Y[:100], 2, growth=1)
    with pytest.raises(ValueError, match="validation"):
        lbfgs_growing(X[:100], Y[:100], 2, validation=(X[:10, :3], Y[:10, :3]))
