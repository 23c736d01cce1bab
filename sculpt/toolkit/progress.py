"""Progress on stderr: tqdm on a terminal when it is installed, plain lines otherwise (logs, pipes, CI).

``ProgressBar`` counts finished steps (the benchmark's runs); ``Progress`` is the learner's phase
reporter (a line when a phase starts, one when it ends, notes in between) built on it. Every event is
also sent to the ``sculpt`` logger at DEBUG level.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import TYPE_CHECKING, Protocol, TextIO

if TYPE_CHECKING:
    from tqdm import tqdm

__all__ = ["ProgressBar", "Progress", "tqdm_available"]

log = logging.getLogger("sculpt")


def tqdm_available() -> bool:
    """Whether tqdm can be imported.

    Returns
    -------
    bool
    """
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return False
    return True


def _clock(seconds: float) -> str:
    """h:mm as "1h05m" from an hour on, else "4m07s"."""
    s = round(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class ProgressBar:
    """done/total steps on ``stream`` (default stderr).

    On a terminal with tqdm installed: a tqdm bar (messages printed above it). Otherwise one plain line per
    finished step, ``{label}[####....] done/total | elapsed, ~left | text``, redrawn in place on a terminal.
    ``enabled=False`` writes nothing (events still go to the logger).
    """

    def __init__(
        self,
        total: int,
        *,
        label: str = "",
        stream: TextIO | None = None,
        enabled: bool = True,
        width: int = 30,
        eta: bool = True,
        use_tqdm: bool | None = None,
    ) -> None:
        self.total, self.done, self.label, self.width, self.eta = int(total), 0, label, width, eta
        self.enabled = bool(enabled)
        self.stream: TextIO = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.perf_counter()
        self._tqdm: tqdm[None] | None = None
        if use_tqdm is None:
            use_tqdm = self.tty and tqdm_available()
        if self.enabled and use_tqdm:
            from tqdm import tqdm

            self._tqdm = tqdm(total=self.total, desc=label or None, file=self.stream, dynamic_ncols=True, leave=True)

    def describe(self, text: str) -> None:
        """Set what the bar is working on (tqdm's description; nothing in plain mode)."""
        if self._tqdm is not None:
            self._tqdm.set_description_str(text, refresh=True)

    def write(self, text: str) -> None:
        """A message line (above the bar on a terminal)."""
        log.debug("%s", text)
        if not self.enabled:
            return
        if self._tqdm is not None:
            self._tqdm.write(text, file=self.stream)
            return
        self.stream.write(text + "\n")
        self.stream.flush()

    def line(self, text: str = "") -> str:
        """The plain progress line for the current count."""
        elapsed = time.perf_counter() - self.t0
        filled = int(self.width * self.done / max(self.total, 1))
        bar = "#" * filled + "." * (self.width - filled)
        times = f"{_clock(elapsed)} elapsed"
        if self.eta:
            left = elapsed / self.done * max(self.total - self.done, 0) if self.done else 0.0
            times += f", ~{_clock(left)} left"
        head = f"{self.label} " if self.label else ""
        return f"{head}[{bar}] {self.done}/{self.total} | {times}" + (f" | {text}" if text else "")

    def advance(self, text: str = "", n: int = 1) -> None:
        """``n`` more steps done; ``text`` says which (tqdm postfix, or the end of the plain line)."""
        self.done += n
        log.debug("%s", self.line(text))
        if not self.enabled:
            return
        if self._tqdm is not None:
            if text:
                self._tqdm.set_postfix_str(text, refresh=False)
            self._tqdm.update(n)
            if self.done >= self.total:
                self.close()
            return
        line = self.line(text)
        if self.tty:
            self.stream.write("\r" + line + "\x1b[K" + ("\n" if self.done >= self.total else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Finish the bar (tqdm: leave it on screen)."""
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None


class _PhaseRecord(Protocol):
    name: str
    status: str
    time: float
    message: str


class Progress:
    """The learner's phase reporter: ``start(name)`` when a phase begins (returns time.perf_counter()),
    ``note(text)`` in between, ``end(rec)`` with its record (``.name .status .time .message``).

    Plain lines ``[route i/total] name ...`` / ``[route i/total] [##...] name: status in t s``; a tqdm bar
    over the phases instead on a terminal when tqdm is installed. ``total`` is the route's announced step count;
    a route that runs more (auto's sculpting step repeats its phases on larger subsets) raises it, so the
    count never exceeds the total. While a step runs, a line ``name: still running, t s`` every ``heartbeat``
    seconds (a tqdm bar: its elapsed time refreshed every second) shows that long steps are alive.
    """

    def __init__(
        self,
        enabled: bool,
        route: str,
        total: int,
        *,
        stream: TextIO | None = None,
        use_tqdm: bool | None = None,
        heartbeat: float = 15.0,
    ) -> None:
        self.enabled, self.route, self.total, self.i = bool(enabled), route, int(total), 0
        self.heartbeat = float(heartbeat)
        self._bar = ProgressBar(
            self.total, label=route, stream=stream, enabled=self.enabled, width=self.total, eta=False, use_tqdm=use_tqdm
        )
        self._lock = threading.Lock()
        self._stop: threading.Event | None = None

    def _tag(self) -> str:
        return f"[{self.route} {self.i}/{self.total}]"

    def start(self, name: str) -> float:
        self._stop_ticker()
        with self._lock:
            self.i += 1
            if self.i > self.total:  # more steps than announced: the total grows with them
                self.total = self.i
                self._bar.total = self.i
                if self._bar._tqdm is not None:
                    self._bar._tqdm.total = self.i
            if self._bar._tqdm is not None:
                self._bar.describe(f"{self.route}: {name}")
            else:
                self._bar.write(f"{self._tag()} {name} ...")
        t0 = time.perf_counter()
        self._start_ticker(name, t0)
        return t0

    def note(self, text: str) -> None:
        with self._lock:
            self._bar.write(f"{self._tag()}   {text}")

    def end(self, rec: _PhaseRecord) -> None:
        self._stop_ticker()
        msg = f" {rec.message}" if rec.message else ""
        text = f"{rec.name}: {rec.status} in {rec.time:.2f} s{msg}"
        with self._lock:
            if self._bar._tqdm is not None:
                self._bar.write(f"{self._tag()} {text}")
                self._bar.advance(rec.name)
                return
            self._bar.done = self.i
            bar = "#" * self.i + "." * max(self.total - self.i, 0)
            self._bar.write(f"{self._tag()} [{bar}] {text}")

    def close(self) -> None:
        self._stop_ticker()
        self._bar.close()

    # ------------------------------------------------------------------------------------ heartbeat
    def _start_ticker(self, name: str, t0: float) -> None:
        """A daemon thread that shows the running step is alive until ``end``/``start``/``close``."""
        if not self.enabled or self.heartbeat <= 0:
            return
        stop = threading.Event()
        self._stop = stop
        tqdm_bar = self._bar._tqdm is not None
        interval = min(1.0, self.heartbeat) if tqdm_bar else self.heartbeat

        def tick() -> None:
            while not stop.wait(interval):
                with self._lock:
                    if stop.is_set():
                        return
                    if self._bar._tqdm is not None:
                        self._bar._tqdm.refresh()
                    else:
                        self._bar.write(f"{self._tag()}   {name}: still running, {time.perf_counter() - t0:.0f} s")

        threading.Thread(target=tick, name=f"sculpt-progress-{name}", daemon=True).start()

    def _stop_ticker(self) -> None:
        if self._stop is not None:
            self._stop.set()
            self._stop = None
