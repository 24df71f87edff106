"""`gpukit train` on a CUDA GPU: the CUDA-graph step trains like the eager one; the host cache path works."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "train"))
from train_testdata import make_folder  # noqa: E402

from gpukit.train import checkpoint  # noqa: E402
from gpukit.train.config import TrainConfig  # noqa: E402
from gpukit.train.loop import train  # noqa: E402


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_folder(tmp_path_factory.mktemp("g") / "data", per_class=200, size=32)


def _run(data: Path, out: Path, **kw: object):  # type: ignore[no-untyped-def]
    base = dict(model="seed-cnn", epochs=2, batch_size=16, image_size=32, device="cuda", seed=1, min_steps=0)
    return train(TrainConfig(data=data, out=out, **{**base, **kw}))  # type: ignore[arg-type]


def test_cuda_graph_step_trains_like_the_eager_step(data: Path, tmp_path: Path) -> None:
    graphed = _run(data, tmp_path / "g", amp="off")
    eager = _run(data, tmp_path / "e", amp="off", cuda_graphs=False)
    assert graphed.cuda_graphs and not eager.cuda_graphs, graphed.notes
    assert graphed.epochs[-1].val_accuracy == eager.epochs[-1].val_accuracy == 1.0
    a = checkpoint.load(tmp_path / "g" / "last.json")[0]
    b = checkpoint.load(tmp_path / "e" / "last.json")[0]
    for key in a:  # the same steps; only cuDNN's non-deterministic reductions differ
        torch.testing.assert_close(a[key], b[key], atol=2e-3, rtol=2e-2)
    assert graphed.epochs[0].train_loss == pytest.approx(eager.epochs[0].train_loss, rel=1e-3)


def test_bf16_graph_and_host_cache_paths_learn(data: Path, tmp_path: Path) -> None:
    fast = _run(data, tmp_path / "f")
    assert fast.amp == "bf16" and fast.cache == "gpu" and fast.cuda_graphs
    host = _run(data, tmp_path / "h", cache="cpu")
    assert host.cache == "cpu" and not host.cuda_graphs and host.epochs[-1].data_wait_s > 0
    for result in (fast, host):
        assert result.epochs[-1].val_accuracy >= 0.95
        assert result.epochs[-1].gpu_util_pct is None or 0 <= result.epochs[-1].gpu_util_pct <= 100


def test_resnet18_resume_on_gpu(data: Path, tmp_path: Path) -> None:
    _run(data, tmp_path / "r", model="resnet18", epochs=1)
    resumed = _run(data, tmp_path / "r", model="resnet18", epochs=2, resume=True)
    assert resumed.resumed_from and [e.epoch for e in resumed.epochs] == [1, 2] and resumed.cuda_graphs


def test_validation_is_what_predict_gives_and_the_scheduled_graph_matches_eager(data: Path, tmp_path: Path) -> None:
    """Validation runs in fp32 like predict: the recorded accuracy is predict's on the same images. The CUDA
    graph reads the learning rate from the schedule table on the device; the eager step takes the same rates."""
    from gpukit.train.data import load_folder
    from gpukit.train.predict import predict

    graphed = _run(data, tmp_path / "g", amp="off", epochs=3, min_steps=100)
    eager = _run(data, tmp_path / "e", amp="off", epochs=3, min_steps=100, cuda_graphs=False)
    assert graphed.cuda_graphs and graphed.planned_epochs == eager.planned_epochs > 3
    assert graphed.epochs[-1].train_loss == pytest.approx(eager.epochs[-1].train_loss, rel=2e-2)
    val = load_folder(data, 32, 0.2, 1).val  # the run's split: same folder, size, fraction and seed
    rows, _ = predict(tmp_path / "g" / "last.json", [Path(p) for p in val.paths], device="cuda")
    accuracy = sum(Path(r.path).parent.name == r.label for r in rows) / len(rows)
    assert accuracy == graphed.epochs[-1].val_accuracy


@pytest.mark.parametrize("scaled", [False, True])
def test_trainer_adam_is_torch_adam_fused_capturable_on_the_gpu(scaled: bool) -> None:
    """The trainer's configuration (fused, capturable, a device lr set in place), with and without fp16's
    GradScaler: the same bits and state as torch.optim.Adam's."""
    from gpukit.train.adam import Adam

    def run(make):  # type: ignore[no-untyped-def]
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                  torch.nn.Linear(8 * 14 * 14, 3)).cuda()  # fmt: skip
        lr = torch.tensor(1e-2, device="cuda")
        opt = make(net.parameters(), lr)
        scaler = torch.amp.GradScaler("cuda", init_scale=2.0**20) if scaled else None
        g = torch.Generator(device="cuda").manual_seed(1)
        for i in range(8):
            x = torch.randn(4, 3, 16, 16, device="cuda", generator=g)
            y = torch.randint(0, 3, (4,), device="cuda", generator=g)
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.float16, enabled=scaled):
                loss = torch.nn.functional.cross_entropy(net(x).float(), y)
            lr.fill_(1e-2 / (1 + i))
            if scaler is None:
                loss.backward()
                opt.step()
            else:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
        return net, opt, scaler

    ours, o_opt, o_sc = run(lambda p, lr: Adam(p, lr=lr, fused=True, capturable=True))
    ref, r_opt, r_sc = run(lambda p, lr: torch.optim.Adam(p, lr=lr, fused=True, capturable=True))
    for a, b in zip(ours.parameters(), ref.parameters(), strict=True):
        assert torch.equal(a, b)
        for key in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(o_opt.state[a][key], r_opt.state[b][key])
    steps = float(o_opt.state[next(ours.parameters())]["step"])
    assert steps > 0
    if scaled:  # 2**20 overflows fp16 gradients at first: skipped steps and a lowered scale, the same in both
        assert o_sc.get_scale() == r_sc.get_scale()
        assert (steps < 8) == (o_sc.get_scale() < 2.0**20)


def test_the_default_recipe_step_never_syncs_and_is_graphed(data: Path, tmp_path: Path) -> None:
    """The default recipe (small-cnn; crop, shift and colour jitter on the device; AdamW; label smoothing): the
    eager step under CUDA's sync debug mode raises on any host sync, and the run captures its step as a graph."""
    from gpukit.train.adam import Adam
    from gpukit.train.augment import recipe
    from gpukit.train.loop import epoch_plan
    from gpukit.train.models import small_cnn
    from gpukit.train.schedule import lr_table
    from gpukit.train.step import Stepper

    images = torch.randint(0, 256, (64, 3, 32, 32), dtype=torch.uint8, device="cuda")
    labels = torch.randint(0, 2, (64,), device="cuda")
    net = small_cnn(2).cuda().to(memory_format=torch.channels_last)
    lr = torch.tensor(2e-3, device="cuda")
    opt = Adam(net.parameters(), lr=lr, weight_decay=0.05, fused=True, capturable=True)
    stepper = Stepper(net, opt, images, labels, 4, 16, torch.device("cuda"), torch.bfloat16, True, smoothing=0.1)
    perm, theta, jitter = epoch_plan(0, 0, 64, 4, 16, recipe("default"))
    stepper.load_epoch(perm, theta, 0, jitter, lr_table(0, 4, 1, 2e-3, "cosine", 0.05))
    stepper.step()  # lazy optimizer state and cuDNN set-up may sync once, outside the check
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            stepper.step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert int(stepper.counter) == 4
    result = _run(data, tmp_path / "d", model="small-cnn", augment=recipe("default"), min_steps=200,
                  weight_decay=0.05, label_smoothing=0.1)  # fmt: skip
    assert result.cuda_graphs and result.verdict == "generalised", result.notes
    assert result.epochs[-1].val_accuracy >= 0.95
