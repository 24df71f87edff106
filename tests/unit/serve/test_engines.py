"""``--engine``: the choice, the accuracy gate, the cache, the compile engine on the CPU, the CLI's errors.

A deliberately broken engine (the real network, its logits moved) stands in for ``compile`` where the test is about
the choice: it must fail the gate and never serve. The real ``torch.compile`` runs once, on a tiny model, with
inductor's cache in one folder for the whole test session (``INDUCTOR_CACHE``)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from serve_testdata import INDUCTOR_CACHE, SIZE, make_checkpoint

from gpukit.errors import CheckFailed, ConfigError
from gpukit.serve.choose import Candidate, EngineSpec, build_runner, choose
from gpukit.serve.engines import compile_unavailable, inductor_dir, tensorrt_unavailable
from gpukit.serve.gate import PROB_TOL, TOP1_MIN, GateResult, judge, top1

pytest.importorskip("torch")


def _gate(passed: bool, engine: str = "compile") -> GateResult:
    return GateResult(engine, "fp32", 10, "synthetic", 1.0 if passed else 0.5, 0.0 if passed else 0.4, TOP1_MIN,
                      PROB_TOL, passed)  # fmt: skip


def test_choose_takes_the_fastest_that_passed_and_never_one_that_failed():
    eager = Candidate("eager", 0.1, 1000.0, 64, None)
    fast_bad = Candidate("compile", 5.0, 5000.0, 64, _gate(False))
    faster = Candidate("tensorrt", 9.0, 2000.0, 64, _gate(True, "tensorrt"))
    best, reason = choose([eager, fast_bad, faster])
    assert best is faster and "tensorrt 2,000 img/s" in reason and "failed: compile" in reason
    best, reason = choose([eager, fast_bad])
    assert best is eager and "failed: compile" in reason
    broken = Candidate("compile", None, None, 0, None, "RuntimeError: no compiler")
    best, reason = choose([Candidate("eager", 0.1, None, 64, None), broken])
    assert best.engine == "eager"
    with pytest.raises(CheckFailed):
        choose([broken])


def test_the_gate_passes_rounding_and_fails_moved_or_nan_probabilities():
    rng = np.random.default_rng(0)
    p = rng.random((400, 1)).astype(np.float32)
    want = np.concatenate([1 - p, p], axis=1)
    assert judge("x", "bf16", want + 1e-3, want, "synthetic").passed
    moved = want.copy()
    moved[:, 1] = np.clip(moved[:, 1] + 0.03, 0, 1)  # within top-1 mostly, beyond the probability tolerance
    assert not judge("x", "bf16", moved, want, "synthetic").passed
    flipped = want.copy()
    flipped[:3] = flipped[:3, ::-1]  # 3 of 400 labels change: 99.25 % < 99.5 %
    result = judge("x", "fp32", flipped, want, "synthetic")
    assert not result.passed and result.top1_agreement == pytest.approx(397 / 400, abs=0.005)
    nan = want.copy()
    nan[0, 0] = np.nan
    assert not judge("x", "fp32", nan, want, "synthetic").passed
    assert top1(np.array([[0.5, 0.5], [0.6, 0.4]])).tolist() == [1, 0]  # gpukit predict's rule: ties → second


class _Moved:
    """The real network with its logits moved: a wrong engine."""

    def __init__(self, net):
        self.net = net

    def __call__(self, x):
        return self.net(x) + 3.0


@pytest.fixture
def broken_compile(monkeypatch):
    """``compile`` built as a broken engine (no real compiler run), and a count of the runners built."""
    import gpukit.serve.model as model

    built: list[str] = []
    real_init = model.ModelRunner.__init__

    def init(self, *args, engine="eager", **kwargs):
        built.append(engine)
        real_init(self, *args, engine=engine, **kwargs)

    monkeypatch.setattr(model, "engine_net", lambda net, engine, *a: net if engine == "eager" else _Moved(net))
    monkeypatch.setattr(model.ModelRunner, "__init__", init)
    monkeypatch.setattr("gpukit.serve.choose.compile_unavailable", lambda cuda: None)
    return built


def test_auto_gates_a_broken_engine_out_and_serves_eager(tmp_path, broken_compile):
    runner, choice = build_runner(EngineSpec(make_checkpoint(tmp_path / "run"), "cpu", "auto", max_batch=4))
    assert (choice.engine, runner.engine, choice.requested) == ("eager", "eager", "auto")
    compiled = next(c for c in choice.candidates if c.engine == "compile")
    assert compiled.gate is not None and not compiled.gate.passed and compiled.gate.max_abs_dprob > PROB_TOL
    assert "fell back to eager" in choice.reason or "failed: compile" in choice.reason
    assert choice.gate is None and runner.warmed == [1, 2, 4]  # fp32 eager: the reference; warm at every size


def test_no_engine_asked_for_builds_eager_alone_even_on_a_gpu(tmp_path, broken_compile, monkeypatch):
    # compile needs minutes a batch size on a GPU (docs/serve.md): it is never built unless asked for; "cuda" is only
    # the resolved name here, the runner itself is built on the CPU
    monkeypatch.setattr("gpukit.train.distributed.resolve_device", lambda device: "cuda" if device == "gpu" else device)
    from gpukit.serve import choose as chooser

    real = chooser._warmed
    monkeypatch.setattr(chooser, "_warmed", lambda spec, _device, engine, seen: real(spec, "cpu", engine, seen))
    runner, choice = build_runner(EngineSpec(make_checkpoint(tmp_path / "run"), "gpu", None, max_batch=4))
    assert (choice.requested, choice.engine, runner.engine, choice.candidates) == ("eager", "eager", "eager", ())
    assert broken_compile == ["eager"] and choice.gate is None  # fp32 eager: the reference, nothing else built


def test_an_engine_asked_for_by_name_that_fails_the_gate_is_an_error(tmp_path, broken_compile):
    with pytest.raises(CheckFailed, match="failed the accuracy gate") as info:
        build_runner(EngineSpec(make_checkpoint(tmp_path / "run"), "cpu", "compile", max_batch=2))
    assert "--engine eager" in (info.value.hint or "")


def test_the_decision_is_cached_and_a_changed_key_rebuilds(tmp_path, broken_compile, monkeypatch):
    model = make_checkpoint(tmp_path / "run")
    spec = EngineSpec(model, "cpu", "auto", max_batch=2)
    first = build_runner(spec)[1]
    assert not first.cached and broken_compile == ["eager", "compile"]
    entries = json.loads((model / ".gpukit-engine" / "decisions.json").read_text())
    (entry,) = entries.values()
    assert entry["key"]["max_batch"] == 2 and entry["key"]["checkpoint"] and entry["decision"]["engine"] == "eager"
    broken_compile.clear()
    again = build_runner(spec)[1]
    assert again.cached and broken_compile == ["eager"] and again.reason == first.reason  # only the chosen one
    monkeypatch.setattr("gpukit.__version__", "99.0")  # another gpukit: another key
    assert not build_runner(spec)[1].cached and broken_compile == ["eager", "eager", "compile"]
    broken_compile.clear()
    assert not build_runner(EngineSpec(model, "cpu", "auto", max_batch=4))[1].cached  # other batch sizes too
    assert len(json.loads((model / ".gpukit-engine" / "decisions.json").read_text())) == 3


def test_the_gate_uses_the_runs_validation_split(tmp_path):
    from PIL import Image

    from gpukit.serve.gate import gate_images
    from gpukit.train.data import load_folder

    data = tmp_path / "data"
    for c, colour in (("blue", (0, 0, 255)), ("red", (255, 0, 0))):
        (data / c).mkdir(parents=True)
        for i in range(6):
            Image.new("RGB", (20, 20), tuple(min(255, v + 9 * i) for v in colour)).save(data / c / f"{i}.png")
    (data / "red" / "bad.png").write_bytes(b"not a png")
    run = make_checkpoint(tmp_path / "run")
    (run / "settings.json").write_text(json.dumps({"data": str(data), "val_fraction": 0.34, "seed": 3}))
    (run / "skipped.txt").write_text(f"{data / 'red' / 'bad.png'}\tUnidentifiedImageError: x\n")
    want = load_folder(data, SIZE, 0.34, 3, workers=1).val
    got = gate_images(run / "best.json", SIZE)
    assert got.source == "validation" and len(got.images) == len(want) == 4
    assert np.array_equal(got.images, want.images)
    given = gate_images(run / "best.json", SIZE, data / "blue")  # --gate-images wins over the split
    assert given.source == "gate-images" and len(given.images) == 6 and "--gate-images" in given.detail
    (run / "settings.json").unlink()
    assert gate_images(run / "best.json", SIZE).source == "synthetic"
    with pytest.raises(ConfigError, match="is not a folder"):
        gate_images(run / "best.json", SIZE, data / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError):
        gate_images(run / "best.json", SIZE, tmp_path / "empty")


def test_inductor_cache_goes_beside_the_checkpoint_unless_set(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.delenv("_GPUKIT_INDUCTOR_DIR", raising=False)
    ckpt = make_checkpoint(tmp_path / "run") / "best.json"
    assert inductor_dir(ckpt) == tmp_path / "run" / ".gpukit-engine" / "inductor"
    assert (tmp_path / "run" / ".gpukit-engine" / "inductor").is_dir()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    assert inductor_dir(ckpt) == tmp_path / "mine"


@pytest.mark.skipif(bool(compile_unavailable(False)), reason=f"torch.compile on the CPU: {compile_unavailable(False)}")
def test_the_compile_engine_runs_padded_on_the_cpu_and_matches_eager(tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(INDUCTOR_CACHE))
    monkeypatch.setattr("torch._inductor.config.compile_threads", 1)  # no compile worker pool to start on 2 cores
    model = make_checkpoint(tmp_path / "run")
    runner, choice = build_runner(EngineSpec(model, "cpu", "compile", max_batch=4))
    assert choice.engine == runner.engine == "compile" and choice.gate is not None and choice.gate.passed
    assert choice.gate.max_abs_dprob < 1e-4 and choice.build_s > 0 and runner.warmed == [1, 2, 4]
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    images = [np.random.default_rng(i).integers(0, 256, (3, SIZE, SIZE), dtype=np.uint8) for i in range(3)]
    probs, _ = runner.run_items(list(images))  # 3 rows: padded to 4, no new compile
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs and probs.shape == (3, 2)
    eager, _ = build_runner(EngineSpec(model, "cpu", "eager", max_batch=4))[0].run_items(list(images))
    assert probs == pytest.approx(eager, abs=1e-5)


@pytest.mark.skipif(tensorrt_unavailable(True) is None, reason="torch_tensorrt is installed here")
def test_tensorrt_without_its_package_is_a_usage_error(tmp_path, run_cli):
    model = make_checkpoint(tmp_path / "run")
    for args in (["serve", str(model)], ["predict", str(model), str(tmp_path)], ["export", str(model)]):
        r = run_cli(*args, "--engine", "tensorrt", "--device", "cpu")
        assert r.exit_code == 2 and "error: --engine tensorrt: torch_tensorrt is not installed" in r.stderr
        assert "hint: pip install torch-tensorrt" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.skipif(tensorrt_unavailable(True) is not None, reason=f"TensorRT: {tensorrt_unavailable(True)}")
def test_tensorrt_engine_is_gated_on_a_gpu(tmp_path):  # pragma: no cover - no machine here has TensorRT
    _, choice = build_runner(EngineSpec(make_checkpoint(tmp_path / "run"), "cuda", "tensorrt", max_batch=4))
    assert choice.engine == "tensorrt" and choice.gate is not None


def test_cli_refuses_a_bad_engine_and_an_empty_export(tmp_path, run_cli):
    model = make_checkpoint(tmp_path / "run")
    r = run_cli("serve", str(model), "--engine", "fast")
    assert r.exit_code == 2 and "--engine must be one of auto, eager, compile, tensorrt" in r.stderr
    r = run_cli("predict", str(model), str(tmp_path), "--engine", "fast")
    assert r.exit_code == 2 and "is not an engine" in r.stderr
    r = run_cli("export", str(model))
    assert r.exit_code == 2 and "error: nothing to export" in r.stderr and "hint: give --onnx" in r.stderr
    r = run_cli("serve", str(model), "--gate-images", str(tmp_path / "nowhere"))
    assert r.exit_code == 2 and "is not a folder" in " ".join(r.stderr.split()) and "Traceback" not in r.stderr


def test_predict_with_an_engine_gives_the_eager_answers(tmp_path, run_cli, broken_compile):
    from serve_testdata import image_bytes

    model = make_checkpoint(tmp_path / "run")
    images = tmp_path / "images"
    images.mkdir()
    for i in range(5):
        (images / f"{i}.png").write_bytes(image_bytes("PNG", (SIZE, SIZE), seed=i))
    plain = run_cli("predict", str(model), str(images), "--json", "--device", "cpu")
    auto = run_cli("predict", str(model), str(images), "--json", "--device", "cpu", "--engine", "auto")
    assert plain.exit_code == auto.exit_code == 0 and "engine eager (fp32); asked auto" in auto.stderr
    rows, rows_auto = json.loads(plain.stdout), json.loads(auto.stdout)
    assert [r["label"] for r in rows] == [r["label"] for r in rows_auto]
    assert [r["probability"] for r in rows] == pytest.approx([r["probability"] for r in rows_auto], abs=1e-5)
    bad = run_cli("predict", str(model), str(images), "--device", "cpu", "--engine", "compile")
    assert bad.exit_code == 1 and "failed the accuracy gate" in bad.stderr and "hint:" in bad.stderr
