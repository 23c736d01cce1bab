"""Conversion to and from ``torch.nn.MultiheadAttention`` (torch is imported lazily, only when called).

With per-head query/key/value rows Q_h, K_h, V_h (d_h × d blocks of ``in_proj_weight``) and output columns
O_h (d × d_h block of ``out_proj.weight``), torch computes Σ_h softmax(X Q_hᵀ K_h Xᵀ/√d_h) X V_hᵀ O_hᵀ, so in
the row-vector convention Θ_h = Q_hᵀ K_h / √d_h and W_h = V_hᵀ O_hᵀ.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from .model import MultiHeadAttention

if TYPE_CHECKING:
    import torch

__all__ = ["from_torch", "to_torch"]


def _import_torch() -> ModuleType:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "torch is required for torch interop (pip install 'sculpt-attention[torch]'; the CPU build alone: "
            "pip install torch --index-url https://download.pytorch.org/whl/cpu)"
        ) from exc
    return torch


def _numpy64(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().double().numpy().copy()


def from_torch(module: torch.nn.MultiheadAttention) -> MultiHeadAttention:
    """The layer computed by ``module(X, X, X, need_weights=False)[0]``: Θ_h = Q_hᵀ K_h / √d_h, W_h = V_hᵀ O_hᵀ.

    Parameters
    ----------
    module
        A torch.nn.MultiheadAttention with batch_first=True, no biases (bias=False, add_bias_kv=False),
        kdim = vdim = embed_dim, add_zero_attn=False and (in training mode) dropout 0, used without masks.
        Other modules: TypeError; unsupported configurations: ValueError.

    Returns
    -------
    MultiHeadAttention
        The same layer in float64, one head per torch head.
    """
    torch = _import_torch()
    if not isinstance(module, torch.nn.MultiheadAttention):
        raise TypeError(f"module must be a torch.nn.MultiheadAttention, got {type(module).__name__}")
    if not module.batch_first:
        raise ValueError("module must have batch_first=True")
    if module.in_proj_bias is not None or module.out_proj.bias is not None:
        raise ValueError("module must have no biases (construct with bias=False)")
    if module.bias_k is not None or module.bias_v is not None:
        raise ValueError("module must not use add_bias_kv")
    if module.add_zero_attn:
        raise ValueError("module must not use add_zero_attn")
    if not module._qkv_same_embed_dim or module.kdim != module.embed_dim or module.vdim != module.embed_dim:
        raise ValueError("module must have kdim = vdim = embed_dim")
    if module.training and module.dropout > 0:
        raise ValueError(f"module has dropout {module.dropout} in training mode; call module.eval() first")
    d, h = int(module.embed_dim), int(module.num_heads)
    dh = d // h
    w_in = _numpy64(module.in_proj_weight)  # (3d, d): rows [Q; K; V]
    w_out = _numpy64(module.out_proj.weight)  # (d, d)
    if not (np.all(np.isfinite(w_in)) and np.all(np.isfinite(w_out))):
        raise ValueError("module weights contain NaN or inf")
    Q = w_in[:d].reshape(h, dh, d)
    K = w_in[d : 2 * d].reshape(h, dh, d)
    V = w_in[2 * d :].reshape(h, dh, d)
    O = w_out.reshape(d, h, dh).transpose(1, 0, 2)  # O[h] = out_proj.weight[:, h dh:(h+1) dh]
    thetas = np.einsum("hrp,hrq->hpq", Q, K) / math.sqrt(dh)
    ws = np.einsum("hrp,hcr->hpc", V, O)
    return MultiHeadAttention(thetas, ws)


def _factor(M: np.ndarray, r: int, rtol: float, what: str) -> tuple[np.ndarray, np.ndarray]:
    """M = L Rᵀ with L, R of shape (d, r) (balanced SVD factors, zero-padded); ValueError if rank(M) > r."""
    U, s, Vt = np.linalg.svd(M)
    if len(s) > r and s[r] > rtol * max(s[0], np.finfo(float).tiny):
        raise ValueError(
            f"{what} has numerical rank above the head dimension {r} (singular value {s[r]:.3g} vs largest {s[0]:.3g})"
        )
    root = np.sqrt(s[:r])
    return U[:, :r] * root, Vt[:r].T * root


def to_torch(
    model: MultiHeadAttention, num_heads: int | None = None, *, rtol: float = 1e-10
) -> torch.nn.MultiheadAttention:
    """A float64 torch.nn.MultiheadAttention(d, m, bias=False, batch_first=True) computing ``model``.

    Factors come from SVDs: Θ_i √d_h = Q_iᵀ K_i and W_i = V_iᵀ O_iᵀ with d_h = d/m.

    Parameters
    ----------
    model
        The layer; every Θ_i and W_i must have rank <= d/m (true for any m = 1 layer; a generic full-rank layer
        with m >= 2 is not representable: ValueError), and m must divide d.
    num_heads
        Must equal m (the default).
    rtol
        Singular values above rtol·σ_max beyond rank d/m make the layer unrepresentable.

    Returns
    -------
    torch.nn.MultiheadAttention
        In eval mode.
    """
    torch = _import_torch()
    if not isinstance(model, MultiHeadAttention):
        raise TypeError(f"model must be a MultiHeadAttention, got {type(model).__name__}")
    m, d = model.m, model.d
    h = m if num_heads is None else num_heads
    if h != m:
        raise ValueError(f"num_heads must equal the model's m = {m}, got {h}")
    if d % m:
        raise ValueError(f"embed dimension d = {d} is not divisible by m = {m} heads")
    dh = d // m
    Q = np.empty((m, dh, d))
    K = np.empty((m, dh, d))
    V = np.empty((m, dh, d))
    O = np.empty((m, d, dh))
    for i in range(m):  # m small matrices: SVD per head, no sample loop
        lt, rt = _factor(model.thetas[i] * math.sqrt(dh), dh, rtol, f"Θ_{i}")  # Θ√dh = Qᵀ K
        Q[i], K[i] = lt.T, rt.T
        lw, rw = _factor(model.ws[i], dh, rtol, f"W_{i}")  # W = Vᵀ Oᵀ
        V[i], O[i] = lw.T, rw
    module = torch.nn.MultiheadAttention(d, m, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        module.in_proj_weight.copy_(
            torch.from_numpy(np.concatenate([Q.reshape(d, d), K.reshape(d, d), V.reshape(d, d)], axis=0))
        )
        module.out_proj.weight.copy_(torch.from_numpy(O.transpose(1, 0, 2).reshape(d, d)))
    module.eval()
    return module
