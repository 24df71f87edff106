"""Owns every table, JSON document, plot and progress bar the CLI shows. The library never prints."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

_STDOUT = Console(highlight=False, soft_wrap=False)
console = _STDOUT
# Tables written to a pipe or a file (not a terminal) are laid out for this many columns, whatever the terminal the
# command was started from, unless $COLUMNS says otherwise: the same command gives the same text.
PIPED_WIDTH = 120
err_console = Console(stderr=True, highlight=False)

NA = "n/a"

# ``pip install 'gpukit[export]'`` in a hint: installing from a package index. From a clone of the repository the
# same extra is ``pip install -e '.[export]'``; a hint that names one gets the other beside it.
_EXTRA = re.compile(r"pip install '?gpukit\[([a-z0-9_,-]+)\]'?")


def hint_text(hint: str) -> str:
    """A hint as it is shown: an extra's install command gains the from-a-clone spelling (once)."""
    m = _EXTRA.search(hint)
    if m and "-e '." not in hint:
        hint = f"{hint} (from a clone of the repository: pip install -e '.[{m.group(1)}]')"
    return hint


def hint_markup(hint: str) -> str:
    """A hint ready to go inside a rich markup string: completed by :func:`hint_text`, then escaped."""
    return escape(hint_text(hint))


def error(message: str, hint: str | None = None) -> None:
    """Print an ``error:`` line and, when there is one, a ``hint:`` line on stderr. Message and hint are text, not
    rich markup: ``[export]`` in ``pip install 'gpukit[export]'`` would otherwise be swallowed as a style tag."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)
    if hint:
        err_console.print(f"[yellow]hint:[/] {hint_markup(hint)}", markup=True, highlight=False)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, set | frozenset):
        return sorted(obj)
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    return str(obj)


def _finite(obj: Any) -> Any:
    """JSON has no NaN or infinity: write them as null rather than emit invalid JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def to_json(obj: Any) -> str:
    return json.dumps(_finite(obj), indent=2, default=_json_default, allow_nan=False)


def print_json(obj: Any) -> None:
    """Write a JSON document to stdout, unstyled, so scripts can parse it."""
    sys.stdout.write(to_json(obj) + "\n")
    sys.stdout.flush()


def fmt(value: Any, spec: str = "", unit: str = "") -> str:
    """Format a value for a table cell; ``None`` (unknown / unsupported) becomes ``n/a``."""
    if value is None:
        return NA
    if isinstance(value, float) and not math.isfinite(value):
        return NA
    text = format(value, spec) if spec else str(value)
    return f"{text} {unit}".rstrip() if unit else text


def fmt_seconds(seconds: float | None) -> str:
    """Seconds with a unit that keeps three significant figures: 1.23 s, 45.6 ms, 789 µs, 12.3 ns."""
    if seconds is None or (isinstance(seconds, float) and not math.isfinite(seconds)):
        return NA
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
        if abs(seconds) >= scale or unit == "ns":
            return f"{seconds / scale:.3g} {unit}"
    return NA  # pragma: no cover - the loop always returns


def fmt_bytes(n: float | None) -> str:
    """Bytes in binary units: 1.50 GiB."""
    if n is None:
        return NA
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return NA  # pragma: no cover


def table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    title: str | None = None,
    justify: Sequence[str] | None = None,
) -> Table:
    """A rich table; cells are formatted with :func:`fmt` unless they are already strings."""
    t = Table(title=title, title_justify="left", header_style="bold")
    for i, name in enumerate(columns):
        t.add_column(name, justify=(justify[i] if justify else "left"), overflow="fold")  # type: ignore[arg-type]
    for row in rows:
        t.add_row(*(cell if isinstance(cell, str) else fmt(cell) for cell in row))
    return t


def table_width(target: Console) -> int:
    """The columns a table printed on ``target`` may use: the terminal's width, or :data:`PIPED_WIDTH` when stdout
    is not a terminal (and $COLUMNS is not set)."""
    if target is _STDOUT and not target.is_terminal and not os.environ.get("COLUMNS"):
        return PIPED_WIDTH
    return target.width


def sized(target: Console | None = None) -> Console:
    """``target`` (default: stdout's console) as tables and their notes are printed: at :func:`table_width`
    (rich caps a print's width at its console's, so a pipe gets a console of its own width)."""
    out = target if target is not None else console
    width = table_width(out)
    if width == out.width:
        return out
    return Console(file=out.file, width=width, highlight=False, soft_wrap=False, no_color=out.no_color)


def _widths(cells: Iterable[str]) -> tuple[int, int]:
    """(longest word, longest line) of some cells (rich markup), in terminal columns."""
    texts = [Text.from_markup(cell).plain for cell in cells]
    words = [cell_len(w) for t in texts for w in t.split()]
    lines = [cell_len(line) for t in texts for line in t.splitlines()]
    return max(words, default=1), max(lines, default=1)


def _measure(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Per column: (longest word, longest line) of its header and of its cells."""
    heads = [_widths([escape(name)]) for name in columns]
    bodies = [_widths([row[i] for row in rows]) if rows else (1, 1) for i in range(len(columns))]
    return list(zip(heads, bodies, strict=True))


def _fit(measures: Sequence[tuple[tuple[int, int], tuple[int, int]]], width: int, wrap: bool) -> list[int] | None:
    """Each column's width so that the table (heavy head, one space of padding each side) fits ``width`` columns
    and no word is cut, or None. Headers may wrap; cells wrap only with ``wrap``, the widest columns first and
    none below its longest word."""
    lows = [max(h[0], b[0] if wrap else b[1]) for h, b in measures]
    widths = [max(h[1], b[1]) for h, b in measures]
    room = width - 3 * len(measures) - 1
    if sum(lows) > room:
        return None
    while sum(widths) > room:
        i = max((j for j in range(len(widths)) if widths[j] > lows[j]), key=lambda j: widths[j] - lows[j])
        widths[i] -= 1
    return widths


def print_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    title: str | None = None,
    optional: Sequence[str] = (),
    last_resort: Sequence[str] = (),
    target: Console | None = None,
) -> None:
    """Print a table that fits the width (:func:`table_width`) without cutting a word. In order of preference: every
    cell on one line, leaving out the ``optional`` columns one by one as needed; then cells wrapped at spaces, with
    as few of those left out as will do; then also the ``last_resort`` columns, one by one; then each row as a block
    of ``column  value`` lines. Headers may wrap; a dim line names the columns left out."""
    out = sized(target)
    cells = [[cell if isinstance(cell, str) else fmt(cell) for cell in row] for row in rows]
    choice = _choose(list(columns), cells, [c for c in optional if c in columns],
                     [c for c in last_resort if c in columns], out.width)  # fmt: skip
    if choice is None:
        out.print(_stacked(columns, cells, title))
        return
    keep, widths = choice
    t = Table(title=title, title_justify="left", header_style="bold")
    for name, w in zip(keep, widths, strict=True):
        t.add_column(name, width=w, overflow="fold")
    for row in cells:
        t.add_row(*(row[columns.index(c)] for c in keep))
    out.print(t)
    if dropped := [c for c in columns if c not in keep]:
        note = f"({', '.join(dropped)}: left out to fit {out.width} columns; a wider window or --json shows them)"
        out.print(f"[dim]{escape(note)}[/]")


def _choose(
    columns: list[str], cells: list[list[str]], optional: list[str], last: list[str], width: int
) -> tuple[list[str], list[int]] | None:
    """The columns to show and their widths, trying in the order :func:`print_table` gives; None when none fits."""

    def without(gone: list[str]) -> list[str]:
        return [c for c in columns if c not in gone]

    first = [without(optional[:k]) for k in range(len(optional) + 1)]
    tries = [(keep, False) for keep in first] + [(keep, True) for keep in first]
    for k in range(1, len(last) + 1):
        tries += [(without(optional + last[:k]), False), (without(optional + last[:k]), True)]
    measured = dict(zip(columns, _measure(columns, cells), strict=True))  # once: a sweep has hundreds of rows
    for keep, wrap in tries:
        if (widths := _fit([measured[c] for c in keep], width, wrap)) is not None:
            return keep, widths
    return None


def _stacked(columns: Sequence[str], cells: Sequence[Sequence[str]], title: str | None) -> Table:
    """The narrow layout: one block of ``column  value`` lines per row, a rule between rows."""
    t = Table(title=title, title_justify="left", show_header=False)
    t.add_column(style="bold", overflow="fold")
    t.add_column(overflow="fold")
    for row in cells:
        for i, name in enumerate(columns):
            t.add_row(escape(name), row[i], end_section=i == len(columns) - 1)
    return t
