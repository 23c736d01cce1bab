"""The noise-floor test (``sculpt.noise``) and what the routes do with it: exact data is "exact", noisy labels
end at "noise" with σ̂ near the true σ and the least-squares fit, no route hands back model=None, the CLI exits 0
under noise, and a result prints a short repr and a plain summary."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sculpt import MultiHeadAttention, learn, plant, sample_inputs
from sculpt.baselines import gradient_descent
from sculpt.cli import main
from sculpt.noise import noise_sigma, noise_verdict
from sculpt.settings import PolishSettings


def _noisy(
    d: int, k: int, m: int, n: int, sigma: float, seed: int
) -> tuple[MultiHeadAttention, np.ndarray, np.ndarray, float]:
    truth = plant(d, k, m, seed=seed)
    rng = np.random.default_rng(100 + seed)
    X = sample_inputs(n, k, d, rng=rng)
    F = truth(X)
    s = sigma * float(np.sqrt(np.mean(F * F)))
    return truth, X, F + s * rng.standard_normal(F.shape), s


def _linear_trials(trials: int, n: int, p: int, n_v: int, excess: float, level: float) -> float:
    """Fraction of least-squares fits of a linear model under Gaussian noise that the test calls "failed";
    ``excess`` adds that fraction of σ² to the held-out residual variance (a fit off the floor)."""
    rng = np.random.default_rng(7)
    s = PolishSettings().merged(noise_level=level, noise_min_improvement=1.0)
    sigma, failed = 0.01, 0
    for _ in range(trials):
        beta = rng.standard_normal(p)
        A, Av = rng.standard_normal((n, p)), rng.standard_normal((n_v, p))
        y = A @ beta + sigma * rng.standard_normal(n)
        yv = Av @ beta + sigma * np.sqrt(1.0 + excess) * rng.standard_normal(n_v)
        fit = np.linalg.lstsq(A, y, rcond=None)[0]
        rss, rss_v = float(np.sum((y - A @ fit) ** 2)), float(np.sum((yv - Av @ fit) ** 2))
        v = noise_verdict(
            validation_error=rss_v / float(yv @ yv),
            tol=1e-12,
            fit=(rss, float(y @ y), n),
            validation=(rss_v, n_v),
            parameters=p,
            settings=s,
        )
        failed += v.status == "failed"
    return failed / trials


def test_false_alarm_rate_is_near_the_level() -> None:
    """Least-squares fits truly at the noise floor (linear model, random design, 2,000 trials): the F-test calls
    about ``noise_level`` of them failed (binomial s.d. 0.005 at 0.05: the band is ±4 s.d.); at the default level
    0.01 fewer than 2.5 %."""
    assert 0.03 <= _linear_trials(2000, 300, 12, 200, 0.0, 0.05) <= 0.07
    assert _linear_trials(2000, 300, 12, 200, 0.0, 0.01) <= 0.025


def test_a_fit_off_the_floor_is_failed() -> None:
    """Held-out residual variance twice the noise (a fit that is not the least-squares one): failed in nearly
    every trial; 40 % above it on 200 held-out observations, in about half (the test's power grows with the
    validation split: 64,000 observations at N = 20,000, (8,4,2))."""
    assert _linear_trials(500, 300, 12, 200, 1.0, 0.01) >= 0.95
    assert 0.3 <= _linear_trials(500, 300, 12, 200, 0.4, 0.01) <= 0.8


def test_noise_sigma_and_the_verdict_figures() -> None:
    assert noise_sigma(4.0, 104, 4) == pytest.approx(0.2)
    assert noise_sigma(1.0, 10, 10) is None
    v = noise_verdict(validation_error=0.5, tol=1e-12, fit=(50.0, 100.0, 1000), validation=(50.0, 1000), parameters=10)
    assert v.status == "failed" and "max_level" in v.reason  # relative MSE 0.5: a wrong fit, not noise
    still = noise_verdict(
        validation_error=1e-4,
        tol=1e-12,
        fit=(0.1, 1000.0, 1000),
        validation=(0.1, 1000),
        parameters=10,
        history=(1e-3, 1e-4),
    )
    assert still.status == "failed" and "still improving" in still.reason


def test_exact_data_is_exact() -> None:
    truth = plant(6, 3, 2, seed=0)
    X = sample_inputs(2000, 3, 6, rng=1)
    res = learn(X, truth(X), 2, method="vp-lm", seed=0)
    assert res.status == "exact" and res.converged and res.noise_sigma is None
    assert res.info.noise is not None and res.info.noise["status"] == "exact"


@pytest.mark.parametrize("method", ["auto", "sculpt", "gradient"])
def test_noisy_labels_end_at_the_noise_floor_with_the_least_squares_fit(method: str) -> None:
    """Labels with noise of 1 % of their rms: status "noise", converged, σ̂ within 20 % of the true σ, the polish
    refit on every training example (up to noise_max_examples), and the head error within 1.25× that of least
    squares by L-BFGS from the truth on all N (the route fits 90 %: √(10/9) = 1.05 expected)."""
    truth, X, Y, s = _noisy(6, 3, 2, 3000, 1e-2, 3)
    res = learn(X, Y, 2, method=method, seed=0)
    assert res.status == "noise" and res.converged and res.model is not None, res.reason
    assert res.noise_sigma is not None and 0.8 < res.noise_sigma / s < 1.25
    assert "noise floor" in res.reason
    ref = gradient_descent(X, Y, 2, method="lbfgs", seed=0, init=truth, tol=0.0, max_iter=5000).model
    assert ref is not None
    ratio = truth.distance(res.model).theta_error / truth.distance(ref).theta_error
    assert ratio < 1.25, ratio
    polish = res.phase("polish") if method != "auto" or "polish" in [p.name for p in res.phases] else None
    if polish is not None:
        assert polish.figures["examples"] == res.info.train_examples  # every training example (< 20,000)


def test_sculpt_stops_at_the_first_noise_verdict() -> None:
    truth, X, Y, _ = _noisy(6, 3, 2, 3000, 1e-2, 4)
    res = learn(X, Y, 2, method="sculpt", seed=0)
    assert len(res.info.attempts) == 1 and res.status == "noise"


def test_accept_noise_off_keeps_the_status_but_does_not_converge() -> None:
    truth, X, Y, _ = _noisy(6, 3, 2, 2000, 1e-2, 5)
    res = learn(X, Y, 2, method="vp-lm", seed=0, polish={"accept_noise": False})
    assert res.status == "noise" and not res.converged and res.noise_sigma is not None
    assert "accept_noise" in res.reason


def test_labels_from_no_attention_layer_fail_with_a_model() -> None:
    """Labels that are pure noise: every route hands back its best model, status failed, not converged."""
    rng = np.random.default_rng(0)
    X = sample_inputs(1500, 3, 6, rng=rng)
    Y = rng.standard_normal(X.shape)
    for method in ("vp-lm", "gradient", "auto"):
        res = learn(
            X, Y, 2, method=method, seed=0, vp_lm={"restarts": 2}, gradient={"max_iter": 50}, auto={"fallback": False}
        )
        assert res.model is not None and not res.converged and res.status == "failed", method


def test_no_route_returns_none_when_its_method_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sculpting route whose phase 2 cannot go on and the exact route whose systems have no usable example
    both return a fallback least-squares model with converged=False and the reason."""
    import sculpt.phases.sculpting as sculpting
    from sculpt.errors import PhaseFailed

    def fail(*args: object, **kwargs: object) -> None:
        raise PhaseFailed("2-sculpt", "the body is empty")

    monkeypatch.setattr(sculpting, "sculpt", fail)
    truth = plant(6, 3, 2, seed=1)
    X = sample_inputs(1500, 3, 6, rng=2)
    res = learn(X, truth(X), 2, method="sculpt", seed=0, sculpt_growth=1)
    assert res.model is not None and not res.converged and res.status == "failed"
    assert "phase 2-sculpt failed" in res.reason and res.info.fallback is not None
    one = plant(6, 3, 1, seed=1)
    Xd = sample_inputs(200, 3, 6, rng=3)
    Xd[:, 1:] = Xd[:, :1]  # every token of an example equal: the exact route's systems drop them all
    ex = learn(Xd, one(Xd), 1, method="exact", seed=0)
    assert ex.model is not None and not ex.converged and ex.status == "failed" and "method='exact'" in ex.reason


def test_cli_exits_0_under_noise(tmp_path: Path) -> None:
    args = [
        "recover",
        "--d",
        "6",
        "--k",
        "3",
        "--m",
        "2",
        "--samples",
        "3000",
        "--noise",
        "0.01",
        "--quiet",
        "--out",
        str(tmp_path),
    ]
    assert main(args) == 0
    doc = json.loads((tmp_path / "result.json").read_text())
    found = json.dumps(doc)
    assert '"status": "noise"' in found and '"noise_sigma"' in found


def test_repr_is_one_short_line_and_summary_is_plain() -> None:
    truth, X, Y, s = _noisy(6, 3, 2, 2000, 1e-2, 6)
    res = learn(X, Y, 2, method="vp-lm", seed=0)
    line = repr(res)
    assert "\n" not in line and len(line) < 200 and "status='noise'" in line
    text = res.summary()
    assert text.splitlines()[0].startswith("status:") and "noise" in text and "σ̂" in text and "vp-lm" in text
    doc = res.to_dict()
    assert doc["status"] == "noise" and doc["noise_sigma"] == res.noise_sigma
    json.dumps(doc["info"]["noise"], allow_nan=False)
