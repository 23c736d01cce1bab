"""oracles.backend_name / backend_names: resolution of solver=, unknown names, unusable backends."""
from __future__ import annotations

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


def test_a_backend_that_cannot_do_the_kind_is_a_solver_error():
    lacking = [n for n in backend_names() if "conic" not in solvers.capabilities(n)]
    if not lacking:
        pytest.skip("every usable backend handles conic problems")
    with pytest.raises(SolverError, match="cannot solve conic") as info:
        backend_name(lacking[0], kind="conic")
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
