"""Analytic gradients, residuals and Jacobians of the squared loss of the attention layer.

Loss: L(Θ, W) = Σ_n ‖F(X_n) − Y_n‖_F² (a sum over examples, tokens and coordinates), or, with
``normalize=True``, L / Σ_n ‖Y_n‖_F², which is the training relative MSE. With G = ∂L/∂F = 2(F − Y):
∂L/∂W_i = Σ_n (P_i X)ᵀ G and ∂L/∂Θ_i = Σ_n Xᵀ S_i X with S_i = P_i ⊙ (G V_iᵀ − rowsum(P_i ⊙ G V_iᵀ)),
V_i = X W_i (the softmax backward). Everything is vectorised and chunked over examples.

Flat parameter layout (``pack`` / ``unpack``, also MultiHeadAttention.params()): [vec Θ_1..Θ_m, vec W_1..W_m],
row-major, length 2 m d². Residuals for least squares: r = vec(F(X) − Y) in (N, k, d) row-major order.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.sparse.linalg import LinearOperator

from ._checks import check_data, check_inputs, check_m, check_params
from .model import chunk_size, concat_thetas, forward, forward_chunk

__all__ = [
    "pack",
    "unpack",
    "loss_and_grad",
    "loss_and_grad_flat",
    "residuals",
    "jacobian",
    "jacobian_operator",
    "jvp",
    "vjp",
]


# ------------------------------------------------------------------------------------------ flat layout
def pack(thetas: np.ndarray, ws: np.ndarray) -> np.ndarray:
    """The flat parameter vector.

    Parameters
    ----------
    thetas, ws
        Heads and projections, (m, d, d) each.

    Returns
    -------
    numpy.ndarray
        [vec Θ_1..Θ_m, vec W_1..W_m] (row-major), float64 of length 2md².
    """
    return np.concatenate([np.ravel(thetas), np.ravel(ws)]).astype(np.float64, copy=False)


def unpack(params: ArrayLike, m: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of ``pack``.

    Parameters
    ----------
    params
        The flat vector, length 2md² (ValueError otherwise).
    m, d
        Heads and token dimension.

    Returns
    -------
    tuple of numpy.ndarray
        (thetas, ws), each a (m, d, d) view of ``params``.
    """
    p = np.asarray(params, dtype=np.float64)
    if p.shape != (2 * m * d * d,):
        raise ValueError(f"params must have shape ({2 * m * d * d},) for m={m}, d={d}, got {p.shape}")
    half = m * d * d
    return p[:half].reshape(m, d, d), p[half:].reshape(m, d, d)


def _dims(params: ArrayLike, X: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    d = X.shape[2]
    return unpack(params, m, d)


# --------------------------------------------------------------------------------------------- kernels
def _backward_chunk(
    wt_cat: np.ndarray, X: np.ndarray, P: np.ndarray, A: np.ndarray, G: np.ndarray, m: int
) -> tuple[np.ndarray, np.ndarray]:
    """Vector-Jacobian product for one chunk: given G = ∂L/∂F (n, k, d) and the forward's P, A return
    (∂L/∂Θ_cat (d, m d), ∂L/∂W_cat (m d, d)) where Θ_cat = concat_thetas(thetas), W_cat = ws.reshape(m d, d)
    and wt_cat = [W_1ᵀ | … | W_mᵀ] (d, m d)."""
    n, k, d = X.shape
    Xf = X.reshape(n * k, d)
    g_w = A.reshape(n * k, m * d).T @ G.reshape(n * k, d)
    gw = (G.reshape(n * k, d) @ wt_cat).reshape(n, k * m, d)  # gw[n, a m + i] = W_i g_a
    S = X @ gw.transpose(0, 2, 1)  # ∂L/∂P[n, b, a m + i] = g_aᵀ W_iᵀ x_b
    S -= np.einsum("nbj,nbj->nj", S, P)[:, None]
    S *= P  # ∂L/∂logits
    B = S.transpose(0, 2, 1) @ X  # (n, k m, d)
    g_t = Xf.T @ B.reshape(n * k, m * d)  # (d, m d)
    return g_t, g_w


def _tangent_chunk(
    dtheta_cat: np.ndarray, dw_cat: np.ndarray, w_cat: np.ndarray, X: np.ndarray, P: np.ndarray, A: np.ndarray, m: int
) -> np.ndarray:
    """Jacobian-vector product for one chunk: dF (n, k, d) for parameter directions (dΘ, dW)."""
    n, k, d = X.shape
    Xf = X.reshape(n * k, d)
    dxt = (Xf @ dtheta_cat).reshape(n, k * m, d)
    dL = X @ dxt.transpose(0, 2, 1)  # d logits, same layout as P
    dL -= np.einsum("nbj,nbj->nj", dL, P)[:, None]
    dL *= P  # dP
    dA = dL.transpose(0, 2, 1) @ X
    return ((dA.reshape(n * k, m * d) @ w_cat) + (A.reshape(n * k, m * d) @ dw_cat)).reshape(n, k, d)


def _grads_from_cat(g_t: np.ndarray, g_w: np.ndarray, m: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    return g_t.reshape(d, m, d).transpose(1, 0, 2).copy(), g_w.reshape(m, d, d).copy()


# ---------------------------------------------------------------------------------------------- public
def loss_and_grad(
    thetas: ArrayLike, ws: ArrayLike, X: ArrayLike, Y: ArrayLike, *, normalize: bool = False, checked: bool = False
) -> tuple[float, np.ndarray, np.ndarray]:
    """The squared loss L = Σ_n ‖F(X_n) − Y_n‖_F² and its gradients.

    Parameters
    ----------
    thetas, ws
        Heads and projections, (m, d, d) each.
    X, Y
        Examples (N, k, d) and labels of the same shape.
    normalize
        Divide by Σ‖Y‖² (L is then the training relative MSE).
    checked
        Skip validation (hot loops: the arrays must already be float64 (m, d, d) and (N, k, d)).

    Returns
    -------
    tuple
        (L, ∂L/∂Θ (m, d, d), ∂L/∂W (m, d, d)).
    """
    if checked:
        th, w, X3, Y3 = np.asarray(thetas), np.asarray(ws), np.asarray(X), np.asarray(Y)
    else:
        th, w = check_params(thetas, ws)
        X3, Y3 = check_data(X, Y)
        if X3.shape[2] != th.shape[1]:
            raise ValueError(f"X has token dimension {X3.shape[2]}, parameters have d = {th.shape[1]}")
    m, d, _ = th.shape
    N, k, _ = X3.shape
    theta_cat, w_cat = concat_thetas(th), w.reshape(m * d, d)
    wt_cat = np.ascontiguousarray(w.transpose(2, 0, 1).reshape(d, m * d))  # [W_1ᵀ | … | W_mᵀ]
    loss = 0.0
    g_t = np.zeros((d, m * d))
    g_w = np.zeros((m * d, d))
    step = chunk_size(k, d, m)
    for s in range(0, N, step):
        Xc, Yc = X3[s : s + step], Y3[s : s + step]
        P, A, F = forward_chunk(theta_cat, w_cat, Xc, m)
        R = F - Yc
        loss += float(np.einsum("ijk,ijk->", R, R))
        R *= 2.0
        gt, gw = _backward_chunk(wt_cat, Xc, P, A, R, m)
        g_t += gt
        g_w += gw
    g_thetas, g_ws = _grads_from_cat(g_t, g_w, m, d)
    if normalize:
        denom = float(np.einsum("ijk,ijk->", Y3, Y3))
        if denom <= 0:
            raise ValueError("normalize=True needs Y with non-zero energy")
        loss /= denom
        g_thetas /= denom
        g_ws /= denom
    return loss, g_thetas, g_ws


def loss_and_grad_flat(
    params: np.ndarray, X: np.ndarray, Y: np.ndarray, m: int, *, scale: float = 1.0
) -> tuple[float, np.ndarray]:
    """(L / scale, ∇L / scale) over the flat layout, for ``scipy.optimize.minimize(..., jac=True)``.

    No validation: call ``sculpt._checks.check_data`` once beforehand.

    Parameters
    ----------
    params
        The flat parameters (``pack``).
    X, Y
        Examples and labels, float64 (N, k, d).
    m
        Heads.
    scale
        Divisor of the loss; Σ‖Y‖² gives the relative training MSE.

    Returns
    -------
    tuple
        (loss, gradient of length 2md²).
    """
    thetas, ws = _dims(params, X, m)
    loss, gt, gw = loss_and_grad(thetas, ws, X, Y, checked=True)
    return loss / scale, np.concatenate([gt.ravel(), gw.ravel()]) / scale


def residuals(params: ArrayLike, X: ArrayLike, Y: ArrayLike, m: int) -> np.ndarray:
    """r = vec(F(X) − Y), row-major over (N, k, d); ‖r‖² is the summed loss. For
    ``scipy.optimize.least_squares(residuals, x0, jac=jacobian, args=(X, Y, m))``.

    Parameters
    ----------
    params
        The flat parameters (``pack``).
    X, Y
        Examples (N, k, d) and labels of the same shape.
    m
        Heads.

    Returns
    -------
    numpy.ndarray
        The N k d residuals.
    """
    m = check_m(m)
    X3, Y3 = check_data(X, Y)
    thetas, ws = _dims(params, X3, m)
    return (forward(np.ascontiguousarray(thetas), np.ascontiguousarray(ws), X3) - Y3).ravel()


def jacobian(params: ArrayLike, X: ArrayLike, Y: ArrayLike, m: int) -> np.ndarray:
    """Dense Jacobian ∂r/∂params = ∂ vec F(X)/∂params; memory N k d · 2md² floats (``jacobian_operator`` when
    large).

    ∂F[a, c]/∂W_i[p, q] = (P_i X)[a, p] δ_cq and ∂F[a, c]/∂Θ_i[p, q] = x_a[p] Σ_b p_ab x_b[q] (V_i[b, c] −
    (P_i V_i)[a, c]) with V_i = X W_i.

    Parameters
    ----------
    params, X, Y, m
        As for ``residuals`` (Y only checked).

    Returns
    -------
    numpy.ndarray
        (N k d, 2md²).
    """
    m = check_m(m)
    X3, _ = check_data(X, Y)
    thetas, ws = _dims(params, X3, m)
    N, k, d = X3.shape
    theta_cat, w_cat = concat_thetas(thetas), np.ascontiguousarray(ws).reshape(m * d, d)
    J = np.empty((N, k, d, 2, m, d, d))
    eye = np.eye(d)
    step = max(1, chunk_size(k, d, m) // d)
    for s in range(0, N, step):
        Xc = X3[s : s + step]
        n = Xc.shape[0]
        P, A, _ = forward_chunk(theta_cat, w_cat, Xc, m)
        Pm = P.reshape(n, k, k, m)  # [n, b, a, i]
        Am = A.reshape(n, k, m, d)  # [n, a, i, p]
        V = np.einsum("nbp,ipc->nibc", Xc, ws)  # X W_i
        O = np.einsum("nbai,nibc->niac", Pm, V)  # head outputs P_i V_i
        T = np.einsum("nbai,nbq,nibc->niaqc", Pm, Xc, V, optimize=True) - np.einsum("naiq,niac->niaqc", Am, O)
        J[s : s + n, :, :, 0] = np.einsum("nap,niaqc->nacipq", Xc, T)
        J[s : s + n, :, :, 1] = np.einsum("naip,cq->nacipq", Am, eye)
    return J.reshape(N * k * d, 2 * m * d * d)


def jvp(params: ArrayLike, X: ArrayLike, m: int, direction: ArrayLike, *, checked: bool = False) -> np.ndarray:
    """J v: the directional derivative of vec F(X) along ``direction``.

    Parameters
    ----------
    params
        The flat parameters (``pack``).
    X
        Examples (N, k, d).
    m
        Heads.
    direction
        A flat parameter direction, length 2md².
    checked
        Skip validation (X must be float64 (N, k, d)).

    Returns
    -------
    numpy.ndarray
        (N k d,).
    """
    m = m if checked else check_m(m)
    X3 = np.asarray(X) if checked else check_inputs(X, "X")[0]
    thetas, ws = _dims(params, X3, m)
    dth, dw = _dims(direction, X3, m)
    N, k, d = X3.shape
    theta_cat, w_cat = concat_thetas(thetas), np.ascontiguousarray(ws).reshape(m * d, d)
    dtheta_cat, dw_cat = concat_thetas(dth), np.ascontiguousarray(dw).reshape(m * d, d)
    out = np.empty((N, k, d))
    step = chunk_size(k, d, m)
    for s in range(0, N, step):
        Xc = X3[s : s + step]
        P, A, _ = forward_chunk(theta_cat, w_cat, Xc, m)
        out[s : s + step] = _tangent_chunk(dtheta_cat, dw_cat, w_cat, Xc, P, A, m)
    return out.ravel()


def vjp(params: ArrayLike, X: ArrayLike, m: int, cotangent: ArrayLike, *, checked: bool = False) -> np.ndarray:
    """Jᵀ u: the gradient of ⟨u, vec F(X)⟩ with respect to the flat parameters.

    Parameters
    ----------
    params
        The flat parameters (``pack``).
    X
        Examples (N, k, d).
    m
        Heads.
    cotangent
        u, N k d entries (ValueError otherwise).
    checked
        Skip validation (X must be float64 (N, k, d)).

    Returns
    -------
    numpy.ndarray
        Length 2md², the flat layout.
    """
    m = m if checked else check_m(m)
    X3 = np.asarray(X) if checked else check_inputs(X, "X")[0]
    thetas, ws = _dims(params, X3, m)
    N, k, d = X3.shape
    U = np.asarray(cotangent, dtype=np.float64)
    if U.size != N * k * d:
        raise ValueError(f"cotangent must have N k d = {N * k * d} entries, got {U.size}")
    U = U.reshape(N, k, d)
    theta_cat, w_cat = concat_thetas(thetas), np.ascontiguousarray(ws).reshape(m * d, d)
    wt_cat = np.ascontiguousarray(ws.transpose(2, 0, 1).reshape(d, m * d))
    g_t = np.zeros((d, m * d))
    g_w = np.zeros((m * d, d))
    step = chunk_size(k, d, m)
    for s in range(0, N, step):
        Xc = X3[s : s + step]
        P, A, _ = forward_chunk(theta_cat, w_cat, Xc, m)
        gt, gw = _backward_chunk(wt_cat, Xc, P, A, np.ascontiguousarray(U[s : s + step]), m)
        g_t += gt
        g_w += gw
    gth, gws = _grads_from_cat(g_t, g_w, m, d)
    return np.concatenate([gth.ravel(), gws.ravel()])


def jacobian_operator(params: ArrayLike, X: ArrayLike, Y: ArrayLike, m: int) -> LinearOperator:
    """∂r/∂params as a scipy LinearOperator built from ``jvp`` / ``vjp``, for
    ``least_squares(residuals, x0, jac=jacobian_operator, args=(X, Y, m), tr_solver="lsmr")``.

    Parameters
    ----------
    params, X, Y, m
        As for ``residuals``.

    Returns
    -------
    scipy.sparse.linalg.LinearOperator
        (N k d, 2md²).
    """
    m = check_m(m)
    X3, _ = check_data(X, Y)
    p = np.array(params, dtype=np.float64)
    _dims(p, X3, m)
    N, k, d = X3.shape
    shape = (N * k * d, 2 * m * d * d)
    return LinearOperator(
        shape,
        matvec=lambda v: jvp(p, X3, m, np.ravel(v), checked=True),
        rmatvec=lambda u: vjp(p, X3, m, np.ravel(u), checked=True),
        dtype=np.float64,
    )
