"""sculpt: learn a multi-head attention layer F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i from random examples by
sculpting a convex body (Chen & Li, STOC 2025), on top of the ``oracles`` convex-body engine.

Public names: ``MultiHeadAttention`` (the layer), ``sample_inputs`` / ``plant`` / ``nondegeneracy`` (data
and planted instances), ``from_torch`` / ``to_torch`` (torch.nn.MultiheadAttention interop, torch imported
lazily), ``learn``, ``learn_from_queries`` (from black-box queries: ``sculpt.queries``), ``LearnResult`` / ``PhaseRecord`` / ``RouteInfo`` (results; ``LearnResult.info`` is a typed
``RouteInfo``), ``Settings`` (every option of ``learn``, typed; each group resolves its "auto" fields for a
``ProblemSize``), ``PhaseFailed``, ``certify``, and ``Route`` / ``register_route`` (a way for ``learn`` to learn
the layer, registered under its ``method`` name: the registry is ``sculpt.routes.ROUTES``). Gradient baselines
are in ``sculpt.baselines``. ``__version__`` is the installed distribution's version ("0+unknown" when the
package is imported from a tree that is not installed).
"""

from importlib import metadata as _metadata

from .certify import Certificate, certify
from .data import NondegeneracyReport, nondegeneracy, plant, sample_inputs
from .errors import PhaseFailed, SculptError
from .learner import learn
from .model import HeadDistance, MultiHeadAttention
from .queries import learn_from_queries
from .result import LearnResult, PhaseRecord, RouteInfo
from .routes import Route, register_route
from .settings import ProblemSize, Settings
from .torch_interop import from_torch, to_torch

try:
    __version__: str = _metadata.version("sculpt-attention")  # the distribution's name; the import name is sculpt
except _metadata.PackageNotFoundError:  # imported from a source tree that is not installed
    __version__ = "0+unknown"

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
    "RouteInfo",
    "learn",
    "learn_from_queries",
    "Settings",
    "ProblemSize",
    "Route",
    "register_route",
    "PhaseFailed",
    "SculptError",
    "certify",
    "Certificate",
]
