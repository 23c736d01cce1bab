"""Backend names: which LP/QP/conic backend a ``solver=`` argument resolves to, and which exist.

Callers outside the engine (a learner, a command line) validate a user's backend choice with these two
functions instead of reaching into ``oracles.solvers``.
"""

from __future__ import annotations

from . import solvers

__all__ = ["backend_name", "backend_names"]


def backend_name(solver: str | None = None, kind: str = "lp") -> str:
    """The backend that ``solver=`` resolves to for problems of ``kind``.

    Parameters
    ----------
    solver : str or None
        A backend name, any case (``"highs"``, ``"MOSEK"``, ...); None asks for the engine's default.
    kind : {"lp", "qp", "conic"}
        The problem kind the backend must handle.

    Returns
    -------
    str
        The registry's name of the backend (upper case), e.g. ``"HIGHS"``.

    Raises
    ------
    ValueError
        ``solver`` is not a registered backend name, or ``kind`` is not a known kind.
    SolverError
        The backend is registered but unusable here (MOSEK without a licence), cannot handle ``kind``,
        or no usable backend handles ``kind``.

    Examples
    --------
    >>> backend_name()
    'HIGHS'
    >>> backend_name("clarabel", kind="qp")
    'CLARABEL'
    """
    if solver is None:
        return solvers.default(kind)
    return solvers.get(solver, kind=kind).name


def backend_names(kind: str | None = None, *, usable: bool = True) -> list[str]:
    """Names of the backends, in registry order.

    Parameters
    ----------
    kind : {"lp", "qp", "conic"} or None
        Only backends that handle this kind (None: any kind).
    usable : bool
        True: the backends that work here (MOSEK only with a valid licence). False: every registered
        backend, usable here or not.

    Returns
    -------
    list of str
        Upper-case backend names.

    Raises
    ------
    ValueError
        ``kind`` is not a known kind.

    Examples
    --------
    >>> {"HIGHS", "CLARABEL", "SCS", "MOSEK"} <= set(backend_names(usable=False))
    True
    >>> "HIGHS" in backend_names("lp")
    True
    """
    if usable:
        return solvers.available(kind)
    if kind is None:
        return solvers.registered()
    if kind not in solvers.KINDS:
        raise ValueError(f"kind must be one of {solvers.KINDS}, got {kind!r}")
    return [n for n in solvers.registered() if kind in solvers.capabilities(n)]
