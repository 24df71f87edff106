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
    image size from 16; 100,273 weights for two classes (the seed CNN has 3.9 M, almost all in its dense layer)."""
    from gpukit.train.models import DEFAULT_MODEL, build_model, small_cnn

    assert DEFAULT_MODEL == "small-cnn"
    net = small_cnn(2).eval()
    assert sum(p.numel() for p in net.parameters()) == 100_273
    # the same square at two places 32 px apart (a multiple of the network's stride, 16), each far enough from the
    # border (40 px) that the network's view of it (a 48 px receptive field) is not cut off
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


def test_small_cnn_convolves_twice_at_full_resolution_before_the_first_pool() -> None:
    """Issue 23: objects of 4-8 px lost their corners to the first pool; the first stage now has two 3x3 convs at
    the input's resolution (a 5x5 view), the others one. ``full_res_convs=1`` is the first small-cnn."""
    from gpukit.train.models import small_cnn

    net = small_cnn(2)
    kinds = [type(m).__name__ for m in net]
    assert kinds[:7] == ["Conv2d", "BatchNorm2d", "ReLU", "Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d"]
    assert kinds.count("Conv2d") == 5 and kinds.count("MaxPool2d") == 4
    with torch.no_grad():
        assert net[:6](torch.rand(1, 3, 64, 64)).shape == (1, 16, 64, 64)  # still full resolution
    # one pixel moved: the full-resolution stage sees it change two pixels away (5x5), one conv only one away
    torch.manual_seed(0)
    x = torch.zeros(1, 3, 9, 9)
    x[0, :, 4, 4] = 1.0
    for convs, reach in ((2, 2), (1, 1)):
        stage = small_cnn(2, full_res_convs=convs)[: 3 * convs].eval()
        with torch.no_grad():
            changed = (stage(x) - stage(torch.zeros_like(x))).abs().amax(1)[0] > 0
        rows = changed.any(1).nonzero().view(-1)
        assert (rows.min().item(), rows.max().item()) == (4 - reach, 4 + reach)
    assert sum(p.numel() for p in small_cnn(2, full_res_convs=1).parameters()) == 97_937
    with pytest.raises(ValueError, match="at least 1"):
        small_cnn(2, full_res_convs=0)


@pytest.mark.parametrize(
    ("widths", "convs"), [((16, 32, 64, 128), 2), ((24, 48, 96, 192), 2), ((24, 48, 96, 192), 1), ((8, 16), 3)]
)
def test_small_cnn_layout_reads_widths_and_full_resolution_convs_off_the_weights(widths, convs) -> None:
    """Checkpoints of every small-cnn layout so far (24-48-96-192 with one or two full-resolution convolutions,
    then 16-32-64-128) are rebuilt as what they were: the layout comes from the weights, not from today's default."""
    from gpukit.train.models import SMALL_CNN_FULL_RES_CONVS, SMALL_CNN_WIDTHS, build_model, small_cnn, small_cnn_layout

    weights = small_cnn(2, widths=widths, full_res_convs=convs).state_dict()
    assert small_cnn_layout(weights) == (widths, convs)
    rebuilt = build_model("small-cnn", 32, 2, layout=small_cnn_layout(weights))
    rebuilt.load_state_dict(weights)  # strict: every tensor has its place and shape
    assert small_cnn_layout({}) == (SMALL_CNN_WIDTHS, SMALL_CNN_FULL_RES_CONVS)
