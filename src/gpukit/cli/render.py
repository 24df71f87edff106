"""Owns every table, JSON document, plot and progress bar the CLI shows. The library never prints."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console(highlight=False, soft_wrap=False)
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
