"""What went wrong, in the user's terms: checks ``learn`` runs on its result after the route has finished.

- ``misfit_causes``: a model whose validation relative MSE stays above ``Settings.misfit_residual`` (0.5: it
  explains less than half of the labels' energy) gets the likely causes named: the axis order (arrays saved as
  (N, d, k) instead of (N, k, d)), a wrong m, or labels that no attention layer produced. The axis order is
  tested, not guessed: ``linear_proxy_residual`` fits each output token by least squares on its own input
  token and the mean of its sequence (2d² coefficients, one solve); on attention data that proxy leaves 0.4–0.75
  of the labels' energy in the right layout and 0.92–1.0 in the transposed one ((4,8,1) to (16,8,4), ‖Θ‖ 2.5 and
  10), so the transposed arrays fitting it clearly better means the axes are swapped.
- ``supported_heads``: heads whose ‖W_i‖_F is below ``Settings.idle_head`` × the largest, or whose removal
  raises the validation error by at most ``Settings.idle_head_rise`` of it (under label noise), add nothing
  the labels can tell; ``learn`` warns (``UserWarning``) naming m̂, the number of heads that do.
"""

from __future__ import annotations

import numpy as np

from .model import MultiHeadAttention
from .toolkit import layer_relative_mse

__all__ = ["linear_proxy_residual", "looks_transposed", "misfit_causes", "supported_heads"]

#: examples the axis-order check reads: one least-squares solve with 2d columns and PROXY_EXAMPLES·k rows
PROXY_EXAMPLES = 2000
#: the transposed layout counts as the likelier one when its proxy residual is below this fraction of the given
#: layout's (measured ratios: 0.41–0.75 between the right and the transposed layout, see the module docstring)
PROXY_RATIO = 0.8


def linear_proxy_residual(X: np.ndarray, Y: np.ndarray) -> float:
    """Relative residual of the least-squares fit y_t ≈ A x_t + B mean_s(x_s) over the first examples.

    Parameters
    ----------
    X, Y : numpy.ndarray, shape (N, k, d)
        Inputs and labels in the layout ``learn`` reads.

    Returns
    -------
    float
        ‖Y − Ŷ‖² / ‖Y‖² of the proxy on at most ``PROXY_EXAMPLES`` examples (1.0 when Y is zero there).
    """
    Xs, Ys = X[:PROXY_EXAMPLES], Y[:PROXY_EXAMPLES]
    n, k, d = Xs.shape
    feats = np.concatenate([Xs, np.broadcast_to(Xs.mean(axis=1, keepdims=True), Xs.shape)], axis=2)
    F, T = feats.reshape(n * k, 2 * d), Ys.reshape(n * k, d)
    total = float(np.sum(T * T))
    if total == 0.0:
        return 1.0
    coef, *_ = np.linalg.lstsq(F, T, rcond=None)
    r = T - F @ coef
    return float(np.sum(r * r) / total)


def looks_transposed(X: np.ndarray, Y: np.ndarray) -> tuple[bool, float, float]:
    """Whether X and Y look saved as (N, d, k): the transposed arrays fit the linear proxy clearly better.

    Parameters
    ----------
    X, Y : numpy.ndarray, shape (N, a, b)
        The arrays as given.

    Returns
    -------
    tuple of (bool, float, float)
        The verdict, the proxy residual of the given layout and that of the transposed one.
    """
    given = linear_proxy_residual(X, Y)
    swapped = linear_proxy_residual(X.transpose(0, 2, 1), Y.transpose(0, 2, 1))
    return swapped < PROXY_RATIO * given, given, swapped


def misfit_causes(X: np.ndarray, Y: np.ndarray, m: int, validation_error: float | None, threshold: float) -> str | None:
    """The likely causes of a model that does not fit, or None when it fits.

    Parameters
    ----------
    X, Y : numpy.ndarray, shape (N, k, d)
        The examples ``learn`` was given.
    m : int
        The heads asked for.
    validation_error : float or None
        The result's validation relative MSE.
    threshold : float
        ``Settings.misfit_residual``.

    Returns
    -------
    str or None
        One sentence naming the causes, the tested one first.
    """
    if validation_error is None or not validation_error > threshold:
        return None
    _, k, d = X.shape
    swapped, given, other = looks_transposed(X, Y)
    head = f"the model does not fit (validation relative MSE {validation_error:.3g} > {threshold:g})"
    if swapped:
        return (
            f"{head}: X and Y look saved as (N, d, k), a linear check fits them transposed (residual {other:.2f} "
            f"against {given:.2f}); pass X.transpose(0, 2, 1) and Y.transpose(0, 2, 1). Other causes: too few "
            f"heads (m = {m}), labels not from an attention layer"
        )
    return (
        f"{head}; likely causes: labels not from an attention layer Σ_i softmax(X Θ_i Xᵀ) X W_i (biases, "
        f"normalisation, a nonlinearity), too few heads (m = {m}), or X, Y not in (N, k, d) order (k = {k} tokens "
        f"of dimension d = {d}; a linear check does not prefer them transposed: {other:.2f} against {given:.2f})"
    )


def supported_heads(
    model: MultiHeadAttention,
    idle: float,
    validation: tuple[np.ndarray, np.ndarray] | None = None,
    rise: float = 0.0,
    tol: float = 0.0,
) -> tuple[int, list[int]]:
    """m̂, the heads that contribute to the output, and the (1-based) heads that do not.

    A head is idle when ‖W_i‖_F ≤ ``idle`` × max_j ‖W_j‖_F, or, given validation examples, when setting its
    W_i to zero raises the validation relative MSE v by at most ``rise`` × v + ``tol``: under label noise an
    unneeded head fits a little of the noise (‖W_i‖_F ≈ 5e-4 × the largest at 1 % noise, (8,4,2) asked for 3
    heads), which a norm threshold misses but its removal does not show.

    Parameters
    ----------
    model : MultiHeadAttention
        A fitted layer.
    idle : float
        ``Settings.idle_head``.
    validation : tuple of numpy.ndarray, optional
        Held-out (X, Y) for the removal test; None: the norm test alone.
    rise : float
        ``Settings.idle_head_rise``: the relative rise of the validation error that counts as none.
    tol : float
        The learner's tol: an absolute rise this small counts as none too (exact fits).

    Returns
    -------
    tuple of (int, list of int)
        m̂ and the idle heads.
    """
    norms = np.linalg.norm(model.ws.reshape(model.m, -1), axis=1)
    top = float(norms.max()) if norms.size else 0.0
    small = [top == 0.0 or float(v) <= idle * top for v in norms]
    if validation is not None and len(validation[0]) > 0:
        X, Y = validation
        base = layer_relative_mse(model.thetas, model.ws, X, Y)
        for i in range(model.m):
            if not small[i]:
                ws = model.ws.copy()
                ws[i] = 0.0
                small[i] = layer_relative_mse(model.thetas, ws, X, Y) - base <= rise * base + tol
    idle_heads = [i + 1 for i, s in enumerate(small) if s]
    if len(idle_heads) == model.m:  # a model with no head that matters: nothing to say about m̂
        return model.m, []
    return model.m - len(idle_heads), idle_heads
