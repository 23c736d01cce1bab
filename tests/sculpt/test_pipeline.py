"""sculpt.pipeline: phase 1, the route decision, the chosen route's phases 2–5 (a declined route falls through to
the next), phase 6 and the polish; failures recorded under the running phase; progress opened once per phase."""

from __future__ import annotations

import numpy as np
import pytest

from sculpt import plant, sample_inputs
from sculpt.errors import PhaseFailed
from sculpt.pipeline import (
    SCULPT_PHASES,
    ArgmaxStart,
    JointPhases,
    LearnState,
    Phase,
    Pipeline,
    RouteDecision,
    run_pipeline,
)
from sculpt.result import PhaseRecord
from sculpt.settings import Settings


class Reporter:
    """Counts what ``run_pipeline`` reports: every start must be followed by the end of that phase."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def start(self, name: str) -> float:
        self.events.append(("start", name))
        return 0.0

    def end(self, rec: PhaseRecord) -> None:
        self.events.append(("end", rec.name))


def _state(m: int = 2) -> LearnState:
    X = sample_inputs(40, 4, 6, rng=0)
    return LearnState(X, X, X[:5], X[:5], m, Settings(), np.random.default_rng(0))


def _ok(name: str) -> Phase:
    return Phase(name, lambda state: PhaseRecord(name))


def _toy(argmax_declines: bool, argmax: bool = True) -> Pipeline:
    def joint(state: LearnState) -> list[PhaseRecord] | None:
        return None if argmax_declines else [PhaseRecord("2-a", figures={"route": "argmax"}), PhaseRecord("3-b")]

    return Pipeline(
        first=(_ok("1"),),
        decide=lambda state: RouteDecision("", argmax=ArgmaxStart(np.eye(6), {}, 0.5, 0.0) if argmax else None),
        routes={"argmax": (JointPhases(("2-a", "3-b"), joint),), "body": (_ok("2-a"), _ok("3-b"))},
        last=(_ok("4"),),
    )


@pytest.mark.parametrize("declines", [False, True])
def test_the_decided_route_runs_and_a_declined_one_falls_through(declines: bool) -> None:
    state, records, progress = _state(), [], Reporter()
    assert run_pipeline(_toy(declines), state, records, progress) is None
    assert [r.name for r in records] == ["1", "2-a", "3-b", "4"]
    assert state.route == ("body" if declines else "argmax")
    assert ("route" in records[1].figures) is not declines
    # each phase opened once, closed once, in order: a declined step's phase is continued, not restarted
    assert progress.events == [(e, n) for n in ("1", "2-a", "3-b", "4") for e in ("start", "end")]
    assert len(_toy(declines)) == 4


def test_a_failure_is_recorded_under_the_running_phase() -> None:
    """A PhaseFailed raised by an algorithm a phase calls (phase 3's re-sculpt raises with its own record's
    name) stops the pipeline as a failure of the phase that was running."""

    def resculpt(state: LearnState) -> PhaseRecord:
        raise PhaseFailed("2-sculpt", "K* has too few equality rows")

    pipe = Pipeline(first=(_ok("1"), Phase("3-refine", resculpt), _ok("4")))
    records: list[PhaseRecord] = []
    failure = run_pipeline(pipe, _state(), records, Reporter())
    assert failure is not None and failure.phase == "3-refine" and failure.reason == "K* has too few equality rows"
    assert [(r.name, r.status) for r in records] == [("1", "ok"), ("3-refine", "failed")]


def test_a_failure_in_the_decision_is_the_first_routed_phase_s() -> None:
    def decide(state: LearnState) -> RouteDecision:
        raise np.linalg.LinAlgError("singular")

    pipe = Pipeline(first=(_ok("1"),), decide=decide, routes={"body": (_ok("2-a"),)})
    records: list[PhaseRecord] = []
    failure = run_pipeline(pipe, _state(), records)
    assert failure is not None and failure.phase == "2-a" and "LinAlgError: singular" in failure.reason
    assert [(r.name, r.status) for r in records] == [("1", "ok"), ("2-a", "failed")]


def test_a_bug_propagates() -> None:
    def bug(state: LearnState) -> PhaseRecord:
        raise IndexError("out of bounds")

    with pytest.raises(IndexError):
        run_pipeline(Pipeline(first=(Phase("1", bug),)), _state(), [])


def test_sculpt_phases_record_seven_phases_on_either_route() -> None:
    assert len(SCULPT_PHASES) == 7
    for steps in SCULPT_PHASES.routes.values():
        assert [n for s in steps for n in s.names] == ["2-sculpt", "3-refine", "4-span", "5-heads"]


def test_peaked_heads_take_the_argmax_branch_and_moderate_ones_fall_back() -> None:
    """On the real phases: strongly peaked heads run the argmax route (its start in the typed decision); at
    ‖Θ_i‖_F = 20 the split finds no start and the body route runs, with phase 2 reported once."""
    for scale, route in ((40.0, "argmax"), (20.0, "body")):
        model = plant(8, 4, 2, seed=1, scale=scale)
        X = sample_inputs(3000, 4, 8, rng=2)
        Y = model(X)
        settings = Settings().resolve(8, 4, 2, 2700)
        state = LearnState(X[:2700], Y[:2700], X[2700:], Y[2700:], 2, settings, np.random.default_rng(0))
        records: list[PhaseRecord] = []
        progress = Reporter()
        run_pipeline(SCULPT_PHASES, state, records, progress)
        assert state.decision is not None and state.decision.argmax is not None  # one-hot rows: worth a try
        assert state.route == route
        assert [r.name for r in records][:5] == ["1-sum-w", "2-sculpt", "3-refine", "4-span", "5-heads"]
        assert (records[3].status == "skipped") is (route == "argmax")
        assert [n for e, n in progress.events if e == "start"] == [r.name for r in records]
        if route == "body":
            assert "fell back to the body route" in str(state.info["argmax_route"])


def test_blind_shapes_take_the_linear_route_and_it_validates() -> None:
    """At (8,32,2) the body route is refused (k − 1 > d: the agreement test is blind); phase 1 fits the lifted
    linear-attention regression, the linear route records phases 2–4 as skipped and splits it into heads, and
    the polish validates from that start. At (8,4,2) the body route runs as before."""
    for (d, k, m), route in (((8, 32, 2), "linear"), ((8, 4, 2), "body")):
        model = plant(d, k, m, seed=0)
        X = sample_inputs(3000, k, d, rng=1)
        Y = model(X)
        settings = Settings().resolve(d, k, m, 2700)
        state = LearnState(X[:2700], Y[:2700], X[2700:], Y[2700:], m, settings, np.random.default_rng(0))
        records: list[PhaseRecord] = []
        failure = run_pipeline(SCULPT_PHASES, state, records, Reporter())
        assert failure is None and state.route == route
        assert (state.lifted is not None) is (route == "linear")
        skipped = [r.name for r in records if r.status == "skipped"]
        if route == "linear":
            assert skipped == ["2-sculpt", "3-refine", "4-span"]
            assert "lifted" in records[0].figures["estimator"] and state.converged
