"""oracles: a general convex-body engine.

Convex bodies known through membership, separation and linear-optimisation oracles (``Polytope``,
``Ball``, ``OracleBody`` and their intersections), cuts as values, ellipsoid and analytic-centre
cutting-plane methods, affine-hull and span extraction, min-norm points, Chebyshev centres and widths,
over a registry of LP/QP/conic backends. It knows nothing of attention.
"""
from . import solvers
from .affine import ImplicitEqualities, affine_hull, implicit_equalities, linear_span
from .affine_subspace import AffineSubspace
from .bodies import Ball, ConvexBody, Intersection, OracleBody, Polytope
from .cuts import Cut, ParallelCut
from .cutting_plane import cutting_plane
from .ellipsoid import Ellipsoid, ellipsoid
from .errors import EmptyBodyError, MissingOracleError, OracleError, SolverError, UnboundedError
from .flats import FlatFit, fit_flat, singular_gap_dimension
from .geometry import chebyshev_center, min_norm_point, width, widths
from .hull_ellipsoid import affine_hull_by_ellipsoid
from .results import EllipsoidResult

__all__ = [
    # bodies and cuts
    "Polytope", "Ball", "OracleBody", "Intersection", "ConvexBody", "Cut", "ParallelCut", "AffineSubspace",
    # algorithms
    "ellipsoid", "Ellipsoid", "EllipsoidResult", "cutting_plane",
    "affine_hull", "affine_hull_by_ellipsoid", "implicit_equalities", "ImplicitEqualities", "linear_span",
    "min_norm_point", "chebyshev_center", "width", "widths", "fit_flat", "FlatFit", "singular_gap_dimension",
    # backends and errors
    "solvers", "EmptyBodyError", "UnboundedError", "SolverError", "MissingOracleError", "OracleError",
]
