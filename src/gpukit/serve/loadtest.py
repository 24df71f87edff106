"""`gpukit loadtest`: a load generator in several processes, closed or open loop, that reports its own CPU use.

Bounded in time (``duration_s`` after ``warmup_s``) and count (``max_requests``); it sends only to loopback unless
the user names the host (``allow_hosts``). Every process posts the same pre-built multipart requests (one per
image, cycled) over keep-alive connections; results are merged here: throughput, latency percentiles, status
counts, the server's ``Server-Timing`` stages summed, and the generator's CPU seconds per process, so a saturated
generator (a process near 100 % of a core) is visible rather than mistaken for a slow server.
"""

from __future__ import annotations

import ipaddress
import json
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gpukit.errors import ConfigError
from gpukit.hardware.cpu import cpu_budget

__all__ = ["LoadResult", "LoadSpec", "build_request", "check_target", "run_loadtest", "shortfall"]

_SUFFIXES = {
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".png": "image/png",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
SATURATED_CPU = 0.85  # a generator process above this share of one core may be the bottleneck


@dataclass
class LoadSpec:
    url: str
    images: list[Path]
    concurrency: int = 64
    duration_s: float = 30.0
    warmup_s: float = 1.0
    rate: float | None = None  # requests/s in all; None = closed loop
    processes: int = 0  # 0 = min(cores, concurrency, 8)
    max_requests: int = 10_000_000
    timeout_s: float = 30.0
    allow_hosts: tuple[str, ...] = ()
    api_key: str | None = None
    raw: bool = False  # post raw image bytes instead of multipart

    def validate(self) -> LoadSpec:
        checks = [
            (self.concurrency >= 1, "--concurrency must be at least 1"),
            (0 < self.duration_s <= 3600, "--duration must be in (0, 3600] seconds"),
            (0 <= self.warmup_s <= 600, "--warmup must be in [0, 600] seconds"),
            (self.rate is None or self.rate > 0, "--rate must be positive"),
            (self.processes >= 0, "--processes must be at least 1 (or 0 for automatic)"),
            (self.max_requests >= 1, "--max-requests must be at least 1"),
            (bool(self.images), "no image to send (give --image FILE_OR_DIR)"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        return self


@dataclass
class LoadResult:
    url: str
    mode: str  # "closed" or "open"
    concurrency: int
    rate: float | None
    processes: int
    duration_s: float
    images: int
    requests: int  # answered inside the measured window
    sent: int  # every request sent, warm-up and the tail included (what the server saw)
    missed: int  # open loop: due but no free connection
    throughput_rps: float
    ok_rps: float
    latency_ms: dict[str, float | None]  # p50, p90, p99, max, mean
    statuses: dict[str, int]
    server_timing_ms: dict[str, float]  # summed over measured requests
    server_timing_mean_ms: dict[str, float]
    generator_cpu_s: float
    generator_cpu_per_process: list[float]  # share of one core, per process
    generator_saturated: bool
    errors: list[str] = field(default_factory=list)
    model: dict[str, Any] | None = None
    started_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_target(url: str, allow_hosts: tuple[str, ...]) -> tuple[str, int, str]:
    """(host, port, path) of an http:// URL whose host is loopback or named in ``allow_hosts``."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ConfigError(f"{url!r} is not an http:// URL", hint="e.g. http://127.0.0.1:8000/v1/predict")
    host = parts.hostname
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and host not in allow_hosts:
        raise ConfigError(
            f"{host} is not a loopback address; gpukit loadtest sends load only where you say",
            hint=f"add --allow-host {host} if this is your server",
        )
    path = parts.path if parts.path not in ("", "/") else "/v1/predict"
    if parts.query:
        path += "?" + parts.query
    return host, parts.port or 80, path


def build_request(host: str, port: int, path: str, image: Path, api_key: str | None, raw: bool) -> bytes:
    data = image.read_bytes()
    kind = _SUFFIXES.get(image.suffix.lower(), "application/octet-stream")
    if raw:
        body, content_type = data, kind
    else:
        boundary = uuid.uuid4().hex
        body = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{image.name}"\r\n'
                f"Content-Type: {kind}\r\n\r\n"
            ).encode()
            + data
            + f"\r\n--{boundary}--\r\n".encode()
        )
        content_type = f"multipart/form-data; boundary={boundary}"
    head = f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: {content_type}\r\n"
    head += f"Content-Length: {len(body)}\r\n"
    if api_key:
        head += f"X-API-Key: {api_key}\r\n"
    return (head + "\r\n").encode() + body


def collect_images(inputs: list[Path], limit: int = 256) -> list[Path]:
    files: list[Path] = []
    for item in inputs:
        if item.is_dir():
            files += sorted(p for p in item.rglob("*") if p.suffix.lower() in _SUFFIXES)
        elif item.is_file():
            files.append(item)
        else:
            raise ConfigError(f"{item} does not exist", hint="give an image file or a folder of images")
    if not files:
        raise ConfigError("no image found to send", hint="give --image FILE_OR_DIR with .jpg/.png/.gif/.webp files")
    return files[:limit]


def _model_of(host: str, port: int) -> dict[str, Any] | None:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{host}:{port}/v1/model", timeout=2) as r:
            return dict(json.loads(r.read()))
    except (OSError, ValueError):
        return None


def _split(total: float, parts: int) -> list[float]:
    return [total / parts] * parts


def run_loadtest(spec: LoadSpec) -> LoadResult:
    import multiprocessing as mp

    import numpy as np

    from gpukit.serve._loadgen import Work, run_process

    spec.validate()
    host, port, path = check_target(spec.url, spec.allow_hosts)
    requests = [build_request(host, port, path, p, spec.api_key, spec.raw) for p in spec.images]
    procs = spec.processes or min(cpu_budget(), spec.concurrency, 8)
    procs = min(procs, spec.concurrency)
    conns = [spec.concurrency // procs + (1 if i < spec.concurrency % procs else 0) for i in range(procs)]
    rates = _split(spec.rate, procs) if spec.rate else [None] * procs
    caps = [spec.max_requests // procs + (1 if i < spec.max_requests % procs else 0) for i in range(procs)]
    start_at = time.time() + 0.5 + 0.15 * procs  # every process starts its clock together
    works = [
        Work(host, port, requests, c, spec.duration_s, spec.warmup_s, r, m, spec.timeout_s, start_at)
        for c, r, m in zip(conns, rates, caps, strict=True)
    ]
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if procs == 1:
        results = [run_process(works[0])]
    else:
        with mp.get_context("spawn").Pool(procs) as pool:
            results = pool.map(run_process, works)
    lat = np.asarray([x for r in results for x in r.latencies_s], dtype=np.float64) * 1000
    statuses: dict[str, int] = {}
    timing: dict[str, float] = {}
    for r in results:
        for code, count in r.statuses.items():
            statuses[str(code)] = statuses.get(str(code), 0) + count
        for stage, ms in r.timing_ms.items():
            timing[stage] = timing.get(stage, 0.0) + ms
    measured = max(r.measured_s for r in results)
    n = len(lat)
    pct = {f"p{q}": (float(np.percentile(lat, q)) if n else None) for q in (50, 90, 99)}
    pct |= {"max": float(lat.max()) if n else None, "mean": float(lat.mean()) if n else None}
    cpu_share = [r.cpu_s / r.wall_s if r.wall_s else 0.0 for r in results]
    return LoadResult(
        url=spec.url,
        mode="open" if spec.rate else "closed",
        concurrency=spec.concurrency,
        rate=spec.rate,
        processes=procs,
        duration_s=measured,
        images=len(spec.images),
        requests=n,
        sent=sum(r.sent for r in results),
        missed=sum(r.missed for r in results),
        throughput_rps=n / measured,
        ok_rps=statuses.get("200", 0) / measured,
        latency_ms=pct,
        statuses=dict(sorted(statuses.items())),
        server_timing_ms=timing,
        server_timing_mean_ms={k: v / n for k, v in timing.items()} if n else {},
        generator_cpu_s=sum(r.cpu_s for r in results),
        generator_cpu_per_process=cpu_share,
        generator_saturated=any(s > SATURATED_CPU for s in cpu_share),
        errors=[e for r in results for e in r.errors][:5],
        model=_model_of(host, port),
        started_at=started,
    )


def shortfall(result: LoadResult, min_success: float | None) -> str | None:
    """Why this result must not count as a measurement (nothing answered 200, or fewer than ``min_success`` of the
    measured requests), or None. Throughput of failures (refused connections are fast) is no throughput."""
    ok = result.statuses.get("200", 0)
    seen = ", ".join(f"{k}: {v:,}" for k, v in result.statuses.items()) or "none answered"
    if ok == 0:
        return f"no request succeeded (statuses {seen}; 0 = connection error or timeout)"
    share = ok / result.requests if result.requests else 0.0
    if min_success is not None and share < min_success:
        return f"{100 * share:.1f} % of the requests got 200, under --min-success {100 * min_success:g} % ({seen})"
    return None
