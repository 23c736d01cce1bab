"""Learning a linear threshold function by shrinking its version space.

Labels y = sign(w*·x) with margin γ (|w*·x| >= γ). The version space V_N = {w : y_i w·x_i >= 1 (i <= N),
‖w‖_∞ <= R} is a Polytope containing w*/γ (R = 2/γ), and V_N shrinks as samples arrive (V_{N+1} ⊆ V_N).
For each N we find a consistent w with the ellipsoid method (separation oracle only), the Chebyshev
centre of V_N (a "central" hypothesis), and the width of V_N along w* (and across it), which shrink as N
grows.

    python docs/examples/linear_threshold.py [--dim 10] [--samples 10 20 40 80 160 320] [--seed 0]
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

from oracles import Polytope, chebyshev_center, width, widths
from oracles.ellipsoid import ellipsoid


def make_samples(n_samples: int, dim: int, margin: float, rng: np.random.Generator
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X, y, w*): Gaussian points with |w*·x| >= margin, labelled by sign(w*·x); w* a random unit vector."""
    w_true = rng.standard_normal(dim)
    w_true /= np.linalg.norm(w_true)
    X = np.empty((0, dim))
    while X.shape[0] < n_samples:  # rejection sampling, one vectorised batch at a time
        batch = rng.standard_normal((2 * n_samples, dim))
        X = np.vstack([X, batch[np.abs(batch @ w_true) >= margin]])
    X = X[:n_samples]
    return X, np.sign(X @ w_true), w_true


def version_space(X: np.ndarray, y: np.ndarray, bound: float) -> Polytope:
    """{w : y_i w·x_i >= 1, -bound <= w_j <= bound} written as A w <= b."""
    d = X.shape[1]
    A = np.vstack([-(y[:, None] * X), np.eye(d), -np.eye(d)])
    b = np.concatenate([-np.ones(X.shape[0]), np.full(2 * d, bound)])
    return Polytope(A, b)


@dataclass
class Row:
    """One sample size: ellipsoid run, Chebyshev centre and the version space's width along w*."""

    n_samples: int
    ellipsoid_status: str
    ellipsoid_iterations: int
    consistent: bool  # the ellipsoid's point classifies every sample with margin (y w·x >= 1)
    chebyshev_radius: float
    width_along_truth: float
    width_across_truth: float  # mean width along two fixed unit directions orthogonal to w*
    cosine_to_truth: float  # cos angle(Chebyshev centre, w*)
    test_accuracy: float  # Chebyshev centre on fresh samples


def run(dim: int = 10, sample_sizes: tuple[int, ...] = (10, 20, 40, 80, 160, 320), margin: float = 0.1,
        seed: int = 0, n_test: int = 2000) -> list[Row]:
    """One table row per sample size (prefixes of one sample, so the version spaces are nested)."""
    rng = np.random.default_rng(seed)
    X, y, w_true = make_samples(max(sample_sizes), dim, margin, rng)
    X_test = rng.standard_normal((n_test, dim))
    y_test = np.sign(X_test @ w_true)
    bound = 2.0 / margin
    U = rng.standard_normal((2, dim))
    U -= np.outer(U @ w_true, w_true)
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    rows = []
    for n in sample_sizes:
        V = version_space(X[:n], y[:n], bound)
        found = ellipsoid(V, np.zeros(dim), bound * np.sqrt(dim) * 1.01, tol=1e-8)
        w = found.x
        consistent = w is not None and bool(np.min(y[:n] * (X[:n] @ w)) >= 1 - 1e-6)
        center, radius = chebyshev_center(V)
        rows.append(Row(n, found.status, found.iterations, consistent, radius, width(V, w_true),
                        float(np.mean(widths(V, U))),
                        float(center @ w_true / np.linalg.norm(center)),
                        float(np.mean(np.sign(X_test @ center) == y_test))))
    return rows


def format_table(rows: list[Row]) -> str:
    head = (f"{'N':>5} {'ellipsoid':>10} {'iters':>6} {'consistent':>10} {'cheb r':>8} {'width(w*)':>10} "
            f"{'width(⊥w*)':>10} {'cos(c,w*)':>9} {'test acc':>8}")
    lines = [head]
    for r in rows:
        lines.append(f"{r.n_samples:>5} {r.ellipsoid_status:>10} {r.ellipsoid_iterations:>6} {str(r.consistent):>10} "
                     f"{r.chebyshev_radius:>8.3f} {r.width_along_truth:>10.3f} {r.width_across_truth:>10.3f} "
                     f"{r.cosine_to_truth:>9.3f} "
                     f"{r.test_accuracy:>8.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description="Learn a linear threshold function via its version space.")
    parser.add_argument("--dim", type=int, default=10)
    parser.add_argument("--samples", type=int, nargs="+", default=[10, 20, 40, 80, 160, 320])
    parser.add_argument("--margin", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = run(args.dim, tuple(args.samples), args.margin, args.seed)
    print(format_table(rows))
    return rows


if __name__ == "__main__":
    main()
