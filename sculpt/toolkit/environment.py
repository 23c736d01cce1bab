"""The one ``versions()``: what ran, for the records of the CLI, the benchmark and the benchmark scripts."""

from __future__ import annotations

import functools
import importlib.metadata as md
import os
import platform
import subprocess
from pathlib import Path

__all__ = ["PACKAGES", "package_version", "versions"]

#: distributions a run can touch, reported by ``versions()`` (read from metadata, nothing is imported)
PACKAGES: tuple[str, ...] = ("sculpt-attention", "numpy", "scipy", "cvxpy", "clarabel", "highspy", "scs", "torch")


def package_version(name: str) -> str:
    """The installed version of a distribution (read from its metadata, nothing is imported).

    Parameters
    ----------
    name
        The distribution's name.

    Returns
    -------
    str
        Its version, or "absent".
    """
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "absent"


@functools.lru_cache(maxsize=1)
def _git_commit() -> str | None:
    """The short commit of the source checkout sculpt is imported from (None for an installed wheel)."""
    root = Path(__file__).resolve().parents[2]
    if not ((root / ".git").exists() and (root / "pyproject.toml").is_file()):
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def versions() -> dict[str, str]:
    """What ran: Python, the machine, the core count, every distribution in ``PACKAGES`` and the git commit of a
    source checkout.

    Returns
    -------
    dict of str to str
        {python, machine, cpus, one entry per name in PACKAGES (version or "absent"), git (checkout only)}, a
        copy of the cached answer.
    """
    return dict(_versions())


#: the key ``versions()`` files a distribution under when its import name differs
_IMPORT_NAMES = {"sculpt-attention": "sculpt"}


@functools.lru_cache(maxsize=1)
def _versions() -> dict[str, str]:
    out: dict[str, str] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": str(os.cpu_count()),
    }
    out.update({_IMPORT_NAMES.get(name, name): package_version(name) for name in PACKAGES})
    commit = _git_commit()
    if commit:
        out["git"] = commit
    return out
