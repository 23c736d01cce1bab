"""``learn_from_queries``: learn F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i from black-box access to F."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

import numpy as np

from .._checks import SeedLike, as_generator, check_m, check_positive_int
from ..errors import PhaseFailed
from ..model import MultiHeadAttention
from ..result import LearnResult, PhaseRecord, RouteInfo
from ..settings import Settings
from ..toolkit import forward
from .design import DOMAINS, Domain
from .errors import QueryBudgetExceeded
from .oracle import QueryOracle, as_oracle
from .pipeline import RunState, noise_floor, run_plan
from .routes import QUERY_ROUTES, Planned, QueryRoute, choose_route, kkg_bound
from .settings import QuerySettings, query_settings

__all__ = ["learn_from_queries", "QUERY_METHODS"]

#: ``method`` values: "auto" and every registered query route
QUERY_METHODS = ("auto", *QUERY_ROUTES)


def _checked(
    d: object, m: object, method: object, max_queries: object, noise: object, domain: object
) -> tuple[int, int, int | None, float | None]:
    d_ = check_positive_int(d, "d")
    m_ = check_m(m)
    if method != "auto" and method not in QUERY_ROUTES:
        raise ValueError(f"method must be one of {('auto', *QUERY_ROUTES)}, got {method!r}")
    mq = None if max_queries is None else check_positive_int(max_queries, "max_queries")
    if noise is not None:
        if isinstance(noise, bool) or not isinstance(noise, (int, float, np.floating, np.integer)):
            raise TypeError(f"noise must be a number or None, got {type(noise).__name__}")
        if not (math.isfinite(float(noise)) and float(noise) >= 0):
            raise ValueError(f"noise must be a finite σ >= 0, got {noise!r}")
    if domain not in DOMAINS:
        raise ValueError(f"domain must be one of {DOMAINS}, got {domain!r}")
    return d_, m_, mq, None if noise is None else float(noise)


def _plan(method: str, d: int, m: int, budget: int) -> tuple[QueryRoute, Planned]:
    if method == "auto":
        return choose_route(d, m, budget)
    route = QUERY_ROUTES[method]
    return route, route.plan(d, m, budget)


def _train_error(st: RunState, model: MultiHeadAttention) -> float:
    """Relative MSE on every output row the route read."""
    num = den = 0.0
    for b in st.batches:
        keep = np.isfinite(b.Y)
        pred = forward(model.thetas, model.ws, b.X)
        num += float(np.sum((pred[keep] - b.Y[keep]) ** 2))
        den += float(np.sum(b.Y[keep] ** 2))
    return num / den if den > 0 else (0.0 if num == 0 else math.inf)


def _result(st: RunState, route: QueryRoute, planned: Planned, failure: PhaseFailed | None, t0: float) -> LearnResult:
    # a failed run still hands back what it fitted (converged=False), as every route of ``learn`` does
    model = None if st.thetas is None or st.ws is None else MultiHeadAttention(st.thetas, st.ws)
    floor = noise_floor(st)
    val = st.validation_error if model is not None else math.inf
    converged = failure is None and model is not None and val <= st.tol + 2.0 * floor
    exact = converged and val <= st.tol
    status = "exact" if exact else "noise" if converged else "failed"
    sigma = None
    if status == "noise" and st.Y_val is not None:  # σ̂ from the validation residual: √(rel. MSE · mean Y²)
        sigma = math.sqrt(val * float(np.sum(st.Y_val**2)) / max(st.Y_val.size, 1))
    if failure is not None:
        reason = f"phase {failure.phase!r} failed: {failure.reason}"
    elif converged:
        reason = f"validation relative MSE {st.validation_error:.2e} <= tol {st.tol:.0e}" + (
            f" + twice the noise floor {floor:.2e}" if floor else ""
        )
    else:
        reason = f"validation relative MSE {st.validation_error:.2e} above tol {st.tol:.0e}"
    info = RouteInfo(route=route.name, model_from=route.name, tol=st.tol, validation_examples=_validation_count(st))
    info.details.update(
        {
            "queries": st.oracle.queries,
            "tokens": st.oracle.tokens,
            "queries_by_phase": st.oracle.counts(),
            "predicted_queries": planned.predicted,
            "kkg_bound": kkg_bound(st.d, st.m),
            "copies": st.plan.copies,
            "rows_read": st.plan.rows,
            "domain": st.domain.kind,
            "scale": st.domain.scale,
            "noise": st.noise,
            "noise_floor": floor,
        }
    )
    res = LearnResult(
        model,
        f"queries:{route.name}",
        _train_error(st, model) if model is not None else math.inf,
        st.validation_error if model is not None else None,
        converged=converged,
        status=status,
        noise_sigma=sigma,
        time=time.perf_counter() - t0,
        samples_used=st.oracle.queries,
        phases=st.records,
        reason=reason,
        info=info,
    )
    if st.X_val is not None and st.Y_val is not None:
        res.attach_held_out(st.X_val, st.Y_val)
    return res


def _state(
    q: QueryOracle,
    domain: str,
    d: int,
    m: int,
    gen: np.random.Generator,
    planned: Planned,
    sigma: float | None,
    budget: int,
    settings: QuerySettings,
) -> RunState:
    """A fresh attempt's state: new random tokens and basis, the plan's spare families (with noise: answers
    averaged over repeats within a quarter of the budget, a quarter kept for redrawing families)."""
    st = RunState(q, Domain(domain, d, gen), planned.plan, m, sigma, float(Settings().tol), settings)
    st.spare_families = planned.spare_families
    if sigma:
        st.repeats = max(1, min(settings.max_repeats, budget // (4 * max(planned.predicted, 1))))
        spare = (budget // 2 - st.repeats * planned.predicted) // max(1, st.repeats * st.plan.copies)
        st.spare_families = max(0, spare)
    return st


def _validation_count(st: RunState) -> int:
    return 0 if st.X_val is None else int(st.X_val.shape[0])


def learn_from_queries(
    oracle: object,
    d: int,
    m: int,
    *,
    method: str = "auto",
    max_queries: int | None = None,
    seed: SeedLike = None,
    noise: float | None = None,
    domain: str = "real",
    settings: QuerySettings | Mapping[str, object] | None = None,
) -> LearnResult:
    """Learn m heads of F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i from black-box access to F, with queries of its choice.

    The learner asks ``oracle`` for F on inputs it designs: single tokens, a token followed by n copies of a
    second one, and random sequences. With ``domain="real"`` they are any real tokens (scaled so that the
    logits are of order one); ``domain="boolean"`` keeps every token in {−1, +1}^d.

    Parameters
    ----------
    oracle : callable, MultiHeadAttention or torch.nn.Module
        ``oracle(X)`` takes X of shape (n, k, d) for any k the learner chooses and returns (n, k, d). A
        ``torch.nn.MultiheadAttention`` is called as self-attention (``module(X, X, X)``, its batch_first
        convention respected, inputs cast to its dtype: use float64 for exact recovery); torch is imported only
        for a torch module.
    d, m : int
        Token dimension and heads (m <= d).
    method : str
        "auto" (the route with the fewest predicted queries), "rational" (every output row, ours), "kkg" (the
        first row only, Kim, Kim & Guo reconstructed) or "one-head" (m = 1, Bhattamishra et al.).
    max_queries : int, optional
        The most queries to ask (queries = sequences); default 4md² − 2m + 1, Kim, Kim & Guo's count. A plan
        that does not fit raises ``QueryBudgetExceeded`` before any query.
    seed : None, int or numpy.random.Generator
        The queries' randomness.
    noise : float, optional
        The answers' noise level σ (entrywise): the model is then the least-squares fit on fresh random queries,
        ``converged`` means the validation error is within twice the noise floor, and the oracle may answer a
        repeated query differently. None: the oracle is exact.
    domain : str
        "real" or "boolean".
    settings : QuerySettings or mapping, optional
        The routes' tuned constants (``sculpt.queries.QuerySettings``), or a mapping of fields to override in
        the defaults; an unknown name is a TypeError naming it.

    Returns
    -------
    LearnResult
        ``model``, ``status`` and ``converged`` (validation relative MSE <= 1e-12: "exact"; within twice the
        noise floor: "noise", σ̂ in ``noise_sigma``), ``reason``, one
        ``PhaseRecord`` per step with its queries and tokens, ``samples_used`` = queries asked, ``info.details``
        with the queries and tokens by phase, and ``certificate`` on the validation queries.

    Raises
    ------
    OracleShapeError, OracleNonFinite, OracleNotDeterministic
        The oracle's answer to the named query is of the wrong shape, not finite, or differs when asked twice.
    QueryBudgetExceeded
        ``max_queries`` is too small for the route.

    Examples
    --------
    >>> from sculpt import learn_from_queries, plant
    >>> layer = plant(8, 4, 2, seed=1)
    >>> res = learn_from_queries(layer, 8, 2, seed=0)
    >>> res.converged, res.samples_used <= 4 * 2 * 8**2 - 2 * 2 + 1
    (True, True)
    >>> layer.distance(res.model).max_theta_error < 1e-6
    True
    """
    t0 = time.perf_counter()
    d, m, mq, sigma = _checked(d, m, method, max_queries, noise, domain)
    s = query_settings(settings)
    fn = as_oracle(oracle)
    budget = kkg_bound(d, m) if mq is None else mq
    route, planned = _plan(method, d, m, budget)
    q = QueryOracle(fn, d, max_queries=budget, noise=sigma, settings=s)
    gen = as_generator(seed, "seed")
    st, failure = _attempts(q, domain, d, m, gen, planned, sigma, budget, s)
    return _result(st, route, planned, failure, t0)


def _attempts(
    q: QueryOracle,
    domain: str,
    d: int,
    m: int,
    gen: np.random.Generator,
    planned: Planned,
    sigma: float | None,
    budget: int,
    s: QuerySettings,
) -> tuple[RunState, PhaseFailed | None]:
    """Up to ``s.attempts`` runs of the plan, each on new random queries, until one validates (or the budget
    cannot hold another): the best run (validated first, then the lowest validation error), with every run's
    records, and its failure if it failed."""
    records: list[PhaseRecord] = []
    best: tuple[RunState, PhaseFailed | None] | None = None
    for attempt in range(s.attempts):
        st = _state(q, domain, d, m, gen, planned, sigma, budget, s)
        failure = None
        try:
            run_plan(st)
        except PhaseFailed as exc:
            failure = exc
        except QueryBudgetExceeded:
            if attempt == 0:
                raise
            failure = PhaseFailed("retry", f"the budget of {budget} queries ran out in attempt {attempt + 1}")
        for rec in st.records:
            rec.figures["attempt"] = attempt + 1
        records += st.records
        if best is None or (
            failure is None and (best[1] is not None or st.validation_error < best[0].validation_error)
        ):
            best = (st, failure)
        done = failure is None and st.validation_error <= st.tol + 2.0 * noise_floor(st)
        if done or q.queries + planned.predicted > budget:
            break
    assert best is not None
    best[0].records = records
    return best
