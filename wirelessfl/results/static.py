"""Static figures (PNG, PDF, SVG) drawn by matplotlib from the plotly figures the HTML files show.

Every figure is built once, as a plotly figure: the HTML keeps it for
interaction, and :func:`static_figure` redraws its content with matplotlib for
papers, so the two cannot drift apart and no browser is needed. It reads the
parts of plotly the figures of this package use: panels laid out by
``make_subplots`` (their titles, shared axes, percent and category axes,
ranges), lines, markers, bands filled to themselves, step lines, horizontal
bars with a base, and heatmaps with cell text on a colour scale. Anything else
is refused by name rather than drawn wrong.

Drawing uses ``matplotlib.figure.Figure`` objects with the Agg canvas, never
pyplot's global state, so it is safe in worker processes and notebooks alike.
Legends and colour bars sit outside the panels, where they cover no curve.
"""

from __future__ import annotations

import io
import math
import re
import textwrap
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
from matplotlib.cm import ScalarMappable
from matplotlib.collections import PolyCollection
from matplotlib.colors import ListedColormap, Normalize, to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, MaxNLocator, PercentFormatter
from plotly.colors import get_colorscale

from wirelessfl.results.io import atomic_write_bytes

STATIC_FORMATS = ("png", "pdf", "svg")
PNG_DPI = 200
"""Pixels per inch of a PNG: sharp when a figure is printed at its own size."""
PANEL_SIZE_IN = (2.9, 2.5)
"""Width and height of one panel when the plotly figure does not fix its size."""
PIXELS_PER_INCH = 100
"""A plotly size in pixels (``layout.width``) becomes this many pixels per inch."""
FONT_SIZE = 9
TITLE_FONT_SIZE = 10
CHARACTER_EM = 0.62
"""Mean width of a character of the default font (DejaVu Sans), in em: how many fit on a title line."""
MIN_WIDTH_IN = 6.0
"""No figure narrower than this: a one-panel figure still has room for its title and legend."""
MAX_CATEGORY_LABELS = 20
"""More categories on an axis than this (a timeline of 60 clients): every second, third... is labelled."""
LEGEND_ENTRY_IN = 0.2
"""Height of one legend entry at the legend's font size (8 pt and its spacing)."""
_NO_DATES = {"png": {}, "pdf": {"CreationDate": None}, "svg": {"Date": None}}
"""No creation date in the file, so re-making a figure from the same tables writes the same bytes."""
_DASHES = {"solid": "-", "dash": "--", "dot": ":", "dashdot": "-.", "longdash": "--", "longdashdot": "-."}
_MARKERS = {"circle": "o", "diamond": "D", "square": "s", "cross": "P", "x": "X", "triangle-up": "^", "star": "*"}


def _plain(text) -> str:
    """Plotly's HTML-ish text as plain lines: ``<br>`` breaks the line, other tags are dropped."""
    if text is None:
        return ""
    return re.sub(r"<[^>]+>", "", re.sub(r"<br\s*/?>", "\n", str(text)))


def _color(value, default="black"):
    """A plotly colour (``#rrggbb``, ``rgb(...)``, ``rgba(...)``, a CSS name) as a matplotlib RGBA tuple."""
    if value is None:
        return to_rgba(default)
    text = str(value).strip()
    found = re.fullmatch(r"rgba?\(([^)]*)\)", text)
    if found:
        parts = [float(part) for part in found.group(1).split(",")]
        return (parts[0] / 255, parts[1] / 255, parts[2] / 255, parts[3] if len(parts) > 3 else 1.0)
    return to_rgba(text)


def _values(values) -> np.ndarray:
    return np.asarray([] if values is None else list(values), dtype=object)


def _numbers(values) -> np.ndarray:
    return np.asarray([math.nan if v is None else v for v in _values(values)], dtype=float)


class _Panel:
    """One plotly x/y axis pair and the matplotlib axes that draws it, with the categories its axes hold."""

    def __init__(self, axes, x_layout, y_layout):
        self.axes, self.x_layout, self.y_layout = axes, x_layout, y_layout
        self.categories = {"x": list(x_layout.categoryarray or []), "y": list(y_layout.categoryarray or [])}
        self.whole = {"x": True, "y": True}  # every value drawn on the axis is a whole number (rounds, trials)
        self.used = False

    def is_category(self, which: str, values: np.ndarray) -> bool:
        layout = self.x_layout if which == "x" else self.y_layout
        return layout.type == "category" or any(isinstance(v, str) for v in values)

    def position(self, which: str, values) -> np.ndarray:
        """Numbers on the axis: categories become 0, 1, ... in their order (given, or first seen)."""
        values = _values(values)
        if not self.is_category(which, values):
            numbers = _numbers(values)
            finite = numbers[np.isfinite(numbers)]
            self.whole[which] &= bool(np.all(finite == np.round(finite)))
            return numbers
        order = self.categories[which]
        for value in values:
            if value is not None and str(value) not in order:
                order.append(str(value))
        return np.asarray([math.nan if v is None else order.index(str(v)) for v in values], dtype=float)


def _axis_number(name: str) -> str:
    """``x3`` -> ``3``; ``x`` -> ``""``."""
    return name[1:]


def _layout_panels(fig: go.Figure, figure: Figure) -> dict[str, _Panel]:
    """Matplotlib axes on the grid ``make_subplots`` laid out, keyed by plotly's x axis name (``x``, ``x2``, ...)."""
    layout = fig.layout
    names = sorted(
        [key[5:] for key in layout.to_plotly_json() if re.fullmatch(r"xaxis\d*", key)] or [""],
        key=lambda n: int(n or 1),
    )
    domains = {}
    for number in names:
        x_layout, y_layout = layout[f"xaxis{number}"], layout[f"yaxis{number}"]
        domains[number] = (tuple(x_layout.domain or (0, 1)), tuple(y_layout.domain or (0, 1)))
    columns = sorted({d[0] for d in domains.values()})
    rows = sorted({d[1] for d in domains.values()}, reverse=True)
    grid = figure.add_gridspec(len(rows), len(columns))
    panels: dict[str, _Panel] = {}
    for number in names:
        x_domain, y_domain = domains[number]
        x_layout, y_layout = layout[f"xaxis{number}"], layout[f"yaxis{number}"]
        share = {}
        if x_layout.matches and x_layout.matches in panels:
            share["sharex"] = panels[x_layout.matches].axes
        y_match = f"x{_axis_number(y_layout.matches)}" if y_layout.matches else None
        if y_match and y_match in panels:
            share["sharey"] = panels[y_match].axes
        axes = figure.add_subplot(grid[rows.index(y_domain), columns.index(x_domain)], **share)
        panels[f"x{number}"] = _Panel(axes, x_layout, y_layout)
    return panels


def _panel_titles(fig: go.Figure, panels: dict[str, _Panel], width: float) -> None:
    """``make_subplots`` writes panel titles as paper annotations above each panel's domain; put each on its panel,
    wrapped to the panel's share of ``width`` (inches)."""
    for note in fig.layout.annotations or ():
        if note.xref != "paper" or note.yref != "paper" or not note.text:
            continue
        nearest = min(
            panels.values(),
            key=lambda p: (
                not (p.x_layout.domain or (0, 1))[0] <= note.x <= (p.x_layout.domain or (0, 1))[1],
                abs((p.y_layout.domain or (0, 1))[1] - note.y),
            ),
        )
        x_domain = nearest.x_layout.domain or (0, 1)
        characters = max(20, int(width * (x_domain[1] - x_domain[0]) * 72 / (FONT_SIZE * CHARACTER_EM)))
        nearest.axes.set_title(textwrap.fill(_plain(note.text), characters), fontsize=FONT_SIZE)


def _style_axes(panel: _Panel, heatmap: bool) -> None:
    axes = panel.axes
    for which, layout in (("x", panel.x_layout), ("y", panel.y_layout)):
        set_label = axes.set_xlabel if which == "x" else axes.set_ylabel
        set_label(_plain(layout.title.text), fontsize=FONT_SIZE)
        axis = axes.xaxis if which == "x" else axes.yaxis
        if layout.type == "log":
            (axes.set_xscale if which == "x" else axes.set_yscale)("log")
        if layout.tickformat and layout.tickformat.endswith("%"):  # ".0%", ".1%"
            decimals = int(re.sub(r"\D", "", layout.tickformat) or 0)
            axis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=decimals))
        categories = panel.categories[which]
        if categories:
            step = math.ceil(len(categories) / MAX_CATEGORY_LABELS)
            axis.set_major_locator(FixedLocator(range(0, len(categories), step)))
            axis.set_ticklabels(categories[::step])
            limits = (-0.5, len(categories) - 0.5)
            (axes.set_xlim if which == "x" else axes.set_ylim)(*limits)
        elif layout.range is not None:
            (axes.set_xlim if which == "x" else axes.set_ylim)(*layout.range)
        if not categories and layout.type != "log":
            whole = bool(panel.whole[which] and panel.used)
            if which == "x":  # at most ~6 labels: four-digit times side by side ran into each other on a third of a page
                axis.set_major_locator(MaxNLocator(nbins=6, integer=whole))
            elif whole:
                axis.set_major_locator(MaxNLocator(integer=True))
        if layout.showticklabels is False:
            axis.set_tick_params(labelleft=False, labelbottom=False)
    axes.tick_params(labelsize=FONT_SIZE - 1)
    if not heatmap:
        axes.grid(True, color="#e5e5e5", linewidth=0.6)
        axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)


def _draw_scatter(panel: _Panel, trace: go.Scatter) -> Line2D | None:
    """Lines, markers, a band filled to itself, or a step line; returns the handle the legend shows."""
    axes = panel.axes
    x, y = panel.position("x", trace.x), panel.position("y", trace.y)
    line, marker = trace.line, trace.marker
    color = _color(line.color if line.color is not None else marker.color)
    if trace.fill == "toself":
        fill = _color(trace.fillcolor) if trace.fillcolor else (*color[:3], 0.2)
        axes.fill(x, y, color=fill, linewidth=0)
        return None
    mode = trace.mode or "lines"
    dash = _DASHES.get(line.dash or "solid", "-")
    drawstyle = "steps-post" if line.shape == "hv" else "default"
    handle = Line2D([], [], color=color, linestyle=dash if "lines" in mode else "none", drawstyle=drawstyle)
    if "lines" in mode and len(x):
        axes.plot(x, y, color=color, linestyle=dash, linewidth=1.5, drawstyle=drawstyle)
    if "markers" in mode:
        marker_color = _color(marker.color) if isinstance(marker.color, str) else color
        symbols = marker.symbol if isinstance(marker.symbol, (list, tuple)) else [marker.symbol or "circle"] * len(x)
        size = (marker.size if isinstance(marker.size, (int, float)) else 6) * 0.75
        for index, symbol in enumerate(dict.fromkeys(symbols) or ["circle"]):
            style = _marker_style(str(symbol), size, marker_color)
            chosen = np.asarray([s == symbol for s in symbols], dtype=bool)
            if chosen.any():
                axes.plot(x[chosen], y[chosen], linestyle="none", **style)
            if index == 0:
                handle.set(**style)
    return handle


def _marker_style(symbol: str, size: float, color) -> dict:
    """A plotly marker symbol (``circle``, ``diamond``, ``circle-open``) as matplotlib marker settings."""
    hollow = symbol.endswith("-open")
    return {
        "marker": _MARKERS.get(symbol.removesuffix("-open"), "o"), "markersize": size, "markeredgecolor": color,
        "markerfacecolor": "none" if hollow else color, "markeredgewidth": 1.3 if hollow else 0.8,
    }


def _draw_bar(panel: _Panel, trace: go.Bar, slot: tuple[int, int]) -> Patch:
    """Horizontal bars from their ``base`` (the timeline), or vertical bars side by side in their category
    (``slot``: this trace's place among the panel's bar traces, ``barmode="group"``), with error bars."""
    color = _color(trace.marker.color)
    if trace.orientation == "h":
        widths = _numbers(trace.x)
        base = _numbers(trace.base) if isinstance(trace.base, (list, tuple, np.ndarray)) else np.full(len(widths), trace.base or 0.0)
        y = panel.position("y", trace.y)
        left, right, low, high = base, base + widths, y - 0.4, y + 0.4
        corners = np.stack([np.stack([left, low], 1), np.stack([left, high], 1), np.stack([right, high], 1), np.stack([right, low], 1)], 1)
        # one collection per trace, not a patch per bar: a timeline has thousands of bars (9 of a figure's 10 s of CPU)
        bars = PolyCollection(corners, facecolors=color, edgecolors="white", linewidths=0.4)
        bars.sticky_edges.x[:] = np.unique(left).tolist()  # as barh: no margin before a bar's base
        panel.axes.add_collection(bars, autolim=True)
        panel.axes.autoscale_view()
        return Patch(facecolor=color, edgecolor="none")
    index, count = slot
    width = 0.8 / count
    x = panel.position("x", trace.x) - 0.4 + width * (index + 0.5)
    heights = _numbers(trace.y)
    errors = None
    if trace.error_y is not None and trace.error_y.array is not None:
        above = _numbers(trace.error_y.array)
        below = _numbers(trace.error_y.arrayminus) if trace.error_y.arrayminus is not None else above
        errors = np.vstack([below, above])
    panel.axes.bar(x, heights, width=width, color=color, yerr=errors, capsize=3, error_kw={"linewidth": 1})
    return Patch(facecolor=color, edgecolor="none")


def _draw_lines_across(fig: go.Figure, panels: dict[str, _Panel]) -> None:
    """Horizontal lines across a panel (``add_hline``) and the text plotly writes beside them."""
    for shape in fig.layout.shapes or ():
        if shape.type == "line" and shape.y0 == shape.y1 and str(shape.xref).endswith("domain"):
            panel = panels.get(str(shape.xref).split()[0]) or next(iter(panels.values()))
            panel.axes.axhline(shape.y0, color=_color(shape.line.color, "#444444"), linestyle=_DASHES.get(shape.line.dash or "solid", "-"),
                               linewidth=1)
    for note in fig.layout.annotations or ():
        if str(note.xref).endswith("domain") and note.text:
            panel = panels.get(str(note.xref).split()[0]) or next(iter(panels.values()))
            panel.axes.text(note.x, note.y, _plain(note.text), transform=panel.axes.get_yaxis_transform(),
                            ha="right", va="bottom", fontsize=FONT_SIZE - 1)


def _colorscale(fig: go.Figure, trace: go.Heatmap):
    """(colormap, norm, colour bar settings or None) of a heatmap: its own scale or its shared colour axis."""
    if trace.coloraxis:
        axis = fig.layout[trace.coloraxis]
        scale, reverse, low, high = axis.colorscale, axis.reversescale, axis.cmin, axis.cmax
        bar = axis.colorbar if axis.showscale is not False else None
    else:
        scale, reverse, low, high = trace.colorscale, trace.reversescale, trace.zmin, trace.zmax
        bar = trace.colorbar if trace.showscale is not False else None
    steps = scale or get_colorscale("Viridis")
    positions = [float(position) for position, _ in steps]
    stops = np.asarray([_color(color) for _, color in steps])
    grid = np.linspace(0, 1, 256)
    colors = np.stack([np.interp(grid, positions, stops[:, channel]) for channel in range(4)], axis=1)
    cmap = ListedColormap(colors[::-1] if reverse else colors)
    return cmap, (low, high), bar


def _draw_heatmap(fig: go.Figure, panel: _Panel, trace: go.Heatmap, scales: dict) -> None:
    """Cells with a gap between them, NaN cells left empty, each cell's text in black or white by its colour."""
    z = np.asarray(trace.z, dtype=float)
    if z.size == 0:
        return
    xs, ys = panel.position("x", trace.x), panel.position("y", trace.y)
    cmap, (low, high), bar = _colorscale(fig, trace)
    finite = z[np.isfinite(z)]
    low = low if low is not None else (finite.min() if finite.size else 0.0)
    high = high if high is not None else (finite.max() if finite.size else 1.0)
    norm = Normalize(low, high if high > low else low + 1)
    edges_x = np.arange(len(xs) + 1) - 0.5 + (xs.min() if len(xs) else 0)
    edges_y = np.arange(len(ys) + 1) - 0.5 + (ys.min() if len(ys) else 0)
    panel.axes.pcolormesh(edges_x, edges_y, np.ma.masked_invalid(z), cmap=cmap, norm=norm, edgecolors="white", linewidth=2)
    text = np.asarray(trace.text, dtype=object) if trace.text is not None else None
    if text is not None:
        for i, row in enumerate(z):
            for j, value in enumerate(row):
                label = _plain(text[i][j])
                if not label or not np.isfinite(value):
                    continue
                red, green, blue, _ = cmap(norm(value))
                ink = "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"
                panel.axes.text(xs[j], ys[i], label, ha="center", va="center", fontsize=FONT_SIZE - 2, color=ink)
    if bar is not None:
        key = trace.coloraxis or id(trace)
        entry = scales.setdefault(key, {"cmap": cmap, "norm": norm, "bar": bar, "axes": []})
        entry["axes"].append(panel.axes)


def _size(fig: go.Figure, columns: int, rows: int, legend_width: float, legend_entries: int) -> tuple[float, float]:
    """Inches: plotly's own size where it sets one, else by panels; tall enough for every legend entry."""
    layout = fig.layout
    width = layout.width / PIXELS_PER_INCH if layout.width else max(MIN_WIDTH_IN, columns * PANEL_SIZE_IN[0] + legend_width)
    height = layout.height / PIXELS_PER_INCH if layout.height else rows * PANEL_SIZE_IN[1] + 1.0
    return width, max(height, 1.2 + LEGEND_ENTRY_IN * legend_entries)


def _title(fig: go.Figure, figure: Figure, legend_width: float) -> None:
    """The title and its subtitle lines, wrapped and centred over the panels so they never run into the legend."""
    lines = _plain(fig.layout.title.text).splitlines()
    if not lines:
        return
    width = figure.get_figwidth() - legend_width
    characters = max(30, int(width * 72 / (TITLE_FONT_SIZE * CHARACTER_EM)))
    body = [textwrap.fill(line, characters) for line in lines]
    figure.suptitle("\n".join(body), fontsize=TITLE_FONT_SIZE, x=width / 2 / figure.get_figwidth())


def static_figure(fig: go.Figure) -> Figure:
    """The matplotlib figure of a plotly figure of this package: the same panels, curves, cells and texts."""
    supported = (go.Scatter, go.Bar, go.Heatmap)
    for trace in fig.data:
        if not isinstance(trace, supported):
            raise ValueError(f"static figures: a {type(trace).__name__} trace cannot be drawn (Scatter, Bar, Heatmap only)")
    figure = Figure(layout="constrained")
    panels = _layout_panels(fig, figure)
    legend: dict[str, tuple[object, str]] = {}
    scales: dict = {}
    heatmaps = set()
    bars = [trace for trace in fig.data if isinstance(trace, go.Bar) and trace.orientation != "h"]
    for trace in fig.data:
        panel = panels.get(trace.xaxis or "x") or next(iter(panels.values()))
        panel.used = True
        if isinstance(trace, go.Heatmap):
            _draw_heatmap(fig, panel, trace, scales)
            heatmaps.add(id(panel))
            continue
        if isinstance(trace, go.Scatter):
            handle = _draw_scatter(panel, trace)
        else:
            slot = next((i for i, bar in enumerate(bars) if bar is trace), 0)
            handle = _draw_bar(panel, trace, (slot, max(len(bars), 1)))
        key = trace.legendgroup or trace.name
        if handle is not None and trace.showlegend is not False and trace.name and key not in legend:
            legend[key] = (handle, _plain(trace.name))
    for panel in panels.values():
        _style_axes(panel, id(panel) in heatmaps)
    _draw_lines_across(fig, panels)
    rows = len({p.axes.get_subplotspec().rowspan.start for p in panels.values()})
    columns = len({p.axes.get_subplotspec().colspan.start for p in panels.values()})
    show_legend = fig.layout.showlegend is not False and bool(legend)
    labels = [label for _, label in legend.values()]
    legend_width = (0.5 + 0.06 * max(map(len, labels))) if show_legend else 0.0  # ~0.06 in a character at 8 pt
    scale_width = 1.2 * len(scales)
    figure.set_size_inches(*_size(fig, columns, rows, legend_width + scale_width, len(labels) if show_legend else 0))
    _panel_titles(fig, panels, figure.get_figwidth() - legend_width - scale_width)
    for panel in panels.values():
        if not panel.used and not panel.axes.get_title():  # a grid cell make_subplots left empty
            panel.axes.set_visible(False)
    if show_legend:
        figure.legend(
            [handle for handle, _ in legend.values()], labels, loc="outside right upper", fontsize=FONT_SIZE - 1,
            title=_plain(fig.layout.legend.title.text) or None, title_fontsize=FONT_SIZE - 1, frameon=False,
        )
    for entry in scales.values():
        bar = figure.colorbar(ScalarMappable(norm=entry["norm"], cmap=entry["cmap"]), ax=entry["axes"], fraction=0.04, pad=0.02)
        bar.set_label(_plain(entry["bar"].title.text), fontsize=FONT_SIZE - 1)
        bar.ax.tick_params(labelsize=FONT_SIZE - 1)
        if entry["bar"].tickvals is not None:
            bar.set_ticks(list(entry["bar"].tickvals), labels=[_plain(t) for t in entry["bar"].ticktext or entry["bar"].tickvals])
    _title(fig, figure, legend_width if show_legend else 0.0)
    return figure


def write_static(directory, figures: dict[str, go.Figure], image_format: str = "png") -> list[Path]:
    """Draw each plotly figure with matplotlib into ``<directory>/<name>.<image_format>``, atomically."""
    if image_format not in STATIC_FORMATS:
        raise ValueError(f"--format must be one of {', '.join(STATIC_FORMATS)}, got {image_format!r}")
    written = []
    for name, fig in figures.items():
        path = Path(directory) / f"{name}.{image_format}"
        atomic_write_bytes(path, render(fig, image_format))
        written.append(path)
    return written


def render(fig: go.Figure, image_format: str = "png") -> bytes:
    """The bytes of one plotly figure drawn as a static image."""
    buffer = io.BytesIO()
    static_figure(fig).savefig(buffer, format=image_format, dpi=PNG_DPI, metadata=_NO_DATES[image_format])
    return buffer.getvalue()
