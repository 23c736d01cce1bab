"""Shared generators for the engine tests: random flat polytopes with known hidden equalities."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from oracles import Polytope, solvers


@dataclass
class FlatCase:
    """A polytope whose affine hull is {x : E x = E x0}; ``eq_rows`` are its implicit-equality rows."""

    poly: Polytope
    E: np.ndarray
    x0: np.ndarray
    eq_rows: np.ndarray

    @property
    def rank(self) -> int:
        return int(np.linalg.matrix_rank(self.E)) if self.E.shape[0] else 0


def make_flat(seed: int, n: int, k: int, m: int, *, style: str = "pairs", box: float | None = None) -> FlatCase:
    """Random inequalities around x0 (slack in [0.5, 2]) plus k hidden equalities through x0.

    style="pairs": each equality as the rows e·x <= e·x0 and -e·x <= -e·x0;
    style="triples": groups (e, r, -e-r), all tight at x0, implying e·x = e·x0 and r·x = r·x0
    (no two rows are parallel, so no presolve can spot them). ``box``: add |x - x0|_∞ <= box (bounded body).
    """
    rng = np.random.default_rng(seed)
    x0 = rng.standard_normal(n)
    A = rng.standard_normal((m, n))
    b = A @ x0 + rng.uniform(0.5, 2.0, m) * np.linalg.norm(A, axis=1)
    if box is not None:
        A = np.vstack([A, np.eye(n), -np.eye(n)])
        b = np.concatenate([b, x0 + box, box - x0])
        m = A.shape[0]
    if style == "pairs":
        E = rng.standard_normal((k, n))
        G = np.vstack([E, -E]) if k else np.zeros((0, n))
    elif style == "triples":
        groups = [rng.standard_normal((2, n)) for _ in range(k)]
        G = np.vstack([np.vstack([g[0], g[1], -g[0] - g[1]]) for g in groups]) if k else np.zeros((0, n))
        E = np.vstack([g for g in groups]) if k else np.zeros((0, n))
    else:
        raise ValueError(style)
    G = G * rng.uniform(0.2, 5.0, G.shape[0])[:, None]
    A_all = np.vstack([A, G])
    b_all = np.concatenate([b, G @ x0])
    perm = rng.permutation(A_all.shape[0])
    inv = np.argsort(perm)
    return FlatCase(Polytope(A_all[perm], b_all[perm]), E, x0, np.sort(inv[m:]))


@pytest.fixture(scope="session")
def flat_case():
    return make_flat


BACKENDS = solvers.available()
ALL_BACKENDS = solvers.registered()


def backend_param(kind: str = "lp"):
    """Every registered backend; the unusable ones (e.g. MOSEK without a licence) skip with the reason."""
    out = []
    for name in ALL_BACKENDS:
        why = solvers.unavailable_reason(name)
        marks = [pytest.mark.skip(reason=f"{name} unavailable here: {why}")] if why else []
        if not why and kind not in solvers.capabilities(name):
            marks = [pytest.mark.skip(reason=f"{name} does not handle {kind} problems")]
        out.append(pytest.param(name, marks=marks, id=name))
    return out


class _LpOnly(solvers.Backend):
    """An LP-only adapter relaying to HiGHS: no QP, no conic problems, no first-order mode."""

    name, SUPPORTS_LP = "LPONLY", True

    def probe(self) -> tuple[bool, str]:
        return (True, "")

    def solve(self, data, *, interior=False, options=None):
        return solvers.get("HIGHS").solve(data, interior=interior, options=options)


@pytest.fixture
def lp_only_backend():
    """The name of an LP-only backend registered for one test (whatever backends this machine has)."""
    with solvers.register(_LpOnly()):
        yield "LPONLY"

