"""One run of the benchmark: plant a layer, sample the trial's data, run one method, score it.

The trial (cell, seed) fixes the data; every method of the trial sees the same X, Y (the record's
``data_digest`` shows it). Scoring on ``test_samples`` fresh noise-free inputs:
test relative MSE = Σ‖F̂(X) − F(X)‖² / Σ‖F(X)‖², success ⇔ test relative MSE ≤ threshold (1e-12).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata as md
import math
import platform
import subprocess
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from . import SCHEMA_VERSION
from .grid import Cell, RunSpec
from .methods import adam_implementation, get_method, refusal, warm_up

__all__ = ["Problem", "make_problem", "run_trial", "spec_from_record", "relative_mse", "versions", "jsonable"]


@dataclass
class Problem:
    """The data of one trial: the planted ``truth``, training ``X``, ``Y`` and noise-free test data."""

    truth: Any
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


def predict(model: Any, X: np.ndarray) -> np.ndarray:
    """F̂(X) for a MultiHeadAttention-like model (callable, or with ``forward`` / ``predict``)."""
    for name in ("forward", "predict"):
        fn = getattr(model, name, None)
        if callable(fn):
            return np.asarray(fn(X), dtype=np.float64)
    if callable(model):
        return np.asarray(model(X), dtype=np.float64)
    raise TypeError(f"cannot evaluate a model of type {type(model).__name__}")


def relative_mse(Y_hat: np.ndarray, Y: np.ndarray) -> float:
    """Σ‖Ŷ − Y‖² / Σ‖Y‖² (inf when Ŷ is not finite)."""
    if Y_hat.shape != Y.shape or not np.all(np.isfinite(Y_hat)):
        return math.inf
    return float(np.sum((Y_hat - Y) ** 2) / np.sum(Y ** 2))


def make_problem(spec: RunSpec) -> Problem:
    """Plant the layer from ``spec.instance_seed`` and draw the data from ``spec.data_seed``:
    N training inputs, labels F(X) + noise·rms(F)·N(0,1), and ``test_samples`` noise-free test pairs."""
    from ..data import plant, sample_inputs

    c = spec.cell
    plant_kw: dict[str, Any] = {"scale": c.scale, "seed": spec.instance_seed}
    if c.weak_head is not None:
        plant_kw["weak_head"] = c.weak_head
    if c.separation is not None:
        plant_kw["separation"] = c.separation
    truth = plant(c.d, c.k, c.m, **plant_kw)
    train_rng, noise_rng, test_rng = (np.random.default_rng(s)
                                      for s in np.random.SeedSequence(spec.data_seed).spawn(3))
    X = sample_inputs(c.N, c.k, c.d, rng=train_rng, distribution=c.distribution)
    F = predict(truth, X)
    Y = F + c.noise * float(np.sqrt(np.mean(F ** 2))) * noise_rng.standard_normal(F.shape) if c.noise else F
    X_test = sample_inputs(spec.test_samples, c.k, c.d, rng=test_rng, distribution=c.distribution)
    return Problem(truth, X, Y, X_test, predict(truth, X_test))


@functools.lru_cache(maxsize=1)
def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    """Versions of Python and the packages a run can touch, plus the source tree's git commit."""
    out = {"python": platform.python_version()}
    for pkg in ("sculpt", "numpy", "scipy", "cvxpy", "clarabel", "highspy", "scs", "torch"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "absent"
    commit = _git_commit()
    if commit:
        out["git"] = commit
    return out


def jsonable(value: Any, *, max_array: int = 64) -> Any:
    """A JSON-ready copy: numpy scalars to Python, small arrays to lists (larger ones to a shape and norm
    note, lists longer than 4·max_array to their length, head and last item), non-finite floats to None,
    unknown objects to their repr."""
    if isinstance(value, dict):
        return {str(k): jsonable(v, max_array=max_array) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if len(value) > 4 * max_array:  # keep records small: long traces are summarised
            return {"list_length": len(value), "head": jsonable(list(value[:8]), max_array=max_array),
                    "last": jsonable(value[-1], max_array=max_array)}
        return [jsonable(v, max_array=max_array) for v in value]
    if isinstance(value, np.ndarray):
        if value.size > max_array:
            return {"array_shape": list(value.shape), "norm": jsonable(float(np.linalg.norm(value)))}
        return jsonable(value.tolist(), max_array=max_array)
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    if value is None or isinstance(value, str):
        return value
    return repr(value)


def _distance(truth: Any, model: Any) -> tuple[float | None, float | None, list[int] | None]:
    """Head-matched parameter errors (theta_error, w_error, permutation) from ``truth.distance(model)``."""
    dist = truth.distance(model)
    get = (lambda k: dist.get(k)) if isinstance(dist, dict) else (lambda k: getattr(dist, k, None))
    perm = get("permutation")
    return (jsonable(get("theta_error")), jsonable(get("w_error")),
            None if perm is None else [int(p) for p in perm])


def run_trial(spec: RunSpec) -> dict[str, Any]:
    """Run ``spec`` and return its record (the schema is ``sculpt.bench.SCHEMA``). A method that raises
    gives a record with status "error" and the exception text; the sweep goes on."""
    c = spec.cell
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "key": spec.key, "trial_key": spec.trial_key, "cell_key": c.key,
        "regime": c.regime, "cell": c.to_dict(), "seed": spec.seed, "method": spec.method,
        "implementation": adam_implementation() if spec.method == "adam" else spec.method,
        "options": jsonable(dict(spec.options)), "solver": spec.options.get("solver"),
        "instance_seed": spec.instance_seed, "data_seed": spec.data_seed, "method_seed": spec.method_seed,
        "threshold": spec.threshold, "test_samples": spec.test_samples, "n_train": c.N,
        "status": "error", "success": False, "test_error": None, "train_error": None,
        "validation_error": None, "theta_error": None, "w_error": None, "permutation": None,
        "samples_used": None, "iterations": None, "converged": None, "result_method": None, "reason": "",
        "phases": [], "info": {}, "data_digest": None, "error": None, "time": None, "learner_time": None,
        "versions": versions(), "host": platform.node(),
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
    record.update({
        "status": "ok", "train_error": summary["train_error"], "validation_error": summary["validation_error"],
        "samples_used": summary["samples_used"], "iterations": summary["iterations"],
        "converged": summary["converged"], "result_method": summary["method"], "reason": summary["reason"],
        "phases": summary["phases"], "info": summary["info"], "learner_time": summary["time"],
    })
    if record["solver"] is None and isinstance(summary["info"], dict):
        record["solver"] = summary["info"].get("solver")
    if result.model is None:
        record["status"] = "no-model"
        return record
    test = relative_mse(predict(result.model, problem.X_test), problem.Y_test)
    record["test_error"] = jsonable(test)
    record["success"] = bool(test <= spec.threshold)
    try:
        record["theta_error"], record["w_error"], record["permutation"] = _distance(problem.truth, result.model)
    except Exception as exc:  # distance is a diagnostic; its failure must not hide the test error
        record["info"]["distance_error"] = f"{type(exc).__name__}: {exc}"
    return record


def spec_from_record(record: dict[str, Any]) -> RunSpec:
    """The RunSpec that produced ``record``: ``run_trial(spec_from_record(r))`` re-runs one trial alone and
    gives ``r`` again (timings aside)."""
    cell = Cell(**record["cell"])
    spec = RunSpec(cell, int(record["seed"]), record["method"], dict(record["options"]),
                   float(record["threshold"]), int(record["test_samples"]))
    if spec.key != record["key"]:
        raise ValueError(f"record {record['key']!r} does not match the spec rebuilt from it ({spec.key!r})")
    return spec
