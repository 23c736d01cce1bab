"""The queries a route asks: token draws over the chosen domain, the single-token queries that read ΣW, copy
families and their layouts.

Domain "real": tokens are any reals; a family's step δ is s·u_b (u_b a random orthonormal basis, scaled), its first token a random
Gaussian token of norm ≈ s, so every logit difference scales as s² and the learner sets s from a probe family.
Domain "boolean": every token is in {−1, +1}^d; the step flips coordinates (y = x with x_b negated, δ = −2x_b e_b)
and the scale is fixed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Domain", "Family", "DOMAINS"]

DOMAINS = ("real", "boolean")


@dataclass
class Family:
    """A copy family: first token ``x``, second token ``y``, and the index ``key`` (a, b) of its layout slot
    (b < 0: the sum family of axes 0 and −b)."""

    x: np.ndarray
    y: np.ndarray
    key: tuple[int, int]

    @property
    def delta(self) -> np.ndarray:
        return self.y - self.x


@dataclass
class Domain:
    """Draws tokens and families: ``kind`` "real" or "boolean", ``scale`` s (real only), ``gen`` the randomness."""

    kind: str
    d: int
    gen: np.random.Generator
    scale: float = 1.0
    basis: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.basis is None:  # the steps' directions: a random orthonormal basis (real), the axes (boolean)
            if self.kind == "real":
                self.basis = np.linalg.qr(self.gen.standard_normal((self.d, self.d)))[0].T
            else:
                self.basis = np.eye(self.d)

    def tokens(self, n: int, k: int) -> np.ndarray:
        """n queries of k random tokens, (n, k, d): N(0, s²/d) entries, or uniform signs."""
        if self.kind == "boolean":
            return self.gen.choice(np.array([-1.0, 1.0]), size=(n, k, self.d))
        return self.gen.standard_normal((n, k, self.d)) * (self.scale / np.sqrt(self.d))

    def single_tokens(self) -> np.ndarray:
        """d single-token queries whose answers x ΣW determine ΣW: the scaled axes, or d random sign vectors
        (redrawn until well conditioned)."""
        if self.kind == "boolean":
            for _ in range(100):
                B = self.gen.choice(np.array([-1.0, 1.0]), size=(self.d, self.d))
                if np.linalg.cond(B) < 1e3:
                    return B
            raise RuntimeError(f"no well-conditioned sign matrix at d = {self.d}")  # pragma: no cover
        return np.eye(self.d)

    def family(self, key: tuple[int, int], x: np.ndarray | None = None, factor: float = 1.0) -> Family:
        """The family of layout slot ``key`` = (a, b): step s·u_b along basis direction b (b < 0: s(u_0 + u_−b)/√2)
        from ``x`` (a fresh random token when None); ``factor`` scales both tokens (real domain). The boolean
        domain's step flips coordinate b (and 0)."""
        if self.kind == "boolean":
            factor = 1.0
        base = self.tokens(1, 1)[0, 0] * factor if x is None else x
        a, b = key
        axes = [0, -b] if b < 0 else [b]
        if self.kind == "boolean":
            y = base.copy()
            y[axes] = -y[axes]
            return Family(base, y, key)
        assert self.basis is not None
        step = self.basis[axes].sum(axis=0) * (self.scale * factor / np.sqrt(len(axes)))
        return Family(base, base + step, key)

    def rescaled(self, factor: float) -> None:
        """Multiply the real domain's scale by ``factor`` (the boolean domain has no scale)."""
        if self.kind == "real":
            self.scale *= factor
