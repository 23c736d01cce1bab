"""(Private.) Many redundant bounds certified by one LP over the kept rows.

For bound rows g_k x <= h_k (g_k = ±e_v, unit) whose opposite bound is decided (kept, or redundant with its
own certificate: -g_k x <= u_k holds on the kept rows), one LP V = max Σ_{k∈S} g_k x over the kept rows gives,
for every j in a group S,

    g_j x = Σ_S g_k x + Σ_{S\\j} (-g_k x) <= V + Σ_{S\\j} u_k = T - u_j,     T = V + Σ_S u_k,

so j is redundant when T - u_j <= h_j: the group's summed width T fits within j's range h_j + u_j. Its
multipliers are the LP's on the kept rows plus each opposite row of S \\ j, written on rows present (an
opposite row counts only when its certificate rewrites on rows still kept or undecided: no cycle can arise).
The group's rows are relaxed by _RELAX in the LP (so that it is bounded); when its point leaves one of them,
the LP is a Clarkson step instead: the ray from x0 to the point keeps the row it hits first. Groups are
filled with the rows of smallest width seen (at earlier group LPs' points, and at every point of P the run
met, x0 included: a lower bound on each member's width, free); a group that certifies nothing marks its
widest member, tested alone after _TRIES marks. The values are upper bounds, not the maxima: the
groups run where redundant bounds are dropped, not tightened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ._clarkson import KeptLP, Outcome

GROUP_SIZE = 16  # rows per group LP (T grows with the group; 8-16 certify e_coli_core's bounds in fewest LPs)
_FILL = 0.9  # a group's widths seen so far sum to at most this share of its smallest range
_TRIES = 2  # a row that was a failed group's widest member this many times is tested alone
_FAILS = 8  # groups stop once this many certified nothing and these outnumber twice the ones that did


class BoundGroups:
    """The group tests of one Clarkson run: what each row's width was seen to be, which rows go alone."""

    def __init__(self, lp: KeptLP, relax: float) -> None:
        pb = lp.pb
        self.lp = lp
        self.relax = relax
        self.peeled = np.zeros(pb.G.shape[0], dtype=int)  # times a row was a failed group's widest member
        self.seen = np.zeros(pb.G.shape[0])  # each row's largest width (g_k x + u_k) seen at a group LP's point
        self.opposite = np.full(pb.G.shape[0], -1)
        b = np.flatnonzero(pb.kind != 0)
        self.opposite[b] = lp.bound_row[(pb.kind[b] > 0).astype(int), pb.var[b]]
        # per removed row: its combination on rows present, their indices, and g_k x0 + Σ y_r s0_r (the bound
        # on g_k x that the combination gives: g_k x - Σ y_r g_r x is constant on the flat)
        self._memo: dict[int, tuple[dict[int, float] | None, np.ndarray, float]] = {}
        # rows whose certificate was seen to rewrite on rows present (a member whose opposite row no longer
        # does is dropped when its group is formed, where each rewriting is checked again)
        self.rewrites = np.zeros(pb.G.shape[0], dtype=bool)
        # memo entries already found valid during the current step (nothing is decided between a step's
        # eligibility test, its u and its group: one check each per step)
        self._step = 0
        self._valid: dict[int, int] = {}
        self.n_lps = 0
        self.n_rows = 0
        self.n_failed = 0  # group LPs inside P that certified nothing
        self.n_certifying = 0

    def _eligible(self, out: Outcome, rows: np.ndarray, decided: np.ndarray) -> np.ndarray:
        """Rows whose opposite bound is decided: kept, or redundant with a certificate that rewrites, through
        rows removed before it, on rows still present (kept or undecided): a group certificate naming those
        respects the rule that a certificate names only rows present when it is found (no cycle)."""
        o = self.opposite[rows]
        ok = (o >= 0) & (self.peeled[rows] < _TRIES)
        ok[ok] = decided[o[ok]]
        for a in np.flatnonzero(ok & ~out.kept[np.maximum(o, 0)] & ~self.rewrites[np.maximum(o, 0)]):
            ok[a] = self._rewrite(out, int(o[a]), decided)
        return rows[ok]

    def _eligible_row(self, out: Outcome, i: int, decided: np.ndarray) -> bool:
        """``_eligible`` for one row, on scalars (it runs once per Clarkson step)."""
        o = int(self.opposite[i])
        if o < 0 or self.peeled[i] >= _TRIES or not decided[o]:
            return False
        return bool(out.kept[o] or self.rewrites[o] or self._rewrite(out, o, decided))

    def _rewrite(self, out: Outcome, o: int, decided: np.ndarray) -> bool:
        """Whether removed row o's certificate rewrites on rows present (remembered in ``rewrites``)."""
        self.rewrites[o] = self._on_present(out, o, decided) is not None
        return bool(self.rewrites[o])

    def _on_present(self, out: Outcome, k: int, decided: np.ndarray) -> dict[int, float] | None:
        """Row k as a combination of rows present (kept or undecided; {row: multiplier}, itself when present),
        rewriting the certificates of removed rows it names; None when one has no certificate. Memoised while
        every row a combination names is still present."""
        if out.kept[k] or not decided[k]:
            return {k: 1.0}
        hit = self._memo.get(k)
        if hit is not None:
            y, names, _ = hit
            if y is None or self._valid.get(k) == self._step or np.all(out.kept[names] | ~decided[names]):
                self._valid[k] = self._step
                return y
        store = out.info.get("_mult", {})
        assert isinstance(store, dict)
        self._memo[k] = (None, np.zeros(0, dtype=int), np.inf)  # (a cycle, were there one, ends here)
        if k not in store:
            return None
        acc: dict[int, float] = {}
        for r, a in zip(store[k][0].tolist(), store[k][1].tolist()):
            sub = self._on_present(out, r, decided) if r != k else None
            if sub is None:
                return None
            for t, b in sub.items():
                acc[t] = acc.get(t, 0.0) + a * b
        names, pb = np.fromiter(acc, dtype=int, count=len(acc)), self.lp.pb
        w = np.fromiter(acc.values(), dtype=float, count=len(acc))
        self._memo[k] = (acc, names, pb.h[k] - pb.s0[k] + float(w @ pb.s0[names]))
        self._valid[k] = self._step
        return acc

    def _u(self, out: Outcome, rows: np.ndarray, decided: np.ndarray) -> np.ndarray:
        """u_k: the bound -g_k x <= u_k its decided opposite row o gives: h_o when kept, its value when
        redundant, or, without a value (a copy of a row parallel on the flat), its certificate y on rows
        present evaluated at x0: g_o x0 + Σ y_r s0_r (g_o x - Σ y_r g_r x is constant on the flat)."""
        pb = self.lp.pb
        o = self.opposite[rows]
        v = out.value[o]
        u = np.where(out.kept[o] | ~np.isfinite(v), pb.h[o], v)
        for a in np.flatnonzero(~out.kept[o] & ~np.isfinite(v) & decided[o]):
            if self._on_present(out, int(o[a]), decided) is not None:
                u[a] = min(u[a], self._memo[int(o[a])][2])
        return u

    def _select(
        self, out: Outcome, open_: np.ndarray, decided: np.ndarray
    ) -> tuple[np.ndarray, list[dict[int, float]], np.ndarray]:
        """The group: eligible open rows, smallest width seen first, while the widths seen sum to under _FILL
        of the smallest range in it; members whose opposite row's certificate names another member left out.
        Also each member's opposite row on rows present, and its u."""
        pb = self.lp.pb
        E = self._eligible(out, open_, decided)
        u = self._u(out, E, decided)
        rng_ = pb.h[E] + u
        at_points = np.where(pb.kind[E] > 0, self.lp.hi_seen[pb.var[E]], -self.lp.lo_seen[pb.var[E]])
        w = np.maximum(self.seen[E], at_points + u)  # widths reached at points of P seen (x0 too)
        pick: list[int] = []  # positions in E
        total, low = 0.0, np.inf
        for a in np.lexsort((-rng_, w)).tolist():
            if len(pick) == GROUP_SIZE:
                break
            if pick and total + w[a] > _FILL * min(low, rng_[a]):
                continue
            pick.append(a)
            total, low = total + w[a], min(low, rng_[a])
        S = E[pick]
        members = set(S.tolist())
        found = [self._on_present(out, int(o), decided) for o in self.opposite[S]]
        clear = np.array([y is not None and not (set(y) & members) for y in found], dtype=bool)
        return S[clear], [y for y, c in zip(found, clear) if y is not None and c], u[pick][clear]

    def _certify(
        self,
        out: Outcome,
        rows: np.ndarray,
        value: np.ndarray,
        terms: list[dict[int, float]],
        ok: np.ndarray,
        lp_mult: tuple[np.ndarray, np.ndarray],
        decided: np.ndarray,
    ) -> None:
        """Mark ``rows`` (the members ``ok`` of the group whose opposite rows are ``terms``) redundant with value
        ``value``; multipliers: the LP's (``lp_mult``) and the opposite rows of the other members."""
        pb = self.lp.pb
        idx, vals = lp_mult
        sizes = [len(y) for y in terms]
        names = np.fromiter((k for y in terms for k in y), dtype=int, count=sum(sizes))
        cols, at = np.unique(np.concatenate([idx, names]), return_inverse=True)
        D = np.zeros((len(terms), cols.size))  # row a: member a's opposite row on rows present
        D[np.repeat(np.arange(len(terms)), sizes), at[idx.size :]] = np.fromiter(
            (a for y in terms for a in y.values()), dtype=float, count=names.size
        )
        base = D.sum(axis=0)
        base[at[: idx.size]] += vals
        Y = base - D[ok]  # row a: the LP's multipliers and the opposite rows of the other members
        Y[Y <= 1e-12 * max(1.0, float(np.max(np.abs(Y))))] = 0.0  # (exact cancellations, up to round-off)
        store = out.info.setdefault("_mult", {})
        assert isinstance(store, dict)
        for a, j in enumerate(rows.tolist()):
            out.kept[j], decided[j], out.how[j] = False, True, "redundant"
            out.value[j], out.margin[j] = value[a], value[a] - pb.h[j]
            nz = Y[a] > 0
            store[j] = (cols[nz], Y[a, nz])

    def step(
        self,
        out: Outcome,
        i: int,
        open_: np.ndarray,
        decided: np.ndarray,
        cand_mask: np.ndarray,
        s0: np.ndarray,
        rho: np.ndarray,
        recheck: set[int],
    ) -> bool:
        """One group LP, when row i is eligible, over the eligible open rows: those of smallest width seen first
        (``_select``), while the widths seen sum to under _FILL of the smallest range in the group.
        False (nothing done) when i is not eligible or no group of two forms: the caller runs i's own step."""
        from ._clarkson import keep_hits, multipliers

        lp, pb = self.lp, self.lp.pb
        self._step += 1
        if self.n_failed >= _FAILS and self.n_failed > 2 * self.n_certifying:
            return False  # the bounds are as wide as the fluxes go: groups certify nothing here
        if not self._eligible_row(out, i, decided):
            return False
        S, terms, u = self._select(out, open_, decided)
        if S.size < 2:
            return False
        lp.set_rows(S, pb.h[S] + self.relax)
        try:
            x, sol = lp.maximize_rows(S)
        finally:
            lp.set_rows(S, None)
        self.n_lps += 1
        gx = pb.kind[S] * x[pb.var[S]]
        if np.any(gx > pb.h[S] + rho[S]):  # outside P: a Clarkson step
            return keep_hits(out, lp, x, decided, cand_mask, s0, recheck)
        share = gx + u  # each member's width at the LP's point (>= 0 up to round-off)
        value = float(np.sum(share)) - u
        ok = value <= pb.h[S] - pb.tol  # clear of a tie: a borderline row is left to its own LP
        if ok.any():
            self._certify(out, S[ok], value[ok], terms, ok, multipliers(lp, sol, out.kept), decided)
        self.n_rows += int(np.sum(ok))
        np.maximum.at(self.seen, S, share)
        if not ok.any():
            self.peeled[S[np.argmax(share)]] += 1  # progress: the widest member leaves groups after _TRIES
            self.n_failed += 1
        else:
            self.n_certifying += 1
        return True
