"""Helpers shared by the element-wise workloads: size parsing, lazily-compiled Numba CPU kernels, estimates."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from gpukit.bench.workloads.base import Size
from gpukit.errors import ConfigError

__all__ = ["bytes_label", "calibrated_seconds_per_unit", "parse_elements", "vector_size"]

_UNITS = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 10**3, "mb": 10**6, "gb": 10**9}
DTYPES = ("float32", "int32", "float64")


def bytes_label(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return f"{nbytes}B"


def parse_elements(text: str, itemsize: int) -> int:
    """'1GiB' / '64MB' → elements of ``itemsize`` bytes per operand; a bare integer is an element count."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise ConfigError(f"bad size '{text}'", hint="use bytes per operand like 64MiB or 1GiB, or an element count")
    value, unit = float(m.group(1)), m.group(2).lower()
    n = int(value) if unit == "" else int(value * _UNITS[unit]) // itemsize
    if n < 1:
        raise ConfigError(f"size '{text}' holds no element", hint="use at least one element")
    return n


def vector_size(text: str, default_dtype: str = "float32", dtypes: tuple[str, ...] = DTYPES) -> Size:
    """'<amount>[:<dtype>]' → Size(label, n, dtype); e.g. '1GiB', '64MiB:int32', '1000000'."""
    amount, _, dtype = text.partition(":")
    dtype = dtype.strip() or default_dtype
    if dtype not in dtypes:
        raise ConfigError(f"unsupported dtype '{dtype}'", hint=f"use one of {', '.join(dtypes)}")
    itemsize = np.dtype(dtype).itemsize
    n = parse_elements(amount, itemsize)
    label = bytes_label(n * itemsize) if not amount.strip().isdigit() else str(n)
    return Size(f"{label}:{dtype}", {"n": n, "dtype": dtype}, magnitude=float(n * itemsize), group=dtype)


def random_array(rng: np.random.Generator, n: int, dtype: str) -> np.ndarray:
    """Fresh random values, never zeros: floats in [0.5, 1.5), integers in [-2^20, 2^20] (sums cannot overflow).
    The shift is done in place: ``rng.random(n) + 0.5`` allocated the array twice, and fresh memory is what a
    256 MiB input costs most on a 2-core VM (page faults: ~2.5 s per GiB there)."""
    if np.dtype(dtype).kind == "f":
        out = rng.random(n, dtype=np.float32 if dtype == "float32" else np.float64)
        out += 0.5
        return out.astype(dtype, copy=False)
    return rng.integers(-(2**20), 2**20, size=n, dtype=dtype)


_CALIBRATION: dict[str, float] = {}
# Calibration calls per key, and the time after which no further one is made. Noise on a shared machine only ever
# adds time (another process takes the core, a thread pool wakes late), so the fastest of a few calls is the
# estimate: one stalled call, extrapolated, once made a torch-cpu Mandelbrot frame "26 s" that measured 1 s.
CALIBRATION_CALLS = (3, 10)  # at least, at most
CALIBRATION_MIN_S = 0.1  # fast calls repeat until they add up to this (a stall is a few ms: one clean call is enough)
CALIBRATION_CAP_S = 1.0


def calibrated_seconds_per_unit(
    key: str, run_small: Callable[[], Any], units_small: float, warm: Callable[[], Any] | None = None
) -> float:
    """Seconds per unit of work of a slow implementation, from the fastest of several timed calls at a small size
    (cached per key): at least ``CALIBRATION_CALLS[0]`` and on until they add up to ``CALIBRATION_MIN_S``, at most
    ``CALIBRATION_CALLS[1]``; only two once they took ``CALIBRATION_CAP_S`` (one call alone is no estimate).
    ``warm`` runs first, untimed, so imports and first-call costs do not inflate the estimate."""
    if key not in _CALIBRATION:
        if warm is not None:
            warm()
        best, spent = math.inf, 0.0
        fewest, most = CALIBRATION_CALLS
        for n in range(1, most + 1):
            t0 = time.perf_counter()
            run_small()
            took = time.perf_counter() - t0
            best, spent = min(best, took), spent + took
            if (n >= 2 and spent >= CALIBRATION_CAP_S) or (n >= fewest and spent >= CALIBRATION_MIN_S):
                break
        _CALIBRATION[key] = best / units_small
    return _CALIBRATION[key]
