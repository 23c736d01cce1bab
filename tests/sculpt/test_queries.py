"""Learning from queries (sculpt.queries): exact recovery at small d, the query budget, the oracle adapters and
the typed errors of a bad oracle. The full d × m grid is in benchmarks/queries.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from sculpt import LearnResult, MultiHeadAttention, learn_from_queries, plant
from sculpt.queries import (
    QUERY_ROUTES,
    OracleNonFinite,
    OracleNotDeterministic,
    OracleShapeError,
    QueryBudgetExceeded,
    QuerySettings,
    kkg_bound,
)
from sculpt.queries.algebra import FamilyFit, fit_family
from sculpt.queries.pipeline import _refit_factor

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "extract_torch.py"


def _by_phase(res: LearnResult) -> dict[str, dict[str, int]]:
    """Queries and tokens by phase, as ``learn_from_queries`` records them."""
    by_phase = res.info.details["queries_by_phase"]
    assert isinstance(by_phase, dict)
    return by_phase


def _exact(layer: MultiHeadAttention, res: LearnResult, seed: int = 9) -> None:
    assert res.converged, res.reason
    assert res.model is not None
    X = np.random.default_rng(seed).standard_normal((50, 5, layer.d))
    assert layer.prediction_error(res.model, X) <= 1e-12
    dist = layer.distance(res.model)
    assert dist.max_theta_error <= 1e-6 and dist.max_w_error <= 1e-6


@pytest.mark.parametrize(("d", "m"), [(4, 1), (4, 4), (8, 2), (8, 3)])
def test_default_route_recovers_planted_layers_within_the_bound(d: int, m: int) -> None:
    layer = plant(d, 4, m, seed=d + m)
    res = learn_from_queries(layer, d, m, seed=1)
    _exact(layer, res)
    assert res.samples_used == res.info.details["queries"] <= kkg_bound(d, m)  # type: ignore[operator]
    # every query is counted once, by the phase that asked it
    by_phase = _by_phase(res)
    assert sum(c["queries"] for c in by_phase.values()) == res.samples_used
    assert sum(p.figures.get("queries", 0) for p in res.phases) <= res.samples_used


def test_kkg_and_one_head_routes_read_the_first_row_and_recover() -> None:
    layer = plant(4, 4, 2, seed=3)
    res = learn_from_queries(layer, 4, 2, method="kkg", seed=0)
    _exact(layer, res)
    assert res.info.details["rows_read"] == "first" and res.info.details["copies"] == 4  # lengths <= 2m + 1
    one = plant(6, 4, 1, seed=2)
    res1 = learn_from_queries(one, 6, 1, method="one-head", seed=0)
    _exact(one, res1)
    assert res1.samples_used >= 6 * 6  # d² two-token queries
    with pytest.raises(ValueError, match="one head"):
        learn_from_queries(layer, 4, 2, method="one-head")


def test_auto_picks_the_route_with_fewest_predicted_queries() -> None:
    layer = plant(6, 4, 2, seed=4)
    res = learn_from_queries(layer, 6, 2, seed=0)
    predicted = {
        name: r.plan(6, 2, kkg_bound(6, 2)).predicted for name, r in QUERY_ROUTES.items() if name != "one-head"
    }
    assert res.info.route == min(predicted, key=lambda k: predicted[k])


def test_boolean_domain_asks_only_sign_tokens() -> None:
    layer = plant(6, 4, 2, seed=5)
    asked: list[np.ndarray] = []

    def oracle(X: np.ndarray) -> np.ndarray:
        asked.append(X)
        return layer(X)

    res = learn_from_queries(oracle, 6, 2, seed=0, domain="boolean")
    assert all(np.all(np.abs(X) == 1.0) for X in asked)
    _exact(layer, res)


def test_noisy_oracle_returns_the_least_squares_model_at_the_noise_floor() -> None:
    layer = plant(6, 4, 2, seed=6)
    rng = np.random.default_rng(0)
    sigma = 1e-5
    res = learn_from_queries(lambda X: layer(X) + sigma * rng.standard_normal(X.shape), 6, 2, seed=0, noise=sigma)
    assert res.converged and res.model is not None
    floor = res.info.details["noise_floor"]
    assert isinstance(floor, float) and res.validation_error is not None
    assert res.validation_error <= 1e-12 + 2 * floor
    # at the noise floor, not exact: the status says so, with σ̂ near the oracle's σ
    assert res.status == "noise" and res.noise_sigma is not None and 0.5 * sigma < res.noise_sigma < 2 * sigma
    assert layer.distance(res.model).max_theta_error < 1e-2
    assert any(p.name == "least-squares" for p in res.phases)
    cert = res.certificate
    assert cert is not None


def test_family_fit_recovers_poles_and_residues() -> None:
    rng = np.random.default_rng(1)
    ell = np.array([-1.0, 0.3, 1.2])
    V = rng.standard_normal((3, 5))
    n = np.arange(7.0)
    H = (1.0 / (1.0 + n[:, None] * np.exp(ell))) @ V
    fit = fit_family(H, 3)
    assert np.allclose(fit.ell, ell, atol=1e-9) and np.allclose(fit.residues, V, atol=1e-8)


# -------------------------------------------------------------------------------------------- bad oracles
def test_wrong_shape_names_the_query() -> None:
    layer = plant(4, 4, 1, seed=1)
    with pytest.raises(OracleShapeError, match=r"query #0 \(sum-w") as err:
        learn_from_queries(lambda X: layer(X)[:, :, :2], 4, 1, seed=0)
    assert err.value.index == 0 and err.value.query.shape == (1, 4)


def test_non_finite_answer_names_the_query() -> None:
    layer = plant(4, 4, 2, seed=1)

    def oracle(X: np.ndarray) -> np.ndarray:
        Y = layer(X)
        if X.shape[1] == 3:  # the families' second round: a token and two copies
            Y[1, 0, 0] = np.nan
        return Y

    with pytest.raises(OracleNonFinite, match="NaN or inf") as err:
        learn_from_queries(oracle, 4, 2, seed=0)
    assert err.value.phase == "families" and err.value.query.shape == (3, 4)


def test_randomised_oracle_is_caught_by_a_repeated_query() -> None:
    layer = plant(4, 4, 2, seed=1)
    rng = np.random.default_rng(0)
    with pytest.raises(OracleNotDeterministic, match="asked twice") as err:
        learn_from_queries(lambda X: layer(X) + 1e-6 * rng.standard_normal(X.shape), 4, 2, seed=0)
    assert err.value.index == 0


def test_budget_and_arguments_are_checked_before_any_query() -> None:
    layer = plant(4, 4, 2, seed=1)
    calls: list[int] = []

    def oracle(X: np.ndarray) -> np.ndarray:
        calls.append(X.shape[0])
        return layer(X)

    with pytest.raises(QueryBudgetExceeded):
        learn_from_queries(oracle, 4, 2, max_queries=10)
    with pytest.raises(ValueError, match="method"):
        learn_from_queries(oracle, 4, 2, method="nope")
    with pytest.raises(ValueError, match="domain"):
        learn_from_queries(oracle, 4, 2, domain="complex")
    with pytest.raises(ValueError, match="m <= d"):
        learn_from_queries(oracle, 2, 3)
    with pytest.raises(TypeError, match="oracle"):
        learn_from_queries(42, 4, 2)
    assert calls == []


# -------------------------------------------------------------------------------------------- settings
def test_settings_override_by_mapping_or_object_and_reject_unknown_names() -> None:
    layer = plant(4, 4, 2, seed=3)
    res = learn_from_queries(layer, 4, 2, seed=0, settings={"validation_queries": 3})
    _exact(layer, res)
    assert _by_phase(res)["validation"]["queries"] == 3
    default = learn_from_queries(layer, 4, 2, seed=0, settings=QuerySettings())
    assert _by_phase(default)["validation"]["queries"] == QuerySettings().validation_queries
    with pytest.raises(TypeError, match="validation_querys"):
        learn_from_queries(layer, 4, 2, settings={"validation_querys": 3})
    with pytest.raises(TypeError, match="QuerySettings"):
        learn_from_queries(layer, 4, 2, settings=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_shrink"):
        QuerySettings(max_shrink=-1.0)


def test_saturated_family_shrinks_by_at_most_max_shrink() -> None:
    s = QuerySettings()
    # a saturated fit's spurious pole (1e7) would shrink the family to logits ≈ 0 in one redraw
    spurious = FamilyFit(np.array([-3.0, 1e7]), np.ones((2, 4)), 1e-2)
    assert _refit_factor(s, spurious) == s.max_shrink
    mild = FamilyFit(np.array([-1.0, 2 * s.max_family_logit]), np.ones((2, 4)), 1e-2)
    assert s.max_shrink < _refit_factor(s, mild) < 1.0
    assert _refit_factor(s.merged(max_shrink=1e-3), spurious) < s.max_shrink


# ----------------------------------------------------------------------------------------------- torch
def test_torch_module_is_learnt_through_forward_calls() -> None:
    torch = pytest.importorskip("torch", reason="torch is an optional extra")
    from sculpt import from_torch

    torch.manual_seed(0)
    for batch_first in (True, False):
        mod = torch.nn.MultiheadAttention(8, 2, bias=False, batch_first=batch_first, dtype=torch.float64).eval()
        truth = from_torch(mod) if batch_first else None
        res = learn_from_queries(mod, 8, 2, seed=0)
        assert res.converged, res.reason
        if truth is not None:
            _exact(truth, res)


def test_rank_one_torch_heads_are_recovered_within_the_bound() -> None:
    # torch's init at d = m = 4 gives rank-1 heads whose first probe saturates some families (logits up to ~140)
    torch = pytest.importorskip("torch", reason="torch is an optional extra")
    from sculpt import from_torch

    torch.manual_seed(2)
    mod = torch.nn.MultiheadAttention(4, 4, bias=False, batch_first=True, dtype=torch.float64).eval()
    res = learn_from_queries(mod, 4, 4, seed=1)
    _exact(from_torch(mod), res)
    assert res.samples_used <= kkg_bound(4, 4)


def test_extract_torch_example_runs() -> None:
    pytest.importorskip("torch", reason="torch is an optional extra")
    spec = importlib.util.spec_from_file_location("extract_torch_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = module.main(["--d", "8", "--heads", "2"])
    assert out["converged"] and out["test_error"] <= 1e-12
    assert out["theta_error"] <= 1e-6 and out["w_error"] <= 1e-6
    assert out["queries"] <= out["bound"]
