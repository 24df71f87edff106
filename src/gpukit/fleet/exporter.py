"""`gpukit fleet exporter`: the fleet's status on ``/metrics`` for Prometheus, read from the store.

At each scrape (at most once per ``cache_s``) it reads the newest acceptance of every node, judges the fleet
(:func:`gpukit.fleet.status.fleet_status`), writes each GPU's fleet figures (``vs_fleet``, ``fleet_median``, the
flags, the verdict) into its document, and renders the documents with :func:`gpukit.fleet.prom.render` — the same
renderer and metric names as `gpukit accept --prom-textfile`, so a dashboard reads both the same way. Only
acceptance results are exported; telemetry over time is dcgm-exporter's job.

A standard-library HTTP server (one thread per request): the exporter has nothing else to serve, and needs no extra.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gpukit.errors import ConfigError, GpukitError
from gpukit.fleet import prom
from gpukit.fleet.record import worst_verdict
from gpukit.fleet.status import MIN_NODES, FleetStatus, fleet_status, load_latest

__all__ = ["CONTENT_TYPE", "FleetMetrics", "annotate", "make_server", "serve"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # Prometheus text exposition format


def annotate(records: Sequence[Mapping[str, Any]], st: FleetStatus) -> list[dict[str, Any]]:
    """Copies of ``records`` with each figure's fleet judgement (fields of the acceptance document) and each GPU's
    and node's verdict as the fleet sees them."""
    rows = {(r.node, r.gpu): r for r in st.rows}
    out = []
    for rec in records:
        doc = copy.deepcopy(dict(rec))
        node = str((doc.get("node") or {}).get("name"))
        for gpu in doc.get("gpus") or []:
            row = rows.get((node, gpu.get("index")))
            if row is None:
                continue
            for name, fig in (gpu.get("figures") or {}).items():
                cell = row.cells.get(name)
                if cell is not None and cell.judgement is not None:
                    fig.update(cell.judgement.fields())
            gpu["verdict"] = worst_verdict([str(gpu.get("verdict") or "ok"), row.verdict])
        doc["verdict"] = worst_verdict([str(g.get("verdict")) for g in doc.get("gpus") or []])
        out.append(doc)
    return out


class FleetMetrics:
    """The exposition text of the store's fleet, rebuilt at most once per ``cache_s`` (thread-safe)."""

    def __init__(self, db: str | Path | None, *, sigmas: Mapping[str, float] | None = None, cache_s: float = 10.0):
        self.db, self.sigmas, self.cache_s = db, sigmas, cache_s
        self._lock = threading.Lock()
        self._text: str | None = None
        self._at = 0.0

    def text(self) -> str:
        with self._lock:
            if self._text is None or time.monotonic() - self._at >= self.cache_s:
                self._text, self._at = self._build(), time.monotonic()
            return self._text

    def _build(self) -> str:
        records, _ = load_latest(self.db)
        nodes = {str((r.get("node") or {}).get("name")) for r in records}
        if len(nodes) < MIN_NODES:  # no fleet median: each node's own document, as `accept` judged it
            return prom.render(records)
        return prom.render(annotate(records, fleet_status(records, sigmas=self.sigmas)))


class _Handler(BaseHTTPRequestHandler):
    metrics: FleetMetrics  # set on the subclass make_server builds

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self._reply(404, "text/plain; charset=utf-8", "only /metrics is served here\n")
            return
        try:
            body = self.metrics.text()
        except GpukitError as e:  # the store went away or refused: say so to the scraper, keep serving
            self._reply(503, "text/plain; charset=utf-8", f"error: {e.message}\n")
            return
        self._reply(200, CONTENT_TYPE, body)

    def _reply(self, code: int, content_type: str, body: str) -> None:
        data = body.encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # the library never prints
        return


def make_server(metrics: FleetMetrics, host: str = "0.0.0.0", port: int = 9835) -> ThreadingHTTPServer:
    """An HTTP server answering ``GET /metrics`` with ``metrics.text()`` (port 0: any free port)."""
    handler = type("FleetMetricsHandler", (_Handler,), {"metrics": metrics})
    try:
        return ThreadingHTTPServer((host, port), handler)
    except OSError as e:
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}", hint="pick another --port") from e


def serve(db: str | Path | None, host: str, port: int, *, sigmas: Mapping[str, float] | None = None) -> None:
    """Serve the fleet's metrics until interrupted."""
    server = make_server(FleetMetrics(db, sigmas=sigmas), host, port)
    try:
        server.serve_forever()
    finally:
        server.server_close()
