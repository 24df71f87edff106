"""The one place the multi-GPU benches touch the results history .

A :class:`MultiRun` is saved as an ordinary bench run, so `gpukit history` lists it and `gpukit report` writes it up:
each row becomes a :class:`~gpukit.bench.results.Result` (workload = the op, ``p2p`` or ``scaling-<model>``;
throughput in ``gbps`` = busbw, or ``samples_per_s`` = images/s), and the whole MultiRun document — every field of
every row — is kept in the run's settings under ``multi_gpu``, which is what the report's plots and `gpukit plan`
read back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpukit.bench.collectives.results import CollectiveRow, MultiRun, P2PRow, ScalingRow

__all__ = ["MULTI_KEY", "save_multi_run", "to_result"]

MULTI_KEY = "multi_gpu"


def to_result(row: Any) -> Any:
    """A bench Result for one multi-GPU row (``unavailable`` becomes ``skipped``, the bench's word for it)."""
    from gpukit.bench.results import Result
    from gpukit.bench.workloads._common import bytes_label

    status = "skipped" if row.status == "unavailable" else row.status
    if isinstance(row, CollectiveRow):
        t = row.time_s or {}
        backend = f"{row.backend}-x{row.ranks}" + ("-graph" if row.graph == "captured" else "")
        size = f"{bytes_label(row.size_bytes)}:{row.dtype}"
        return Result(row.op, backend, row.device, size, status, row.reason, dtype=row.dtype,
                      check=row.check, kernel_median_s=t.get("median"), kernel_min_s=t.get("min"),
                      kernel_max_s=t.get("max"), throughput_unit="gbps", gbps=row.busbw_gbps,
                      bytes=float(row.size_bytes), repeats=row.repeats, inner=row.iters,
                      samples_s=list(row.samples_s), size_x=float(row.size_bytes), size_group=row.dtype)  # fmt: skip
    if isinstance(row, P2PRow):
        t = row.time_s or {}
        pair = "n/a" if row.src is None else f"{row.src}->{row.dst}"
        return Result("p2p", f"{pair} {row.mode} peer-{row.peer_access}", "cuda", bytes_label(row.size_bytes or 0),
                      status, row.reason, check=row.check, kernel_median_s=t.get("median"),
                      kernel_min_s=t.get("min"), kernel_max_s=t.get("max"), throughput_unit="gbps", gbps=row.gbps,
                      bytes=float(row.size_bytes), size_x=float(row.size_bytes or 0), size_group="")  # fmt: skip
    assert isinstance(row, ScalingRow)
    t = row.step_s or {}
    return Result(f"scaling-{row.model}", f"ddp-x{row.ranks}", row.device, f"{row.image_size}px-b{row.batch_per_rank}",
                  status, row.reason, check=row.check, kernel_median_s=t.get("median"), kernel_min_s=t.get("min"),
                  kernel_max_s=t.get("max"), throughput_unit="samples_per_s", samples_per_s=row.images_per_s,
                  repeats=row.steps, size_x=float(row.ranks),
                  size_group=f"{row.image_size}px-b{row.batch_per_rank}")  # fmt: skip


def save_multi_run(run: MultiRun, db: str | Path | None, command: str, node: str | None = None) -> int:
    """Store ``run`` in the results history (a file or a ``postgresql://`` URL, saved under ``node`` when given);
    sets and returns ``run.id``."""
    from gpukit.bench.results import Run
    from gpukit.bench.runner import _fingerprint, versions
    from gpukit.history import open_history

    machine = _fingerprint()
    machine.setdefault("gpus", list(machine.get("gpu_names") or []))  # the store's "gpu" column reads this
    results = [to_result(r) for r in run.rows]
    settings = {"workloads": sorted({r.workload for r in results}), "command": command,
                "quick": bool(run.settings.get("quick")), MULTI_KEY: run.to_dict()}  # fmt: skip
    bench_run = Run(run.started_at, machine, versions(), settings, results=results, duration_s=run.duration_s,
                    interrupted=False)  # fmt: skip
    with open_history(db, node=node) as history:
        run.id = history.save_run(bench_run.to_dict())
    return run.id
