"""Hypothesis strategies that draw structured test data, so that a failing example shrinks.

A test that draws only a seed and then calls ``np.random`` cannot shrink: hypothesis sees one integer, and a
"smaller" seed is not a simpler instance. The strategies here draw the arrays themselves (every entry one
hypothesis choice), so a failure shrinks towards small shapes, zero entries and identity-like matrices.

Where a property needs a non-degenerate object the strategy *conditions* what it drew instead of filtering
(filters waste examples and shrink badly): matrices get their singular values clipped into a band, rows that
come out zero become unit vectors, polytopes are built around a known interior point with positive slack.

Shapes are given as an int, an inclusive ``(lo, hi)`` range, or a strategy (see ``_int``).

- sizes and inputs: ``shapes``, ``pm_one``, ``gaussian_like``, ``inputs``;
- matrices: ``well_conditioned``, ``independent_tokens``, ``orthonormal``, ``nonzero_vectors``,
  ``unit_vectors``;
- layers: ``attention_layers`` (→ ``sculpt.MultiHeadAttention``), ``layers_with_inputs``;
- engine bodies: ``polytopes``, ``flat_polytopes``, ``boxes``, ``balls``, ``cuts``, ``ellipsoids``.

The engine strategies import ``oracles`` lazily and the layer strategies import ``sculpt`` lazily, so each test
directory only needs the package it tests.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays


def _int(draw: Any, spec: Any) -> int:
    """An int given as an int, an inclusive (lo, hi) range or a strategy."""
    if isinstance(spec, (int, np.integer)):
        return int(spec)
    if isinstance(spec, tuple):
        return int(draw(st.integers(int(spec[0]), int(spec[1]))))
    return int(draw(spec))


def _shape(shape: int | tuple[int, ...]) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)


#: Floats are drawn on a grid of GRID steps across their range: one small-integer choice each (2–3 bytes of
#: hypothesis's budget against 9 for ``st.floats``, which engine tests with several hundred entries need).
GRID = 1000


def bounded_floats(bound: float = 1.0) -> st.SearchStrategy[float]:
    """A float in [-bound, bound] on a grid of step bound/GRID (one small integer choice, shrinking to 0.0)."""
    return st.integers(-GRID, GRID).map(lambda i: bound * i / GRID)


def floats_between(lo: float, hi: float) -> st.SearchStrategy[float]:
    """A float in [lo, hi] on a grid of GRID steps, shrinking to ``lo``."""
    return st.integers(0, GRID).map(lambda i: lo + (hi - lo) * i / GRID)


def grid_arrays(shape: int | tuple[int, ...], lo: float, hi: float, *, zero: float | None = None
                ) -> st.SearchStrategy[np.ndarray]:
    """float64 arrays with independent entries in [lo, hi] on a grid of GRID steps; every entry is its own
    draw (no fill value repeated across the array). Entries shrink to ``zero`` (default: ``lo``; a grid point
    between lo and hi, e.g. 0 for a symmetric range)."""
    i0 = 0 if zero is None else int(round((zero - lo) / (hi - lo) * GRID))
    ints = arrays(np.int32, _shape(shape), elements=st.integers(-i0, GRID - i0), fill=st.nothing())
    return ints.map(lambda a: lo + (hi - lo) * (a.astype(np.float64) + i0) / GRID)


# ------------------------------------------------------------------------------------------ sizes, inputs
class Shape(NamedTuple):
    """Sizes of a layer problem: N examples, k tokens, d token dimension, m heads."""

    N: int
    k: int
    d: int
    m: int


@st.composite
def shapes(draw: Any, N: Any = (1, 6), k: Any = (1, 5), d: Any = (1, 5), m: Any = (1, 3)) -> Shape:
    """(N, k, d, m) within the given bounds (small by default, so examples stay cheap)."""
    return Shape(_int(draw, N), _int(draw, k), _int(draw, d), _int(draw, m))


def pm_one(shape: int | tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    """float64 arrays with every entry -1.0 or +1.0. Each token (a vector along the last axis, length d <= 62)
    is one integer choice whose bits are its signs, so a batch of hundreds of tokens stays within hypothesis's
    size limits; tokens shrink to all -1. Longer last axes are drawn entry by entry."""
    shape_ = _shape(shape)
    d = shape_[-1]
    if d > 62:
        return arrays(np.float64, shape_, elements=st.sampled_from([-1.0, 1.0]), fill=st.nothing())
    codes = arrays(np.int64, shape_[:-1], elements=st.integers(0, 2**d - 1), fill=st.nothing())
    bits = 1 << np.arange(d, dtype=np.int64)
    return codes.map(lambda c: np.where((np.asarray(c)[..., None] & bits) != 0, 1.0, -1.0))


def gaussian_like(shape: int | tuple[int, ...], scale: float = 1.0, bound: float = 3.0) -> st.SearchStrategy[np.ndarray]:
    """float64 arrays with independent entries in [-bound·scale, bound·scale] (the bulk of a N(0, scale²)
    draw; on the ``bounded_floats`` grid; shrinks to zeros)."""
    return grid_arrays(shape, -bound * scale, bound * scale, zero=0.0)


def inputs(shape: tuple[int, int, int], distribution: str = "boolean") -> st.SearchStrategy[np.ndarray]:
    """An (N, k, d) input batch: ±1 entries ("boolean") or Gaussian-like entries ("gaussian")."""
    if distribution == "boolean":
        return pm_one(shape)
    if distribution == "gaussian":
        return gaussian_like(shape)
    raise ValueError(f"distribution must be 'boolean' or 'gaussian', got {distribution!r}")


# ------------------------------------------------------------------------------------------------ matrices
@st.composite
def independent_tokens(draw: Any, shape: tuple[int, int, int], cond: float = 10.0, scale: float = 3.0
                       ) -> np.ndarray:
    """An (N, k, d) batch of real-valued inputs whose k tokens per example are linearly independent (k <= d)
    or span R^d (k > d): each example is a ``well_conditioned`` k × d matrix (‖·‖₂ = scale, condition number
    <= cond). For properties that need generic Gaussian-like tokens rather than any bounded ones."""
    N, k, d = (int(v) for v in shape)
    return np.stack([draw(well_conditioned(k, d, cond=cond, scale=scale)) for _ in range(N)]).reshape(N, k, d)


@st.composite
def well_conditioned(draw: Any, rows: Any, cols: Any, cond: float = 10.0, scale: float = 1.0) -> np.ndarray:
    """A rows × cols matrix of full rank min(rows, cols), largest singular value ``scale`` and condition
    number <= ``cond``: a drawn array whose singular values (relative to the largest) are clipped to
    [1/cond, 1]. The all-zero draw becomes the (rectangular) identity times ``scale``."""
    r, c = _int(draw, rows), _int(draw, cols)
    G = draw(gaussian_like((r, c)))
    U, s, Vt = np.linalg.svd(G, full_matrices=False)
    top = s[0] if s.size and s[0] > 0 else 0.0
    rel = np.clip(s / top, 1.0 / cond, 1.0) if top > 0 else np.ones_like(s)
    return (U * (scale * rel)) @ Vt


@st.composite
def orthonormal(draw: Any, n: Any, r: Any) -> np.ndarray:
    """An n × r matrix with orthonormal columns (r <= n)."""
    n_, r_ = _int(draw, n), _int(draw, r)
    if r_ == 0:
        return np.zeros((n_, 0))
    return np.linalg.qr(draw(well_conditioned(n_, r_)))[0]


def _nonzero_rows(A: np.ndarray, min_norm: float = 1e-3) -> np.ndarray:
    """Rows of norm below ``min_norm`` replaced by unit coordinate vectors (row i → e_{i mod n})."""
    A = np.array(A, dtype=float, copy=True)
    small = np.linalg.norm(A, axis=1) < min_norm
    for i in np.flatnonzero(small):
        A[i] = 0.0
        A[i, i % A.shape[1]] = 1.0
    return A


@st.composite
def nonzero_vectors(draw: Any, n: Any, bound: float = 3.0) -> np.ndarray:
    """A vector in R^n with entries in [-bound, bound] and norm >= 1e-3 (zero draws become e_0)."""
    v = draw(gaussian_like((_int(draw, n),), bound=bound))
    return _nonzero_rows(v[None])[0]


@st.composite
def unit_vectors(draw: Any, n: Any) -> np.ndarray:
    """A unit vector in R^n."""
    v = draw(nonzero_vectors(n))
    return v / np.linalg.norm(v)


# -------------------------------------------------------------------------------------------------- layers
@st.composite
def attention_layers(draw: Any, d: Any = (1, 5), m: Any = (1, 3), theta_norm: float = 3.0, w_scale: float = 1.0,
                     sum_w_cond: float | None = None) -> Any:
    """A small ``sculpt.MultiHeadAttention``: each Θ_i with entries in [-1, 1] rescaled so that
    ‖Θ_i‖_F <= ``theta_norm``; each W_i with entries in [-w_scale, w_scale]. With ``sum_w_cond``, Σ_i W_i is
    instead a drawn well-conditioned matrix (condition number <= sum_w_cond, ‖·‖₂ = w_scale) and the last
    head's W takes what the others leave (W_m = ΣW − Σ_{i<m} W_i), so the layer passes the invertibility
    assumption A2."""
    from sculpt import MultiHeadAttention

    d_, m_ = _int(draw, d), _int(draw, m)
    thetas = draw(gaussian_like((m_, d_, d_), bound=1.0))
    norms = np.linalg.norm(thetas.reshape(m_, -1), axis=1)
    thetas = thetas * np.minimum(1.0, theta_norm / np.maximum(norms, 1e-300))[:, None, None]
    ws = draw(gaussian_like((m_, d_, d_), scale=w_scale, bound=1.0))
    if sum_w_cond is not None:
        S = draw(well_conditioned(d_, d_, cond=sum_w_cond, scale=w_scale))
        ws[-1] = S - ws[:-1].sum(axis=0)
    return MultiHeadAttention(thetas, ws)


@st.composite
def layers_with_inputs(draw: Any, sizes: Any = None, distribution: Any = st.sampled_from(["boolean", "gaussian"]),
                       theta_norm: float = 3.0, sum_w_cond: float | None = None) -> tuple[Any, np.ndarray]:
    """(layer, X): a layer from ``attention_layers`` and an (N, k, d) batch of matching token dimension.
    ``sizes`` is a ``shapes(...)`` strategy (default ``shapes()``); ``distribution`` a str or a strategy."""
    N, k, d, m = draw(shapes() if sizes is None else sizes)
    dist = distribution if isinstance(distribution, str) else draw(distribution)
    layer = draw(attention_layers(d, m, theta_norm=theta_norm, sum_w_cond=sum_w_cond))
    return layer, draw(inputs((N, k, d), dist))


# --------------------------------------------------------------------------------------------- engine bodies
@dataclass
class PolytopeCase:
    """{x : A x <= b} (``poly``) built around ``x0``: b = A x0 + slack, so x0 is interior when every slack
    is positive. ``slack`` holds the drawn slacks of the first ``A.shape[0] - 2n·(box is not None)`` rows."""

    poly: Any
    x0: np.ndarray
    slack: np.ndarray
    box: float | None


@st.composite
def polytopes(draw: Any, n: Any = (1, 6), m: Any = None, slack: tuple[float, float] = (0.3, 1.5),
              box: float | None = 2.0, center_bound: float = 2.0) -> PolytopeCase:
    """A random polytope in the manner of ``tests/oracles/_problems.random_polytope``: m (default 3n) unit rows
    a_i, b_i = a_iᵀx0 + s_i with s_i in ``slack`` (a negative lower end allows empty bodies), plus the box
    |x − x0|_∞ <= box unless ``box`` is None. Shrinks to coordinate rows around the origin."""
    from oracles import Polytope

    n_ = _int(draw, n)
    m_ = 3 * n_ if m is None else _int(draw, m)
    x0 = draw(gaussian_like((n_,), bound=center_bound))
    A = _nonzero_rows(draw(gaussian_like((m_, n_)))) if m_ else np.zeros((0, n_))
    A = A / np.linalg.norm(A, axis=1, keepdims=True) if m_ else A
    s = draw(grid_arrays(m_, *slack))
    b = A @ x0 + s
    if box is not None:
        A = np.vstack([A, np.eye(n_), -np.eye(n_)])
        b = np.concatenate([b, x0 + box, box - x0])
    return PolytopeCase(Polytope(A, b), x0, s, box)


@dataclass
class FlatPolytopeCase:
    """A polytope whose affine hull is {x : E x = E x0}; ``eq_rows`` are the rows tight on all of it (the
    same fields as ``tests/oracles/conftest.FlatCase``)."""

    poly: Any
    E: np.ndarray
    x0: np.ndarray
    eq_rows: np.ndarray

    @property
    def rank(self) -> int:
        return int(np.linalg.matrix_rank(self.E)) if self.E.shape[0] else 0


@st.composite
def flat_polytopes(draw: Any, n: Any, k: Any, m: Any, style: str = "pairs", box: float | None = None,
                   equation_cond: float = 1e3) -> FlatPolytopeCase:
    """m random inequalities with slack in [0.5, 2]·‖a_i‖ at x0, plus k hidden equalities through x0, the rows
    permuted: the structure of ``tests/oracles/conftest.make_flat``.

    style="pairs": each equality e·x = e·x0 as the rows e·x <= e·x0 and −e·x <= −e·x0 (k <= n);
    style="triples": groups (e, r, −e−r), all tight at x0, implying e·x = e·x0 and r·x = r·x0 (2k <= n).
    The hidden equations are a well-conditioned draw (condition number <= ``equation_cond``), so they have
    full rank; every written row is scaled by a drawn factor in [0.2, 5]. ``box``: add |x − x0|_∞ <= box."""
    from oracles import Polytope

    n_, k_, m_ = _int(draw, n), _int(draw, k), _int(draw, m)
    x0 = draw(gaussian_like((n_,), bound=2.0))
    A = _nonzero_rows(draw(gaussian_like((m_, n_)))) if m_ else np.zeros((0, n_))
    slack = draw(grid_arrays(m_, 0.5, 2.0))
    b = A @ x0 + slack * np.linalg.norm(A, axis=1)
    if box is not None:
        A = np.vstack([A, np.eye(n_), -np.eye(n_)])
        b = np.concatenate([b, x0 + box, box - x0])
    n_ineq = A.shape[0]
    if style == "pairs":
        E = draw(well_conditioned(k_, n_, cond=equation_cond)) if k_ else np.zeros((0, n_))
        G = np.vstack([E, -E]) if k_ else np.zeros((0, n_))
    elif style == "triples":
        E = draw(well_conditioned(2 * k_, n_, cond=equation_cond)) if k_ else np.zeros((0, n_))
        G = (np.vstack([np.vstack([E[2 * i], E[2 * i + 1], -E[2 * i] - E[2 * i + 1]]) for i in range(k_)])
             if k_ else np.zeros((0, n_)))
    else:
        raise ValueError(style)
    scale = draw(grid_arrays(G.shape[0], 0.2, 5.0))
    G = G * scale[:, None]
    A_all = np.vstack([A, G])
    b_all = np.concatenate([b, G @ x0])
    perm = np.asarray(draw(st.permutations(range(A_all.shape[0]))), dtype=int)
    inv = np.argsort(perm)
    return FlatPolytopeCase(Polytope(A_all[perm], b_all[perm]), E, x0, np.sort(inv[n_ineq:]))


@st.composite
def boxes(draw: Any, n: Any = (1, 6), min_width: float = 0.1, bound: float = 3.0) -> Any:
    """An axis-aligned box {lo <= x <= hi} as a Polytope, every side at least ``min_width`` long."""
    from oracles import Polytope

    n_ = _int(draw, n)
    lo = draw(gaussian_like((n_,), bound=bound))
    width = draw(grid_arrays(n_, min_width, 2 * bound))
    return Polytope(np.vstack([np.eye(n_), -np.eye(n_)]), np.concatenate([lo + width, -lo]))


@st.composite
def balls(draw: Any, n: Any = (1, 6), radius: tuple[float, float] = (0.0, 3.0), center_bound: float = 3.0) -> Any:
    """``oracles.Ball(center, radius)`` with a bounded centre and radius in the given range."""
    from oracles import Ball

    c = draw(gaussian_like((_int(draw, n),), bound=center_bound))
    return Ball(c, draw(floats_between(*radius)))


@st.composite
def cuts(draw: Any, n: Any = (1, 6), offset_bound: float = 3.0) -> Any:
    """``oracles.Cut(normal, offset)``: a non-zero normal and a bounded offset (the half-space normalᵀx <= offset)."""
    from oracles import Cut

    return Cut(draw(nonzero_vectors(n)), draw(bounded_floats(offset_bound)))


@st.composite
def ellipsoids(draw: Any, n: Any = (1, 6), cond: float = 10.0, scale: float = 3.0, center_bound: float = 2.0) -> Any:
    """``oracles.Ellipsoid`` {c + J u : ‖u‖ <= 1} with a bounded centre and a well-conditioned factor J
    (‖J‖₂ = scale, condition number <= cond)."""
    from oracles import Ellipsoid

    n_ = _int(draw, n)
    return Ellipsoid.from_factor(draw(gaussian_like((n_,), bound=center_bound)),
                                 draw(well_conditioned(n_, n_, cond=cond, scale=scale)))


# ---------------------------------------------------------------------------------------------- hostile input
def powers_of_ten(lo: int = -300, hi: int = 300) -> st.SearchStrategy[float]:
    """10**e for an integer e in [lo, hi] (shrinks towards 1.0): a magnitude for scale-invariance tests."""
    return st.integers(lo, hi).map(lambda e: float(10.0 ** e)).filter(lambda v: 0.0 < v < float("inf"))


def hostile_values(dim: int = 3) -> st.SearchStrategy[Any]:
    """Values a careless or hostile caller passes where an array or a number belongs: None, text, bytes,
    containers of the wrong kind, ragged lists, complex / bool / object arrays, NaN and inf, entries far
    outside float64's comfortable range, empty and wrongly shaped arrays. Every one is wrong for an argument
    that expects a finite real vector of length ``dim`` (a test may also meet it where a scalar belongs)."""
    big = st.sampled_from([1e151, -1e200, 1e300, 1.7e308])
    special = st.sampled_from([np.nan, np.inf, -np.inf])
    return st.one_of(
        st.none(), st.text(max_size=5), st.binary(max_size=5), st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
        st.just([[1.0], [1.0, 2.0]]), st.just(object()), st.just(1j), st.just({1.0, 2.0}),
        st.just(np.zeros(dim) + 1j), st.just(np.array(["a"] * dim)), st.just(np.array([None] * dim, dtype=object)),
        special.map(lambda v: np.full(dim, v)), big.map(lambda v: np.full(dim, v)),
        st.just(np.zeros(0)), st.just(np.zeros((dim, dim, 2))), st.just(np.zeros(dim + 1)), special, big,
    )


def oracle_answers(dim: int) -> st.SearchStrategy[Any]:
    """What a misbehaving user oracle may return (or raise: an ``Exception`` instance means "raise it"):
    wrong types, wrong shapes, NaN/inf, text, and a few well-formed answers so that valid paths run too."""
    return st.one_of(
        st.none(), st.booleans(), st.text(max_size=4), st.just("1.0"), st.integers(-2, 2), st.floats(allow_nan=True),
        st.just((np.ones(dim), np.nan)), st.just((np.ones(dim + 1), 0.0)), st.just((np.full(dim, np.inf), 0.0)),
        st.just(("a", "b")), st.just((np.ones(dim),)), st.just((np.ones(dim), 0.0, 1.0)), st.just(np.ones(dim)),
        st.just((np.ones(dim) * 1j, 0.0)), st.just((np.zeros(dim), 1.0)), st.just((1e-300 * np.ones(dim), 1.0)),
        st.just((np.ones(dim), 0.5)), st.just((0.0, np.zeros(dim))), st.just((np.nan, np.zeros(dim))),
        st.just((1.0, np.zeros(dim))), st.just((np.float64(0.0), np.zeros(dim + 2))),
        st.sampled_from([ValueError("boom"), ZeroDivisionError(), KeyError("k"), RuntimeError("solver")]),
    )
