"""(Private.) Facets found by rays bent around the rows that block them: no LP.

A ray from a point y strictly inside every row not found redundant whose first hit is one row alone hits a
facet (the segment just past the hit is a witness: it violates that row and no other). The directed ray of
row j starts at x0 and runs along g_j's projection onto the flat; when other rows block it (they are hit no
later than j), its origin moves _STEP of the way to the first hit (y stays strictly inside: no slack shrinks
by more than that fraction) and the ray is bent: g_j's projection onto the flat *and* onto the blocking rows'
hyperplanes (g_k e = 0), so those rows are never hit, and shot again. Each round adds the rows that block the
new ray, until j is hit first and alone, the projection vanishes (j lies in the span of its blockers within
the flat: undecided here) or _MAX_BLOCKED rows block it. Moving the origin towards row j is what lets most
rows through: from x0 alone a quarter of the rows that rays certify needed more than 512 blockers.
Every certificate is the directed rays' one, a first hit alone among all rows not found redundant, checked on
the ray actually shot with the slacks at its origin (tracked through the moves, with a bound on their
round-off). Work: one n x d x b product per round for a batch of b rows (dense, BLAS 3), against one LP over
P per row for Clarkson's step.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

_SLOTS = 48  # rows bent at a time (their rays are one n x slots block per round); a finished row's slot is refilled
_WIDE_SLOTS = 192  # ... on flats with n x d over _WIDE_FROM, where a wider product costs less per ray
_WIDE_FROM = 10_000_000
_ROUNDS = 40  # bends per row at most
_PER_ROUND = 16  # blockers added per bend at most
_MAX_BLOCKED = 512  # blocking rows per row at most (an orthonormal basis of their images, grown as needed)
_RATE_ROUNDS = 8  # rounds over which the certification rate is judged
_DENSE_IMAGES = 20_000_000  # alive rows x d up to which their images g N are formed once (160 MB)
_STEP = 0.9  # a blocked ray's origin moves this fraction of the way to its first hit
_SLACK_ROUNDOFF = 1e-13  # relative round-off allowed for in slacks tracked through the moves (each ~1e-16)
_RATE_FLOOR = 1e-12  # the error allowed for in a computed rate g e (|g| = 1, |e| <= 1): rows approached slower
# than this count as approached at this rate
_VANISH = 1e-9  # a bent direction shorter than this times the first one: the row is left undecided


class _Slots:
    """The rows being bent: per slot the row, its normal in the flat's coordinates (p), the current direction
    (u), an orthonormal basis of its blockers' images (W[:r]) and the bends so far."""

    def __init__(self, slots: int, d: int) -> None:
        self.row = np.full(slots, -1)
        self.p = np.zeros((slots, d))
        self.u = np.zeros((slots, d))
        self.W = [np.zeros((16, d)) for _ in range(slots)]  # grown by doubling (most rows need a few)
        self.r = np.zeros(slots, dtype=int)
        self.rounds = np.zeros(slots, dtype=int)

    def fill(self, k: int, row: int, p: np.ndarray) -> None:
        self.row[k], self.p[k], self.u[k], self.r[k], self.rounds[k] = row, p, p, 0, 0
        if self.W[k].shape[0] > 64:  # a row that needed many blockers leaves no big buffer behind
            self.W[k] = np.zeros((16, p.size))

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
        self.r[k] = r + new.shape[0]
        self.u[k] -= (new @ self.u[k]) @ new  # u = p minus its projection on W's span; new is orthogonal to W
        return bool(np.linalg.norm(self.u[k]) > _VANISH * np.linalg.norm(self.p[k]))


def bent_rays(
    G: sp.csr_matrix,
    basis: np.ndarray,
    rows: np.ndarray,
    alive: np.ndarray,
    s0: np.ndarray,
    min_rate: float = 0.0,
) -> dict[int, float]:
    """Facets among ``rows`` (rows of G) hit first and alone by a bent ray (module docstring): {row: a lower
    bound on its margin, (t2 - t1) g·d}. ``alive``: every row not found redundant (the rays must clear them
    all); ``s0``: slacks at x0 (> 0 on ``alive``). Stops early once the last _RATE_ROUNDS rounds certified
    rows at fewer than ``min_rate`` rows per CPU second."""
    import time

    if basis.shape[1] == 0 or rows.size == 0 or alive.size == 0 or np.min(s0[alive]) <= 0:
        return {}  # (x0 not strictly inside: the rays prove nothing)
    b = _Bender(G, basis, rows, alive, s0)
    done = [(time.process_time(), 0)]  # per round: CPU time, rows certified so far
    while np.any(b.sl.row >= 0):
        if len(done) > _RATE_ROUNDS:
            (t0, f0), (t1, f1) = done[-_RATE_ROUNDS - 1], done[-1]
            if f1 - f0 < min_rate * (t1 - t0):
                break
        b.round()
        done.append((time.process_time(), len(b.found)))
    return b.found


class _Bender:
    """The rays of the rows in the slots, shot and bent one round at a time."""

    def __init__(self, G: sp.csr_matrix, basis: np.ndarray, rows: np.ndarray, alive: np.ndarray, s0: np.ndarray):
        self.basis, self.alive, self.s = basis, alive, s0[alive]
        self.Ga = sp.csr_matrix(G[alive])
        # the rows' images in the flat's coordinates, formed once when small (else per use, from the sparse rows)
        self.GaN = np.asarray(self.Ga @ basis) if alive.size * basis.shape[1] <= _DENSE_IMAGES else None
        self.where = np.full(G.shape[0], -1)
        self.where[alive] = np.arange(alive.size)
        self.target = np.zeros(G.shape[0], dtype=bool)
        self.target[rows] = True
        self.queue = [int(j) for j in rows if self.where[j] >= 0][::-1]
        self.found: dict[int, float] = {}
        slots = _WIDE_SLOTS if basis.shape[0] * basis.shape[1] > _WIDE_FROM else _SLOTS
        self.sl = _Slots(slots, basis.shape[1])
        # per slot: its ray's origin x0 + basis z, the slacks there, and the magnitudes summed into them (their
        # round-off scale)
        self.z = np.zeros((slots, basis.shape[1]))
        self.slack = np.tile(self.s, (slots, 1))
        self.scale = self.slack.copy()
        self.travel = np.zeros(slots)  # sum of the steps: each moved the slacks by a rate known to _RATE_FLOOR
        for k in range(slots):
            self.refill(k)

    def refill(self, k: int) -> None:
        """Slot k takes the next row not found yet (or empties)."""
        self.sl.row[k] = -1
        self.slack[k] = self.scale[k] = self.s
        self.z[k], self.travel[k] = 0.0, 0.0
        while self.queue:
            j = self.queue.pop()
            if j not in self.found:
                self.sl.fill(k, j, self.images(np.array([self.where[j]]))[0])
                return

    def images(self, idx: np.ndarray) -> np.ndarray:
        """g N for the alive rows at positions ``idx``."""
        return self.GaN[idx] if self.GaN is not None else np.asarray(self.Ga[idx] @ self.basis)

    def roundoff(self, act: np.ndarray) -> np.ndarray:
        """A bound on the error of the tracked slacks of the slots ``act`` (slots x rows): the arithmetic's
        round-off on the magnitudes summed into them, and each step's rate error."""
        return _SLACK_ROUNDOFF * self.scale[act] + _RATE_FLOOR * self.travel[act][:, None]

    def round(self) -> None:
        """Shoot every slot's ray, keep the rows hit first and alone, bend the others around their blockers.
        Arrays are rays x rows: each ray's row is contiguous."""
        from ._clarkson import _RAY_TIE, _first_hits

        act = np.flatnonzero(self.sl.row >= 0)
        GD = np.ascontiguousarray(np.asarray(self.Ga @ (self.basis @ self.sl.u[act].T)).T)  # rates g e
        S, E = self.slack[act], self.roundoff(act)
        with np.errstate(divide="ignore", invalid="ignore"):
            T = np.where(GD > 1e-12, S / GD, np.inf)
        first, two, ok = _first_hits(T, by_ray=True)
        for c in np.flatnonzero(ok):  # every ray hitting one row first and alone certifies that row
            j, f = int(self.alive[first[c]]), int(first[c])
            if not self.target[j] or GD[c, f] <= _RATE_FLOOR:  # (not a facet decided before this stage)
                continue
            # the hit times allowing for the slacks' errors (E) and for the rates' (_RATE_FLOOR): j's latest,
            # every other row's earliest
            t1 = (S[c, f] + E[c, f]) / (GD[c, f] - _RATE_FLOOR)
            t_lo = (S[c] - E[c]) / (np.maximum(GD[c], 0.0) + _RATE_FLOOR)
            t_lo[f] = np.inf
            t2 = float(np.min(t_lo))
            if t2 > t1 * (1.0 + _RAY_TIE) + 1e-15:
                self.found[j] = max(self.found.get(j, 0.0), float((t2 - t1) * GD[c, f]))
        for i, k in enumerate(act.tolist()):
            self._bend(k, T[i], GD[i])

    def _bend(self, k: int, t: np.ndarray, gd: np.ndarray) -> None:
        """Slot k after its ray's hit times t (rates gd = G e): done (found, moving away, out of bends), or
        moved towards its blockers and bent."""
        from ._clarkson import _RAY_TIE

        sl = self.sl
        pj = int(self.where[sl.row[k]])
        tj = float(t[pj])
        sl.rounds[k] += 1
        if int(sl.row[k]) in self.found or not np.isfinite(tj) or sl.rounds[k] > _ROUNDS:
            self.refill(k)
            return
        blk = np.flatnonzero(t <= tj * (1.0 + _RAY_TIE) + 1e-15)
        blk = blk[blk != pj]
        if blk.size > _PER_ROUND:  # the earliest hits: the later ones may clear once the ray bends
            blk = blk[np.argpartition(t[blk], _PER_ROUND - 1)[:_PER_ROUND]]
        reach = (self.slack[k] - self.roundoff(np.array([k]))[0]) / (np.maximum(gd, 0.0) + 2 * _RATE_FLOOR)
        step = max(0.0, _STEP * float(np.min(reach)))  # every slack stays positive, allowing for the errors
        self.z[k] += step * sl.u[k]
        self.slack[k] -= step * gd
        self.scale[k] += step * np.abs(gd)
        self.travel[k] += step
        if blk.size == 0 or not sl.block(k, self.images(blk)):
            self.refill(k)
