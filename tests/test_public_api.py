"""The public names the issues list are a contract: import them exactly as written there and check the
keyword arguments other code calls them with."""
from __future__ import annotations

import inspect

import numpy as np
import pytest


def _keywords(fn) -> set[str]:
    return set(inspect.signature(fn).parameters)


def test_oracles_contract_imports_and_keywords() -> None:
    import oracles
    from oracles import (
        AffineSubspace,
        Ball,
        Cut,
        EmptyBodyError,
        OracleBody,
        Polytope,
        SolverError,
        UnboundedError,
        affine_hull,
        chebyshev_center,
        cutting_plane,
        ellipsoid,
        linear_span,
        min_norm_point,
        solvers,
        width,
    )

    for name in oracles.__all__:  # everything advertised is importable
        assert hasattr(oracles, name), name
    assert {"body", "center", "radius", "objective", "tol", "max_iter"} <= _keywords(ellipsoid)
    assert {"body", "center", "radius", "objective", "tol", "max_iter"} <= _keywords(cutting_plane)
    assert {"body", "method", "tol", "solver"} <= _keywords(affine_hull)
    assert {"body_or_points", "tol"} <= _keywords(linear_span)
    for fn in (min_norm_point, chebyshev_center, width):
        assert "solver" in _keywords(fn)
    assert {"A", "b", "A_eq", "b_eq"} <= _keywords(Polytope)
    assert {"dim", "separate", "contains", "maximize"} <= _keywords(OracleBody)
    assert {"center", "radius"} <= _keywords(Ball) and {"normal", "offset"} <= _keywords(Cut)
    for err in (EmptyBodyError, UnboundedError, SolverError):
        assert issubclass(err, Exception)
    assert solvers.default() in solvers.available()

    P = Polytope(np.vstack([np.eye(3), -np.eye(3)]), np.ones(6))
    for method in ("add_halfspaces", "add_equalities", "add_slabs", "contains", "separate", "maximize"):
        assert callable(getattr(P, method)), method
    P.add_equalities(np.array([[1.0, 0.0, 0.0]]), np.array([0.0]))
    assert (P.dim, P.n_constraints) == (3, 7)
    hull = affine_hull(P)
    assert isinstance(hull, AffineSubspace) and hull.dim == 2
    for attr in ("point", "basis", "equations", "contains", "project", "to_local", "to_global"):
        assert hasattr(hull, attr), attr


def test_sculpt_contract_imports_and_keywords() -> None:
    from sculpt import MultiHeadAttention, from_torch, learn, nondegeneracy, plant, sample_inputs
    from sculpt.baselines import gradient_descent

    assert {"X", "Y", "m", "method", "seed", "solver", "progress"} <= _keywords(learn)
    assert {"X", "Y", "m", "method", "seed", "restarts", "max_iter", "tol"} <= _keywords(gradient_descent)
    assert {"n", "k", "d", "rng", "distribution"} <= _keywords(sample_inputs)
    assert {"d", "k", "m", "scale", "seed"} <= _keywords(plant)
    assert {"model"} <= _keywords(nondegeneracy) and {"module"} <= _keywords(from_torch)
    assert {"thetas", "ws"} <= _keywords(MultiHeadAttention)
    for attr in ("save", "load", "distance", "prediction_error", "attention"):
        assert callable(getattr(MultiHeadAttention, attr)), attr


def test_routes_contract_imports_and_fields() -> None:
    """Routes are objects in one registry (sculpt.routes); learn's METHODS and min_examples come from it, and a
    result's info is a typed RouteInfo that still reads as a mapping."""
    import dataclasses

    from sculpt.learner import METHODS, min_examples
    from sculpt.result import LearnResult, RouteInfo
    from sculpt.routes import ROUTES, Holdout, Route, RouteContext, get_route, register_route

    assert callable(register_route) and callable(min_examples) and Holdout(3).train == 3
    assert set(METHODS) <= set(ROUTES) and {"sculpt", "exact", "gradient", "vp-lm", "auto"} <= set(METHODS)
    assert {"name", "run", "min_examples", "settings", "validated"} <= {f.name for f in dataclasses.fields(Route)}
    assert {"Xtr", "Ytr", "Xva", "Yva", "m", "settings"} <= {f.name for f in dataclasses.fields(RouteContext)}
    assert get_route("exact").refusal(8, 4, 2) is not None and get_route("sculpt").validated is False
    info_fields = {f.name for f in dataclasses.fields(RouteInfo)}
    assert {"train_examples", "validation_examples", "tol", "route", "model_from", "settings", "truth",
            "attempts", "examples_used", "tried", "solver", "details"} <= info_fields
    res = LearnResult(None, "x", 1.0, info={"route": "x", "extra": 2})
    assert res.info["route"] == res.info.route == "x" and res.info.get("extra") == 2 and res.info.to_dict()
    # what a user needs to register a route, read its info or resolve settings is at the top level
    import sculpt
    from sculpt.settings import ProblemSize

    assert (sculpt.Route, sculpt.register_route, sculpt.RouteInfo, sculpt.ProblemSize) == (
        Route,
        register_route,
        RouteInfo,
        ProblemSize,
    )


def test_oracles_never_imports_sculpt() -> None:
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1] / "oracles"
    offenders = [str(p) for p in root.rglob("*.py")
                 if any(line.lstrip().startswith(("import sculpt", "from sculpt"))
                        for line in p.read_text().splitlines())]
    assert offenders == [], f"oracles/ must not import sculpt: {offenders}"


_ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def _engine_modules() -> list[str]:
    """Dotted names of every module under oracles/ (the package's own __init__ excluded)."""
    out = []
    for p in sorted((_ROOT / "oracles").rglob("*.py")):
        parts = p.relative_to(_ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts != ("oracles",):
            out.append(".".join(parts))
    return out


def test_every_exported_name_exists_and_every_module_is_private_or_exported() -> None:
    """oracles.__all__ names exist; every module of oracles/ is private ("_name", or inside a private or
    exported subpackage) or has an __all__ whose names are all exported from oracles (a public subpackage
    such as ``solvers`` is exported as a whole)."""
    import importlib

    import oracles

    assert len(set(oracles.__all__)) == len(oracles.__all__), "duplicate names in oracles.__all__"
    for name in oracles.__all__:
        assert getattr(oracles, name, None) is not None, f"oracles.__all__ lists {name!r}, which does not exist"
    exported = set(oracles.__all__)
    for dotted in _engine_modules():
        parts = dotted.split(".")[1:]
        if any(p.startswith("_") for p in parts) or parts[0] in exported:
            continue   # private, or inside an exported subpackage (oracles.solvers)
        mod = importlib.import_module(dotted)
        public = getattr(mod, "__all__", None)
        assert public is not None, f"{dotted} is public but has no __all__ (export it or rename it _{parts[-1]})"
        missing = sorted(set(public) - exported)
        assert not missing, f"{dotted} defines public {missing} that oracles does not export"


def test_nothing_outside_the_engine_imports_its_private_names() -> None:
    """sculpt/, benchmarks/ and docs/ use the engine's public API: no `oracles._x` module, no `_name` import."""
    import re

    pattern = re.compile(r"^\s*(from\s+oracles[\w.]*\._\w+|import\s+oracles[\w.]*\._\w+|"
                         r"from\s+oracles[\w.]*\s+import\s+(\(?\s*)?_\w+)", re.M)
    offenders = []
    for folder in ("sculpt", "benchmarks", "docs"):
        for p in (_ROOT / folder).rglob("*.py"):
            for m in pattern.finditer(p.read_text()):
                offenders.append(f"{p.relative_to(_ROOT)}: {m.group(0).strip()}")
    assert offenders == [], f"private engine names used outside oracles/: {offenders}"


def test_no_code_branches_on_backend_names() -> None:
    """Backends declare capabilities on their class (solvers.Backend); nothing compares a backend's name."""
    import re

    names = "HIGHS|CLARABEL|SCS|MOSEK"
    pattern = re.compile(rf"(\.name\s*[!=]=\s*[\"']({names})[\"']|[!=]=\s*[\"']({names})[\"']|"
                         rf"[\"']({names})[\"']\s*[!=]=)", re.I)
    offenders = []
    for folder in ("oracles", "sculpt"):
        for p in (_ROOT / folder).rglob("*.py"):
            for i, line in enumerate(p.read_text().splitlines(), 1):
                if pattern.search(line):
                    offenders.append(f"{p.relative_to(_ROOT)}:{i}: {line.strip()}")
    assert offenders == [], f"branches on backend names: {offenders}"


@pytest.mark.parametrize("name", ["Polytope", "affine_hull", "ellipsoid", "min_norm_point"])
def test_contract_names_have_docstrings(name: str) -> None:
    import oracles

    assert (getattr(oracles, name).__doc__ or "").strip(), f"oracles.{name} has no docstring"


@pytest.mark.parametrize("package", ["sculpt", "oracles"])
def test_version_and_type_marker(package: str) -> None:
    """`__version__` is the installed distribution's version (what `sculpt --version` prints), and the
    package directory holds the PEP 561 `py.typed` marker."""
    import importlib
    import importlib.metadata
    import importlib.resources

    mod = importlib.import_module(package)
    assert isinstance(mod.__version__, str)
    assert mod.__version__ == importlib.metadata.version("sculpt-attention")
    assert importlib.resources.files(package).joinpath("py.typed").is_file()


def test_cli_version_matches_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    import sculpt
    from sculpt.cli import main

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"sculpt {sculpt.__version__}"
