"""The one JSON writer: strict JSON (RFC 8259) whatever the payload holds.

``to_jsonable`` maps a value to plain JSON types: numpy scalars to Python numbers, arrays to nested lists,
tuples and sets to lists, non-finite floats (nan, ±inf) to ``null``, paths to strings, objects with a
``to_dict()`` through it and anything else to ``str``. ``dumps`` and ``write_json`` always serialise with
``allow_nan=False``, so what they write parses with any strict JSON reader.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import TypeAlias

import numpy as np

__all__ = ["to_jsonable", "dumps", "write_json", "JSON"]

#: a value made of JSON types only
JSON: TypeAlias = None | bool | int | float | str | list["JSON"] | dict[str, "JSON"]


def to_jsonable(value: object, *, max_array: int | None = None) -> JSON:
    """A JSON-ready copy of ``value``: numpy scalars to Python numbers, arrays to nested lists, tuples and sets
    to lists, non-finite floats to None, paths to strings, objects with ``to_dict()`` through it, dataclasses
    field by field, anything else to ``str``.

    Parameters
    ----------
    value
        The value (of whatever type).
    max_array
        When set, arrays with more entries become {"array_shape", "norm"} and lists longer than 4·max_array
        become {"list_length", "head" (first 8), "last"} (keeps records small).

    Returns
    -------
    JSON
        Plain JSON types only.
    """

    def conv(v: object) -> JSON:
        if v is None or isinstance(v, str):
            return v
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        if isinstance(v, (int, np.integer)):
            return int(v)
        if isinstance(v, (float, np.floating)):
            f = float(v)
            return f if math.isfinite(f) else None
        if isinstance(v, dict):
            return {str(k): conv(x) for k, x in v.items()}
        if isinstance(v, (list, tuple, set, frozenset)):
            items = sorted(v, key=repr) if isinstance(v, (set, frozenset)) else list(v)
            if max_array is not None and len(items) > 4 * max_array:
                return {"list_length": len(items), "head": conv(items[:8]), "last": conv(items[-1])}
            return [conv(x) for x in items]
        if isinstance(v, np.ndarray):
            if max_array is not None and v.size > max_array:
                norm = float(np.linalg.norm(v)) if v.dtype.kind in "biuf" else None
                return {"array_shape": list(v.shape), "norm": conv(norm)}
            return conv(v.tolist())
        if isinstance(v, (complex, np.complexfloating)):
            return str(v)
        if isinstance(v, os.PathLike):
            return os.fspath(v)
        to_dict = getattr(v, "to_dict", None)
        if callable(to_dict) and not isinstance(v, type):
            return conv(to_dict())
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return conv({f.name: getattr(v, f.name) for f in dataclasses.fields(v)})
        return str(v)

    return conv(value)


def dumps(value: object, *, indent: int | None = None, sort_keys: bool = False, max_array: int | None = None) -> str:
    """Strict JSON text: ``json.dumps(to_jsonable(value), allow_nan=False)`` (non-finite numbers are null).

    Parameters
    ----------
    value
        The value (of whatever type).
    indent, sort_keys
        As for ``json.dumps``.
    max_array
        As for ``to_jsonable``.

    Returns
    -------
    str
        The JSON text.
    """
    return json.dumps(to_jsonable(value, max_array=max_array), indent=indent, sort_keys=sort_keys, allow_nan=False)


def write_json(
    path: str | os.PathLike[str],
    value: object,
    *,
    indent: int | None = 2,
    sort_keys: bool = False,
    max_array: int | None = None,
) -> Path:
    """Write ``dumps(value)`` plus a newline to ``path`` (UTF-8, parent folders created). The text is built
    before the file is opened, so a value that cannot be serialised leaves no file.

    Parameters
    ----------
    path
        The file.
    value
        The value (of whatever type).
    indent, sort_keys, max_array
        As for ``dumps``.

    Returns
    -------
    pathlib.Path
        The file written.
    """
    out = Path(path)
    text = dumps(value, indent=indent, sort_keys=sort_keys, max_array=max_array) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out
