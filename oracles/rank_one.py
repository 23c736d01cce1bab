"""Rows that are rank-one matrices, kept as their factors: the equations ⟨Θ, a_r b_rᵀ⟩ ≈ c_r of bilinear
(matrix-sensing) measurements of an unknown p × q matrix Θ.

Row r of the (R, p·q) matrix is kron(a_r, b_r) = vec(a_r b_rᵀ) (row-major vec, numpy's ``ravel``). Stored
whole it takes R·p·q floats and its Gram matrix R·(p·q)² flops; kept as factors it takes R·(p+q) floats, and
rows that share their left factor (a group g) add one Kronecker term (a_g a_gᵀ) ⊗ B_g to the Gram matrix,
B_g = Σ_{r∈g} w_r² b_r b_rᵀ, so the Gram matrix costs about 2·G·(p(p+1)/2)·(q(q+1)/2) flops for G groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike

from ._validate import real_array

__all__ = ["RankOneRows"]

#: columns (p·q) from which ``RankOneRows.gram`` takes the grouped Kronecker product (when it needs fewer
#: flops than the dense product); below, the dense rows' product, which takes milliseconds there
GROUPED_GRAM_FROM = 1024

#: floats of the per-row products b_r b_rᵀ one chunk of the grouped Gram matrix holds (32 MB)
GROUPED_CHUNK_ENTRIES = 1 << 22


@dataclass(frozen=True, eq=False)
class RankOneRows:
    """The (R, p·q) matrix whose row r is kron(left[r], right[r]) = vec(left_r right_rᵀ), kept as factors.

    It supports what the engine's fits need without forming the rows: ``shape``, ``@`` with a vector or a
    matrix of columns vec(Θ), ``rmatvec``, ``take`` (a subset of rows), ``concatenate``, ``gram`` and
    ``dense`` (the rows whole, for the methods that need them).

    Parameters
    ----------
    left : array_like, shape (R, p)
        The left factors a_r.
    right : array_like, shape (R, q)
        The right factors b_r.

    Examples
    --------
    >>> import numpy as np
    >>> from oracles import RankOneRows
    >>> rows = RankOneRows(np.array([[1.0, -1.0]]), np.array([[2.0, 1.0, 3.0]]))
    >>> rows.shape, rows.dense().tolist()
    ((1, 6), [[2.0, 1.0, 3.0, -2.0, -1.0, -3.0]])
    >>> float((rows @ np.arange(6.0))[0])   # ⟨Θ, a bᵀ⟩ = aᵀ Θ b with Θ = [[0, 1, 2], [3, 4, 5]]
    -18.0
    """

    left: np.ndarray
    right: np.ndarray
    #: the blocks of rows a ``concatenate`` joined (their Gram matrices are summed, each remembered: see ``gram``)
    parts: tuple[RankOneRows, ...] = field(default=(), init=False, repr=False)
    _last_gram: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        left = real_array(self.left, "left")
        right = real_array(self.right, "right")
        if left.ndim != 2 or right.ndim != 2 or left.shape[0] != right.shape[0]:
            raise ValueError(
                f"left and right must be 2-D with the same number of rows, got shapes {left.shape} and {right.shape}"
            )
        if not (np.all(np.isfinite(left)) and np.all(np.isfinite(right))):
            raise ValueError("left and right must be finite")
        left, right = left.copy(), right.copy()  # its own read-only copies: a remembered Gram matrix stays true
        left.flags.writeable = right.flags.writeable = False
        object.__setattr__(self, "left", left)
        object.__setattr__(self, "right", right)

    @property
    def shape(self) -> tuple[int, int]:
        """(R, p·q)."""
        return (self.left.shape[0], self.left.shape[1] * self.right.shape[1])

    @property
    def ndim(self) -> int:
        """2, as for the dense rows."""
        return 2

    def __len__(self) -> int:
        return self.left.shape[0]

    def dense(self) -> np.ndarray:
        """The rows whole, (R, p·q)."""
        return np.einsum("np,nq->npq", self.left, self.right).reshape(self.shape)

    def take(self, rows: ArrayLike | slice) -> RankOneRows:
        """The rows ``rows`` (indices, a Boolean mask or a slice), as factors."""
        idx = rows if isinstance(rows, slice) else np.asarray(rows)
        return RankOneRows(self.left[idx], self.right[idx])

    @staticmethod
    def concatenate(parts: Sequence[RankOneRows]) -> RankOneRows:
        """The parts' rows one after the other (ValueError when their factor sizes differ or there are none)."""
        if not parts:
            raise ValueError("concatenate needs at least one RankOneRows")
        if len({(p.left.shape[1], p.right.shape[1]) for p in parts}) != 1:
            raise ValueError(f"the parts' factor sizes differ: {[(p.left.shape[1], p.right.shape[1]) for p in parts]}")
        joined = RankOneRows(np.vstack([p.left for p in parts]), np.vstack([p.right for p in parts]))
        object.__setattr__(joined, "parts", tuple(b for p in parts for b in (p.parts or (p,))))
        return joined

    def __matmul__(self, x: ArrayLike) -> np.ndarray:
        """Rows @ x: a_rᵀ Θ b_r for x = vec(Θ) (p·q,), or for each column of x (p·q, j) → (R, j)."""
        arr = np.asarray(x, dtype=float)
        p, q = self.left.shape[1], self.right.shape[1]
        if arr.shape[:1] != (p * q,) or arr.ndim > 2:
            raise ValueError(f"x must have shape ({p * q},) or ({p * q}, j), got {arr.shape}")
        if arr.ndim == 1:
            return np.einsum("rq,rq->r", self.left @ arr.reshape(p, q), self.right)
        T = np.einsum("rp,pqj->rqj", self.left, arr.reshape(p, q, -1))
        return np.einsum("rqj,rq->rj", T, self.right)

    def rmatvec(self, y: ArrayLike) -> np.ndarray:
        """Rowsᵀ y = vec(Σ_r y_r a_r b_rᵀ), (p·q,)."""
        arr = np.asarray(y, dtype=float).reshape(-1)
        if arr.shape[0] != self.shape[0]:
            raise ValueError(f"y must have {self.shape[0]} entries, got {arr.shape[0]}")
        return ((self.left.T * arr) @ self.right).reshape(-1)

    @cached_property
    def _groups(self) -> tuple[np.ndarray, np.ndarray]:
        uniq, inv = np.unique(self.left, axis=0, return_inverse=True)
        return uniq, inv.reshape(-1)

    def groups(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct left factors (G, p) and each row's group (R,), computed once."""
        return self._groups

    def gram(self, weights: ArrayLike | None = None, *, out: np.ndarray | None = None) -> np.ndarray:
        """Σ_r w_r² kron(a_r, b_r) kron(a_r, b_r)ᵀ, the Gram matrix of diag(w)·rows, (p·q, p·q).

        From ``GROUPED_GRAM_FROM`` columns on, and when it needs fewer flops, by groups of rows that share a left
        factor: only the p(p+1)/2 × q(q+1)/2 distinct entries Σ_g (a_g a_gᵀ)_{ii'} (B_g)_{jj'} are multiplied
        out (a matrix product over chunks of groups), then spread to their (i, j), (i', j') places; else the
        dense rows' product. Rows joined by ``concatenate`` sum their blocks' Gram matrices, and a block
        remembers its last grouped Gram matrix with its weights: refitting old rows plus new ones with the old
        rows' weights unchanged costs only the new rows' product. ``out`` (p·q, p·q), a view allowed, receives
        the result (no full-size temporary on the grouped path) and is returned.
        """
        R, n = self.shape
        w = np.ones(R) if weights is None else np.asarray(weights, dtype=float).reshape(-1)
        if w.shape[0] != R:
            raise ValueError(f"weights must have {R} entries, got {w.shape[0]}")
        if not np.all(np.isfinite(w)):
            raise ValueError("weights must be finite")
        if out is not None and out.shape != (n, n):
            raise ValueError(f"out must have shape ({n}, {n}), got {out.shape}")
        if len(self.parts) > 1 and self.left.shape[1] * self.right.shape[1] >= GROUPED_GRAM_FROM:
            return self._gram_by_parts(w, out)
        if not self.grouped_gram_pays():
            return self._product(w, out)
        known = self._remembered(w)
        if known is not None:
            return _into(out, known) if out is not None else known.copy()
        G = self._product(w, out)
        self._last_gram[:] = [(w.copy(), G.copy())]
        return G

    def _product(self, w: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The Gram matrix of diag(w)·rows (into ``out`` when given): grouped where that pays, else the dense rows'
        product (not remembered)."""
        if not self.grouped_gram_pays():
            M = self.dense() * w[:, None]
            return _into(out, M.T @ M) if out is not None else M.T @ M
        uniq, group = self.groups()
        p, q = self.left.shape[1], self.right.shape[1]
        H = _grouped_entries(uniq, group, self.right, w * w, p, q)
        return _spread(H, p, q, np.empty((p * q, p * q)) if out is None else out)

    def _remembered(self, w: np.ndarray) -> np.ndarray | None:
        """The Gram matrix remembered for exactly these weights, else None."""
        if self._last_gram and np.array_equal(self._last_gram[0][0], w):
            return self._last_gram[0][1]
        return None

    def _gram_by_parts(self, w: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The blocks' remembered Gram matrices (same weights) plus one product over all the other rows (one
        spreading of its entries, not one per block)."""
        bounds = np.cumsum([0] + [len(b) for b in self.parts])
        known_blocks: list[np.ndarray] = []
        rest: list[int] = []
        for i, (b, lo, hi) in enumerate(zip(self.parts, bounds[:-1], bounds[1:])):
            known = b._remembered(w[lo:hi])
            if known is None:
                rest.append(i)
            else:
                known_blocks.append(known)
        if not known_blocks:
            return self._product(w, out)
        if rest:
            new = RankOneRows.concatenate([self.parts[i] for i in rest])
            total = new._product(np.concatenate([w[bounds[i] : bounds[i + 1]] for i in rest]), out)
        else:
            total = np.zeros((self.shape[1], self.shape[1])) if out is None else _into(out, 0.0)
        for known in known_blocks:
            total += known
        return total

    def grouped_gram_pays(self) -> bool:
        """Whether ``gram`` takes the grouped product: from ``GROUPED_GRAM_FROM`` columns on, when it needs fewer
        flops than the dense product (2·G·(p(p+1)/2)·(q(q+1)/2) plus spreading the entries, against R·(p·q)²)."""
        p, q = self.left.shape[1], self.right.shape[1]
        if p * q < GROUPED_GRAM_FROM or self.shape[0] == 0:
            return False
        n_groups = self.groups()[0].shape[0]
        grouped = 2.0 * n_groups * (p * (p + 1) / 2) * (q * (q + 1) / 2) + 4.0 * (p * q) ** 2
        return grouped < self.shape[0] * float(p * q) ** 2


def _grouped_entries(
    uniq: np.ndarray, group: np.ndarray, right: np.ndarray, w2: np.ndarray, p: int, q: int
) -> np.ndarray:
    """H = Σ_g vech(a_g a_gᵀ) vech(B_g)ᵀ, (p(p+1)/2, q(q+1)/2), with B_g = Σ_{r∈g} w2_r b_r b_rᵀ: chunks of groups
    whose factors take ``GROUPED_CHUNK_ENTRIES`` floats each, so no G × p(p+1)/2 array is held whole."""
    iu_p, iu_q = np.triu_indices(p), np.triu_indices(q)
    n_groups, nq = uniq.shape[0], iu_q[0].size
    order = np.argsort(group, kind="stable")
    sorted_group = group[order]
    starts = np.searchsorted(sorted_group, np.arange(n_groups + 1))  # group g's rows: order[starts[g]:starts[g+1]]
    H = np.zeros((iu_p[0].size, nq))
    per_chunk = max(1, GROUPED_CHUNK_ENTRIES // max(iu_p[0].size, nq))
    row_step = max(1, GROUPED_CHUNK_ENTRIES // nq)
    for g0 in range(0, n_groups, per_chunk):
        g1 = min(n_groups, g0 + per_chunk)
        P = uniq[g0:g1, iu_p[0]] * uniq[g0:g1, iu_p[1]]  # the distinct entries of a_g a_gᵀ
        Q = np.zeros((g1 - g0, nq))  # the distinct entries of each B_g
        for lo in range(starts[g0], starts[g1], row_step):  # rows sorted by group, summed run by run (reduceat)
            hi = min(starts[g1], lo + row_step)
            b = right[order[lo:hi]]
            prod = b[:, iu_q[0]] * (b[:, iu_q[1]] * w2[order[lo:hi], None])
            g = sorted_group[lo:hi]
            runs = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
            Q[g[runs] - g0] += np.add.reduceat(prod, runs, axis=0)
        H += P.T @ Q
    return H


def _spread(H: np.ndarray, p: int, q: int, out: np.ndarray) -> np.ndarray:
    """out[(i, j), (i', j')] = H[s(i, i'), s(j, j')], one left index i at a time (no (p·q)² index array)."""
    sym_p, sym_q = _sym_index(p), _sym_index(q)
    out4 = out.reshape(p, q, p, q)  # a view: splitting each axis in two never copies
    if not np.shares_memory(out4, out):
        raise ValueError("out must be reshapeable to (p, q, p, q) without a copy")
    for i in range(p):
        out4[i] = H[sym_p[i]][:, sym_q].transpose(1, 0, 2)  # [i', j, j'] → [j, i', j']
    return out


def _into(out: np.ndarray, value: np.ndarray | float) -> np.ndarray:
    """out[...] = value; out."""
    out[...] = value
    return out


def _sym_index(n: int) -> np.ndarray:
    """(n, n) map from (i, i') to the position of (min, max) in ``numpy.triu_indices(n)``'s order."""
    idx = np.empty((n, n), dtype=np.intp)
    iu = np.triu_indices(n)
    idx[iu] = np.arange(iu[0].size)
    idx[iu[1], iu[0]] = idx[iu]
    return idx
