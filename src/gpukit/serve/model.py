"""The served model: loaded once, from safetensors, through `gpukit.train`'s own loader (nothing is unpickled), and
run on uint8 batches exactly as `gpukit predict` runs them.

On CUDA the batch sizes the batcher produces are padded up to a few fixed sizes (powers of two up to 16, then
multiples of 16, at most ``GRAPH_ROWS``) and every one is warmed at start; with ``cuda_graphs`` each is captured as a
CUDA graph, so a batch costs one graph launch instead of a kernel launch per layer. A batch larger than ``GRAPH_ROWS``
runs as several forward passes of at most that many rows, one after the other on the same stream: the next batch's
JPEG decode runs beside the forward, and beside one pass over 128 or 256 rows it waited behind the forward's long
kernels (ResNet-50 on an H200: preparing 128 JPEGs took 7.8 ms alone and 18.4 ms beside a batch-128 forward, 256 took
17.6 and 119 ms; beside a batch-64 forward 4.9 ms against 4.4: ``benchmarks/scripts/serve_pipeline_probe.py``,
2026-12-01). Measured again over HTTP once the results were copied through pinned memory, 128 rows a pass served no
more than 64 and the preparation grew beside the longer passes (``benchmarks/serve-rows_h100_2026-12-06.md``).
``cudnn.benchmark`` stays off: it would autotune every new shape under a dynamic batcher (MEASURING.md rule 9).
On a CPU device eager batches are not padded (compiled ones are: ``_padded``): ``warm`` runs the same sizes there,
and a batch of another size pays its first call once, which costs far less than padding every call (ResNet-18,
64 px, 2 threads: a first batch of 5 took 14.3 ms, then 10.6-11.0; padded to 8 it would take 14.2 ms every time,
and 17 padded to 32 took 42.1 ms against 19.9-21.4; 2026-12-02). On a CPU device the forward pass gets half the
cores' threads: with all of them, its OpenMP regions stall whenever one thread loses its core to the event loop or a
decode thread (seed CNN, batch 1, 2 cores beside a flood of refused uploads: 120-310 ms per forward pass with 2
threads, 0.5-2 ms with 1; 2026-12-01).

A batch is served in two steps that the batcher runs on two threads, so they overlap: ``prepare`` (decode, resize,
stage; ``gpukit.serve.staging``, on its own stream) and ``execute`` (on ``exec_stream``: a batch of one pass is copied
from the staging slot into the graph's static input, replayed, and its output copied to the host; a larger one is
copied out of the slot first, then per pass: into the static input, replay, keep the rows, and all of them to the
host). Events order the two streams; ``execute``'s wait for its results is its one sync point. Every torch call
releases the GIL and takes it back, and beside the process's pipe and reply threads each taking back can wait: the
one-pass path made five such calls where it made seven (on an H200 the seed CNN's two stages took 0.29 and 0.33 ms
alone at batch 33, and twice that in the server: benchmarks/serve-onepass_h200_2026-12-05.md), and six since its
results come back as below.

The results come back through a pinned host buffer: an asynchronous copy, then a wait on ``exec_stream``
(``_to_host``). ``.cpu()`` into pageable memory, as before, is a synchronous copy, and nvJPEG's decode of the next
batch in the preparing thread could not finish while it waited for the forward pass. Preparing 64 JPEGs beside
back-to-back forward passes took as long as one pass (ResNet-50 on an H100: 5.5 ms, against 2.4-3.6 idle and
4.1-4.2 with the pinned buffer); with idle gaps of 0.5-2 ms between passes, one pass plus its gap. Over HTTP
ResNet-50 compiled served 13,236-13,911 req/s against 11,966-12,703 in turns on one host, its batches prepared in
3.8-4.0 against 5.8-6.1 ms (benchmarks/serve-host-copy_h100_2026-12-06.md).

That wait naps first (``GpuWait``): a forward pass expected to run long (ResNet-50: 3-5 ms a pass) is slept through
but for its last ``SPIN_TAIL_S``, and only that tail is spun on (``stream.synchronize()`` spins a core). Spinning
through the whole pass kept the executing thread 0.6-0.8 of a CPU busy; on hosts whose virtual CPUs share physical
cores the spin slows whatever runs beside it, nvJPEG's preparation of the next batch among them. A pass shorter than
``SPIN_TAIL_S + MIN_NAP_S`` (the seed CNN: 0.4 ms) is spun on as before: a sleeping thread's wake-up costs up to a
millisecond on a slow virtual host, and sleeping through the whole wait cost the seed CNN's stages 1.4 ms each
(``benchmarks/serve-knobs_h200_2026-12-04.md``). Over HTTP, ResNet-50 on an H100 in turns: the model process used
1.26-1.31 cores with the nap against 1.69-1.74, and served as much within the noise (means +1.5 % and +2.0 % over
three rounds each; ``benchmarks/serve-nap_h100_2026-12-06.md``).
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gpukit.hardware.cpu import cpu_budget
from gpukit.serve.engines import engine_net
from gpukit.serve.staging import BatchDecoder, Staged, Stager

if TYPE_CHECKING:
    import torch

__all__ = ["GRAPH_ROWS", "GpuWait", "ModelInfo", "ModelRunner", "cpu_threads", "label_of", "model_info"]

GRAPH_ROWS = 64  # the most rows one forward pass takes on CUDA (see above)
SPIN_TAIL_S = 0.001  # the end of an expected GPU wait that is spun on, not slept (a late wake-up fits in it)
MIN_NAP_S = 0.001  # no shorter nap: it would save less CPU than its wake-up costs


@dataclass(frozen=True)
class ModelInfo:
    """What the HTTP side needs to know about the model, read from the checkpoint's JSON (no torch needed)."""

    model: str
    classes: tuple[str, ...]
    image_size: int
    source: str
    engine: dict[str, Any] | None = None  # the chosen engine and its gate (``EngineChoice.to_dict``), once chosen


def model_info(path: Path) -> ModelInfo:
    from gpukit.errors import ConfigError
    from gpukit.train.predict import read_meta, resolve_checkpoint

    meta = read_meta(path)
    try:
        return ModelInfo(
            str(meta["model"]), tuple(meta["classes"]), int(meta["image_size"]), str(resolve_checkpoint(path))
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{path} lacks {exc}", hint="give a checkpoint written by `gpukit train`") from exc


def label_of(row: list[float], classes: tuple[str, ...]) -> tuple[str, float]:
    """`gpukit predict`'s rule: two classes → ≥ 0.5 is the second one (ties go to it); else the most probable."""
    best = max(range(len(row)), key=row.__getitem__)
    if len(row) == 2:
        best = 1 if row[1] >= 0.5 else 0
    return classes[best], row[best]


def cpu_threads() -> int:
    """The threads a CPU device's forward pass gets: half the CPUs this process may use (see the module's docstring)."""
    return max(1, cpu_budget() // 2)


def _buckets(max_batch: int) -> list[int]:
    """The padded batch sizes: powers of two up to 16, then every multiple of 16, up to ``max_batch``. (With powers of
    two only, a batch of 40 ran 64 rows and one of 100 ran 64 + 64; now they run 48 and 64 + 48.)"""
    sizes = [1]
    while sizes[-1] < max_batch:
        step = sizes[-1] if sizes[-1] < 16 else 16
        sizes.append(min(sizes[-1] + step, max_batch))
    return sizes


class GpuWait:
    """How long the executing thread may sleep before it spins on its stream: the expected time of the batch's work
    (by ``key``, the rows it runs), from its queueing to the end of the wait, less what has passed and ``tail_s``.
    The expectation follows a faster batch at once, and a slower one by a fifth of the difference, at most a tenth
    of itself, a batch: a slow outlier (a pause of the process) cannot make the next naps outlast the work, and too
    short an expectation only spins longer. A nap ends ``tail_s`` before the expected end, so a batch that finished
    early is seen at most ``tail_s`` (plus the wake-up) too late, and the expectation then falls to what was seen:
    it converges on the work's real time. ``ModelRunner.warm`` forgets what its first runs took."""

    def __init__(self, tail_s: float = SPIN_TAIL_S, min_nap_s: float = MIN_NAP_S) -> None:
        self.tail_s, self.min_nap_s = tail_s, min_nap_s
        self.expected_s: dict[Hashable, float] = {}
        self.naps = 0

    def nap_s(self, key: Hashable, since_queued_s: float) -> float:
        """Seconds to sleep now (0: spin at once)."""
        nap = self.expected_s.get(key, 0.0) - since_queued_s - self.tail_s
        if nap < self.min_nap_s:
            return 0.0
        self.naps += 1
        return nap

    def observe(self, key: Hashable, took_s: float) -> None:
        """The seconds from the batch's queueing to the end of its wait."""
        before = self.expected_s.get(key)
        if before is None or took_s < before:
            self.expected_s[key] = took_s
        else:
            self.expected_s[key] = before + min(0.2 * (took_s - before), 0.1 * before)


class ModelRunner:
    """``runner(batch)``: uint8 (B,3,S,S) numpy → float32 (B, classes) probabilities numpy. One caller at a time."""

    def __init__(
        self,
        path: Path,
        device: str = "auto",
        max_batch: int = 64,
        amp: str = "off",
        cuda_graphs: bool = True,
        engine: str = "eager",
    ) -> None:
        import torch

        from gpukit.train.distributed import resolve_device
        from gpukit.train.predict import load_model

        self.device = resolve_device(device)
        loaded = load_model(path, self.device)  # safetensors only, verified against its recorded hash
        self.info = ModelInfo(loaded.model, tuple(loaded.classes), loaded.image_size, str(loaded.source))
        self.net = loaded.net
        for p in self.net.parameters():
            p.requires_grad_(False)  # inference only; also keeps autocast from caching weight copies
        self.max_batch = max_batch
        self.cuda = self.device.startswith("cuda")
        self.amp = amp if self.cuda else "off"
        self.pass_rows = min(max_batch, GRAPH_ROWS) if self.cuda else max_batch
        self.buckets = _buckets(self.pass_rows)
        self.graphs: dict[int, Any] = {}
        self.cuda_graphs = cuda_graphs and self.cuda
        self.engine = engine  # gpukit.serve.engines; a compiled one is specialised to the bucket sizes: CPU pads too
        self.warmup_s = 0.0
        self.warmed: list[int] = []  # the batch sizes run once through prepare + execute (``warm``)
        torch.backends.cudnn.benchmark = False  # never autotune per new batch shape
        if not self.cuda:  # half the cores for the forward pass, the rest for HTTP and decoding (see above)
            torch.set_num_threads(cpu_threads())
        if self.cuda:
            torch.backends.cudnn.allow_tf32 = True
            torch.backends.cuda.matmul.allow_tf32 = True
            if loaded.model.startswith("resnet"):
                self.net = self.net.to(memory_format=torch.channels_last)
        self.net = engine_net(self.net, engine, self.cuda, len(self.buckets), Path(loaded.source))
        if self.cuda:
            s = loaded.image_size
            self.exec_stream = torch.cuda.Stream(device=self.device)
            self.batch_in = torch.zeros((max_batch, 3, s, s), dtype=torch.uint8, device=self.device)
            self.static_in = torch.zeros((self.pass_rows, 3, s, s), dtype=torch.uint8, device=self.device)
            # probabilities, one column per class (also for a one-logit binary model: predict.probabilities)
            self.result = torch.zeros((max_batch, len(loaded.classes)), dtype=torch.float32, device=self.device)
            self.result_host = torch.zeros((max_batch, len(loaded.classes)), dtype=torch.float32).pin_memory()
            self.gpu_wait = GpuWait()
            self._warm()
        self.stager = Stager(loaded.image_size, max_batch, self.device)

    def warm(self) -> list[int]:
        """Run every padded batch size (on CUDA also ``max_batch``, several passes) once through ``prepare`` +
        ``execute``, the path requests take: a server is ready only after this, so no request pays a first call at
        those sizes (cuDNN's per-shape set-up, a first graph replay, oneDNN's primitives on the CPU, where other
        sizes are not padded: see the module's docstring)."""
        t0 = time.perf_counter()
        s = self.info.image_size
        sizes = sorted(set(self.buckets) | ({self.max_batch} if self.cuda else set()))
        for b in sizes:
            probs, _ = self.execute(self.prepare([np.zeros((3, s, s), np.uint8)] * b))
            if probs.shape[0] != b:
                raise RuntimeError(f"warm-up of batch {b} returned {probs.shape[0]} rows")
            self.warmed.append(b)
        if self.cuda:
            self.gpu_wait.expected_s.clear()  # a first run of a size is slow: no nap is planned on it
        self.warmup_s += time.perf_counter() - t0
        return self.warmed

    def _forward(self, x_u8: torch.Tensor) -> torch.Tensor:
        import torch

        from gpukit.train.augment import to_float
        from gpukit.train.predict import probabilities

        x = to_float(x_u8)
        if self.cuda and self.info.model.startswith("resnet"):
            x = x.contiguous(memory_format=torch.channels_last)
        if self.amp == "bf16":
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # no cache: CUDA graphs
                return probabilities(self.net(x))
        return probabilities(self.net(x))

    def _warm(self) -> None:
        import torch

        t0 = time.perf_counter()
        with torch.inference_mode():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for b in self.buckets:  # every shape the batcher can produce, once or thrice before capture
                    for _ in range(3 if self.cuda_graphs else 1):
                        self._forward(self.static_in[:b])
            torch.cuda.current_stream().wait_stream(side)
            if self.cuda_graphs:
                try:
                    self.capture()
                except Exception:  # a model that cannot be captured runs eagerly on the warmed shapes
                    self.graphs.clear()
                    self.cuda_graphs = False
            torch.cuda.synchronize()
        self.warmup_s = time.perf_counter() - t0

    def capture(self, stream: torch.cuda.Stream | None = None) -> None:
        """One CUDA graph per padded batch size, captured on ``stream`` (None: a side stream of torch's), after the
        sizes were warmed. One memory pool for all sizes, captured largest first: they never run at once."""
        import torch

        self.graphs.clear()
        pool = None
        for b in sorted(self.buckets, reverse=True):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool, stream=stream):
                out = self._forward(self.static_in[:b])
            pool = graph.pool()
            self.graphs[b] = (graph, out)

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        """A stacked uint8 batch, prepared and run at once (the batcher overlaps the two: ``prepare``/``execute``)."""
        probs, _ = self.execute(self.prepare(list(batch)))
        return probs.copy()  # execute's array is a view of a buffer that the next call rewrites

    def run_items(self, items: list[np.ndarray | bytes]) -> tuple[np.ndarray, list[str | None]]:
        """``execute(prepare(items))``: decoded images and JPEG bytes (``--decode nvjpeg``) in one batch (the
        probabilities copied out of the runner's buffer)."""
        probs, errors = self.execute(self.prepare(items))
        return probs.copy(), errors

    def prepare(self, items: list[np.ndarray | bytes]) -> Staged:
        """Stage a batch on the model's device (its own CUDA stream; see ``gpukit.serve.staging``). JPEGs are decoded
        together there and resized to S×S (bilinear, antialiased), so the numbers can differ slightly from Pillow's.
        A JPEG that fails to decode fails alone: its row is zeros and its error says ``corrupt: …``."""
        return self.stager.prepare(items)

    def execute(self, staged: Staged) -> tuple[np.ndarray, list[str | None]]:
        """Run a prepared batch: copy into the graph's static input, replay, results to the host. On CUDA all of it
        is on ``exec_stream``; the graph replays on the stream current at replay, so that one."""
        import torch

        n = staged.n
        with torch.inference_mode():
            if not self.cuda:
                return self._forward(self._padded(staged.x[:n]))[:n].numpy(), staged.errors
            queued = time.perf_counter()
            with torch.cuda.stream(self.exec_stream):
                self.exec_stream.wait_event(staged.slot.ready)  # the staging stream's writes are done
                if n <= self.pass_rows:  # one pass: from the slot into the graph's input, its output to the host
                    self.static_in[:n].copy_(staged.x[:n])
                    staged.slot.free.record(self.exec_stream)
                    return self._to_host(self._run_static(n), n, queued), staged.errors
                self.batch_in[:n].copy_(staged.x[:n])
                staged.slot.free.record(self.exec_stream)  # the slot may be rewritten once this copy has run
                for start in range(0, n, self.pass_rows):  # stream order keeps static_in and out safe to reuse
                    rows = min(self.pass_rows, n - start)
                    self.static_in[:rows].copy_(self.batch_in[start : start + rows])  # rows after keep old data
                    out = self._run_static(rows)
                    self.result[start : start + rows].copy_(out[:rows])
                return self._to_host(self.result, n, queued), staged.errors

    def _to_host(self, out: torch.Tensor, n: int, queued: float) -> np.ndarray:
        """``out[:n]`` (on the device) copied into the pinned ``result_host`` and waited for on ``exec_stream``: the
        one sync point of ``execute``, a nap and then a spin (``GpuWait``). The array is a view of that buffer,
        rewritten by the next ``execute`` (the batcher copies it at once). Not ``.cpu()``: see the module's
        docstring."""
        self.result_host[:n].copy_(out[:n], non_blocking=True)
        key = self._rows_run(n)
        nap = self.gpu_wait.nap_s(key, time.perf_counter() - queued)
        if nap:
            time.sleep(nap)
        self.exec_stream.synchronize()
        self.gpu_wait.observe(key, time.perf_counter() - queued)
        return self.result_host[:n].numpy()  # type: ignore[no-any-return]

    def _rows_run(self, n: int) -> int:
        """The rows the forward passes of a batch of ``n`` run, padding included (what its GPU time goes with)."""
        whole, rest = divmod(n, self.pass_rows)
        return whole * self.pass_rows + (next(b for b in self.buckets if b >= rest) if rest else 0)

    def _padded(self, x: torch.Tensor) -> torch.Tensor:
        """A CPU batch as it runs: unpadded on eager (see the module's docstring), padded with zero rows up to its
        bucket on a compiled engine, which would otherwise compile again (seconds) for every new batch size."""
        import torch

        n = int(x.shape[0])
        if self.engine == "eager" or n in self.buckets:
            return x
        bucket = next(b for b in self.buckets if b >= n)
        return torch.cat([x, x.new_zeros((bucket - n, *x.shape[1:]))])

    def run_rows(self, n: int) -> None:
        """One forward pass of ``n`` rows (a bucket size) of whatever the static input holds, for timing the model
        alone; on CUDA queued on ``exec_stream`` (the caller synchronizes)."""
        import torch

        with torch.inference_mode():
            if not self.cuda:
                s = self.info.image_size
                self._forward(torch.zeros((n, 3, s, s), dtype=torch.uint8))
                return
            with torch.cuda.stream(self.exec_stream):
                self._run_static(n)

    def _run_static(self, n: int) -> torch.Tensor:
        """Forward the first ``n`` rows of ``static_in`` (graph replay of the smallest bucket that holds them), on
        the current stream (``exec_stream`` when called from ``execute``); the bucket's output, on the device."""
        bucket = next(b for b in self.buckets if b >= n)
        if bucket in self.graphs:
            graph, out = self.graphs[bucket]
            graph.replay()
            return out  # type: ignore[no-any-return]
        return self._forward(self.static_in[:bucket])

    def warm_batch_decoder(self, kind: str = "nvjpeg") -> None:
        """Decode JPEGs per batch with ``kind`` (one of ``gpukit.serve.config.BATCH_DECODERS``) and run it once, so
        the first request does not pay for its import and set-up."""
        import io

        from PIL import Image

        self.stager.decoder = BatchDecoder(kind, self.device, self.stager.stream)

        buf = io.BytesIO()
        Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(buf, "JPEG")
        self.run_items([buf.getvalue()])

    def gpu_memory_bytes(self) -> int | None:
        if not self.cuda:
            return None
        import torch

        return int(torch.cuda.memory_allocated(self.device))
