"""Flux polytopes of metabolic networks with the `oracles` engine: a real, sparse client.

A cobra model's steady-state fluxes form the polytope {v : S v = 0, lb <= v <= ub} (S: metabolites x
reactions, very sparse; infinite bounds replaced by ±1000 as PolyRound does). This script loads a model that
cobra ships, builds that polytope sparse with the bounds as bounds, and asks the engine for

* its affine hull (dimension, the fluxes fixed on the whole polytope, a relative-interior point),
* the evidence behind each detected equality (the certified width and the tolerance it was held to),
* its relative Chebyshev centre (the centre of the largest ball inside it within its hull),
* every reaction's flux range (flux variability analysis through the engine: ``widths(P, I)``),

and compares the fixed set and the ranges with cobra's own flux variability analysis (fraction_of_optimum=0,
i.e. over the whole polytope, solved by cobra's solver, not the engine's).

    python docs/examples/flux_polytope.py [textbook|iJO1366|salmonella] [--no-fva]

cobra ships "textbook" (e_coli_core), "iJO1366" and "salmonella" (iYS1720: its model id, 3,357 reactions) inside
its package (cobra.io.load_model reads them without a network); "e_coli_core" and "iYS1720" name the same files
here. Other names are fetched from BiGG, which needs one.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp

from oracles import Polytope, affine_hull, chebyshev_center, widths

BUNDLED = ("textbook", "iJO1366", "salmonella")
ALIASES = {"e_coli_core": "textbook", "iYS1720": "salmonella"}  # BiGG ids of the bundled files
FLUX_CAP = 1000.0  # infinite bounds become ±1000, as PolyRound does


def load_model(name: str = "textbook"):
    """A cobra model that cobra ships (no network needed for the names in BUNDLED and ALIASES)."""
    import cobra

    return cobra.io.load_model(ALIASES.get(name, name))


def flux_polytope(model) -> tuple[Polytope, list[str]]:
    """{v : S v = 0, lb <= v <= ub} as a sparse Polytope, and the reaction ids (the coordinates)."""
    from cobra.util.array import create_stoichiometric_matrix

    S = sp.csr_matrix(create_stoichiometric_matrix(model, array_type="lil"))
    lb = np.array([r.lower_bound for r in model.reactions], dtype=float)
    ub = np.array([r.upper_bound for r in model.reactions], dtype=float)
    lb, ub = np.maximum(lb, -FLUX_CAP), np.minimum(ub, FLUX_CAP)
    P = Polytope(A_eq=S, b_eq=np.zeros(S.shape[0]), lb=lb, ub=ub)
    return P, [r.id for r in model.reactions]


def cobra_fva(model) -> tuple[np.ndarray, np.ndarray]:
    """cobra's flux variability analysis over the whole polytope (no optimality constraint): (min, max)."""
    from cobra.flux_analysis import flux_variability_analysis

    with model:
        for r in model.reactions:  # the same ±1000 caps as the polytope
            r.bounds = (max(r.lower_bound, -FLUX_CAP), min(r.upper_bound, FLUX_CAP))
        fva = flux_variability_analysis(model, fraction_of_optimum=0.0, processes=1)
    ids = [r.id for r in model.reactions]
    return fva.loc[ids, "minimum"].to_numpy(float), fva.loc[ids, "maximum"].to_numpy(float)


def run(name: str = "textbook", *, fva: bool = True, fixed_tol: float = 1e-7) -> dict:
    """Everything above for one model; returns the numbers (the tests check them against cobra)."""
    model = load_model(name)
    P, ids = flux_polytope(model)
    out: dict = {"model": name, "reactions": P.dim, "metabolites": P.A_eq.shape[0], "nonzeros": P.nnz}

    t = time.perf_counter()
    hull = affine_hull(P)
    out["hull_seconds"] = time.perf_counter() - t
    res = hull.info["implicit_equalities"]
    fixed = hull.fixed_coordinates()
    out.update(dim=hull.dim, fixed=fixed, interior_point=hull.interior_point,
               interior_in_body=bool(P.contains(hull.interior_point, tol=1e-7)),
               min_norm_point_in_body=bool(P.contains(hull.point, tol=1e-7)),
               tight_bounds=res.fixed_variables, max_width=res.max_width, min_slack=res.min_slack, tol=res.tol)

    center, radius = chebyshev_center(P, relative=True)
    out.update(chebyshev_center=center, chebyshev_radius=radius)

    t = time.perf_counter()
    w = widths(P, sp.identity(P.dim, format="csr"))  # FVA through the engine: max v_j - min v_j
    out.update(widths=w, engine_fva_seconds=time.perf_counter() - t)

    if fva:
        t = time.perf_counter()
        lo, hi = cobra_fva(model)
        out.update(cobra_fva_seconds=time.perf_counter() - t, cobra_widths=hi - lo,
                   cobra_fixed=np.flatnonzero(hi - lo <= fixed_tol))
        out["fixed_agree"] = bool(np.array_equal(out["cobra_fixed"], fixed))
        out["max_width_difference"] = float(np.max(np.abs(out["cobra_widths"] - w)))
    del ids
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="textbook", help=f"one of {BUNDLED} (bundled with cobra)")
    parser.add_argument("--no-fva", action="store_true", help="skip cobra's FVA (slow on the large models)")
    args = parser.parse_args(argv)
    r = run(args.model, fva=not args.no_fva)
    print(f"{r['model']}: {r['reactions']} reactions, {r['metabolites']} metabolites, {r['nonzeros']} non-zeros")
    print(f"affine hull: dimension {r['dim']}, {r['fixed'].size} fixed fluxes ({r['hull_seconds']:.3f} s); "
          f"relative-interior point in the body: {r['interior_in_body']} "
          f"(the flat's min-norm point: {r['min_norm_point_in_body']})")
    print(f"evidence: {r['tight_bounds'].size} bounds hold on the whole body, widest certified extent "
          f"{r['max_width']:.2g} against tol {r['tol']:.0e}; every other bound has slack >= {r['min_slack']:.2g}")
    print(f"relative Chebyshev radius {r['chebyshev_radius']:.4g}")
    print(f"FVA through the engine: {r['engine_fva_seconds']:.2f} s")
    if "cobra_widths" in r:
        print(f"cobra FVA: {r['cobra_fva_seconds']:.2f} s; same fixed set: {r['fixed_agree']}; "
              f"largest flux-range difference {r['max_width_difference']:.2g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
