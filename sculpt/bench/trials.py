"""One run of the benchmark: plant a layer, sample the trial's data, run one method, score it.

The trial (cell, seed) fixes the data; every method of the trial sees the same X, Y (the record's
``data_digest`` shows it). Scoring on ``test_samples`` fresh noise-free inputs:
test relative MSE = Σ‖F̂(X) − F(X)‖² / Σ‖F(X)‖², success ⇔ test relative MSE ≤ threshold (1e-12).
"""

from __future__ import annotations

import hashlib
import math
import platform
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from ..model import MultiHeadAttention
from ..toolkit import forward, relative_mse, to_jsonable, versions
from . import SCHEMA_VERSION, Json, TrialRecord
from .grid import Cell, RunSpec
from .methods import adam_implementation, get_method, refusal, warm_up

__all__ = [
    "Problem",
    "make_problem",
    "run_trial",
    "spec_from_record",
    "predict",
    "score",
    "relative_mse",
    "versions",
    "jsonable",
]


@dataclass
class Problem:
    """The data of one trial: the planted ``truth``, training ``X``, ``Y`` and noise-free test data."""

    truth: MultiHeadAttention
    X: np.ndarray
    Y: np.ndarray
    X_test: np.ndarray
    Y_test: np.ndarray

    @property
    def digest(self) -> str:
        """First 16 hex digits of sha256(X ‖ Y): equal digests mean the methods saw the same data."""
        h = hashlib.sha256(np.ascontiguousarray(self.X).tobytes())
        h.update(np.ascontiguousarray(self.Y).tobytes())
        return h.hexdigest()[:16]


def predict(model: object, X: np.ndarray) -> np.ndarray:
    """F̂(X) through the one forward pass (``sculpt.toolkit.forward``) for a model with ``thetas`` and ``ws``;
    other models (registered test methods) are called."""
    thetas, ws = getattr(model, "thetas", None), getattr(model, "ws", None)
    if thetas is not None and ws is not None:
        return forward(thetas, ws, X)
    if callable(model):
        return np.asarray(model(X), dtype=np.float64)
    raise TypeError(f"cannot evaluate a model of type {type(model).__name__}")


def score(Y_hat: np.ndarray, Y: np.ndarray) -> float:
    """The score: ``relative_mse`` Σ‖Ŷ − Y‖² / Σ‖Y‖² (inf when Ŷ is not finite or has the wrong shape)."""
    if Y_hat.shape != Y.shape:
        return math.inf
    return relative_mse(Y_hat, Y)


def make_problem(spec: RunSpec) -> Problem:
    """Plant the layer from ``spec.instance_seed`` and draw the data from ``spec.data_seed``:
    N training inputs, labels F(X) + noise·rms(F)·N(0,1), and ``test_samples`` noise-free test pairs."""
    from ..data import plant, sample_inputs

    c = spec.cell
    truth = plant(c.d, c.k, c.m, scale=c.scale, seed=spec.instance_seed, weak_head=c.weak_head, separation=c.separation)
    train_rng, noise_rng, test_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(spec.data_seed).spawn(3))
    X = sample_inputs(c.N, c.k, c.d, rng=train_rng, distribution=c.distribution)
    F = predict(truth, X)
    Y = F + c.noise * float(np.sqrt(np.mean(F**2))) * noise_rng.standard_normal(F.shape) if c.noise else F
    X_test = sample_inputs(spec.test_samples, c.k, c.d, rng=test_rng, distribution=c.distribution)
    return Problem(truth, X, Y, X_test, predict(truth, X_test))


def jsonable(value: object, *, max_array: int = 64) -> Json:
    """``sculpt.toolkit.to_jsonable`` keeping records small: arrays over ``max_array`` entries become a
    shape and norm note, lists over 4·max_array their length, head and last item; non-finite floats null."""
    return to_jsonable(value, max_array=max_array)


def _distance(
    truth: MultiHeadAttention, model: MultiHeadAttention
) -> tuple[float | None, float | None, list[int] | None]:
    """Head-matched parameter errors (theta_error, w_error, permutation) from ``truth.distance(model)``."""
    dist = truth.distance(model)
    get = (lambda k: dist.get(k)) if isinstance(dist, dict) else (lambda k: getattr(dist, k, None))
    perm = get("permutation")
    return (jsonable(get("theta_error")), jsonable(get("w_error")), None if perm is None else [int(p) for p in perm])


def run_trial(spec: RunSpec) -> TrialRecord:
    """Run ``spec`` and return its record (the schema is ``sculpt.bench.SCHEMA``). A method that raises
    gives a record with status "error" and the exception text; the sweep goes on."""
    c = spec.cell
    record: TrialRecord = {
        "schema_version": SCHEMA_VERSION,
        "key": spec.key,
        "trial_key": spec.trial_key,
        "cell_key": c.key,
        "regime": c.regime,
        "cell": c.to_dict(),
        "seed": spec.seed,
        "method": spec.method,
        "implementation": adam_implementation() if spec.method == "adam" else spec.method,
        "options": jsonable(dict(spec.options)),
        "solver": spec.options.get("solver"),
        "instance_seed": spec.instance_seed,
        "data_seed": spec.data_seed,
        "method_seed": spec.method_seed,
        "threshold": spec.threshold,
        "test_samples": spec.test_samples,
        "n_train": c.N,
        "status": "error",
        "success": False,
        "test_error": None,
        "train_error": None,
        "validation_error": None,
        "theta_error": None,
        "w_error": None,
        "permutation": None,
        "samples_used": None,
        "iterations": None,
        "converged": None,
        "result_method": None,
        "reason": "",
        "phases": [],
        "info": {},
        "data_digest": None,
        "error": None,
        "time": None,
        "learner_time": None,
        "versions": versions(),
        "host": platform.node(),
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    try:
        problem = make_problem(spec)
    except Exception as exc:  # a broken instance generator is reported, not fatal to the sweep
        record["error"] = f"problem generation failed: {type(exc).__name__}: {exc}"
        return record
    record["data_digest"] = problem.digest
    fn = get_method(spec.method)
    refused = refusal(spec.method, c)
    if refused is not None:  # the method declines this cell (e.g. too few examples): a failure, not an error
        record.update(status="refused", error=refused)
        return record
    warm_up(spec.method)  # one-off imports / first-call set-up of this process, outside the timing
    t0 = time.perf_counter()
    try:
        result = fn(problem.X, problem.Y, c.m, seed=spec.method_seed, truth=problem.truth, **dict(spec.options))
    except Exception as exc:
        record["time"] = time.perf_counter() - t0
        record["error"] = f"{type(exc).__name__}: {exc}"
        record["info"] = {"traceback": traceback.format_exc(limit=6)[-2000:]}
        return record
    record["time"] = time.perf_counter() - t0
    summary = jsonable(result.to_dict())
    record.update(
        {
            "status": "ok",
            "train_error": summary["train_error"],
            "validation_error": summary["validation_error"],
            "samples_used": summary["samples_used"],
            "iterations": summary["iterations"],
            "converged": summary["converged"],
            "result_method": summary["method"],
            "reason": summary["reason"],
            "phases": summary["phases"],
            "info": summary["info"],
            "learner_time": summary["time"],
        }
    )
    if record["solver"] is None and isinstance(summary["info"], dict):
        record["solver"] = summary["info"].get("solver")
    if result.model is None:
        record["status"] = "no-model"
        return record
    test = score(predict(result.model, problem.X_test), problem.Y_test)
    record["test_error"] = jsonable(test)
    record["success"] = bool(test <= spec.threshold)
    try:
        record["theta_error"], record["w_error"], record["permutation"] = _distance(problem.truth, result.model)
    except Exception as exc:  # distance is a diagnostic; its failure must not hide the test error
        record["info"]["distance_error"] = f"{type(exc).__name__}: {exc}"
    return record


def spec_from_record(record: TrialRecord) -> RunSpec:
    """The RunSpec that produced ``record``: ``run_trial(spec_from_record(r))`` re-runs one trial alone and
    gives ``r`` again (timings aside)."""
    cell = Cell(**record["cell"])
    spec = RunSpec(
        cell,
        int(record["seed"]),
        record["method"],
        dict(record["options"]),
        float(record["threshold"]),
        int(record["test_samples"]),
    )
    if spec.key != record["key"]:
        raise ValueError(f"record {record['key']!r} does not match the spec rebuilt from it ({spec.key!r})")
    return spec
