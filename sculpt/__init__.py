"""sculpt: learn a multi-head attention layer F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i from random examples by
sculpting a convex body (Chen & Li, STOC 2025), on top of the ``oracles`` convex-body engine.

Public names: ``MultiHeadAttention`` (the layer), ``sample_inputs`` / ``plant`` / ``nondegeneracy`` (data
and planted instances), ``from_torch`` / ``to_torch`` (torch.nn.MultiheadAttention interop, torch imported
lazily), ``learn``, ``LearnResult`` / ``PhaseRecord`` (results; ``LearnResult.info`` is a typed
``sculpt.result.RouteInfo``), ``Settings`` (every option of ``learn``, typed), ``PhaseFailed``, ``certify``.
The routes ``learn`` can run are ``sculpt.routes.ROUTES`` (add one with ``sculpt.routes.register_route``);
gradient baselines are in ``sculpt.baselines``.
"""

from .certify import Certificate, certify
from .data import NondegeneracyReport, nondegeneracy, plant, sample_inputs
from .errors import PhaseFailed, SculptError
from .learner import learn
from .model import HeadDistance, MultiHeadAttention
from .result import LearnResult, PhaseRecord
from .settings import Settings
from .torch_interop import from_torch, to_torch

__all__ = [
    "MultiHeadAttention",
    "HeadDistance",
    "sample_inputs",
    "plant",
    "nondegeneracy",
    "NondegeneracyReport",
    "from_torch",
    "to_torch",
    "LearnResult",
    "PhaseRecord",
    "learn",
    "Settings",
    "PhaseFailed",
    "SculptError",
    "certify",
    "Certificate",
]
