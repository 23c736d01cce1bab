"""One run of a query route: ΣW from single tokens, copy families fitted and matched into the W_i, Θ from the
attention rows' log-ratio equations, validation on fresh random queries, and (with noise) the least-squares fit.

A ``Plan`` says what a route asks: which output rows it reads ("all", or "first" like the papers), how many
copies per family (L), the family layout ("axes": d axis families and d − 1 sum families; "grid": one family per
(first-token basis vector a, axis b) plus the sum families), and whether it adds random Θ queries of k tokens.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import PhaseFailed
from ..phases.polish import lm_vp
from ..result import PhaseRecord
from ..settings import PolishSettings
from ..toolkit import forward, relative_mse
from ..vplm import vp_lm_starts
from .algebra import (
    FamilyFit,
    LogitEquations,
    fit_family,
    logit_equations,
    match_by_sums,
    match_to_reference,
    refit_ws,
    solve_thetas,
)
from .design import Domain, Family
from .oracle import QueryOracle
from .settings import QuerySettings

__all__ = ["Plan", "RunState", "run_plan", "theta_tokens"]


@dataclass(frozen=True)
class Plan:
    """What a route asks (module docstring)."""

    name: str
    rows: str = "all"
    copies: int = 3
    layout: str = "axes"
    theta_queries: bool = True


@dataclass
class Batch:
    """Queries of one layout: inputs X (n, k, d), answers Y (rows not read are NaN), their distinct tokens
    Xd (n, G, d), multiplicities ``mult`` (G,) and distinct rows Yd (n, G, d)."""

    X: np.ndarray
    Y: np.ndarray
    Xd: np.ndarray
    mult: np.ndarray
    Yd: np.ndarray


@dataclass
class RunState:
    """What one run has learnt so far, and its records."""

    oracle: QueryOracle
    domain: Domain
    plan: Plan
    m: int
    noise: float | None
    tol: float
    settings: QuerySettings = field(default_factory=QuerySettings)
    sum_w: np.ndarray | None = None
    ws: np.ndarray | None = None
    thetas: np.ndarray | None = None
    batches: list[Batch] = field(default_factory=list)
    records: list[PhaseRecord] = field(default_factory=list)
    spare_families: int = 0
    repeats: int = 1
    X_val: np.ndarray | None = None
    Y_val: np.ndarray | None = None
    validation_error: float = math.inf

    @property
    def d(self) -> int:
        return self.domain.d

    @property
    def read_rows(self) -> tuple[int, ...]:
        return (0,) if self.plan.rows == "first" else (0, 1)

    def ask(self, phase: str, X: np.ndarray, *, average: bool = True) -> np.ndarray:
        """The answers to X; with noise, the mean of ``repeats`` answers to each query (unless ``average``
        is False)."""
        self.oracle.phase = phase
        r = self.repeats if average else 1
        Y = self.oracle.ask(np.repeat(X, r, axis=0) if r > 1 else X)
        if r > 1:
            Y = Y.reshape(X.shape[0], r, *X.shape[1:]).mean(axis=1)
        if self.plan.rows == "first":
            Y = Y.copy()
            Y[:, 1:] = np.nan
        return Y

    def record(self, name: str, t0: float, figures: dict[str, object], status: str = "ok", message: str = "") -> None:
        c = self.oracle.by_phase.get(name)
        figs = {"queries": 0 if c is None else c.queries, "tokens": 0 if c is None else c.tokens, **figures}
        self.records.append(PhaseRecord(name, figs, time=time.perf_counter() - t0, status=status, message=message))


def theta_tokens(d: int, m: int) -> int:
    """Tokens of a Θ query: 1 + ⌊3d/(4m)⌋ (at least 2), so that the m(k − 1) attention weights of a row are
    determined, with room to spare, by its d outputs."""
    return 1 + max(1, (3 * d) // (4 * m))


# ------------------------------------------------------------------------------------------------ steps
def read_sum_w(st: RunState) -> None:
    """ΣW from d single-token queries (a lone token attends to itself: F(x) = x ΣW)."""
    t0 = time.perf_counter()
    B = st.domain.single_tokens()
    Y = st.ask("sum-w", B[:, None, :])[:, 0, :]
    st.sum_w = np.linalg.solve(B, Y)
    st.record("sum-w", t0, {})


def _ask_families(st: RunState, fams: list[Family], phase: str) -> tuple[np.ndarray, np.ndarray]:
    """Ask every family at n = 1..L copies: H (F, L + 1, d) and G (F, L, d) of the rational fit (batches kept)."""
    assert st.sum_w is not None
    L = st.plan.copies
    F = len(fams)
    x = np.stack([f.x for f in fams])
    y = np.stack([f.y for f in fams])
    delta_sw = (y - x) @ st.sum_w
    H = np.empty((F, L + 1, st.d))
    G = np.empty((F, L, st.d))
    H[:, 0] = delta_sw
    for n in range(1, L + 1):
        X = np.concatenate([x[:, None], np.repeat(y[:, None], n, axis=1)], axis=1)
        Y = st.ask(phase, X)
        H[:, n] = delta_sw - (Y[:, 0] - x @ st.sum_w)
        G[:, n - 1] = y @ st.sum_w - Y[:, 1]  # NaN when the plan reads the first position only
        st.batches.append(Batch(X, Y, X[:, :2], np.array([1.0, float(n)]), Y[:, :2]))
    return H, G


def _fit_all(st: RunState, fams: list[Family], phase: str) -> list[FamilyFit]:
    H, G = _ask_families(st, fams, phase)
    both = st.plan.rows == "all"
    return [fit_family(H[f], st.m, G[f] if both else None) for f in range(len(fams))]


def probe_scale(st: RunState) -> None:
    """Set the real domain's scale s from two-token queries: row x's output minus xΣW, projected on δΣW, is a
    head-averaged attention weight 1 − p̄ on y, whose logit scales as s²; s is chosen so that the median
    |logit| is ``target_logit`` (up to ``probe_rounds`` rounds while the weights saturate). The answers are kept for Θ."""
    assert st.sum_w is not None
    t0 = time.perf_counter()
    tries = []
    for _ in range(st.settings.probe_rounds):
        X = st.domain.tokens(st.settings.probe_queries, 2)
        Y = st.ask("probe", X)
        st.batches.append(Batch(X, Y, X, np.ones(2), Y))
        dsw = (X[:, 1] - X[:, 0]) @ st.sum_w
        c = np.einsum("nd,nd->n", Y[:, 0] - X[:, 0] @ st.sum_w, dsw) / np.maximum(
            np.einsum("nd,nd->n", dsw, dsw), np.finfo(float).tiny
        )
        c = np.clip(c, 1e-6, 1 - 1e-6)
        typical = float(np.median(np.abs(np.log(c / (1 - c)))))
        tries.append({"scale": st.domain.scale, "median_abs_logit": typical})
        factor = math.sqrt(st.settings.target_logit / max(typical, 1e-4))
        if st.domain.kind == "boolean" or 0.7 <= factor <= 1.4:
            break
        st.domain.rescaled(min(8.0, max(0.125, factor)))
    st.record("probe", t0, {"tries": tries, "scale": st.domain.scale})


def _layout(st: RunState) -> list[tuple[int, int]]:
    """The family slots: axes (0, b), sums (0, −b), and for the grid (a, b), a >= 1."""
    d = st.d
    keys = [(0, b) for b in range(d)] + [(0, -b) for b in range(1, d)]
    if st.plan.layout == "grid":
        keys += [(a, b) for a in range(1, d) for b in range(d)]
    return keys


def _bad(st: RunState, fit: FamilyFit) -> bool:
    """A family to redraw: a fit above ``fit_rtol`` (with noise σ: a residual rms above ``noise_fit``·σ), an
    ill-conditioned design, or a saturated head."""
    # with noise, H and G carry the row's noise and ΣW's (read at unit tokens) times the tokens' norm ~ s
    sigma_h = (st.noise or 0.0) * (1.0 + 2.0 * st.domain.scale) / math.sqrt(st.repeats)
    s = st.settings
    fits = fit.residual <= s.fit_rtol if st.noise is None else fit.rms <= s.noise_fit * sigma_h
    cond = (
        s.max_condition if not st.noise else min(s.max_condition, s.noise_condition * math.sqrt(st.repeats) / st.noise)
    )
    return not (fits and fit.condition <= cond and fit.largest_logit <= s.max_family_logit)


def _refit_bad(st: RunState, fams: list[Family], fits: list[FamilyFit]) -> int:
    """Redraw every bad family (``_bad``) with a new first token, smaller when its heads saturate, while the
    plan's spare queries last (``spare_families``)."""
    redrawn = 0
    for _ in range(st.settings.redraw_rounds):
        bad = [i for i, f in enumerate(fits) if _bad(st, f)][: max(0, st.spare_families - redrawn)]
        if not bad:
            break
        new = [
            st.domain.family(fams[i].key, factor=_refit_factor(st.settings, fits[i]) * _factor(st, fams[i]))
            for i in bad
        ]
        for i, f, fit in zip(bad, new, _fit_all(st, new, "families"), strict=True):
            fams[i], fits[i] = f, fit
        redrawn += len(bad)
    return redrawn


def _refit_factor(s: QuerySettings, fit: FamilyFit) -> float:
    """A redrawn family's scale change: smaller when a head saturates (by at most ``max_shrink``: a saturated
    fit's largest pole is unreliable), larger when every logit is near 0 (the poles then coincide), else the
    same (a new first token separates close poles)."""
    top = fit.largest_logit
    if top > s.max_family_logit:
        return max(s.max_shrink, math.sqrt(s.target_logit / top))
    if top < s.target_logit / 4:
        return min(4.0, math.sqrt(s.target_logit / max(top, 0.05)))
    return 1.0


def _factor(st: RunState, fam: Family) -> float:
    """The family's scale relative to the domain's (its step's norm over s)."""
    return float(np.linalg.norm(fam.delta)) / st.domain.scale if st.domain.kind == "real" else 1.0


def _coefficients(st: RunState, fam: Family, b: int) -> tuple[float, float]:
    """δ = c_0 u_0 + c_b u_b: the family's step in the domain's basis (c_0 = 0 for an axis family b >= 1)."""
    assert st.domain.basis is not None
    c = st.domain.basis @ fam.delta
    return float(c[0]), float(c[b])


def assemble_ws(
    st: RunState, fams: dict[tuple[int, int], Family], fits: dict[tuple[int, int], FamilyFit]
) -> tuple[np.ndarray, float]:
    """W_i: family (0, b)'s residues are c_b u_b W_i, matched to family (0, 0)'s heads through the sum family
    (0, −b) (residues c_0 u_0 W_i + c_b u_b W_i), then W_i = Uᵀ (u_b W_i)_b; grid families (a, b), a >= 1, are
    checked against the assembled W. Returns the W_i (m, d, d) and the largest relative matching gap."""
    d, m = st.d, st.m
    assert st.domain.basis is not None
    ref = fits[(0, 0)].residues / _coefficients(st, fams[(0, 0)], 0)[1]  # rows u_0 W_i
    rows = np.empty((m, d, d))
    rows[:, 0] = ref
    worst = 0.0
    for b in range(1, d):  # d − 1 small assignments
        c0, cb = _coefficients(st, fams[(0, -b)], b)
        rows_b = fits[(0, b)].residues / _coefficients(st, fams[(0, b)], b)[1]
        perm, gap = match_by_sums(c0 * ref, cb * rows_b, fits[(0, -b)].residues)
        rows[:, b] = rows_b[perm]
        worst = max(worst, gap)
    ws = np.einsum("bd,mbe->mde", st.domain.basis, rows)  # U orthonormal: W = Uᵀ (U W)
    for key, fit in fits.items():  # grid families: every head's residue must be δ W_i of the assembled W
        if key[0] >= 1:
            expect = np.einsum("d,mde->me", fams[key].delta, ws)
            worst = max(worst, match_to_reference(expect, fit.residues)[1])
    return ws, worst


def learn_ws(st: RunState) -> None:
    """The W_i: ΣW itself for one head; else the probe, every family of the layout, fits, matching."""
    assert st.sum_w is not None
    if st.m == 1:
        st.ws = st.sum_w[None].copy()
        if st.plan.layout == "grid":  # one head, one position: a two-token query per (first token, axis)
            t0 = time.perf_counter()
            starts = st.domain.tokens(st.d, 1)[:, 0]
            pairs = [st.domain.family((a, b), starts[a]) for a in range(st.d) for b in range(st.d)]
            _ask_families(st, pairs, "pairs")
            st.record("pairs", t0, {"pairs": len(pairs)})
        return
    probe_scale(st)
    t0 = time.perf_counter()
    keys = _layout(st)
    firsts = {a: st.domain.tokens(1, 1)[0, 0] for a in {k[0] for k in keys}}
    fams = [st.domain.family(k, firsts[k[0]] if st.plan.layout == "grid" else None) for k in keys]
    fits = _fit_all(st, fams, "families")
    redrawn = _refit_bad(st, fams, fits)
    by_key = {f.key: f for f in fams}
    fit_by_key = {f.key: fit for f, fit in zip(fams, fits, strict=True)}
    ws, gap = assemble_ws(st, by_key, fit_by_key)
    figures: dict[str, object] = {
        "families": len(fit_by_key),
        "copies": st.plan.copies,
        "redrawn": redrawn,
        "max_fit_residual": max(fit.residual for fit in fit_by_key.values()),
        "max_match_gap": gap,
    }
    if st.noise is None and gap > st.settings.match_rtol:  # with noise the LM fit decides
        st.record("families", t0, figures, "failed", f"heads do not match across families (gap {gap:.2e})")
        raise PhaseFailed(
            "families", f"the residues of one head disagree across families by {gap:.2e} > {st.settings.match_rtol}"
        )
    st.ws = ws
    st.record("families", t0, figures)


def _theta_queries_needed(st: RunState, have: int, k: int) -> int:
    """Θ queries of k tokens that bring every head's equations to d² plus a margin of d (none without Θ
    queries in the plan)."""
    if not st.plan.theta_queries:
        return 0
    per = k * (k - 1) if st.plan.rows == "all" else k - 1
    need = st.d * st.d + st.d - have
    return max(1, math.ceil(need / per)) if need > 0 else 0


def _equations(st: RunState) -> LogitEquations:
    assert st.sum_w is not None and st.ws is not None
    parts = [logit_equations(b.Xd, b.mult, b.Yd, st.sum_w, st.ws, _rows_read(st, b)) for b in st.batches]
    return LogitEquations.stack(parts, st.d, st.m)


def learn_thetas(st: RunState) -> None:
    """Θ_i from the log-ratio equations of every query asked (families and, in the plan, random Θ queries of
    k tokens, added until every head's system has rank d²)."""
    t0 = time.perf_counter()
    k = theta_tokens(st.d, st.m)
    n_new = _theta_queries_needed(st, _distinct_equations(st), k)
    eqs = _equations(st)
    ranks = np.zeros(st.m, dtype=int)
    for _ in range(4):
        if n_new:
            X = st.domain.tokens(n_new, k)
            Y = st.ask("theta", X)
            st.batches.append(Batch(X, Y, X, np.ones(k), Y))
            eqs = _equations(st)
        st.thetas, ranks = solve_thetas(eqs, st.m, st.d)
        deficit = st.d * st.d - int(ranks.min())
        if deficit <= 0 or not st.plan.theta_queries:
            break
        n_new = math.ceil(deficit / max(k - 1, k * (k - 1) // 4)) + 1  # a query's rank overlaps the others'
    eqs, reliable, extra = _reliable_thetas(st, eqs, k) if st.noise is None else (eqs, ranks, 0)
    figs = {"equations": int(eqs.design.shape[0]), "theta_tokens": k, "ranks": ranks.tolist()}
    figs.update({"reliable_ranks": reliable.tolist(), "smaller_theta_queries": extra})
    if np.any(ranks < st.d * st.d):
        st.record("theta", t0, figs, "failed", f"Θ systems of rank {ranks.tolist()} < d² = {st.d * st.d}")
        raise PhaseFailed("theta", f"the log-ratio equations have rank {ranks.tolist()} < d² = {st.d * st.d}")
    st.record("theta", t0, figs)


def _reliable_ranks(eqs: LogitEquations, m: int, d: int, min_weight: float) -> np.ndarray:
    """Each head's rank on the equations whose attention weights are at least ``min_weight`` (a smaller weight's
    log-ratio carries the round-off of the weights' linear solve divided by it)."""
    return np.array([np.linalg.matrix_rank(eqs.design[eqs.weight[:, i] >= min_weight]) for i in range(m)])


def _reliable_thetas(st: RunState, eqs: LogitEquations, k: int) -> tuple[LogitEquations, np.ndarray, int]:
    """Noise-free: while some head's reliable equations (weights >= ``theta_min_weight``) have rank below d² (the
    scale saturates the attention, and Θ's other directions rest on log-ratios of weights below round-off), ask
    Θ queries at ``theta_shrink`` times the previous round's scale and solve again. Returns the equations, the
    reliable ranks and the queries added."""
    s, d2 = st.settings, st.d * st.d
    reliable = _reliable_ranks(eqs, st.m, st.d, s.theta_min_weight)
    extra, factor = 0, 1.0
    for _ in range(s.theta_rounds if st.plan.theta_queries else 0):
        deficit = d2 - int(reliable.min())
        if deficit <= 0:
            break
        factor *= s.theta_shrink
        n_new = math.ceil(deficit / max(k - 1, k * (k - 1) // 4)) + 1
        X = st.domain.tokens(n_new, k) * factor
        Y = st.ask("theta", X)
        st.batches.append(Batch(X, Y, X, np.ones(k), Y))
        extra += n_new
        eqs = _equations(st)
        reliable = _reliable_ranks(eqs, st.m, st.d, s.theta_min_weight)
    if extra:
        st.thetas = solve_thetas(eqs, st.m, st.d)[0]
    return eqs, reliable, extra


def _distinct_equations(st: RunState) -> int:
    """Independent log-ratio equations per head the batches already give (a family's copies repeat its two)."""
    per_family = len(st.read_rows)
    fams = sum(b.X.shape[0] for b in st.batches if b.Xd.shape[1] == 2 and b.mult[1] == 1.0)
    return per_family * fams


def _rows_read(st: RunState, b: Batch) -> tuple[int, ...]:
    """The distinct tokens whose output rows a batch gives (the first only when the plan reads one position)."""
    if st.plan.rows == "first":
        return (0,)
    return tuple(range(b.Xd.shape[1]))


def _validation_error(st: RunState, thetas: np.ndarray, ws: np.ndarray) -> float:
    assert st.X_val is not None and st.Y_val is not None
    return relative_mse(forward(thetas, ws, st.X_val), st.Y_val)


def validate(st: RunState) -> None:
    """Fresh random queries (asked once more to check that the oracle is a function of its input), scored."""
    t0 = time.perf_counter()
    k = theta_tokens(st.d, st.m)
    st.X_val = st.domain.tokens(st.settings.validation_queries, k)
    index = st.oracle.queries
    st.oracle.phase = "validation"
    st.Y_val = st.oracle.ask(st.X_val)
    st.oracle.remember(st.X_val, st.Y_val, index)
    st.oracle.check_repeat()
    assert st.thetas is not None and st.ws is not None
    st.validation_error = _validation_error(st, st.thetas, st.ws)
    st.record("validation", t0, {"validation_error": st.validation_error, "tokens_per_query": k})


def refine(st: RunState) -> None:
    """While the model does not validate: W for the current Θ by least squares on every answer read, then Θ
    for that W from the log-ratio equations (no new query); the best model on validation is kept."""
    assert st.thetas is not None and st.ws is not None
    t0 = time.perf_counter()
    history = [st.validation_error]
    th, ws = st.thetas, st.ws
    for _ in range(st.settings.refine_rounds):
        if st.validation_error <= st.tol:
            break
        ws = refit_ws(th, [(b.X, b.Y) for b in st.batches])
        st.ws = ws
        th = solve_thetas(_equations(st), st.m, st.d)[0]
        err = _validation_error(st, th, ws)
        history.append(err)
        if err < st.validation_error:
            st.thetas, st.validation_error = th, err
        else:
            break
    st.ws = refit_ws(st.thetas, [(b.X, b.Y) for b in st.batches]) if len(history) > 1 else st.ws
    st.validation_error = min(st.validation_error, _validation_error(st, st.thetas, st.ws))
    st.record("refine", t0, {"validation_errors": history})


def least_squares_fit(st: RunState) -> None:
    """With output noise: fresh random queries (4× the 2md² parameters in numbers) and variable-projection
    Levenberg–Marquardt from the algebraic model to the least-squares model on them."""
    assert st.thetas is not None
    t0 = time.perf_counter()
    k = theta_tokens(st.d, st.m)
    n_fit = math.ceil(8 * st.m * st.d / k) + 1
    X = st.domain.tokens(n_fit, k)
    Y = st.ask("least-squares", X, average=False)
    st.batches.append(Batch(X, Y, X, np.ones(k), Y))
    Xs = np.concatenate([b.X for b in st.batches if b.X.shape[1] == k])
    Ys = np.concatenate([b.Y for b in st.batches if b.X.shape[1] == k])
    th, ws, cost, iters = lm_vp(st.thetas, Xs, Ys, PolishSettings())
    st.thetas, st.ws = th, ws
    st.record("least-squares", t0, {"examples": int(Xs.shape[0]), "train_error": cost, "iterations": iters})


def noise_floor(st: RunState) -> float:
    """The validation relative MSE the true layer would have under the declared noise σ."""
    if st.noise is None or st.Y_val is None:
        return 0.0
    return st.noise**2 * st.Y_val.size / max(float(np.sum(st.Y_val**2)), np.finfo(float).tiny)


def random_starts(st: RunState) -> None:
    """With noise, when the algebraic start's LM fit is not at the noise floor: VP-LM from random starts
    (``sculpt.vplm``) on the least-squares queries, kept if it validates better."""
    assert st.X_val is not None and st.Y_val is not None
    t0 = time.perf_counter()
    k = theta_tokens(st.d, st.m)
    Xs = np.concatenate([b.X for b in st.batches if b.X.shape[1] == k])
    Ys = np.concatenate([b.Y for b in st.batches if b.X.shape[1] == k])
    fit = vp_lm_starts(Xs, Ys, st.X_val, st.Y_val, st.m, st.domain.gen, tol=st.tol + 2.0 * noise_floor(st))
    model = fit.model
    err = math.inf if model is None else _validation_error(st, model.thetas, model.ws)
    if model is not None and err < st.validation_error:
        st.thetas, st.ws, st.validation_error = model.thetas, model.ws, err
    st.record(
        "random-starts", t0, {"validation_error": err, "starts": len(fit.starts), "kept": err <= st.validation_error}
    )


def run_plan(st: RunState) -> RunState:
    """Every step of ``st.plan`` in order (``PhaseFailed`` propagates with the records kept in ``st``)."""
    read_sum_w(st)
    learn_ws(st)
    learn_thetas(st)
    if st.noise is not None and st.plan.rows == "all":
        least_squares_fit(st)
    validate(st)
    if st.noise is not None and st.plan.rows == "all" and st.validation_error > st.tol + 2.0 * noise_floor(st):
        random_starts(st)
    if st.validation_error > st.tol and (st.noise is None or st.plan.rows == "first"):
        refine(st)
    polish = st.settings.polish_above < st.validation_error < st.settings.polish_below
    if st.noise is None and polish and st.plan.rows == "all":
        # LM on fresh random queries from the close model (a route reading one position keeps its ALS refinement)
        least_squares_fit(st)
        assert st.thetas is not None and st.ws is not None
        st.validation_error = _validation_error(st, st.thetas, st.ws)
        st.records[-1].figures["validation_error"] = st.validation_error
    return st
