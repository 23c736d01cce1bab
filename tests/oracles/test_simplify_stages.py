"""The LP-free stages of ``simplify``: neighbourhood LPs for redundant rows, bent rays for facets."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog
from test_simplify import _recheck_bound_multipliers, _vertex_network

from oracles import Polytope, simplify
from oracles._bent_rays import bent_rays
from oracles._clarkson import expanded_multipliers


def _max_without(G: np.ndarray, h: np.ndarray, basis: np.ndarray, x0: np.ndarray, j: int) -> float:
    """max g_j x over {G x <= h without row j} on the flat x = x0 + basis z (inf when unbounded)."""
    keep = np.arange(G.shape[0]) != j
    r = linprog(
        -(G[j] @ basis),
        A_ub=G[keep] @ basis,
        b_ub=h[keep] - G[keep] @ x0,
        bounds=[(None, None)] * basis.shape[1],
        method="highs",
    )
    if r.status == 3:
        return np.inf
    assert r.status == 0, r.message
    return float(-r.fun + G[j] @ x0)


def _random_polytope(seed: int, n: int, m: int, flat: bool) -> tuple[np.ndarray, ...]:
    """m random unit rows around x0, slacks in [0.1, 2], on an n-flat of R^(n+2) (basis N) or in R^n."""
    rng = np.random.default_rng(seed)
    N = np.linalg.qr(rng.standard_normal((n + 2, n)))[0] if flat else np.eye(n)
    G = rng.standard_normal((m, N.shape[0]))
    G /= np.linalg.norm(G, axis=1, keepdims=True)
    x0 = N @ rng.uniform(-0.2, 0.2, n)
    return N, G, G @ x0 + rng.uniform(0.1, 2.0, m), x0


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 6), m=st.integers(3, 120), flat=st.booleans(), wide=st.booleans())
def test_bent_rays_certify_only_facets_with_valid_margins(seed: int, n: int, m: int, flat: bool, wide: bool) -> None:
    """Every row a bent ray certifies is a facet: without it the polytope reaches past it by at least the
    reported margin (an LP over the other rows); some row is always certified (x0 is strictly inside).
    ``wide``: with the slots of a large flat (more rays per round than rows here)."""
    import oracles._bent_rays as br

    N, G, h, x0 = _random_polytope(seed, n, m, flat)
    rows = np.arange(m)
    default = br._WIDE_FROM
    br._WIDE_FROM = 0 if wide else default
    try:
        found = bent_rays(sp.csr_matrix(G), N, rows, rows, h - G @ x0)
    finally:
        br._WIDE_FROM = default
    assert found
    for j, margin in found.items():
        assert margin > 0
        assert _max_without(G, h, N, x0, j) >= h[j] + margin * (1 - 1e-6) - 1e-9


def test_a_blocked_directed_ray_is_bent_onto_its_facet() -> None:
    """The square [-1, 1]^2 cut by x + y <= 1.2, seen from x0 = (0.5, 0): the directed ray of y <= 1 meets the
    cut first; bent parallel to the cut it reaches y = 1 first and alone."""
    G = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0], [1.0, 1.0]])
    h = np.array([1.0, 1.0, 1.0, 1.0, 1.2])
    G[4] /= np.sqrt(2.0)
    h[4] /= np.sqrt(2.0)
    x0 = np.array([0.5, 0.0])
    s0 = h - G @ x0
    d = G[2]  # the directed ray of y <= 1 (the flat is the plane)
    t = np.where(G @ d > 0, s0 / np.where(G @ d > 0, G @ d, 1.0), np.inf)
    assert np.argmin(t) == 4  # blocked by the cut
    found = bent_rays(sp.csr_matrix(G), np.eye(2), np.array([2]), np.arange(5), s0)
    assert set(found) == {2}  # (the cut is hit first, alone, by the directed ray, but was not aimed at)
    assert _max_without(G, h, np.eye(2), x0, 2) >= h[2] + found[2] * (1 - 1e-9)


def test_expanded_multipliers_name_kept_rows_only() -> None:
    """Row 5 was implied by rows 6 and 1; row 6, which left later, by rows 1 and 2: 5's certificate is
    rewritten on the kept rows 1 and 2 with the products of the multipliers (and 6's stays as it was)."""
    kept = np.zeros(8, dtype=bool)
    kept[[1, 2]] = True
    store = {5: (np.array([6, 1]), np.array([2.0, 1.0])), 6: (np.array([1, 2]), np.array([0.5, 3.0]))}
    Y = expanded_multipliers(store, kept).tocsr()

    def row(j: int) -> dict[int, float]:
        a, b = Y.indptr[j], Y.indptr[j + 1]
        return dict(zip(Y.indices[a:b].tolist(), Y.data[a:b].tolist()))

    assert row(5) == pytest.approx({1: 2.0 * 0.5 + 1.0, 2: 2.0 * 3.0})
    assert row(6) == pytest.approx({1: 0.5, 2: 3.0})


def test_a_certificate_naming_its_own_row_is_refused() -> None:
    """A certificate names only rows present when it was found, never its own row: a store that breaks this
    raises instead of being resolved into a wrong combination."""
    kept = np.zeros(4, dtype=bool)
    kept[2] = True
    store = {0: (np.array([1]), np.array([1.0])), 1: (np.array([1, 2]), np.array([0.5, 1.0]))}
    with pytest.raises(ValueError, match="names the row itself"):
        expanded_multipliers(store, kept)


def _kept_bounds(s: object) -> set[tuple[str, int]]:
    return {("upper", int(j)) for j in s.kept_upper} | {("lower", int(j)) for j in s.kept_lower}  # type: ignore[attr-defined]


def _ties(s: object) -> set[tuple[str, int]]:
    return {(t.kind, int(t.index)) for t in s.near_ties}  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lp_free_stages_change_no_verdict_and_their_certificates_recheck(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On sparse networks the neighbourhood LPs and the bent rays decide most rows; the kept rows are the
    ones found with both stages switched off (near ties aside), and every redundant bound's multipliers name
    kept rows only and re-check: g = Σ y_k g_k + (equalities, fixed coordinates), h >= Σ y_k h_k + ..."""
    # a small network: neighbourhoods are most of it, and an LP over P is cheap: the stages run regardless
    monkeypatch.setattr("oracles._local_redundancy._MAX_SHARE", 0.9)
    monkeypatch.setattr("oracles._clarkson.WIDER_SHARE", 0.95)
    monkeypatch.setattr("oracles._clarkson._LOCAL_ADVANTAGE", 1e-9)
    monkeypatch.setattr("oracles._clarkson._BENT_SHARE", 0.0)
    monkeypatch.setattr("oracles._clarkson._RAYS_FROM", 0.0)  # the bent rays run however cheap the LPs are
    P = _vertex_network(seed)
    s = simplify(P, bounds="drop")  # (with "tighten" bounds are left to Clarkson's LPs, whose points are exact)
    by = s.info["decided_by"]
    assert isinstance(by, dict) and by.get("bent ray", 0) > 0 and int(s.info["local"]) > 0  # type: ignore[call-overload]
    with monkeypatch.context() as mp:
        mp.setattr("oracles._clarkson.bent_rays", lambda *a, **k: {})
        mp.setattr("oracles._clarkson.local_redundant", lambda *a, **k: type("R", (), {"rows": [], "n_lps": 0})())
        base = simplify(P, bounds="drop")
    ties = _ties(s) | _ties(base)
    assert _kept_bounds(s) - ties == _kept_bounds(base) - ties
    assert _recheck_bound_multipliers(P, s, kept_only=True) > 0


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(3, 8), m=st.integers(60, 240), flat=st.booleans())
def test_moved_origins_stay_strictly_inside_with_their_tracked_slacks(seed: int, n: int, m: int, flat: bool) -> None:
    """A blocked ray's origin moves towards its first hit: after every round each slot's origin x0 + N z is
    strictly inside every row, and the slacks tracked through the moves are h - G(x0 + N z) within the
    round-off bound the certificates allow for. (Many rows around a small box: most directed rays are
    blocked.)"""
    from oracles._bent_rays import _Bender

    N, G, h, x0 = _random_polytope(seed, n, m, flat)
    rows = np.arange(m)
    b = _Bender(sp.csr_matrix(G), N, rows, rows, h - G @ x0)
    moved = 0
    for _ in range(12):
        if not np.any(b.sl.row >= 0):
            break
        b.round()
        act = np.flatnonzero(b.sl.row >= 0)
        exact = h[:, None] - G @ (x0[:, None] + N @ b.z[act].T)  # rows x active slots
        assert np.all(exact > 0)
        assert np.all(np.abs(b.slack[act] - exact.T) <= b.roundoff(act))
        moved += int(np.count_nonzero(np.any(b.z[act] != 0, axis=1)))
    assert moved > 0  # some ray was blocked and moved (else the test shows nothing)


@pytest.mark.parametrize(
    "forced, counter",
    [
        ({"_STALL_FLOOR": 0.0, "_STALL_FACTOR": 1e-12}, "stalled"),  # every warm LP after four is stopped
        ({"_REBASE_AFTER": 0}, "cold_restarts"),  # every LP after a kept row starts cold
    ],
)
def test_cold_solves_leave_every_verdict_as_the_warm_ones(monkeypatch, forced: dict, counter: str) -> None:
    """A warm LP over its stall limit is stopped and solved cold (presolve on), as is an LP after more than
    _REBASE_AFTER rows were kept since the last solve; the cold optimum becomes the next warm start. Forced to
    happen all the time, the counter shows it did, and every verdict is the one the plain warm solves give."""
    P = _vertex_network(3)
    base = simplify(P, bounds="drop")
    for name, value in forced.items():
        monkeypatch.setattr(f"oracles._clarkson.{name}", value)
    s = simplify(P, bounds="drop")
    assert int(s.info[counter]) > int(base.info[counter])  # type: ignore[call-overload]
    assert int(base.info["stalled"]) == 0 and int(s.info["cold_restarts"]) >= int(s.info["stalled"])  # type: ignore[call-overload]
    ties = _ties(s) | _ties(base)
    assert _kept_bounds(s) - ties == _kept_bounds(base) - ties and s.dim == base.dim
    assert np.array_equal(s.fixed_variables, base.fixed_variables)
    assert _recheck_bound_multipliers(P, s, kept_only=True) > 0


def _capped_network(seed: int) -> Polytope:
    """A network whose exchanges carry at most 10 units each way: its ±1000 bounds are redundant by far."""
    P = _vertex_network(seed)
    lb, ub = P.lb.copy(), P.ub.copy()
    lb[-8:], ub[-8:] = -10.0, 10.0
    return Polytope(P.A, P.b, P.A_eq, P.b_eq, lb=lb, ub=ub)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bounds_certified_in_groups_recheck_and_change_no_verdict(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With bounds dropped, one LP over the kept rows certifies many bounds (a group's summed width fits in
    each member's range): fewer LPs, the same kept rows as one LP per bound (near ties aside), the same body,
    and each grouped bound's multipliers name kept rows only and re-check."""
    P = _capped_network(seed)
    s = simplify(P, bounds="drop")
    assert int(s.info["group_rows"]) > 2 * int(s.info["group_lps"]) > 0  # type: ignore[call-overload]
    with monkeypatch.context() as mp:
        mp.setattr("oracles._group_redundancy.BoundGroups.step", lambda *a, **k: False)
        alone = simplify(P, bounds="drop")
    assert int(alone.info["group_rows"]) == 0 and alone.n_lps > s.n_lps  # type: ignore[call-overload]
    ties = _ties(s) | _ties(alone)
    assert _kept_bounds(s) - ties == _kept_bounds(alone) - ties
    assert _recheck_bound_multipliers(P, s, kept_only=True) >= int(s.info["group_rows"])  # type: ignore[call-overload]
    rng = np.random.default_rng(seed)
    Q = s.polytope
    for _ in range(6):
        c = rng.standard_normal(P.dim)
        r0 = linprog(-c, A_eq=P.A_eq, b_eq=P.b_eq, bounds=np.c_[P.lb, P.ub], method="highs")
        r1 = linprog(-c, A_eq=Q.A_eq, b_eq=Q.b_eq, bounds=np.c_[Q.lb, Q.ub], method="highs")
        assert r0.status == r1.status == 0 and r0.fun == pytest.approx(r1.fun, rel=1e-9, abs=1e-7)


def test_a_group_whose_widths_overflow_certifies_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """0 <= x_k <= 1 with Σ x_k = 3 (k = 0..7): every bound is a facet. With the rays off, LPs keep the lower
    bounds first (nearer the interior point); a group of upper bounds then has width 3, over each range of
    1, and the group LPs that run certify none of them."""
    monkeypatch.setattr("oracles._clarkson.random_rays", lambda *a, **k: ({}, 0))
    monkeypatch.setattr("oracles._clarkson.directed_rays", lambda *a, **k: {})
    n = 8
    P = Polytope(np.zeros((0, n)), np.zeros(0), np.ones((1, n)), np.array([3.0]), lb=np.zeros(n), ub=np.ones(n))
    s = simplify(P, bounds="drop")
    assert s.kept_upper.tolist() == list(range(n)) and s.kept_lower.tolist() == list(range(n))
    assert int(s.info["group_lps"]) > 0 and int(s.info["group_rows"]) == 0  # type: ignore[call-overload]


def _paired_network(p: int) -> Polytope:
    """p pairs x_v = x_w with 0 <= x_w <= 1000, -1000 <= x_v <= 1000 and the row Σ x_w <= 20: on the flat the
    lower bound of x_v is a copy of x_w >= 0 (parallel, farther from x0), so it is decided without a value."""
    n = 2 * p
    E = np.zeros((p, n))
    E[np.arange(p), 2 * np.arange(p)], E[np.arange(p), 2 * np.arange(p) + 1] = 1.0, -1.0
    A = np.zeros((1, n))
    A[0, 1::2] = 1.0
    lb = np.tile([-1000.0, 0.0], p)
    return Polytope(A, np.array([20.0]), E, np.zeros(p), lb=lb, ub=np.full(n, 1000.0))


def test_a_copy_opposite_bound_gives_the_group_its_certificate_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """x_v <= 1000 is grouped when its opposite row x_v >= -1000 was decided as a copy of x_w >= 0: the
    copy's certificate at x0 bounds -x_v by 0, not by 1000 (with 1000 no two members fit in a range of 2000).
    Far fewer LPs than one per bound, the same kept rows, multipliers that re-check."""
    p = 24
    P = _paired_network(p)
    s = simplify(P, bounds="drop")
    with monkeypatch.context() as mp:
        mp.setattr("oracles._group_redundancy.BoundGroups.step", lambda *a, **k: False)
        alone = simplify(P, bounds="drop")
    assert int(s.info["group_rows"]) >= p // 2  # type: ignore[call-overload]
    assert alone.n_lps - s.n_lps >= p // 2
    assert _kept_bounds(s) == _kept_bounds(alone) == {("lower", 2 * k + 1) for k in range(p)}
    assert s.kept.tolist() == [0]
    assert _recheck_bound_multipliers(P, s, kept_only=True) >= int(s.info["group_rows"])  # type: ignore[call-overload]
