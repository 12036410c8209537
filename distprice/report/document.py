"""One self-contained HTML document from sections: headline figures and small tables as plain HTML (readable
without JavaScript, and by a parser: each figure carries ``data-key`` and its exact ``data-value``), the
plots as Bokeh models with BokehJS inlined, so the file opens offline. Written atomically."""

from __future__ import annotations

import datetime
import math
import numbers
from dataclasses import dataclass, field

import jinja2
import pandas as pd

STYLE = """
body { font-family: system-ui, sans-serif; margin: 0 auto; max-width: 1200px; padding: 0 1.5em 3em; color: #222; }
header { border-bottom: 2px solid #3a6ea5; margin-bottom: 1em; }
header p, .note { color: #555; }
nav a { margin-right: 1em; }
section { margin-top: 2.5em; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.92em; }
th, td { padding: 0.25em 0.8em; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
table.figures th { font-weight: normal; color: #555; }
table.figures td { font-weight: 600; }
caption { text-align: left; font-weight: 600; padding-bottom: 0.3em; white-space: nowrap; }
.plot { margin: 1em 0; }
"""

TEMPLATE = jinja2.Environment(autoescape=True).from_string("""{% from macros import embed %}<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{ title }}</title>
<style>{{ style }}</style>
{{ bokeh_css | safe }}
{{ bokeh_js | safe }}
</head>
<body>
<header><h1>{{ title }}</h1><p>{{ subtitle }}</p>
<nav>{% for section in sections %}<a href="#{{ section.key }}">{{ section.title }}</a>{% endfor %}</nav></header>
{% for section in sections %}
<section id="{{ section.key }}">
<h2>{{ section.title }}</h2>
{% for note in section.notes %}<p class="note">{{ note }}</p>{% endfor %}
{% if section.figures %}<table class="figures">
{% for f in section.figures %}
<tr><th>{{ f.label }}</th><td data-key="{{ f.key }}" data-value="{{ f.raw }}">{{ f.text }}</td></tr>
{% endfor %}</table>{% endif %}
{% for name in section.plot_names %}<div class="plot">{{ embed(roots[name]) | safe }}</div>
{% endfor %}
{% for table in section.tables %}<table class="data" data-key="{{ table.key }}"><caption>{{ table.title }}</caption>
<thead><tr>{% for c in table.columns %}<th>{{ c }}</th>{% endfor %}</tr></thead><tbody>
{% for row in table.rows %}<tr>
{% for cell in row %}<td{% if cell.number %} class="number"{% endif %} data-value="{{ cell.raw }}">{{ cell.text }}</td>
{% endfor %}</tr>
{% endfor %}</tbody></table>
{% endfor %}
</section>
{% endfor %}
{{ plot_script | safe }}
</body>
</html>
""")


STYLES: dict[str, str | int] = {
    "money": ",.2f",
    "price": ",.4f",
    "seconds": ",.3f",
    "ratio": ",.2f",
    "precise": 6,
}
"""The report's number styles besides the default (:func:`shown`): amounts of money, prices per 100 of face,
seconds, ratios (format specs, each with thousands separators) and figures worth 6 significant digits."""


def shown(value, style: str | None = None) -> str:
    """A number for people, the report's one formatter: in the ``style`` of :data:`STYLES` when given, else
    whole numbers in full and others to 4 significant digits, both with thousands separators, in fixed point
    (scientific only below 0.001 or from 10¹⁵); text as it is; missing as ``—``."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return "—"
    if not isinstance(value, numbers.Number) or isinstance(value, bool):
        return str(value)
    digits = STYLES[style] if style is not None else 4
    if isinstance(digits, str):
        return format(value, digits)
    if isinstance(value, numbers.Integral) or (float(value).is_integer() and abs(value) < 1e15):
        return f"{int(value):,}"
    size = abs(float(value))
    if size == 0:
        return "0"
    if 1e-3 <= size < 1e15:
        power = math.floor(math.log10(size))
        rounded = round(float(value), digits - 1 - power)
        return f"{rounded:,.{max(0, digits - 1 - power)}f}"
    return f"{float(value):.{digits - 1}e}"


def raw(value) -> str:
    """A value exactly, for machines: ``repr`` of a float (round-trips), the integer, or the text."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return repr(float(value))
    return str(value)


@dataclass(frozen=True)
class Cell:
    text: str
    raw: str
    number: bool

    @classmethod
    def of(cls, value, style: str | None = None) -> Cell:
        number = isinstance(value, numbers.Number) and not isinstance(value, bool)
        return cls(shown(value, style), raw(value), number)


@dataclass(frozen=True)
class Figure:
    """A headline number (or word): ``key`` names it for machines, ``label`` for people; ``unit`` follows
    the shown value, shown in its ``style`` (see :func:`shown`)."""

    key: str
    label: str
    value: object
    unit: str = ""
    style: str | None = None

    @property
    def raw(self) -> str:
        return raw(self.value)

    @property
    def text(self) -> str:
        return shown(self.value, self.style) + (f" {self.unit}" if self.unit else "")


@dataclass(frozen=True)
class Table:
    key: str
    title: str
    columns: list[str]
    rows: list[list[Cell]]

    @classmethod
    def of(cls, key: str, title: str, frame: pd.DataFrame, styles: dict[str, str] | None = None) -> Table:
        """A table of a DataFrame's columns (names as headers), each shown in its style in ``styles`` (see
        :func:`shown`)."""
        chosen = [(styles or {}).get(c) for c in frame.columns]
        rows = [
            [Cell.of(v, style) for v, style in zip(record, chosen)]
            for record in frame.itertuples(index=False, name=None)
        ]
        return cls(key, title, [str(c) for c in frame.columns], rows)


@dataclass
class Section:
    """A part of a report: figures first, then plots (Bokeh models), then tables; ``notes`` say what the
    reader should know to read them (units, conventions, what was left out)."""

    key: str
    title: str
    figures: list[Figure] = field(default_factory=list)
    plots: list = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def plot_names(self) -> list[str]:
        return [f"{self.key}-{i}" for i in range(len(self.plots))]


def render(sections: list[Section], title: str, subtitle: str = "") -> str:
    """The HTML page of ``sections``, BokehJS inlined (only the parts the plots use)."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    models = []
    for section in sections:
        for name, plot in zip(section.plot_names(), section.plots):
            plot.name = name
            models.append(plot)
    pages = [
        dict(key=s.key, title=s.title, figures=s.figures, tables=s.tables, notes=s.notes, plot_names=s.plot_names())
        for s in sections
    ]
    variables = dict(sections=pages, subtitle=subtitle or generated(), style=STYLE)
    if not models:  # file_html needs a model: an empty one keeps the page's layout
        from bokeh.models import Spacer

        models = [Spacer(width=0, height=0, name="empty")]
    return file_html(models, resources=INLINE, title=title, template=TEMPLATE, template_variables=variables)


def generated() -> str:
    return "generated " + datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
