"""Time model sanity, measured-ceiling lookup and the validation history (SQLite)."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest

from gpukit.hardware.specs import get_spec
from gpukit.plan.advisor import make_plan
from gpukit.plan.compute import ceilings_for, estimate_time, step_flops
from gpukit.plan.measure import load_ceilings, save_validation
from gpukit.plan.memory import PlanSettings, estimate_memory
from gpukit.plan.models import load_model


def test_step_flops_is_six_p_tokens_plus_attention() -> None:
    m = load_model("gpt2")
    s = PlanSettings(task="train", batch=2, seq=1024)
    matmul_params = m.params - 1024 * 768  # the position table is a lookup
    per_token = 2 * matmul_params + 4 * 12 * 768 * 1024
    assert step_flops(m, s) == 2 * 1024 * per_token * 3
    assert step_flops(m, dataclasses.replace(s, checkpointing=True)) == 2 * 1024 * per_token * 4


def test_ceilings_use_practical_fraction_and_measurement() -> None:
    s = PlanSettings(task="train", recipe="bf16")
    h200 = get_spec("h200-sxm")
    c = ceilings_for(h200, s)
    assert c.gemm_tflops == pytest.approx(989 * 0.80) and c.matmul_dtype == "bf16"
    assert ceilings_for(get_spec("a100-80gb"), s).gemm_tflops == pytest.approx(312 * 0.87)
    assert ceilings_for(get_spec("v100-sxm2-16gb"), s).matmul_dtype == "fp16"  # no bf16 tensor cores
    m = ceilings_for(h200, s, {"bf16_tflops": 750.0, "bandwidth_gbps": 4175.0})
    assert (m.gemm_tflops, m.bandwidth_gbps) == (750.0, 4175.0) and "measured" in m.source


def test_faster_gpu_is_faster_and_mfu_below_ceiling() -> None:
    m, s = load_model("llama-2-7b"), PlanSettings(task="train", recipe="bf16", batch=8, seq=4096, gpus=8, shard="fsdp")
    mem = estimate_memory(m, s)
    a100 = estimate_time(m, s, mem, get_spec("a100-80gb"), work=1e9)
    h100 = estimate_time(m, s, mem, get_spec("h100-sxm"), work=1e9)
    assert h100.step_s is not None and a100.step_s is not None and h100.step_s < a100.step_s
    assert h100.mfu is not None and 0.2 < h100.mfu < 0.80
    assert h100.steps == round(1e9 / (8 * 4096 * 8))


def test_decode_bandwidth_bound_reads_weights_once() -> None:
    m, s = load_model("llama-2-7b"), PlanSettings(task="infer", batch=1, prompt=1, new_tokens=1)
    mem = estimate_memory(m, s)
    spec = get_spec("h100-sxm")
    t = estimate_time(m, s, mem, spec, {"bandwidth_gbps": 3000.0})
    expected = 1 / ((mem.weights_bytes + mem.kv_cache_bytes) / 3000e9)
    assert t.bandwidth_bound_tokens_per_s == pytest.approx(expected, rel=0.01)


# The H200 step times the planner is judged on are the error table's (test_plan_error_table.py pins its
# predictions; benchmarks/plan-error_h200_2026-12-01.md publishes its errors). The earlier sessions' points
# (benchmarks/plan_calibration_h200_2026-11-30.md) were measured on another host and stack state.


def test_checkpointing_traffic_counts_full_activations() -> None:
    """Checkpointing keeps less but moves more: its GPU time exceeds the plain step's by the recomputed forward."""
    m = load_model("qwen2-0.5b")
    s = PlanSettings(task="train", recipe="amp-bf16", batch=2, seq=2048)
    spec = get_spec("h200-sxm")
    plain = estimate_time(m, s, estimate_memory(m, s), spec)
    ck_s = dataclasses.replace(s, checkpointing=True)
    ck = estimate_time(m, ck_s, estimate_memory(m, ck_s), spec)
    assert plain.gpu_s is not None and ck.gpu_s is not None
    # × 4/3 FLOPs and a third more activation traffic (the optimizer is unchanged); counting only the kept layer
    # inputs made the checkpointed step's GPU time smaller than the plain one's (49.5 vs 58.6 ms) — the old bug
    assert ck.gpu_s > plain.gpu_s * 1.15


def test_validation_history_roundtrip(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    save_validation(
        {
            "device": "NVIDIA H200",
            "model": "gpt2",
            "task": "train",
            "predicted_allocated_bytes": 10,
            "measured_allocated_bytes": 11,
            "predicted_time_s": 0.1,
            "measured_time_s": 0.12,
        },
        db,
    )
    save_validation({"device": "NVIDIA H200", "model": "gpt2", "task": "infer"}, db)
    rows = sqlite3.connect(db).execute("SELECT model, measured_allocated_bytes FROM plan_validations").fetchall()
    assert rows == [("gpt2", 11), ("gpt2", None)]


def _bench_db(path: Path) -> None:
    """A bench run in the results history (gpukit.history), with GEMM rows of every status."""
    import socket

    from gpukit.history import open_history

    rows = [
        ("ok", {"dtype": "bf16", "tflops": 700.0}),
        ("ok", {"dtype": "bf16", "tflops": 750.0}),
        ("failed", {"dtype": "fp8", "tflops": 9999.0}),
        ("ok", {"dtype": "fp32", "tflops": 50.0}),
    ]
    results = [
        {"workload": "gemm", "backend": "torch", "device": "cuda", "size": "8192", "status": status, **row}
        for status, row in rows
    ]
    with open_history(path) as h:
        h.save_run(
            {
                "started_at": "2026-11-30T05:00:00Z",
                "machine": {"hostname": socket.gethostname()},
                "ceilings": {"gpu_name": "NVIDIA H200", "d2d_copy_gbps": 4175.0},
                "results": results,
            }
        )


def test_load_ceilings_absent_and_present(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    assert load_ceilings(db) is None
    _bench_db(db)
    found = load_ceilings(db)
    assert found == {"device": "NVIDIA H200", "bandwidth_gbps": 4175.0, "bf16_tflops": 750.0, "fp32_tflops": 50.0}
    assert load_ceilings(db, device_name="A100") is None


def test_load_ceilings_ignores_foreign_files(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    sqlite3.connect(db).execute("CREATE TABLE runs (x TEXT)").connection.commit()
    assert load_ceilings(db) is None
    (tmp_path / "junk.db").write_text("not sqlite")
    assert load_ceilings(tmp_path / "junk.db") is None


def test_load_ceilings_survives_odd_rows_and_paths(tmp_path: Path) -> None:
    odd = tmp_path / "a?b#c"  # URI delimiters in the path must not change which file is opened
    odd.mkdir()
    _bench_db(odd / "results.db")
    assert load_ceilings(odd / "results.db") == {
        "device": "NVIDIA H200",
        "bandwidth_gbps": 4175.0,
        "bf16_tflops": 750.0,
        "fp32_tflops": 50.0,
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a?b#c"]  # nothing created beside it
    con = sqlite3.connect(odd / "results.db")
    con.execute("UPDATE runs SET ceilings_json = '[1, 2]'")  # valid JSON, not an object
    con.commit()
    con.close()
    assert load_ceilings(odd / "results.db") is None


def test_measured_ceilings_only_apply_to_their_gpu() -> None:
    m, s = load_model("gpt2"), PlanSettings(task="train", batch=8, seq=1024)
    measured = {"device": "NVIDIA H200", "bf16_tflops": 700.0, "bandwidth_gbps": 4000.0}
    plan = make_plan(m, s, work=1e6, measured=measured)
    # the H200 has a measured calibration (shipped), which wins over gpukit bench's large-GEMM ceilings
    assert plan.time_gpu == "h200-sxm" and plan.time is not None and plan.time.calibrated
    other = make_plan(m, s, work=1e6, measured=measured, gpu="h100-sxm")
    assert "measured" not in other.time.ceilings_source
