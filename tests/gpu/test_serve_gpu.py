"""`gpukit serve`'s model process on a CUDA GPU: a batch larger than one forward pass (GRAPH_ROWS) is run as several
graph replays and gives what one eager fp32 pass gives; JPEG bytes decoded with nvJPEG give the same labels; a real
server on the GPU answers damaged JPEGs 400 where nvJPEG alone would decode some of them."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from gpukit.serve.model import GRAPH_ROWS, GpuWait, ModelRunner  # noqa: E402


def test_a_batch_of_several_passes_matches_one_eager_pass(ckpt: Path) -> None:
    from gpukit.train.augment import to_float
    from gpukit.train.predict import load_model, probabilities

    n = 2 * GRAPH_ROWS + 37  # three passes: full, full, partial (its bucket padded)
    rng = np.random.default_rng(1)
    images = [rng.integers(0, 256, (3, 64, 64), dtype=np.uint8) for _ in range(n)]
    runner = ModelRunner(ckpt, "cuda", max_batch=256, amp="off", cuda_graphs=True)
    assert runner.graphs and max(runner.buckets) == GRAPH_ROWS
    probs, errors = runner.run_items(images)  # type: ignore[arg-type]
    assert probs.shape == (n, 3) and errors == [None] * n
    loaded = load_model(ckpt, "cuda")
    with torch.inference_mode():
        x = torch.from_numpy(np.stack(images)).cuda()
        ref = probabilities(loaded.net.eval()(to_float(x))).cpu().numpy()
    # the runner's TF32, channels-last and per-bucket kernels differ in rounding only; a row from the wrong pass,
    # or rows left over from an earlier batch, would be off by tenths
    diff = float(np.abs(probs - ref).max())
    assert diff < 1e-2 and (probs.argmax(1) == ref.argmax(1)).mean() >= 0.99, f"max |diff| {diff:.2e}"
    again, _ = runner.run_items(images[:5])  # a small batch (bucket 8) after a big one
    diff = float(np.abs(again - probs[:5]).max())
    assert diff < 1e-2, f"max |diff| {diff:.2e}"


def test_one_pass_batches_of_every_size_match_one_eager_pass(ckpt: Path) -> None:
    """A batch of at most GRAPH_ROWS goes from the staging slot straight into the graph's input and its output
    straight to the host: each row is its own image's, whatever the batch before it left in the static buffers."""
    from gpukit.train.augment import to_float
    from gpukit.train.predict import load_model, probabilities

    rng = np.random.default_rng(3)
    images = [rng.integers(0, 256, (3, 64, 64), dtype=np.uint8) for _ in range(GRAPH_ROWS)]
    runner = ModelRunner(ckpt, "cuda", max_batch=GRAPH_ROWS, amp="off", cuda_graphs=True)
    assert runner.graphs
    loaded = load_model(ckpt, "cuda")
    with torch.inference_mode():
        x = torch.from_numpy(np.stack(images)).cuda()
        ref = probabilities(loaded.net.eval()(to_float(x))).cpu().numpy()
    for n in (GRAPH_ROWS, 1, 17, GRAPH_ROWS - 1, 3):  # big then small: rows past n hold the last batch's images
        start = (7 * n) % (GRAPH_ROWS - n + 1)
        probs, errors = runner.run_items(images[start : start + n])  # type: ignore[arg-type]
        assert probs.shape == (n, 3) and errors == [None] * n
        diff = float(np.abs(probs - ref[start : start + n]).max())
        assert diff < 1e-2, f"batch {n}: max |diff| {diff:.2e}"


def test_napping_through_the_forward_pass_reads_every_row_only_once_it_is_done(ckpt: Path) -> None:
    """The executing thread sleeps before it waits on the stream (``GpuWait``); with no tail spun at all, and naps
    as short as the GPU allows, every batch still reads its own finished rows."""
    from gpukit.train.augment import to_float
    from gpukit.train.predict import load_model, probabilities

    rng = np.random.default_rng(5)
    images = [rng.integers(0, 256, (3, 64, 64), dtype=np.uint8) for _ in range(2 * GRAPH_ROWS)]
    runner = ModelRunner(ckpt, "cuda", max_batch=2 * GRAPH_ROWS, amp="off", cuda_graphs=True)
    runner.gpu_wait = GpuWait(tail_s=0.0, min_nap_s=0.0)
    loaded = load_model(ckpt, "cuda")
    with torch.inference_mode():
        ref = probabilities(loaded.net.eval()(to_float(torch.from_numpy(np.stack(images)).cuda()))).cpu().numpy()
    for n in (2 * GRAPH_ROWS, 3, GRAPH_ROWS, 2 * GRAPH_ROWS, 40, 2 * GRAPH_ROWS - 5) * 3:
        probs, _ = runner.run_items(images[:n])  # type: ignore[arg-type]
        diff = float(np.abs(probs - ref[:n]).max())
        assert diff < 1e-2, f"batch {n}: max |diff| {diff:.2e}"
    assert runner.gpu_wait.naps > 0 and set(runner.gpu_wait.expected_s) == {2 * GRAPH_ROWS, GRAPH_ROWS, 48, 4}


@pytest.mark.parametrize("kind", ["nvjpeg", "nvimgcodec", "nvimgcodec-hw"])
def test_batch_decoded_bytes_give_the_labels_of_decoded_pixels(ckpt: Path, kind: str) -> None:
    from PIL import Image

    from gpukit.serve.decode import nvimgcodec_unavailable

    if kind != "nvjpeg" and nvimgcodec_unavailable():
        pytest.skip(str(nvimgcodec_unavailable()))

    rng = np.random.default_rng(2)
    arrays = [rng.integers(0, 256, (64, 64, 3), dtype=np.uint8) for _ in range(GRAPH_ROWS + 9)]
    jpegs = []
    for a in arrays:
        buf = io.BytesIO()
        Image.fromarray(a).save(buf, "JPEG", quality=95)
        jpegs.append(buf.getvalue())
    pixels = [np.asarray(Image.open(io.BytesIO(j)).convert("RGB")).transpose(2, 0, 1).copy() for j in jpegs]
    runner = ModelRunner(ckpt, "cuda", max_batch=128, amp="off", cuda_graphs=True)
    runner.warm_batch_decoder(kind)
    from_bytes, errors = runner.run_items(jpegs)  # type: ignore[arg-type]
    from_pixels, _ = runner.run_items(pixels)  # type: ignore[arg-type]
    assert errors == [None] * len(jpegs)
    agree = (from_bytes.argmax(1) == from_pixels.argmax(1)).mean()
    assert agree >= 0.95  # nvJPEG's IDCT differs from libjpeg's by a level here and there
    # again, reversed: nvImageCodec decodes into the last batch's images and reuses their torch views
    again, _ = runner.run_items(jpegs[::-1])  # type: ignore[arg-type]
    # (rows land in other passes and buckets: cuDNN rounding moves them by up to 1.2e-4 on the H200, where a wrong
    # image moves them by 1e-2 and more)
    np.testing.assert_allclose(again[::-1], from_bytes, rtol=0, atol=1e-3)


def test_nvjpeg_from_the_pinned_buffer_decodes_what_pageable_bytes_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch's JPEGs go to nvJPEG as slices of one reused pinned buffer: every batch (a small one, one that
    grows the buffer, one that reuses it with other bytes, one over the cap) decodes to the pixels that one pageable
    tensor per JPEG gives, and a broken JPEG among them fails alone."""
    from PIL import Image

    from gpukit.serve import staging

    rng = np.random.default_rng(3)
    jpegs = []
    for side in (16, 48, 64, 40) * 10:
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(buf, "JPEG", quality=90)
        jpegs.append(buf.getvalue())
    decoder = staging.BatchDecoder("nvjpeg", "cuda", torch.cuda.Stream())

    def pageable(datas: list[bytes]) -> list[object]:
        return staging._torchvision_decode([torch.frombuffer(bytearray(d), dtype=torch.uint8) for d in datas], "cuda")

    broken = jpegs[5][: len(jpegs[5]) // 3]  # cut inside its scan
    for batch in (jpegs[:3], jpegs, jpegs[::-1][:20], [*jpegs[:4], broken, jpegs[6]]):
        got, want = decoder(batch), pageable(batch)
        assert len(got) == len(batch)
        for g, w in zip(got, want, strict=True):
            assert isinstance(g, Exception) == isinstance(w, Exception)
            if not isinstance(g, Exception):
                assert torch.equal(g, w)
    assert decoder._bitstreams is not None and decoder._bitstreams.is_pinned()
    assert decoder._bitstreams.numel() >= sum(map(len, jpegs))
    monkeypatch.setattr(staging, "PINNED_JPEG_BYTES", 1000)  # over the cap: pageable tensors, the buffer untouched
    kept = decoder._bitstreams
    assert not decoder._pinned(jpegs[:2])[0].is_pinned()
    assert decoder._bitstreams is kept


def test_a_server_on_the_gpu_refuses_damaged_jpegs(ckpt: Path) -> None:
    """`gpukit serve --device cuda --decode nvjpeg`, a real server: an intact JPEG gets 200, and 400 ``corrupt`` goes
    to one whose quantization tables were overwritten (nvJPEG decoded such a file without an error on an H100: the
    HTTP worker keeps it from the batch decoder), one whose scan names Huffman tables never defined (nvJPEG's own
    error, from the batch), and a truncated one. The server answers the intact one again afterwards."""
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
    from serve_harness import post_image, start_server
    from serve_testdata import huffman_undefined, image_bytes, tables_overwritten

    good = image_bytes("JPEG", size=(64, 64), seed=4)
    srv = start_server(ckpt, "--device", "cuda", "--decode", "nvjpeg", "--workers", "2", timeout=240)
    try:
        status, _, body = post_image(srv.url, good)
        assert status == 200, body
        # Pillow in the HTTP worker says "truncated or corrupt", the model process's batch decoder "could not"
        worker, batch = "JPEG is truncated or corrupt", "JPEG could not be decoded"
        cut = good[: len(good) // 2]
        for bad, says in ((tables_overwritten(good), worker), (huffman_undefined(good), batch), (cut, worker)):
            status, _, body = post_image(srv.url, bad)
            assert status == 400 and json.loads(body)["error"] == "corrupt", body
            assert json.loads(body)["detail"].startswith(says), body
        assert post_image(srv.url, good)[0] == 200
    finally:
        assert srv.stop() == 0


def test_a_server_on_the_gpu_without_workers_starts_the_rule_s_count(ckpt: Path) -> None:
    """`gpukit serve --device cuda` with ``--workers`` left out: as many HTTP processes as ``auto_workers`` gives for
    this machine's CPUs and CPU limit (8 on a 16-CPU GPU host), really running, and the server answers."""
    import sys

    import psutil

    from gpukit.hardware.cpu import cpu_quota, usable_cpus
    from gpukit.serve.config import auto_workers

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
    from serve_harness import post_image, start_server
    from serve_testdata import image_bytes

    want = auto_workers(0, usable_cpus(), cpu_quota())
    srv = start_server(ckpt, "--device", "cuda", "--engine", "eager", timeout=240)
    try:
        assert srv.wait_log(f"HTTP processes {want};"), srv.log
        kids = psutil.Process(srv.proc.pid).children()
        spawned = sum("spawn_main" in " ".join(k.cmdline()) for k in kids)
        assert spawned == (want if want > 1 else 0)  # one HTTP process runs in the model process's own
        assert post_image(srv.url, image_bytes("JPEG", size=(64, 64), seed=5))[0] == 200
    finally:
        assert srv.stop() == 0


def test_the_gpu_s_pci_address_is_nvml_s_and_its_cpus_are_the_machine_s() -> None:
    """`--model-cpus` takes the model's CPUs from the GPU's NUMA node: the address built from torch's device
    properties is the one NVML reports for the same GPU, sysfs has it, and its CPUs are CPUs of this machine."""
    import os

    import pynvml

    from gpukit.serve.cpus import gpu_cpus, pci_address

    address = pci_address("cuda")
    assert address is not None and (Path("/sys/bus/pci/devices") / address).is_dir(), address
    pynvml.nvmlInit()
    try:
        uuid = str(torch.cuda.get_device_properties(0).uuid)
        nvml_ids = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            if uuid in str(pynvml.nvmlDeviceGetUUID(handle)):
                nvml_ids.append(pynvml.nvmlDeviceGetPciInfo(handle).busId)
    finally:
        pynvml.nvmlShutdown()
    assert len(nvml_ids) == 1, uuid
    nvml_id = nvml_ids[0].decode() if isinstance(nvml_ids[0], bytes) else nvml_ids[0]
    assert nvml_id[-12:].lower() == address  # NVML: "00000000:9A:00.0"
    near = gpu_cpus("cuda")
    if (Path("/sys/bus/pci/devices") / address / "local_cpulist").is_file():
        assert near and set(near) <= set(range(os.cpu_count() or 1)), near


def test_a_server_on_the_gpu_with_model_cpus_runs_its_model_process_where_the_plan_says(ckpt: Path) -> None:
    """`--model-cpus 2` on CUDA: the GPU's node is read (CUDA starts before the engine), the start-up line gives the
    split that ``plan`` makes of this machine's CPUs, the model process runs on those CPUs, and the server answers."""
    import sys

    import psutil

    from gpukit.hardware.cpu import usable_cpus
    from gpukit.serve.cpus import gpu_cpus, plan

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
    from serve_harness import post_image, start_server
    from serve_testdata import image_bytes

    split = plan(2, 2, usable_cpus(), gpu_cpus("cuda"))
    assert split is not None
    srv = start_server(
        ckpt, "--device", "cuda", "--engine", "eager", "--workers", "2", "--model-cpus", "2", timeout=240
    )
    try:
        assert srv.wait_log(split.describe()), srv.log
        assert post_image(srv.url, image_bytes("JPEG", size=(64, 64), seed=6))[0] == 200
        assert set(psutil.Process(srv.proc.pid).cpu_affinity()) == set(split.model)
    finally:
        assert srv.stop() == 0
