"""Pictures and the job report (floor 6): drawn from a priced table and the job's facts, never re-pricing.

``write_report(priced, "report.html", plan=..., timings=...)`` writes one self-contained HTML file (BokehJS
inlined: it opens offline) of the sections of a model family (:data:`~.build.REPORTS`); ``draw_shape``
draws the book's shape and the inspector's plan alone, before pricing, to HTML or PNG.
"""

from .build import REPORTS, ReportKind, render_report, write_report
from .document import Figure, Section, Table
from .inputs import PHASES, JobRecord
from .shape import draw_shape

__all__ = [
    "PHASES",
    "REPORTS",
    "Figure",
    "JobRecord",
    "ReportKind",
    "Section",
    "Table",
    "draw_shape",
    "render_report",
    "write_report",
]
