"""(Private.) Facets found by rays bent around the rows that block them: no LP.

A ray from the relative-interior point x0 whose first hit is one row alone hits a facet (the segment just past
the hit is a witness: it violates that row and no other). The directed ray of row j runs along g_j's
projection onto the flat; when other rows block it (they are hit no later than j), the ray is bent: g_j's
projection onto the flat *and* onto the blocking rows' hyperplanes through x0 (g_k e = 0), so those rows are
never hit, and shot again. Each round adds the rows that block the new ray, until j is hit first and alone,
the projection vanishes (j lies in the span of its blockers within the flat: undecided here) or _MAX_BLOCKED
rows block it. Every certificate is the directed rays' one: a first hit alone among all rows not found
redundant, checked on the ray actually shot. Work: one n x d x b product per round for a batch of b rows
(dense, BLAS 3), against one LP over P per row for Clarkson's step.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

_SLOTS = 48  # rows bent at a time (their rays are one n x _SLOTS block per round); a finished row's slot is refilled
_ROUNDS = 40  # bends per row at most
_PER_ROUND = 16  # blockers added per bend at most
_MAX_BLOCKED = 512  # blocking rows per row at most (an orthonormal basis of their images, grown as needed)
_RATE_ROUNDS = 8  # rounds over which the certification rate is judged
_TIE = 1e-9  # hits within this relative distance along a ray are a tie (as _clarkson._RAY_TIE)
_VANISH = 1e-9  # a bent direction shorter than this times the first one: the row is left undecided


class _Slots:
    """The rows being bent: per slot the row, its normal in the flat's coordinates (p), the current direction
    (u), an orthonormal basis of its blockers' images (W[:r]) and the bends so far."""

    def __init__(self, d: int) -> None:
        self.row = np.full(_SLOTS, -1)
        self.p = np.zeros((_SLOTS, d))
        self.u = np.zeros((_SLOTS, d))
        self.W = [np.zeros((16, d)) for _ in range(_SLOTS)]  # grown by doubling (most rows need a few)
        self.r = np.zeros(_SLOTS, dtype=int)
        self.rounds = np.zeros(_SLOTS, dtype=int)

    def fill(self, k: int, row: int, p: np.ndarray) -> None:
        self.row[k], self.p[k], self.u[k], self.r[k], self.rounds[k] = row, p, p, 0, 0

    def block(self, k: int, Q: np.ndarray) -> bool:
        """Bend slot k's ray parallel to the hyperplanes with images Q (rows) too; False when it cannot
        (too many blockers, or g_j's projection vanishes)."""
        r = self.r[k]
        W = self.W[k][:r]
        if r:  # one pass of block Gram-Schmidt: the rays are checked as shot, so round-off costs no soundness
            Q = Q - (Q @ W.T) @ W
        q, rr = np.linalg.qr(Q.T)
        diag = np.abs(np.diag(rr))
        new = q[:, diag > 1e-10 * max(1.0, float(np.max(diag, initial=0.0)))].T
        if r + new.shape[0] > _MAX_BLOCKED:
            return False
        if r + new.shape[0] > self.W[k].shape[0]:
            grown = np.zeros((min(_MAX_BLOCKED, 2 * (r + new.shape[0])), Q.shape[1]))
            grown[:r] = W
            self.W[k] = grown
        self.W[k][r : r + new.shape[0]] = new
        self.r[k] = r = r + new.shape[0]
        W = self.W[k][:r]
        self.u[k] = self.p[k] - (W @ self.p[k]) @ W
        return bool(np.linalg.norm(self.u[k]) > _VANISH * np.linalg.norm(self.p[k]))


def bent_rays(
    G: sp.csr_matrix,
    basis: np.ndarray,
    rows: np.ndarray,
    alive: np.ndarray,
    s0: np.ndarray,
    min_rate: float = 0.0,
) -> dict[int, float]:
    """Facets among the rows of G hit first and alone by a bent ray (module docstring): {row: a lower bound
    on its margin, (t2 - t1) g·d}. ``rows``: the rows to aim at; ``alive``: every row not found redundant
    (the rays must clear them all); ``s0``: slacks at x0 (> 0 on ``alive``). Stops early once the last
    _RATE_ROUNDS rounds certified rows at fewer than ``min_rate`` rows per CPU second."""
    import time

    from ._clarkson import _first_hits

    found: dict[int, float] = {}
    d = basis.shape[1]
    if d == 0 or rows.size == 0 or alive.size == 0:
        return found
    s = s0[alive]
    if np.min(s) <= 0:
        return found  # x0 is not strictly inside: the rays prove nothing
    Ga = sp.csr_matrix(G[alive])
    where = np.full(G.shape[0], -1)
    where[alive] = np.arange(alive.size)
    queue = [int(j) for j in rows if where[j] >= 0][::-1]
    sl = _Slots(d)
    done: list[tuple[float, int]] = []  # per round: CPU time, rows certified so far

    def refill(k: int) -> None:
        sl.row[k] = -1
        while queue:
            j = queue.pop()
            if j not in found:
                sl.fill(k, j, np.asarray(Ga[[where[j]]] @ basis).ravel())
                return

    for k in range(_SLOTS):
        refill(k)
    done.append((time.process_time(), 0))
    while np.any(sl.row >= 0):
        if len(done) > _RATE_ROUNDS:
            (t0, f0), (t1, f1) = done[-_RATE_ROUNDS - 1], done[-1]
            if f1 - f0 < min_rate * (t1 - t0):
                break
        act = np.flatnonzero(sl.row >= 0)
        D = basis @ sl.u[act].T  # n x a: the rays
        GD = np.asarray(Ga @ D)
        with np.errstate(divide="ignore", invalid="ignore"):
            T = np.where(GD > 1e-12, s[:, None] / GD, np.inf)
        first, two, ok = _first_hits(T)
        for col in np.flatnonzero(ok):  # every ray hitting one row first and alone certifies that row
            j = int(alive[first[col]])
            lb = float((two[1, col] - two[0, col]) * GD[first[col], col]) if np.isfinite(two[1, col]) else np.inf
            found[j] = max(found.get(j, 0.0), lb)
        for c, k in enumerate(act.tolist()):
            pj = int(where[sl.row[k]])
            tj = T[pj, c]
            sl.rounds[k] += 1
            if int(sl.row[k]) in found or not np.isfinite(tj) or sl.rounds[k] > _ROUNDS:
                refill(k)
                continue
            blk = np.flatnonzero(T[:, c] <= tj * (1.0 + _TIE) + 1e-15)
            blk = blk[blk != pj]
            if blk.size > _PER_ROUND:  # the earliest hits: the later ones may clear once the ray bends
                blk = blk[np.argpartition(T[blk, c], _PER_ROUND - 1)[:_PER_ROUND]]
            if blk.size == 0 or blk.size > _MAX_BLOCKED or not sl.block(k, np.asarray(Ga[blk] @ basis)):
                refill(k)
        done.append((time.process_time(), len(found)))
    return found
