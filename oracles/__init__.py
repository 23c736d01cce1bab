"""oracles: a general convex-body engine.

Convex bodies known through membership, separation and linear-optimisation oracles (``Polytope``,
``Ball``, ``OracleBody``, their intersections and norm epigraphs), cuts as values, ellipsoid and
analytic-centre cutting-plane methods, affine-hull and span extraction, min-norm points, Chebyshev centres
and widths, flats fitted to noisy equations, sound LP bounds by constraint generation, how far a system of
inequalities is from feasible and cheap feasible points, support values and flat slices of polytopes, over a
registry of LP/QP/conic backends (``backend_name`` resolves a ``solver=`` choice). It knows nothing of
attention. Every public module's names are exported here; modules whose names start with "_" are private.
docs/engine.md has an example for each.
``__version__`` is the version of the distribution that ships it (``sculpt``; "0+unknown" when not installed).
"""

from importlib import metadata as _metadata

from . import solvers
from .affine import ExactCheck, ImplicitEqualities, affine_hull, implicit_equalities, linear_span
from .affine_subspace import AffineSubspace
from .backends import backend_name, backend_names
from .bodies import Ball, ConvexBody, Intersection, NormEpigraph, OracleBody, Polytope
from .cuts import Cut, ParallelCut
from .cutting_plane import cutting_plane
from .ellipsoid import Ellipsoid, ellipsoid
from .errors import EmptyBodyError, MissingOracleError, OracleError, SolverError, UnboundedError
from .feasible_points import feasible_point_on_flat, first_order_feasible_point
from .flats import FlatFit, fit_flat, singular_gap_dimension
from .geometry import chebyshev_center, min_norm_point, width, widths
from .hull_ellipsoid import affine_hull_by_ellipsoid
from .rank_one import RankOneRows
from .results import CompactResult, EllipsoidResult
from .simplify import NearTie, Simplified, Transformed, simplify
from .slack import (
    HingePoint,
    MaxViolation,
    TotalViolation,
    hinge_feasible_point,
    min_max_violation,
    min_total_violation,
)
from .support import extents, flat_slice
from .working_set import BoundResult, WorkingSetMinimizer

try:
    __version__: str = _metadata.version("sculpt-attention")  # the distribution that ships the engine
except _metadata.PackageNotFoundError:  # imported from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    # bodies and cuts
    "Polytope",
    "Ball",
    "OracleBody",
    "Intersection",
    "ConvexBody",
    "NormEpigraph",
    "Cut",
    "ParallelCut",
    "AffineSubspace",
    # algorithms
    "ellipsoid",
    "Ellipsoid",
    "EllipsoidResult",
    "cutting_plane",
    "affine_hull",
    "affine_hull_by_ellipsoid",
    "implicit_equalities",
    "ImplicitEqualities",
    "ExactCheck",
    "linear_span",
    "CompactResult",
    "simplify",
    "Simplified",
    "Transformed",
    "NearTie",
    "min_norm_point",
    "chebyshev_center",
    "width",
    "widths",
    "fit_flat",
    "FlatFit",
    "RankOneRows",
    "singular_gap_dimension",
    "extents",
    "flat_slice",
    "feasible_point_on_flat",
    "first_order_feasible_point",
    "WorkingSetMinimizer",
    "BoundResult",
    "min_max_violation",
    "MaxViolation",
    "min_total_violation",
    "TotalViolation",
    "hinge_feasible_point",
    "HingePoint",
    # backends and errors
    "solvers",
    "backend_name",
    "backend_names",
    "EmptyBodyError",
    "UnboundedError",
    "SolverError",
    "MissingOracleError",
    "OracleError",
]
