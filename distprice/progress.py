"""A progress bar for people at a terminal: drawn on stderr, only when stderr is a terminal, a few times a
second at most, so that a job run by a scheduler logs lines, not frames."""

from __future__ import annotations

import sys
import time

WIDTH = 30
"""Characters of the bar itself."""
REDRAW_SECONDS = 0.2


class Bar:
    """``done`` of ``total`` units, with a ``label`` saying what is going on (it may change as the job goes);
    drawn when ``shown`` and the stream (stderr by default) is a terminal."""

    def __init__(self, total: float, label: str, shown: bool = True, stream=None):
        self.stream = sys.stderr if stream is None else stream
        self.shown = shown and _is_terminal(self.stream)
        self.total, self.label, self.done = float(total), label, 0.0
        self.start = self._drawn = time.monotonic()
        self._drew = False

    def update(self, done: float, label: str | None = None) -> None:
        """Sets the units done (and the label) and redraws, at most every REDRAW_SECONDS."""
        self.done = done
        if label is not None:
            self.label = label
        now = time.monotonic()
        if self.shown and (now - self._drawn >= REDRAW_SECONDS or done >= self.total):
            self._draw(now)

    def advance(self, units: float) -> None:
        self.update(self.done + units)

    def close(self) -> None:
        """Draws the last state and ends the line (nothing when the bar was never shown)."""
        if self.shown and self._drew:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self, now: float) -> None:
        share = min(1.0, self.done / self.total) if self.total > 0 else 1.0
        filled = int(round(share * WIDTH))
        self.stream.write(
            f"\r{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {share:4.0%} {now - self.start:6.1f} s\x1b[K"
        )
        self.stream.flush()
        self._drawn, self._drew = now, True

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
