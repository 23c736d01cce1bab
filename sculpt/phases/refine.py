"""Phase 3: refine ΣW with the min-norm proxy and LP-certified large-margin rows, then re-sculpt K*.

Each round (docs/method.md#recon-phase-3 and #recon-certifying-design): Θ̄ = argmin_{Θ∈K} ‖Θ‖_F is the proxy. The rows with the largest
proxy margin (top-1 minus top-2 logit x_aᵀΘ̄x_j) are candidates; a candidate (x_a, j*) is certified when
cm = min_{j≠j*} min_{Θ∈K} ⟨Θ, x_a(x_{j*} − x_j)ᵀ⟩ >= γ, so every head in K puts mass >= 1 − (k−1)e^{−cm} on
j* and y_a ≈ x_{j*}ᵀ ΣW. The LP minima are bounded from below by constraint generation over the body
(oracles.WorkingSetMinimizer: every bound is sound) and from above by a pool of points of K
(earlier LP optima and Θ̄), which rejects most hopeless candidates without an LP. ΣŴ is the least-squares
fit on the best certified rows (the top ``need`` by cm, enlarged until cond(Z) <= ``max_cond``). The body is
re-sculpted with the new ΣŴ before the next round; the loop stops when ΣŴ stops changing. Finally
K* = sculpt(mode="slabs").
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from oracles import WorkingSetMinimizer, min_norm_point

from .._checks import check_data, check_sum_w
from ..result import PhaseRecord
from ..settings import BodySettings, ProblemSize, RefineSettings
from ._simplex import simplex_lstsq, token_gram_ok
from .sculpting import BodyMode, SculptedBody, sculpt
from .sum_w import agreement_refit

if TYPE_CHECKING:
    from ..model import MultiHeadAttention

__all__ = ["refine_sum_w", "certify_rows", "Certification", "proxy_method"]


def proxy_method(dim: int, max_working_set_dim: int) -> str:
    """The ``oracles.min_norm_point`` method phase 3 uses for the proxy of a body in R^dim (dim = d²).

    Parameters
    ----------
    dim : int
        The body's dimension.
    max_working_set_dim : int
        ``RefineSettings.proxy_working_set_max_dim``.

    Returns
    -------
    str
        "working_set" (constraint generation) when dim <= ``max_working_set_dim``, else the dense "ipm".
    """
    return "working_set" if dim <= max_working_set_dim else "ipm"


@dataclass
class Certification:
    """Certified candidates of one round: ``rows`` (flat row ids n·k + a), ``j_star``, certified margins
    ``margin`` (sound lower bounds on the smallest logit gap over K), ``proxy_margin``, ``n_candidates``,
    ``n_lps`` and ``n_pruned`` (rejected by the upper-bound pool without an LP)."""

    rows: np.ndarray
    j_star: np.ndarray
    margin: np.ndarray
    proxy_margin: np.ndarray
    n_candidates: int
    n_lps: int
    n_pruned: int

    def subset(self, mask: np.ndarray) -> Certification:
        """The certified rows selected by ``mask`` (the counts are the round's)."""
        return Certification(
            self.rows[mask],
            self.j_star[mask],
            self.margin[mask],
            self.proxy_margin[mask],
            self.n_candidates,
            self.n_lps,
            self.n_pruned,
        )


def _ranked_candidates(
    X: np.ndarray, proxy: np.ndarray, n_candidates: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``n_candidates`` rows with the largest proxy margin (top-1 minus top-2 logit under Θ̄ = ``proxy``),
    best first, among examples whose tokens are independent. Returns (candidate row ids, each row's top token
    j*, each row's proxy margin), the last two over all N·k rows."""
    N, k, d = X.shape
    L = np.einsum("nad,de,nje->naj", X, proxy.reshape(d, d), X).reshape(-1, k)
    srt = np.sort(L, 1)
    margin = srt[:, -1] - srt[:, -2]
    js = L.argmax(1)
    margin[~np.repeat(token_gram_ok(X), k)] = -np.inf
    cand = np.argsort(-margin, kind="stable")[:n_candidates]
    return cand[np.isfinite(margin[cand])], js, margin


def _lp_margin(lpm: WorkingSetMinimizer, C: np.ndarray, ub: np.ndarray, thr: float, pool: list[np.ndarray]) -> float:
    """A sound lower bound on min_j min_{Θ∈K} ⟨C_j, Θ⟩, bounding the pairs j in increasing order of their pool
    upper bound ``ub`` and stopping at the first bound <= ``thr`` (the row then fails); exact LP optima join
    ``pool``."""
    val = np.inf
    for jj in np.argsort(ub):
        res = lpm.bound(C[jj], stop_above=thr)
        if res.exact:
            pool.append(res.x)
        val = min(val, res.lower)
        if val <= thr:
            break
    return float(val)


def certify_rows(
    X: np.ndarray,
    body: SculptedBody,
    proxy: np.ndarray,
    settings: RefineSettings,
    *,
    solver: str | None = None,
) -> Certification:
    """LP certification over the body K of the ``n_candidates`` rows with the largest proxy margin.

    Rows are examined in decreasing proxy margin, at most ``max_per_token`` per distinct token x_{j*} (the proxy
    favours a few tokens, and repeated tokens do not help the least-squares design). A row is kept when its
    certified margin exceeds the running threshold max(``gamma_min``, the ``need``-th best so far); the scan
    stops after ``stop_after`` certified rows once their tokens x_{j*} form a design with cond <= ``max_cond``,
    after 2·``stop_after`` in any case. Token pairs (j*, j) are bounded in increasing order of their pool upper
    bound, and a row is dropped at the first pair whose bound falls below the threshold.

    Parameters
    ----------
    X : np.ndarray, shape (N, k, d)
        Inputs (checked by the caller).
    body : SculptedBody
        The half-space body K over vec Θ.
    proxy : np.ndarray, shape (d²,)
        A point of K (the min-norm point Θ̄) that ranks the rows.
    settings : RefineSettings
        Phase 3's settings; "auto" fields are resolved here (the ones read do not depend on m).
    solver : str, optional
        LP backend of the certification LPs (None: the engine's default).

    Returns
    -------
    Certification
        The certified rows, best margin not necessarily first.
    """
    N, k, d = X.shape
    s = settings.resolve(ProblemSize.of(X, m=1), body.box)
    assert s.need is not None and s.stop_after is not None  # resolved
    need, stop_after, thr = s.need, s.stop_after, s.gamma_min
    cand, js, margin = _ranked_candidates(X, proxy, s.n_candidates)
    A, b = body.constraints()
    lpm = WorkingSetMinimizer(
        A, b, -body.box, body.box, working=s.working, max_rounds=s.lp_rounds, shared=False, solver=solver
    )
    pool = [proxy.copy()]
    cm = np.full(cand.size, -np.inf)
    best: list[float] = []
    n_pruned = 0
    others = np.array([[j for j in range(k) if j != js_] for js_ in range(k)])
    seen: dict[bytes, int] = {}
    Zc: list[np.ndarray] = []
    for ci, row in enumerate(cand):
        n, a = divmod(int(row), k)
        j0 = int(js[row])
        key = X[n, j0].tobytes()
        if seen.get(key, 0) >= s.max_per_token:
            continue
        C = np.einsum("p,jq->jpq", X[n, a], X[n, j0][None] - X[n, others[j0]]).reshape(k - 1, -1)
        ub = (C @ np.array(pool).T).min(1)
        if ub.min() <= thr:
            n_pruned += 1
            continue
        val = _lp_margin(lpm, C, ub, thr, pool)
        if val <= thr:  # not certified above the running threshold (a partial minimum is no certificate)
            continue
        cm[ci] = val
        seen[key] = seen.get(key, 0) + 1
        Zc.append(X[n, j0])
        best.append(val)
        if len(best) >= need:
            thr = max(s.gamma_min, sorted(best)[-need])
        if len(best) >= 2 * stop_after or (len(best) >= stop_after and np.linalg.cond(np.array(Zc)) <= s.max_cond):
            cand, cm = cand[: ci + 1], cm[: ci + 1]
            break
    keep = np.isfinite(cm)
    return Certification(cand[keep], js[cand[keep]], cm[keep], margin[cand[keep]], int(cand.size), lpm.n_lps, n_pruned)


def _select(X: np.ndarray, cert: Certification, need: int, max_cond: float) -> np.ndarray:
    """Indices into cert of the top-``need`` rows by certified margin, enlarged until cond(Z) <= max_cond."""
    N, k, d = X.shape
    order = np.argsort(-cert.margin, kind="stable")
    n_, _ = np.divmod(cert.rows, k)
    Z = X[n_, cert.j_star]
    ns = min(need, order.size)
    while ns <= order.size and ns >= d:
        sv = np.linalg.svd(Z[order[:ns]], compute_uv=False)
        if sv[-1] > 0 and sv[0] / sv[-1] <= max_cond:
            return order[:ns]
        ns += 1
    return order[:0]


def _update_sum_w(
    X: np.ndarray, Y: np.ndarray, W: np.ndarray, cert: Certification, s: RefineSettings, info: dict[str, object]
) -> tuple[np.ndarray, np.ndarray]:
    """ΣŴ from the strongly certified rows ``cert``; what was done goes to ``info``. Returns (ΣŴ, the indices
    into ``cert`` of the rows used; none when ΣŴ is kept)."""
    N, k, d = X.shape
    assert s.need is not None  # resolved
    sel = _select(X, cert, s.need, s.max_cond)
    if sel.size >= d:
        n_, a_ = np.divmod(cert.rows[sel], k)
        Z = X[n_, cert.j_star[sel]]
        info.update(
            rows_used=int(sel.size),
            gamma=float(cert.margin[sel].min()),
            cond=float(np.linalg.cond(Z)),
            method="LP-certified least squares",
        )
        return np.linalg.lstsq(Z, Y[n_, a_], rcond=None)[0], sel
    if cert.rows.size == 0:
        # too few rows certified at margin >= gamma_accept: their leakage (up to (k−1)e^{−γ} per row) would
        # cost more than it gains over the phase-1 estimate, so ΣŴ is kept (method doc)
        info.update(rows_used=0, method=f"kept: {cert.rows.size} rows certified at margin >= {s.gamma_accept:g}")
        return W, sel
    # the certified tokens do not span R^d well (the proxy favours tokens sharing some signs): ΣŴ moves only
    # along the well-determined right-singular directions of the design, W ← W + V_r S_r⁻¹ U_rᵀ (Y_sel − Z W);
    # the rest (tokens that win attention in every head share some structure, so 1-sparse rows cannot see
    # them) take the agreement variable-projection refit restricted to them
    n_all, a_all = np.divmod(cert.rows, k)
    Z = X[n_all, cert.j_star]
    U, sv, Vt = np.linalg.svd(Z, full_matrices=True)
    r = int(np.sum(sv >= sv[0] / s.max_cond))
    W = W + Vt[:r].T @ ((U[:, :r].T @ (Y[n_all, a_all] - Z @ W)) / sv[:r, None])
    W, _ = agreement_refit(
        X,
        Y,
        W,
        n_rows=s.refit_rows,
        q_tol=s.refit_q_tol,
        max_iter=s.refit_max_iter,
        stall=s.refit_stall,
        stop_rms=0.0,
        basis=Vt[r:],
    )
    info.update(
        rows_used=int(cert.rows.size),
        gamma=float(cert.margin.min()),
        directions=r,
        method=f"LP-certified least squares on {r} of {d} directions (design cond > {s.max_cond:g}); "
        "agreement-row refit on the rest",
    )
    return W, np.arange(cert.rows.size)


def _sculpt(
    X: np.ndarray,
    Y: np.ndarray,
    W: np.ndarray,
    body: BodySettings,
    mode: BodyMode,
    solver: str | None,
    truth: MultiHeadAttention | None,
    need_equalities: int | None = None,
) -> tuple[SculptedBody, PhaseRecord]:
    """Phase 2's ``sculpt`` with ΣŴ = W and the body settings ``body`` (a re-sculpt, or K*)."""
    return sculpt(X, Y, W, body, mode=mode, solver=solver, truth=truth, need_equalities=need_equalities)


@dataclass
class _Round:
    """One certification round: the new ΣŴ ``W``, the round's ``body``, its ``figures`` for the record, and the
    counts the record totals (``kept``: too few strong rows, ΣŴ unchanged)."""

    W: np.ndarray
    body: SculptedBody
    figures: dict[str, object]
    certified: int
    lps: int
    change: float
    kept: bool
    false_certificates: int


def _certification_round(
    X: np.ndarray,
    Y: np.ndarray,
    W: np.ndarray,
    body: SculptedBody,
    s: RefineSettings,
    rnd: int,
    solver: str | None,
    truth: MultiHeadAttention | None,
) -> _Round:
    """One round: the body re-sculpted with ΣŴ = W (from the second round on), its min-norm proxy, the
    certification LPs and the new ΣŴ."""
    tr = time.perf_counter()
    info: dict[str, object] = {"round": rnd}
    if rnd > 0:
        body, srec = _sculpt(X, Y, W, s.resculpt, "halfspaces", solver, truth)
        info["sculpt_time"] = srec.time
        if truth is not None:
            info["heads_max_violation"] = srec.truth.get("max_violation")
    elif truth is not None:
        info["heads_max_violation"] = None
    tp = time.perf_counter()
    method = proxy_method(body.dim, s.proxy_working_set_max_dim)  # the IPM's fallback QP: the default backend
    proxy = min_norm_point(body.polytope, method=method, solver=solver if method == "working_set" else None)
    info["proxy_time"] = time.perf_counter() - tp
    info["proxy_norm"] = float(np.linalg.norm(proxy))
    tc = time.perf_counter()
    # the certification LPs run on the engine's default LP backend whatever ``solver`` is (as they always have:
    # their optimal values are the margins' certificates)
    cert = certify_rows(X, body, proxy, s)
    info.update(
        candidates=cert.n_candidates,
        certified=int(cert.rows.size),
        lps=cert.n_lps,
        pruned=cert.n_pruned,
        certify_time=time.perf_counter() - tc,
    )
    n_certified, n_lps = int(cert.rows.size), cert.n_lps
    cert = cert.subset(cert.margin >= s.gamma_accept)
    W_new, used = _update_sum_w(X, Y, W, cert, s, info)
    change = float(np.linalg.norm(W_new - W) / max(np.linalg.norm(W), 1e-300))
    info["relative_change"] = change
    false_certificates = 0
    if truth is not None:
        truth_figures = _truth_round(truth, X, W_new, proxy, cert, used)
        false_certificates = int(truth_figures["false_certificates"])
        info.update(truth_figures)
    info["time"] = time.perf_counter() - tr
    return _Round(W_new, body, info, n_certified, n_lps, change, cert.rows.size == 0, false_certificates)


def _truth_round(
    truth: MultiHeadAttention, X: np.ndarray, W: np.ndarray, proxy: np.ndarray, cert: Certification, used: np.ndarray
) -> dict[str, float]:
    """A round's figures against the true layer: Σ̂W's error, false certificates among the rows used, and the
    proxy's distance to the mean head."""
    S = truth.ws.sum(0)
    out: dict[str, float] = {"err_sum_w": float(np.linalg.norm(W - S) / np.linalg.norm(S))}
    if used.size:
        n_, a_ = np.divmod(cert.rows[used], X.shape[1])
        out.update(_false_certificates(truth, X, n_, a_, cert.j_star[used], cert.margin[used]))
    else:
        out["false_certificates"] = 0
    d = X.shape[2]
    mean_head = truth.thetas.mean(0)
    out["proxy_rel_dist_mean_head"] = float(np.linalg.norm(proxy.reshape(d, d) - mean_head) / np.linalg.norm(mean_head))
    return out


def _message(exact_fit: bool, certify: bool, fallback_used: bool, s: RefineSettings, n_examples: int) -> str:
    """The record's message: why no certification round ran, or that some round kept ΣŴ ("" otherwise)."""
    if fallback_used:
        return "some rounds kept ΣŴ unchanged (too few rows certified at margin >= gamma_accept)"
    if exact_fit:
        return (
            f"every row fits one common pattern exactly under ΣŴ (median residual <= {s.exact_fit_residual:g}): "
            "no rounds"
        )
    if not certify:
        why = (
            f"certify={s.certify}"
            if s.certify is not None
            else f"certify unset and {n_examples} < certify_min_examples = {s.certify_min_examples} examples"
        )
        return f"certification skipped ({why}): 0 rows certified, ΣŴ kept from phase 1; K* re-sculpted with it"
    return ""


def _checked(
    X: ArrayLike, Y: ArrayLike, W_sum: ArrayLike, body: SculptedBody, m: int, settings: RefineSettings | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, RefineSettings]:
    """``refine_sum_w``'s inputs checked (TypeError, ValueError naming the problem) and its settings resolved."""
    X, Y = check_data(X, Y)
    N, k, d = X.shape
    W = check_sum_w(W_sum, d)
    if not isinstance(body, SculptedBody):
        raise TypeError(f"body must be a SculptedBody, got {type(body).__name__}")
    if body.dim != d * d:
        raise ValueError(f"body lives in R^{body.dim}, expected R^{d * d} for d = {d}")
    s = (settings or RefineSettings()).resolve(ProblemSize.of(X, m), body.box)
    assert s.need is not None  # resolved
    if s.need < d:
        raise ValueError(f"need must be >= d = {d}, got {s.need}")
    return X, Y, W, s


def refine_sum_w(
    X: ArrayLike,
    Y: ArrayLike,
    W_sum: ArrayLike,
    body: SculptedBody,
    m: int,
    settings: RefineSettings | None = None,
    *,
    solver: str | None = None,
    truth: MultiHeadAttention | None = None,
) -> tuple[np.ndarray, SculptedBody, PhaseRecord]:
    """Phase 3: certification rounds refine ΣŴ, then the slab body K* is sculpted with it (module docstring).

    No round runs when one pattern fits every row under ΣŴ (median agreement residual <= ``exact_fit_residual``:
    one head, where certification could only add leakage error) or when ``settings.certifies(N)`` is False
    (certified margins plateau near log(1/q_f) and cannot beat phase 1's estimate there, docs/method.md): ΣŴ is
    kept and only K* is sculpted.

    Parameters
    ----------
    X, Y : array_like, shape (N, k, d)
        Inputs and the layer's outputs (phases 1–3's examples).
    W_sum : array_like, shape (d, d)
        Phase 1's Σ̂W.
    body : SculptedBody
        Phase 2's half-space body for ``W_sum``.
    m : int
        The head count (K* needs d² − (m − 1) equality rows for phase 4).
    settings : RefineSettings, optional
        Phase 3's settings (default: ``RefineSettings()``, what ``learn`` uses); "auto" fields are resolved
        here, the bodies with phase 2's box.
    solver : str, optional
        LP backend of the re-sculpts, K* and the working-set proxy (None: the engine's default); the
        certification LPs always run on the engine's default backend.
    truth : MultiHeadAttention, optional
        The true layer: per-round errors and false certificates go to the record's ``truth``.

    Returns
    -------
    W_sum : np.ndarray, shape (d, d)
        The refined ΣŴ (``W_sum`` itself when no round changed it).
    kstar : SculptedBody
        K*, sculpted with mode="slabs" under the returned ΣŴ.
    record : PhaseRecord
        "3-refine": the rounds' figures, K*'s figures under "kstar".

    Raises
    ------
    TypeError
        ``body`` is not a SculptedBody.
    ValueError
        Malformed data, a body not in R^{d²}, or ``need`` below d.
    PhaseFailed
        From K*'s sculpt (too few equality rows for phase 4).
    """
    t0 = time.perf_counter()
    X, Y, W, s = _checked(X, Y, W_sum, body, m, settings)
    N, k, d = X.shape
    rec = PhaseRecord("3-refine")
    # one pattern fitting every row exactly under ΣŴ (a single head: phase 1's refit is then exact) leaves
    # certification nothing but leakage error to add
    rel_all = simplex_lstsq(X, Y, W).rel
    exact_fit = bool(np.median(rel_all) <= s.exact_fit_residual)
    rec.figures["median_agreement_residual"] = float(np.median(rel_all))
    certify = s.certifies(N)
    rounds: list[_Round] = []
    for rnd in range(0 if exact_fit or not certify else s.rounds):
        rounds.append(_certification_round(X, Y, W, body, s, rnd, solver, truth))
        W, body = rounds[-1].W, rounds[-1].body
        if rounds[-1].change < s.change_tol:
            break
    ts = time.perf_counter()
    kstar, krec = _sculpt(X, Y, W, s.slabs, "slabs", solver, truth, need_equalities=d * d - (m - 1))
    fallback_used = any(r.kept for r in rounds)
    rec.figures.update(
        rounds=[r.figures for r in rounds],
        rounds_run=len(rounds),
        fallback_used=fallback_used,
        skipped_exact_fit=exact_fit,
        certified_total=sum(r.certified for r in rounds),
        lps_total=sum(r.lps for r in rounds),
        kstar=krec.figures,
        kstar_time=time.perf_counter() - ts,
        certification_skipped=bool(not certify and not exact_fit),
    )
    rec.message = _message(exact_fit, certify, fallback_used, s, N)
    if truth is not None:
        S = truth.ws.sum(0)
        rec.truth.update(
            err_sum_w=float(np.linalg.norm(W - S) / np.linalg.norm(S)),
            err_per_round=[r.figures.get("err_sum_w") for r in rounds],
            false_certificates=sum(r.false_certificates for r in rounds),
            kstar=krec.truth,
        )
    rec.time = time.perf_counter() - t0
    return W, kstar, rec


def _false_certificates(
    truth: MultiHeadAttention, X: np.ndarray, n_: np.ndarray, a_: np.ndarray, js: np.ndarray, cm: np.ndarray
) -> dict[str, float]:
    """False certificate: some true head's argmax is not j*. Margin violation: some head's true logit gap
    is below the certified margin (that head is outside K)."""
    P = truth.attention(X[n_])[np.arange(n_.size), :, a_]  # (R, m, k)
    logp = np.log(np.maximum(P, 1e-300))
    top = np.take_along_axis(logp, js[:, None, None].repeat(P.shape[1], 1), -1)[..., 0]  # (R, m)
    other = logp.copy()
    np.put_along_axis(other, js[:, None, None].repeat(P.shape[1], 1), -np.inf, -1)
    gap = top - other.max(-1)  # true logit gap per head
    leak = 1.0 - np.take_along_axis(P, js[:, None, None].repeat(P.shape[1], 1), -1)[..., 0]
    return {
        "false_certificates": int((gap.min(1) <= 0).sum()),
        "margin_violations": int((gap.min(1) < cm - 1e-6).sum()),
        "leakage_max": float(leak.max()),
        "true_gap_min": float(gap.min()),
    }
