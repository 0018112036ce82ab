"""Progress on stderr for long library calls, shown so that logs and pipes stay readable.

:class:`StatusLine` is the ``progress(phase, done, total)`` callback of :func:`gpumatch.plan.plan`: silent when
the stream is not a terminal (pipes, files, CI logs stay clean) and during the first ``delay_s`` seconds (a
search that ends sooner shows nothing); then it rewrites one line in place (``\\r`` + erase to end of line), at
most ``interval_s`` apart, and erases it when the block ends, so the result printed afterwards starts on a
clean line.

:class:`BarOrLines` is what the measuring commands' progress callables (``BenchProgress``, ``ScaleProgress``)
share: a transient rich bar when stderr is a terminal, one plain ``gpumatch: ...`` line per step otherwise.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any, Self, TextIO


class StatusLine:
    """``with StatusLine("planning") as status: plan(..., progress=status)``."""

    def __init__(self, label: str, stream: TextIO | None = None, delay_s: float = 1.0,
                 interval_s: float = 0.1) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.delay_s = delay_s
        self.interval_s = interval_s
        self._start = time.monotonic()
        self._last = -1.0
        self._shown = False
        try:
            self._tty = bool(self.stream.isatty())
        except (AttributeError, ValueError, OSError):
            self._tty = False

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        if not self._tty or now - self._start < self.delay_s or now - self._last < self.interval_s:
            return
        self._last = now
        pct = f" {100.0 * done / total:3.0f}%" if total else ""
        self._write(f"\r\x1b[K{self.label}: {phase}, {done:,} of {total:,} candidates{pct} "
                    f"({now - self._start:.0f} s)")
        self._shown = True

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self._tty = False  # a closed or broken terminal: stop reporting, never fail the command

    def close(self) -> None:
        if self._shown:
            self._write("\r\x1b[K")
            self._shown = False

    def __enter__(self) -> StatusLine:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class BarOrLines:
    """A transient rich bar (description, bar, done/total and one more column) or plain lines; a context manager
    that stops the bar on exit. Writing never raises: a closed stream loses the line."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self._bar: Any = None
        self._task: Any = None
        try:
            self.tty = bool(self.stream.isatty())
        except (AttributeError, ValueError, OSError):
            self.tty = False

    def line(self, text: str) -> None:
        """One plain line ``gpumatch: text``."""
        try:
            self.stream.write(f"gpumatch: {text}\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def bar(self, description: str, done: int, total: int, last_column: Any, **fields: Any) -> None:
        """Start the bar on first use (``last_column``: a rich column after done/total) and update it;
        ``description`` is cut to 30 characters so the bar fits 80 columns."""
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        if self._bar is None:
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
                                 last_column, console=Console(file=self.stream), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(description[:30], total=max(total, 1), **fields)
        self._bar.update(self._task, description=description[:30], completed=done, total=max(total, 1), **fields)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
