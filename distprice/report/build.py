"""A job report: the sections of a model family, drawn from a priced table and the job's facts, in one
self-contained HTML file.

Each family's :class:`ReportKind` in :data:`REPORTS` lists its sections: functions of a
:class:`~.inputs.JobRecord` that return a :class:`~.document.Section`, or None when they have nothing to
show (the risk section of a table without measure columns). A family adds its report by writing its
section functions in a module of this package and naming them here, as the Monte-Carlo family does with
:func:`~.montecarlo.paths_section`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import OptionError
from ..job import SCENARIO_COLUMN
from ..tables import write_file
from .document import Section, generated, render
from .inputs import JobRecord
from .job import job_section
from .montecarlo import COLUMNS as PATH_COLUMNS, paths_section
from .problems import problems_section
from .risk import risk_section
from .shape import shape_section
from .values import values_section


@dataclass(frozen=True)
class ReportKind:
    """A model family's report: its title, the columns of the priced table its sections read, its sections."""

    title: str
    columns: tuple[str, ...]
    sections: tuple[Callable[[JobRecord], Section | None], ...]


REPORTS = {
    "lattice": ReportKind(
        "distprice job report",
        ("price", "value", "width", "height", "engine", "error"),
        (job_section, shape_section, values_section, risk_section, problems_section),
    ),
    "montecarlo": ReportKind("distprice Monte-Carlo report", PATH_COLUMNS, (paths_section,)),
}
"""The report of each family: of ``distprice.price``'s table (lattice), of ``distprice.price_mc``'s."""


def render_report(priced, *, family: str = "lattice", **facts) -> str:
    """The HTML of the report of ``priced`` (a DataFrame or a CSV / Parquet path); ``facts`` are the keywords
    of :meth:`JobRecord.of <distprice.report.inputs.JobRecord.of>`."""
    if family not in REPORTS:
        raise OptionError(f"family must be one of {', '.join(REPORTS)}, not {family!r}")
    record = JobRecord.of(priced, **facts)
    chosen = REPORTS[family]
    missing = [c for c in chosen.columns if c not in record.priced.columns]
    if missing:
        wide = " (of a risk run: the wide or full scenario table)" if SCENARIO_COLUMN in record.priced else ""
        raise OptionError(f"a {family} report is drawn from a priced table{wide}; this one lacks {', '.join(missing)}")
    sections = [s for s in (section(record) for section in chosen.sections) if s is not None]
    subtitle = generated() + (f" from {record.source}" if record.source else "")
    return render(sections, chosen.title, subtitle)


def write_report(
    priced,
    output,
    *,
    portfolio=None,
    plan=None,
    plan_seconds=None,
    chunks=None,
    chunk_seconds=None,
    timings=None,
    summary=None,
    workers=None,
    family: str = "lattice",
) -> Path:
    """Writes the report of a priced table to ``output`` (HTML, atomically) and returns its path.

    ``priced``: the priced table (a DataFrame, or a CSV / Parquet path); ``portfolio``: the portfolio's path
    or name, shown in the header. The job's facts, each optional: ``plan`` (the inspector's
    :class:`~distprice.inspector.Plan` of the valid rows in table order) and ``plan_seconds`` (the actual
    seconds of each of its parts); ``chunks`` (the client's chunks: positions among the valid rows, or their
    count) and ``chunk_seconds`` (each chunk's predicted and actual seconds of pricing on its worker);
    ``timings`` (seconds by phase, :data:`~.inputs.PHASES`: ``start``, ``read``, ``checks``, ``plan``,
    ``price``, ``write``, ``stop``, ``other``; the report's wall time is their sum, the whole job's);
    ``summary`` (the job's :class:`~distprice.job.Summary`); ``workers`` (per worker: ``rows``,
    ``node_steps``, ``seconds``, ``kernel_seconds`` and optionally ``device``). ``family``: ``lattice`` or
    ``montecarlo`` (``priced`` is then the table of ``price_mc``).
    """
    page = render_report(
        priced,
        family=family,
        portfolio=portfolio,
        plan=plan,
        plan_seconds=plan_seconds,
        chunks=chunks,
        chunk_seconds=chunk_seconds,
        timings=timings,
        summary=summary,
        workers=workers,
    )
    return write_file(page, output)
