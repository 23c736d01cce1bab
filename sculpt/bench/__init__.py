"""Recovery benchmark (``sculpt bench``): sweep planted instances, run every method on the same data.

A sweep expands a grid (:mod:`sculpt.bench.grid`) into runs — one method on one trial (cell, seed) — and
appends one JSON object per run to ``<out>/trials.jsonl`` as it finishes. The runs of a trial share
``trial_key``, seeds and ``data_digest`` (same planted layer, same X and Y). A re-run into the same
folder skips every run whose ``key`` is already there (resume). ``summary.md`` holds the per-cell table
(:mod:`sculpt.bench.report`), ``plots/*.png`` the figures (:mod:`sculpt.bench.plots`, with ``--plots``).

Record schema (``SCHEMA``, version ``SCHEMA_VERSION``; every field is always present, ``null`` when not
applicable; non-finite numbers are written as ``null``):

===================  ==========  ===================================================================
field                type        meaning
===================  ==========  ===================================================================
schema_version       int         version of this schema
key                  str         run key = trial_key ":" method "@" 8-hex digest of (options, threshold,
                                 test_samples): the resume key
trial_key            str         cell_key ":seed" seed
cell_key             str         regime ":" instance ":N" N ":noise" noise
regime               str         label of the grid block (generic, small-N, weak-head, ...)
cell                 object      d, k, m, N, n_factor, scale, distribution, noise, weak_head, separation
seed                 int         the grid seed of the trial
method               str         sculpt | exact | lbfgs | adam (or a registered test method)
implementation       str         what ran: the method name, or "torch"/"numpy" for adam
options              object      keyword options passed to the method
solver               str|null    LP/SDP solver (options or the learner's info)
instance_seed        int         seeds plant(): sha256("instance"|d,k,m,scale,law,weak,sep|seed)
data_seed            int         seeds training inputs, label noise, test inputs (adds N, noise)
method_seed          int         seed passed to the method (adds the method name)
threshold            float       success threshold on the test relative MSE (default 1e-12)
test_samples         int         number of fresh noise-free test inputs
n_train              int         N, the examples handed to the method
status               str         ok | no-model | refused (the method declines the cell, e.g. too few
                                 examples; not run) | error (the method raised)
success              bool        status ok and test_error <= threshold
test_error           float|null  Σ‖F̂−F‖²/Σ‖F‖² on the test inputs
train_error          float|null  the method's training relative MSE
validation_error     float|null  the method's validation relative MSE, if it holds data out
theta_error          float|null  head-matched Θ error from truth.distance(model)
w_error              float|null  head-matched W error from truth.distance(model)
permutation          list|null   the head matching (learned head of each true head)
samples_used         int|null    examples the method actually used
iterations           int|null    iterations of iterative methods
converged            bool|null   the method's own convergence flag
result_method        str|null    LearnResult.method (the route that ran, e.g. "exact" under auto)
reason               str         LearnResult.reason
phases               list        LearnResult.phases as dicts (name, figures, truth, time, status, message)
info                 object      LearnResult.info (plus traceback / distance_error on failures)
data_digest          str|null    sha256(X ‖ Y)[:16]: equal within a trial
error                str|null    the exception (status error) or the refusal reason (status refused)
time                 float|null  wall seconds of the method call (timing)
learner_time         float|null  LearnResult.time (timing)
versions             object      sculpt.toolkit.versions(): python, machine, cpus, sculpt, numpy, ..., git
host                 str         machine name
timestamp            str         ISO-8601 UTC start time (timing)
===================  ==========  ===================================================================

Re-running one trial alone: ``sculpt bench --only <key> --out DIR`` (any key substring), or in Python
``run_trial(spec_from_record(record))`` (sculpt.bench.trials), which gives the record again.

Everything except the timing fields (``time``, ``learner_time``, ``timestamp``, phase ``time``, and
``host``) is a deterministic function of the run key, whichever scheduler ran it — provided the method
has no time limit (a time limit makes iteration counts depend on the machine).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any, TypeAlias

#: a value parsed from a grid file or trials.jsonl, or bound for a record: JSON (numbers, strings, bools,
#: None, lists and string-keyed dicts of them), typed no further
Json: TypeAlias = Any
#: one line of trials.jsonl: field -> JSON value (``SCHEMA`` lists the fields and their types)
TrialRecord: TypeAlias = dict[str, Json]

SCHEMA_VERSION = 1

_NUM = (numbers.Real,)
_OPT_NUM = (numbers.Real, type(None))
_OPT_INT = (numbers.Integral, type(None))
_OPT_STR = (str, type(None))

#: field -> allowed Python types after json.loads
SCHEMA: dict[str, tuple[type, ...]] = {
    "schema_version": (int,),
    "key": (str,),
    "trial_key": (str,),
    "cell_key": (str,),
    "regime": (str,),
    "cell": (dict,),
    "seed": (int,),
    "method": (str,),
    "implementation": (str,),
    "options": (dict,),
    "solver": _OPT_STR,
    "instance_seed": (int,),
    "data_seed": (int,),
    "method_seed": (int,),
    "threshold": _NUM,
    "test_samples": (int,),
    "n_train": (int,),
    "status": (str,),
    "success": (bool,),
    "test_error": _OPT_NUM,
    "train_error": _OPT_NUM,
    "validation_error": _OPT_NUM,
    "theta_error": _OPT_NUM,
    "w_error": _OPT_NUM,
    "permutation": (list, type(None)),
    "samples_used": _OPT_INT,
    "iterations": _OPT_INT,
    "converged": (bool, type(None)),
    "result_method": _OPT_STR,
    "reason": (str,),
    "phases": (list,),
    "info": (dict,),
    "data_digest": _OPT_STR,
    "error": _OPT_STR,
    "time": _OPT_NUM,
    "learner_time": _OPT_NUM,
    "versions": (dict,),
    "host": (str,),
    "timestamp": (str,),
}
CELL_FIELDS: dict[str, tuple[type, ...]] = {
    "regime": (str,),
    "d": (int,),
    "k": (int,),
    "m": (int,),
    "N": (int,),
    "n_factor": _OPT_NUM,
    "scale": _NUM,
    "distribution": (str,),
    "noise": _NUM,
    "weak_head": _OPT_NUM,
    "separation": _OPT_NUM,
}
STATUSES = ("ok", "no-model", "refused", "error")
#: fields that vary between identical runs (excluded when comparing schedulers)
TIMING_FIELDS = frozenset({"time", "learner_time", "timestamp", "host"})


def _type_problem(name: str, value: object, types: tuple[type, ...]) -> str | None:
    """``name=value is not of type [...]`` when ``value`` is not one of ``types`` (a bool is no number)."""
    if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
        return f"{name}={value!r} is not of type {[t.__name__ for t in types]}"
    return None


def _field_problems(record: Mapping[str, object]) -> list[str]:
    """Missing and unknown fields, fields of the wrong type, cell fields missing or of the wrong type."""
    problems = []
    missing = set(SCHEMA) - set(record)
    extra = set(record) - set(SCHEMA)
    if missing:
        problems.append(f"missing fields {sorted(missing)}")
    if extra:
        problems.append(f"unknown fields {sorted(extra)}")
    problems += [p for n, t in SCHEMA.items() if n in record and (p := _type_problem(n, record[n], t)) is not None]
    cell = record.get("cell")
    if isinstance(cell, Mapping):
        for name, types in CELL_FIELDS.items():
            if name not in cell:
                problems.append(f"cell lacks {name}")
            elif (p := _type_problem(f"cell.{name}", cell[name], types)) is not None:
                problems.append(p)
    return problems


def _consistency_problems(record: Mapping[str, object]) -> list[str]:
    """Status, success and error that contradict one another; phases without name/figures/status."""
    problems = []
    status = record.get("status")
    if status not in STATUSES:
        problems.append(f"status {status!r} not in {STATUSES}")
    if record.get("success") is True:
        te, th = record.get("test_error"), record.get("threshold")
        ok = status == "ok" and isinstance(te, numbers.Real) and isinstance(th, numbers.Real) and te <= th
        if not ok:
            problems.append("success is true but status is not ok or test_error > threshold")
    if status in ("error", "refused") and not record.get("error"):
        problems.append(f"status {status} without an error message")
    phases = record.get("phases")
    for p in phases if isinstance(phases, list) else []:
        if not isinstance(p, Mapping) or not {"name", "figures", "status"} <= set(p):
            problems.append(f"phase {p!r} lacks name/figures/status")
    return problems


def validate_record(record: Mapping[str, object]) -> None:
    """Raise ValueError naming every way ``record`` departs from ``SCHEMA``.

    Parameters
    ----------
    record : mapping
        One line of ``trials.jsonl``, as json.loads gives it.

    Raises
    ------
    TypeError
        ``record`` is not a mapping.
    ValueError
        Missing or unknown fields, wrong types, a cell lacking a field, or contradictory status fields.
    """
    if not isinstance(record, Mapping):
        raise TypeError(f"record must be a mapping, got {type(record).__name__}")
    problems = _field_problems(record)
    problems += _consistency_problems(record)
    if problems:
        raise ValueError(f"record {record.get('key')!r}: " + "; ".join(problems))


def _is_timing(key: str) -> bool:
    k = key.lower()
    return k in TIMING_FIELDS or k.endswith("_time") or k.startswith("time_") or "seconds" in k or k == "elapsed"


def strip_timings(value: object) -> object:
    """A copy of a record without timing fields, at any depth (``time``, ``*_time``, ``time_*``,
    ``*seconds*``, ``elapsed``, ``timestamp``, ``host``): what must agree between schedulers."""
    if isinstance(value, Mapping):
        return {k: strip_timings(v) for k, v in value.items() if not _is_timing(str(k))}
    if isinstance(value, list):
        return [strip_timings(v) for v in value]
    return value


__all__ = [
    "Json",
    "TrialRecord",
    "SCHEMA",
    "SCHEMA_VERSION",
    "CELL_FIELDS",
    "STATUSES",
    "TIMING_FIELDS",
    "validate_record",
    "strip_timings",
]
