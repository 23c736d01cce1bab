"""The torch example runs and recovers a real torch.nn.MultiheadAttention with learn's default route (auto) and
with the sculpting learner."""
import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is an optional extra (pip install torch==2.13.0); CI installs it")


def test_torch_layer_example_recovers_the_layer():
    path = Path(__file__).resolve().parents[1] / "docs" / "examples" / "torch_layer.py"
    spec = importlib.util.spec_from_file_location("torch_layer_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for method in ("auto", "sculpt"):
        out = module.main(["--n", "6000", "--method", method])
        assert out[method]["converged"]
        assert out[method]["test_error"] <= 1e-12
        assert out[method]["theta_error"] <= 1e-6 and out[method]["w_error"] <= 1e-6
    assert set(module.main(["--n", "6000"])) == {"auto", "lbfgs"}   # auto by default
