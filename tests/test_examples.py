"""The documented examples run and show what they claim."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"example_{name}"] = module  # dataclasses look their module up by name
    module.__name__ = f"example_{name}"
    spec.loader.exec_module(module)
    return module


def test_linear_threshold_learns(capsys):
    ex = load("linear_threshold")
    rows = ex.main(["--dim", "6", "--samples", "8", "32", "128", "--seed", "3"])
    out = capsys.readouterr().out
    assert "width(w*)" in out and len(out.strip().splitlines()) == 4
    # the ellipsoid's point is consistent with every sample (y w·x >= 1)
    assert all(r.ellipsoid_status == "feasible" and r.consistent for r in rows)
    # nested version spaces: widths never grow, and they shrink overall
    along = np.array([r.width_along_truth for r in rows])
    across = np.array([r.width_across_truth for r in rows])
    assert np.all(np.diff(along) <= 1e-6 * along[0]) and np.all(np.diff(across) <= 1e-6 * across[0])
    assert across[-1] < 0.5 * across[0] and along[-1] < along[0]
    # the Chebyshev centre generalises: it points close to w* and classifies fresh samples well
    assert rows[-1].cosine_to_truth > 0.9 and rows[-1].test_accuracy > 0.85
    # the version space always holds w*/γ, so its Chebyshev ball is non-degenerate
    assert all(r.chebyshev_radius > 0 for r in rows)
