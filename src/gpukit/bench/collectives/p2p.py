"""`gpukit bench p2p`: copy bandwidth and latency between every pair of GPUs, one way and both ways at once, with
peer access on and off, beside the link type the hardware topology reports (NVLink count or PCIe path).

One process drives every GPU. "Peer access on" is ``dst.copy_(src)`` across devices: torch enables peer access for
the pair where the hardware allows it, and the copy engine reads the other GPU's memory directly. "Off" is what CUDA
does for a pair without peer access: staged through pinned host memory (device→host, then host→device), done here
explicitly so that it is what was measured whatever the driver would choose. Both ways: the i→j and j→i copies
issued together on each source GPU's own stream; bytes moved count both directions. Bandwidth in GB/s (10⁹ B/s) of
bytes copied (not read + written); latency is the median time of one 4-byte copy. Every copy's destination is
poisoned before and compared with the source after.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gpukit.bench.collectives.results import P2PRow

if TYPE_CHECKING:
    from gpukit.bench.results import Run

__all__ = ["DEFAULT_P2P_BYTES", "link_types", "run_p2p"]

DEFAULT_P2P_BYTES = 256 * 2**20
LATENCY_BYTES = 4


def link_types(count: int) -> dict[tuple[int, int], str | None]:
    """(i, j) → "NV18" / "PIX" / "SYS" … from the hardware topology (NVML); None where unknown."""
    from gpukit.hardware.gpu import read_gpus
    from gpukit.hardware.topology import read_topology

    try:
        gpus, _ = read_gpus()
        topo = read_topology(gpus)
    except Exception:  # no NVML: the link column says n/a, the copies are still measured
        return {}
    idx = list(topo.gpu_indices)
    out: dict[tuple[int, int], str | None] = {}
    for a, row in zip(idx, topo.matrix, strict=False):
        for b, cell in zip(idx, row, strict=False):
            if a != b and a < count and b < count:
                out[(a, b)] = cell
    return out


def unavailable(reason: str) -> list[P2PRow]:
    return [P2PRow(None, None, "one-way", "on", status="unavailable", reason=reason)]


def _time(fn: Callable[[], None], devices: list[int], repeats: int, target_s: float) -> list[float]:
    """Seconds per call of ``fn``: host clock around a loop, every device synchronised before and after (copies
    span two devices, so one device's events would not see the other's stream)."""
    import torch

    def sync() -> None:
        for d in devices:
            torch.cuda.synchronize(d)

    fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    iters = max(1, min(1000, int(target_s / max(time.perf_counter() - t0, 1e-7))))
    out = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        out.append((time.perf_counter() - t0) / iters)
    return out


class _Pair:
    def __init__(self, a: int, b: int, nbytes: int) -> None:
        import torch

        n = nbytes // 4
        self.src = {a: torch.randn(n, device=f"cuda:{a}"), b: torch.randn(n, device=f"cuda:{b}")}
        self.dst = {a: torch.empty(n, device=f"cuda:{b}"), b: torch.empty(n, device=f"cuda:{a}")}  # copy of src[x]
        self.host = {x: torch.empty(n, pin_memory=True) for x in (a, b)}
        self.streams = {x: torch.cuda.Stream(device=x) for x in (a, b)}

    def copy(self, x: int, peer: bool) -> None:
        import torch

        with torch.cuda.stream(self.streams[x]):
            if peer:
                self.dst[x].copy_(self.src[x], non_blocking=True)
            else:  # staged: device → pinned host → other device, as CUDA does without peer access
                self.host[x].copy_(self.src[x], non_blocking=True)
                self.streams[x].synchronize()  # the host buffer is complete before it is sent on
                self.dst[x].copy_(self.host[x], non_blocking=True)

    def check(self, xs: tuple[int, ...]) -> bool:
        import torch

        for x in xs:
            torch.cuda.synchronize(self.dst[x].device)
            if not torch.equal(self.dst[x].cpu(), self.src[x].cpu()):
                return False
        return True

    def poison(self) -> None:
        for t in self.dst.values():
            t.fill_(float("nan"))


def _measure(a: int, b: int, mode: str, peer: bool, pair: _Pair, link: str | None, repeats: int) -> P2PRow:
    xs = (a,) if mode == "one-way" else (a, b)
    nbytes = pair.src[a].numel() * 4
    row = P2PRow(a, b, mode, "on" if peer else "off", link, size_bytes=nbytes)

    def fn() -> None:
        for x in xs:
            pair.copy(x, peer)

    pair.poison()
    fn()
    if not pair.check(xs):
        row.status, row.reason, row.check = "failed", "the copy differs from its source", False
        return row
    samples = _time(fn, [a, b], repeats, 0.05)
    pair.poison()
    fn()
    row.check = pair.check(xs)  # what the timed loop wrote, written again after it and compared
    if not row.check:
        row.status, row.reason = "failed", "the copy differs from its source after the timed loop"
        return row
    med = statistics.median(samples)
    row.time_s = {"median": med, "min": min(samples), "max": max(samples)}
    row.gbps = nbytes * len(xs) / med / 1e9
    return row


def _latency(a: int, b: int, peer: bool) -> float:
    small = _Pair(a, b, LATENCY_BYTES)
    return statistics.median(_time(lambda: small.copy(a, peer), [a, b], 10, 0.02)) * 1e6


@dataclass(frozen=True)
class P2PRequest:
    """What `gpukit bench p2p` measures: bytes per copy and timed samples per row."""

    size_bytes: int = DEFAULT_P2P_BYTES
    repeats: int = 10

    def run(self) -> Run:
        """Every pair, as :func:`run_p2p`, as a :class:`~gpukit.bench.results.Run` (``runner.execute`` calls it)."""
        from gpukit.bench.collectives.results import multi_run

        t0 = time.perf_counter()
        started = datetime.now(UTC).isoformat(timespec="seconds")
        rows = run_p2p(self.size_bytes, self.repeats)
        return multi_run("p2p", started, {"size_bytes": self.size_bytes, "repeats": self.repeats}, list(rows), t0)


def run_p2p(nbytes: int = DEFAULT_P2P_BYTES, repeats: int = 10) -> list[P2PRow]:
    """Every ordered GPU pair × one way / both ways × peer access on / off; an ``unavailable`` row on one GPU."""
    try:
        import torch
    except ImportError:
        return unavailable("torch is not installed (pip install torch)")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        return unavailable("no CUDA GPU: peer-to-peer copies need two")
    if count == 1:
        return unavailable("one GPU: peer-to-peer copies need two (this machine has 1)")
    links = link_types(count)
    rows: list[P2PRow] = []
    for a in range(count):
        for b in range(count):
            if a == b:
                continue
            pair = _Pair(a, b, nbytes)
            for peer in (True, False):
                can = torch.cuda.can_device_access_peer(a, b)
                for mode in ("one-way", "both-ways") if a < b else ("one-way",):
                    row = _measure(a, b, mode, peer, pair, links.get((a, b)), repeats)
                    if peer and not can:
                        row.reason = "this pair has no peer access: the driver staged the copy itself"
                    if row.ok and mode == "one-way":
                        row.latency_us = _latency(a, b, peer)
                    rows.append(row)
            del pair
            torch.cuda.empty_cache()
    return rows


def matrix(rows: list[P2PRow], mode: str = "one-way", peer: str = "on") -> tuple[list[int], list[list[Any]]]:
    """GPU indices and an n×n matrix of GB/s (None on the diagonal and where not measured)."""
    gpus = sorted({r.src for r in rows if r.src is not None} | {r.dst for r in rows if r.dst is not None})
    pos = {g: i for i, g in enumerate(gpus)}
    m: list[list[Any]] = [[None] * len(gpus) for _ in gpus]
    for r in rows:
        if r.ok and r.mode == mode and r.peer_access == peer and r.src is not None and r.dst is not None:
            m[pos[r.src]][pos[r.dst]] = r.gbps
    return gpus, m
