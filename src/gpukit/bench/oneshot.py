"""Measuring your own function in one call: :func:`compare`, on the same engine as `gpukit bench`.

    from gpukit.bench import compare
    rows = compare(
        {"numpy": lambda a, b: a + b, "torch-cuda": lambda a, b: a + b},
        inputs=lambda rng: {"a": rng.standard_normal(1 << 24, dtype=np.float32), "b": ...},
        reference=lambda a, b: a.astype(np.float64) + b,
    )
    for r in rows: print(r.backend, r.status, r.kernel_median_s, r.gbps, r.reason)

Each key names the backend the function runs on (``numpy``, ``torch-cpu``, ``torch-cuda``, ``cupy``, ``numba-cpu``
…; or give ``(backend, fn)`` to name the row yourself). gpukit moves the host ``inputs`` to each backend's device,
calls ``fn(**inputs)`` and checks what it returns — or, when ``fn`` takes an ``out`` parameter, what it wrote into
gpukit's poisoned ``out`` buffer (no copy is timed then: a returning function pays one copy into the buffer per
call) — against ``reference`` (computed once, on the host) before anything is timed and again after the timed
calls; inputs must come back unchanged. The rows are :class:`~gpukit.bench.Result` s: compile (first call),
transfers and kernel time apart, samples and spread, throughput, speedup over the best CPU row.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from gpukit.bench.harness import CALL_TIMEOUT_S
from gpukit.bench.results import Result
from gpukit.bench.workloads.base import Implementation, Size, Workload, relative_error
from gpukit.errors import ConfigError

__all__ = ["compare", "default_tolerance"]

Inputs = Mapping[str, Any] | Callable[[np.random.Generator], Mapping[str, Any]]
_TOL = {"f2": 1e-2, "f4": 1e-5, "f8": 1e-12}


def default_tolerance(inputs: Mapping[str, Any]) -> float:
    """Relative L2 error allowed when none is given: from the lowest float precision among the inputs (float16:
    1e-2, float32: 1e-5, float64: 1e-12); 0 (exact) for integers only."""
    kinds = [np.asarray(v).dtype for v in inputs.values() if isinstance(v, np.ndarray)]
    floats = [d for d in kinds if d.kind == "f"]
    if not floats:
        return 0.0
    return _TOL.get(f"f{min(d.itemsize for d in floats)}", 1e-5)


def _into(out: Any, value: Any) -> None:
    """Copy a returned result into gpukit's output buffer, whatever array library both are from."""
    if hasattr(out, "copy_"):  # torch
        import torch

        out.copy_(value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value)))
    elif hasattr(out, "copy_to_device"):  # numba device array
        out.copy_to_device(value)
    elif isinstance(out, np.ndarray):
        np.copyto(out, np.asarray(value), casting="unsafe")
    else:  # cupy and other array-API arrays
        out[...] = value


def _adapt(fn: Callable[..., Any]) -> Callable[[Mapping[str, Any], Any, Size], None]:
    try:
        takes_out = "out" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        takes_out = False

    def impl(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
        if takes_out:
            fn(**inputs, out=out)
            return
        result = fn(**inputs)
        if result is None:
            raise TypeError("the function returned None: return the result, or take an `out` parameter")
        _into(out, result)

    return impl


def compare(
    implementations: Mapping[str, Callable[..., Any] | tuple[str, Callable[..., Any]]],
    *,
    inputs: Inputs,
    reference: Callable[..., Any] | np.ndarray,
    tolerance: float | None = None,
    nbytes: float | None = None,
    flops: float | None = None,
    name: str = "compare",
    out_dtype: str | None = None,
    repeat: int | None = None,
    budget_s: float = 10.0,
    call_timeout_s: float | None = CALL_TIMEOUT_S,
    seed: int | None = None,
    ceilings: bool = False,
    noise_target: float | None = None,
    max_time_s: float | None = None,
    cache: str = "auto",
    called_once: bool = False,
) -> list[Result]:
    """Measure each function on its backend; every row checked against ``reference``.

    ``inputs``: host arrays by argument name, or ``f(rng) -> that dict`` for fresh random inputs (gpukit's seeded
    generator). ``reference``: the expected output, or a function of the host inputs returning it. Throughput is
    GB/s of ``nbytes`` per call (default: every input read once, the output written once), or TFLOP/s when
    ``flops`` is given. ``tolerance``: the largest relative L2 error (default :func:`default_tolerance`).
    ``out_dtype``: the output buffer's dtype (default: the inputs' float type for a float reference, else the
    reference's).
    ``noise_target``/``max_time_s``/``cache``: as :func:`gpukit.bench.run`; ``called_once``: your code calls the
    function once between other work, not in a loop (``cache="auto"`` then measures it cold when its working set fits
    in the last-level cache).
    ``ceilings``: also measure the machine's ceilings, for % of ceiling (slower). Returns the rows, failed and
    skipped ones included (with their reason)."""
    if not implementations:
        raise ConfigError("compare() needs at least one function", hint='give {"numpy": f, "torch-cuda": g}')
    rng_probe = np.random.default_rng(0 if seed is None else seed)
    probe = dict(inputs(rng_probe) if callable(inputs) else inputs)
    ref_probe = np.asarray(reference(**probe) if callable(reference) else reference)
    floats = [v.dtype for v in probe.values() if isinstance(v, np.ndarray) and v.dtype.kind == "f"]
    if out_dtype is None and ref_probe.dtype.kind == "f" and floats:
        out_dtype = str(np.result_type(*floats))  # a float64 reference of float32 inputs: the output is float32
    shape, dtype = ref_probe.shape, out_dtype or str(ref_probe.dtype)
    tol = default_tolerance(probe) if tolerance is None else float(tolerance)
    moved = (
        nbytes
        if nbytes is not None
        else float(
            sum(v.nbytes for v in probe.values() if isinstance(v, np.ndarray))
            + ref_probe.size * np.dtype(dtype).itemsize
        )
    )
    label = f"{moved / 2**20:.4g}MiB" if flops is None else f"{flops:.4g}flop"

    def make_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
        return dict(inputs(rng) if callable(inputs) else inputs)

    def make_reference(size: Size, host: Mapping[str, Any]) -> np.ndarray:
        return np.asarray(reference(**host) if callable(reference) else reference)

    def check(out: np.ndarray, ref: np.ndarray, size: Size) -> tuple[bool, float]:
        err = relative_error(out, ref)
        return err <= tol, err

    impls: dict[str, Implementation] = {}
    for key, value in implementations.items():
        backend, fn = value if isinstance(value, tuple) else (key, value)
        impls[key] = Implementation(backend, _adapt(fn))
    unit = "tflops" if flops is not None else "gbps"
    size = Size(label, {}, magnitude=float(flops if flops is not None else moved))
    workload = Workload(
        name=name,
        description=f"{name} (gpukit.bench.compare)",
        unit=unit,
        sizes=lambda quick: [size],
        parse_size=lambda text: size,
        make_inputs=make_inputs,
        reference=make_reference,
        check=check,
        output_spec=lambda s: (tuple(shape), dtype),
        flops=lambda s: float(flops or 0.0),
        bytes=lambda s: float(moved),
        amount=lambda s, ref: float(flops if flops is not None else moved),
        implementations=impls,
        tolerance=lambda s: tol,
        called_once=called_once,
    )
    from gpukit.bench import run

    result = run(workload, repeat=repeat, budget_s=budget_s, call_timeout_s=call_timeout_s, seed=seed,
                 ceilings=ceilings, noise_target=noise_target, max_time_s=max_time_s, cache=cache)  # fmt: skip
    return result.results
