"""The workload interface: a workload is data plus a few functions.

A :class:`Workload` knows its sizes, how to build fresh random host inputs (NumPy arrays), an independent reference
(float64 on the CPU where cheap), how to check an output against it, how much work a size is (``flops``, ``bytes``,
and ``amount`` — the quantity its throughput unit counts), and one :class:`Implementation` per backend.

An implementation is called as ``fn(inputs, out, size)``: ``inputs`` is the dict from ``make_inputs`` already moved
to the backend's device (``backend.to_device`` per array; non-array values pass through), ``out`` a poisoned output
buffer of ``output_spec(size)`` on that device. It writes into ``out`` and returns None; on a GPU it may return
before the kernel finishes (the harness synchronizes). Adding a workload is one module plus one line in
``workloads/__init__.py``'s ``WORKLOADS`` registry.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from gpukit.bench.results import Result

__all__ = ["Implementation", "Size", "Workload", "label_magnitude", "relative_error", "same_bits"]


_UNITS = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "kib": 2.0**10, "mib": 2.0**20, "gib": 2.0**30,
          "kb": 1e3, "mb": 1e6, "gb": 1e9, "b": 1.0}  # fmt: skip
_NUM = re.compile(r"^(\d+(?:\.\d+)?)([a-z]*)$")


def label_magnitude(label: str) -> tuple[float | None, str]:
    """A size label's magnitude and group: ``"4096:bf16"`` → (4096, "bf16"), ``"1GiB"`` → (2**30, ""),
    ``"1536x1024x20"`` → (31457280, ""); (None, group) when no number can be read. Only for sizes whose workload
    gives no magnitude (and rows saved before results carried one)."""
    head, _, group = label.replace(":", "-").partition("-")
    value = 1.0
    for part in head.lower().split("x"):
        m = _NUM.match(part.strip())
        if not m or m.group(2) not in _UNITS:
            return None, group
        value *= float(m.group(1)) * _UNITS[m.group(2)]
    return value, group


@dataclass(frozen=True)
class Size:
    """One problem size. ``label`` is what tables and JSON show; ``params`` what the functions read (read-only:
    an implementation cannot change the size the next one is given). ``magnitude`` is the number on the size axis
    (bytes per operand, n of an n³ GEMM, batch, pixels × iterations; None: not on an axis) and ``group`` the
    variant sizes are compared within (the dtype, or ""); both are stored on every result, so sweeps, crossovers
    and reports read them instead of parsing labels."""

    label: str
    params: Mapping[str, Any] = field(default_factory=dict)
    magnitude: float | None = None
    group: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        if self.magnitude is None and not self.group:  # a workload that gives neither: read its label, once, here
            x, group = label_magnitude(self.label)
            object.__setattr__(self, "magnitude", x)
            object.__setattr__(self, "group", group)

    def __getitem__(self, key: str) -> Any:
        return self.params[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.params.get(key, default)

    def with_params(self, **extra: Any) -> Size:
        """A copy with ``extra`` added to its parameters (the harness adds ``compute_dtype`` this way)."""
        return replace(self, params={**self.params, **extra})


@dataclass(frozen=True)
class Implementation:
    """One way to compute the workload.

    ``backend`` names the backend (registry key in ``backends/__init__.py``) that moves data and times it.
    ``supports(size)`` returns None when this size can run, else the reason it cannot (e.g. "int32 not supported").
    ``estimate_s(size)`` (optional) predicts the seconds of one call, so a slow implementation (pure Python) is
    refused with the estimate instead of running for minutes. ``prepare(host_inputs, size)`` (optional) replaces the
    backend's ``to_device`` for the inputs and is timed as the host→device transfer (the bandwidth workload uses it to
    keep a pinned host buffer as the "input"). ``dtype`` is the precision the implementation computes in when it
    is not the size's own (mandelbrot: float32 / float64); the harness passes it to ``check`` as
    ``size["compute_dtype"]`` so the tolerance follows it. ``amount`` overrides the workload's
    (a host→device copy moves each byte once, a device copy reads and writes it); ``ceiling`` names the
    :class:`~gpukit.bench.results.Ceilings` field this row's % of ceiling is against, overriding the workload's
    kind. ``note`` says what the variant is (shown in docs).
    """

    backend: str
    fn: Callable[[Mapping[str, Any], Any, Size], None]
    supports: Callable[[Size], str | None] | None = None
    estimate_s: Callable[[Size], float] | None = None
    prepare: Callable[[Mapping[str, Any], Size], dict[str, Any]] | None = None
    dtype: str | None = None
    amount: Callable[[Size, np.ndarray], float] | None = None
    ceiling: str | None = None
    note: str = ""


@dataclass
class Workload:
    """A measurable piece of work.

    ``unit`` is one of ``gbps`` / ``giter_per_s`` / ``tflops`` / ``samples_per_s``; ``amount(size, ref)`` returns
    the base quantity it counts (bytes, iterations, flops, samples) for one call, so throughput =
    amount / kernel time / scale. ``ceiling`` says which measured ceiling applies: "memory" (compared with the
    measured copy bandwidth of the device) or None (no honest ceiling: % of ceiling is null).
    ``implementations`` maps the row name (``numpy``, ``cupy-cuda-c``, ``cupy-cuda-c-naive`` …) to an
    :class:`Implementation`.
    """

    name: str
    description: str
    unit: str
    sizes: Callable[[bool], list[Size]]  # quick → default sizes
    parse_size: Callable[[str], Size]  # "--size" text → Size; raise ConfigError when malformed
    make_inputs: Callable[[Size, np.random.Generator], dict[str, Any]]
    reference: Callable[[Size, Mapping[str, Any]], np.ndarray]
    check: Callable[[np.ndarray, np.ndarray, Size], tuple[bool, float]]  # (ok, relative error)
    output_spec: Callable[[Size], tuple[tuple[int, ...], str]]  # (shape, numpy dtype name)
    flops: Callable[[Size], float]
    bytes: Callable[[Size], float]
    amount: Callable[[Size, np.ndarray], float]
    implementations: dict[str, Implementation] = field(default_factory=dict)
    ceiling: str | None = "memory"
    dtype_of: Callable[[Size], str | None] = lambda size: size.get("dtype")
    # The timed calls write ``out`` too, and it is checked after them (False: only the first call's output means
    # something — a training step publishes its first gradient; later steps move the weights).
    checks_timed_calls: bool = True
    # For workloads whose implementations write ``out`` on their first call only, so a cast is never timed (gemm's
    # fp16/bf16/fp8/int8 rows): resets that, so one more call after the timed ones writes ``out`` and is checked.
    republish: Callable[[Mapping[str, Any]], None] | None = None
    # analyse's per-workload hook: fills % of ceiling (or other figures) across the finished rows of one run
    annotate: Callable[[Sequence[Result]], None] | None = None
    # A user calls it once between other work (not in a loop): --cache auto measures it cold where its working set
    # fits in the last-level cache (bench/conditions.py)
    called_once: bool = False

    tolerance: Callable[[Size], float | None] = lambda size: TOLERANCE.get(
        str(size.get("compute_dtype") or size.get("dtype"))
    )


# Relative-error tolerance per dtype (MEASURING.md): exact for integers; float32 well under 1e-3.
TOLERANCE: dict[str, float] = {"int32": 0.0, "int64": 0.0, "float32": 1e-6, "float64": 1e-12}


# Checks walk their arrays in chunks of this many elements: whole-array float64 temporaries (a copy of the output,
# the difference, an isfinite mask) were 2.1 bytes of fresh memory per byte checked, three times a row, and fresh
# memory costs more than the arithmetic on a small VM (page faults).
CHECK_CHUNK = 1 << 20
_CHUNK_BYTES = 16 << 20


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    """‖out − ref‖₂ / ‖ref‖₂ in float64; NaN or a shape mismatch gives +inf (never passes). Computed chunk by chunk
    (:data:`CHECK_CHUNK` elements), the sums of squares in float64 as ``np.linalg.norm`` forms them."""
    if out.shape != ref.shape:
        return float("inf")
    o = np.asarray(out).reshape(-1)
    r = np.asarray(ref).reshape(-1)
    num = den = 0.0
    step = min(CHECK_CHUNK, o.size) or 1
    buf_o, buf_r = np.empty(step), np.empty(step)
    for i in range(0, o.size, step):
        m = min(step, o.size - i)
        oc, rc = buf_o[:m], buf_r[:m]
        np.copyto(oc, o[i : i + m], casting="unsafe")
        np.copyto(rc, r[i : i + m], casting="unsafe")
        if not np.isfinite(oc).all():
            return float("inf")
        den += float(np.dot(rc, rc))
        np.subtract(oc, rc, out=oc)
        num += float(np.dot(oc, oc))
    denom, diff = np.sqrt(den), np.sqrt(num)
    if denom == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return float(diff / denom)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays hold exactly the same bytes (NaN payloads and signed zeros included), compared in 16 MiB
    chunks: ``np.array_equal(..., equal_nan=True)`` on a 256 MiB input took 7.5 s on a loaded 2-core machine
    (isnan masks and boolean-indexed copies of both arrays) against 0.1 s here."""
    if a.shape != b.shape:
        return False
    if a.dtype != b.dtype:  # read back in another dtype: compare values
        return bool(np.array_equal(a, b))
    x = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    y = np.ascontiguousarray(b).reshape(-1).view(np.uint8)
    # compared as 8-byte words where the length allows (a third faster than byte by byte), the tail as bytes
    whole = x.size - x.size % 8
    xw, yw = x[:whole].view(np.uint64), y[:whole].view(np.uint64)
    step = _CHUNK_BYTES // 8
    words = all(np.array_equal(xw[i : i + step], yw[i : i + step]) for i in range(0, xw.size, step))
    return words and bool(np.array_equal(x[whole:], y[whole:]))


@dataclass(frozen=True)
class RelativeErrorCheck:
    """The check of the element-wise workloads: a verdict on the relative L2 error alone — exact for integer dtypes,
    ≤ ``TOLERANCE[dtype]`` for floats. Because the error is all it reads, the harness can compute it where the output
    lives (:meth:`~gpukit.bench.backends.base.Backend.relative_error_on_device`) instead of reading the output back."""

    def verdict(self, err: float, size: Size) -> tuple[bool, float]:
        dtype = str(size.get("dtype", "float32"))
        if dtype.startswith("int"):  # the error is 0 exactly when every element is equal
            ok = err == 0.0
            return ok, (0.0 if ok else max(err, 1e-300) if math.isfinite(err) else err)
        return err <= TOLERANCE.get(dtype, 1e-6), err

    def __call__(self, out: np.ndarray, ref: np.ndarray, size: Size) -> tuple[bool, float]:
        return self.verdict(relative_error(out, ref), size)


elementwise_check = RelativeErrorCheck()
