"""Run a sweep: serially, in local processes, or on a dask.distributed scheduler; resumable.

Runs are appended to ``<out>/trials.jsonl`` by the driving process as they finish; a re-run into the
same folder loads the file and skips every run whose key is present (a torn last line from an
interrupted write is dropped). Records do not depend on the scheduler: each run derives all of its
randomness from its key (:class:`sculpt.bench.grid.RunSpec`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ..toolkit import ProgressBar, dumps, single_blas_thread
from . import TrialRecord
from .grid import Grid, RunSpec
from .trials import run_trial

__all__ = ["RecordStore", "Progress", "SweepResult", "run_sweep", "default_workers", "execute"]


def default_workers() -> int:
    """min(2, cores): the benchmark machines are small and shared."""
    return max(1, min(2, os.cpu_count() or 1))


class RecordStore:
    """The append-only JSON-lines file of a sweep; ``load()`` maps run key -> last record for it."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def load(self) -> dict[str, TrialRecord]:
        """Read every complete line; a torn final line (no newline, or not valid JSON) is cut off."""
        if not self.path.exists():
            return {}
        raw = self.path.read_bytes()
        records: dict[str, TrialRecord] = {}
        good_end = 0
        pos = 0
        while pos < len(raw):
            nl = raw.find(b"\n", pos)
            if nl < 0:
                break
            line = raw[pos:nl].strip()
            if line:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    break
                if isinstance(rec, dict) and isinstance(rec.get("key"), str):
                    records[rec["key"]] = rec
            pos = good_end = nl + 1
        if good_end < len(raw):
            with self.path.open("r+b") as fh:
                fh.truncate(good_end)
        return records

    def append(self, record: TrialRecord) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = dumps(record, sort_keys=True) + "\n"
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())


class Progress:
    """Runs finished out of those to do, on ``stream`` (stderr) through ``sculpt.toolkit.ProgressBar``:
    a tqdm bar on a terminal when tqdm is installed, otherwise one plain line per finished run."""

    def __init__(
        self, total: int, *, skipped: int = 0, stream: TextIO | None = None, enabled: bool = True, width: int = 30
    ):
        self.total, self.skipped, self.ok, self.failed = total, skipped, 0, 0
        self.enabled = enabled
        self._bar: ProgressBar | None = None
        self._stream, self._width = stream, width

    @property
    def done(self) -> int:
        return self._bar.done if self._bar is not None else 0

    def start(self) -> None:
        note = f" ({self.skipped} already done, skipped)" if self.skipped else ""
        self._bar = ProgressBar(self.total, stream=self._stream, enabled=self.enabled, width=self._width)
        self._bar.write(f"bench: {self.total} runs to do{note}")

    def update(self, record: TrialRecord) -> None:
        if self._bar is None:
            self.start()
        assert self._bar is not None
        self.ok += bool(record.get("success"))
        self.failed += record.get("status") == "error"
        mark = "ok" if record.get("success") else ("ERROR" if record.get("status") == "error" else "fail")
        self._bar.advance(
            f"success {self.ok} errors {self.failed} | "
            f"{record.get('trial_key', '?')} {record.get('method', '?')}: {mark}"
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def execute(
    specs: list[RunSpec],
    *,
    scheduler: str = "local",
    workers: int | None = None,
    fn: Callable[[RunSpec], TrialRecord] = run_trial,
) -> Iterator[TrialRecord]:
    """Yield ``fn(spec)`` for every spec as runs finish (any order).

    ``scheduler``: "serial" (this process), "local" (a pool of ``workers`` processes; one worker means
    serial), or a dask.distributed scheduler address such as "tcp://host:8786" (needs the dask extra).
    """
    if not isinstance(scheduler, str) or not scheduler:
        raise ValueError(f"scheduler must be 'serial', 'local' or a dask scheduler address, got {scheduler!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    if not specs:
        return
    if scheduler == "serial" or (scheduler == "local" and (workers or default_workers()) == 1):
        for spec in specs:
            yield fn(spec)
    elif scheduler == "local":
        import multiprocessing as mp

        with single_blas_thread(children=True):
            pool = ProcessPoolExecutor(
                max_workers=min(workers or default_workers(), len(specs)), mp_context=mp.get_context("spawn")
            )
            try:
                futures = [pool.submit(fn, spec) for spec in specs]
                for fut in as_completed(futures):
                    yield fut.result()
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
    else:
        yield from _execute_dask(specs, scheduler, fn)


def _execute_dask(
    specs: list[RunSpec], address: str, fn: Callable[[RunSpec], TrialRecord], connect_timeout: str = "20s"
) -> Iterator[TrialRecord]:
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError:
        raise RuntimeError(
            f"--scheduler {address} needs dask.distributed, which is not installed; "
            f"install the extra (pip install 'sculpt-attention[dask]') or use --scheduler local"
        ) from None
    try:
        client = Client(address, timeout=connect_timeout)
    except (OSError, TimeoutError) as exc:
        raise RuntimeError(
            f"--scheduler {address}: cannot reach the dask scheduler ({type(exc).__name__}: "
            f"{exc}); start one (dask scheduler) or use --scheduler local"
        ) from None
    try:
        futures = client.map(fn, specs, pure=False)
        try:
            for fut in dask_completed(futures):
                yield fut.result()
        finally:
            client.cancel(futures)
    finally:
        client.close()


@dataclass
class SweepResult:
    """What a sweep did: ``records`` of the planned runs (grid order), counts, and the output folder."""

    out: Path
    records: list[TrialRecord]
    planned: int
    skipped: int
    ran: int
    errors: int
    wall: float
    error_messages: list[str] = field(default_factory=list)


def run_sweep(
    grid: Grid,
    out: str | Path,
    *,
    methods: Iterable[str] | None = None,
    scheduler: str = "local",
    workers: int | None = None,
    progress: bool = True,
    retry_errors: bool = False,
    stream: TextIO | None = None,
    fn: Callable[[RunSpec], TrialRecord] = run_trial,
    only: str | None = None,
) -> SweepResult:
    """Run every run of ``grid`` (restricted to ``methods``, and to keys containing ``only``) whose key is
    not yet in <out>/trials.jsonl, appending records as they finish; runs that ended in status "error" are
    redone if ``retry_errors``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    store = RecordStore(out / "trials.jsonl")
    done = store.load()
    plan = [s for s in grid.runs(methods) if only is None or only in s.key]
    keys = [s.key for s in plan]
    if len(set(keys)) != len(keys):
        raise ValueError("grid produces duplicate run keys")
    todo = [s for s in plan if s.key not in done or (retry_errors and done[s.key].get("status") == "error")]
    bar = Progress(len(todo), skipped=len(plan) - len(todo), stream=stream, enabled=progress)
    bar.start()
    t0 = time.perf_counter()
    errors: list[str] = []
    try:
        for record in execute(todo, scheduler=scheduler, workers=workers, fn=fn):
            store.append(record)
            done[record["key"]] = record
            if record.get("status") == "error":
                errors.append(f"{record['key']}: {record.get('error')}")
            bar.update(record)
    finally:
        bar.close()
    return SweepResult(
        out=out,
        records=[done[k] for k in keys if k in done],
        planned=len(plan),
        skipped=len(plan) - len(todo),
        ran=len(todo),
        errors=len(errors),
        wall=time.perf_counter() - t0,
        error_messages=errors,
    )
