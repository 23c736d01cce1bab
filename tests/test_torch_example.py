"""The torch example runs and recovers a real torch.nn.MultiheadAttention with the sculpting learner."""
import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is an optional extra (pip install torch==2.13.0); CI installs it")


def test_torch_layer_example_recovers_the_layer():
    path = Path(__file__).resolve().parents[1] / "docs" / "examples" / "torch_layer.py"
    spec = importlib.util.spec_from_file_location("torch_layer_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = module.main(["--n", "6000"])
    assert out["sculpt"]["converged"]
    assert out["sculpt"]["test_error"] <= 1e-12
    assert out["sculpt"]["theta_error"] <= 1e-6 and out["sculpt"]["w_error"] <= 1e-6
