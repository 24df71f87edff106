"""`gpukit bench scaling`: DDP training with the trainer's own step (``train.step.Stepper``, the model from
``train.models``) on 1, 2, 4 … N ranks of this machine; images/s and scaling efficiency per rank count.

Weak scaling, as DDP is used: every rank keeps its batch, so N ranks train N× the images per step; efficiency is
images/s on N ranks ÷ (N × images/s on one). The images are random uint8 tensors on the device (the trainer's GPU
cache, without decoding): this measures the step and its gradient all-reduce, not the input pipeline. Every rank
count is a fresh set of processes (one rank included), so each figure starts from the same state. A row is checked:
a finite loss, and bit-identical weights on every rank after the timed steps (DDP's all-reduce really ran).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpukit.bench.collectives.device import device_state
from gpukit.bench.collectives.launch import launch, under_torchrun
from gpukit.bench.collectives.results import ScalingRow, multi_run
from gpukit.errors import ConfigError

if TYPE_CHECKING:
    from gpukit.bench.results import Run

__all__ = ["MODELS", "ScalingRequest", "rank_counts", "run_scaling", "run_scaling_rank"]

MODELS = ("resnet18", "resnet50", "seed-cnn")  # seed-cnn: tiny, for tests on CPU ranks
NUM_CLASSES = 10


def rank_counts(max_ranks: int) -> list[int]:
    """1, 2, 4, … up to and including ``max_ranks``."""
    out, n = [], 1
    while n < max_ranks:
        out.append(n)
        n *= 2
    return [*out, max_ranks]


def _samples(ctx: Any, stepper: Any, repeats: int, per_sample: int) -> list[float]:
    out = []
    for _ in range(repeats):
        ctx.dist.barrier() if ctx.ranks > 1 else None
        ctx.sync()
        t0 = time.perf_counter()
        for _ in range(per_sample):
            stepper.step()
        ctx.sync()  # the queued steps have run: host time is the device's
        out.append((time.perf_counter() - t0) / per_sample)
    return out


def _weights_agree(ctx: Any, net: Any) -> bool:
    """Bit-identical weights on every rank: each rank's per-tensor sums, max over ranks == min over ranks."""
    sums = [float(p.detach().double().sum()) for p in net.parameters()]
    hi = ctx.agree_max(sums)
    lo = [-v for v in ctx.agree_max([-s for s in sums])]
    return hi == lo


def run_scaling_rank(job: dict[str, Any], job_dir: Path | None) -> list[dict[str, Any]]:
    """One rank of one rank count: build, warm up, time ``repeats × per_sample`` steps, check."""
    import torch

    from gpukit.bench.collectives.worker import Ctx
    from gpukit.train.adam import Adam
    from gpukit.train.models import build_model
    from gpukit.train.step import Stepper

    ctx = Ctx(job_dir, job["device_name"])
    device = torch.device(ctx.device)
    cuda = device.type == "cuda"
    torch.manual_seed(1234)  # the same weights on every rank before DDP's broadcast, and from run to run
    net = build_model(job["model"], image_size=job["image_size"], num_classes=NUM_CLASSES).to(device)
    if cuda:
        net.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    amp = torch.bfloat16 if cuda and torch.cuda.is_bf16_supported() else None
    optimizer = Adam(net.parameters(), lr=1e-3, fused=cuda, capturable=cuda)  # the trainer's (train/parts.py)
    b, s = job["batch"], job["image_size"]
    steps = job["warmup"] + job["repeats"] * job["per_sample"]
    pool = 4 * b  # distinct images per rank; each step gathers its batch from them on the device
    images = torch.randint(0, 256, (pool, 3, s, s), dtype=torch.uint8, device=device)
    labels = torch.randint(0, NUM_CLASSES, (pool,), device=device)
    stepper = Stepper(net, optimizer, images, labels, steps, b, device, amp, cuda)
    if ctx.ranks > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        stepper.model = DDP(net, device_ids=[device.index] if cuda else None, gradient_as_bucket_view=True)
    g = torch.Generator().manual_seed(ctx.rank)
    perm = torch.randint(0, pool, (steps, b), generator=g)
    theta = torch.zeros(steps, b, 2, 3)
    theta[..., 0, 0] = theta[..., 1, 1] = 1.0  # identity: no augmentation, the same work every step
    stepper.load_epoch(perm, theta)
    ctx.beat(f"scaling {job['model']} × {ctx.ranks}: warm-up")
    stepper.model.train()
    for _ in range(job["warmup"]):
        stepper.step()
    ctx.sync()
    ctx.beat(f"scaling {job['model']} × {ctx.ranks}: timed steps")
    samples = ctx.agree_max(_samples(ctx, stepper, job["repeats"], job["per_sample"]))
    loss_sum, _hits = stepper.read_and_reset()
    ok = math.isfinite(loss_sum) and _weights_agree(ctx, net)
    bad = ctx.failing_ranks(ok)
    ctx.beat("done")
    if ctx.rank != 0:
        return []
    row = ScalingRow(job["model"], ctx.ranks, device.type, ctx.dist.get_backend() if ctx.ranks > 1 else None,
                     batch_per_rank=b, image_size=s, steps=job["repeats"] * job["per_sample"])  # fmt: skip
    if bad:
        row.status, row.check = "failed", False
        row.reason = f"rank(s) {bad}: loss not finite or weights differ between ranks after DDP steps"
        return [row.to_dict()]
    med = statistics.median(samples)
    row.check = True
    row.step_s = {"median": med, "min": min(samples), "max": max(samples)}
    row.images_per_s = ctx.ranks * b / med
    return [row.to_dict()]


@dataclass(frozen=True)
class ScalingRequest:
    """What `gpukit bench scaling` measures; None means the device's default (validated on creation)."""

    model: str = "resnet50"
    device: str = "cuda"
    max_ranks: int | None = None
    batch_arg: int | None = None
    image_size_arg: int | None = None
    steps_arg: int | None = None
    timeout_s: float = 300.0
    quick: bool = False

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ConfigError(f"unknown model '{self.model}'", hint=f"use --model {' or '.join(MODELS[:2])}")
        if self.device not in ("cpu", "cuda"):
            raise ConfigError(f"unknown device '{self.device}'", hint="use --device cpu or --device cuda")
        given = (("--max-gpus", self.max_ranks), ("--batch", self.batch_arg), ("--image-size", self.image_size_arg),
                 ("--steps", self.steps_arg))  # fmt: skip
        for flag, v in given:
            if v is not None and v < 1:
                raise ConfigError(f"{flag} must be at least 1, not {v}")
        if self.timeout_s <= 0:
            raise ConfigError(f"--timeout must be positive, not {self.timeout_s:g}")

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    def run(self) -> Run:
        """Measure it (``gpukit.bench.runner.execute`` calls this, as for any request)."""
        return run_scaling(self)

    @property
    def batch(self) -> int:
        return self.batch_arg or (64 if self.cuda else 8)

    @property
    def image_size(self) -> int:
        return self.image_size_arg or (224 if self.cuda else 64)

    @property
    def steps(self) -> int:
        return self.steps_arg or ((10 if self.quick else 30) if self.cuda else 6)

    @property
    def repeats(self) -> int:
        """Samples; each is ``per_sample`` steps timed together (one sync per sample, not per step)."""
        return 5 if self.steps >= 10 else max(1, min(3, self.steps))

    @property
    def per_sample(self) -> int:
        return max(1, self.steps // self.repeats)

    @property
    def warmup(self) -> int:
        return 5 if self.cuda else 1


def run_scaling(req: ScalingRequest) -> Run:
    """Every rank count 1 … N; a count that dies or hangs is a failed row naming the rank, the others go on."""
    if under_torchrun():
        raise ConfigError("bench scaling starts its own ranks (one set per rank count)", hint="run it without torchrun")
    t0 = time.perf_counter()
    gpus, why = device_state(req.device)
    top = req.max_ranks or (gpus if req.device == "cuda" else 2)
    if why is None and req.device == "cuda" and top > gpus:
        raise ConfigError(f"--max-gpus {top} but this machine has {gpus} GPU(s)", hint=f"use --max-gpus {gpus}")
    settings = {"model": req.model, "device": req.device, "max_ranks": top, "batch_per_rank": req.batch,
                "image_size": req.image_size, "timeout_s": req.timeout_s}  # fmt: skip
    started = datetime.now(UTC).isoformat(timespec="seconds")
    backend = "nccl" if req.device == "cuda" else "gloo"
    if why is not None:
        return multi_run("scaling", started, settings, [ScalingRow(req.model, n, req.device, backend,
                         status="unavailable", reason=why) for n in rank_counts(max(top, 1))], t0)  # fmt: skip
    job = {"kind": "scaling", "device": req.device, "model": req.model, "batch": req.batch,
           "image_size": req.image_size, "warmup": req.warmup, "repeats": req.repeats,
           "per_sample": req.per_sample}  # fmt: skip
    rows: list[Any] = []
    failure: str | None = None
    for n in rank_counts(top):
        result = launch(job, n, req.timeout_s)
        if result.failure is not None or not result.rows:
            reason = result.failure.message() if result.failure else "no result"
            rows.append(ScalingRow(req.model, n, req.device, backend, status="failed", reason=reason))
            failure = failure or reason
            continue
        rows.append(ScalingRow.from_dict(result.rows[0]))
    one = next((r for r in rows if r.ranks == 1 and r.ok and r.images_per_s), None)
    for r in rows:
        if one is not None and r.ok and r.images_per_s and one.images_per_s:
            r.efficiency = r.images_per_s / (r.ranks * one.images_per_s)
    return multi_run("scaling", started, settings, rows, t0, failure)
