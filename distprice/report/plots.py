"""The few kinds of Bokeh plot the report draws, in one style: bars by label, histograms, a ladder, the
stacked bar of a job's phases. Each takes plain arrays and returns a Bokeh model (a ``figure``)."""

from __future__ import annotations

import numpy as np
from bokeh.models import ColumnDataSource, HoverTool, LinearAxis, NumeralTickFormatter
from bokeh.palettes import Category10_10
from bokeh.plotting import figure

WIDTH = 900
HEIGHT = 300
BAR_HEIGHT = 26
"""Pixels per bar of a horizontal bar chart."""
COLORS = Category10_10
TOOLS = "pan,wheel_zoom,box_zoom,reset,save"
TICKS = "0,0.[00]"
"""The numbers on the axes: with thousands separators, as the report's text shows them (never ``2.000e+4``)."""


def plot(title: str, height: int = HEIGHT, **options):
    """An empty figure of the report's style."""
    fig = figure(title=title, width=WIDTH, height=height, tools=TOOLS, toolbar_location="right", **options)
    fig.title.text_font_size = "13px"
    for axis in (*fig.xaxis, *fig.yaxis):
        if type(axis) is LinearAxis:
            axis.formatter = NumeralTickFormatter(format=TICKS)
    return fig


def bars(labels, values, title: str, axis: str, *, counts=None, color: str = COLORS[0]):
    """Horizontal bars of ``values`` by ``labels`` (first label on top); ``counts`` (rows) shown on hover."""
    labels = [str(label) for label in labels]
    values = np.asarray(values, dtype=np.float64)
    data = dict(label=labels, value=values)
    tooltips = [("", "@label"), (axis, "@value{0,0.[00]}")]
    if counts is not None:
        data["rows"] = np.asarray(counts)
        tooltips.append(("rows", "@rows{0,0}"))
    fig = plot(title, height=max(120, 60 + BAR_HEIGHT * len(labels)), y_range=list(reversed(labels)))
    fig.hbar(y="label", right="value", height=0.7, color=color, source=ColumnDataSource(data))
    fig.xaxis.axis_label = axis
    fig.ygrid.grid_line_color = None
    fig.add_tools(HoverTool(tooltips=tooltips))
    return fig


def histogram(values, title: str, axis: str, bins: int = 50):
    """Rows per bin of ``values`` (NaN left out)."""
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    counts, edges = np.histogram(values, bins=bins) if len(values) else (np.zeros(1), np.array([0.0, 1.0]))
    fig = plot(title)
    source = ColumnDataSource(dict(left=edges[:-1], right=edges[1:], top=counts))
    fig.quad(left="left", right="right", bottom=0, top="top", source=source, color=COLORS[0], line_color="white")
    fig.xaxis.axis_label, fig.yaxis.axis_label = axis, "rows"
    fig.add_tools(HoverTool(tooltips=[(axis, "@left{0.[0000]} to @right{0.[0000]}"), ("rows", "@top{0,0}")]))
    return fig


def ladder(x, y, title: str, x_axis: str, y_axis: str):
    """``y`` against ``x`` as a line with markers (a value under parallel shifts, say)."""
    fig = plot(title)
    source = ColumnDataSource(dict(x=np.asarray(x, dtype=np.float64), y=np.asarray(y, dtype=np.float64)))
    fig.line("x", "y", source=source, line_width=2, color=COLORS[0])
    fig.scatter("x", "y", source=source, size=8, color=COLORS[0])
    fig.xaxis.axis_label, fig.yaxis.axis_label = x_axis, y_axis
    fig.add_tools(HoverTool(tooltips=[(x_axis, "@x{0,0.[00]}"), (y_axis, "@y{0,0.[00]}")]))
    return fig


def phases(labels, seconds, title: str):
    """One horizontal bar of the wall time, cut into its phases (left to right in order)."""
    labels = [str(label) for label in labels]
    data = {label: [float(s)] for label, s in zip(labels, seconds)}
    data["job"] = ["wall time"]
    fig = plot(title, height=150, y_range=["wall time"])
    colors = [COLORS[i % len(COLORS)] for i in range(len(labels))]
    fig.hbar_stack(labels, y="job", height=0.6, color=colors, source=ColumnDataSource(data), legend_label=labels)
    fig.xaxis.axis_label = "seconds"
    fig.legend.orientation = "horizontal"
    fig.legend.location = "top_left"
    fig.add_layout(fig.legend[0], "below")
    fig.ygrid.grid_line_color = None
    return fig
