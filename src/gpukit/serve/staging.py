"""Batch preparation for the model process: JPEG bytes and decoded images → one uint8 (n,3,S,S) batch, on its own
CUDA stream so that it overlaps the previous batch's forward pass.

Launches per batch, not per image: the JPEGs are decoded in one batched call (``--decode nvjpeg``: nvJPEG through
torchvision on CUDA, Pillow one by one on a CPU device, since torchvision's CPU image decoding is deprecated;
``--decode nvimgcodec``: nvImageCodec's hybrid backend, Huffman decoding on host threads and the rest on the GPU;
``nvimgcodec-hw``: its hardware JPEG engines; on a CPU device both take its libjpeg-turbo backend; see
``BatchDecoder``; on an H200 nvJPEG served the most, benchmarks/serve-decode_h200_2026-12-02.md); images that
already are S×S are ``torch.stack``-ed straight into the staging buffer (one kernel); the others are resized in
groups of one input shape (one ``interpolate`` per group, bilinear, antialiased, as before); pre-decoded uint8
images go through one pinned host buffer and one copy.

Stream rules (CUDA), kept by ``Stager.prepare`` and the runner's ``execute``:
- all of it runs on ``stream`` (torchvision's decoder orders its own stream after the current one with events);
- a slot's device buffer is written only after the executor recorded ``slot.free`` (its copy into the graph's static
  input has run): ``stream.wait_event(slot.free)``;
- ``prepare`` ends with ``stream.synchronize()``: it blocks only the preparing thread, never the GPU or the
  executor, and it makes the slot's pinned host buffer safe to rewrite next time and ``prep_s`` an honest time;
  ``slot.ready`` is recorded all the same and the executor waits on it before reading the slot. (It spins a core
  while it waits. Blocking-sync events, which sleep, were tried for this wait and the results' one; on one H200
  host each of the seed CNN's two stages then took about 1.4 ms more: benchmarks/serve-knobs_h200_2026-12-04.md.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpukit.hardware.cpu import cpu_budget
from gpukit.serve.config import BATCH_DECODERS

__all__ = ["PINNED_JPEG_BYTES", "BatchDecoder", "Staged", "Stager"]

PINNED_JPEG_BYTES = 64 << 20  # at most this much pinned host memory holds a batch's JPEG bytes for nvJPEG


@dataclass
class Staged:
    """A prepared batch: rows ``x[:n]`` (on the model's device), and the error of each row that failed alone."""

    x: Any  # torch.Tensor uint8 (≥n, 3, S, S)
    n: int
    errors: list[str | None]
    slot: Any = None  # the _Slot it lives in (CUDA), None on CPU
    shapes: dict[str, int] = field(default_factory=dict)  # how the rows were made: "stacked", "resized", "pixels"


class _Slot:
    def __init__(self, max_batch: int, size: int, device: str) -> None:
        import torch

        self.x = torch.zeros((max_batch, 3, size, size), dtype=torch.uint8, device=device)
        self.pinned = torch.empty((max_batch, 3, size, size), dtype=torch.uint8).pin_memory()
        self.ready = torch.cuda.Event()
        self.free = torch.cuda.Event()
        self.free.record()  # nothing reads it yet


class Stager:
    """``prepare(items)`` → ``Staged``. One caller at a time (the batcher's preparing thread)."""

    def __init__(self, size: int, max_batch: int, device: str, slots: int = 3) -> None:
        import torch

        self.size = size
        self.device = device
        self.cuda = device.startswith("cuda")
        self.max_batch = max_batch
        # 3 slots: one being read by the executor, one handed off, one being written; the events make fewer safe too
        self.slots = [_Slot(max_batch, size, device) for _ in range(slots)] if self.cuda else []
        self.stream = torch.cuda.Stream(device=device) if self.cuda else None
        self._next = 0
        self.decoder = BatchDecoder("nvjpeg", device, self.stream)  # ModelRunner.warm_batch_decoder may replace it

    def prepare(self, items: list[np.ndarray | bytes]) -> Staged:
        import torch

        n = len(items)
        if n > self.max_batch:
            raise ValueError(f"{n} images in one batch; at most {self.max_batch}")
        if not self.cuda:
            x = torch.zeros((n, 3, self.size, self.size), dtype=torch.uint8)
            with torch.inference_mode():
                errors, shapes = self._fill(x, items, None)
            return Staged(x, n, errors, None, shapes)
        slot, stream = self.slots[self._next], self.stream
        assert stream is not None
        self._next = (self._next + 1) % len(self.slots)
        with torch.inference_mode(), torch.cuda.stream(stream):
            stream.wait_event(slot.free)  # the executor's copy out of this slot has run
            errors, shapes = self._fill(slot.x, items, slot.pinned)
            slot.ready.record(stream)
        stream.synchronize()  # this thread only: the batch is complete, the pinned buffer reusable
        return Staged(slot.x, n, errors, slot, shapes)

    def _fill(self, x: Any, items: list[np.ndarray | bytes], pinned: Any) -> tuple[list[str | None], dict[str, int]]:
        import torch

        s, n = self.size, len(items)
        errors: list[str | None] = [None] * n
        groups: dict[tuple[int, int], tuple[list[int], list[Any]]] = {}
        jpeg_at = [i for i, item in enumerate(items) if isinstance(item, bytes)]
        for i, img in zip(jpeg_at, self._decode([items[i] for i in jpeg_at]), strict=True):  # type: ignore[misc]
            if isinstance(img, Exception):
                errors[i] = f"corrupt: JPEG could not be decoded: {img}"
                continue
            rows, imgs = groups.setdefault((int(img.shape[-2]), int(img.shape[-1])), ([], []))
            rows.append(i)
            imgs.append(img)
        shapes = {"stacked": 0, "resized": 0, "pixels": 0}
        for (h, w), (rows, imgs) in groups.items():
            if (h, w) == (s, s) and rows == list(range(n)):  # the common case: one kernel straight into the slot
                torch.stack(imgs, out=x[:n])
            else:
                batch = torch.stack(imgs)
                if (h, w) != (s, s):  # one resize per input shape, as gpukit predict's size (bilinear, antialiased)
                    batch = torch.nn.functional.interpolate(batch.float(), size=(s, s), mode="bilinear", antialias=True)
                    batch = batch.round_().clamp_(0, 255).to(torch.uint8)
                _put(x, rows, batch)
            shapes["resized" if (h, w) != (s, s) else "stacked"] += len(rows)
        pixel_at = [i for i, item in enumerate(items) if isinstance(item, np.ndarray)]
        if pixel_at:
            shapes["pixels"] = len(pixel_at)
            k = len(pixel_at)
            if pinned is None:
                host = torch.from_numpy(np.stack([items[i] for i in pixel_at]))  # type: ignore[misc]
            else:  # one pinned staging copy, then one host→device copy on this stream, into the rows (``_put``)
                np.stack([items[i] for i in pixel_at], out=pinned[:k].numpy())  # type: ignore[misc]
                host = pinned[:k]
            _put(x, pixel_at, host)
        for i, error in enumerate(errors):
            if error is not None:
                x[i].zero_()  # a failed row is zeros (its result is discarded); rare, one small kernel each
        return errors, shapes

    def _decode(self, datas: list[bytes]) -> list[Any]:
        """JPEG bytes → uint8 (3, H, W) tensors on the device, or the exception of each one that failed."""
        return self.decoder(datas) if datas else []


class BatchDecoder:
    """A batch of JPEG bytes → a list of uint8 (3, H, W) tensors on ``device``, or the exception of each image that
    failed (it fails alone). ``kind`` is a ``BATCH_DECODERS`` value. All GPU work is ordered on ``stream``."""

    def __init__(self, kind: str, device: str, stream: Any = None) -> None:
        if kind not in BATCH_DECODERS:
            raise ValueError(f"decoder {kind!r}: one of {', '.join(BATCH_DECODERS)}")
        self.kind, self.device, self.stream = kind, device, stream
        self.cuda = device.startswith("cuda")
        self._nv: Any = None
        # nvImageCodec's images of the last batch, decoded into again: a new image per decode allocates device
        # memory and freeing one synchronises the device, which then waits behind the forward pass. Reusing them is
        # safe because ``Stager.prepare`` has copied them into its slot and synchronised before the next decode.
        self._images: list[Any] = []
        # torch views of those images' device buffers, by (pointer, shape, strides): making a view costs 11-22 µs an
        # image (CUDA array interface / DLPack), a look-up 2 µs; a reused image keeps its buffer, so its view too
        self._views: dict[tuple[Any, ...], Any] = {}
        self._bitstreams: Any = None  # nvjpeg on CUDA: the batch's JPEG bytes, in pinned host memory (see _pinned)
        if kind != "nvjpeg":
            self._nv = self._nvimgcodec()

    def _nvimgcodec(self) -> Any:
        from nvidia import nvimgcodec as nv

        if not self.cuda:  # libjpeg-turbo on host threads: the same pixels as Pillow
            backends, device_id = [nv.Backend(nv.CPU_ONLY)], nv.NVIMGCODEC_DEVICE_CPU_ONLY
        else:
            first = nv.HYBRID_CPU_GPU if self.kind == "nvimgcodec" else nv.HW_GPU_ONLY
            backends = [nv.Backend(first), nv.Backend(nv.GPU_ONLY), nv.Backend(nv.CPU_ONLY)]  # later: what it can't
            index = self.device.partition(":")[2]
            device_id = int(index) if index else _current_device()
        threads = max(1, cpu_budget() // 2)  # the HTTP processes need the other half
        decoder = nv.Decoder(device_id=device_id, max_num_cpu_threads=threads, backends=backends)
        params = nv.DecodeParams(  # as Pillow's convert("RGB"): no EXIF rotation, grey → three equal channels
            apply_exif_orientation=False, color_spec=nv.ColorSpec.SRGB, sample_format=nv.SampleFormat.I_RGB
        )
        return nv, decoder, params

    def __call__(self, datas: list[bytes]) -> list[Any]:
        if self.kind == "nvjpeg":
            if not self.cuda:
                return [_pil_decode(d) for d in datas]
            return _torchvision_decode(self._pinned(datas), self.device)
        import torch

        nv, decoder, params = self._nv
        stream = self.stream.cuda_stream if self.stream is not None else 0
        srcs = [nv.CodeStream(d) for d in datas]
        reuse = self._images[: len(srcs)] if len(self._images) >= len(srcs) else None
        images = decoder.decode(srcs, images=reuse, params=params, cuda_stream=stream)
        if reuse is None:  # a batch larger than any before: its images are the pool from now on
            self._images = [img for img in images if img is not None]
        if len(self._views) > 2 * len(self._images) + 8:
            self._views.clear()
        out: list[Any] = []
        for img in images:
            if img is None:
                out.append(ValueError("nvImageCodec could not decode it"))
                continue
            if img.buffer_kind == nv.ImageBufferKind.STRIDED_HOST:  # the CPU backend's (H, W, 3)
                t = torch.from_numpy(np.asarray(img))
                t = t.to(self.device) if self.cuda else t
            else:
                t = self._view(img, stream)
            out.append(t.permute(2, 0, 1))
        return out

    def _pinned(self, datas: list[bytes]) -> list[Any]:
        """The JPEGs as CPU uint8 tensors for nvJPEG: slices of one pinned host buffer, reused every batch.

        nvJPEG copies each bitstream to the device, and a copy from pinned memory is queued where one from pageable
        memory (one ``torch.frombuffer`` per JPEG, as before) is first staged through a driver buffer. Measured on an
        H200 with ResNet-50 bf16 and 224 px JPEGs, no HTTP, in one lease
        (``benchmarks/serve-pinned_h200_2026-12-04.md``): preparing 128 took 5.0 against 6.8 ms, and the batcher
        ran 10,582 against 9,246 img/s at max batch 128 (9,837 against 8,773 at 64). Reuse is safe: torchvision's
        decode synchronises its stream before it returns. A batch over ``PINNED_JPEG_BYTES`` in all takes pageable
        tensors, so a few huge JPEGs do not pin their size for good."""
        import torch

        total = sum(map(len, datas))
        if total > PINNED_JPEG_BYTES:
            return [torch.frombuffer(bytearray(d), dtype=torch.uint8) for d in datas]
        if self._bitstreams is None or self._bitstreams.numel() < total:
            size = min(PINNED_JPEG_BYTES, max(total, 2 * (0 if self._bitstreams is None else self._bitstreams.numel())))
            self._bitstreams = torch.empty(size, dtype=torch.uint8).pin_memory()
        # one copy of them all and one split into views: per JPEG a numpy slice and a torch slice cost more
        np.concatenate([np.frombuffer(d, np.uint8) for d in datas], out=self._bitstreams.numpy()[:total])
        return list(self._bitstreams[:total].split([len(d) for d in datas]))

    def _view(self, img: Any, stream: int) -> Any:
        """A torch (H, W, 3) view of a decoded image on the device. The decode was ordered on ``stream``; when its
        array interface says the image is ready on that stream, later work there sees it and a cached view serves;
        otherwise ``as_tensor`` synchronises as the interface asks."""
        import torch

        cai = img.__cuda_array_interface__
        if cai.get("stream") not in (stream, None):
            return torch.as_tensor(img, device=self.device)
        key = (cai["data"][0], cai["shape"], cai.get("strides"), cai["typestr"])
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = torch.as_tensor(img, device=self.device)
        return view


def _current_device() -> int:
    import torch

    return int(torch.cuda.current_device())


def _torchvision_decode(tensors: list[Any], device: str) -> list[Any]:
    """CPU uint8 tensors of JPEG bytes → uint8 (3, H, W) tensors on ``device`` (nvJPEG), or each one's exception."""
    from torchvision.io import ImageReadMode, decode_jpeg

    try:
        return list(decode_jpeg(tensors, mode=ImageReadMode.RGB, device=device))
    except Exception:  # one bad file fails the batched call: decode one by one to find it
        out: list[Any] = []
        for t in tensors:
            try:
                out.append(decode_jpeg(t, mode=ImageReadMode.RGB, device=device))
            except Exception as exc:
                out.append(exc)
        return out


def _pil_decode(data: bytes) -> Any:
    """On a CPU device: Pillow (a dependency already; torchvision's CPU image decoding is deprecated since 0.29),
    whole-size like nvJPEG, so the resize that follows is the same interpolate as on CUDA."""
    import io

    import torch
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data), formats=["JPEG"]) as im:
            rgb = np.asarray(im.convert("RGB"), dtype=np.uint8)
    except Exception as exc:  # reported per image, as the batch decoder's failures are
        return exc
    return torch.from_numpy(rgb.transpose(2, 0, 1).copy())


def _put(x: Any, rows: list[int], batch: Any) -> None:
    """``x[rows] = batch`` as one copy: a slice when the rows are consecutive, else one ``index_copy_``."""
    import torch

    if rows == list(range(rows[0], rows[0] + len(rows))):
        x[rows[0] : rows[0] + len(rows)].copy_(batch, non_blocking=True)
    else:
        x.index_copy_(0, torch.tensor(rows, device=x.device), batch.to(x.device, non_blocking=True))
