"""Every exception distprice raises on purpose, under one base class :class:`DistpriceError`.

A caller that catches ``DistpriceError`` catches what distprice means to say (bad input, an option it cannot
use, a device or cluster it cannot reach); anything else is a defect. The command line prints the message of
a ``DistpriceError`` (never a traceback) and exits with the error's ``exit_status``.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_LISTED = 50
"""Problems spelled out in an :class:`InvalidInputError`'s message; the rest are counted."""


class DistpriceError(Exception):
    """Base class of every error distprice raises on purpose."""

    exit_status = 1
    """The command line's exit status for this error."""


@dataclass(frozen=True)
class Problem:
    """One broken rule: where (a human label naming the table, the row and its id), the column and the rule.

    ``position`` is the 0-based position of the row it concerns in the table being checked (None for a
    problem of a whole input, such as a missing column).
    """

    position: int | None
    where: str
    column: str | None
    rule: str

    def __str__(self) -> str:
        column = f", column '{self.column}'" if self.column else ""
        return printable(f"{self.where}{column}: {self.rule}")


class InvalidInputError(DistpriceError, ValueError):
    """The inputs break rules; ``problems`` lists every one found (row, column, rule)."""

    exit_status = 2

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        lines = [str(p) for p in self.problems[:MAX_LISTED]]
        if len(self.problems) > MAX_LISTED:
            lines.append(f"... and {len(self.problems) - MAX_LISTED} more")
        super().__init__(f"{len(self.problems)} problem(s) in the input:\n  " + "\n  ".join(lines))


class OptionError(DistpriceError, ValueError):
    """An option (a function argument, a command-line flag or a config value) that cannot be used."""

    exit_status = 2


class ConfigError(OptionError):
    """A config that cannot be used; the message has one line per problem: ``source: key.path: rule``."""


class GpuUnavailableError(DistpriceError, RuntimeError):
    """No CUDA GPU (or no CuPy) in this process."""


class Fp32OverflowError(DistpriceError, FloatingPointError):
    """Node values left the float32 range. Low mean reversion and long maturity give the bottom edge of the
    tree rates far below zero, whose values compound past 3.4e38 (harmlessly in fp64, where they are
    reached with negligible probability); fp32 cannot price such trees."""


class ClusterError(DistpriceError, RuntimeError):
    """A cluster that cannot be started or used (no workers joined, a missing extra, a batch system absent)."""


class SchedulerUnreachableError(DistpriceError, ConnectionError):
    """The scheduler named by a config or address did not answer in time, or went away during a job."""

    exit_status = 3


class NoWorkersError(ClusterError):
    """The cluster had no worker for longer than its ``no_workers_timeout`` (before or during a job); the
    job's tasks were cancelled."""

    exit_status = 5


class JobTimeoutError(DistpriceError, TimeoutError):
    """A job ran past its ``timeout``; its tasks were cancelled and nothing was written."""

    exit_status = 6


class JobTooLongError(DistpriceError, ValueError):
    """A job predicted to take longer than its ``max_seconds`` of pricing; refused before anything is priced."""

    exit_status = 2


class OutputError(DistpriceError, OSError):
    """The output cannot be written: a full disk or quota, a read-only file system, no permission. Nothing is
    written under the output's name, and an earlier output there is unchanged; ``errno`` is the cause's."""

    exit_status = 7

    def __str__(self) -> str:
        return str(self.strerror if self.strerror is not None else super().__str__())


def printable(text: str) -> str:
    """``text`` with its control and invisible characters (terminal escape codes, carriage returns, bidirectional
    overrides) written as Python escapes (``\\x1b``, ``\\r``, ``\\u202e``): a message quoting a file shows them
    rather than obeys them."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def shown(value) -> str:
    """A value as a user wrote it in YAML or on a command line, for messages (``null``, ``true``, ``'x'``)."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return repr(value)
