"""The served model: loaded once, from safetensors, through `gpukit.train`'s own loader (nothing is unpickled), and
run on uint8 batches exactly as `gpukit predict` runs them.

On CUDA the batch sizes the batcher produces are padded up to a few fixed sizes (powers of two up to ``max_batch``)
and every one is warmed at start; with ``cuda_graphs`` each is captured as a CUDA graph, so a batch costs one graph
launch instead of a kernel launch per layer. ``cudnn.benchmark`` stays off: it would autotune every new shape under
a dynamic batcher (MEASURING.md rule 9).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["ModelInfo", "ModelRunner", "label_of", "model_info"]


@dataclass(frozen=True)
class ModelInfo:
    """What the HTTP side needs to know about the model, read from the checkpoint's JSON (no torch needed)."""

    model: str
    classes: tuple[str, ...]
    image_size: int
    source: str


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


def _buckets(max_batch: int) -> list[int]:
    sizes = [1]
    while sizes[-1] < max_batch:
        sizes.append(min(sizes[-1] * 2, max_batch))
    return sizes


class ModelRunner:
    """``runner(batch)``: uint8 (B,3,S,S) numpy → float32 (B, classes) probabilities numpy. One caller at a time."""

    def __init__(
        self, path: Path, device: str = "auto", max_batch: int = 64, amp: str = "off", cuda_graphs: bool = True
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
        self.buckets = _buckets(max_batch)
        self.graphs: dict[int, Any] = {}
        self.cuda_graphs = cuda_graphs and self.cuda
        self.warmup_s = 0.0
        torch.backends.cudnn.benchmark = False  # never autotune per new batch shape
        if self.cuda:
            torch.backends.cudnn.allow_tf32 = True
            torch.backends.cuda.matmul.allow_tf32 = True
            if loaded.model.startswith("resnet"):
                self.net = self.net.to(memory_format=torch.channels_last)
            s = loaded.image_size
            self.pinned = torch.empty((max_batch, 3, s, s), dtype=torch.uint8).pin_memory()
            self.static_in = torch.zeros((max_batch, 3, s, s), dtype=torch.uint8, device=self.device)
            self._warm()

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
        import time

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
                    pool = None  # one memory pool for all sizes, captured largest first: they never run at once
                    for b in sorted(self.buckets, reverse=True):
                        graph = torch.cuda.CUDAGraph()
                        with torch.cuda.graph(graph, pool=pool):
                            out = self._forward(self.static_in[:b])
                        pool = graph.pool()
                        self.graphs[b] = (graph, out)
                except Exception:  # a model that cannot be captured runs eagerly on the warmed shapes
                    self.graphs.clear()
                    self.cuda_graphs = False
            torch.cuda.synchronize()
        self.warmup_s = time.perf_counter() - t0

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        import torch

        n = len(batch)
        if not self.cuda:
            with torch.inference_mode():
                return self._forward(torch.from_numpy(batch)).numpy()
        self.pinned[:n].numpy()[...] = batch
        with torch.inference_mode():
            self.static_in[:n].copy_(self.pinned[:n], non_blocking=True)  # rows n..bucket keep old data: ignored
            return self._run_static(n)

    def _run_static(self, n: int) -> np.ndarray:
        """Forward the first ``n`` rows of ``static_in`` (graph replay of the smallest bucket that holds them)."""
        bucket = next(b for b in self.buckets if b >= n)
        if bucket in self.graphs:
            graph, out = self.graphs[bucket]
            graph.replay()
        else:
            out = self._forward(self.static_in[:bucket])
        return np.asarray(out[:n].float().cpu().numpy())  # the one sync point: results back to the host

    def warm_batch_decoder(self) -> None:
        """Run the batch JPEG decoder once (``--decode nvjpeg``), so the first request does not pay for its import."""
        import io

        from PIL import Image

        buf = io.BytesIO()
        Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(buf, "JPEG")
        self.run_items([buf.getvalue()])

    def run_items(self, items: list[np.ndarray | bytes]) -> tuple[np.ndarray, list[str | None]]:
        """A batch of decoded images and JPEG bytes (``--decode nvjpeg``): the JPEGs are decoded together on the
        model's device (nvJPEG through torchvision on CUDA; torchvision's CPU decoder on a CPU device) and resized to
        S×S there (bilinear, antialiased), so the numbers can differ slightly from Pillow's. A JPEG that fails to
        decode fails alone: its row is zeros and its error says ``corrupt: …``."""
        import torch
        import torch.nn.functional as F
        from torchvision.io import ImageReadMode, decode_jpeg

        s = self.info.image_size
        errors: list[str | None] = [None] * len(items)
        jpeg_at = [i for i, x in enumerate(items) if isinstance(x, bytes)]
        datas = [torch.frombuffer(bytearray(items[i]), dtype=torch.uint8) for i in jpeg_at]  # type: ignore[arg-type]
        device = self.device if self.cuda else "cpu"
        try:
            decoded: list[Any] = list(decode_jpeg(datas, mode=ImageReadMode.RGB, device=device))
        except Exception:  # one bad file fails the batched call: decode one by one to find it
            decoded = []
            for d in datas:
                try:
                    decoded.append(decode_jpeg(d, mode=ImageReadMode.RGB, device=device))
                except Exception as exc:
                    decoded.append(exc)
        x = torch.zeros((len(items), 3, s, s), dtype=torch.uint8, device=device)
        with torch.inference_mode():
            for i, img in zip(jpeg_at, decoded, strict=True):
                if isinstance(img, Exception):
                    errors[i] = f"corrupt: JPEG could not be decoded: {img}"
                    continue
                if tuple(img.shape[-2:]) != (s, s):
                    img = F.interpolate(img[None].float(), size=(s, s), mode="bilinear", antialias=True)
                    img = img.round_().clamp_(0, 255).to(torch.uint8)[0]
                x[i] = img
            for i, item in enumerate(items):
                if isinstance(item, np.ndarray):
                    x[i] = torch.from_numpy(item).to(device, non_blocking=True)
            if not self.cuda:
                return self._forward(x).numpy(), errors
            self.static_in[: len(items)].copy_(x)
            return self._run_static(len(items)), errors

    def gpu_memory_bytes(self) -> int | None:
        if not self.cuda:
            return None
        import torch

        return int(torch.cuda.memory_allocated(self.device))
