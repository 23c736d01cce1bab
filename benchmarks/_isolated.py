"""Run one benchmark measurement in a process of its own (shared by the benchmark scripts).

The parent calls ``run_isolated(script, "function", payload, kill_after=..., memory_limit=...)``; the child
(this file run as a script) caps its address space with ``RLIMIT_AS``, imports ``script`` by path, calls
``function(payload)`` (a JSON-ready dict in, a JSON-ready dict out) and writes the result, with its peak
resident memory (``ru_maxrss``), to a file the parent reads. So each measurement's peak memory is its own, a
hang costs at most ``kill_after`` seconds (the child's process group is killed) and an allocation past the
limit is a recorded outcome, not a crash of the benchmark.

Outcomes: "ok" (the function returned), "timeout" (killed after ``kill_after`` s; peak memory is the
child's high-water mark at the kill), "memory" (MemoryError, or an allocator's "cannot allocate" message,
under the address-space limit), "error" (another exception, with its traceback's tail) and "crash" (the
child died without a result: a signal, an abort in native code).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: texts by which native allocators (C++, torch, OpenBLAS) report a failed allocation
_NO_MEMORY = (
    "cannot allocate memory",
    "can't allocate memory",
    "std::bad_alloc",
    "out of memory",
    "memory allocation failed",
)


@dataclass
class Outcome:
    """What one isolated run gave: ``status`` (see the module's docstring), the function's ``result`` (None
    unless "ok"), the child's ``wall`` seconds from start to exit, its ``peak_mb`` resident memory (None when
    unknown) and a ``message`` (why it did not return: the exception, the signal, stderr's tail)."""

    status: str
    result: dict[str, Any] | None = None
    wall: float = 0.0
    peak_mb: float | None = None
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB (``ru_maxrss`` is in kB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024.0 * 1024.0) if sys.platform == "darwin" else peak / 1024.0


def _high_water_mb(pid: int) -> float | None:
    """A live process's peak resident memory (VmHWM) in MB, or None where /proc is not readable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return float(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def is_out_of_memory(text: str) -> bool:
    """Whether an error text reports a failed allocation."""
    low = text.lower()
    return "memoryerror" in low or any(s in low for s in _NO_MEMORY)


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_isolated(
    script: str | Path,
    function: str,
    payload: dict[str, Any],
    *,
    kill_after: float,
    memory_limit: float | None = None,
    env: dict[str, str] | None = None,
) -> Outcome:
    """Call ``function(payload)`` of the script at ``script`` in a fresh Python process.

    Parameters
    ----------
    script
        Path of a Python file defining ``function``; imported by path in the child (its module-level code
        runs there, so it must not start work on import).
    function
        Name of a function taking the JSON-ready ``payload`` dict and returning a JSON-ready dict.
    payload
        The call's argument (JSON: floats may be inf or nan).
    kill_after
        Seconds after which the child's process group is killed and the outcome is "timeout".
    memory_limit
        The child's address-space limit in bytes (RLIMIT_AS; None or <= 0: none). Address space counts every
        mapping, not only what is resident: imports alone reserve 0.3–0.8 GB.
    env
        The child's environment (None: this process's).

    Returns
    -------
    Outcome
        The status, the result when "ok", wall seconds, peak memory and a message.
    """
    with tempfile.TemporaryDirectory(prefix="bench-isolated-") as tmp:
        arg, res = Path(tmp) / "payload.json", Path(tmp) / "result.json"
        arg.write_text(json.dumps(payload))
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            str(Path(script).resolve()),
            function,
            str(arg),
            str(res),
            str(int(memory_limit or 0)),
        ]
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
        )  # its own group: the kill reaches any grandchild
        try:
            _, err = proc.communicate(timeout=kill_after)
        except subprocess.TimeoutExpired:
            peak = _high_water_mb(proc.pid)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return Outcome(
                "timeout", wall=time.perf_counter() - t0, peak_mb=peak, message=f"killed after {kill_after:.0f} s"
            )
        wall = time.perf_counter() - t0
        if not res.exists():
            status = "memory" if is_out_of_memory(err) else "crash"
            return Outcome(status, wall=wall, message=f"exit code {proc.returncode}: {_tail(err)}")
        out = json.loads(res.read_text())
    return Outcome(
        out["status"], result=out.get("result"), wall=wall, peak_mb=out.get("peak_mb"), message=out.get("message", "")
    )


def _load(script: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(Path(script).stem + "_isolated_child", script)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {script}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def _child(script: str, function: str, payload_path: str, result_path: str, memory_limit: int) -> int:
    """The child's side: limit, import, call, write ``{"status", "result" | "message", "peak_mb"}``."""
    if memory_limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    out: dict[str, Any]
    try:
        result = getattr(_load(script), function)(json.loads(Path(payload_path).read_text()))
        out = {"status": "ok", "result": result}
    except MemoryError as exc:  # numpy's _ArrayMemoryError included; the frames holding the arrays go here
        out = {"status": "memory", "message": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # any failure of the measured code is an outcome
        text = f"{type(exc).__name__}: {exc}"
        out = {
            "status": "memory" if is_out_of_memory(text) else "error",
            "message": text + "\n" + _tail(traceback.format_exc()),
        }
    out["peak_mb"] = peak_rss_mb()
    Path(result_path).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    a = sys.argv[1:]
    raise SystemExit(_child(a[0], a[1], a[2], a[3], int(a[4])))
