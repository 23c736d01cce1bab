"""docs/howto.md runs as written: every ```python block, in order, in one namespace, in a scratch directory (a
block whose first line is ``# name.py`` is also saved there as that file, for later blocks to import), and the
pytest command of its backend example. The registries the page extends are restored afterwards."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from oracles import solvers
from sculpt.routes import ROUTES

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "howto.md"
FILE_BLOCK = re.compile(r"#\s*([\w-]+\.py)\s*\n")


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), re.S)


@pytest.fixture
def registries():
    """The route registry (the page registers a route for good) and the backend registry and probe cache (the
    page registers a backend inside a ``with`` block, which must leave them as they were)."""
    routes, backends, probes = dict(ROUTES), dict(solvers._REGISTRY), dict(solvers._probe_cache)
    yield backends, probes
    ROUTES.clear()
    ROUTES.update(routes)
    solvers._REGISTRY.clear()
    solvers._REGISTRY.update(backends)
    solvers._probe_cache.clear()
    solvers._probe_cache.update(probes)


def test_every_python_block_runs(tmp_path, monkeypatch, registries):
    backends, _ = registries
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    code_blocks = blocks("python")
    saved = [m.group(1) for b in code_blocks if (m := FILE_BLOCK.match(b))]
    assert len(code_blocks) >= 9 and saved == ["toy_backend.py"]
    ns: dict = {"__name__": "howto_md"}
    try:
        for i, code in enumerate(code_blocks, 1):
            m = FILE_BLOCK.match(code)
            if m:
                (tmp_path / m.group(1)).write_text(code)
            exec(compile(code, f"docs/howto.md python block {i}", "exec"), ns)
    finally:
        sys.modules.pop("toy_backend", None)

    # the first sections
    assert ns["res"].converged and ns["res"].info.settings.sculpt_examples == 10_000
    assert ns["peer"].converged and ns["fast"].converged
    # a route: learn, the command line and the benchmark ran it
    assert ns["grown"].converged and ns["grown"].info.route == "growing"
    assert [p.name for p in ns["grown"].phases][0] == "growing"
    assert ns["cli_status"] == 0 and ns["bench_status"] == 0
    trials = (tmp_path / "results" / "growing-bench" / "trials.jsonl").read_text()
    assert '"method": "growing"' in trials and '"status": "error"' not in trials
    # a phase: recorded after the polish, directly and through learn; the route's pipeline is restored
    assert ns["failure"] is None and [r.name for r in ns["records"]][-1] == "heads-check"
    assert ns["checked"].converged and ns["checked"].phases[-1].name == "heads-check"
    assert ns["checked"].info.details["head_separation"] > 0.5
    import sculpt.routes.sculpting

    assert sculpt.routes.sculpting.SCULPT_PHASES is ns["SCULPT_PHASES"]
    # a backend: the learner's LPs went through it, and the registration ended with its block
    assert ns["on_toy"].converged and ns["on_toy"].info.solver == "TOY" and ns["toy"].solves > 0
    assert solvers._REGISTRY == backends and "TOY" not in solvers._probe_cache and "TOY" not in solvers.registered()


def test_the_backend_example_passes_the_canonical_cases(tmp_path):
    """The page's pytest command, with its toy_backend.py on PYTHONPATH: the canonical LP cases pass, the
    QP cases skip (TOY declares LPs only), nothing fails."""
    toy = next(b for b in blocks("python") if (m := FILE_BLOCK.match(b)) and m.group(1) == "toy_backend.py")
    (tmp_path / "toy_backend.py").write_text(toy)
    line = next(ln for b in blocks("bash") for ln in b.splitlines() if "-p toy_backend" in ln)
    argv = shlex.split(line)
    assert argv[:3] == [".venv/bin/python", "-m", "pytest"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)}
    out = subprocess.run([sys.executable, *argv[1:], "-q", "-p", "no:cacheprovider"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    report = out.stdout[-4000:] + out.stderr[-4000:]
    assert out.returncode == 0, report
    passed = re.search(r"(\d+) passed", out.stdout)
    assert passed is not None and int(passed.group(1)) >= 18, report  # 3 LP tests x 6 canonical bodies, at least
    assert "TOY does not handle qp problems" in out.stdout and "failed" not in out.stdout, report
