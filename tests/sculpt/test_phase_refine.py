"""Phase 3 (sculpt.phases.refine): LP certification over the body and the refined ΣW."""
from __future__ import annotations

import numpy as np
import pytest

from oracles import min_norm_point
from sculpt.data import plant, sample_inputs
from sculpt.phases.refine import certify_rows, refine_sum_w
from sculpt.phases.sculpting import SculptedBody, sculpt
from sculpt.phases.sum_w import estimate_sum_w
from sculpt.settings import RefineSettings, Settings

M = 2


@pytest.fixture(scope="module")
def pipeline():
    d, k, m = 6, 4, M
    model = plant(d, k, m, seed=5)
    X = sample_inputs(12000, k, d, rng=6)
    Y = model(X)
    learn = Settings().resolve(d, k, m, X.shape[0])
    W1, r1 = estimate_sum_w(X, Y, learn.sum_w.merged(vp_rounds=0), truth=model)  # trimmed only: work left to do
    body, r2 = sculpt(X, Y, W1, truth=model)
    return model, X, Y, W1, r1, body


def learn_settings(X: np.ndarray) -> RefineSettings:
    """Phase 3's settings as ``learn`` resolves them for this data (12,000 examples at d = 6: it certifies)."""
    N, k, d = X.shape
    return Settings().resolve(d, k, M, N).refine


def test_certified_rows_have_large_margin_in_every_head(pipeline):
    model, X, Y, W1, _, body = pipeline
    proxy = min_norm_point(body.polytope, method="working_set")
    s = learn_settings(X)
    cert = certify_rows(X, body, proxy, s)
    assert 6 <= cert.rows.size <= cert.n_candidates <= s.n_candidates
    assert np.all(cert.margin > 1.0)
    k = X.shape[1]
    n, a = np.divmod(cert.rows, k)
    L = np.einsum("rd,ide,rje->rij", X[n, a], model.thetas, X[n])          # true logits (R, m, k)
    top = np.take_along_axis(L, cert.j_star[:, None, None].repeat(model.m, 1), -1)[..., 0]
    np.put_along_axis(L, cert.j_star[:, None, None].repeat(model.m, 1), -np.inf, -1)
    gap = top - L.max(-1)
    assert np.all(gap > 0), "a certified row whose true top token differs in some head (false certificate)"
    assert np.median(gap.min(1)) > 2.0


def test_refine_improves_sum_w_without_false_certificates(pipeline):
    model, X, Y, W1, r1, body = pipeline
    W3, kstar, rec = refine_sum_w(X, Y, W1, body, M, learn_settings(X).merged(rounds=2), truth=model)
    S = model.ws.sum(0)
    err = np.linalg.norm(W3 - S) / np.linalg.norm(S)
    assert rec.name == "3-refine"
    assert err < r1.truth["err_sum_w"]
    assert rec.truth["err_sum_w"] == pytest.approx(err)
    assert rec.truth["false_certificates"] == 0
    first = rec.figures["rounds"][0]
    assert first["certified"] >= 1 and first["candidates"] >= first["certified"]
    assert isinstance(kstar, SculptedBody) and kstar.F.shape[0] > 0
    assert kstar.F.shape == (kstar.g.shape[0], 36) and kstar.weights.shape == kstar.g.shape
    assert rec.figures["kstar"]["mode"] == "slabs"


def test_refine_keeps_sum_w_when_nothing_is_certified_strongly(pipeline):
    model, X, Y, W1, r1, body = pipeline
    W3, _, rec = refine_sum_w(X, Y, W1, body, M, learn_settings(X).merged(gamma_accept=1e6), truth=model)
    assert rec.figures["fallback_used"] is True
    assert rec.figures["rounds"][0]["method"].startswith("kept")
    np.testing.assert_array_equal(W3, W1)


@pytest.mark.parametrize("kw, exc", [
    (dict(W_sum=np.zeros((5, 5))), ValueError),
    (dict(body="not a body"), TypeError),
    (dict(settings={"rounds": 0}), ValueError),
    (dict(settings={"need": 2}), ValueError),
])
def test_bad_input(pipeline, kw, exc):
    model, X, Y, W1, _, body = pipeline
    args = dict(X=X[:300], Y=Y[:300], W_sum=W1, body=body, settings={})
    args.update(kw)
    with pytest.raises(exc):
        s = RefineSettings().merged(args.pop("settings"))
        refine_sum_w(args.pop("X"), args.pop("Y"), args.pop("W_sum"), args.pop("body"), M, s)


def test_body_of_the_wrong_dimension_is_rejected(pipeline):
    model, X, Y, W1, _, body = pipeline
    X4 = X[:200, :, :4]
    with pytest.raises(ValueError):
        refine_sum_w(X4, X4, W1[:4, :4], body, M)


def test_certify_false_keeps_sum_w_and_says_so(pipeline):
    model, X, Y, W1, _, body = pipeline
    W3, kstar, rec = refine_sum_w(X, Y, W1, body, M, learn_settings(X).merged(certify=False), truth=model)
    np.testing.assert_array_equal(W3, W1)
    assert rec.figures["certification_skipped"]
    assert rec.figures.get("certified_total", 0) == 0
    assert "skipped" in rec.message
    assert kstar.F.shape[0] > 0                      # K* is still re-sculpted with the kept ΣW


def test_few_examples_certify_nothing_by_default(pipeline):
    """``learn``'s default certifies only from ``certify_min_examples`` examples on: on fewer, ΣŴ is kept and
    K* is the slab body of the settings' ``slabs`` group, in phase 2's box."""
    model, X, Y, W1, _, body = pipeline
    s = learn_settings(X[:2000])
    assert s.certify is None and not s.certifies(2000)
    W3, kstar, rec = refine_sum_w(X[:2000], Y[:2000], W1, body, M, s)
    np.testing.assert_array_equal(W3, W1)
    assert rec.figures["rounds_run"] == 0 and rec.figures["certification_skipped"]
    assert rec.figures["kstar"]["mode"] == "slabs" and kstar.box == body.box == s.slabs.box


def test_proxy_method_rule():
    """The min-norm proxy: constraint generation up to d² = 100 (d <= 10), the dense IPM above."""
    from sculpt.phases.refine import proxy_method

    limit = RefineSettings().proxy_working_set_max_dim
    assert [proxy_method(d * d, limit) for d in (2, 10, 11, 16)] == ["working_set", "working_set", "ipm", "ipm"]
