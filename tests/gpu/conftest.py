"""Fixtures the GPU tests share (imports inside them: collecting tests/gpu on a machine without a GPU stays cheap)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved ResNet-18 checkpoint (64 px, three classes, seeded weights) for the serving tests."""
    import torch

    from gpukit.train import checkpoint
    from gpukit.train.models import build_model

    folder = tmp_path_factory.mktemp("m")
    torch.manual_seed(0)
    net = build_model("resnet18", 64, 3)
    checkpoint.save(folder, "best", {f"model.{k}": v for k, v in net.state_dict().items()},
                    {"model": "resnet18", "classes": ["a", "b", "c"], "image_size": 64})  # fmt: skip
    return folder
