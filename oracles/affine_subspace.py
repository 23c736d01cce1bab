"""``AffineSubspace``: the flat {point + basis @ y}, equivalently {x : A_eq x = b_eq}."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ._validate import as_matrix, as_vector, real_array

__all__ = ["AffineSubspace"]


class AffineSubspace:
    """The flat p + span(basis), kept with orthonormal ``basis`` (n×r) and orthonormal ``equations``.

    ``point`` is the flat's min-norm point (orthogonal to the basis), so two descriptions of the same flat
    give the same ``point``; it need not lie in the body the flat came from. ``interior_point`` is a point
    of that body in its relative interior when the engine found one (``affine_hull(..., method="lp")`` sets
    it; None otherwise). ``equations = (A_eq, b_eq)`` has orthonormal rows spanning basis^⊥.

    Parameters
    ----------
    point : array_like of shape (n,)
        A point of the flat.
    basis : array_like of shape (n, r)
        Columns spanning its directions (orthonormalised; rank decided by ``rank_tol`` relative to σ_max).
    rank_tol : float
        Relative singular-value cut of the basis.
    orthonormal : bool
        Promise that ``basis`` already has orthonormal columns (skips an n x r SVD).

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import AffineSubspace
    >>> line = AffineSubspace(np.array([1.0, 1.0]), np.array([[1.0], [0.0]]))   # y = 1
    >>> line.dim, line.point.tolist(), float(line.distance(np.zeros(2)))
    (1, [0.0, 1.0], 1.0)
    """

    def __init__(
        self, point: ArrayLike, basis: ArrayLike, *, rank_tol: float = 1e-10, orthonormal: bool = False
    ) -> None:
        p = as_vector(point, "point")
        n = p.shape[0]
        B = real_array(basis, "basis")
        if B.size == 0:
            B = np.zeros((n, 0))
        B = as_matrix(B, "basis") if B.shape[1] else B
        if B.shape[0] != n:
            raise ValueError(f"basis must have {n} rows to match point, got {B.shape[0]}")
        if B.shape[1] and not orthonormal:
            U, s, _ = np.linalg.svd(B, full_matrices=False)
            B = U[:, s > rank_tol * max(1.0, s[0])]
        self.basis = B
        self.point = p - B @ (B.T @ p)
        self.dim = B.shape[1]
        self.ambient_dim = n
        self.interior_point: np.ndarray | None = None
        self.info: dict[str, object] = {}

    def fixed_coordinates(self, tol: float = 1e-9) -> np.ndarray:
        """Coordinates j that are constant on the flat (‖basis row j‖ <= tol): x_j = point_j there."""
        return np.flatnonzero(np.linalg.norm(self.basis, axis=1) <= tol) if self.dim else np.arange(self.ambient_dim)

    @classmethod
    def from_equations(cls, A_eq: ArrayLike, b_eq: ArrayLike, *, rank_tol: float = 1e-10) -> AffineSubspace:
        """The flat {x : A_eq x = b_eq} (least-squares consistent; rank decided relative to σ_max)."""
        A = as_matrix(A_eq, "A_eq")
        b = as_vector(b_eq, "b_eq", A.shape[0])
        n = A.shape[1]
        if A.shape[0] == 0:
            return cls(np.zeros(n), np.eye(n))
        _, s, Vt = np.linalg.svd(A, full_matrices=True)
        r = int(np.sum(s > rank_tol * max(s[0], 1e-300))) if s.size else 0
        point = np.linalg.lstsq(A, b, rcond=None)[0]
        return cls(point, Vt[r:].T)

    @property
    def equations(self) -> tuple[np.ndarray, np.ndarray]:
        """(A_eq, b_eq): orthonormal rows spanning the normal space, A_eq x = b_eq on the flat."""
        n, r = self.basis.shape
        if r == n:
            return np.zeros((0, n)), np.zeros(0)
        # the left singular vectors of the projector I - B Bᵀ with unit singular value span basis^⊥
        U, s, _ = np.linalg.svd(np.eye(n) - self.basis @ self.basis.T)
        A = U[:, : n - r].T
        return A, A @ self.point

    def project(self, x: ArrayLike) -> np.ndarray:
        """Orthogonal projection of x (or rows of x) onto the flat."""
        X = np.asarray(x, dtype=float)
        return self.point + (X - self.point) @ self.basis @ self.basis.T

    def to_local(self, x: ArrayLike) -> np.ndarray:
        """Coordinates y with to_global(y) = project(x)."""
        return (np.asarray(x, dtype=float) - self.point) @ self.basis

    def to_global(self, y: ArrayLike) -> np.ndarray:
        return self.point + np.asarray(y, dtype=float) @ self.basis.T

    def distance(self, x: ArrayLike) -> np.ndarray | float:
        """Euclidean distance of x (or of each row of x) to the flat."""
        X = np.asarray(x, dtype=float)
        return np.linalg.norm(X - self.project(X), axis=-1)

    def contains(self, x: ArrayLike, tol: float = 1e-9) -> bool:
        x = as_vector(x, "x", self.ambient_dim)
        return bool(self.distance(x) <= tol * max(1.0, float(np.linalg.norm(x))))

    def __repr__(self) -> str:
        return f"AffineSubspace(dim={self.dim}, ambient_dim={self.ambient_dim})"
