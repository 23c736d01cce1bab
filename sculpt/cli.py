"""Command line: ``sculpt recover`` (plant a layer, learn it back, score it), ``sculpt learn`` (learn from
your own X, Y arrays) and ``sculpt bench`` (the recovery benchmark, registered from ``sculpt.bench.cli``).

    sculpt recover --d 8 --k 4 --m 2 --samples 20000 --seed 0 [--method ROUTE]
                   [--distribution boolean|gaussian] [--noise SIGMA] [--scale 2.5] [--solver NAME]
                   [--tol TOL] [--test-samples 5000] [--out DIR] [--verbose | --quiet]
    sculpt learn --data FILE.npz --m 2 [--method ...] [--seed 0] [--solver NAME] [--tol TOL]
                 [--truth MODEL.npz] [--out DIR] [--verbose | --quiet]

ROUTE is any registered learning route (``sculpt.routes.ROUTES``: sculpt, exact, gradient, vp-lm, auto; auto by
default). The default output is a short plain-language summary (what was learned, whether it is exact, at the
noise level or failed, the errors, the time, where the files went), with a progress bar on a terminal;
``--verbose`` adds the progress lines, the phase table and the whole certificate; ``--quiet`` prints the summary
only.
Exit status: 0 learned (converged), 1 ran but did not converge (or a solver failed, or an internal error,
reported on one line), 2 bad input: the usage line, then one line ``sculpt CMD: error: ...`` naming the flag,
file or setting; never a traceback (SCULPT_TRACEBACK=1 shows one for internal errors).
Each subcommand is registered by an ``add_*_parser(subparsers)`` function that sets ``func`` (the runner,
``args -> exit status``); ``SUBCOMMANDS`` lists them in help order.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shlex
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from ._argtypes import nonneg_int, positive_int, real_at_least
from ._checks import MAX_VALUE
from .toolkit import versions, write_json

if TYPE_CHECKING:
    from .model import MultiHeadAttention
    from .result import LearnResult, PhaseRecord
    from .settings import Settings

#: what ``add_subparsers`` returns: each ``add_*_parser`` registers its subcommand on it
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
#: a JSON value: what result.json holds
JSON: TypeAlias = "bool | int | float | str | None | list[JSON] | dict[str, JSON]"

__all__ = [
    "main",
    "build_parser",
    "add_recover_parser",
    "add_learn_parser",
    "SUBCOMMANDS",
    "run_recover",
    "run_learn",
    "versions",
]

DISTRIBUTIONS = ("boolean", "gaussian")
EXIT_OK, EXIT_NOT_CONVERGED, EXIT_BAD_INPUT = 0, 1, 2
MAX_ENTRIES = 2**31  # entries of one generated array: (N, k, d) samples, (m, d, d) parameters


class BadInput(Exception):
    """A user error found after parsing (a missing file, a wrong array shape): exit status 2."""


def _add_learning_arguments(p: argparse.ArgumentParser, default_method: str) -> None:
    from .routes import ROUTES

    p.add_argument(
        "--method",
        choices=list(ROUTES),
        default=default_method,
        help=f"learning route (default {default_method}): "
        + "; ".join(f"{name}: {route.summary}" for name, route in ROUTES.items()),
    )
    p.add_argument(
        "--solver",
        metavar="NAME",
        default=None,
        help="LP/QP backend of the engine (HIGHS, CLARABEL, SCS, MOSEK; default: the engine's choice)",
    )
    p.add_argument(
        "--tol",
        type=real_at_least(0.0, True),
        default=None,
        help="validation relative MSE counted as converged (default: the learner's, 1e-12)",
    )
    p.add_argument("--out", metavar="DIR", default=None, help="write DIR/result.json and DIR/model.npz")
    p.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a learner setting by its dotted name, e.g. --set refine.slabs.tau=0.02 (repeatable; "
        "VALUE is read as JSON, else as text; `sculpt settings` lists them)",
    )
    talk = p.add_mutually_exclusive_group()
    talk.add_argument(
        "--verbose", action="store_true", help="progress lines, the phase table and the whole certificate"
    )
    talk.add_argument("--quiet", action="store_true", help="the summary only: no progress bar or lines")


# ------------------------------------------------------------------------------------------ parsers
def add_recover_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """``recover``: plant a layer, sample and label inputs, learn, score on fresh inputs."""
    p = subparsers.add_parser(
        "recover",
        help="plant a random layer and learn it back from its examples",
        description="Plant a layer (sculpt.plant(d, k, m, scale=, seed=)), sample N inputs, label them (plus "
        "relative Gaussian noise if asked), learn with the chosen method, and score the result on "
        "fresh inputs and against the planted parameters.",
    )
    p.add_argument("--d", type=positive_int, required=True, help="token dimension")
    p.add_argument("--k", type=positive_int, required=True, help="tokens per sequence")
    p.add_argument("--m", type=positive_int, required=True, help="number of heads")
    p.add_argument("--samples", type=positive_int, required=True, help="number of training examples N")
    p.add_argument(
        "--seed",
        type=nonneg_int,
        default=0,
        help="seed of the planted layer (as plant(seed=)) and of the data and learner streams",
    )
    p.add_argument("--distribution", choices=DISTRIBUTIONS, default="boolean", help="input law (default boolean)")
    p.add_argument(
        "--noise",
        type=real_at_least(0.0, False),
        default=0.0,
        metavar="SIGMA",
        help="add N(0, (SIGMA·rms(Y))²) to every label entry (default 0)",
    )
    p.add_argument(
        "--scale",
        type=real_at_least(0.0, True),
        default=2.5,
        help="‖Θ_i‖_F of the planted layer: exact for m = 1; for m ≥ 2 each head within "
        "0.85–1.12× at d = 8 (wider at small d) (default 2.5)",
    )
    p.add_argument(
        "--test-samples", type=positive_int, default=5000, help="fresh inputs for the test relative MSE (default 5000)"
    )
    _add_learning_arguments(p, "auto")
    p.set_defaults(func=run_recover, parser=p)
    return p


def add_learn_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """``learn``: learn from arrays X, Y of shape (N, k, d) stored in an npz file."""
    p = subparsers.add_parser(
        "learn",
        help="learn a layer from your own arrays X, Y in an .npz file",
        description="Learn m heads from the arrays X and Y (both of shape (N, k, d), rows are tokens) stored "
        "in an .npz file (np.savez(path, X=X, Y=Y); no pickled objects).",
    )
    p.add_argument("--data", required=True, metavar="FILE.npz", help="npz with arrays X and Y of shape (N, k, d)")
    p.add_argument("--m", type=positive_int, required=True, help="number of heads")
    p.add_argument("--seed", type=nonneg_int, default=0, help="seed of the learner (validation split, searches)")
    p.add_argument(
        "--truth",
        metavar="MODEL.npz",
        default=None,
        help="a saved MultiHeadAttention to report ground-truth errors against (optional)",
    )
    _add_learning_arguments(p, "auto")
    p.set_defaults(func=run_learn, parser=p)
    return p


def _add_bench_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """``bench``: registered by sculpt.bench.cli (imported here, when the parser is built; that module
    does not import this one)."""
    from .bench.cli import add_bench_parser

    p = add_bench_parser(subparsers)
    p.set_defaults(parser=p)
    return p


def add_settings_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """``settings``: every learner setting with its default and the reason for it."""
    p = subparsers.add_parser(
        "settings",
        help="list the learner's settings (for --set NAME=VALUE)",
        description="Every setting of sculpt.Settings: dotted name, default ('auto' = "
        "chosen from the problem size) and the one-line reason for it; GROUP lists one group's only.",
    )
    p.add_argument(
        "group",
        nargs="?",
        metavar="GROUP",
        choices=sorted(_settings_groups()),
        help="only this group's settings (one of: %(choices)s)",
    )
    p.set_defaults(func=run_settings, parser=p)
    return p


def _settings_groups() -> dict[str, tuple[str, Callable[[str], str]]]:
    """The groups of ``sculpt.Settings`` by field name: (the reason for the group, its ``describe(prefix)``)."""
    import dataclasses

    from .settings import Settings

    return {
        f.name: (str(f.metadata.get("why", "")), f.metadata["group"].describe)
        for f in dataclasses.fields(Settings)
        if "group" in f.metadata
    }


def run_settings(args: argparse.Namespace) -> int:
    from .settings import Settings

    group = getattr(args, "group", None)
    if group is None:
        print(Settings.describe())
    else:
        why, describe = _settings_groups()[group]  # argparse has checked the name
        print(f"# {group}: {why}")
        print(describe(f"{group}."))
    return EXIT_OK


SUBCOMMANDS: list[Callable[[Subparsers], argparse.ArgumentParser]] = [
    add_recover_parser,
    add_learn_parser,
    _add_bench_parser,
    add_settings_parser,
]


def build_parser(prog: str = "sculpt") -> argparse.ArgumentParser:
    """The top-level parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Learn a multi-head attention layer F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i from "
        "examples by sculpting a convex body (Chen & Li, STOC 2025).",
        epilog="exit status: 0 converged, 1 not converged, 2 bad input",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in SUBCOMMANDS:
        add(sub)
    return parser


# ------------------------------------------------------------------------------------------ helpers
def _check_solver(name: str | None) -> str | None:
    """The LP backend ``--solver`` names (upper case), or BadInput naming the flag and the usable backends."""
    if name is None:
        return None
    from oracles import SolverError, backend_name, backend_names

    known = backend_names(usable=False)
    if name.upper() not in known:
        raise BadInput(f"--solver: unknown backend {name!r}; choose from {', '.join(known)}")
    try:
        return backend_name(name, kind="lp")
    except SolverError as exc:
        raise BadInput(f"--solver: {exc}; usable: {', '.join(backend_names('lp'))}") from None


def _check_out(out: str | None) -> None:
    """Fail before any work when --out names an existing non-directory."""
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        raise BadInput(f"--out: {out!r} exists and is not a directory")


def _fmt(v: object) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.3g}"
    if v is None:
        return "-"
    return str(v)


def _items(figures: dict[str, object]) -> list[str]:
    """Scalar entries of a figures dict as "key=value" strings (lists and dicts are left to result.json)."""
    return [
        f"{k}={_fmt(v)}" for k, v in figures.items() if isinstance(v, (bool, int, float, str, np.generic)) or v is None
    ]


def _wrap(items: list[str], width: int) -> list[str]:
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + 2 + len(item) <= width:
            lines[-1] += ", " + item
        else:
            lines.append(item if len(item) <= width else item[: width - 1] + "…")
    return lines or ["-"]


def phase_table(phases: Sequence[PhaseRecord], fig_width: int = 58, truth_width: int = 40) -> str:
    """Plain-text table, one block per PhaseRecord: phase, status, time, its figures and its ground-truth
    figures (wrapped over several lines); a failed phase gets its message underneath.

    Parameters
    ----------
    phases : sequence of PhaseRecord
        The records (``LearnResult.phases``).
    fig_width, truth_width : int
        Characters of the figures and truth columns.

    Returns
    -------
    str
        The table, lines joined by newlines.
    """
    header = f"{'phase':<18} {'status':<7} {'time s':>7}  {'figures':<{fig_width}}  truth"
    lines = [header, "-" * (len(header) + truth_width - 5)]
    for p in phases:
        figs, truth = _wrap(_items(p.figures), fig_width), _wrap(_items(p.truth), truth_width)
        for i in range(max(len(figs), len(truth))):
            head = f"{p.name:<18} {p.status:<7} {p.time:>7.2f}" if i == 0 else " " * 34
            f = figs[i] if i < len(figs) else ""
            t = truth[i] if i < len(truth) else ""
            lines.append(f"{head}  {f:<{fig_width}}  {t}".rstrip())
        if p.status != "ok" and p.message:
            lines.append(f"{'':<18} ^ {p.message}")
    return "\n".join(lines)


def _summary(result: LearnResult, extra: dict[str, float | None]) -> str:
    info = result.info
    rows = [
        ("converged", _fmt(result.converged)),
        ("status", result.status + ("" if result.noise_sigma is None else f" (σ̂ = {result.noise_sigma:.3g})")),
        ("route", info.route or result.method),
        ("reason", result.reason or "-"),
        ("train rel MSE", _fmt(result.train_error)),
        ("validation rel MSE", _fmt(result.validation_error)),
    ]
    rows += [(k, _fmt(v)) for k, v in extra.items()]
    truth = info.truth or {}
    for key in ("theta_error", "w_error", "max_theta_error", "max_w_error"):
        if key in truth:
            rows.append((f"head-matched {key}", _fmt(truth.get(key))))
    rows += [("samples used", _fmt(result.samples_used)), ("time s", f"{result.time:.2f}")]
    return "\n".join(f"{k:<28} {v}" for k, v in rows)


def _write_outputs(
    out: str | None, result: LearnResult, payload: dict[str, JSON], truth: MultiHeadAttention | None = None
) -> list[Path]:
    """DIR/result.json (result.to_dict() plus ``payload``), DIR/model.npz (and DIR/truth.npz when planted)."""
    if out is None:
        return []
    d = Path(out)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--out: cannot create directory {out!r}: {exc}") from None
    written = []
    doc = {**result.to_dict(), **payload, "model_file": "model.npz" if result.model is not None else None}
    write_json(d / "result.json", doc)
    written.append(d / "result.json")
    if result.model is not None:
        result.model.save(d / "model.npz")
        written.append(d / "model.npz")
    if truth is not None:
        truth.save(d / "truth.npz")
        written.append(d / "truth.npz")
    return written


def parse_settings(items: Sequence[str]) -> Settings:
    """``Settings`` from ``--set`` items.

    Parameters
    ----------
    items : sequence of str
        ``NAME=VALUE`` strings: a dotted setting name and a value read as JSON, else as text.

    Returns
    -------
    Settings
        The defaults with every item merged in, in order.

    Raises
    ------
    BadInput
        An item that is not NAME=VALUE, nests too deep, names no setting or gives an invalid value.
    """
    import json

    from .settings import Settings

    cfg = Settings()
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise BadInput(f"--set {item!r}: expected NAME=VALUE, e.g. refine.slabs.tau=0.02")
        from ._checks import MAX_JSON_DEPTH, json_depth

        if json_depth(text) > MAX_JSON_DEPTH:
            raise BadInput(f"--set {name.strip()!r}: VALUE is nested deeper than {MAX_JSON_DEPTH} levels")
        try:
            value: JSON = json.loads(text)
        except ValueError:
            value = text
        *path, last = name.strip().split(".")
        nested: dict[str, JSON] = {last: value}
        for part in reversed(path):
            nested = {part: nested}
        try:
            cfg = cfg.merged(nested)
        except (TypeError, ValueError) as exc:
            raise BadInput(f"--set {item!r}: {exc}") from None
    return cfg


def _learn(
    X: np.ndarray,
    Y: np.ndarray,
    args: argparse.Namespace,
    seed: int | np.random.Generator,
    truth: MultiHeadAttention | None,
) -> LearnResult:
    from .learner import learn

    options: dict[str, float] = {}
    if args.tol is not None:
        options["tol"] = args.tol
    cfg = parse_settings(getattr(args, "settings", []) or [])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        result = learn(
            X,
            Y,
            args.m,
            method=args.method,
            seed=seed,
            solver=args.solver,
            progress=args.verbose or (not args.quiet and sys.stderr.isatty()),
            truth=truth,
            settings=cfg,
            **options,
        )
    for w in caught:  # the learner's warnings (e.g. fewer heads supported than --m) as one line each
        if issubclass(w.category, UserWarning):
            print(f"sculpt {args.command}: warning: {w.message}", file=sys.stderr)
    return result


def _headline(result: LearnResult, what: str) -> str:
    """The first line of the plain summary: what was learned, from what, and the outcome in words."""
    outcome = {
        "exact": "exact",
        "noise": "at the noise level of the labels"
        + ("" if result.noise_sigma is None else f" (σ̂ = {result.noise_sigma:.3g})"),
    }.get(result.status, "FAILED (see why)")
    m_hat = result.info.details.get("supported_heads")
    if m_hat is not None and result.model is not None:
        outcome += f"; only {m_hat} of its {result.model.m} heads carry the output (--m {m_hat} would do)"
    return f"{what}: {outcome}."


def _plain_summary(result: LearnResult, what: str, extra: list[str], files: Sequence[Path]) -> str:
    """The default output: the headline, ``LearnResult.summary()``, the caller's lines (test errors), the
    certificate's verdict and the files written."""
    lines = [_headline(result, what), result.summary(), *extra]
    if result.certificate is not None:  # on the held-out examples; all of it in result.json and with --verbose
        lines.append("certificate: " + result.certificate.summary().splitlines()[0].removeprefix("certificate: "))
    if files:
        lines.append(f"files:       {files[0].parent}/ ({', '.join(f.name for f in files)})")
    lines.append("(--verbose: every step, the phase table and the whole certificate)")
    return "\n".join(lines)


def _exit_status(result: LearnResult) -> int:
    return EXIT_OK if result.converged else EXIT_NOT_CONVERGED


def _report(
    result: LearnResult,
    args: argparse.Namespace,
    extra: dict[str, float | None],
    plain: tuple[str, list[str]],
    files: Sequence[Path],
) -> int:
    """Print the result (``--verbose``: phase table, figures, certificate; else the plain summary ``plain`` =
    (what was learned from, extra lines)) and return the exit status (a failure also says why on stderr)."""
    if args.verbose:
        print(phase_table(result.phases))
        print()
        print(_summary(result, extra))
        if result.certificate is not None:  # on the held-out examples; also written to result.json
            print(result.certificate.summary())
        for path in files:
            print(f"wrote {path}")
    else:
        print(_plain_summary(result, plain[0], plain[1], files))
    status = _exit_status(result)
    if status == EXIT_OK:
        return status
    if not args.verbose:  # the summary's "why" line has said it
        print(
            f"sculpt {args.command}: not converged (why: above; all of it: --verbose or result.json)", file=sys.stderr
        )
        return status
    why = result.reason or "no reason given"
    print(
        f"sculpt {args.command}: {why if why.startswith('not converged') else 'not converged: ' + why}", file=sys.stderr
    )
    return status


# ------------------------------------------------------------------------------------------ runners
def run_recover(args: argparse.Namespace) -> int:
    """Plant (d, k, m), sample ``samples`` inputs, label (+ noise), learn with truth, score, write files."""
    from .data import plant, sample_inputs

    args.solver = _check_solver(args.solver)
    _check_out(args.out)
    for flag, n in (("--samples", args.samples), ("--test-samples", args.test_samples)):
        if n * args.k * args.d > MAX_ENTRIES:
            raise BadInput(
                f"{flag} × --k × --d = {n} × {args.k} × {args.d} entries per array, above the limit of "
                f"{MAX_ENTRIES} ({MAX_ENTRIES * 8 / 2**30:g} GiB of float64)"
            )
    if args.m * args.d * args.d > MAX_ENTRIES:
        raise BadInput(
            f"--m × --d × --d = {args.m} × {args.d} × {args.d} entries in each of Θ and W, above the limit of "
            f"{MAX_ENTRIES} ({MAX_ENTRIES * 8 / 2**30:g} GiB of float64)"
        )
    streams = np.random.SeedSequence([args.seed, 0x5C0]).spawn(4)  # data, noise, learner, test
    try:
        truth = plant(args.d, args.k, args.m, scale=args.scale, seed=args.seed)
    except ValueError as exc:
        raise BadInput(f"cannot plant a layer with (d, k, m) = ({args.d}, {args.k}, {args.m}): {exc}") from None
    X = sample_inputs(
        args.samples, args.k, args.d, rng=np.random.default_rng(streams[0]), distribution=args.distribution
    )
    Y = truth(X)
    if args.noise > 0:
        rms = math.sqrt(float(np.mean(Y * Y)))
        Y = Y + args.noise * rms * np.random.default_rng(streams[1]).standard_normal(Y.shape)
        if not np.all(np.abs(Y) <= MAX_VALUE):
            raise BadInput(
                f"--noise {args.noise:g}: labels with noise of standard deviation --noise × rms(Y) = "
                f"{args.noise * rms:.3g} leave [-{MAX_VALUE:g}, {MAX_VALUE:g}], the largest values the learner "
                f"accepts; give --noise below {0.1 * MAX_VALUE / max(rms, 1e-300):.3g}"
            )
    result = _learn(X, Y, args, np.random.default_rng(streams[2]), truth)
    extra: dict[str, float | None] = {}
    if result.model is not None:
        Xt = sample_inputs(
            args.test_samples, args.k, args.d, rng=np.random.default_rng(streams[3]), distribution=args.distribution
        )
        extra["test rel MSE (fresh)"] = truth.prediction_error(result.model, Xt)
    else:
        extra["test rel MSE (fresh)"] = None
    config = {
        k: getattr(args, k)
        for k in (
            "d",
            "k",
            "m",
            "samples",
            "seed",
            "method",
            "distribution",
            "noise",
            "scale",
            "solver",
            "tol",
            "test_samples",
        )
    }
    payload = {
        "command": args.command_line,
        "config": config,
        "seed": args.seed,
        "solver": args.solver,
        "versions": versions(),
        "evaluation": {
            "test_error": extra["test rel MSE (fresh)"],
            "test_samples": args.test_samples,
            "truth": dict(result.info.truth or {}),
        },
        "truth_file": "truth.npz",
    }
    payload["exit_status"] = _exit_status(result)
    files = _write_outputs(args.out, result, payload, truth)
    what = f"Recovered a planted {args.m}-head attention layer (d = {args.d}, k = {args.k}) from {args.samples:,} " + (
        f"examples with label noise {args.noise:g} × rms" if args.noise > 0 else "examples"
    )
    return _report(result, args, extra, (what, _test_lines(result, extra, args.test_samples)), files)


def _test_lines(result: LearnResult, extra: dict[str, float | None], n_test: int) -> list[str]:
    """The plain summary's lines about the planted layer: the test error and the worst head's parameter errors."""
    test = extra.get("test rel MSE (fresh)")
    if test is None:
        return []
    truth = result.info.truth or {}
    theta, w = truth.get("max_theta_error"), truth.get("max_w_error")
    params = (
        f"; worst head against the planted one: Θ error {_fmt(theta)}, W error {_fmt(w)}"
        if theta is not None and w is not None
        else ""
    )
    return [f"test:        relative MSE {_fmt(test)} on {n_test:,} fresh inputs{params}"]


def _load_data(path: str) -> tuple[np.ndarray, np.ndarray]:
    """X, Y from an npz (no pickle): both present, numeric, of equal shape (N, k, d). Sizes are checked from
    the archive's directory and the arrays' headers before anything is allocated (``_checks.read_npz``)."""
    from ._checks import MAX_DATA_BYTES, read_npz

    try:
        z = read_npz(path, ("X", "Y"), max_bytes=MAX_DATA_BYTES)
    except ValueError as exc:
        text = str(exc)
        if "has no array" in text:
            text += "; save with np.savez(path, X=X, Y=Y)"
        raise BadInput(f"--data: {text}") from None
    X, Y = z["X"], z["Y"]
    for name, arr in (("X", X), ("Y", Y)):
        if arr.dtype.kind not in "biuf":
            raise BadInput(f"--data: {path!r}: array {name} has dtype {arr.dtype}, expected real numbers")
        if arr.ndim != 3:
            raise BadInput(f"--data: {path!r}: array {name} must have shape (N, k, d), got {arr.shape}")
    if X.shape != Y.shape:
        raise BadInput(f"--data: {path!r}: X and Y must have the same shape (N, k, d), got {X.shape} and {Y.shape}")
    from ._checks import check_data

    try:
        return check_data(X, Y)
    except (ValueError, TypeError) as exc:
        raise BadInput(f"--data: {path!r}: {exc}") from None


def run_learn(args: argparse.Namespace) -> int:
    """Learn from the user's arrays; report train/validation errors; write files."""
    from .model import MultiHeadAttention

    args.solver = _check_solver(args.solver)
    _check_out(args.out)
    X, Y = _load_data(args.data)
    truth = None
    if args.truth is not None:
        try:
            truth = MultiHeadAttention.load(args.truth)
        except ValueError as exc:
            raise BadInput(f"--truth: {exc}") from None
        if (truth.m, truth.d) != (args.m, X.shape[2]):
            raise BadInput(
                f"--truth: {args.truth!r} holds a layer with (m, d) = ({truth.m}, {truth.d}); --m and "
                f"the data give ({args.m}, {X.shape[2]})"
            )
    result = _learn(X, Y, args, args.seed, truth)
    config = {
        "data": args.data,
        "m": args.m,
        "method": args.method,
        "seed": args.seed,
        "solver": args.solver,
        "tol": args.tol,
        "truth": args.truth,
        "examples": int(X.shape[0]),
        "k": int(X.shape[1]),
        "d": int(X.shape[2]),
    }
    status = _exit_status(result)
    payload = {
        "command": args.command_line,
        "config": config,
        "seed": args.seed,
        "solver": args.solver,
        "versions": versions(),
        "exit_status": status,
    }
    files = _write_outputs(args.out, result, payload)
    n, k, d = X.shape
    what = f"Learned a {args.m}-head attention layer (d = {d}, k = {k}) from the {n:,} examples of {args.data}"
    return _report(result, args, {}, (what, []), files)


# ------------------------------------------------------------------------------------------ entry point
def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the subcommand, return its exit status.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0 converged, 1 not converged (or a solver failure, or an internal error, reported on one line), 2 bad
        input: argparse errors and BadInput/ValueError/TypeError print "sculpt CMD: error: ..." (never a
        traceback), 130 interrupted.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed usage and message (or --help/--version)
        return int(exc.code) if isinstance(exc.code, int) else EXIT_BAD_INPUT
    args.command_line = shlex.join(["sculpt", *argv])
    sub = getattr(args, "parser", parser)
    t0 = time.perf_counter()
    try:
        with np.errstate(all="ignore"):  # overflowing figures print as inf; numpy's warnings add nothing
            status = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below, not at interpreter exit
        return status
    except BrokenPipeError:
        if not _stdout_closed():
            raise
        _silence_stdout()
        return EXIT_OK
    except (BadInput, ValueError, TypeError) as exc:  # TypeError: an unknown setting (one line naming it)
        sub.print_usage(sys.stderr)
        print(f"{sub.prog}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError as exc:
        sub.print_usage(sys.stderr)
        print(
            f"{sub.prog}: error: out of memory ({_one_line(exc) or 'MemoryError'}): the sizes given (--samples, "
            "--d, --k, --m or the --data arrays) are too large for this machine",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"{sub.prog}: interrupted after {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        return 130
    except Exception as exc:
        from oracles.errors import OracleError

        if isinstance(exc, OracleError):
            print(f"{sub.prog}: solver failure: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
            return EXIT_NOT_CONVERGED
        if os.environ.get("SCULPT_TRACEBACK"):
            raise
        print(
            f"{sub.prog}: internal error: {type(exc).__name__}: {_one_line(exc)} (please report it; "
            "SCULPT_TRACEBACK=1 shows the traceback)",
            file=sys.stderr,
        )
        return EXIT_NOT_CONVERGED


def _stdout_closed() -> bool:
    """Whether the reader of standard output has gone (``sculpt settings | head``), rather than another pipe.

    Where poll cannot tell (no ``select.poll``, stdout not a file), a BrokenPipeError is taken to be stdout's.
    """
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), 0)  # POLLERR and POLLHUP are always reported
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return True


def _silence_stdout() -> None:
    """Point standard output at the null device, as Python's docs recommend for a closed pipe (signal module,
    "Note on SIGPIPE"): what is still buffered is dropped, and the flush at exit no longer fails."""
    # stdout replaced by an object without a file descriptor: nothing to redirect
    with contextlib.suppress(AttributeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _one_line(exc: BaseException) -> str:
    """The exception's text on one line (at most 500 characters)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 500 else text[:497] + "..."


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
