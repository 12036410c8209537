"""The book's shape: tree height against width for every valid row (a 2-D histogram on the lattice of the
values, so 10⁶ rows draw as fast as 10³), the chunks the client cut (runs of consecutive rows of equal cost
Σ width · height, so each chunk's box spans the shapes its rows hold), each with its predicted and actual
seconds of pricing on its worker, and the parts of the inspector's plan, each with its engine and predicted (and
actual) seconds: the picture the papers' sorting and bin packing are about.

:func:`shape_section` is the report's section; :func:`draw_shape` draws the same section alone, before any
pricing, to an HTML or PNG file.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import OptionError
from ..inspector import Plan, describe
from ..lattice.geometry import node_steps
from ..planner import spans
from ..tables import write_file
from . import plots
from .document import Figure, Section, Table, render
from .inputs import JobRecord, priced_mask

MAX_BINS = 80
"""Histogram bins per axis at most; fewer when the values are fewer."""


def lattice(values: np.ndarray) -> np.ndarray:
    """The lattice integer ``values`` lie on: from the least to the greatest by the greatest common step of their
    differences (widths step by 2)."""
    distinct = np.unique(np.asarray(values, dtype=np.int64))
    step = int(np.gcd.reduce(np.diff(distinct))) if len(distinct) > 1 else 1
    return np.arange(distinct[0], distinct[-1] + 1, step)


def bins(values: np.ndarray) -> np.ndarray:
    """Bin edges for integer ``values`` on their :func:`lattice`: one bin per lattice value while that makes at
    most MAX_BINS bins, else the same whole number k of lattice values in every bin, each value halfway between
    two edges, so that no bin holds more of the values than its neighbours (stripes). The last bin may hold fewer:
    k is the fewest, from the fewest that make at most MAX_BINS bins to twice that, that fills it at least half
    (else the one that fills it most), so that a handful of shapes draws no noisy edge."""
    points = lattice(values)
    step = int(points[1] - points[0]) if len(points) > 1 else 1
    least = math.ceil(len(points) / MAX_BINS)
    fill = {k: ((len(points) - 1) % k + 1) / k for k in range(least, 2 * least + 1)}
    per_bin = next((k for k, f in fill.items() if f >= 0.5), max(fill, key=lambda k: fill[k]))
    return points[0] - step / 2 + step * per_bin * np.arange(math.ceil(len(points) / per_bin) + 1)


def shapes_per_bin(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The lattice values (tree widths, or heights) each bin of ``edges`` spans."""
    return np.histogram(lattice(values), edges)[0]


def cut(width: np.ndarray, height: np.ndarray, chunks) -> list[np.ndarray]:
    """The chunks as position arrays: given as such, or a count cut here as the client cuts."""
    if chunks is None:
        return []
    if isinstance(chunks, (int, np.integer)):
        cost = np.asarray(width, dtype=np.float64) * np.asarray(height)
        return [np.arange(run.start, run.stop) for run in spans(cost, int(chunks))]
    chunks = [np.asarray(c, dtype=np.int64) for c in chunks]
    if any(len(c) and (c.min() < 0 or c.max() >= len(width)) for c in chunks):
        raise OptionError(f"chunks hold positions outside the {len(width)} valid rows")
    return chunks


def _boxes(width: np.ndarray, height: np.ndarray, groups: list[np.ndarray]) -> dict:
    """The bounding box of each group of rows in the (width, height) plane, with its rows and cost."""
    nonempty = [g for g in groups if len(g)]
    return dict(
        left=[width[g].min() - 0.5 for g in nonempty],
        right=[width[g].max() + 0.5 for g in nonempty],
        bottom=[height[g].min() - 0.5 for g in nonempty],
        top=[height[g].max() + 0.5 for g in nonempty],
        rows=[len(g) for g in nonempty],
        cost=[float((width[g].astype(np.float64) * height[g]).sum()) for g in nonempty],
    )


def shape_plot(width: np.ndarray, height: np.ndarray, chunks: list[np.ndarray], plan: Plan | None):
    """The 2-D histogram of rows by (width, height) on the lattice of the shapes (:func:`bins`), coloured by rows
    per tree shape (log colours: a bin of fewer shapes, at the far edge, is not paler for it), with chunk and
    plan-part outlines."""
    from bokeh.models import ColorBar, ColumnDataSource, HoverTool, LogColorMapper
    from bokeh.palettes import Viridis256

    x_edges, y_edges = bins(width), bins(height)
    counts, _, _ = np.histogram2d(width, height, bins=[x_edges, y_edges])
    per_shape = counts / np.outer(shapes_per_bin(width, x_edges), shapes_per_bin(height, y_edges))
    image = np.where(counts.T > 0, per_shape.T, np.nan)
    fig = plots.plot("Rows by tree width and height", height=520)
    least = float(np.nanmin(image)) if np.isfinite(image).any() else 1.0
    mapper = LogColorMapper(
        palette=Viridis256, low=least, high=max(least, float(np.nanmax(image))), nan_color=(0, 0, 0, 0)
    )
    fig.image(
        image=[image],
        x=x_edges[0],
        y=y_edges[0],
        dw=x_edges[-1] - x_edges[0],
        dh=y_edges[-1] - y_edges[0],
        color_mapper=mapper,
    )
    fig.add_layout(ColorBar(color_mapper=mapper, title="rows per shape", width=12), "right")
    fig.xaxis.axis_label, fig.yaxis.axis_label = "tree width (nodes)", "tree height (steps)"
    fig.add_tools(HoverTool(tooltips=[("width", "$x{0}"), ("height", "$y{0}"), ("rows per shape", "@image{0,0.[00]}")]))
    total = float((width.astype(np.float64) * height).sum()) or 1.0
    if chunks:
        data = _boxes(width, height, chunks)
        data["name"] = [f"chunk {i}" for i in range(len(data["rows"]))]
        data["share"] = [c / total for c in data["cost"]]
        boxes = fig.quad(
            source=ColumnDataSource(data),
            left="left",
            right="right",
            bottom="bottom",
            top="top",
            fill_alpha=0,
            line_color="#d62728",
            line_dash="dashed",
            line_width=1.5,
            legend_label="chunks",
        )
        fig.add_tools(
            HoverTool(
                renderers=[boxes], tooltips=[("", "@name"), ("rows", "@rows{0,0}"), ("cost share", "@share{0.0%}")]
            )
        )
    if plan is not None:
        for i, part in enumerate(plan.parts):
            data = _boxes(width, height, [part.rows])
            fig.quad(
                source=ColumnDataSource(data),
                left="left",
                right="right",
                bottom="bottom",
                top="top",
                fill_alpha=0,
                line_color=plots.COLORS[(i + 1) % len(plots.COLORS)],
                line_width=2.5,
                legend_label=f"plan part {i}: {part.engine}",
            )
    if chunks or plan is not None:
        fig.legend.location = "top_left"
        fig.legend.click_policy = "hide"
    return fig


def chunk_table(width: np.ndarray, height: np.ndarray, chunks: list[np.ndarray], times) -> pd.DataFrame:
    """Each chunk's rows, share of the cost Σ width · height (%), heights and, with ``times``, its predicted and
    actual seconds of pricing on its worker."""
    data = _boxes(width, height, chunks)
    total = sum(data["cost"]) or 1.0
    table = pd.DataFrame(
        dict(
            chunk=np.arange(len(data["rows"])),
            rows=data["rows"],
            cost_share=[100 * c / total for c in data["cost"]],
            heights=[f"{b + 0.5:.0f}–{t - 0.5:.0f}" for b, t in zip(data["bottom"], data["top"])],
        )
    )
    if times is not None:
        table["predicted_seconds"] = [p for p, _ in times]
        table["actual_seconds"] = [a for _, a in times]
        table["actual_over_predicted"] = table["actual_seconds"] / table["predicted_seconds"].where(
            table["predicted_seconds"] > 0
        )
    return table


def chunk_plot(table: pd.DataFrame):
    """Rows per chunk (bars) and each chunk's share of the cost Σ width · height (line, right axis)."""
    from bokeh.models import ColumnDataSource, HoverTool, LinearAxis, Range1d

    source = ColumnDataSource(
        dict(chunk=table["chunk"], rows=table["rows"], share=table["cost_share"], heights=table["heights"])
    )
    fig = plots.plot("Chunks: rows (bars) and share of the cost Σ width · height (line)")
    fig.vbar(x="chunk", top="rows", width=0.7, source=source, color=plots.COLORS[0])
    fig.extra_y_ranges = {"share": Range1d(0, max(source.data["share"]) * 1.15 or 1.0)}
    fig.add_layout(LinearAxis(y_range_name="share", axis_label="cost share (%)"), "right")
    fig.line(x="chunk", y="share", source=source, y_range_name="share", color=plots.COLORS[3], line_width=2)
    fig.scatter(x="chunk", y="share", source=source, y_range_name="share", color=plots.COLORS[3], size=6)
    fig.xaxis.axis_label, fig.yaxis[0].axis_label = "chunk (in the client's order)", "rows"
    fig.add_tools(
        HoverTool(
            tooltips=[
                ("chunk", "@chunk"),
                ("rows", "@rows{0,0}"),
                ("cost share", "@share{0.0}%"),
                ("heights", "@heights"),
            ]
        )
    )
    return fig


def chunk_times_plot(table: pd.DataFrame):
    """Each chunk's predicted and actual seconds of pricing on its worker, side by side."""
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.transform import dodge

    source = ColumnDataSource(
        dict(
            chunk=table["chunk"],
            predicted=table["predicted_seconds"].fillna(0.0),
            actual=table["actual_seconds"].fillna(0.0),
        )
    )
    fig = plots.plot("Chunks: predicted and actual seconds of pricing on their workers")
    for name, offset, color in (("predicted", -0.18, plots.COLORS[1]), ("actual", 0.18, plots.COLORS[0])):
        fig.vbar(x=dodge("chunk", offset), top=name, width=0.34, source=source, color=color, legend_label=name)
    fig.xaxis.axis_label, fig.yaxis.axis_label = "chunk (in the client's order)", "seconds"
    fig.legend.location = "top_left"
    fig.add_tools(
        HoverTool(
            tooltips=[("chunk", "@chunk"), ("predicted", "@predicted{0,0.000} s"), ("actual", "@actual{0,0.000} s")]
        )
    )
    return fig


def plan_table(width: np.ndarray, height: np.ndarray, plan: Plan, actual: tuple[float, ...] | None) -> pd.DataFrame:
    rows = []
    for i, part in enumerate(plan.parts):
        row = dict(
            part=i,
            engine=part.engine,
            rows=len(part.rows),
            node_steps=float(node_steps(width[part.rows], height[part.rows]).sum()),
            predicted_seconds=float(part.seconds),
            waves=part.waves,
            reason=part.reason,
        )
        if actual is not None:
            row.update(
                actual_seconds=actual[i],
                actual_over_predicted=actual[i] / part.seconds if part.seconds > 0 else float("nan"),
            )
        rows.append(row)
    return pd.DataFrame(rows)


def shape_figures(width: np.ndarray, height: np.ndarray) -> list[Figure]:
    shape = describe(width, height)
    figures = [
        Figure("shape_rows", "rows drawn (valid)", shape["rows"]),
        Figure("shape_node_steps", "node-steps (one scenario)", shape["node_steps"]),
    ]
    for name in ("width", "height"):
        for q in ("p50", "p99", "max"):
            if q in shape[name]:
                figures.append(Figure(f"{name}_{q}", f"{name} {q}", float(shape[name][q])))
        if "skewness" in shape[name]:
            figures.append(Figure(f"{name}_skewness", f"{name} skewness", shape[name]["skewness"], style="ratio"))
    return figures


def draw(width, height, *, plan: Plan | None = None, plan_seconds=None, chunks=None, chunk_seconds=None) -> Section:
    """The shape-and-plan section for trees of these widths and heights (the valid rows, in table order)."""
    width, height = np.asarray(width, dtype=np.int64), np.asarray(height, dtype=np.int64)
    if plan is not None and sum(len(p.rows) for p in plan.parts) != len(width):
        raise OptionError(
            f"the plan covers {sum(len(p.rows) for p in plan.parts)} rows, but {len(width)} rows "
            f"are valid: give the plan of the valid rows in table order"
        )
    section = Section("shape", "The book's shape")
    if len(width) == 0:
        section.notes.append("No valid row: nothing to draw.")
        return section
    groups = cut(width, height, chunks)
    section.figures = shape_figures(width, height)
    chunked = chunk_table(width, height, groups, chunk_seconds) if groups else None
    if chunked is not None:
        section.figures.append(Figure("chunks", "chunks", len(groups)))
    if chunked is not None and chunk_seconds is not None:
        section.figures += [
            Figure(
                "chunk_predicted_seconds",
                "chunks: predicted (Σ on their workers)",
                float(chunked["predicted_seconds"].sum(min_count=1)),
                "s",
                style="seconds",
            ),
            Figure(
                "chunk_actual_seconds",
                "chunks: actual (Σ on their workers)",
                float(chunked["actual_seconds"].sum(min_count=1)),
                "s",
                style="seconds",
            ),
        ]
    if plan is not None:
        figures = [
            Figure("predicted_seconds", "plan: predicted (host layout included)", plan.seconds, "s", style="seconds")
        ]
        if plan_seconds is not None:
            figures.append(Figure("actual_seconds", "plan: actual (Σ parts)", sum(plan_seconds), "s", style="seconds"))
        if plan.model is not None:
            model = plan.model
            figures.append(Figure("model", "cost model", f"{model.device}, {model.precision}, {model.source}"))
        section.figures += figures
    section.plots.append(shape_plot(width, height, groups, plan))
    if chunked is not None:
        section.plots.append(chunk_plot(chunked))
        if chunk_seconds is not None:
            section.plots.append(chunk_times_plot(chunked))
        section.tables.append(
            Table.of(
                "chunks",
                "The chunks (cost share in %; seconds of pricing on their workers)",
                chunked,
                {
                    "cost_share": "ratio",
                    "predicted_seconds": "seconds",
                    "actual_seconds": "seconds",
                    "actual_over_predicted": "ratio",
                },
            )
        )
    if plan is not None and plan.parts:
        table = plan_table(width, height, plan, plan_seconds)
        if plan_seconds is not None:
            section.plots.append(predicted_plot(table))
        title = (
            "The inspector's plan, part by part (predicted: the engine's seconds; the plan's total adds the "
            "host layout)"
        )
        section.tables.append(
            Table.of(
                "plan",
                title,
                table,
                {
                    "predicted_seconds": "seconds",
                    "actual_seconds": "seconds",
                    "actual_over_predicted": "ratio",
                },
            )
        )
    notes = [
        "Each cell is one tree shape (width, height), or a few neighbouring ones on the lattice of the shapes, "
        "coloured by its rows per shape (log colours)."
    ]
    if groups:
        notes.append(
            "Dashed boxes: the chunks the client cut, runs of consecutive rows (in the table's order) of nearly "
            "equal cost Σ width · height."
        )
    if chunk_seconds is not None:
        notes.append(
            "A chunk's predicted seconds are its plan's under the workers' cost model, over the share of a "
            "machine (or GPU) its worker has; its actual seconds, its pricing task's."
        )
    if plan is not None:
        notes.append("Solid boxes: the rows of each part of the inspector's plan.")
    section.notes.append(" ".join(notes))
    return section


def predicted_plot(table: pd.DataFrame):
    """Predicted against actual seconds of each plan part."""
    from bokeh.models import ColumnDataSource, FactorRange
    from bokeh.transform import factor_cmap

    labels = [f"{p}: {e}" for p, e in zip(table["part"], table["engine"])]
    factors = [(label, kind) for label in labels for kind in ("predicted", "actual")]
    values = [v for p, a in zip(table["predicted_seconds"], table["actual_seconds"]) for v in (p, a)]
    fig = plots.plot(
        "Plan parts: predicted and actual seconds",
        height=max(140, 70 + 40 * len(labels)),
        y_range=FactorRange(*reversed(factors)),
    )
    fig.hbar(
        y="factor",
        right="seconds",
        height=0.8,
        source=ColumnDataSource(dict(factor=factors, seconds=values)),
        color=factor_cmap(
            "factor", palette=[plots.COLORS[1], plots.COLORS[0]], factors=["predicted", "actual"], start=1, end=2
        ),
    )
    fig.xaxis.axis_label = "seconds"
    return fig


def shape_section(record: JobRecord) -> Section:
    book = record.book
    valid = priced_mask(book)
    width = pd.to_numeric(book["width"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)[valid]
    height = pd.to_numeric(book["height"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)[valid]
    return draw(
        width,
        height,
        plan=record.plan,
        plan_seconds=record.plan_seconds,
        chunks=record.chunks,
        chunk_seconds=record.chunk_seconds,
    )


def draw_shape(
    output,
    width,
    height,
    *,
    plan: Plan | None = None,
    plan_seconds=None,
    chunks=None,
    title: str = "distprice: the book's shape",
) -> Path:
    """Draws the shape-and-plan picture of trees of these widths and heights (the valid rows, in table order;
    ``plan`` of those rows, ``chunks`` as in :class:`~.inputs.JobRecord`) to ``output``: ``.html`` (interactive,
    self-contained) or ``.png`` (rendered by headless Chromium); written atomically. Returns the path."""
    output = Path(output)
    suffix = output.suffix.lower()
    if suffix not in (".html", ".png"):
        raise OptionError(f"{output}: the picture is written as .html or .png, not {suffix or 'no suffix'!r}")
    page = render([draw(width, height, plan=plan, plan_seconds=plan_seconds, chunks=chunks)], title)
    if suffix == ".html":
        return write_file(page, output)
    from .browser import screenshot

    return screenshot(page, output)
