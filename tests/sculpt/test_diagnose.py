"""What went wrong in the user's terms: misfits name their likely causes (the axis order tested), idle heads warn
naming m̂, a certificate of a model that does not fit says so, progress counts never pass their totals."""

from __future__ import annotations

import io
import time
import warnings

import numpy as np
import pytest

from sculpt import MultiHeadAttention, learn, plant, sample_inputs
from sculpt.certify import NO_FIT_RESIDUAL, certify
from sculpt.diagnose import linear_proxy_residual, looks_transposed, misfit_causes, supported_heads
from sculpt.toolkit import Progress


@pytest.mark.parametrize("d,k,m", [(8, 4, 2), (4, 8, 1), (6, 6, 2)])
def test_the_axis_check_prefers_the_layout_the_layer_used(d: int, k: int, m: int) -> None:
    """On attention data the linear proxy fits the (N, k, d) layout clearly better than its transpose, also when
    k = d (the shapes alone cannot tell)."""
    layer = plant(d, k, m, seed=1)
    X = sample_inputs(1500, k, d, rng=2)
    Y = layer(X)
    swapped, given, other = looks_transposed(X, Y)
    assert not swapped and given < other
    back, given_t, other_t = looks_transposed(X.transpose(0, 2, 1), Y.transpose(0, 2, 1))
    assert back and (given_t, other_t) == pytest.approx((other, given))


def test_the_linear_proxy_is_exact_on_a_linear_map() -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3, 5))
    A, B = rng.standard_normal((5, 5)), rng.standard_normal((5, 5))
    Y = X @ A + X.mean(axis=1, keepdims=True) @ B
    assert linear_proxy_residual(X, Y) < 1e-20
    assert linear_proxy_residual(X, np.zeros_like(Y)) == 1.0


def test_misfit_causes_names_the_causes_only_above_the_threshold() -> None:
    layer = plant(8, 4, 2, seed=3)
    X = sample_inputs(1000, 4, 8, rng=4)
    Y = layer(X)
    assert misfit_causes(X, Y, 2, 0.4, 0.5) is None and misfit_causes(X, Y, 2, None, 0.5) is None
    plain = misfit_causes(X, Y, 2, 0.97, 0.5)
    assert plain is not None and "(N, k, d) order" in plain and "m = 2" in plain and "attention layer" in plain
    Xt, Yt = X.transpose(0, 2, 1), Y.transpose(0, 2, 1)
    swapped = misfit_causes(Xt, Yt, 2, 0.97, 0.5)
    assert swapped is not None and "(N, d, k)" in swapped and "transpose" in swapped


def test_learn_on_transposed_arrays_names_the_axis_order() -> None:
    """Arrays saved as (N, d, k): the result's reason starts with the tested cause."""
    layer = plant(8, 4, 2, seed=0)
    X = sample_inputs(800, 4, 8, rng=1)
    Y = layer(X)
    res = learn(X.transpose(0, 2, 1), Y.transpose(0, 2, 1), 2, method="vp-lm", seed=0, vp_lm={"restarts": 1})
    assert not res.converged and res.validation_error > 0.5
    assert res.reason.startswith("the model does not fit")
    assert "X and Y look saved as (N, d, k)" in res.reason
    assert res.info.details["diagnosis"] in res.reason


def test_auto_stops_after_its_first_step_on_transposed_arrays() -> None:
    """auto checks the axis order once its best model misfits, and skips its later (costlier) steps when the
    arrays look transposed; on arrays in the right layout that misfit (random labels) it goes on."""
    layer = plant(8, 4, 2, seed=0)
    X = sample_inputs(1500, 4, 8, rng=1)
    Y = layer(X)
    res = learn(X.transpose(0, 2, 1), Y.transpose(0, 2, 1), 2, seed=0)
    assert not res.converged and res.model is not None
    assert len(res.info.tried) == 2 and "look saved as (N, d, k)" in res.info.tried[-1]
    noise = np.random.default_rng(2).standard_normal(Y.shape)
    res = learn(X, noise, 2, seed=0, auto={"fallback": False})
    assert not res.converged and not any("look saved as" in step for step in res.info.tried)


def test_more_heads_than_the_data_support_warn_naming_m_hat() -> None:
    layer = plant(6, 3, 1, seed=0)
    X = sample_inputs(600, 3, 6, rng=1)
    with pytest.warns(UserWarning, match=r"m̂ = 1 of the m = 2 heads.*no measurable effect.*learn with m=1"):
        res = learn(X, layer(X), 2, seed=0)
    assert res.converged and res.info.details["supported_heads"] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the right m: no warning
        learn(X, layer(X), 1, seed=0)


def test_supported_heads_counts_heads_that_add_to_the_output() -> None:
    layer = plant(4, 3, 3, seed=0)
    ws = layer.ws.copy()
    ws[1] *= 1e-9
    m_hat, idle = supported_heads(MultiHeadAttention(layer.thetas, ws), 1e-6)
    assert (m_hat, idle) == (2, [2])
    assert supported_heads(layer, 1e-6) == (3, [])


def test_under_noise_a_head_that_only_fits_noise_is_idle_but_a_weak_real_head_is_not() -> None:
    """A third head with ‖W_3‖ = 5e-4 × the largest (what a 3-head fit of 1 %-noisy 2-head labels leaves) passes
    the norm test but not the removal test; a planted weak head (W × 0.01) is kept by both."""
    layer = plant(8, 4, 2, seed=0)
    X = sample_inputs(2000, 4, 8, rng=1)
    Y = layer(X)
    Y = Y + 0.01 * np.sqrt(np.mean(Y * Y)) * np.random.default_rng(2).standard_normal(Y.shape)
    extra = plant(8, 4, 1, seed=5)
    scale = 5e-4 * np.linalg.norm(layer.ws[0]) / np.linalg.norm(extra.ws[0])
    three = MultiHeadAttention(np.concatenate([layer.thetas, extra.thetas]), np.concatenate([layer.ws, scale * extra.ws]))
    assert supported_heads(three, 1e-6) == (3, [])
    assert supported_heads(three, 1e-6, (X, Y), 0.05, 1e-12) == (2, [3])
    weak = plant(8, 4, 2, seed=0, weak_head=0.01)
    Yw = weak(X) + 0.01 * np.sqrt(np.mean(weak(X) ** 2)) * np.random.default_rng(3).standard_normal(X.shape)
    assert supported_heads(weak, 1e-6, (X, Yw), 0.05, 1e-12) == (2, [])


def test_certificate_of_a_model_that_does_not_fit_says_so() -> None:
    layer = plant(6, 3, 1, seed=0)
    X = sample_inputs(400, 3, 6, rng=1)
    good = certify(layer, X, layer(X) + 1e-3 * np.random.default_rng(2).standard_normal(X.shape))
    assert good.fits and "does NOT fit" not in good.summary()
    bad = certify(layer, X, np.random.default_rng(3).standard_normal(X.shape))
    assert bad.relative_residual > NO_FIT_RESIDUAL and not bad.fits
    first = bad.summary().splitlines()[0]
    assert "does NOT fit" in first and first.index("does NOT fit") < first.index("locally unique")
    assert bad.to_dict()["fits"] is False


def test_progress_counts_never_pass_their_totals() -> None:
    """A route that runs more steps than it announced (auto repeating sculpt's phases) raises the total."""

    class Rec:
        def __init__(self, name: str) -> None:
            self.name, self.status, self.time, self.message = name, "ok", 0.0, ""

    buf = io.StringIO()
    prog = Progress(True, "auto", 2, stream=buf, use_tqdm=False, heartbeat=0)
    for i in range(5):
        prog.start(f"step{i}")
        prog.end(Rec(f"step{i}"))
    prog.close()
    tags = [line.split("]")[0].split()[-1] for line in buf.getvalue().splitlines()]
    assert len(tags) == 10
    for tag in tags:
        done, total = map(int, tag.split("/"))
        assert 1 <= done <= total


def test_a_long_step_shows_it_is_alive() -> None:
    buf = io.StringIO()
    prog = Progress(True, "auto", 1, stream=buf, use_tqdm=False, heartbeat=0.05)
    prog.start("slow")
    time.sleep(0.3)
    prog.close()
    text = buf.getvalue()
    assert "slow: still running" in text
    after = len(text)
    time.sleep(0.2)  # closed: the ticker has stopped
    assert len(buf.getvalue()) == after
