"""Issue 27: where nvImageCodec's batch decode spends its time on the GPU machine, alone (no forward pass beside it).

    PYTHONPATH=src python3 benchmarks/scripts/serve_nvimgcodec_probe.py OUT.json

For batches of 64 and 128 JPEGs of 224×224 (smooth noise, quality 90, ~20-30 KB): img/s of
- torchvision ``decode_jpeg(device="cuda")`` (today's ``--decode nvjpeg``);
- nvImageCodec's ``Decoder.decode`` alone, per backend (hybrid, hardware, GPU) and host-thread count;
- the same with ``CodeStream`` creation and the results turned into torch tensors (``from_dlpack``);
- gpukit's whole ``BatchDecoder`` (stacked into one uint8 batch as the stager does).
Each: 3 warm-up batches, then the median of 15 timed batches (wall clock, device synchronised after each)."""

from __future__ import annotations

import io
import json
import statistics
import sys
import time

import numpy as np
import torch
from PIL import Image


def jpegs(n: int, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        base = Image.fromarray(rng.integers(0, 256, (28, 28, 3), dtype=np.uint8)).resize((224, 224), Image.BICUBIC)
        noisy = np.clip(np.asarray(base, np.int16) + rng.integers(-12, 13, (224, 224, 3)), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(noisy).save(buf, "JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def rate(fn, n: int) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(15):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return n / statistics.median(times)


def main() -> None:
    from nvidia import nvimgcodec as nv
    from torchvision.io import ImageReadMode, decode_jpeg

    from gpukit.serve.staging import BatchDecoder

    out: dict = {"rows": []}
    stream = torch.cuda.Stream()
    params = nv.DecodeParams(apply_exif_orientation=False, color_spec=nv.ColorSpec.SRGB,
                             sample_format=nv.SampleFormat.I_RGB)  # fmt: skip
    for n in (64, 128):
        data = jpegs(n)
        out["mean_bytes"] = sum(map(len, data)) / n

        def tv(data: list[bytes] = data) -> None:
            with torch.cuda.stream(stream):
                decode_jpeg([torch.frombuffer(bytearray(d), dtype=torch.uint8) for d in data],
                            mode=ImageReadMode.RGB, device="cuda")  # fmt: skip

        out["rows"].append({"n": n, "what": "torchvision decode_jpeg", "img_s": rate(tv, n)})
        srcs = [nv.CodeStream(d) for d in data]
        for kind, name in ((nv.HYBRID_CPU_GPU, "hybrid"), (nv.HW_GPU_ONLY, "hw")):
            for threads in (8, 12, 15):
                if name != "hybrid" and threads != 8:
                    continue
                dec = nv.Decoder(max_num_cpu_threads=threads, backends=[nv.Backend(kind)])
                row = {"n": n, "what": f"nvimgcodec {name}", "threads": threads}
                row["decode_only"] = rate(lambda dec=dec, srcs=srcs: dec.decode(srcs, params=params,
                                          cuda_stream=stream.cuda_stream), n)  # fmt: skip
                row["codestreams"] = rate(lambda data=data: [nv.CodeStream(d) for d in data], n)
                imgs = dec.decode(srcs, params=params, cuda_stream=stream.cuda_stream)
                torch.cuda.synchronize()
                row["from_dlpack"] = rate(lambda imgs=imgs: [torch.from_dlpack(i) for i in imgs], n)
                row["as_tensor_cai"] = rate(lambda imgs=imgs: [torch.as_tensor(i, device="cuda") for i in imgs], n)
                row["cai_dict_only"] = rate(lambda imgs=imgs: [i.__cuda_array_interface__ for i in imgs], n)
                row["reuse_decode"] = rate(lambda dec=dec, srcs=srcs, imgs=imgs: dec.decode(srcs, images=imgs,
                                           params=params, cuda_stream=stream.cuda_stream), n)  # fmt: skip
                out["rows"].append(row)
                print(row, flush=True)
        for kind in ("nvjpeg", "nvimgcodec", "nvimgcodec-hw"):
            bd = BatchDecoder(kind, "cuda", stream)
            buf = torch.empty((n, 3, 224, 224), dtype=torch.uint8, device="cuda")

            def staged(bd=bd, buf=buf, data: list[bytes] = data) -> None:
                with torch.cuda.stream(stream):
                    torch.stack(bd(data), out=buf)

            out["rows"].append({"n": n, "what": f"gpukit BatchDecoder {kind} + stack", "img_s": rate(staged, n)})
            print(out["rows"][-1], flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
