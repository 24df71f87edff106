"""The run folder: settings, per-epoch metrics CSV, training-curve SVG, summary; written by rank 0 only."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from gpukit.train.checkpoint import atomic_write_bytes
from gpukit.train.config import EpochMetrics, TrainResult

__all__ = ["append_log", "epoch_line", "write_curve", "write_json", "write_metrics_csv"]

METRIC_FIELDS = list(EpochMetrics.__dataclass_fields__)


def epoch_line(m: EpochMetrics) -> str:
    """One human-readable line per epoch: the numbers the progress bar shows, kept in train.log."""
    val = f"val loss {m.val_loss:.4f} acc {m.val_accuracy:.4f}" if m.val_accuracy is not None else "not validated"
    util = f"{m.gpu_util_pct:.0f}%" if m.gpu_util_pct is not None else "n/a"
    return (
        f"epoch {m.epoch}: loss {m.train_loss:.4f} acc {m.train_accuracy:.4f}, {val}; {m.images_per_s:,.0f} img/s "
        f"over {m.epoch_s:.2f} s, data wait {m.data_wait_s:.3f} s, GPU {util}"
    )


def append_log(path: Path, line: str) -> None:
    with path.open("a") as f:
        f.write(line.rstrip("\n") + "\n")


def write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, json.dumps(obj, indent=2, default=str).encode())


def write_metrics_csv(path: Path, epochs: list[EpochMetrics]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=METRIC_FIELDS)
    writer.writeheader()
    for e in epochs:
        writer.writerow(e.to_dict())
    atomic_write_bytes(path, buf.getvalue().encode())


def write_curve(path: Path, result: TrainResult) -> None:
    """Loss and accuracy per epoch, train and validation, as a small self-contained SVG. Written by hand, not with
    matplotlib: its import alone took 2-6 s at the end of every run, for a picture nobody waits for."""
    epochs = result.epochs
    xs = [e.epoch for e in epochs]
    panels = [
        ("loss", [e.train_loss for e in epochs], [e.val_loss for e in epochs], None),
        ("accuracy", [e.train_accuracy for e in epochs], [e.val_accuracy for e in epochs], (0.0, 1.0)),
    ]
    w, h, pad = 420, 260, 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * w}" height="{h + 30}" font-family="sans-serif" '
             'font-size="11">', f'<text x="10" y="16">{_esc(result.model)} on {_esc(result.device)} × '
             f"{result.world_size}: blue train, orange validation</text>"]  # fmt: skip
    for k, (title, train, val, fixed) in enumerate(panels):
        values = [v for v in train + val if v is not None and math.isfinite(v)]
        lo, hi = fixed or ((min(values), max(values)) if values else (0.0, 1.0))
        hi = hi if hi > lo else lo + 1.0
        x0 = k * w

        def px(i: int, v: float, x0: int = x0, lo: float = lo, hi: float = hi) -> str:
            span = max(1, len(xs) - 1)
            return f"{x0 + pad + (w - 2 * pad) * i / span:.1f},{30 + (h - pad) * (1 - (v - lo) / (hi - lo)):.1f}"

        parts.append(f'<rect x="{x0 + pad}" y="30" width="{w - 2 * pad}" height="{h - pad}" fill="none" '
                     f'stroke="#999"/><text x="{x0 + pad}" y="{h + 22}">{title} by epoch '
                     f"({xs[0] if xs else 0}–{xs[-1] if xs else 0}); range {lo:.3g}–{hi:.3g}</text>")  # fmt: skip
        for series, colour in ((train, "#1f77b4"), (val, "#ff7f0e")):
            pts = [px(i, v) for i, v in enumerate(series) if v is not None and math.isfinite(v)]
            if pts:
                parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(pts)}"/>')
    parts.append("</svg>")
    atomic_write_bytes(path, "\n".join(parts).encode())


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
