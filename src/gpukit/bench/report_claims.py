"""The seed articles' claims, set beside what one run measured. A claim whose rows are missing says so — never a guess.

The claims (the seed articles): Mandelbrot CPU 4.07 s vs GPU 0.0046 s; a CNN trains 4.9–8.8× faster on a GPU; a small
ANN trained 1.2× faster on the CPU; GPU memory bandwidth dwarfs the CPU's (the article: 1.2 TB/s vs 100 GB/s);
tensor cores make matrix math fast; the GPU pulls ahead as data grows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpukit.bench.results import Result, Run
from gpukit.bench.sweep import Crossover

__all__ = ["NOT_MEASURED", "Claim", "seed_claims"]

NOT_MEASURED = "not measured in this run"
SEED_MANDELBROT_FRAME = "1536x1024x20"


@dataclass(frozen=True)
class Claim:
    key: str
    title: str
    seed: str  # what the article says
    measured: str | None  # what this run measured; None → NOT_MEASURED
    rows: str = ""  # which rows the figure comes from

    @property
    def text(self) -> str:
        return self.measured if self.measured is not None else NOT_MEASURED


def _ok(rows: Iterable[Result], workload: str) -> list[Result]:
    return [r for r in rows if r.workload == workload and r.ok and r.call_s]


def _best(rows: Iterable[Result], device: str) -> Result | None:
    side = [r for r in rows if (r.device == "cpu") == (device == "cpu")]
    return min(side, key=lambda r: r.call_s or math.inf) if side else None


def _pair_at(rows: Sequence[Result], label: str) -> tuple[Result, Result] | None:
    at = [r for r in rows if r.size == label]
    cpu, gpu = _best(at, "cpu"), _best(at, "cuda")
    return (cpu, gpu) if cpu and gpu else None


def _common_labels(rows: Sequence[Result], group: str | None = None) -> list[str]:
    """Size labels with both a CPU and a GPU row (optionally of one group), smallest first."""
    labels = {r.size for r in rows if group is None or (r.size_group or "") == group}
    both = [lab for lab in labels if _pair_at(rows, lab)]
    return sorted(both, key=lambda lab: _size_x(rows, lab))


def _size_x(rows: Sequence[Result], label: str) -> float:
    """The magnitude the engine stored for a size label (``Result.size_x``); 0 when it has none."""
    return next((r.size_x for r in rows if r.size == label and r.size_x is not None), 0.0)


def _s(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale or unit == "µs":
            return f"{seconds / scale:.3g} {unit}"
    return "n/a"  # pragma: no cover


def _mandelbrot(rows: Sequence[Result]) -> Claim:
    seed = "pure Python on the CPU 4.07 s; Numba CUDA 0.0046 s (a figure whose code never launched the kernel)"
    mb = _ok(rows, "mandelbrot")
    labels = _common_labels(mb)
    if not labels:
        return Claim(
            "mandelbrot",
            "Mandelbrot: CPU vs GPU",
            seed,
            _mandelbrot_one_side(mb),
            f"mandelbrot {SEED_MANDELBROT_FRAME}",
        )
    label = SEED_MANDELBROT_FRAME if SEED_MANDELBROT_FRAME in labels else labels[-1]
    pair = _pair_at(mb, label)
    assert pair is not None
    cpu, gpu = pair
    python = next((r for r in mb if r.size == label and r.backend == "python"), None)
    device = f" ({_s(gpu.kernel_median_s)} of it on the device, the rest Python's launch)" if gpu.launch_bound else ""
    parts = [
        f"frame {label}: best CPU {cpu.backend} {_s(cpu.call_s)}, best GPU {gpu.backend} {_s(gpu.call_s)} per frame"
        f" called from Python{device} (medians) → {cpu.call_s / gpu.call_s:.3g}×"  # type: ignore[operator]
    ]
    if python is not None:
        parts.append(f"pure Python {_s(python.kernel_median_s)}")
    if gpu.compile_s is not None:
        parts.append(f"the GPU's first call (JIT compile + run) took {_s(gpu.compile_s)}, reported apart")
    return Claim("mandelbrot", "Mandelbrot: CPU vs GPU", seed, "; ".join(parts), f"mandelbrot {label}")


def _mandelbrot_one_side(mb: Sequence[Result]) -> str | None:
    """What a run with rows on one side only measured at the seed's frame (a CPU machine's run), or None."""
    at = [r for r in mb if r.size == SEED_MANDELBROT_FRAME]
    if not at:
        return None
    python = next((r for r in at if r.backend == "python"), None)
    best = min(at, key=lambda r: r.call_s or math.inf)
    parts = [f"pure Python {_s(python.kernel_median_s)} at the seed's frame (the article: 4.07 s)"] if python else []
    if best is not python:
        parts.append(f"best {'CPU' if best.device == 'cpu' else 'GPU'} {best.backend} {_s(best.call_s)}")
    other = "GPU" if best.device == "cpu" else "CPU"
    return "; ".join(parts) + f"; no {other} row was measured, so the two sides are not compared"


def _one_side(rows: Sequence[Result], unit: str) -> str | None:
    """For a claim that needs both sides: what one side alone measured, or None when neither did."""
    if not rows:
        return None
    best = max(rows, key=lambda r: r.throughput or 0.0)
    side, other = ("CPU", "GPU") if best.device == "cpu" else ("GPU", "CPU")
    return (f"only {side} rows were measured (best {best.backend} at {best.size}: {best.throughput or 0:,.4g} "
            f"{unit}); no {other} row to compare with")  # fmt: skip


def _training(rows: Sequence[Result], workload: str, key: str, title: str, seed: str, batch: int) -> Claim:
    tr = _ok(rows, workload)
    labels = _common_labels(tr, "fp32") or _common_labels(tr)
    if not labels:
        return Claim(key, title, seed, _one_side(tr, "samples/s"), workload if tr else "")
    ratios = []
    for lab in labels:
        pair = _pair_at(tr, lab)
        assert pair is not None
        ratios.append((lab, pair[0].call_s / pair[1].call_s))  # type: ignore[operator]
    text = ", ".join(f"batch {_size_x(tr, lab):.0f}: {_speed(r)}" for lab, r in ratios)
    at = next((r for lab, r in ratios if _size_x(tr, lab) == batch), None)
    lead = f"at the seed's batch {batch}: {_speed(at)}; " if at is not None else ""
    return Claim(key, title, seed, f"{lead}per training step by batch size — {text}", f"{workload} {labels[0]}…")


def _speed(ratio: float) -> str:
    """A CPU/GPU time ratio in words: above 1 the GPU is that many times faster, below 1 the CPU is."""
    return f"GPU {ratio:.2f}× faster" if ratio >= 1 else f"CPU {1 / ratio:.2f}× faster"


def _bandwidth(run: Run) -> Claim:
    seed = "a GPU with 32 GB of HBM delivers up to 1.2 TB/s; a CPU about 100 GB/s"
    c = run.ceilings
    if c.d2d_copy_gbps and c.cpu_mem_gbps:
        text = (
            f"device-to-device copy {c.d2d_copy_gbps:,.0f} GB/s vs CPU memory {c.cpu_mem_gbps:,.0f} GB/s "
            f"→ {c.d2d_copy_gbps / c.cpu_mem_gbps:.1f}× (both measured in this run, bytes read + written)"
        )
        if c.spec_bandwidth_gbps:
            text += f"; the GPU's datasheet says {c.spec_bandwidth_gbps:,.0f} GB/s"
        return Claim("bandwidth", "Memory bandwidth: GPU vs CPU", seed, text, "ceilings")
    if c.cpu_mem_gbps or c.d2d_copy_gbps:
        if c.cpu_mem_gbps:
            side, other = f"CPU memory {c.cpu_mem_gbps:,.1f} GB/s", "GPU"
        else:
            side, other = f"GPU device-to-device copy {c.d2d_copy_gbps:,.0f} GB/s", "CPU"
        text = f"{side} (bytes read + written); no {other} figure to compare with in this run"
        return Claim("bandwidth", "Memory bandwidth: GPU vs CPU", seed, text, "ceilings")
    return Claim("bandwidth", "Memory bandwidth: GPU vs CPU", seed, None)


def _tensor_cores(rows: Sequence[Result]) -> Claim:
    seed = "tensor cores, built for the matrix math of deep learning, make it fast (qualitative)"
    gemm = [r for r in _ok(rows, "gemm") if r.device != "cpu" and r.tflops]
    by_n: dict[float, dict[str, Result]] = {}
    for r in gemm:
        n, group = r.size_x, r.size_group or ""
        if n is not None:
            best = by_n.setdefault(n, {}).get(group)
            if best is None or (r.tflops or 0) > (best.tflops or 0):
                by_n[n][group] = r
    both = [n for n, g in by_n.items() if "fp32" in g and ("bf16" in g or "fp16" in g)]
    if not both:
        return Claim("tensor_cores", "Tensor cores: GEMM bf16 vs fp32", seed, None)
    n = max(both)
    g = by_n[n]
    fp32 = g["fp32"]
    parts = [f"GEMM {n:.0f}³ on the GPU: fp32 (CUDA cores) {fp32.tflops:.1f} TFLOP/s"]
    for dt in ("tf32", "bf16", "fp16", "fp8"):
        if dt in g:
            parts.append(f"{dt} {g[dt].tflops:.1f} TFLOP/s ({(g[dt].tflops or 0) / (fp32.tflops or 1):.1f}×)")
    return Claim("tensor_cores", "Tensor cores: GEMM bf16 vs fp32", seed, "; ".join(parts), f"gemm {n:.0f}")


def _data_grows(found: Sequence[Crossover]) -> Claim:
    seed = "whatever the network, the GPU overtakes the CPU as the data grows"
    kernel = [c for c in found if c.mode == "kernel" and c.status != "insufficient"]
    if not kernel:
        return Claim("data_grows", "The GPU pulls ahead as data grows", seed, None)
    words = {
        "crosses": lambda c: f"GPU faster from {c.size_label}",
        "gpu_always": lambda c: f"GPU faster at every size measured (from {c.size_label})",
        "never": lambda c: "GPU not ahead up to the largest size measured",
    }
    parts = [f"{c.workload}{'/' + c.group if c.group else ''}: {words[c.status](c)}" for c in kernel]
    return Claim("data_grows", "The GPU pulls ahead as data grows", seed, "; ".join(parts), "crossover (kernel)")


def seed_claims(run: Run, found: Sequence[Crossover]) -> list[Claim]:
    """Every seed claim with what this run measured for it (``measured`` None where its rows are missing)."""
    rows = run.results
    return [
        _mandelbrot(rows),
        _training(rows, "cnn-train", "cnn", "CNN training: GPU vs CPU", "a CNN trains 4.9–8.8× faster on a GPU", 32),
        _training(
            rows,
            "mlp-train",
            "ann",
            "Small ANN training: CPU vs GPU",
            "a small ANN trained 1.2× faster on the CPU",
            32,
        ),
        _bandwidth(run),
        _tensor_cores(rows),
        _data_grows(found),
    ]
