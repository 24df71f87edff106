"""Node-wide acceptance checks: the peer-to-peer copy matrix and an in-node all-reduce, through `gpukit bench p2p`
and `gpukit bench allreduce`'s own code (``bench.collectives``), each copy and reduction checked there.

Both are written for N GPUs. On one GPU the p2p matrix has no pair (an ``unavailable`` check with the reason) and
the all-reduce runs with one rank (NCCL's single-rank path: checked, but its bus bandwidth is 0 by definition); with
``--device cpu`` the all-reduce runs on two gloo ranks so CI exercises the whole path. A pair slower than the
median of the pairs with the same link type (``fleet.stats``, the peers rule) is named as a weak link.
"""

from __future__ import annotations

from typing import Any

from gpukit.fleet.stats import Thresholds, judge

__all__ = ["ALLREDUCE_BYTES", "P2P_BYTES", "allreduce_check", "p2p_check"]

P2P_BYTES = 64 * 2**20  # at full NVLink rate already (a copy of ~0.15 ms); 56 pairs of an 8-GPU node in ~10 s
ALLREDUCE_BYTES = {"cuda": 256 * 2**20, "cpu": 4 * 2**20}


def p2p_check(thresholds: Thresholds) -> dict[str, Any]:
    """The one-way peer-access copy matrix (GB/s) of every GPU pair, with the weak links flagged."""
    from gpukit.bench.collectives.p2p import matrix, run_p2p

    rows = run_p2p(P2P_BYTES, repeats=5, staged=False, both_ways=False, latency=False)
    if len(rows) == 1 and rows[0].status == "unavailable":
        return {"status": "unavailable", "reason": rows[0].reason}
    failed = [r for r in rows if r.status == "failed"]
    gpus, m = matrix(rows)
    links = {f"{r.src}->{r.dst}": r.link for r in rows}
    out: dict[str, Any] = {"status": "failed" if failed else "ok", "size_bytes": P2P_BYTES, "gpus": gpus,
                           "matrix_gbps": m, "links": links, "flags": []}  # fmt: skip
    if failed:
        out["reason"] = "; ".join(f"GPU {r.src} → GPU {r.dst}: {r.reason}" for r in failed)
    by_link: dict[str | None, list[float]] = {}
    for r in rows:
        if r.ok and r.gbps:
            by_link.setdefault(r.link, []).append(r.gbps)
    for r in rows:
        if r.ok and r.gbps:
            c = judge(r.gbps, by_link[r.link], against="peers", thresholds=thresholds)
            if c.flagged:
                out["flags"].append(f"weak link GPU {r.src} → GPU {r.dst} ({r.link or 'link n/a'}): {r.gbps:,.1f} "
                                    f"GB/s, {c.slowness:.1%} below the {c.median:,.1f} GB/s of its kind")  # fmt: skip
    return out


def allreduce_check(device: str, ranks: int) -> dict[str, Any]:
    """One all-reduce of :data:`ALLREDUCE_BYTES` across ``ranks`` ranks (NCCL on CUDA, gloo on the CPU)."""
    from gpukit.bench.collectives.api import CollectiveRequest, run_collectives
    from gpukit.bench.collectives.results import CollectiveRow, rows_of

    size = ALLREDUCE_BYTES[device]
    req = CollectiveRequest(ops=("allreduce",), device=device, ranks=ranks, sizes=(size,), quick=True,
                            repeats=5, timeout_s=90.0, graph=False)  # fmt: skip
    run = run_collectives(req)
    rows = [r for r in rows_of(run) if isinstance(r, CollectiveRow)]
    row = next((r for r in rows if r.graph == "per-call"), rows[0] if rows else None)
    if row is None:
        return {"status": "failed", "reason": run.settings.get("failure") or "no row came back", "ranks": ranks}
    status = "ok" if row.ok else ("unavailable" if row.status == "unavailable" else "failed")
    return {"status": status, "reason": row.reason, "ranks": row.ranks, "backend": row.backend,
            "size_bytes": row.size_bytes, "check": row.check, "algbw_gbps": row.algbw_gbps,
            "busbw_gbps": row.busbw_gbps, "median_s": (row.time_s or {}).get("median")}  # fmt: skip
