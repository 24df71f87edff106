"""Acceptance documents in the store, on both backends: saved whole, listed newest first (per node), the newest of
each node found through the indexed column, and a node's previous identity for `accept` to name what changed."""

from __future__ import annotations

from typing import Any

import pytest

from gpukit.errors import ConfigError
from gpukit.history import open_history


def _node(name: str, uuids: tuple[str, ...] = ("GPU-a", "GPU-b")) -> dict[str, Any]:
    return {"name": name, "hostname": f"pod-{name}", "driver": "580.159.04", "cuda": "13.0",
            "gpus": [{"index": i, "uuid": u, "serial": f"S{u}", "name": "NVIDIA H200", "pci_bus_id": f"0:{i}"}
                     for i, u in enumerate(uuids)],
            "stack": {"gpukit": "0.1.0"}, "stack_key": "drv580.159.04 cuda13.0 torch2.11.0 gpukit0.1"}  # fmt: skip


def _doc(node: str, verdict: str = "ok", tflops: float = 781.2, **kw: Any) -> dict[str, Any]:
    return {"kind": "gpukit-accept", "version": 1, "started_at": "2026-12-01T20:00:00Z", "duration_s": 71.2,
            "node": _node(node, **kw), "device": "cuda", "verdict": verdict, "reasons": [],
            "gpus": [{"index": 0, "uuid": "GPU-a", "verdict": verdict, "figures": {
                "gemm_bf16_tflops": {"value": tflops, "unit": "TFLOP/s", "higher_is_better": True}}}]}  # fmt: skip


def test_save_list_latest(store_url: str) -> None:
    with open_history(store_url) as h:
        assert h.acceptances() == [] and h.latest_acceptances() == []
        ids = [h.save_acceptance(_doc(n, tflops=t)) for n, t in (("n1", 780.0), ("n2", 700.0), ("n1", 790.0))]
        assert ids == sorted(ids) and len(set(ids)) == 3
        newest = h.acceptances()
        assert [a["id"] for a in newest] == ids[::-1]
        assert newest[0]["gpus"][0]["figures"]["gemm_bf16_tflops"]["value"] == 790.0  # the document, whole
        assert newest[0]["created_at"].endswith("Z") and newest[0]["node"]["gpus"][1]["serial"] == "SGPU-b"
        assert [a["id"] for a in h.acceptances(node="n1")] == [ids[2], ids[0]]
        assert [a["id"] for a in h.acceptances(limit=1)] == [ids[2]]
        latest = h.latest_acceptances()
        assert [(a["node"]["name"], a["id"]) for a in latest] == [("n1", ids[2]), ("n2", ids[1])]


def test_previous_identity_names_the_gpus_a_node_had(store_url: str) -> None:
    with open_history(store_url) as h:
        assert h.previous_identity("n1") is None
        first = h.save_acceptance(_doc("n1", uuids=("GPU-a", "GPU-b")))
        second = h.save_acceptance(_doc("n1", uuids=("GPU-a", "GPU-c")))
        assert [g["uuid"] for g in h.previous_identity("n1")["gpus"]] == ["GPU-a", "GPU-c"]
        before = h.previous_identity("n1", before_id=second)
        assert before is not None and [g["uuid"] for g in before["gpus"]] == ["GPU-a", "GPU-b"]
        assert h.previous_identity("n1", before_id=first) is None and h.previous_identity("n9") is None


def test_a_record_without_a_node_is_stamped_with_this_one(store_url: str) -> None:
    doc = _doc("x")
    del doc["node"]
    with open_history(store_url, node="rack3-n07") as h:
        h.save_acceptance(doc)
        (saved,) = h.acceptances()
        assert saved["node"]["name"] == "rack3-n07" and "stack_key" in saved["node"]
        with pytest.raises(ConfigError, match="names no node"):
            h.save_acceptance({**doc, "node": {"name": " "}})


def _big_doc(node: str, k: int) -> dict[str, Any]:
    """About the size `gpukit accept` writes for an 8-GPU node: 7 figures per GPU with telemetry, a 30 s soak trace."""
    fig = {"value": 781.2, "unit": "TFLOP/s", "higher_is_better": True, "status": "ok", "rel_error": 0.002,
           "telemetry": {"sm_clock_mhz": 1980, "power_w": 690.0, "temp_c": 61, "throttle_reasons": []}}  # fmt: skip
    trace = [
        {"t_s": float(t), "tflops": 770.0, "sm_clock_mhz": 1980, "power_w": 700.0, "temp_c": 60} for t in range(30)
    ]
    gpus = [{"index": i, "uuid": f"GPU-{node}-{i}", "verdict": "ok", "soak": {"trace": trace},
             "figures": {f"figure_{j}": dict(fig) for j in range(7)}} for i in range(8)]  # fmt: skip
    return {**_doc(node), "gpus": gpus, "seq": k}


def test_latest_of_64_nodes_is_fast(store_url: str) -> None:
    """`fleet status` reads the newest acceptance of every node: 64 nodes with a few runs each answer in well under
    the 2 s the fleet has for everything (an indexed MAX(id) per node, then 64 documents)."""
    import time

    with open_history(store_url) as h:
        for k in range(2):
            for n in range(64):
                h.save_acceptance(_big_doc(f"node-{n:02d}", k))
        t0 = time.perf_counter()
        latest = h.latest_acceptances()
        elapsed = time.perf_counter() - t0
    assert [(a["node"]["name"], a["seq"]) for a in latest] == [(f"node-{n:02d}", 1) for n in range(64)]
    assert len(latest[0]["gpus"]) == 8 and elapsed < 0.5, elapsed
