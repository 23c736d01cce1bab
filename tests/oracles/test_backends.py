"""oracles.backend_name / backend_names: resolution of solver=, unknown names, unusable backends."""
from __future__ import annotations

import numpy as np
import pytest

import oracles
from oracles import SolverError, backend_name, backend_names, solvers


def test_default_is_the_registry_default_for_each_kind():
    for kind in solvers.KINDS:
        assert backend_name(kind=kind) == solvers.default(kind)
        assert backend_name(None, kind) in backend_names(kind)


def test_a_given_name_resolves_case_insensitively():
    for name in backend_names("lp"):
        assert backend_name(name.lower()) == name
        assert backend_name(name, kind="lp") == solvers.get(name, kind="lp").name


def test_unknown_name_and_kind_are_value_errors():
    with pytest.raises(ValueError, match="solver"):
        backend_name("GUROBI_NOT_HERE")
    with pytest.raises(ValueError, match="kind"):
        backend_name(kind="sdp-ish")
    with pytest.raises(ValueError, match="kind"):
        backend_names("sdp-ish")
    with pytest.raises(ValueError, match="kind"):
        backend_names("sdp-ish", usable=False)


def test_a_backend_that_cannot_do_the_kind_is_a_solver_error(lp_only_backend):
    assert "conic" not in solvers.capabilities(lp_only_backend)
    with pytest.raises(SolverError, match="cannot solve conic") as info:
        backend_name(lp_only_backend, kind="conic")
    assert info.value.status == "unsupported"


@pytest.mark.skipif(solvers.unavailable_reason("MOSEK") is None, reason="MOSEK is licensed here: nothing to refuse")
def test_unlicensed_mosek_is_a_solver_error_saying_why():
    with pytest.raises(SolverError, match="MOSEK") as info:
        backend_name("mosek")
    assert info.value.backend == "MOSEK" and info.value.status == "unavailable"
    assert "MOSEK" in backend_names(usable=False) and "MOSEK" not in backend_names()


def test_names_lists():
    every = backend_names(usable=False)
    assert every == solvers.registered()
    assert set(backend_names()) <= set(every)
    for kind in solvers.KINDS:
        assert backend_names(kind) == solvers.available(kind)
        assert set(backend_names(kind)) <= set(backend_names(kind, usable=False))
        assert all(kind in solvers.capabilities(n) for n in backend_names(kind, usable=False))


def test_exported():
    assert {"backend_name", "backend_names"} <= set(oracles.__all__)


def test_register_adds_a_backend_until_removed_and_restores_the_preferences() -> None:
    """``solvers.register``: a new solver name (case-insensitive) and, with ``prefer``, the default for that
    kind; ``remove()`` (or leaving the ``with`` block) restores the registry, the default and the probe cache."""
    from oracles import solvers

    class Relay(solvers.Backend):
        name, SUPPORTS_LP = "RELAY", True

        def probe(self) -> tuple[bool, str]:
            return (True, "")

        def solve(self, data, *, interior=False, options=None):  # type: ignore[no-untyped-def]
            return solvers.get("HIGHS").solve(data, interior=interior, options=options)

    default_lp = solvers.default("lp")
    reg = solvers.register(Relay(), prefer=("lp",))
    assert backend_name("relay") == "RELAY" and solvers.default("lp") == "RELAY"
    assert solvers.solve_lp(np.ones(2), np.eye(2), np.ones(2), bounds=[(-1, None)] * 2, solver="relay").value == -2
    with pytest.raises(ValueError, match="registered already"):
        solvers.register(Relay())
    reg.remove()
    assert "RELAY" not in solvers.registered() and solvers.default("lp") == default_lp
    with pytest.raises(ValueError, match="solver must be one of"):
        backend_name("relay")
    with pytest.raises(TypeError, match="Backend"):
        solvers.register(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kind"):
        solvers.register(Relay(), prefer=("milp",))
    assert "RELAY" not in solvers.registered()
