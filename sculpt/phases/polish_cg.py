"""Matrix-free products with the polish's variable-projection Jacobian, and preconditioned conjugate gradients.

Past ``PolishSettings.matrix_free_above`` parameters (m·d²), ``lm_vp`` does not form JᵀJ, which has (m·d²)²
entries (8,192² = 512 MB and 1.8e11 flops per factorisation at d = 64, m = 2); it solves each damped step by
conjugate gradients with products computed, chunk by chunk of examples, from the forward quantities of the
point: the attention P_i, V_i = X W_i and Ȳ_i = P_i X W_i. For one example and a direction (Δ_1 … Δ_m) of the
heads, with S_i = X Δ_i Xᵀ (the logits' change),

    J·v   = Σ_i (P_i ∘ S_i) X W_i − rowsum(P_i ∘ S_i) ∘ Ȳ_i                (k × d)
    Jᵀ·u  = ( Xᵀ B_i X )_i,  B_i = P_i ∘ (U (X W_i)ᵀ − rowsum(U ∘ Ȳ_i))      (m × d × d)

(the polish's module docstring writes the same Jacobian entrywise). Kaufman's projected Jacobian is
(I − QQᵀ) J with Q an orthonormal basis of the features' range, so (JᵀJ)_K·v = Jᵀ (I − QQᵀ) J·v. Memory is that
of the forward quantities, O(m·N·k·(k + d)), plus one chunk's intermediates; a product costs about
4·m·k·d·(d + 2k) flops per example plus 4·N·k·r·d for the projection (r ≤ m·d the rank of the features).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["VPProducts", "pcg", "chunk_examples"]


def chunk_examples(per_example: int, elements: int) -> int:
    """Examples per chunk so that a chunk's largest intermediate holds about ``elements`` floats.

    Parameters
    ----------
    per_example : int
        Floats the largest intermediate takes per example.
    elements : int
        The budget.

    Returns
    -------
    int
        At least 1.
    """
    return max(1, elements // max(1, per_example))


@dataclass
class VPProducts:
    """The VP Jacobian at one point, as products: attention P (N, m, k, k), V = X W_i and Ȳ = P_i X W_i
    (N, m, k, d) each, the features' orthonormal basis Q (N·k, r), the examples X (N, k, d), and the
    budget ``elements`` of floats a chunk's largest intermediate may hold."""

    X: np.ndarray
    P: np.ndarray
    V: np.ndarray
    Ybar: np.ndarray
    Q: np.ndarray
    elements: int

    @classmethod
    def at(
        cls, X: np.ndarray, P: np.ndarray, Zi: np.ndarray, Q: np.ndarray, ws: np.ndarray, elements: int
    ) -> VPProducts:
        """The products at the point whose ``polish._state`` is (P (m, N, k, k), Zi = P X (m, N, k, d), Q, ws).

        Parameters
        ----------
        X : np.ndarray
            The examples, (N, k, d).
        P, Zi, Q, ws : np.ndarray
            Attention, features, the features' orthonormal basis and the eliminated projections.
        elements : int
            Floats a chunk's largest intermediate may hold.

        Returns
        -------
        VPProducts
        """
        m, d = ws.shape[0], X.shape[2]
        N, k = X.shape[0], X.shape[1]
        Pt = np.ascontiguousarray(P.transpose(1, 0, 2, 3))
        V = np.ascontiguousarray((X.reshape(N * k, d) @ _concat(ws)).reshape(N, k, m, d).transpose(0, 2, 1, 3))
        Ybar = np.ascontiguousarray((Zi @ ws[:, None]).transpose(1, 0, 2, 3))
        return cls(X, Pt, V, Ybar, Q, elements)

    @property
    def heads(self) -> int:
        return int(self.P.shape[1])

    def jvp(self, dirs: np.ndarray) -> np.ndarray:
        """J·v, the output's change (N, k, d) along the heads' direction ``dirs`` (m, d, d), unprojected."""
        N, k, d = self.X.shape
        m = self.heads
        D = _concat(dirs)
        out = np.empty((N, k, d))
        n = chunk_examples(m * k * max(k, d), self.elements)
        for s in range(0, N, n):
            Xc = self.X[s : s + n]
            c = Xc.shape[0]
            XD = (Xc.reshape(c * k, d) @ D).reshape(c, k, m, d).transpose(0, 2, 1, 3)
            PS = self.P[s : s + n] * (XD @ Xc.transpose(0, 2, 1)[:, None])  # P_i ∘ S_i, (c, m, k, k)
            dY = PS @ self.V[s : s + n]
            dY -= PS.sum(axis=3, keepdims=True) * self.Ybar[s : s + n]
            out[s : s + n] = dY.sum(axis=1)
        return out

    def vjp(self, U: np.ndarray) -> np.ndarray:
        """Jᵀ·u (m, d, d) for output residuals ``U`` (N, k, d), unprojected."""
        N, k, d = self.X.shape
        m = self.heads
        g = np.zeros((d, m * d))
        n = chunk_examples(m * k * max(k, d), self.elements)
        for s in range(0, N, n):
            Xc, Uc = self.X[s : s + n], U[s : s + n]
            c = Xc.shape[0]
            UV = Uc[:, None] @ self.V[s : s + n].transpose(0, 1, 3, 2)  # u_a · v_ij, (c, m, k, k)
            UV -= np.einsum("nkc,nmkc->nmk", Uc, self.Ybar[s : s + n])[..., None]
            UV *= self.P[s : s + n]  # B_i
            BX = (UV @ Xc[:, None]).transpose(0, 2, 1, 3).reshape(c * k, m * d)
            g += Xc.reshape(c * k, d).T @ BX
        return np.ascontiguousarray(g.reshape(d, m, d).transpose(1, 0, 2))

    def project(self, U: np.ndarray) -> np.ndarray:
        """(I − QQᵀ) U, column by column of the (N·k, d) output."""
        Uf = U.reshape(-1, U.shape[-1])
        return (Uf - self.Q @ (self.Q.T @ Uf)).reshape(U.shape)

    def normal(self, dirs: np.ndarray) -> np.ndarray:
        """(JᵀJ)_K · v = Jᵀ (I − QQᵀ) J · v, (m, d, d)."""
        return self.vjp(self.project(self.jvp(dirs)))

    def diagonal(self) -> np.ndarray:
        """diag(JᵀJ) of the unprojected Jacobian, (m, d, d): Σ_a x_ap² Σ_c G_i[a, c, q]², with
        G_i[a] = Σ_j P_i[a, j] (v_ij − ȳ_ia) x_jᵀ (an upper bound of the projected diagonal, entry by entry)."""
        N, k, d = self.X.shape
        m = self.heads
        D = np.zeros((d, m * d))
        n = chunk_examples(m * k * d * max(k, d), self.elements)
        for s in range(0, N, n):
            Xc = self.X[s : s + n]
            c = Xc.shape[0]
            E = self.P[s : s + n][..., None] * (self.V[s : s + n][:, :, None] - self.Ybar[s : s + n][:, :, :, None])
            G = E.transpose(0, 1, 2, 4, 3) @ Xc[:, None, None]  # (c, m, a, out, q)
            h = np.einsum("nmacq,nmacq->namq", G, G).reshape(c * k, m * d)
            D += (Xc * Xc).reshape(c * k, d).T @ h
        return np.ascontiguousarray(D.reshape(d, m, d).transpose(1, 0, 2))


def _concat(mats: np.ndarray) -> np.ndarray:
    """[M_1 | … | M_m] (d, m d) for (m, d, d)."""
    m, d, e = mats.shape
    return np.ascontiguousarray(mats.transpose(1, 0, 2).reshape(d, m * e))


def pcg(
    apply: Callable[[np.ndarray], np.ndarray],
    b: np.ndarray,
    inv_diag: np.ndarray,
    tol: float,
    max_iter: int,
    radius: float,
) -> tuple[np.ndarray, int, bool]:
    """Preconditioned conjugate gradients for A x = b from x = 0, A symmetric positive definite, truncated at
    the trust-region radius (Steihaug): min ½xᵀAx − bᵀx subject to ‖x‖_M ≤ radius, M = 1/inv_diag.

    From x = 0 the iterates lower the quadratic model and their M-norm grows, so a truncated solve is still a
    descent step and the first iterate past the radius is pulled back to the boundary along its direction.

    Parameters
    ----------
    apply : callable
        x ↦ A x.
    b : np.ndarray
        The right-hand side (any shape ``apply`` takes).
    inv_diag : np.ndarray
        The Jacobi preconditioner, 1/diag(A) (b's shape, positive).
    tol : float
        Stop once ‖b − A x‖ ≤ tol · ‖b‖.
    max_iter : int
        Products with A at most.
    radius : float
        The trust region's radius in the M-norm (``math.inf``: none).

    Returns
    -------
    x : np.ndarray
        The solution (the last iterate when max_iter is reached, or a point on the boundary).
    iterations : int
        Products with A taken.
    boundary : bool
        Whether x was stopped at the radius.
    """
    w = 1.0 / inv_diag
    x = np.zeros_like(b)
    r = b.copy()
    z = inv_diag * r
    p = z.copy()
    rz = float(np.vdot(r, z))
    stop = tol * float(np.sqrt(np.vdot(b, b)))
    for it in range(1, max_iter + 1):
        Ap = apply(p)
        curv = float(np.vdot(p, Ap))
        if not curv > 0.0:  # rounding at the bottom of the spectrum: to the boundary, or keep the last iterate
            return (_to_boundary(x, p, w, radius), it, True) if math.isfinite(radius) else (x, it, False)
        alpha = rz / curv
        if float(np.vdot(x + alpha * p, w * (x + alpha * p))) >= radius * radius:
            return _to_boundary(x, p, w, radius), it, True
        x += alpha * p
        r -= alpha * Ap
        if float(np.sqrt(np.vdot(r, r))) <= stop:
            return x, it, False
        z = inv_diag * r
        rz_new = float(np.vdot(r, z))
        p *= rz_new / rz
        p += z
        rz = rz_new
    return x, max_iter, False


def _to_boundary(x: np.ndarray, p: np.ndarray, w: np.ndarray, radius: float) -> np.ndarray:
    """x + τ p with τ >= 0 and ‖x + τ p‖_w = radius (x inside the ball)."""
    a = float(np.vdot(p, w * p))
    bx = float(np.vdot(x, w * p))
    c = float(np.vdot(x, w * x)) - radius * radius
    tau = (-bx + math.sqrt(max(bx * bx - a * c, 0.0))) / a
    return x + tau * p
