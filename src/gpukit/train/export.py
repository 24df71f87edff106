"""`gpukit export --onnx`: the trained network as ONNX, checked against torch with onnxruntime.

The exported graph takes ``images`` float32 (N,3,S,S) scaled to [0, 1] (the seed's rescale) and returns
``probabilities`` (N, classes) — sigmoid folded in for two classes, softmax for more — with a dynamic batch axis.
The export is a result only when onnxruntime's outputs match torch's on fresh random images.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpukit.errors import BackendUnavailable, CheckFailed, ConfigError, TrainError
from gpukit.train.checkpoint import temp_beside

__all__ = ["ExportResult", "export_onnx"]

TOLERANCE = 1e-4  # max |onnxruntime − torch| on probabilities, fp32 on the CPU


@dataclass
class ExportResult:
    path: str
    model: str
    classes: list[str]
    image_size: int
    opset: int
    checked_images: int
    max_abs_diff: float
    tolerance: float
    onnxruntime_version: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _wrapped(net: Any) -> Any:
    import torch

    from gpukit.train.predict import probabilities

    class WithProbabilities(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, images: torch.Tensor) -> torch.Tensor:
            return probabilities(self.net(images))

    return WithProbabilities().eval()


def export_onnx(model_path: Path, out: Path, opset: int = 17, check_images: int = 8, seed: int = 0) -> ExportResult:
    """Export and verify; raises ``CheckFailed`` when onnxruntime disagrees with torch (and leaves no file)."""
    from gpukit.train.predict import load_model

    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise BackendUnavailable("onnxruntime is not installed", hint="pip install 'gpukit[export]'") from exc
    _check_opset(opset)
    loaded = load_model(model_path, "cpu")
    module = _wrapped(loaded.net)
    size = loaded.image_size
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = temp_beside(out)
        os.close(fd)
    except OSError as exc:
        raise ConfigError(f"cannot write {out}: {exc.strerror or exc}", hint="give a writable --onnx path") from exc
    tmp = Path(tmp_name)
    try:  # the file appears at ``out`` only once onnxruntime agrees with torch
        diff = _export_and_check(module, tmp, size, opset, check_images, seed)
        if not diff <= TOLERANCE:  # NaN fails too
            raise CheckFailed(f"onnxruntime output differs from torch by {diff:.3g} (> {TOLERANCE})", hint=str(out))
        try:
            os.replace(tmp, out)
        except OSError as exc:
            raise ConfigError(f"cannot write {out}: {exc.strerror or exc}", hint="give a writable --onnx path") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return ExportResult(str(out), loaded.model, loaded.classes, size, opset, check_images, diff, TOLERANCE,
                        ort.__version__)  # fmt: skip


def _check_opset(opset: int) -> None:
    """Refuse an opset the TorchScript exporter (``dynamo=False``) cannot write, before any work: torch raised a
    RuntimeError for 0 and a TypeError deep in the tracer for 10³⁰."""
    try:
        from torch.onnx import _constants

        low = int(_constants.ONNX_MIN_OPSET)
        high = int(getattr(_constants, "ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET", _constants.ONNX_MAX_OPSET))
    except (ImportError, AttributeError):  # a private module: if it moves, torch's own check still stands behind
        return
    if not low <= opset <= high:
        raise ConfigError(
            f"--opset {opset} is not an ONNX opset this torch can export (it writes {low} to {high})",
            hint="leave --opset at its default (17) or pick one in that range",
        )


def _export_and_check(module: Any, path: Path, size: int, opset: int, check_images: int, seed: int) -> float:
    """Export ``module`` to ``path``; the largest |onnxruntime − torch| on ``check_images`` fresh images."""
    import onnxruntime as ort
    import torch

    example = torch.rand(2, 3, size, size)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's warnings about Python branches on static shapes
            torch.onnx.export(module, (example,), str(path), input_names=["images"], output_names=["probabilities"],
                              dynamic_axes={"images": {0: "batch"}, "probabilities": {0: "batch"}},
                              opset_version=opset, dynamo=False)  # fmt: skip
    except Exception as exc:  # the exporter raises many types
        raise TrainError(f"ONNX export failed: {type(exc).__name__}: {exc}") from exc
    x = torch.rand(check_images, 3, size, size, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        want = module(x).numpy()
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(["probabilities"], {"images": x.numpy()})[0]
    return float(abs(got - want).max()) if got.shape == want.shape else float("inf")
