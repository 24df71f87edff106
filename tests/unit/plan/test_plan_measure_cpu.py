"""The `--measure` path and the grid's row builder, run on the CPU with torch.cuda's timing and memory calls stubbed.

The numbers mean nothing here; what is checked is that the real code path (model built from config, ≥ 2 steps,
phase peaks, a generate() call, the history record, the grid row) runs end to end without a GPU.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from gpukit.plan import measure as measuring  # noqa: E402
from gpukit.plan.memory import PlanSettings  # noqa: E402
from gpukit.plan.models import load_model, parse_hf_config  # noqa: E402

HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
ROOT = Path(__file__).resolve().parents[3]
TINY_LLAMA = {"model_type": "llama", "vocab_size": 128, "hidden_size": 32, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 64}  # fmt: skip


class FakeEvent:
    def __init__(self, enable_timing: bool = False) -> None:
        self.t = 0.0

    def record(self) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.t - self.t) * 1e3


@pytest.fixture
def cpu_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measuring, "DEVICE", "cpu")
    counter = iter(range(1, 10**6))
    stubs: dict[str, Any] = {
        "synchronize": lambda: None, "reset_peak_memory_stats": lambda: None,
        "max_memory_allocated": lambda: 1000 + next(counter), "memory_allocated": lambda: 500,
        "max_memory_reserved": lambda: 4096, "get_device_name": lambda: "CPU stand-in", "empty_cache": lambda: None,
        "Event": FakeEvent,
    }  # fmt: skip
    for name, value in stubs.items():
        monkeypatch.setattr(torch.cuda, name, value)


def test_measure_trains_the_seed_cnn(cpu_cuda: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measuring, "TIMED_S", 0.0)  # no extra samples for a short step: the asked steps alone
    m = measuring.measure(load_model("seed-cnn"), PlanSettings(task="train", recipe="fp32", batch=4), steps=5)
    assert m.device_name == "CPU stand-in" and m.step_s is not None and m.step_s > 0
    # steps 4 and 5; step 1 allocates Adam state, step 2 records phase peaks, step 3 runs under the profiler
    assert len(m.step_samples_s) == 2
    assert {"forward_peak_allocated_bytes", "backward_peak_allocated_bytes", "step_peak_allocated_bytes"} <= set(
        m.phases
    )
    # the stand-in reports 500 bytes allocated before the run (and a peak above 1000): they are not the run's
    assert 500 < m.peak_allocated_bytes < 1000 + 10**6 - 500
    assert all(v < 10**6 for k, v in m.phases.items() if k.endswith("_allocated_bytes"))


def test_a_short_step_gets_more_samples(cpu_cuda: None, monkeypatch: pytest.MonkeyPatch) -> None:
    s = PlanSettings(task="train", recipe="fp32", batch=4)
    monkeypatch.setattr(measuring, "TIMED_S", 1e9)  # every step is short against this: capped at MAX_TIMED
    monkeypatch.setattr(measuring, "MAX_TIMED", 7)
    m = measuring.measure(load_model("seed-cnn"), s, steps=5)
    assert len(m.step_samples_s) == 7 and m.step_s == statistics.median(m.step_samples_s)
    assert len(measuring.measure(load_model("seed-cnn"), s, steps=3).step_samples_s) == 1  # a quick look: as asked


def test_cublas_workspaces_are_released_before_the_base_is_read(
    cpu_cuda: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workspaces an earlier GEMM left are the run's to allocate again (the plan counts them): they are freed
    before the allocated base is read, not taken off the peak with it."""
    calls: list[str] = []
    monkeypatch.setattr(torch._C, "_cuda_clearCublasWorkspaces", lambda: calls.append("clear"), raising=False)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda: calls.append("base") or 500)
    measuring.measure(load_model("seed-cnn"), PlanSettings(task="train", recipe="fp32", batch=4), steps=3)
    assert calls[:2] == ["clear", "base"]


def test_what_was_allocated_before_the_run_is_not_counted() -> None:
    """A process that already holds GPU memory (an earlier model, a notebook) measures only the run's own peak."""
    m = measuring.Measurement("GPU", 5000, 9000, phases={"forward_peak_allocated_bytes": 4000,
                                                           "forward_end_allocated_bytes": 3000})  # fmt: skip
    out = measuring._without_base(m, 1000)
    assert out.peak_allocated_bytes == 4000 and out.peak_reserved_bytes == 9000
    assert out.phases == {"forward_peak_allocated_bytes": 3000, "forward_end_allocated_bytes": 2000}


def test_measure_bf16_cnn_input_matches_weights(cpu_cuda: None) -> None:
    m = measuring.measure(load_model("seed-cnn"), PlanSettings(task="train", recipe="bf16", batch=2), steps=2)
    assert m.step_s is not None and len(m.step_samples_s) == 1


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers not installed")
@pytest.mark.parametrize("kw", [dict(recipe="amp-bf16"), dict(recipe="bf16", checkpointing=True),
                                dict(recipe="fp32", attn="eager")])  # fmt: skip
def test_measure_trains_a_transformer_from_config(cpu_cuda: None, kw: dict[str, Any]) -> None:
    spec = parse_hf_config(TINY_LLAMA, "tiny")
    m = measuring.measure(spec, PlanSettings(task="train", batch=2, seq=16, **kw), steps=3)
    assert m.step_s is not None and "transformers" in m.versions


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers not installed")
def test_measure_generates(cpu_cuda: None) -> None:
    spec = parse_hf_config(TINY_LLAMA, "tiny")
    m = measuring.measure(spec, PlanSettings(task="infer", batch=2, prompt=20, new_tokens=5))
    assert m.new_tokens == 5 and m.generate_s is not None and m.generate_s > 0


def test_measure_refuses_what_it_cannot_build(cpu_cuda: None) -> None:
    from gpukit.errors import PlanError

    with pytest.raises(PlanError):
        measuring.measure(load_model(None, "7B"), PlanSettings(task="train"))
    with pytest.raises(PlanError, match="bf16-master"):
        measuring.measure(load_model("seed-cnn"), PlanSettings(task="train", recipe="bf16-master"))


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers not installed")
def test_grid_row_and_table(cpu_cuda: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks" / "scripts"))
    sys.modules.pop("plan_grid", None)
    import plan_grid

    assert len(plan_grid.GRID) >= 12
    monkeypatch.setattr(plan_grid, "_model", lambda name: parse_hf_config(TINY_LLAMA, name))
    rows = [
        plan_grid.run_one("tiny", dict(task="train", recipe="amp-bf16", batch=2, seq=16), tmp_path / "r.db"),
        plan_grid.run_one("tiny", dict(task="infer", batch=1, prompt=8, new_tokens=3), tmp_path / "r.db"),
    ]
    for row in rows:
        assert row["gpu"] == "h200-sxm" and row["meas_alloc"] > 0 and row["time_err"] is not None
        assert isinstance(row["pass"], bool)
    text = plan_grid.table(rows)
    assert "tiny amp-bf16 b2 s16" in text and "configurations within ±10% memory" in text
    import sqlite3

    assert sqlite3.connect(tmp_path / "r.db").execute("SELECT COUNT(*) FROM plan_validations").fetchone() == (2,)


def test_cli_measure_prints_comparison_and_stores_it(cpu_cuda: None, run_cli: Any, tmp_path: Path) -> None:
    import json
    import sqlite3

    db = tmp_path / "h.db"
    r = run_cli("plan", "seed-cnn", "--batch", "4", "--recipe", "fp32", "--measure", "--db", str(db), "--json")
    assert r.exit_code == 0, r.stderr
    cmp = json.loads(r.stdout)["measurement"]
    assert set(cmp["rows"]) == {"peak allocated", "peak reserved", "step time"}
    assert cmp["measured_time_s"] > 0 and cmp["db"] == str(db)
    assert sqlite3.connect(db).execute("SELECT model FROM plan_validations").fetchall() == [("seed-cnn",)]
    table = run_cli("plan", "seed-cnn", "--batch", "4", "--recipe", "fp32", "--measure", "--db", str(db))
    assert table.exit_code == 0 and "predicted vs measured" in table.stdout


def test_cli_measure_predicts_time_only_for_a_known_gpu(
    cpu_cuda: None, run_cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    args = ("plan", "seed-cnn", "--batch", "4", "--recipe", "fp32", "--measure", "--db", str(tmp_path / "h.db"))
    unknown = json.loads(run_cli(*args, "--json").stdout)["measurement"]  # "CPU stand-in": no datasheet row
    assert unknown["predicted_time_s"] is None and unknown["rows"]["step time"]["error"] == "n/a"
    assert unknown["rows"]["peak allocated"]["error"] != "n/a"  # memory does not depend on the GPU
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "NVIDIA H200")
    known = json.loads(run_cli(*args, "--json").stdout)["measurement"]
    assert known["device"] == "NVIDIA H200" and known["predicted_time_s"] > 0


def test_measure_splits_the_step_into_phases(cpu_cuda: None) -> None:
    m = measuring.measure(load_model("seed-cnn"), PlanSettings(task="train", recipe="fp32", batch=4), steps=5)
    assert set(m.phase_s) == {"forward", "backward", "optimizer"}
    assert sum(m.phase_s.values()) == pytest.approx(m.step_s, rel=0.5)  # medians per phase vs median of steps
    assert set(m.profile) == {"forward", "backward", "optimizer"}
    for part in m.profile.values():  # the CPU has no kernels: device time 0, host time the phase's span
        assert part["host_s"] > 0 and part["device_s"] == 0


def test_phase_split_reads_each_range_host_span() -> None:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with torch.profiler.record_function("gpukit:forward"):
            time.sleep(0.02)
            torch.ones(8).sum()
        with torch.profiler.record_function("gpukit:backward"):
            time.sleep(0.005)
    split = measuring.phase_split(prof, ("forward", "backward", "missing"))
    assert set(split) == {"forward", "backward"}
    assert 0.02 <= split["forward"]["host_s"] < 0.5 and 0.005 <= split["backward"]["host_s"] < 0.5


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers not installed")
def test_measure_generate_reports_cold_prefill_and_per_token(cpu_cuda: None) -> None:
    spec = parse_hf_config(TINY_LLAMA, "tiny")
    m = measuring.measure(spec, PlanSettings(task="infer", batch=1, prompt=8, new_tokens=4))
    assert m.cold_generate_s is not None and m.cold_generate_s > 0
    assert m.phase_s["prefill"] > 0 and m.generate_s is not None
    assert m.phase_s["decode_token"] == pytest.approx((m.generate_s - m.phase_s["prefill"]) / 3)
    assert m.profile["prefill"]["host_s"] > 0 and "decode_token" in m.profile


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers not installed")
@pytest.mark.parametrize("variant", ["non-reentrant", "reentrant"])
def test_both_checkpointing_variants_train(cpu_cuda: None, variant: str) -> None:
    spec = parse_hf_config(TINY_LLAMA, "tiny")
    s = PlanSettings(task="train", recipe="fp32", batch=1, seq=8, checkpointing=True, checkpoint_variant=variant)
    module = measuring.build_module(spec, s, device="cpu")
    layer = module.model.layers[0]
    assert layer.gradient_checkpointing
    fn = getattr(layer, "_gradient_checkpointing_func", None)
    assert fn is not None and fn.keywords["use_reentrant"] is (variant == "reentrant")
    assert measuring.measure(spec, s, steps=3).step_s is not None


def test_cli_measure_prints_per_phase_prediction(
    cpu_cuda: None, run_cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "NVIDIA H200")
    args = ("plan", "seed-cnn", "--batch", "4", "--recipe", "fp32", "--measure", "--db", str(tmp_path / "h.db"))
    cmp = json.loads(run_cli(*args, "--json").stdout)["measurement"]
    phases = {p["phase"]: p for p in cmp["phases"]}
    assert set(phases) == {"forward", "backward", "optimizer"}
    for p in phases.values():
        assert p["predicted_s"] > 0 and p["measured_s"] > 0 and p["measured_host_s"] > 0 and p["bound"]
    text = run_cli(*args).stdout
    assert "per phase" in text and "optimizer" in text and "time model:" in text


def test_cli_calibrate_without_gpu_is_a_clear_failure(run_cli: Any) -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    r = run_cli("plan", "--calibrate")
    assert r.exit_code == 1 and "needs a CUDA GPU" in r.stderr and "hint:" in r.stderr


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers not installed")
def test_error_grid_row_and_table(cpu_cuda: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The H200 error table's two scripts on the CPU: a measured row is written as it goes, and the table's fit
    never reads a held-out row."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks" / "scripts"))
    for mod in ("plan_error_grid", "plan_error_table"):
        sys.modules.pop(mod, None)
    import plan_error_grid as grid
    import plan_error_table as table

    assert len(grid.CONFIGS) >= 30 and 0.3 <= sum(c[3] for c in grid.CONFIGS) / len(grid.CONFIGS) <= 0.4
    two = [("seed-cnn", dict(task="train", recipe="fp32", batch=b), None, b == 8) for b in (4, 8)]
    monkeypatch.setattr(grid, "CONFIGS", two)
    for i in range(2):
        grid.measure_row(i, tmp_path)
    rows = table.load_rows(tmp_path)
    assert [r["held_out"] for r in rows] == [False, True] and all("phase_s" in r["measured"] for r in rows)
    from gpukit.plan.calibration import load_calibration

    cal = load_calibration(ROOT / "tests" / "fixtures" / "plan" / "calibration" / "synthetic-h200.json")
    p = table.predict(rows[0], cal, table.TIMING)
    assert p["kind"] == "train" and p["time_err"] is not None and p["mem_err"] > -1
    seen: list[str] = []
    real = table.predict
    monkeypatch.setattr(table, "predict", lambda r, c, prof: seen.append(r["config"]) or real(r, c, prof))
    fitted = table.fit(rows, cal)  # a CNN row only: the CNN stage runs, the transformer stages have nothing
    assert seen and set(seen) == {rows[0]["config"]}
    assert fitted.cnn_elementwise_passes in table.CNN_PASSES and fitted.cnn_overlap_penalty in table.PENALTIES
    assert fitted.elementwise_passes == table.TIMING.elementwise_passes
    s = table.summary(rows, [p, table.predict(rows[1], cal, table.TIMING)])
    assert s["held_out"]["step_time"]["n"] == 1 and s["fit"]["memory"]["n"] == 1
