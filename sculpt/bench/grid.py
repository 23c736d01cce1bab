"""Benchmark grids: which instances (cells), seeds and methods a sweep runs.

A grid file (TOML, or JSON with the same structure) holds top-level defaults and a list of ``[[cells]]``
blocks; every list-valued field of a block is expanded as a Cartesian product::

    name = "quick"
    seeds = [0, 1]                      # or an int n meaning range(n)
    methods = ["sculpt", "exact", "lbfgs", "adam"]
    test_samples = 2000                 # fresh inputs for the test relative MSE
    threshold = 1e-12                   # success: test relative MSE <= threshold

    [method_options.lbfgs]              # keyword options of each method (see sculpt.bench.methods)
    max_iter = 500

    [[cells]]
    regime = "generic"                  # a label for the report
    d = [4, 8]
    k = 4
    m = [1, 2]
    N = [200, 2000]                     # or n_factor = [1.2, 2]: N = ceil(n_factor * 2 m d / k)
    scale = 2.5                         # plant(..., scale=)
    distribution = "boolean"            # or "gaussian"
    noise = 0.0                         # label noise: Y = F(X) + noise * rms(F) * N(0, 1)
    weak_head = 0.01                    # optional, plant(..., weak_head=)
    separation = 0.03                   # optional, plant(..., separation=)

A block may also override ``seeds``, ``methods``, ``threshold``, ``test_samples`` and (merged key by key)
``method_options``. Seeds are derived from the instance, never from the position in the grid, so any
trial can be re-run alone (see :func:`derive_seed`).
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

from . import Json
from .methods import registered

__all__ = [
    "Cell",
    "RunSpec",
    "Grid",
    "load_grid",
    "grid_from_dict",
    "builtin_grid",
    "builtin_grids",
    "GRID_FOLDER",
    "derive_seed",
    "ALL_METHODS",
]

ALL_METHODS: tuple[str, ...] = ("sculpt", "auto", "exact", "lbfgs-growing", "lbfgs", "adam")
GRID_FOLDER = "grids"  # package data of sculpt.bench: the built-in grids <name>.toml

_CELL_FIELDS = ("regime", "d", "k", "m", "N", "n_factor", "scale", "distribution", "noise", "weak_head", "separation")
_BLOCK_ONLY = ("seeds", "methods", "threshold", "test_samples", "method_options")
_TOP_LEVEL = ("name", "description") + _BLOCK_ONLY + ("cells",)
MAX_CELLS = 100_000  # cells one grid may expand to (the product of a block's lists)
MAX_SEEDS = 100_000  # seeds per cell


def _fmt(x: object) -> str:
    """Canonical short text of a cell value for keys: ints as ints, floats by repr, None as '-'."""
    if x is None:
        return "-"
    if isinstance(x, float):
        return repr(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)
    return str(x)


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from the canonical text of ``parts``: seed = sha256("|".join(parts)) mod 2⁶³."""
    text = "|".join(_fmt(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


@dataclass(frozen=True)
class Cell:
    """One instance family: sizes (d, k, m), examples N, plant scale, input law, label noise and the
    optional hard-regime knobs ``weak_head`` / ``separation`` of :func:`sculpt.data.plant`."""

    regime: str
    d: int
    k: int
    m: int
    N: int
    scale: float = 2.5
    distribution: str = "boolean"
    noise: float = 0.0
    weak_head: float | None = None
    separation: float | None = None
    n_factor: float | None = None

    @property
    def count(self) -> float:
        """The parameter-counting sample size 2md/k (2md² unknowns over kd outputs per example)."""
        return 2 * self.m * self.d / self.k

    @property
    def instance_key(self) -> str:
        """What the planted layer depends on (not N, not the noise, not the regime label)."""
        return (
            f"d{self.d}k{self.k}m{self.m}:scale{_fmt(self.scale)}:{self.distribution}"
            f":weak{_fmt(self.weak_head)}:sep{_fmt(self.separation)}"
        )

    @property
    def key(self) -> str:
        """Canonical cell key: regime label, the instance and the data size / noise."""
        return f"{self.regime}:{self.instance_key}:N{self.N}:noise{_fmt(self.noise)}"

    @property
    def data_key(self) -> str:
        """What the training / test data depend on (the instance, N and the noise; not the label)."""
        return f"{self.instance_key}:N{self.N}:noise{_fmt(self.noise)}"

    def to_dict(self) -> dict[str, Json]:
        return asdict(self)


@dataclass(frozen=True)
class RunSpec:
    """One run: a method on the data of one trial (cell, seed). Everything needed to reproduce it."""

    cell: Cell
    seed: int
    method: str
    options: Mapping[str, Json] = field(default_factory=dict)
    threshold: float = 1e-12
    test_samples: int = 2000

    @property
    def trial_key(self) -> str:
        return f"{self.cell.key}:seed{self.seed}"

    @property
    def options_digest(self) -> str:
        """Eight hex digits of the method options, threshold and test size, so that runs with changed
        settings are not mistaken for done ones."""
        text = json.dumps(
            {"options": dict(self.options), "threshold": self.threshold, "test_samples": self.test_samples},
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(text.encode()).hexdigest()[:8]

    @property
    def key(self) -> str:
        """Run key: trial key, method and settings digest (the resume key)."""
        return f"{self.trial_key}:{self.method}@{self.options_digest}"

    @property
    def instance_seed(self) -> int:
        """Seeds the planted layer: shared by every N, noise level and method of one (instance, seed)."""
        return derive_seed("instance", self.cell.instance_key, self.seed)

    @property
    def data_seed(self) -> int:
        """Seeds the training inputs, label noise and test inputs of the trial (shared by its methods)."""
        return derive_seed("data", self.cell.data_key, self.seed)

    @property
    def method_seed(self) -> int:
        """Seeds the method's own randomness (initialisation, row sampling)."""
        return derive_seed("method", self.cell.data_key, self.seed, self.method)


@dataclass
class Grid:
    """An expanded grid: its ``name``, the cells, seeds, methods and per-method options."""

    name: str
    cells: list[Cell]
    seeds: dict[str, list[int]]  # cell key -> seeds
    methods: dict[str, list[str]]  # cell key -> methods
    method_options: dict[str, dict[str, dict[str, Json]]]  # cell key -> method -> options
    threshold: dict[str, float]
    test_samples: dict[str, int]
    description: str = ""
    source: dict[str, Json] = field(default_factory=dict)

    def runs(self, methods: Iterable[str] | None = None) -> list[RunSpec]:
        """Every (cell, seed, method) run, in grid order. ``methods`` chooses the methods: one the grid lists
        runs in the cells that list it, one the grid lists nowhere (``--methods vp-lm`` on a grid without it) in
        every cell. The exact route applies only to single-head cells (m = 1) and is left out elsewhere."""
        wanted = None if methods is None else list(methods)
        listed = {name for names in self.methods.values() for name in names}
        out: list[RunSpec] = []
        for cell in self.cells:
            ms = self.methods[cell.key]
            if wanted is not None:
                ms = [m for m in wanted if m in ms or m not in listed]
            for seed in self.seeds[cell.key]:
                for method in ms:
                    if method == "exact" and cell.m != 1:
                        continue
                    out.append(
                        RunSpec(
                            cell,
                            seed,
                            method,
                            self.method_options[cell.key].get(method, {}),
                            self.threshold[cell.key],
                            self.test_samples[cell.key],
                        )
                    )
        return out

    def with_seeds(self, n: int) -> Grid:
        """A copy running seeds 0..n-1 in every cell (1 <= n <= MAX_SEEDS, else ValueError)."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_SEEDS:
            raise ValueError(f"--seeds must be an integer in [1, {MAX_SEEDS}], got {n!r}")
        g = copy.deepcopy(self)
        g.seeds = {key: list(range(n)) for key in g.seeds}
        return g


def _as_list(value: Json) -> list[Json]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _seeds(value: Json, where: str) -> list[int]:
    if isinstance(value, bool):
        raise TypeError(f"{where}: seeds must be an int or a list of ints")
    if isinstance(value, int):
        if not 1 <= value <= MAX_SEEDS:
            raise ValueError(f"{where}: seeds = {value} must lie in [1, {MAX_SEEDS}]")
        return list(range(value))
    seeds = _as_list(value)
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
        raise ValueError(f"{where}: seeds must be a non-empty list of non-negative ints, got {value!r}")
    return seeds


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_cell(c: Cell, where: str) -> None:
    if not isinstance(c.regime, str):
        raise ValueError(f"{where}: regime must be a string, got {c.regime!r}")
    for name in ("d", "k", "m", "N"):
        v = getattr(c, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{where}: {name} must be an integer >= 1, got {v!r}")
    if not isinstance(c.distribution, str) or c.distribution not in ("boolean", "gaussian"):
        raise ValueError(f"{where}: distribution must be 'boolean' or 'gaussian', got {c.distribution!r}")
    if not (_is_number(c.scale) and c.scale > 0):
        raise ValueError(f"{where}: scale must be a positive number, got {c.scale!r}")
    if not (_is_number(c.noise) and c.noise >= 0):
        raise ValueError(f"{where}: noise must be a number >= 0, got {c.noise!r}")
    for name in ("weak_head", "separation"):
        v = getattr(c, name)
        if v is not None and not (_is_number(v) and v > 0):
            raise ValueError(f"{where}: {name} must be a positive number or absent, got {v!r}")


def _expand_block(block: Mapping[str, Json], where: str) -> list[Cell]:
    unknown = set(block) - set(_CELL_FIELDS) - set(_BLOCK_ONLY)
    if unknown:
        raise ValueError(
            f"{where}: unknown field(s) {sorted(unknown)}; allowed: {sorted(set(_CELL_FIELDS) | set(_BLOCK_ONLY))}"
        )
    for name in ("d", "k", "m"):
        if name not in block:
            raise ValueError(f"{where}: missing field {name!r}")
    if ("N" in block) == ("n_factor" in block):
        raise ValueError(f"{where}: give exactly one of 'N' and 'n_factor'")
    names = [n for n in _CELL_FIELDS if n in block]
    count = math.prod(len(_as_list(block[n])) for n in names)
    if count > MAX_CELLS:
        raise ValueError(f"{where}: its lists expand to {count} cells, above the limit of {MAX_CELLS}")
    cells = []
    for values in itertools.product(*(_as_list(block[n]) for n in names)):
        kw = dict(zip(names, values))
        kw.setdefault("regime", "generic")
        for name in ("scale", "noise", "weak_head", "separation", "n_factor"):
            if isinstance(kw.get(name), int) and not isinstance(kw.get(name), bool):
                kw[name] = float(kw[name])
        for name in ("d", "k", "m"):
            v = kw[name]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{where}: {name} must be an integer >= 1, got {v!r}")
        if "n_factor" in kw:
            f = kw["n_factor"]
            if not (isinstance(f, float) and math.isfinite(f) and f > 0):
                raise ValueError(f"{where}: n_factor must be a positive number, got {f!r}")
            kw["N"] = math.ceil(f * 2 * kw["m"] * kw["d"] / kw["k"] - 1e-9)
        cell = Cell(**kw)
        _check_cell(cell, where)
        cells.append(cell)
    return cells


def grid_from_dict(spec: Mapping[str, Json], *, name: str | None = None) -> Grid:
    """Build a :class:`Grid` from the parsed grid-file structure (see the module docstring)."""
    if not isinstance(spec, Mapping):
        raise TypeError(f"grid spec must be a mapping, got {type(spec).__name__}")
    unknown = set(spec) - set(_TOP_LEVEL)
    if unknown:
        raise ValueError(f"grid: unknown top-level field(s) {sorted(unknown)}; allowed: {sorted(_TOP_LEVEL)}")
    blocks = spec.get("cells")
    if not isinstance(blocks, list) or not blocks:
        raise ValueError("grid: 'cells' must be a non-empty list of cell blocks")
    for key in ("name", "description"):
        if key in spec and not isinstance(spec[key], str):
            raise ValueError(f"grid: {key} must be a string, got {spec[key]!r}")
    default_methods = _methods(spec.get("methods", list(ALL_METHODS)), "grid")
    default_opts = _method_options(spec.get("method_options", {}), "grid")
    grid = Grid(
        name=name or str(spec.get("name", "grid")),
        cells=[],
        seeds={},
        methods={},
        method_options={},
        threshold={},
        test_samples={},
        description=str(spec.get("description", "")),
        source=dict(spec),
    )
    for i, block in enumerate(blocks):
        where = f"grid cells[{i}]"
        if not isinstance(block, Mapping):
            raise TypeError(f"{where} must be a table/mapping, got {type(block).__name__}")
        seeds = _seeds(block.get("seeds", spec.get("seeds", [0])), where)
        methods = _methods(block.get("methods", default_methods), where)
        known = set(ALL_METHODS) | set(registered())
        opts = {m: dict(default_opts.get(m, {})) for m in known}
        for m, o in _method_options(block.get("method_options", {}), where).items():
            opts.setdefault(m, {}).update(o)
        threshold = block.get("threshold", spec.get("threshold", 1e-12))
        test_samples = block.get("test_samples", spec.get("test_samples", 2000))
        if not (_is_number(threshold) and threshold > 0):
            raise ValueError(f"{where}: threshold must be a number > 0, got {threshold!r}")
        if isinstance(test_samples, bool) or not isinstance(test_samples, int) or test_samples < 1:
            raise ValueError(f"{where}: test_samples must be an integer >= 1, got {test_samples!r}")
        threshold = float(threshold)
        for cell in _expand_block(block, where):
            if cell.key in grid.seeds:
                raise ValueError(f"{where}: cell {cell.key} appears twice in the grid")
            grid.cells.append(cell)
            grid.seeds[cell.key] = seeds
            grid.methods[cell.key] = methods
            grid.method_options[cell.key] = opts
            grid.threshold[cell.key] = threshold
            grid.test_samples[cell.key] = test_samples
    return grid


def _methods(value: Json, where: str) -> list[str]:
    methods = _as_list(value)
    known = set(ALL_METHODS) | set(registered())
    bad = [m for m in methods if not isinstance(m, str) or m not in known]
    if bad or not methods:
        raise ValueError(f"{where}: unknown method(s) {bad}; choose from {sorted(known)}")
    return methods


def _method_options(value: Json, where: str) -> dict[str, dict[str, Json]]:
    """``method_options``: a table of method name -> table of keyword options."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: method_options must be a table of method -> options, got {value!r}")
    for method, options in value.items():
        if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
            raise ValueError(f"{where}: method_options.{method} must be a table of options, got {options!r}")
    return {str(m): dict(o) for m, o in value.items()}


def _parse(text: str, suffix: str, where: str) -> dict[str, Json]:
    """The grid structure from the text of a ``.toml`` (tomllib; tomli on 3.10) or ``.json`` file."""
    from .._checks import MAX_JSON_DEPTH, json_depth

    if suffix not in (".json", ".toml"):
        raise ValueError(f"grid file {where} must end in .toml or .json")
    if suffix == ".json" and json_depth(text) > MAX_JSON_DEPTH:
        raise ValueError(f"grid file {where}: nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        if suffix == ".json":
            spec = json.loads(text)
        else:
            if sys.version_info >= (3, 11):
                import tomllib
            else:  # pragma: no cover - Python 3.10 (tomli is a dependency there)
                import tomli as tomllib
            spec = tomllib.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and TOMLDecodeError are ValueErrors
        raise ValueError(f"grid file {where}: {exc}") from None
    if not isinstance(spec, dict):
        raise ValueError(f"grid file {where} must hold a table/object, got {type(spec).__name__}")
    return spec


def load_grid(path: str | Path) -> Grid:
    """Read a grid file: ``.toml`` or ``.json`` with the same structure."""
    p = Path(path)
    if not p.exists():
        raise ValueError(f"grid file {p} does not exist")
    if not p.is_file():
        raise ValueError(f"grid file {p} is not a file")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ValueError(f"grid file {p}: cannot read it ({exc.strerror or exc})") from None
    if len(raw) > 16 * 2**20:
        raise ValueError(f"grid file {p}: {len(raw)} bytes, above the limit of 16 MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"grid file {p}: not UTF-8 text (byte {raw[exc.start]:#04x} at position {exc.start})"
        ) from None
    spec = _parse(text, p.suffix.lower(), str(p))
    try:
        return grid_from_dict(spec, name=spec.get("name", p.stem))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"grid file {p}: {exc}") from None


def builtin_grids() -> list[str]:
    """Names of the grids shipped as package data in ``sculpt/bench/grids/`` (e.g. "default", "quick")."""
    folder = resources.files("sculpt.bench") / GRID_FOLDER
    return sorted(e.name[: -len(".toml")] for e in folder.iterdir() if e.name.endswith(".toml"))


def builtin_grid(name: str) -> Grid:
    """The grid ``sculpt/bench/grids/<name>.toml``, read as package data (``importlib.resources``), so it
    works from an installed wheel as from a checkout."""
    entry = resources.files("sculpt.bench") / GRID_FOLDER / f"{name}.toml"
    if not entry.is_file():
        raise ValueError(
            f"no built-in grid {name!r}; built-in grids: {', '.join(builtin_grids())} (or pass --grid FILE)"
        )
    spec = _parse(entry.read_text(encoding="utf-8"), ".toml", f"sculpt/bench/{GRID_FOLDER}/{name}.toml")
    return grid_from_dict(spec, name=spec.get("name", name))
