"""The model process's batch JPEG decoders (``--decode nvimgcodec`` and ``nvjpeg``) give the answers of ``--decode
pil``, and ``--decode auto`` picks one by where the model runs.

On a CPU device nvImageCodec decodes with its libjpeg-turbo backend (the hybrid and hardware backends need CUDA:
tests/gpu/test_serve_gpu.py); the batch is then resized by the same ``interpolate`` as on CUDA."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from serve_testdata import SIZE, image_bytes, make_checkpoint

from gpukit.errors import ConfigError
from gpukit.serve import config as config_module
from gpukit.serve.config import ServeConfig, resolve_auto
from gpukit.serve.decode import decode_bytes, nvimgcodec_unavailable

needs_nvimgcodec = pytest.mark.skipif(nvimgcodec_unavailable() is not None, reason=str(nvimgcodec_unavailable()))
MAX_PIXELS = 4096 * 4096


def _photos(n: int, seed: int = 0) -> list[bytes]:
    """Smooth images (bicubic-upsampled noise, like photos' low frequencies) of random sizes, colour and grey,
    at JPEG qualities 70–95; one in five already at the model's size (no resize)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        w, h = int(rng.integers(SIZE // 2, 5 * SIZE)), int(rng.integers(SIZE, 4 * SIZE))
        w, h = (SIZE, SIZE) if i % 5 == 0 else (w, h)
        noise = Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8))
        small = noise.resize((w, h), Image.Resampling.BICUBIC)
        img = small.convert("L") if i % 7 == 3 else small
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=int(rng.integers(70, 96)))
        out.append(buf.getvalue())
    return out


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory):
    """A random seed CNN whose labels differ from image to image (its last bias zeroed, its last weights scaled:
    with them as initialised every one of the 200 images got the same label, and label agreement said nothing)."""
    import torch

    from gpukit.serve.model import ModelRunner

    ckpt = make_checkpoint(tmp_path_factory.mktemp("ckpt") / "run", classes=["a", "b", "c", "d"], seed=3)
    r = ModelRunner(ckpt, device="cpu", max_batch=64)
    last = [m for m in r.net.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        last.bias.zero_()
        last.weight.mul_(10.0)
    return r


@needs_nvimgcodec
def test_nvimgcodec_pixels_are_pillows_on_the_cpu_backend() -> None:
    from PIL import Image

    from gpukit.serve.staging import BatchDecoder

    decoder = BatchDecoder("nvimgcodec", "cpu")
    for jpegs in (_photos(40, seed=1), _photos(25, seed=2)):  # the second batch decodes into the first's images
        decoded = decoder(jpegs)
        for data, img in zip(jpegs, decoded, strict=True):
            ref = np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).transpose(2, 0, 1)
            assert tuple(img.shape) == ref.shape  # grey JPEGs come back as three equal channels, as convert("RGB")
            assert int(np.abs(img.numpy().astype(int) - ref).max()) <= 1
    assert len(decoder._images) == 40  # the pool: the largest batch so far


@needs_nvimgcodec
def test_the_decode_extra_brings_the_nvjpeg_library_nvimgcodec_loads() -> None:
    """``gpukit[decode]`` installs nvImageCodec with its ``nvjpeg`` extra: without libnvjpeg (no CUDA toolkit,
    no ``nvidia-nvjpeg`` wheel) nvImageCodec registers none of its GPU JPEG decoders and says so only on stderr,
    so ``--decode nvimgcodec`` would decode every JPEG on its CPU backend. Its extension loads libnvjpeg when a
    decoder is made, also a CPU-only one (the check needs no GPU)."""
    import subprocess
    import sys

    code = (
        "from nvidia import nvimgcodec as nv\n"
        "nv.Decoder(device_id=nv.NVIMGCODEC_DEVICE_CPU_ONLY, backends=[nv.Backend(nv.CPU_ONLY)])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = proc.stdout + proc.stderr
    assert "Failed to load nvjpeg library" not in said, said[-2000:]
    assert "[nvjpeg-ext]" not in said, said[-2000:]


@needs_nvimgcodec
@pytest.mark.parametrize("kind", ["nvimgcodec", "nvjpeg"])
def test_batch_decoders_answer_as_pil_on_200_images(runner, kind: str) -> None:
    """Labels and probabilities of 200 JPEGs decoded per batch in the model process against Pillow in the HTTP
    process (``decode_bytes``): the same answer where no resize happens; where one does (Pillow's resize against the
    batch's ``interpolate``), pixels 1-2 levels apart on average and nearly every label the same (here 198 of 200:
    two near-ties flip). How far probabilities move then depends on how sharp the model is, so it is not bounded."""
    jpegs = _photos(200)
    pil = [decode_bytes(d, SIZE, MAX_PIXELS) for d in jpegs]
    runner.warm_batch_decoder(kind)
    try:
        got, want, pixels = [], [], []
        for i in range(0, len(jpegs), 50):
            staged = runner.prepare(jpegs[i : i + 50])
            pixels.append(staged.x[: staged.n].numpy().astype(int))
            probs, errors = runner.execute(staged)
            assert errors == [None] * len(probs)
            got.append(probs)
            want.append(runner.run_items(pil[i : i + 50])[0])
    finally:
        runner.warm_batch_decoder("nvjpeg")
    p, q = np.concatenate(got), np.concatenate(want)
    assert len(set(q.argmax(1).tolist())) >= 3  # the labels vary: agreement means something
    same_size = [i for i in range(len(jpegs)) if i % 5 == 0]
    np.testing.assert_allclose(p[same_size], q[same_size], rtol=0, atol=1e-5)  # the same pixels: the same answer
    diff = np.abs(np.concatenate(pixels) - np.stack(pil).astype(int))
    assert diff[same_size].max() == 0 and diff.mean() <= 2.0  # the resize tolerance, in pixel levels
    assert (p.argmax(1) == q.argmax(1)).mean() >= 0.97


@needs_nvimgcodec
def test_a_corrupt_jpeg_fails_alone_in_an_nvimgcodec_batch(runner) -> None:
    good = image_bytes("JPEG", (SIZE, SIZE), seed=5)
    broken = good[:20] + b"\0" * 30 + good[50:]  # a valid start and end, garbage tables
    runner.warm_batch_decoder("nvimgcodec")
    try:
        probs, errors = runner.run_items([good, broken, good])
    finally:
        runner.warm_batch_decoder("nvjpeg")
    assert errors[0] is None and errors[2] is None
    assert errors[1] is not None and errors[1].startswith("corrupt: JPEG could not be decoded")
    np.testing.assert_allclose(probs[0], probs[2], rtol=0, atol=1e-6)


def _config(decode: str, device: str) -> ServeConfig:
    return ServeConfig(model=Path("unused"), device=device, decode=decode).validate()


def test_auto_decode_is_nvjpeg_on_cuda_and_pil_on_a_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_module, "nvimgcodec_unavailable", lambda: None)
    assert resolve_auto(_config("auto", "cuda")).decode == "nvjpeg"  # the fastest measured (docs/serve.md)
    assert resolve_auto(_config("auto", "cuda:1")).decode == "nvjpeg"
    assert resolve_auto(_config("auto", "cpu")).decode == "pil"
    monkeypatch.setattr(config_module, "_cuda", lambda device: False)  # --device auto on a machine without a GPU
    assert resolve_auto(_config("auto", "auto")).decode == "pil"
    monkeypatch.setattr(config_module, "_cuda", lambda device: True)
    assert resolve_auto(_config("auto", "auto")).decode == "nvjpeg"
    assert resolve_auto(_config("nvimgcodec", "cuda")).decode == "nvimgcodec"  # a named decoder is kept
    monkeypatch.setattr(config_module, "nvimgcodec_unavailable", lambda: "nvImageCodec is not installed")
    with pytest.raises(ConfigError, match="--decode nvimgcodec-hw: nvImageCodec is not installed"):
        resolve_auto(_config("nvimgcodec-hw", "cuda"))
    assert resolve_auto(_config("pil", "cuda")).decode == "pil"


def test_auto_decode_on_cuda_is_pillow_for_a_small_model_input(tmp_path: Path) -> None:
    """Up to ``PIL_SIDE`` px a side (the seed CNN's 64) the HTTP processes decode with Pillow, above it nvJPEG; a
    checkpoint that cannot be read here keeps nvJPEG (the model process names the problem)."""
    from gpukit.serve.config import PIL_SIDE

    def auto(side: int | None) -> str:
        run = tmp_path / f"run{side}"
        run.mkdir()
        meta = {"model": "seed-cnn", "classes": ["cat", "dog"]} | ({} if side is None else {"image_size": side})
        (run / "best.json").write_text(json.dumps(meta))
        return resolve_auto(ServeConfig(model=run, device="cuda").validate()).decode

    assert PIL_SIDE == 64
    assert auto(64) == "pil" and auto(32) == "pil"
    assert auto(65) == "nvjpeg" and auto(224) == "nvjpeg"
    assert auto(None) == "nvjpeg"
    cpu = resolve_auto(ServeConfig(model=tmp_path / "run224", device="cpu").validate())
    assert cpu.decode == "pil"


def test_an_unknown_decoder_is_refused() -> None:
    with pytest.raises(ConfigError, match="--decode must be one of auto, pil, nvjpeg, nvimgcodec, nvimgcodec-hw"):
        _config("turbo", "cpu")


def test_serve_engine_when_none_is_asked_is_auto_on_cuda_and_eager_on_a_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    def engine(device: str, asked: str | None = None) -> str | None:
        return resolve_auto(ServeConfig(model=Path("unused"), device=device, engine=asked).validate()).engine

    assert engine("cuda") == config_module.CUDA_ENGINE == "auto"  # the fastest that passes the gate
    assert engine("cuda:1") == "auto"
    assert engine("cpu") == "eager"  # compile costs a CPU more at start than it gains
    assert engine("cuda", "eager") == "eager"  # what was asked for is kept, on either device
    assert engine("cpu", "compile") == "compile"
    monkeypatch.setattr(config_module, "_cuda", lambda device: False)  # --device auto without a GPU
    assert engine("auto") == "eager"
    monkeypatch.setattr(config_module, "_cuda", lambda device: True)
    assert engine("auto") == "auto"
