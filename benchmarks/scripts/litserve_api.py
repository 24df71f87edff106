"""LitServe 0.2.19 serving the same checkpoint as `gpukit serve`, for the side-by-side benchmark (serve_h200.py).

Written for this benchmark from LitServe's documented interface (LitAPI: setup / decode_request / batch / predict /
unbatch / encode_response; LitServer with max_batch_size, batch_timeout, workers_per_device); none of LitServe's own
code is copied. The image is decoded in ``decode_request`` with the same PIL steps as gpukit (the issue's setup),
the model is loaded through gpukit's safetensors loader, and ``cudnn.benchmark`` stays off (MEASURING.md rule 9).

    python3 litserve_api.py --model RUN_DIR --port 8100 --workers-per-device 1 --max-batch-size 64 --batch-timeout 0.005
"""

from __future__ import annotations

import argparse
import io

import litserve as ls
import numpy as np
import torch


class ImageAPI(ls.LitAPI):
    def __init__(self, model_path: str, bf16: bool, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.model_path = model_path
        self.bf16 = bf16

    def setup(self, device: str) -> None:
        from gpukit.train.predict import load_model

        torch.backends.cudnn.benchmark = False
        loaded = load_model(self.model_path, device)
        self.net, self.classes, self.size, self.device = loaded.net, loaded.classes, loaded.image_size, device
        self.channels_last = loaded.model.startswith("resnet") and device.startswith("cuda")
        if self.channels_last:
            self.net = self.net.to(memory_format=torch.channels_last)

    def decode_request(self, request):
        from PIL import Image

        item = request["file"] if hasattr(request, "__getitem__") else request  # a form: the UploadFile
        data = item.file.read() if hasattr(item, "file") else bytes(item)
        with Image.open(io.BytesIO(data)) as im:
            im.draft("RGB", (self.size, self.size))
            rgb = im.convert("RGB").resize((self.size, self.size), Image.Resampling.BILINEAR)
        return np.asarray(rgb, dtype=np.uint8).transpose(2, 0, 1).copy()

    def batch(self, inputs: list[np.ndarray]) -> np.ndarray:
        return np.stack(inputs)

    def predict(self, x: np.ndarray) -> list[list[float]]:
        if x.ndim == 3:
            x = x[None]
        with torch.inference_mode():
            t = torch.from_numpy(x).to(self.device, non_blocking=True).float().mul_(1 / 255)
            if self.channels_last:
                t = t.contiguous(memory_format=torch.channels_last)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.bf16):
                logits = self.net(t).float()
            probs = torch.sigmoid(logits) if logits.shape[1] == 1 else torch.softmax(logits, 1)
            if logits.shape[1] == 1:
                probs = torch.cat([1 - probs, probs], 1)
            return probs.cpu().tolist()

    def unbatch(self, output: list[list[float]]) -> list[list[float]]:
        return output

    def encode_response(self, output):
        row = output[0] if output and isinstance(output[0], list) else output
        best = (1 if row[1] >= 0.5 else 0) if len(row) == 2 else int(np.argmax(row))
        scores = dict(zip(self.classes, row, strict=True))
        return {"label": self.classes[best], "probability": row[best], "scores": scores}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--port", type=int, default=8100)
    p.add_argument("--workers-per-device", type=int, default=1)
    p.add_argument("--max-batch-size", type=int, default=64)
    p.add_argument("--batch-timeout", type=float, default=0.005)
    p.add_argument("--accelerator", default="cuda")
    p.add_argument("--bf16", action="store_true")
    a = p.parse_args()
    batching = {"max_batch_size": a.max_batch_size, "batch_timeout": a.batch_timeout}
    try:  # LitServe 0.2.x takes the batching settings on the LitAPI
        api = ImageAPI(a.model, a.bf16, **batching)
        server = ls.LitServer(
            api, accelerator=a.accelerator, devices=1, workers_per_device=a.workers_per_device, timeout=30
        )
    except TypeError:  # older releases took them on the LitServer
        api = ImageAPI(a.model, a.bf16)
        server = ls.LitServer(
            api, accelerator=a.accelerator, devices=1, workers_per_device=a.workers_per_device, timeout=30, **batching
        )
    server.run(port=a.port, generate_client_file=False)


if __name__ == "__main__":
    main()
