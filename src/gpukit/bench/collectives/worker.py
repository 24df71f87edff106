"""The per-rank loop of `gpukit bench allreduce|allgather|reducescatter|broadcast|alltoall`.

Run by :mod:`launch` (one process per rank, ``python -m gpukit.bench.collectives.worker JOB_DIR``) or inline under
torchrun. Every rank goes through the same rows in lock-step; rank 0 writes each finished row to
``JOB_DIR/rows.jsonl`` (so a later failure keeps what was measured) and every rank writes a heartbeat after each
stage, which is how the launcher tells a hung rank from a slow one.

Per row: fresh inputs → one call → exact check (every rank; a wrong element on any rank fails the row) → warm-up →
calibrate calls per sample (agreed across ranks) → timed samples per call (and, on CUDA, a CUDA graph of the same
loop replayed: nccl-tests' ``-G``) → the timed output checked again → fresh inputs, one more call, checked (as
nccl-tests' ``-c``). A sample's time is the slowest rank's (an all-reduce MAX of each rank's samples).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpukit.bench.collectives import hooks
from gpukit.bench.collectives.ops import DTYPES, bandwidths, expected, inputs, numel_for, output_numel, pattern

__all__ = ["main", "run_collectives"]

TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}


class Ctx:
    """This rank: its process group, device and heartbeat."""

    def __init__(self, job_dir: Path | None, device: str) -> None:
        import torch
        import torch.distributed as dist

        self.dist, self.torch = dist, torch
        self.rank, self.ranks = dist.get_rank(), dist.get_world_size()
        self.device = device
        self.job_dir = job_dir
        self.beats = 0
        if job_dir is not None and (job_dir / f"hb.{self.rank}").exists():  # count on from an earlier Ctx
            self.beats = int((job_dir / f"hb.{self.rank}").read_text().split()[0])

    def beat(self, stage: str) -> None:
        self.beats += 1
        if self.job_dir is not None:
            path = self.job_dir / f"hb.{self.rank}"
            tmp = self.job_dir / f"hb.{self.rank}.tmp"
            tmp.write_text(f"{self.beats} {stage}\n")
            os.replace(tmp, path)

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    def agree_max(self, values: list[float]) -> list[float]:
        """Element-wise max over ranks (a small all-reduce on the group's device)."""
        t = self.torch.tensor(values, dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return [float(v) for v in t.cpu().tolist()]

    def failing_ranks(self, ok: bool) -> list[int]:
        flags = [0.0] * self.ranks
        flags[self.rank] = 0.0 if ok else 1.0
        return [r for r, v in enumerate(self.agree_max(flags)) if v > 0]


def _call(ctx: Ctx, op: str, send: Any, recv: Any) -> Callable[[], None]:
    dist = ctx.dist
    if op == "allreduce":
        return lambda: dist.all_reduce(send)  # in place: send is recv
    if op == "allgather":
        return lambda: dist.all_gather_into_tensor(recv, send)
    if op == "reducescatter":
        return lambda: dist.reduce_scatter_tensor(recv, send)
    if op == "broadcast":
        return lambda: dist.broadcast(send, src=0)  # in place
    return lambda: dist.all_to_all_single(recv, send)


def _timed_input(ctx: Ctx, op: str, numel: int, dtype: Any) -> Any:
    """All-reduce sums in place, so a loop of them would grow the values without bound: its timed buffer holds
    p(r) − p(r−1) on rank r, which sums to exactly 0 over the ranks (then stays 0: checked after timing)."""
    if op != "allreduce" or ctx.ranks == 1:
        return inputs(op, ctx.rank, ctx.ranks, numel, ctx.device, dtype)
    prev = (ctx.rank - 1) % ctx.ranks
    a = pattern(ctx.rank, ctx.ranks, 0, numel, ctx.device, ctx.torch.int64)
    return (a - pattern(prev, ctx.ranks, 0, numel, ctx.device, ctx.torch.int64)).to(dtype)


class Buffers:
    def __init__(self, ctx: Ctx, op: str, numel: int, dtype: Any) -> None:
        torch = ctx.torch
        self.ctx, self.op, self.numel, self.dtype = ctx, op, numel, dtype
        self.send = inputs(op, ctx.rank, ctx.ranks, numel, ctx.device, dtype)
        in_place = op in ("allreduce", "broadcast")
        self.recv = self.send if in_place else torch.empty(output_numel(op, numel, ctx.ranks), dtype=dtype,
                                                            device=ctx.device)  # fmt: skip

    def result(self) -> Any:
        return self.recv

    def refill(self, timed: bool = False) -> None:
        fresh = (_timed_input if timed else lambda c, o, n, d: inputs(o, c.rank, c.ranks, n, c.device, d))(
            self.ctx, self.op, self.numel, self.dtype
        )
        hooks.corrupt(fresh, self.ctx.rank)
        self.send.copy_(fresh)
        if self.recv is not self.send:
            self.recv.fill_(float("nan"))  # poison: an element the collective does not write fails the check

    def check(self, timed: bool = False) -> bool:
        ctx = self.ctx
        if timed and self.op == "allreduce" and ctx.ranks > 1:
            want = ctx.torch.zeros_like(self.recv)
        else:
            want = expected(self.op, ctx.rank, ctx.ranks, self.numel, ctx.device, self.dtype)
        return bool(ctx.torch.equal(self.recv, want))


def _samples(ctx: Ctx, call: Callable[[], None], iters: int, repeats: int, graph: Any = None) -> list[float]:
    """Seconds per call, one figure per sample, on this rank."""
    torch = ctx.torch
    out = []
    cuda = ctx.device.startswith("cuda")
    for _ in range(repeats):
        ctx.dist.barrier()  # every rank starts the sample together: a late rank's wait counts once, as its own
        ctx.sync()
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            if graph is not None:
                graph.replay()
            else:
                for _ in range(iters):
                    call()
            end.record()
            end.synchronize()  # the one host sync of a sample: read the device's own time
            out.append(start.elapsed_time(end) / 1e3 / iters)
        else:
            t0 = time.perf_counter()
            for _ in range(iters):
                call()
            out.append((time.perf_counter() - t0) / iters)
    return out


def _capture(ctx: Ctx, call: Callable[[], None], iters: int) -> Any:
    """A CUDA graph of ``iters`` back-to-back collectives (warmed up on a side stream first, as capture wants)."""
    torch = ctx.torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()  # nothing of the process group's may still be in flight when capture begins
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        for _ in range(iters):
            call()
    return graph


def _row(ctx: Ctx, op: str, dtype_name: str, size: int, numel: int, graph: str) -> dict[str, Any]:
    return {"op": op, "size_bytes": numel * DTYPES[dtype_name], "requested_bytes": size, "dtype": dtype_name,
            "ranks": ctx.ranks, "device": "cuda" if ctx.device.startswith("cuda") else "cpu",
            "backend": ctx.dist.get_backend(), "graph": graph, "status": "ok", "reason": None, "check": None,
            "time_s": None, "algbw_gbps": None, "busbw_gbps": None, "iters": 0, "repeats": 0,
            "samples_s": []}  # fmt: skip


def _finish(row: dict[str, Any], samples: list[float]) -> dict[str, Any]:
    med = statistics.median(samples)
    row["time_s"] = {"median": med, "min": min(samples), "max": max(samples)}
    row["algbw_gbps"], row["busbw_gbps"] = bandwidths(row["op"], row["size_bytes"], row["ranks"], med)
    if row["ranks"] == 1:  # nothing crosses a link: busbw is 0 by NCCL's factor, algbw would be size / overhead
        row["algbw_gbps"] = None
    row["samples_s"] = samples
    return row


def _fail(row: dict[str, Any], reason: str, check: bool | None = None) -> dict[str, Any]:
    row.update(status="failed", reason=reason, check=check)
    return row


def measure_row(ctx: Ctx, op: str, dtype_name: str, size: int, job: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-call row and, on CUDA, the captured one, for one (op, dtype, size)."""
    torch = ctx.torch
    dtype = getattr(torch, TORCH_DTYPES[dtype_name])
    numel = numel_for(size, dtype_name, ctx.ranks)
    base = _row(ctx, op, dtype_name, size, numel, "per-call")
    modes = ["per-call"] + (["captured"] if ctx.device.startswith("cuda") and job.get("graph", True) else [])
    hooks.maybe_die_or_hang(ctx.rank)
    ctx.beat(f"{op} {dtype_name} {size} B: allocate")
    try:
        bufs = Buffers(ctx, op, numel, dtype)
        alloc_error = ""
    except (RuntimeError, MemoryError) as exc:  # out of memory on this rank: the row fails, the run goes on
        bufs, alloc_error = None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    bad = ctx.failing_ranks(bufs is not None)
    if bufs is None or bad:
        return [_fail(dict(base, graph=m), f"cannot allocate on rank {bad}: {alloc_error or 'see that rank'}")
                for m in modes]  # fmt: skip
    call = _call(ctx, op, bufs.send, bufs.recv)
    ctx.beat(f"{op} {dtype_name} {size} B: check")
    bufs.refill()
    call()
    ctx.sync()
    bad = ctx.failing_ranks(bufs.check())
    if bad:
        reason = f"wrong result on rank(s) {', '.join(map(str, bad))}: not equal to the exact expected values"
        return [_fail(dict(base, graph=m), reason, check=False) for m in modes]
    rows = []
    bufs.refill(timed=True)
    for _ in range(job["warmup"]):
        call()
    ctx.sync()
    (one,) = ctx.agree_max(_samples(ctx, call, 1, 1))
    iters = max(1, min(job["max_iters"], int(job["target_sample_s"] / max(one, 1e-9)) + 1))
    for mode in modes:
        row = dict(base, graph=mode, iters=iters, repeats=job["repeats"])
        ctx.beat(f"{op} {dtype_name} {size} B: time {mode}")
        graph = None
        if mode == "captured":
            try:
                graph = _capture(ctx, call, iters)
            except Exception as exc:  # a torch/NCCL that cannot capture collectives: say so, keep the per-call row
                rows.append(dict(row, status="skipped", reason=f"CUDA graph capture failed: {exc}"[:300]))
                continue
        samples = ctx.agree_max(_samples(ctx, call, iters, job["repeats"], graph))
        ok_timed = not ctx.failing_ranks(bufs.check(timed=True))
        bufs.refill()  # fresh inputs and one more call: the collective still right after the loop
        call()
        ctx.sync()
        ok_after = not ctx.failing_ranks(bufs.check())
        bufs.refill(timed=True)
        if not (ok_timed and ok_after):
            rows.append(_fail(row, "wrong result after the timed calls", check=False))
            continue
        rows.append(_finish(dict(row, check=True), samples))
    return rows


def run_collectives(job: dict[str, Any], job_dir: Path | None) -> list[dict[str, Any]]:
    """Every (op, dtype, size) of ``job`` on this rank; rank 0 returns (and appends to rows.jsonl) the rows."""
    ctx = Ctx(job_dir, job["device_name"])
    out: list[dict[str, Any]] = []
    for op in job["ops"]:
        for dtype_name in job["dtypes"]:
            for size in job["sizes"]:
                rows = measure_row(ctx, op, dtype_name, size, job)
                if ctx.rank == 0:
                    out += rows
                    if job_dir is not None:
                        with open(job_dir / "rows.jsonl", "a", encoding="utf-8") as fh:
                            fh.writelines(json.dumps(r) + "\n" for r in rows)
    ctx.beat("done")
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of a spawned rank: read the job, join the group, run it, leave the group."""
    from gpukit.bench.collectives import group

    job_dir = Path((argv or sys.argv[1:])[0])
    job = json.loads((job_dir / "job.json").read_text())
    device = group.join(job["device"], job["timeout_s"])
    job["device_name"] = device
    Ctx(job_dir, device).beat("joined the group")
    from gpukit.bench.collectives.launch import rank_function

    try:
        rows = rank_function(job)(job, job_dir)
        if int(os.environ.get("RANK", "0")) == 0:
            (job_dir / "result.json").write_text(json.dumps(rows))
    finally:
        group.leave()
    return 0


if __name__ == "__main__":
    sys.exit(main())
