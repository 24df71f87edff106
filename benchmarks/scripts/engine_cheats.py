"""Cheats a suspicious user tried on gpukit's measuring engine (issue 11 §1), as custom workloads: every one of
them must come back ``failed`` with its reason, on the CPU (NumPy, PyTorch CPU) and on the GPU (PyTorch CUDA).

    gpukit bench --workload benchmarks/scripts/engine_cheats.py:FIRST_CALL_ONLY --size 256MiB
    gpukit bench -w benchmarks/scripts/engine_cheats.py:FIRST_CALL_ONLY -w ...:MUTATES_INPUT ... --json

Each is a float32 vector add (out = a + b, 12 bytes moved per element) whose implementation cheats one way:

========================  =====================================================================================
FIRST_CALL_ONLY           right on the first call (which gpukit used to be the only one checked), nothing after
MUTATES_INPUT             right every time (from a copy it kept), but zeroes its input ``a`` after computing
BACKGROUND_THREAD         first call right; later calls return at once and a thread writes ``out`` 0.3 s later
ONCE_PER_BUFFER           computes into each output buffer once (remembered by its address), then returns at once
HANGS                     first calls right; timed calls sleep for an hour (``--call-timeout`` must stop it)
CALLS_EXIT                calls ``sys.exit(3)`` (gpukit must not exit with the run unsaved)
IMPOSSIBLE                right, but claims 10,000× the bytes it moves (a figure above the datasheet peak)
WRITES_SIZE               right, then tries to change ``size.params`` for whoever comes next
NEGATIVE_AMOUNT           right, but its ``amount`` of work per call is −1
NO_TOLERANCE_CHECK        its own check says no and gives no tolerance
NAMED_LIKE_A_BUILTIN      called "vector-add", like gpukit's own (it would get the built-in's inputs)
========================  =====================================================================================
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from gpukit.bench import Implementation, Size, Workload
from gpukit.bench.workloads.base import relative_error
from gpukit.errors import ConfigError

Fn = Callable[[Mapping[str, Any], Any, Size], None]


def parse_size(text: str) -> Size:
    units = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
    for unit, scale in units.items():
        head = text[: -len(unit)]
        if text.endswith(unit) and head.isdigit() and int(head) > 0:
            n = int(head) * scale // 4
            return Size(text, {"n": n}, magnitude=float(n * 4))
    raise ConfigError(f"bad size '{text}'", hint="use e.g. 16MiB or 256MiB (bytes per operand)")


def _add(a: Any, b: Any, out: Any) -> None:
    if hasattr(out, "copy_"):  # a torch tensor, CPU or CUDA
        import torch

        torch.add(a, b, out=out)
    else:
        np.add(a, b, out=out)


def honest(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    _add(inputs["a"], inputs["b"], out)


def first_call_only() -> Fn:
    calls = [0]

    def fn(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
        calls[0] += 1
        if calls[0] == 1:
            _add(inputs["a"], inputs["b"], out)

    return fn


def mutates_input() -> Fn:
    kept: dict[int, Any] = {}

    def fn(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
        a = inputs["a"]
        if id(a) not in kept:
            kept[id(a)] = a.clone() if hasattr(a, "clone") else a.copy()
        _add(kept[id(a)], inputs["b"], out)
        a[:] = 0  # every later call would now compute 0 + b, if it read a

    return fn


def background_thread() -> Fn:
    calls = [0]
    running = threading.Event()

    def late(inputs: Mapping[str, Any], out: Any) -> None:
        time.sleep(0.3)
        _add(inputs["a"], inputs["b"], out)
        running.clear()

    def fn(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
        calls[0] += 1
        if calls[0] <= 2:  # the first call and the sizing call: honest
            _add(inputs["a"], inputs["b"], out)
        elif not running.is_set():
            running.set()
            threading.Thread(target=late, args=(inputs, out), daemon=True).start()

    return fn


def once_per_buffer() -> Fn:
    written: set[int] = set()

    def fn(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
        address = out.data_ptr() if hasattr(out, "data_ptr") else out.ctypes.data
        if address not in written:  # a result cache keyed by the output buffer
            written.add(address)
            _add(inputs["a"], inputs["b"], out)

    return fn


def hangs() -> Fn:
    calls = [0]

    def fn(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
        calls[0] += 1
        if calls[0] > 2:
            time.sleep(3600)
        _add(inputs["a"], inputs["b"], out)

    return fn


def calls_exit(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    sys.exit(3)


def writes_size(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    _add(inputs["a"], inputs["b"], out)
    size.params["n"] = 1  # type: ignore[index]  # read-only: this raises


def _cheat(name: str, make: Callable[[], Fn], **overrides: Any) -> Workload:
    """The vector add, with ``make()`` (a fresh cheating function per implementation) on NumPy, PyTorch CPU and
    PyTorch CUDA."""

    def check(out: np.ndarray, ref: np.ndarray, size: Size) -> tuple[bool, float]:
        err = relative_error(out, ref)
        return err <= 1e-6, err

    w = Workload(
        name=name,
        description=f"a cheating vector add: {name}",
        unit="gbps",
        sizes=lambda quick: [parse_size("16MiB" if quick else "256MiB")],
        parse_size=parse_size,
        make_inputs=lambda size, rng: {
            "a": rng.standard_normal(size["n"], dtype=np.float32),
            "b": rng.standard_normal(size["n"], dtype=np.float32),
        },
        reference=lambda size, inputs: np.add(inputs["a"], inputs["b"]),  # float32 is exact enough for a + b
        check=check,
        tolerance=lambda size: 1e-6,
        output_spec=lambda size: ((size["n"],), "float32"),
        flops=lambda size: float(size["n"]),
        bytes=lambda size: 12.0 * size["n"],
        amount=lambda size, ref: 12.0 * size["n"],
        implementations={
            "numpy": Implementation("numpy", make()),
            "torch-cpu": Implementation("torch-cpu", make()),
            "torch-cuda": Implementation("torch-cuda", make()),
        },
    )
    return replace(w, **overrides)


FIRST_CALL_ONLY = _cheat("cheat-first-call-only", first_call_only)
MUTATES_INPUT = _cheat("cheat-mutates-input", mutates_input)
BACKGROUND_THREAD = _cheat("cheat-background-thread", background_thread)
ONCE_PER_BUFFER = _cheat("cheat-once-per-buffer", once_per_buffer)
HANGS = _cheat("cheat-hangs", hangs)
CALLS_EXIT = _cheat("cheat-calls-exit", lambda: calls_exit)
IMPOSSIBLE = _cheat("cheat-impossible", lambda: honest, amount=lambda size, ref: 12.0 * size["n"] * 1e4)
WRITES_SIZE = _cheat("cheat-writes-size", lambda: writes_size)
NEGATIVE_AMOUNT = _cheat("cheat-negative-amount", lambda: honest, amount=lambda size, ref: -1.0)
NO_TOLERANCE_CHECK = _cheat(
    "cheat-no-tolerance", lambda: honest, check=lambda out, ref, size: (False, 0.25), tolerance=lambda size: None
)
NAMED_LIKE_A_BUILTIN = _cheat("vector-add", lambda: honest)

ALL = {
    "FIRST_CALL_ONLY": "right on the first call, wrong after",
    "MUTATES_INPUT": "changed its input",
    "BACKGROUND_THREAD": "right on the first call, wrong after",
    "ONCE_PER_BUFFER": "right on the first call, wrong after",
    "HANGS": "timed out",
    "CALLS_EXIT": "sys.exit(3)",
    "IMPOSSIBLE": "impossible",
    "WRITES_SIZE": "TypeError",
    "NEGATIVE_AMOUNT": "amount of work per call is -1.0",
    "NO_TOLERANCE_CHECK": "the workload's check said no",
}  # each cheat → what its failed rows' reason must say (NAMED_LIKE_A_BUILTIN is refused before measuring)
