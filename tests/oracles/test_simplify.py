"""simplify: minimal H-representations with certificates, checked against LPs, constructions and exact cdd."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles import Polytope, Simplified, Transformed, simplify, solvers

FIXTURES = Path(__file__).parent / "fixtures" / "simplify_exact.json"


def _max(P: Polytope, c: np.ndarray) -> float:
    return -solvers.solve_lp(
        -c, P.A, P.b, P.A_eq if P.A_eq.shape[0] else None, P.b_eq if P.A_eq.shape[0] else None, P.bounds
    ).value


def _random_polytope(seed: int, n: int, m: int, k_red: int) -> tuple[Polytope, np.ndarray]:
    """m random rows around a point, a box, and k_red rows implied by construction (positive combinations
    of others, pushed out by a positive slack): returns P and the indices of the constructed redundant rows."""
    rng = np.random.default_rng(seed)
    x0 = rng.standard_normal(n)
    A = rng.standard_normal((m, n))
    b = A @ x0 + rng.uniform(0.2, 1.0, m)
    A = np.vstack([A, np.eye(n), -np.eye(n)])
    b = np.concatenate([b, x0 + 3.0, 3.0 - x0])
    Y = rng.uniform(0.0, 1.0, (k_red, A.shape[0])) * (rng.uniform(size=(k_red, A.shape[0])) < 0.3)
    Y[:, 0] += 0.5
    R, r = Y @ A, Y @ b + rng.uniform(0.01, 1.0, k_red) * np.linalg.norm(Y @ A, axis=1)
    order = rng.permutation(A.shape[0] + k_red)
    AA, bb = np.vstack([A, R])[order], np.concatenate([b, r])[order]
    constructed = np.flatnonzero(order >= A.shape[0])
    return Polytope(AA, bb), constructed


def _same_body(P: Polytope, Q: Polytope, rng: np.random.Generator, k: int = 12) -> None:
    for _ in range(k):
        c = rng.standard_normal(P.dim)
        assert _max(P, c) == pytest.approx(_max(Q, c), abs=1e-7, rel=1e-7)


def test_square_with_redundant_rows_and_result_api() -> None:
    A = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0], [1.0, 1.0], [2.0, 0.0]])
    s = simplify(Polytope(A, np.array([1.0, 1.0, 1.0, 1.0, 5.0, 2.0])))
    assert isinstance(s, Simplified)
    assert s.redundant.tolist() == [4, 5] and s.kept.tolist() == [0, 1, 2, 3] and s.dim == 2
    cert = s.certificate(4)
    assert cert["verdict"] == "redundant" and cert["tol"] == s.tol
    # the multipliers re-check: â_4 = Σ y_k â_k and b̂_4 >= Σ y_k b̂_k (unit rows)
    y = cert["multipliers"]
    assert isinstance(y, dict)
    unit = A / np.linalg.norm(A, axis=1, keepdims=True)
    bn = np.array([1.0, 1.0, 1.0, 1.0, 5.0, 2.0]) / np.linalg.norm(A, axis=1)
    comb = sum(v * unit[k] for k, v in y.items())
    assert np.allclose(comb, unit[4]) and bn[4] >= sum(v * bn[k] for k, v in y.items())
    assert "redundant: 2 rows" in s.summary() and repr(s).startswith("Simplified(dim=2")
    with pytest.raises(ValueError, match="i must be"):
        s.certificate(9)
    with pytest.raises(ValueError, match="bounds"):
        simplify(Polytope(A, np.ones(6)), bounds="loose")
    with pytest.raises(TypeError, match="Polytope"):
        simplify(A)  # type: ignore[arg-type]


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 5), m=st.integers(3, 25), k=st.integers(1, 6))
def test_random_polytopes_keep_the_body_and_only_facets(seed: int, n: int, m: int, k: int) -> None:
    P, constructed = _random_polytope(seed, n, m, k)
    s = simplify(P, bounds="drop")
    assert set(constructed.tolist()) <= set(s.redundant.tolist())
    Q = s.polytope
    rng = np.random.default_rng(seed)
    _same_body(P, Q, rng)
    # removing any kept row changes the body: without it, its row's max exceeds its right-hand side
    for j, i in enumerate(s.kept):
        rest = np.delete(np.arange(Q.A.shape[0]), j)
        R = Polytope(Q.A[rest], Q.b[rest], dim=P.dim)
        a = P.A[i] / np.linalg.norm(P.A[i])
        try:
            v = _max(R, a)
        except Exception:  # unbounded without it: it is needed
            continue
        assert v - P.b[i] / np.linalg.norm(P.A[i]) > 1e-9
        assert s.margin[i] <= v - P.b[i] / np.linalg.norm(P.A[i]) + 1e-9  # the margin is a lower bound


def test_implicit_equalities_are_tight_and_transform_is_full_dimensional() -> None:
    rng = np.random.default_rng(3)
    n = 5
    x0 = rng.standard_normal(n)
    E = rng.standard_normal((2, n))
    A = np.vstack([rng.standard_normal((12, n)), E, -E, np.eye(n), -np.eye(n)])
    b = A @ x0 + np.concatenate([rng.uniform(0.3, 1.0, 12), np.zeros(4), np.full(2 * n, 2.0)])
    P = Polytope(A, b)
    s = simplify(P)
    assert s.equalities.tolist() == [12, 13, 14, 15] and s.dim == n - 2
    for i in s.equalities:
        assert _max(P, A[i]) == pytest.approx(b[i], abs=1e-8)
        assert -_max(P, -A[i]) == pytest.approx(b[i], abs=1e-8)
    t = s.transform()
    assert isinstance(t, Transformed) and t.dim == n - 2 and t.polytope.dim == n - 2
    z, r = t.center()
    assert r > 1e-3
    x = t.to_original(z)
    assert P.contains(x, tol=1e-8) and np.allclose(t.from_original(x), z)
    _same_body(P, s.polytope, rng)


@pytest.mark.parametrize("e", [4, -4, 8, -8])
def test_row_scaling_changes_no_verdict_and_no_centre(e: int) -> None:
    P, _ = _random_polytope(11, 4, 15, 4)
    f = np.where(np.arange(P.A.shape[0]) % 3 == 0, 10.0**e, 1.0)
    s0, s1 = simplify(P), simplify(Polytope(P.A * f[:, None], P.b * f))
    assert np.array_equal(s0.redundant, s1.redundant) and np.array_equal(s0.kept, s1.kept)
    assert np.array_equal(s0.equalities, s1.equalities)
    c0, r0 = s0.transform().center()
    c1, r1 = s1.transform().center()
    assert np.allclose(s0.transform().to_original(c0), s1.transform().to_original(c1), atol=1e-7)
    assert r0 == pytest.approx(r1, rel=1e-7)


def test_near_ties_are_flagged() -> None:
    slab = Polytope(np.vstack([np.eye(2), -np.eye(2)]), np.array([1.0 + 1e-12, 1.0, -1.0, 1.0]))  # 1 <= x <= 1+1e-12
    s = simplify(slab)
    assert s.equalities.tolist() == [0, 2]
    assert {(t.kind, t.index, t.verdict) for t in s.near_ties} == {("row", 0, "equality"), ("row", 2, "equality")}
    assert all(0 < t.value <= t.tol for t in s.near_ties)
    exact = simplify(Polytope(np.vstack([np.eye(2), -np.eye(2)]), np.array([1.0, 1.0, -1.0, 1.0])))
    assert exact.equalities.tolist() == [0, 2] and not exact.near_ties
    bound = simplify(Polytope(np.zeros((0, 2)), np.zeros(0), lb=[1.0, 0.0], ub=[1.0 + 1e-12, 1.0]))
    assert {(t.kind, t.verdict) for t in bound.near_ties} == {("lower", "equality"), ("upper", "equality")}
    box = np.vstack([np.eye(3), -np.eye(3)])
    sliver = simplify(Polytope(np.vstack([box, [[1.0, 1.0, 0.0]]]), np.concatenate([np.ones(6), [2.0 - 1e-9]])))
    assert 6 in sliver.kept.tolist()  # kept: P is unchanged
    assert [(t.index, t.verdict) for t in sliver.near_ties] == [(6, "kept")]


def test_duplicates_nearly_parallel_and_large_rhs() -> None:
    box = np.vstack([np.eye(3), -np.eye(3)])
    dup = simplify(
        Polytope(np.vstack([box, box[:2], 3.0 * box[2:4]]), np.concatenate([np.ones(6), np.ones(2), 3 * np.ones(2)]))
    )
    assert dup.kept.tolist() == [0, 1, 2, 3, 4, 5] and dup.redundant.tolist() == [6, 7, 8, 9]
    par = simplify(
        Polytope(
            np.vstack([box, [[1.0, 1e-6, 0.0], [1.0, -1e-6, 0.0], [1.0, 1e-6, 1e-6]]]),
            np.concatenate([np.ones(6), [1.0, 1.0, 1.0 + 3e-6]]),
        )
    )
    assert par.kept.tolist() == [1, 2, 3, 4, 5, 6, 7] and par.redundant.tolist() == [0, 8]
    big = simplify(
        Polytope(
            np.vstack([box, [[1.0, 1.0, 0.0], [2.0, 0.0, 0.0]]]), np.concatenate([np.full(6, 1e6), [1.5e6, 2.5e6]])
        )
    )
    assert big.kept.tolist() == [0, 1, 2, 3, 4, 5, 6] and big.redundant.tolist() == [7]


def test_sphere_700_rows_known_by_construction() -> None:
    rng = np.random.default_rng(5)
    U = rng.standard_normal((350, 5))
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    s = simplify(Polytope(np.vstack([U, U]), np.concatenate([np.ones(350), np.full(350, 1.001)])))
    assert s.kept.tolist() == list(range(350)) and s.redundant.tolist() == list(range(350, 700))
    assert s.n_lps <= 700 + 10  # Clarkson: about one LP per row at most


def _exact_cases() -> list[dict]:
    return json.loads(FIXTURES.read_text())["cases"]


def _key(a: np.ndarray, b: float) -> tuple[Fraction, ...]:
    vals = [Fraction(float(b)), *(Fraction(-float(v)) for v in a)]
    top = max(abs(v) for v in vals)
    return tuple(v / top for v in vals)


@pytest.mark.parametrize("case", _exact_cases(), ids=lambda c: c["name"])
def test_agrees_with_exact_cdd_or_flags_a_near_tie(case: dict) -> None:
    A = np.array([[float.fromhex(v) for v in r] for r in case["A"]])
    b = np.array([float.fromhex(v) for v in case["b"]])
    s = simplify(Polytope(A, b))
    tied = {t.index for t in s.near_ties if t.kind == "row"}
    ours_kept = {_key(A[i], b[i]) for i in s.kept}
    exact_kept = {_key(A[i], b[i]) for i in case["kept"]}
    if s.equalities.tolist() == case["equalities"]:
        assert ours_kept == exact_kept and len(s.kept) == len(case["kept"]) and s.dim == case["dim"]
    else:  # every row decided differently is reported as a near tie
        diff = set(s.equalities.tolist()) ^ set(case["equalities"])
        assert diff and diff <= tied


def test_fixtures_match_cdd_when_installed() -> None:
    cdd = pytest.importorskip("cdd.gmp", reason="pycddlib with gmp (the exact extra) is not installed")
    import cdd as cdd_base

    for case in _exact_cases()[:6]:
        rows = [
            [Fraction(float.fromhex(bi))] + [Fraction(-float.fromhex(v)) for v in a]
            for a, bi in zip(case["A"], case["b"])
        ]
        mat = cdd.matrix_from_array(rows, rep_type=cdd_base.RepType.INEQUALITY)
        lin, red, _ = cdd.matrix_canonicalize(mat)
        assert sorted(lin) == case["equalities"]
        assert sorted(set(range(len(rows))) - set(lin) - set(red)) == case["kept"]


def test_sparse_flux_network_bounds_tightened() -> None:
    # a small network: S v = 0 with bounds; v0 -> v1 -> (v2 | v3), v3 capped at 1, v4 blocked by a dead end
    S = sp.csr_matrix(np.array([[1.0, -1.0, 0.0, 0.0, 0.0], [0.0, 1.0, -1.0, -1.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0]]))
    lb, ub = np.array([0.0, 0.0, 0.0, 0.0, -5.0]), np.array([10.0, 1000.0, 4.0, 1.0, 5.0])
    P = Polytope(sp.csr_matrix((0, 5)), np.zeros(0), S, np.zeros(3), lb=lb, ub=ub)
    s = simplify(P)
    assert s.dim == 2 and 4 in s.fixed_variables.tolist()
    Q = s.polytope
    assert Q.is_sparse
    assert Q.ub[1] == pytest.approx(5.0) and Q.ub[0] == pytest.approx(5.0)  # v0 = v1 = v2 + v3 <= 5
    _same_body(P, Q, np.random.default_rng(0))
    drop = simplify(P, bounds="drop").polytope
    assert np.isinf(drop.ub[1]) and np.isinf(drop.ub[0])
    _same_body(P, drop, np.random.default_rng(1))
    t = s.transform()
    z = t.center()[0]
    assert P.contains(t.to_original(z), tol=1e-8)


def _network(seed: int, n: int, m: int) -> Polytope:
    rng = np.random.default_rng(seed)
    S = sp.random(m, n, density=3.0 / m, random_state=seed, data_rvs=lambda k: rng.choice([-2.0, -1.0, 1.0], k))
    lb = np.where(rng.uniform(size=n) < 0.3, -1000.0, 0.0)
    ub = np.where(rng.uniform(size=n) < 0.1, rng.uniform(1.0, 10.0, n), 1000.0)
    return Polytope(sp.csr_matrix((0, n)), np.zeros(0), sp.csr_matrix(S), np.zeros(m), lb=lb, ub=ub)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(8, 30), m=st.integers(3, 12))
def test_random_sparse_networks_keep_the_body(seed: int, n: int, m: int) -> None:
    P = _network(seed, n, m)
    s = simplify(P)
    Q = s.polytope
    rng = np.random.default_rng(seed)
    for _ in range(8):
        c = rng.standard_normal(n)
        assert _max(P, c) == pytest.approx(_max(Q, c), abs=1e-6, rel=1e-8)
    # a tightened bound is the extreme value of its variable over P
    for j in s.redundant_upper:
        if j not in s.fixed_variables:
            assert Q.ub[j] == pytest.approx(_max(P, np.eye(n)[j]), abs=1e-7)
    if s.dim:
        t = s.transform()
        assert t.dim == s.dim
        z, _ = t.center()
        assert P.contains(t.to_original(z), tol=1e-7)


def test_edge_cases_point_unbounded_zero_row_empty() -> None:
    point = simplify(Polytope(np.vstack([-np.eye(3), np.ones((1, 3))]), np.zeros(4)))
    assert point.dim == 0 and point.equalities.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="one point"):
        point.transform()
    unbounded = simplify(Polytope(np.array([[1.0, 0.0], [1.0, 1.0], [2.0, 0.0]]), np.array([1.0, 5.0, 3.0])))
    assert unbounded.kept.tolist() == [0, 1] and unbounded.redundant.tolist() == [2]
    square = np.vstack([np.eye(2), -np.eye(2)])
    zero = simplify(Polytope(np.vstack([np.zeros((1, 2)), square]), np.ones(5)))
    assert zero.redundant.tolist() == [0] and zero.kept.tolist() == [1, 2, 3, 4]
    from oracles import EmptyBodyError

    with pytest.raises(EmptyBodyError):
        simplify(Polytope(np.array([[1.0], [-1.0]]), np.array([0.0, -1.0])))


@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_a_facet_thinner_than_round_off_is_flagged_whatever_its_verdict(offset: float) -> None:
    """A corner of the unit square (moved by ``offset``) cut 5e-9 deep: a facet in exact arithmetic. The engine
    may keep it (a "kept" near tie) or call it redundant within its round-off allowance, but never silently:
    row 4 is a near tie either way, and the square's four sides are kept."""
    A = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0], [1.0, 1.0]])
    b = np.array([offset + 1, -offset, offset + 1, -offset, 2 * offset + 2 - 5e-9 * np.sqrt(2)])
    res = simplify(Polytope(A, b), tol=1e-7)
    assert set(range(4)) <= set(res.kept.tolist())
    ties = [t for t in res.near_ties if t.kind == "row" and t.index == 4]
    assert len(ties) == 1 and 0.0 < ties[0].value <= 1e-7
    assert ties[0].verdict == ("redundant" if 4 in res.redundant.tolist() else "kept")


def test_facets_found_by_rays_need_no_lp_and_tightened_values_are_exact() -> None:
    # a cube cut by a redundant row: from the centre each facet is hit first, alone, by its own directed ray,
    # so only the redundant row needs an LP (the implicit-equality LPs aside)
    n = 4
    A = np.vstack([np.eye(n), -np.eye(n), np.ones((1, n))])
    s = simplify(Polytope(A, np.concatenate([np.ones(2 * n), [2.0 * n]])))
    assert s.kept.tolist() == list(range(2 * n)) and s.redundant.tolist() == [2 * n]
    assert s.n_lps - s.implicit.n_solves == 1
    decided_by = s.info["decided_by"]
    assert isinstance(decided_by, dict) and set(decided_by) <= {"random ray", "directed ray", "redundant"}
    # a flux network: every tightened bound (some taken from points of P seen, without their own LP) is the
    # maximum of its variable over P
    P = _network(3, 40, 14)
    t = simplify(P)
    for j in t.redundant_upper:
        if j not in t.fixed_variables:
            assert t.polytope.ub[j] == pytest.approx(_max(P, np.eye(40)[j]), abs=1e-7)
    for j in t.redundant_lower:
        if j not in t.fixed_variables:
            assert t.polytope.lb[j] == pytest.approx(-_max(P, -np.eye(40)[j]), abs=1e-7)


def _unit_row(P: Polytope, k: int) -> tuple[np.ndarray, float]:
    """Row k of L = [rows of A; x_j <= ub_j; -x_j <= -lb_j] as (g, h), scaled to a unit normal."""
    m, n = P.A.shape[0], P.dim
    if k < m:
        a = np.asarray(P.A[[k]].toarray() if sp.issparse(P.A) else P.A[k]).ravel()
        return a / np.linalg.norm(a), float(P.b[k]) / float(np.linalg.norm(a))
    j, up = (k - m, True) if k < m + n else (k - m - n, False)
    g = np.zeros(n)
    g[j] = 1.0 if up else -1.0
    return g, float(P.ub[j] if up else -P.lb[j])


def _without(Q: Polytope, k: int) -> Polytope:
    """Q with its row or bound k of L removed."""
    m = Q.A.shape[0]
    lb, ub, keep = Q.lb.copy(), Q.ub.copy(), np.ones(m, dtype=bool)
    if k < m:
        keep[k] = False
    elif k < m + Q.dim:
        ub[k - m] = np.inf
    else:
        lb[k - m - Q.dim] = -np.inf
    return Polytope(Q.A[np.flatnonzero(keep)], Q.b[keep], Q.A_eq, Q.b_eq, lb=lb, ub=ub, dim=Q.dim)


def _vertex_network(seed: int) -> Polytope:
    """A unit-stoichiometry network mostly of facets (as the benchmark's synthetic ones): the vertex phase runs."""
    rng = np.random.default_rng(seed)
    n, m = 160, 90
    rows, cols, vals = [], [], []
    for j in range(n):
        k = int(rng.integers(2, 5))
        mets = rng.choice(m, size=k, replace=False)
        rows += mets.tolist()
        cols += [j] * k
        vals += np.where(np.arange(k) < k // 2, -1.0, 1.0).tolist()
    ex = rng.choice(m, size=8, replace=False)
    rows += ex.tolist()
    cols += list(range(n, n + ex.size))
    vals += [-1.0] * ex.size
    n += ex.size
    S = sp.csr_matrix((vals, (rows, cols)), shape=(m, n))
    lb = np.where(rng.uniform(size=n) < 0.2, -1000.0, 0.0)
    return Polytope(sp.csr_matrix((0, n)), np.zeros(0), S, np.zeros(m), lb=lb, ub=np.full(n, 1000.0))


@pytest.mark.parametrize("seed", [0, 1])
def test_facets_certified_at_vertices_have_witnesses_and_implied_bounds_recheck(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every facet certified at an LP vertex comes with a point that satisfies P's equalities and every other
    kept row, and violates its own row by its margin; an independent LP over the simplified polytope without
    that row confirms it reaches beyond. Every redundant bound's multipliers re-check: g = Σ y_k g_k + (a
    combination of the equalities and fixed coordinates), h >= Σ y_k h_k + that combination's right-hand side."""
    monkeypatch.setattr("oracles._clarkson.bent_rays", lambda *a, **k: {})  # they would find these facets first
    P = _vertex_network(seed)
    s = simplify(P)
    decided_by = s.info["decided_by"]
    assert isinstance(decided_by, dict) and decided_by.get("vertex", 0) > 0
    n = P.dim
    # the minimal representation: equalities, fixed coordinates and the kept bounds only (no tightened ones)
    fixed = s.fixed_variables
    lb = np.where(np.isin(np.arange(n), s.kept_lower), P.lb, -np.inf)
    ub = np.where(np.isin(np.arange(n), s.kept_upper), P.ub, np.inf)
    lb[fixed] = ub[fixed] = s.interior_point[fixed]
    K = Polytope(sp.csr_matrix((0, n)), np.zeros(0), P.A_eq, P.b_eq, lb=lb, ub=ub)
    kept_l = np.concatenate([s.kept_upper, n + s.kept_lower])  # L indices of kept bounds (A is empty)
    certified = [int(k) for k in kept_l if s.witness(int(k)) is not None]
    assert len(certified) == decided_by["vertex"]
    for k in certified:
        w = s.witness(k)
        assert w is not None
        g, h = _unit_row(P, k)
        others = _without(K, k)
        assert np.max(np.abs(P.A_eq @ w - P.b_eq)) <= 1e-8
        assert np.all(w <= others.ub + 1e-9) and np.all(w >= others.lb - 1e-9)
        assert g @ w - h == pytest.approx(s.margin[k], rel=1e-6, abs=1e-9) and s.margin[k] > s.tol
        assert _max(others, g) > h + s.tol
    # multipliers of redundant bounds (from LPs and from the implied-bound test alike)
    assert int(s.info["implied"]) > 0  # type: ignore[call-overload]
    assert _recheck_bound_multipliers(P, s, kept_only=False) > 0


def _recheck_bound_multipliers(P: Polytope, s: Simplified, *, kept_only: bool) -> int:
    """Every redundant bound's multipliers re-check (with ``kept_only``, they also name kept rows only, and
    every such bound has some): g = Σ y_k g_k + (a combination of the equalities and fixed coordinates, by
    least squares) and h >= Σ y_k h_k + that combination's right-hand side. Returns how many were checked."""
    m, n = P.A.shape[0], P.dim
    kept_l = set(np.concatenate([s.kept, m + s.kept_upper, m + n + s.kept_lower]).tolist())
    fixed = set(s.fixed_variables.tolist())
    M = sp.vstack([P.A_eq, sp.identity(n, format="csr")[s.fixed_variables]]).toarray()
    rhs = np.concatenate([P.b_eq, s.interior_point[s.fixed_variables]])
    L_rows = [_unit_row(P, k) for k in range(m + 2 * n)]
    checked = 0
    for k in np.concatenate([m + s.redundant_upper, m + n + s.redundant_lower]):
        y = s.multipliers.getrow(int(k))
        if (int(k) - m) % n in fixed or (y.nnz == 0 and not kept_only):
            continue
        if kept_only:
            assert y.nnz > 0 and set(y.indices.tolist()) <= kept_l
        g, h = L_rows[k]
        comb = sum(v * L_rows[i][0] for i, v in zip(y.indices, y.data))
        mu = np.linalg.lstsq(M.T, g - comb, rcond=None)[0]
        assert np.max(np.abs(M.T @ mu - (g - comb))) <= 1e-8
        assert h >= sum(v * L_rows[i][1] for i, v in zip(y.indices, y.data)) + mu @ rhs - 1e-7
        checked += 1
    return checked


def _pyramid() -> Polytope:
    """A square pyramid (apex (0, 0, 1)) with two rows through the apex that are not facets: z <= 1 (tight at
    the apex only) and x + y + 2 z <= 2 (tight on the edge from the apex to (1, 1, 0))."""
    A = np.array(
        [[1, 0, 1], [-1, 0, 1], [0, 1, 1], [0, -1, 1], [0, 0, -1], [0, 0, 1], [1, 1, 2]],
        dtype=float,
    )
    return Polytope(A, np.array([1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 2.0]))


@settings(max_examples=25, deadline=None)
@given(c=st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3), apex=st.booleans(), cap=st.sampled_from([None, 1, 2]))
def test_vertex_certificates_never_certify_a_row_that_is_not_a_facet(
    c: list[float], apex: bool, cap: int | None
) -> None:
    """At any vertex of the pyramid (its apex is degenerate: six rows tight, four of them facets, two not),
    optimal or where an iteration cap stopped the simplex, only facets are certified, each with a witness
    point that violates its own row alone."""
    from oracles import _clarkson as ck
    from oracles._vertex_certificates import _tight_nonbasic, certify_at_vertex
    from oracles.affine import ImplicitEqualities, affine_hull
    from oracles.simplify import _problem

    P = _pyramid()
    hull = affine_hull(P, method="lp")
    ie = hull.info["implicit_equalities"]
    assert isinstance(ie, ImplicitEqualities)
    pb, _ = _problem(P, ie, hull.basis, 1e-7)
    lp = ck.KeptLP(pb)
    for j in pb.candidates:
        lp.keep(int(j))
    # cap: the simplex stopped after 1 or 2 iterations, at a vertex that need not be optimal
    x, hs, optimal = lp.solve_cost(np.array([0.0, 0.0, 1.0]) if apex else np.asarray(c), cap)
    s0 = pb.h - pb.G @ pb.x0
    cert = certify_at_vertex(lp, hs, x, pb.candidates, pb.candidates, s0, 1e-7)
    rows, margin, t, lam = cert.rows, cert.margin, cert.t, cert.lam
    facets = {0, 1, 2, 3, 4}
    assert set(rows.tolist()) <= facets
    for k, j in enumerate(rows):
        u = (1 - cert.tau[k]) * cert.x + cert.tau[k] * pb.x0 + t[k] * cert.E[:, [k]].toarray().ravel()
        w = (1 - lam[k]) * u + lam[k] * pb.x0
        viol = pb.G @ w - pb.h
        assert viol[j] == pytest.approx(margin[k]) and margin[k] > 1e-7
        assert np.all(np.delete(viol, j) <= 1e-12)  # every other row holds (to the round-off of forming w)
    if apex and optimal:  # the degenerate apex: a row that is not a facet sits nonbasic at its bound, and is refused
        assert np.allclose(x, [0.0, 0.0, 1.0])
        _, basic = hs.getBasicVariables()
        assert {5, 6} & set(_tight_nonbasic(lp, hs, x, pb.candidates, np.asarray(basic)).tolist())
