"""The run folder: settings, per-epoch metrics CSV, training-curve PNG, summary; written by rank 0 only."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from gpukit.train.checkpoint import atomic_write_bytes
from gpukit.train.config import EpochMetrics, TrainResult

__all__ = ["append_log", "epoch_line", "write_curve", "write_json", "write_metrics_csv"]

METRIC_FIELDS = list(EpochMetrics.__dataclass_fields__)


def epoch_line(m: EpochMetrics) -> str:
    """One human-readable line per epoch: the numbers the progress bar shows, kept in train.log."""
    val = f"val loss {m.val_loss:.4f} acc {m.val_accuracy:.4f}" if m.val_accuracy is not None else "no val"
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
    """Loss and accuracy per epoch, train and validation, as a PNG (matplotlib, no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [e.epoch for e in result.epochs]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    ax_loss.plot(epochs, [e.train_loss for e in result.epochs], marker="o", label="train")
    ax_acc.plot(epochs, [e.train_accuracy for e in result.epochs], marker="o", label="train")
    val = [(e.epoch, e.val_loss, e.val_accuracy) for e in result.epochs if e.val_loss is not None]
    if val:
        ax_loss.plot([v[0] for v in val], [v[1] for v in val], marker="o", label="validation")
        ax_acc.plot([v[0] for v in val], [v[2] for v in val], marker="o", label="validation")
    ax_loss.set(xlabel="epoch", ylabel="loss", title="loss")
    ax_acc.set(xlabel="epoch", ylabel="accuracy", title="accuracy", ylim=(0, 1.02))
    from matplotlib.ticker import MaxNLocator

    for ax in (ax_loss, ax_acc):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole numbers
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"{result.model} on {result.device} × {result.world_size}")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
