"""docs/examples/flux_polytope.py on cobra's bundled e_coli_core ("textbook"; the large models are benchmark
only): the engine's hull, fixed fluxes and flux ranges against cobra's own flux variability analysis (its
solver, not the engine's) and the dimension by an independent rank."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

cobra = pytest.importorskip("cobra", reason="cobra (in the test extra) is not installed")

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "flux_polytope.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("example_flux_polytope", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["example_flux_polytope"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def result(example):
    return example.run("textbook")


def test_the_bundled_models_load_without_a_network(example):
    model = example.load_model("textbook")
    assert len(model.reactions) == 95 and len(model.metabolites) == 72
    # the BiGG ids name the bundled files: cobra's "salmonella" is iYS1720 (the genome-scale table's fourth model)
    assert example.load_model("e_coli_core").id == model.id == "e_coli_core"
    ys = example.load_model("iYS1720")
    assert ys.id == "iYS1720" and len(ys.reactions) == 3357 and len(ys.metabolites) == 2436


def test_hull_matches_cobra_fva_and_an_independent_rank(example, result):
    P, _ = example.flux_polytope(example.load_model("textbook"))
    assert P.is_sparse and P.n_bounds == 190 and P.A.shape[0] == 0
    fixed = result["cobra_fixed"]  # cobra's FVA: max - min <= 1e-7
    assert np.array_equal(result["fixed"], fixed) and result["fixed_agree"]
    S = P.A_eq.toarray()
    E = np.vstack([S, np.eye(P.dim)[fixed]])
    assert result["dim"] == P.dim - np.linalg.matrix_rank(E) == 24
    assert result["max_width_difference"] <= 1e-6
    assert result["interior_in_body"] and P.contains(result["interior_point"], tol=1e-7)
    assert result["max_width"] <= result["tol"] < result["min_slack"]


def test_chebyshev_centre_lies_inside_with_a_positive_relative_radius(example, result):
    P, _ = example.flux_polytope(example.load_model("textbook"))
    c, r = result["chebyshev_center"], result["chebyshev_radius"]
    assert r > 0.1 and P.contains(c, tol=1e-7)
    # the ball of radius r within the hull: each bound's slack is at least r times the length of x_j's
    # gradient inside the hull (‖row j of the hull's basis‖), with equality for some
    from oracles import affine_hull

    pi = np.linalg.norm(affine_hull(P).basis, axis=1)
    slack = np.minimum(P.ub - c, c - P.lb)
    live = pi > 1e-9
    assert np.all(slack[live] >= r * pi[live] * (1 - 1e-6) - 1e-9)
    assert np.min(slack[live] / pi[live]) <= r * (1 + 1e-6)


def test_every_hull_method_agrees_on_e_coli_core(example, result):
    from oracles import affine_hull

    P, _ = example.flux_polytope(example.load_model("textbook"))
    ref = affine_hull(P)
    for method in ("directions", "ellipsoid"):
        h = affine_hull(P, method=method)
        assert h.dim == ref.dim, method
        assert np.allclose(h.basis @ h.basis.T, ref.basis @ ref.basis.T, atol=1e-6), method
    for fast in ("dense-ipm", "backend-ipm", "off"):
        assert affine_hull(P, fast=fast).dim == ref.dim, fast


def test_the_script_prints_its_summary(example, capsys):
    assert example.main(["textbook"]) == 0
    out = capsys.readouterr().out
    assert "dimension 24, 8 fixed fluxes" in out and "same fixed set: True" in out
