"""Typed settings: validation, deep merge, typos at any depth on every route, resolve(), the pipeline's error
policy, and truth= never changing a result."""
from __future__ import annotations

import dataclasses
import json
import re
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from sculpt import MultiHeadAttention, PhaseFailed, Settings, learn, plant, sample_inputs
from sculpt.settings import BodySettings, _Group

ROUTES = ["sculpt", "exact", "gradient", "auto"]


def _groups(obj: _Group, path: str = ""):
    """(dotted path, group) for the settings tree."""
    yield path, obj
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if isinstance(v, _Group):
            yield from _groups(v, f"{path}.{f.name}" if path else f.name)


def _nest(path: str, leaf: dict) -> dict:
    out = leaf
    for part in reversed(path.split(".")) if path else []:
        out = {part: out}
    return out


ALL_PATHS = [(p, f.name) for p, g in _groups(Settings()) for f in dataclasses.fields(g)
             if not isinstance(getattr(g, f.name), _Group)]


@pytest.fixture(scope="module")
def data():
    model = plant(8, 4, 1, seed=0)
    X = sample_inputs(1500, 4, 8, rng=1)
    return X, model(X)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("path", sorted({p for p, _ in ALL_PATHS}))
def test_a_typo_at_any_depth_on_any_route_is_a_type_error_naming_it(data, route: str, path: str) -> None:
    X, Y = data
    overrides = _nest(path, {"tolx": 1.0})
    with pytest.raises(TypeError, match=r"unknown setting '" + (path + "." if path else "") + "tolx'"):
        learn(X, Y, 1, method=route, seed=0, **overrides)


def test_typo_names_the_closest_valid_name() -> None:
    with pytest.raises(TypeError, match=r"'refine\.slabs\.tua'.*did you mean 'refine\.slabs\.tau'"):
        Settings().merged(refine={"slabs": {"tua": 0.02}})
    with pytest.raises(TypeError, match=r"did you mean 'refine'"):
        Settings().merged(refin={})
    with pytest.raises(TypeError, match="unknown setting"):
        Settings(refine={"nope": 1})


@pytest.mark.parametrize("path,name", ALL_PATHS)
def test_every_field_has_a_reason_and_a_validator(path: str, name: str) -> None:
    group = Settings()
    for part in path.split(".") if path else []:
        group = getattr(group, part)
    f = {f.name: f for f in dataclasses.fields(group)}[name]
    assert f.metadata["why"] and callable(f.metadata["check"])
    assert f"{name} = " in type(group).describe()
    with pytest.raises((ValueError, TypeError)):  # an obviously wrong value is refused on construction
        Settings().merged(_nest(path, {name: "not a setting value"}))


def test_deep_merge_keeps_the_other_fields() -> None:
    s = Settings().merged(refine={"slabs": {"tau": 0.02}})
    assert s.refine.slabs.tau == 0.02
    assert s.refine.rounds == Settings().refine.rounds
    assert s.refine.slabs.tau_max == BodySettings().tau_max
    # and merging again keeps the earlier override
    s2 = s.merged(refine={"slabs": {"tau_max": 0.1}})
    assert (s2.refine.slabs.tau, s2.refine.slabs.tau_max) == (0.02, 0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.tol = 1.0  # type: ignore[misc]


@given(tau=st.floats(-10, 10, allow_nan=False), rounds=st.integers(-3, 5))
@hsettings(max_examples=60, deadline=None)
def test_validation_accepts_exactly_the_valid_range(tau: float, rounds: int) -> None:
    ok = tau > 0 and rounds >= 1
    try:
        s = Settings().merged(refine={"rounds": rounds, "slabs": {"tau": tau}})
    except ValueError as exc:
        assert not ok
        assert "refine." in str(exc)
    else:
        assert ok and s.refine.slabs.tau == tau and s.refine.rounds == rounds


def test_resolve_fills_every_auto_field_from_the_size() -> None:
    r = Settings().resolve(16, 4, 3, 20000)
    assert r.sculpt_examples == 10 * 16 * 16 and r.refine.certify is False  # d² = 256 > 100
    assert r.max_sculpt_examples == 20_000
    assert r.refine.slabs.min_equalities == 10 * 16 * 16 and r.refine.slabs.q_tol == 1e-3
    assert r.sculpt.q_tol == 0.02 and r.sculpt.box == 4.0 and r.refine.resculpt.box == 4.0
    # one head: max(64, ⌈2d²/(k(k−1))⌉) (K* needs d² equality rows, at most k(k−1) per example)
    assert Settings().resolve(8, 4, 1, 5000).sculpt_examples == 64
    assert Settings().resolve(24, 4, 1, 5000).sculpt_examples == 96
    assert Settings().resolve(8, 4, 2, 5000).sculpt_examples == 1500
    # d² <= 100: phase 3 decides by its subset size (refine.certify_min_examples), so the setting stays open
    assert Settings().resolve(8, 4, 2, 5000).refine.certify is None
    # K*'s half-space rows: the half-space body's row count; phase 4's scan budget is smaller only where the
    # agreement test is blind (m(k−1) > d with m >= 2: one head has no disagreement to miss)
    assert r.refine.slabs.half_rows == r.sculpt.n_rows == 600 and r.refine.slabs.n_rows == 2000
    assert r.span.scan_examples == 200_000 and Settings().resolve(8, 4, 3, 5000).span.scan_examples == 20_000
    assert Settings().resolve(2, 4, 1, 5000).span.scan_examples == 200_000
    # user values are never replaced, and a phase-2 box is inherited by phase 3's bodies unless they set one
    u = Settings().merged(sculpt={"box": 5.0}, refine={"slabs": {"box": 7.0}}).resolve(8, 4, 2, 5000)
    assert (u.sculpt.box, u.refine.resculpt.box, u.refine.slabs.box) == (5.0, 5.0, 7.0)
    json.dumps(r.to_dict(), allow_nan=False)


def test_old_option_dicts_still_work_with_a_deprecation_warning() -> None:
    from sculpt.settings import settings_from_options

    with pytest.warns(DeprecationWarning, match="refine_options"):
        s = settings_from_options(None, {"refine_options": {"slab_opts": {"tau": 0.02}, "rounds": 2}})
    assert s.refine.slabs.tau == 0.02 and s.refine.rounds == 2
    # the example: a phase-3 override at m = 3 must not drop the learner's own min_equalities = 10 d²
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        s = settings_from_options(None, {"refine_options": {"slab_opts": {"tau": 0.02}}}).resolve(8, 4, 3, 20000)
    assert s.refine.slabs.min_equalities == 10 * 64 and s.refine.slabs.tau == 0.02
    with pytest.raises(TypeError, match="refine.slabs.taux"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            settings_from_options(None, {"refine_options": {"slab_opts": {"taux": 0.02}}})


def test_settings_object_and_overrides_combine(data) -> None:
    X, Y = data
    base = Settings(tol=1e-10)
    res = learn(X[:200], Y[:200], 1, method="exact", seed=0, settings=base, validation_size=20)
    assert res.info["settings"]["tol"] == 1e-10 and res.info["validation_examples"] == 20
    with pytest.raises(TypeError, match="settings must be"):
        learn(X, Y, 1, method="exact", settings=3)


def test_a_bug_inside_a_phase_propagates(monkeypatch: pytest.MonkeyPatch, data) -> None:
    """Only PhaseFailed / engine / numerical failures become a failed record; a ValueError is a bug."""
    import sculpt.phases.span as span

    def buggy(*a: object, **k: object) -> None:
        raise IndexError("index 7 is out of bounds")

    monkeypatch.setattr(span, "extract_span", buggy)
    X, Y = data
    with pytest.raises(IndexError, match="out of bounds"):
        learn(X, Y, 1, method="sculpt", seed=0)

    def cannot(*a: object, **k: object) -> None:
        raise PhaseFailed("4-span", "too few equality rows")

    monkeypatch.setattr(span, "extract_span", cannot)
    res = learn(X, Y, 1, method="sculpt", seed=0)
    assert not res.converged and res.phase("4-span").status == "failed" and "too few equality rows" in res.reason
    # auto does not fall back silently on a bug either
    monkeypatch.setattr(span, "extract_span", buggy)
    layer = plant(6, 3, 2, seed=1)
    X2 = sample_inputs(1500, 3, 6, rng=2)
    with pytest.raises(IndexError):
        # auto runs sculpt here (no L-BFGS or VP-LM try first), and must not hide the bug behind its fallback
        learn(X2, layer(X2), 2, method="auto", seed=0, auto={"peer_first": False, "vp_lm_starts": 0})


# ground-truth figures that phases record inside their per-round/per-step figures when truth= is given
TRUTH_KEYS = {"truth", "err_sum_w", "proxy_rel_dist_mean_head", "heads_max_violation", "leakage_max",
              "true_gap_min", "false_certificates", "margin_violations"}


def _no_times(obj):
    """Text with wall times ("0.36 s") removed: auto's reason lists what it tried with times."""
    return re.sub(r"\d+\.\d+ s\b", "_ s", obj) if isinstance(obj, str) else obj


def _strip_truth(obj):
    if isinstance(obj, dict):
        return {k: _strip_truth(v) for k, v in obj.items() if k not in TRUTH_KEYS and k != "time"
                and not k.endswith("_time")}
    if isinstance(obj, list):
        return [_strip_truth(v) for v in obj]
    return _no_times(obj)


@pytest.mark.parametrize("method,d,k,m,N", [("sculpt", 6, 3, 2, 3000), ("exact", 8, 4, 1, 100),
                                            ("gradient", 6, 3, 2, 300), ("auto", 6, 3, 2, 1200)])
def test_truth_never_changes_the_result(method: str, d: int, k: int, m: int, N: int) -> None:
    """Bit-identical model and records with and without truth=, apart from the truth fields and times."""
    layer = plant(d, k, m, seed=3)
    X = sample_inputs(N, k, d, rng=4)
    Y = layer(X)
    a = learn(X, Y, m, method=method, seed=5)
    b = learn(X, Y, m, method=method, seed=5, truth=layer)
    assert isinstance(a.model, MultiHeadAttention) and isinstance(b.model, MultiHeadAttention)
    assert np.array_equal(a.model.thetas, b.model.thetas) and np.array_equal(a.model.ws, b.model.ws)
    assert a.validation_error == b.validation_error and a.converged == b.converged
    assert _no_times(a.reason) == _no_times(b.reason)
    da, db = _strip_truth(a.to_dict()), _strip_truth(b.to_dict())
    assert json.dumps(da, sort_keys=True, default=str) == json.dumps(db, sort_keys=True, default=str)
    assert b.info["truth"] and any(p.truth for p in b.phases) or method == "gradient"
