from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gpukit.train.models import seed_cnn, seed_mlp  # noqa: E402


def test_seed_cnn_shape_and_parameter_count():
    model = seed_cnn()
    out = model(torch.rand(4, 3, 64, 64))
    assert out.shape == (4, 1)
    # conv 3·32·9+32 = 896; dense 30752·128+128 = 3,936,384; head 128+1 = 129
    assert sum(p.numel() for p in model.parameters()) == 896 + 3_936_384 + 129


def test_seed_cnn_multiclass_head():
    assert seed_cnn(image_size=32, num_classes=5)(torch.rand(2, 3, 32, 32)).shape == (2, 5)


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        seed_cnn(num_classes=1)
    with pytest.raises(ValueError):
        seed_cnn(image_size=2)


def test_seed_mlp_shape():
    assert seed_mlp(in_features=10, hidden=16)(torch.rand(3, 10)).shape == (3, 1)
