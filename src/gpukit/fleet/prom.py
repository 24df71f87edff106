"""Acceptance results as Prometheus metrics: node_exporter's textfile-collector format (`gpukit accept
--prom-textfile DIR`) and the same text for `gpukit fleet exporter`'s ``/metrics``.

Names follow Prometheus conventions: base units (``_flops_per_second``, ``_bytes_per_second``, ``_seconds``),
ratios rather than percent, one unit per metric name (so every figure is its own metric family), enums as one
gauge per state set to 1 or 0. Every per-GPU sample carries ``node``, ``gpu`` (the index), ``uuid`` and ``model``.
Only acceptance results are exported: telemetry over time (clocks, power, XID, ECC) is dcgm-exporter's job.

:func:`render` takes any number of acceptance documents (one node's, or the newest of every node in a store) and
writes each metric family once, HELP and TYPE first, as the exposition format requires. :func:`write_textfile`
writes it atomically (a temporary file in the same folder, fsync, rename), so node_exporter never reads half a
file.
"""

from __future__ import annotations

import calendar
import math
import os
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gpukit.errors import ConfigError
from gpukit.fleet.record import VERDICTS

__all__ = ["PREFIX", "TEXTFILE_NAME", "check_textfile_dir", "figure_metric", "render", "write_textfile"]

PREFIX = "gpukit_accept"
TEXTFILE_NAME = "gpukit_accept.prom"
# figure-name suffix → (metric suffix in base units, scale from the figure's unit)
_UNITS = {"_tflops": ("_flops_per_second", 1e12), "_gbps": ("_bytes_per_second", 1e9)}
_RATIOS = (("vs_reference", "the reference shipped for the GPU model"), ("vs_node", "the median of the node's GPUs"),
           ("vs_fleet", "the fleet's median for the same model and stack"))  # fmt: skip


def figure_metric(name: str) -> tuple[str, float] | None:
    """``gemm_bf16_tflops`` → (``gpukit_accept_gemm_bf16_flops_per_second``, 1e12); None for a unit it cannot
    express in base units."""
    for suffix, (base, scale) in _UNITS.items():
        if name.endswith(suffix):
            return f"{PREFIX}_{name.removesuffix(suffix)}{base}", scale
    return None


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: Mapping[str, object]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class _Families:
    """Metric families in first-seen order, each with its help and samples (written together)."""

    def __init__(self) -> None:
        self.help: dict[str, str] = {}
        self.samples: dict[str, list[str]] = {}

    def add(self, name: str, help_text: str, labels: Mapping[str, object], value: float | None) -> None:
        if value is None or not isinstance(value, int | float):
            return
        self.help.setdefault(name, help_text)
        self.samples.setdefault(name, []).append(f"{name}{_labels(labels)} {_number(float(value))}")

    def text(self) -> str:
        out: list[str] = []
        for name, help_text in self.help.items():
            out += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", *self.samples[name]]
        return "\n".join(out) + "\n" if out else ""


def _timestamp(started_at: object) -> float | None:
    try:
        return float(calendar.timegm(time.strptime(str(started_at), "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def _node(fam: _Families, doc: Mapping[str, Any]) -> str:
    node = str((doc.get("node") or {}).get("name") or "unknown")
    base = {"node": node}
    fam.add(f"{PREFIX}_last_run_timestamp_seconds", "Start of the node's last `gpukit accept` run (Unix time).", base,
            _timestamp(doc.get("started_at")))  # fmt: skip
    fam.add(f"{PREFIX}_duration_seconds", "Wall time of the node's last `gpukit accept` run.", base,
            doc.get("duration_s"))  # fmt: skip
    for verdict in VERDICTS:
        fam.add(f"{PREFIX}_node_verdict", "1 for the node's verdict in its last acceptance (ok, slow, faulty), else 0.",
                {**base, "verdict": verdict}, 1.0 if doc.get("verdict") == verdict else 0.0)  # fmt: skip
    return node


def _figure(fam: _Families, labels: dict[str, object], name: str, fig: Mapping[str, Any]) -> None:
    short = name.rsplit("_", 1)[0]
    metric = figure_metric(name)
    if metric is not None and fig.get("status") == "ok" and isinstance(fig.get("value"), int | float):
        help_text = f"Acceptance figure {name}, checked, in base units."
        fam.add(metric[0], help_text, labels, float(fig["value"]) * metric[1])
    flabels = {**labels, "figure": short}
    fam.add(f"{PREFIX}_figure_failed", "1 when the figure failed its check or could not be measured, else 0.",
            flabels, 1.0 if fig.get("status") == "failed" else 0.0)  # fmt: skip
    fam.add(f"{PREFIX}_figure_flagged", "1 when the figure was flagged slow (reference, node or fleet), else 0.",
            flabels, 1.0 if fig.get("flags") else 0.0)  # fmt: skip
    for key, against in _RATIOS:
        fam.add(f"{PREFIX}_figure_{key}_ratio", f"The figure divided by {against}.", flabels, fig.get(key))


def _gpu(fam: _Families, node: str, gpu: Mapping[str, Any]) -> None:
    labels: dict[str, object] = {"node": node, "gpu": gpu.get("index"), "uuid": gpu.get("uuid") or "",
                                 "model": gpu.get("model") or ""}  # fmt: skip
    for verdict in VERDICTS:
        fam.add(f"{PREFIX}_gpu_verdict", "1 for the GPU's verdict in its node's last acceptance, else 0.",
                {**labels, "verdict": verdict}, 1.0 if gpu.get("verdict") == verdict else 0.0)  # fmt: skip
    for name, fig in (gpu.get("figures") or {}).items():
        if isinstance(fig, Mapping):
            _figure(fam, labels, name, fig)
    soak = gpu.get("soak") or {}
    fam.add(f"{PREFIX}_soak_sag_ratio", "Worst 3-second throughput of the soak below its first quarter (0.03 = 3 %).",
            labels, soak.get("sag"))  # fmt: skip
    fam.add(f"{PREFIX}_soak_duration_seconds", "Length of the soak's timed GEMM samples.", labels,
            soak.get("duration_s") if soak.get("trace") else None)  # fmt: skip


def render(docs: Iterable[Mapping[str, Any]]) -> str:
    """The exposition text of every acceptance document in ``docs`` (each metric family once)."""
    fam = _Families()
    for doc in docs:
        node = _node(fam, doc)
        for gpu in doc.get("gpus") or []:
            _gpu(fam, node, gpu)
    return fam.text()


def check_textfile_dir(folder: Path) -> Path:
    """``folder`` if it is a folder this process can write in; ConfigError (exit 2) otherwise — checked before
    anything is measured."""
    if not folder.is_dir():
        raise ConfigError(f"--prom-textfile {folder}: no such folder",
                          hint="give node_exporter's --collector.textfile.directory (it must exist)")  # fmt: skip
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"--prom-textfile {folder}: not writable here", hint="give a folder this user can write")
    return folder


def write_textfile(folder: Path, docs: Iterable[Mapping[str, Any]], name: str = TEXTFILE_NAME) -> Path:
    """Write :func:`render` of ``docs`` to ``folder/name`` atomically; returns the path. The temporary file does not
    end in ``.prom``, so node_exporter never reads it."""
    text = render(docs)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, folder / name)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return folder / name
