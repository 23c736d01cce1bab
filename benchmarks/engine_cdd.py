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

from oracles import OracleError, Polytope, affine_hull, implicit_equalities


# ------------------------------------------------------------------------------------------- cases
def _pairs(A_eq: np.ndarray, b_eq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.vstack([A_eq, -A_eq]), np.concatenate([b_eq, -b_eq])


def classic_cases(quick: bool) -> list[tuple[str, list[list[Fraction]]]]:
    """(name, rows [b, -a] of b - a x >= 0) as exact Fractions of the floats the engine sees."""
    out: list[tuple[str, np.ndarray, np.ndarray]] = []
    for n in ((3, 6) if quick else (3, 6, 10, 12)):
        out.append((f"cube{n}", np.vstack([np.eye(n), -np.eye(n)]), np.ones(2 * n)))
    for n in ((3, 5) if quick else (3, 4, 5, 6, 8)):
        signs = np.array(list(itertools.product([-1.0, 1.0], repeat=n)))
        out.append((f"cross{n}", signs, np.ones(len(signs))))
    for n in ((3,) if quick else (3, 6, 10)):
        out.append((f"simplex{n}", np.vstack([-np.eye(n), np.ones((1, n))]), np.concatenate([np.zeros(n), [1.0]])))
    for k in ((3,) if quick else (3, 4, 5)):  # Birkhoff: doubly stochastic k x k, dim (k-1)^2
        n = k * k
        R = np.kron(np.eye(k), np.ones((1, k)))
        C = np.kron(np.ones((1, k)), np.eye(k))
        Ae, be = _pairs(np.vstack([R, C]), np.ones(2 * k))
        out.append((f"birkhoff{k}", np.vstack([-np.eye(n), Ae]), np.concatenate([np.zeros(n), be])))
    for (p, q) in (((2, 3),) if quick else ((2, 3), (3, 4))):  # transportation polytope with margins
        n = p * q
        R = np.kron(np.eye(p), np.ones((1, q)))
        C = np.kron(np.ones((1, p)), np.eye(q))
        rs, cs = np.full(p, float(q)), np.full(q, float(p))
        Ae, be = _pairs(np.vstack([R, C]), np.concatenate([rs, cs]))
        out.append((f"transport{p}x{q}", np.vstack([-np.eye(n), Ae]), np.concatenate([np.zeros(n), be])))
    for (n, k) in (((4, 2),) if quick else ((4, 2), (6, 3))):  # hypersimplex Δ(n, k): 0 <= x <= 1, Σx = k
        Ae, be = _pairs(np.ones((1, n)), np.array([float(k)]))
        out.append((f"hypersimplex{n},{k}", np.vstack([np.eye(n), -np.eye(n), Ae]),
                    np.concatenate([np.ones(n), np.zeros(n), be])))
    out.append(("point6", np.vstack([-np.eye(6), np.ones((1, 6))]), np.zeros(7)))
    rng = np.random.default_rng(0)
    for style, n, k in (("pairs", 6, 2), ("triples", 8, 2)) if quick else (("pairs", 6, 2), ("pairs", 10, 4),
                                                                            ("triples", 8, 2), ("triples", 12, 3)):
        x0 = rng.integers(-2, 3, n).astype(float)
        A = rng.integers(-3, 4, (4 * n, n)).astype(float)
        A = A[np.any(A != 0, axis=1)]
        b = A @ x0 + rng.integers(1, 4, A.shape[0])
        if style == "pairs":
            E = rng.integers(-2, 3, (k, n)).astype(float)
            G = np.vstack([E, -E])
        else:
            G = np.vstack([np.vstack([e, r, -e - r]) for e, r in
                           (rng.integers(-2, 3, (2, n)).astype(float) for _ in range(k))])
        out.append((f"flat-{style}{n}", np.vstack([A, G, np.eye(n), -np.eye(n)]),
                    np.concatenate([b, G @ x0, x0 + 5, 5 - x0])))
    for e in (20, 40, 52):  # a slab of width 2^-e: flat at tol 1e-7 in floats, full-dimensional exactly
        out.append((f"slab2^-{e}", np.vstack([np.eye(2), -np.eye(2)]), np.array([2.0 ** -e, 1.0, 0.0, 1.0])))
    return [(name, [[Fraction(float(bi))] + [Fraction(-float(v)) for v in a] for a, bi in zip(A, b)])
            for name, A, b in out]


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
    vals = [Fraction(t) for ln in lines[start + 2:end] for t in ln.split()]
    if len(vals) != m * d:
        raise ValueError(f"{path.name}: expected {m} x {d} entries, got {len(vals)}")
    return [vals[i * d:(i + 1) * d] for i in range(m)], lin


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
        row.update(engine_eq=len(eng), max_width=res.max_width, min_slack=res.min_slack,
                   engine_dim=affine_hull(P).dim)
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
    row["dim_same_as_exact"] = bool(row.get("engine_dim") is not None and row.get("engine_dim") == row.get("cdd_exact_dim"))
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
    cols = [("case", "case"), ("n", "n"), ("rows", "rows"), ("eng eq", "engine_eq"), ("cdd-f eq", "cdd_float_eq"),
            ("cdd-x eq", "cdd_exact_eq"), ("eng dim", "engine_dim"), ("exact dim", "cdd_exact_dim"),
            ("dirs dim", "directions_dim"), ("=exact", "engine_same_as_cdd_exact"),
            ("=float", "engine_same_as_cdd_float"), ("max width", "max_width"), ("min slack", "min_slack")]
    print("\ncdd agreement (implicit equalities; engine tol 1e-7; cdd-x: rational arithmetic on the data as written)")
    w = [max([len(h)] + [len(_fmt(r.get(k))) for r in out]) for h, k in cols]
    print("  ".join(f"{h:>{x}}" for (h, _), x in zip(cols, w)))
    for r in out:
        print("  ".join(f"{_fmt(r.get(k)):>{x}}" for (_, k), x in zip(cols, w)))
    agree = sum(bool(r.get("engine_same_as_cdd_exact")) for r in out)
    print(f"engine = exact cdd on {agree} of {len(out)} cases")
    return {"rows": out, "agree_exact": agree, "cases": len(out)}


def main(argv: list[str] | None = None) -> int:
    from _report import write_json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cdd-dir", default=None, help="a directory of H-representation .ine files")
    parser.add_argument("--out", default="results/engine_cdd.json")
    args = parser.parse_args(argv)
    write_json(args.out, run(args.quick, args.cdd_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
