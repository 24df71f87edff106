"""A real `gpukit serve` in a subprocess on a free loopback port, for the integration tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "unit" / "serve"))


@dataclass
class Server:
    proc: subprocess.Popen[str]
    url: str
    log: list[str] = field(default_factory=list)  # stderr's lines, appended by a thread beside the test
    pump: threading.Thread | None = None

    def wait(self, timeout: float = 60.0) -> int:
        """The exit code, once the server has exited and every line it printed is in ``log``."""
        code = self.proc.wait(timeout)
        if self.pump is not None:
            self.pump.join(10)  # to stderr's end (its HTTP workers close their copies as they exit)
        return code

    def wait_log(self, text: str, timeout: float = 30.0) -> bool:
        """Whether a line with ``text`` is (or comes, within ``timeout``) in the log: a line printed after
        "serving …", such as the engine's, may reach ``log`` after the server already answers."""
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.log):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.wait(10)

    def rss_bytes(self) -> int:
        """Resident memory of the server and all its processes."""
        root = psutil.Process(self.proc.pid)
        return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])


def start_server(model: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 90.0) -> Server:
    cmd = [sys.executable, "-m", "gpukit", "serve", str(model), "--port", "0", "--device", "cpu", *args]
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))  # and what was there
    full_env = {**os.environ, "PYTHONPATH": path, "COLUMNS": "200", **(env or {})}
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=full_env)
    server = Server(proc, "")
    found = threading.Event()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            server.log.append(line.rstrip("\n"))
            m = re.search(r"serving (http://\S+)", line)
            if m and not server.url:
                server.url = m.group(1)
                found.set()

    server.pump = threading.Thread(target=pump, daemon=True)
    server.pump.start()
    deadline = time.monotonic() + timeout
    while not found.wait(0.1):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("server did not start:\n" + "\n".join(server.log))
    return server


def request(
    url: str, data: bytes | None = None, headers: dict[str, str] | None = None, method: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def multipart(files: list[tuple[str, str, bytes, str]]) -> tuple[bytes, str]:
    """(field, filename, data, content type) → (body, content-type header)."""
    boundary = "gpukitTestBoundary7"
    body = b""
    for name, filename, data, kind in files:
        body += (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                f"Content-Type: {kind}\r\n\r\n"
            ).encode()
            + data
            + b"\r\n"
        )
    return body + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def post_image(
    url: str, data: bytes, filename: str = "x.jpg", kind: str = "image/jpeg", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    body, content_type = multipart([("file", filename, data, kind)])
    return request(url + "/v1/predict", body, {"Content-Type": content_type, **(headers or {})})


def metric(text: str, name: str, labels: str = "") -> float:
    """The value of one sample of the Prometheus exposition ``text`` (0 when absent)."""
    pattern = re.escape(name) + (r"\{" + re.escape(labels) + r"\}" if labels else "") + r" (?P<v>[0-9.e+-]+)$"
    total = 0.0
    for line in text.splitlines():
        m = re.match(pattern, line)
        if m:
            total += float(m.group("v"))
    return total
