"""The training step with the default augmentation (crop, shift, colour jitter) reads nothing back to the host: no
``.item()``, ``.tolist()``, ``.cpu()``, ``.numpy()`` or truth test of a tensor in a step — on a GPU each of those
would wait for the device (``tests/gpu/test_train_gpu.py`` checks the same with CUDA's sync debug mode). The CPU's
Adam is left out: torch's CPU update reads its step counter, a CPU tensor by design; on a GPU the update is the
fused, capturable one, whose counter stays on the device."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from gpukit.train.adam import Adam  # noqa: E402
from gpukit.train.augment import recipe  # noqa: E402
from gpukit.train.data import load_folder  # noqa: E402
from gpukit.train.loop import epoch_plan  # noqa: E402
from gpukit.train.models import small_cnn  # noqa: E402
from gpukit.train.schedule import lr_table  # noqa: E402
from gpukit.train.step import Stepper  # noqa: E402

READS = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "__index__")


def test_a_default_recipe_step_never_reads_a_tensor_back(image_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = load_folder(image_folder, 16, 0.0)
    images, labels = torch.from_numpy(data.train.images), torch.from_numpy(data.train.labels)
    aug = recipe("default")
    assert aug.crop < 1 and aug.shift > 0 and aug.jitters  # the step below runs every part of the recipe
    steps, batch = 4, 8
    perm, theta, jitter = epoch_plan(0, 0, len(labels), steps, batch, aug)
    assert jitter is not None
    net = small_cnn(2)
    stepper = Stepper(net, Adam(net.parameters(), lr=1e-3, weight_decay=0.05), images, labels, steps, batch,
                      torch.device("cpu"), None, True, smoothing=0.1)  # fmt: skip
    stepper.load_epoch(perm, theta, 0, jitter, lr_table(0, steps, 1, 1e-3, "cosine", 0.05))
    calls: list[str] = []

    def forbid(name: str) -> Any:
        original = getattr(torch.Tensor, name)

        def reading(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1).f_code.co_filename
            if "torch/optim" not in caller.replace("\\", "/"):
                calls.append(f"{name} in {caller}:{sys._getframe(1).f_lineno}")
            return original(self, *args, **kwargs)

        return reading

    with monkeypatch.context() as patch:
        for name in READS:
            patch.setattr(torch.Tensor, name, forbid(name))
        for _ in range(steps):
            stepper.step()
    assert calls == [], f"host reads in a training step: {sorted(set(calls))}"
    loss_sum, hits = stepper.read_and_reset()  # the epoch's one read, outside the steps
    assert loss_sum > 0 and 0 <= hits <= steps * batch and int(stepper.counter) == steps
