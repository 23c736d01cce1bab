"""cdd agreement table: the engine's implicit equalities and dimension against cddlib (pycddlib), exact and float.

    python benchmarks/engine_cdd.py [--quick] [--cdd-dir DIR] [--out results/engine_cdd.json]

Cases: classic polytopes built here (cubes, cross-polytopes, simplices, Birkhoff and transportation polytopes
and hypersimplices with their equalities written as pairs of inequalities, a single point, flat polytopes with
hidden equalities in pairs and in triples, and near ties: a slab of width 2^-k written as two rows), plus,
with ``--cdd-dir``, every H-representation ``*.ine`` in that directory (e.g. cddlib's own examples, which
are not shipped here). For each: the engine's ``implicit_equalities`` (floats, tol 1e-7) with its evidence
(the widest certified extent of a detected equality, the smallest slack of the others), cdd in floating
point (``cdd.implicit_linearity_rows``) and cdd in rational arithmetic (``cdd.gmp``) on the data as written
(an .ine file's integers or rationals exactly; a built case's floats exactly); the dimension from each
(n - rank of the equality rows, the exact one by fraction-exact elimination); and the engine's
``method="directions"`` dimension. Needs pycddlib with its gmp module (the exact extra); without it the
table says so.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from oracles import OracleError, Polytope, affine_hull, implicit_equalities, simplify


# ------------------------------------------------------------------------------------------- cases
def _pairs(A_eq: np.ndarray, b_eq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.vstack([A_eq, -A_eq]), np.concatenate([b_eq, -b_eq])


def classic_cases(quick: bool) -> list[tuple[str, list[list[Fraction]]]]:
    """(name, rows [b, -a] of b - a x >= 0) as exact Fractions of the floats the engine sees."""
    out: list[tuple[str, np.ndarray, np.ndarray]] = []
    for n in (3, 6) if quick else (3, 6, 10, 12):
        out.append((f"cube{n}", np.vstack([np.eye(n), -np.eye(n)]), np.ones(2 * n)))
    for n in (3, 5) if quick else (3, 4, 5, 6, 8):
        signs = np.array(list(itertools.product([-1.0, 1.0], repeat=n)))
        out.append((f"cross{n}", signs, np.ones(len(signs))))
    for n in (3,) if quick else (3, 6, 10):
        out.append((f"simplex{n}", np.vstack([-np.eye(n), np.ones((1, n))]), np.concatenate([np.zeros(n), [1.0]])))
    for k in (3,) if quick else (3, 4, 5):  # Birkhoff: doubly stochastic k x k, dim (k-1)^2
        n = k * k
        R = np.kron(np.eye(k), np.ones((1, k)))
        C = np.kron(np.ones((1, k)), np.eye(k))
        Ae, be = _pairs(np.vstack([R, C]), np.ones(2 * k))
        out.append((f"birkhoff{k}", np.vstack([-np.eye(n), Ae]), np.concatenate([np.zeros(n), be])))
    for p, q in ((2, 3),) if quick else ((2, 3), (3, 4)):  # transportation polytope with margins
        n = p * q
        R = np.kron(np.eye(p), np.ones((1, q)))
        C = np.kron(np.ones((1, p)), np.eye(q))
        rs, cs = np.full(p, float(q)), np.full(q, float(p))
        Ae, be = _pairs(np.vstack([R, C]), np.concatenate([rs, cs]))
        out.append((f"transport{p}x{q}", np.vstack([-np.eye(n), Ae]), np.concatenate([np.zeros(n), be])))
    for n, k in ((4, 2),) if quick else ((4, 2), (6, 3)):  # hypersimplex Δ(n, k): 0 <= x <= 1, Σx = k
        Ae, be = _pairs(np.ones((1, n)), np.array([float(k)]))
        out.append(
            (
                f"hypersimplex{n},{k}",
                np.vstack([np.eye(n), -np.eye(n), Ae]),
                np.concatenate([np.ones(n), np.zeros(n), be]),
            )
        )
    out.append(("point6", np.vstack([-np.eye(6), np.ones((1, 6))]), np.zeros(7)))
    rng = np.random.default_rng(0)
    for style, n, k in (
        (("pairs", 6, 2), ("triples", 8, 2))
        if quick
        else (("pairs", 6, 2), ("pairs", 10, 4), ("triples", 8, 2), ("triples", 12, 3))
    ):
        x0 = rng.integers(-2, 3, n).astype(float)
        A = rng.integers(-3, 4, (4 * n, n)).astype(float)
        A = A[np.any(A != 0, axis=1)]
        b = A @ x0 + rng.integers(1, 4, A.shape[0])
        if style == "pairs":
            E = rng.integers(-2, 3, (k, n)).astype(float)
            G = np.vstack([E, -E])
        else:
            G = np.vstack(
                [np.vstack([e, r, -e - r]) for e, r in (rng.integers(-2, 3, (2, n)).astype(float) for _ in range(k))]
            )
        out.append(
            (f"flat-{style}{n}", np.vstack([A, G, np.eye(n), -np.eye(n)]), np.concatenate([b, G @ x0, x0 + 5, 5 - x0]))
        )
    for e in (20, 40, 52):  # a slab of width 2^-e: flat at tol 1e-7 in floats, full-dimensional exactly
        out.append((f"slab2^-{e}", np.vstack([np.eye(2), -np.eye(2)]), np.array([2.0**-e, 1.0, 0.0, 1.0])))
    return [
        (name, [[Fraction(float(bi))] + [Fraction(-float(v)) for v in a] for a, bi in zip(A, b)]) for name, A, b in out
    ]


def read_ine(path: Path) -> tuple[list[list[Fraction]], set[int]]:
    """An H-representation file: rows [b, -a] as Fractions, and the linearity (equality) rows."""
    lin: set[int] = set()
    lines = path.read_text().splitlines()
    for ln in lines:
        if ln.strip().startswith("linearity"):
            lin = {int(t) - 1 for t in ln.split()[2:]}
    start = next(i for i, ln in enumerate(lines) if ln.strip() == "begin")
    end = next(i for i, ln in enumerate(lines) if ln.strip() == "end")
    m, d = int(lines[start + 1].split()[0]), int(lines[start + 1].split()[1])
    vals = [Fraction(t) for ln in lines[start + 2 : end] for t in ln.split()]
    if len(vals) != m * d:
        raise ValueError(f"{path.name}: expected {m} x {d} entries, got {len(vals)}")
    return [vals[i * d : (i + 1) * d] for i in range(m)], lin


# ------------------------------------------------------------------------------------------- exact
def exact_rank(rows: list[list[Fraction]]) -> int:
    """Rank by fraction-exact Gaussian elimination."""
    M = [list(r) for r in rows if any(r)]
    rank, col = 0, 0
    ncol = len(M[0]) if M else 0
    while rank < len(M) and col < ncol:
        piv = next((i for i in range(rank, len(M)) if M[i][col] != 0), None)
        if piv is None:
            col += 1
            continue
        M[rank], M[piv] = M[piv], M[rank]
        for i in range(rank + 1, len(M)):
            if M[i][col] != 0:
                f = M[i][col] / M[rank][col]
                M[i] = [x - f * y for x, y in zip(M[i], M[rank])]
        rank += 1
        col += 1
    return rank


def cdd_rows(rows, lin, exact: bool) -> set[int]:
    import cdd

    mod = __import__("cdd.gmp", fromlist=["gmp"]) if exact else cdd
    data = rows if exact else [[float(v) for v in r] for r in rows]
    mat = mod.matrix_from_array(data, lin_set=set(lin), rep_type=cdd.RepType.INEQUALITY)
    return set(mod.implicit_linearity_rows(mat))


def one_case(name: str, rows: list[list[Fraction]], lin: set[int]) -> dict:
    n = len(rows[0]) - 1
    ineq = [i for i in range(len(rows)) if i not in lin]
    A = np.array([[-float(v) for v in rows[i][1:]] for i in ineq]).reshape(-1, n)
    b = np.array([float(rows[i][0]) for i in ineq])
    Ae = np.array([[-float(v) for v in rows[i][1:]] for i in sorted(lin)]).reshape(-1, n)
    be = np.array([float(rows[i][0]) for i in sorted(lin)])
    row = {"case": name, "n": n, "rows": len(rows)}
    P = Polytope(A, b, Ae if len(lin) else None, be if len(lin) else None, dim=n)
    try:
        t = time.perf_counter()
        res = implicit_equalities(P)
        row["t_engine"] = time.perf_counter() - t
        eng = {ineq[i] for i in res.rows}
        row.update(engine_eq=len(eng), max_width=res.max_width, min_slack=res.min_slack, engine_dim=affine_hull(P).dim)
    except OracleError as e:
        eng = None
        row.update(engine_eq=None, engine_status=f"{type(e).__name__}: {e}")
    for label, exact in (("cdd_float", False), ("cdd_exact", True)):
        try:
            t = time.perf_counter()
            found = cdd_rows(rows, lin, exact)
            row[f"t_{label}"] = time.perf_counter() - t
            row[f"{label}_eq"] = len(found)
            eqs = [rows[i][1:] for i in sorted(found | lin)]
            row[f"{label}_dim"] = n - exact_rank(eqs) if eqs else n
            row[f"engine_same_as_{label}"] = bool(eng is not None and eng == found)
        except Exception as e:  # cdd may fail on an empty or degenerate input: report it
            row[f"{label}_status"] = f"{type(e).__name__}: {e}"
            row[f"engine_same_as_{label}"] = None
    row["dim_same_as_exact"] = bool(
        row.get("engine_dim") is not None and row.get("engine_dim") == row.get("cdd_exact_dim")
    )
    try:
        row["directions_dim"] = affine_hull(P, method="directions").dim
    except OracleError as e:
        row["directions_dim"] = f"{type(e).__name__}"
    return row


def _fmt(v) -> str:
    return f"{v:.2g}" if isinstance(v, float) else str(v)


def run(quick: bool = False, cdd_dir: str | None = None) -> dict:
    try:
        import cdd.gmp  # noqa: F401
    except ImportError as e:
        print(f"\ncdd agreement table skipped: pycddlib with gmp is not installed ({e}; the exact extra)")
        return {"status": "skipped: pycddlib (gmp) not installed", "rows": []}
    cases = [(name, rows, set()) for name, rows in classic_cases(quick)]
    if cdd_dir:
        for path in sorted(Path(cdd_dir).glob("*.ine")):
            try:
                rows, lin = read_ine(path)
            except (ValueError, StopIteration) as e:
                print(f"  {path.name}: not read ({e})")
                continue
            cases.append((path.stem, rows, lin))
    out = [one_case(*c) for c in cases]
    cols = [
        ("case", "case"),
        ("n", "n"),
        ("rows", "rows"),
        ("eng eq", "engine_eq"),
        ("cdd-f eq", "cdd_float_eq"),
        ("cdd-x eq", "cdd_exact_eq"),
        ("eng dim", "engine_dim"),
        ("exact dim", "cdd_exact_dim"),
        ("dirs dim", "directions_dim"),
        ("=exact", "engine_same_as_cdd_exact"),
        ("=float", "engine_same_as_cdd_float"),
        ("max width", "max_width"),
        ("min slack", "min_slack"),
    ]
    print("\ncdd agreement (implicit equalities; engine tol 1e-7; cdd-x: rational arithmetic on the data as written)")
    w = [max([len(h)] + [len(_fmt(r.get(k))) for r in out]) for h, k in cols]
    print("  ".join(f"{h:>{x}}" for (h, _), x in zip(cols, w)))
    for r in out:
        print("  ".join(f"{_fmt(r.get(k)):>{x}}" for (_, k), x in zip(cols, w)))
    agree = sum(bool(r.get("engine_same_as_cdd_exact")) for r in out)
    print(f"engine = exact cdd on {agree} of {len(out)} cases")
    return {"rows": out, "agree_exact": agree, "cases": len(out)}


# ------------------------------------------------------------------------------- simplify vs exact
def _box_rows(n: int, r: float) -> tuple[np.ndarray, np.ndarray]:
    return np.vstack([np.eye(n), -np.eye(n)]), np.full(2 * n, r)


EXACT_ROWS = 200  # larger cases are scored against their construction, not cdd (its LPs are rational)


def simplify_cases(quick: bool) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Adversarial inputs from the issue trackers (cddlib, pycddlib, polytope, pypoman, volesti), as float rows
    A x <= b: rows rescaled by 1e±4 and 1e±8, a 1e-12 slab, hidden equalities, large right-hand sides,
    duplicated and nearly parallel rows, a corner cut off 1e-9 deep, and a 700-row case (350 tangents of a
    sphere, all facets, and 350 copies of them pushed out, all redundant)."""
    rng = np.random.default_rng(7)
    out: list[tuple[str, np.ndarray, np.ndarray]] = []
    Bx, bx = _box_rows(3, 1.0)
    extra = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [2.0, 0.0, 0.0], [1.0, -1.0, 0.5]])
    base_A = np.vstack([Bx, extra])
    base_b = np.concatenate([bx, [1.5, 4.0, 2.0, 1.0]])
    out.append(("cube+cuts", base_A, base_b))
    for e in (4, -4, 8, -8):
        f = np.where(np.arange(base_A.shape[0]) % 2 == 0, 10.0**e, 1.0)
        out.append((f"rows x1e{e:+d}", base_A * f[:, None], base_b * f))
    out.append(("slab 1e-12", np.vstack([np.eye(2), -np.eye(2)]), np.array([1.0 + 1e-12, 1.0, -1.0, 1.0])))
    E = np.array([[1.0, 2.0, -1.0, 0.5]])
    Bx4, bx4 = _box_rows(4, 2.0)
    out.append(
        (
            "tight equality",
            np.vstack([Bx4, E, -E, 0.5 * E, [[1.0, 1.0, 1.0, 1.0]]]),
            np.concatenate([bx4, [0.5, -0.5, 0.25, 10.0]]),
        )
    )
    out.append(("large rhs", np.vstack([Bx, extra]), np.concatenate([bx * 1e6, [1.5e6, 4e6, 2e6, 1.0e6]])))
    out.append(
        (
            "duplicates",
            np.vstack([Bx, Bx[:2], 3.0 * Bx[2:4], [[1.0, 1.0, 0.0], [2.0, 2.0, 0.0]]]),
            np.concatenate([bx, bx[:2], 3.0 * bx[2:4], [1.5, 3.0]]),
        )
    )
    out.append(
        (
            "nearly parallel",
            np.vstack([Bx, [[1.0, 1e-6, 0.0], [1.0, -1e-6, 0.0], [1.0, 1e-6, 1e-6]]]),
            np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0 + 3e-6]),
        )
    )
    out.append(("sliver 1e-9", np.vstack([Bx, [[1.0, 1.0, 0.0]]]), np.concatenate([bx, [2.0 - 1e-9]])))
    k = 60 if quick else 350
    U = rng.standard_normal((k, 5))
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    out.append((f"{2 * k} rows (sphere)", np.vstack([U, U]), np.concatenate([np.ones(k), np.full(k, 1.0 + 1e-3)])))
    return out


def _key(a: list[Fraction], b: Fraction) -> tuple[Fraction, ...]:
    """A row b - a x >= 0 up to positive scaling: divided by its largest |entry| (exactly)."""
    top = max(abs(v) for v in [b, *a])
    return tuple(v / top for v in [b, *a])


def exact_simplify(A: np.ndarray, b: np.ndarray) -> dict:
    """cdd (gmp) on the exact values of the floats: implicit equality rows and the canonical kept rows."""
    import cdd
    import cdd.gmp as g

    rows = [[Fraction(float(bi))] + [Fraction(-float(v)) for v in a] for a, bi in zip(A, b)]
    t = time.perf_counter()
    mat = g.matrix_from_array(rows, rep_type=cdd.RepType.INEQUALITY)
    lin, red, _ = g.matrix_canonicalize(mat)
    seconds = time.perf_counter() - t
    kept = sorted(set(range(len(rows))) - set(lin) - set(red))
    eq_rows = [rows[i][1:] for i in sorted(lin)]
    n = A.shape[1]
    return {
        "equalities": sorted(int(i) for i in lin),
        "kept": [int(i) for i in kept],
        "dim": n - (exact_rank(eq_rows) if eq_rows else 0),
        "seconds": seconds,
    }


def _kept_same(A: np.ndarray, b: np.ndarray, ours: list[int], theirs: list[int]) -> bool:
    """The same kept rows up to duplicates: equal counts and the same rows up to positive scaling."""
    rows = [([Fraction(float(v)) for v in A[i]], Fraction(float(b[i]))) for i in range(A.shape[0])]
    return len(ours) == len(theirs) and {_key(*rows[i]) for i in ours} == {_key(*rows[i]) for i in theirs}


def simplify_row(name: str, A: np.ndarray, b: np.ndarray, exact: dict | None) -> dict:
    P = Polytope(A, b)
    t = time.perf_counter()
    s = simplify(P)
    row: dict = {
        "case": name,
        "n": A.shape[1],
        "rows": A.shape[0],
        "t_engine": time.perf_counter() - t,
        "kept": int(s.kept.size),
        "equalities": int(s.equalities.size),
        "dim": s.dim,
        "near_ties": [f"{t.kind} {t.index}: {t.verdict} {t.value:.2g}" for t in s.near_ties],
    }
    if exact is None:
        return row
    tied = {t.index for t in s.near_ties if t.kind == "row"}
    same_eq = s.equalities.tolist() == exact["equalities"]
    same_kept = _kept_same(A, b, s.kept.tolist(), exact["kept"])
    row.update(
        exact_kept=len(exact["kept"]),
        exact_equalities=len(exact["equalities"]),
        exact_dim=exact["dim"],
        t_exact=exact["seconds"],
        same_equalities=same_eq,
        same_kept=same_kept,
        same_dim=s.dim == exact["dim"],
    )
    # a disagreement is acceptable only where every differing row is reported as a near tie
    diff = set(s.equalities.tolist()) ^ set(exact["equalities"])
    diff |= set(s.kept.tolist()) ^ set(exact["kept"]) if not same_kept else set()
    row["agrees_or_flagged"] = bool((same_eq and same_kept) or (diff and diff <= tied))
    row["cdd_float"] = cdd_float_verdict(A, b, exact)
    return row


def cdd_float_verdict(A: np.ndarray, b: np.ndarray, exact: dict) -> str:
    """pycddlib's canonicalize in floating point on the same rows: "same" as exact, or what differs."""
    try:
        import cdd
    except ImportError:
        return "not installed"
    rows = [[float(bi)] + [-float(v) for v in a] for a, bi in zip(A, b)]
    try:
        mat = cdd.matrix_from_array(rows, rep_type=cdd.RepType.INEQUALITY)
        lin, red, _ = cdd.matrix_canonicalize(mat)
    except Exception as e:  # cdd in floats may fail outright: that is the finding
        return f"{type(e).__name__}"
    kept = sorted(set(range(len(rows))) - set(lin) - set(red))
    if sorted(lin) != exact["equalities"]:
        return f"equalities {len(lin)} (exact {len(exact['equalities'])})"
    return "same" if _kept_same(A, b, kept, exact["kept"]) else f"kept {len(kept)} (exact {len(exact['kept'])})"


def run_simplify(quick: bool = False) -> dict:
    try:
        import cdd.gmp  # noqa: F401

        have = True
    except ImportError:
        have = False
    out = []
    for name, A, b in simplify_cases(quick):
        if A.shape[0] > EXACT_ROWS:  # the sphere case: its answer is known by construction (cdd gmp: 11 s at 120)
            half = A.shape[0] // 2
            exact = {"equalities": [], "kept": list(range(half)), "dim": A.shape[1], "seconds": None}
        else:
            exact = exact_simplify(A, b) if have else None
        out.append(simplify_row(name, A, b, exact))
    cols = [
        ("case", "case"),
        ("rows", "rows"),
        ("kept", "kept"),
        ("exact kept", "exact_kept"),
        ("eq", "equalities"),
        ("exact eq", "exact_equalities"),
        ("dim", "dim"),
        ("exact dim", "exact_dim"),
        ("= or flagged", "agrees_or_flagged"),
        ("engine s", "t_engine"),
        ("cdd gmp s", "t_exact"),
        ("cdd float", "cdd_float"),
    ]
    print("\nsimplify against exact cdd (gmp canonicalize on the floats' exact values; engine tol 1e-7)")
    w = [max([len(h)] + [len(_fmt(r.get(k))) for r in out]) for h, k in cols]
    print("  ".join(f"{h:>{x}}" for (h, _), x in zip(cols, w)))
    for r in out:
        print("  ".join(f"{_fmt(r.get(k)):>{x}}" for (_, k), x in zip(cols, w)))
        if r["near_ties"]:
            print(f"    near ties: {'; '.join(r['near_ties'][:4])}")
    return {"rows": out, "exact": have}


def write_fixtures(path: str) -> None:
    """The exact answers (cdd gmp) of ``simplify_cases(quick=True)``, rows stored as float.hex."""
    import json

    cases = []
    for name, A, b in simplify_cases(True):
        ex = exact_simplify(A, b)
        cases.append(
            {
                "name": name,
                "A": [[float(v).hex() for v in a] for a in A],
                "b": [float(v).hex() for v in b],
                "equalities": ex["equalities"],
                "kept": ex["kept"],
                "dim": ex["dim"],
            }
        )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(
        json.dumps(
            {
                "source": "cdd.gmp.matrix_canonicalize (pycddlib 3) on the floats' exact "
                "values; written by benchmarks/engine_cdd.py --write-fixtures",
                "cases": cases,
            },
            indent=1,
        )
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    from _report import write_json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cdd-dir", default=None, help="a directory of H-representation .ine files")
    parser.add_argument("--out", default="results/engine_cdd.json")
    parser.add_argument("--write-fixtures", default=None, help="write simplify's exact answers (cdd gmp) here")
    args = parser.parse_args(argv)
    if args.write_fixtures:
        write_fixtures(args.write_fixtures)
        return 0
    report = run(args.quick, args.cdd_dir)
    report["simplify"] = run_simplify(args.quick)
    write_json(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
