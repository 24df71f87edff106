"""Hand-written kernels for the bench's seed workloads: vector add, SAXPY and the Mandelbrot set.

One module per way of writing them, each imported on its own so that a missing backend costs only itself:

- :mod:`.cpu` — the seed's pure-Python loops, Numba ``parallel=True`` on the CPU, and the float64/float32 numpy
  references every other kernel is checked against (``mandelbrot_reference``).
- :mod:`.cuda_c` — CUDA C (``kernels.cu``) compiled at run time through ``cupy.RawModule``.
- :mod:`.numba_cuda` — Numba CUDA kernels, including the straightforward float32 Mandelbrot kernel
  (``mandelbrot_naive``) that the optimised ones are compared with.
- :mod:`.triton_kernels` — Triton kernels on torch tensors.

This package imports none of cupy, numba.cuda or triton; each module imports its backend lazily and raises
:class:`gpukit.errors.BackendUnavailable` (with the install command) when it is missing.

Mandelbrot convention shared by every kernel here: pixel (row r, column c) of an image ``height × width`` maps to
``x = x0 + c·(x1 − x0)/width``, ``y = y0 + r·(y1 − y0)/height``; its count is the number of completed iterations
``n < max_iter`` after which ``|z|² > 4`` first holds (``z₀ = 0``, ``z ← z² + c``), or ``max_iter`` if never.
"""

from __future__ import annotations

from gpukit.bench.kernels.frame import Frame, frame_f32

__all__ = ["Frame", "frame_f32"]
