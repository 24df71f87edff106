"""plan's communication term against hand arithmetic: datasheet fallback, the measured curve from the history, and
how much of a step is communication."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpukit.bench.results import Run
from gpukit.hardware.specs import get_spec
from gpukit.history import open_history
from gpukit.plan import comm
from gpukit.plan.advisor import make_plan
from gpukit.plan.memory import PlanSettings, estimate_memory
from gpukit.plan.models import load_model

MiB = 2**20


def test_collective_seconds_by_hand() -> None:
    # 100 MB all-reduce on 8 ranks at 350 GB/s busbw: 1e8 × 1.75 / 3.5e11 = 0.5 ms
    assert comm.collective_s("allreduce", 1e8, 8, 350.0) == pytest.approx(5e-4)
    assert comm.collective_s("allgather", 1e8, 4, 300.0) == pytest.approx(1e8 * 0.75 / 3e11)
    assert comm.collective_s("allreduce", 1e8, 1, 350.0) == 0.0


def test_ddp_term_from_the_datasheet(tmp_path: Path) -> None:
    model = load_model("llama-2-7b", None)
    s = PlanSettings(batch=1, seq=2048, gpus=8, shard="ddp", recipe="bf16")
    plan = make_plan(model, s, gpu="h200-sxm", db=tmp_path / "none.db")
    c = plan.communication
    (term,) = c.terms
    grads = model.params * 2.0  # bf16 gradients
    calls = -(-grads // (25 * MiB))  # DDP's 25 MiB buckets
    assert term.calls == calls and term.busbw_gbps == 370.0  # H200 SXM row of gpus.toml
    assert c.comm_s == pytest.approx(grads * 2 * 7 / 8 / 370e9)
    assert c.busbw_source.startswith("datasheet: 8 GPUs over NVSwitch")
    assert c.step_no_overlap_s == pytest.approx(plan.time.step_s + c.comm_s)
    assert c.comm_fraction == pytest.approx(c.comm_s / (plan.time.step_s + c.comm_s))
    assert c.step_overlap_s == pytest.approx(max(plan.time.step_s, c.comm_s))
    assert any(n.startswith("communication per step ≈") for n in plan.to_dict()["memory_notes"])
    assert plan.to_dict()["communication"]["comm_s"] == pytest.approx(c.comm_s)


def test_fsdp_and_tp_terms_by_hand(tmp_path: Path) -> None:
    model = load_model("llama-2-7b", None)
    spec = get_spec("h100-sxm")
    s = PlanSettings(batch=2, seq=1024, gpus=8, tp=2, shard="fsdp", recipe="amp-bf16")
    mem = estimate_memory(model, s)
    t = type("T", (), {"step_s": 1.0})()
    c = comm.estimate_comm(model, s, mem, t, spec, tmp_path / "none.db")
    assert c is not None
    by = {x.what: x for x in c.terms}
    w_layer = model.params * 4.0 / 2 / model.num_layers  # fp32 weights, TP shard of 2, one layer
    gather = by["fsdp weight all-gather (fwd + bwd)"]
    assert gather.ranks == 4 and gather.calls == 2 * model.num_layers
    assert gather.seconds == pytest.approx(2 * model.num_layers * w_layer * 3 / 4 / 370e9)
    tp = by["TP activation all-reduces"]
    act = 2.0 * 2 * 1024 * model.hidden_size  # b·s·h in bf16
    assert tp.ranks == 2 and tp.calls == 4 * model.num_layers and tp.bytes_per_call == act
    assert tp.seconds == pytest.approx(4 * model.num_layers * act * 1.0 / 370e9)
    dp = c.comm_s - tp.seconds  # TP does not overlap: it is always added
    assert c.step_overlap_s == pytest.approx(max(1.0, dp) + tp.seconds)


def test_no_figure_says_na(tmp_path: Path) -> None:
    c = comm.estimate_comm(load_model("resnet50", None), PlanSettings(gpus=2, batch=32), None, None,
                           get_spec("t4"), tmp_path / "none.db")  # fmt: skip
    assert c is not None and not c.terms and "n/a" in c.lines()[0]
    assert comm.estimate_comm(load_model("resnet50", None), PlanSettings(gpus=1), None, None, get_spec("t4")) is None


def _history_with_busbw(db: Path) -> None:
    rows = [{"op": "allreduce", "size_bytes": s, "dtype": "bf16", "ranks": 2, "device": "cuda", "backend": "nccl",
             "graph": g, "status": "ok", "check": True, "busbw_gbps": b}
            for s, g, b in ((MiB, "per-call", 22.0), (MiB, "captured", 50.0), (64 * MiB, "per-call", 270.0),
                            (GiB_, "per-call", 330.0))]  # fmt: skip
    rows.append(dict(rows[0], ranks=1, busbw_gbps=0.0))
    from gpukit.bench.collectives.results import CollectiveRow, as_result

    settings = {"workloads": ["allreduce"], "kind": "collectives"}
    run = Run("2026-12-01T00:00:00+00:00", {"hostname": "h200x2", "gpus": ["NVIDIA H200"]}, {}, settings,
              results=[as_result(CollectiveRow.from_dict(r)) for r in rows])  # fmt: skip
    with open_history(db) as history:
        history.save_run(run.to_dict())


GiB_ = 2**30


def test_measured_busbw_from_the_history(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    _history_with_busbw(db)
    curve = comm.load_busbw(get_spec("h200-sxm"), db)
    assert curve is not None and curve.source == "measured on h200x2, 2 × NVIDIA H200"
    assert curve.points == ((MiB, 50.0), (64 * MiB, 270.0), (GiB_, 330.0))  # the better of per-call and captured
    assert curve.at(8 * MiB) == pytest.approx(50.0 + 0.5 * 220.0)  # halfway on log size between 1 and 64 MiB
    assert curve.at(1) == 50.0 and curve.at(4 * GiB_) == 330.0
    assert comm.load_busbw(get_spec("h100-sxm"), db) is None  # measured on another GPU: not used for this one
    s = PlanSettings(gpus=2, batch=32, recipe="amp-bf16")
    plan = make_plan(load_model("resnet50", None), s, gpu="h200-sxm", db=db)
    (term,) = plan.communication.terms
    grads = load_model("resnet50", None).params * 4.0
    per_call = grads / term.calls
    assert term.busbw_gbps == pytest.approx(curve.at(per_call))
    assert plan.communication.comm_s == pytest.approx(term.calls * per_call * 1.0 / (term.busbw_gbps * 1e9))
    assert json.dumps(plan.to_dict()["communication"])  # plain JSON
