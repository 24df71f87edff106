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


def test_small_cnn_is_position_robust_and_small() -> None:
    """The default network: global pooling, so a pattern moved across the image gives the same features; any
    image size from 16; 219,481 weights for two classes (the seed CNN has 3.9 M, almost all in its dense layer)."""
    from gpukit.train.models import DEFAULT_MODEL, build_model, small_cnn

    assert DEFAULT_MODEL == "small-cnn"
    net = small_cnn(2).eval()
    assert sum(p.numel() for p in net.parameters()) == 219_481
    # the same square at two places 32 px apart (a multiple of the network's stride, 16), each far enough from the
    # border (40 px) that the network's view of it (a 46 px receptive field) is not cut off
    x = torch.zeros(2, 3, 128, 128)
    x[0, :, 40:56, 40:56] = 1.0
    x[1, :, 72:88, 72:88] = 1.0
    with torch.no_grad():
        features = net[:-2](x)  # before dropout and the head
        out = net(x)
    torch.testing.assert_close(features[0], features[1])
    torch.testing.assert_close(out[0], out[1])
    for size in (16, 48, 100):
        assert build_model("small-cnn", size, 5)(torch.rand(2, 3, size, size)).shape == (2, 5)
    with pytest.raises(ValueError, match="at least 16"):
        build_model("small-cnn", 8, 2)
