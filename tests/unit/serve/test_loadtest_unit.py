"""The load generator: it loads only loopback or named hosts, builds valid multipart requests, and measures a trivial
server with the right counts (and far faster than any model server needs)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

from gpukit.errors import ConfigError
from gpukit.serve.loadtest import LoadSpec, build_request, check_target, run_loadtest
from gpukit.serve.request import images_from_body


def test_only_loopback_or_named_hosts():
    assert check_target("http://127.0.0.1:8000", ()) == ("127.0.0.1", 8000, "/v1/predict")
    assert check_target("http://localhost:81/v1/predict/batch", ())[2] == "/v1/predict/batch"
    assert check_target("http://[::1]:9000/x?y=1", ()) == ("::1", 9000, "/x?y=1")
    with pytest.raises(ConfigError, match="not a loopback") as info:
        check_target("http://10.0.0.5:8000/v1/predict", ())
    assert "--allow-host 10.0.0.5" in (info.value.hint or "")
    assert check_target("http://10.0.0.5:8000/v1/predict", ("10.0.0.5",))[0] == "10.0.0.5"
    with pytest.raises(ConfigError):
        check_target("https://127.0.0.1/", ())


def test_built_request_is_a_form_the_server_reads(tmp_path):
    img = tmp_path / "a.png"
    img.write_bytes(b"\x89PNG\r\n\x1a\nDATA")
    raw = build_request("127.0.0.1", 8000, "/v1/predict", img, "k", raw=False)
    head, _, body = raw.partition(b"\r\n\r\n")
    headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
    assert int(headers["Content-Length"]) == len(body) and headers["X-API-Key"] == "k"
    assert images_from_body(headers["Content-Type"], body, many=False) == [img.read_bytes()]


class Trivial:
    """A minimal keep-alive HTTP server that answers 200 with a Server-Timing header and counts requests.

    ``mode``: "keep" (one write per answer), "close" (``Connection: close`` and the connection closed after each),
    "dribble" (each answer in 7-byte writes, its head cut anywhere), "silent" (never answers), "chunked" (a
    ``Transfer-Encoding: chunked`` answer), "extra" (bytes after each answer that no request asked for)."""

    ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nServer-Timing: infer;dur=1.5, total;dur=2\r\n\r\n{}"

    def __init__(self, mode: str = "keep") -> None:
        self.mode = mode
        self.count = 0
        self.connections = 0  # that posted
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        threading.Thread(target=self.loop.run_until_complete, args=(self.main(),), daemon=True).start()
        assert self.ready.wait(10)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        posted = False
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if not head.startswith(b"POST"):  # the loadtest's GET /v1/model: not a model server
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    writer.close()
                    return
                length = int(
                    next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
                )
                await reader.readexactly(length)
                self.connections += not posted
                posted = True
                self.count += 1
                if self.mode == "silent":
                    continue
                if self.mode == "chunked":
                    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
                elif self.mode == "close":
                    writer.write(self.ANSWER.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
                    await writer.drain()
                    writer.close()
                    return
                elif self.mode == "extra":
                    writer.write(self.ANSWER + b"HTTP/1.1 200 OK\r\n")
                elif self.mode == "dribble":
                    for at in range(0, len(self.ANSWER), 7):
                        writer.write(self.ANSWER[at : at + 7])
                        await writer.drain()
                        await asyncio.sleep(0)
                else:
                    writer.write(self.ANSWER)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main(self) -> None:
        server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self.ready.set()
        await server.serve_forever()


@pytest.mark.parametrize("rate", [None, 100.0])
def test_counts_and_timing_against_a_trivial_server(tmp_path, rate):
    img = tmp_path / "a.jpg"
    img.write_bytes(b"\xff\xd8\xff" + b"x" * 1000)
    srv = Trivial()
    spec = LoadSpec(
        url=f"http://127.0.0.1:{srv.port}/v1/predict",
        images=[img],
        concurrency=4,
        duration_s=1.0,
        warmup_s=0.2,
        rate=rate,
        processes=1,
    )
    r = run_loadtest(spec)
    assert r.sent == srv.count  # every request sent was seen once
    assert r.statuses == {"200": r.requests} and r.requests > 50
    assert r.server_timing_ms["infer"] == pytest.approx(1.5 * r.requests)
    assert r.server_timing_mean_ms["total"] == pytest.approx(2.0)
    assert r.generator_cpu_s > 0 and len(r.generator_cpu_per_process) == 1
    if rate:  # open loop: the arrivals keep their rate (a loaded CI box may miss a few; they are counted, not sent)
        assert r.mode == "open" and r.missed <= 0.1 * rate
        assert (r.throughput_rps + r.missed / r.duration_s) == pytest.approx(rate, rel=0.2)
    else:
        assert r.mode == "closed" and r.throughput_rps > 200


def _spec(tmp_path, port: int, **kw) -> LoadSpec:
    img = tmp_path / "a.jpg"
    img.write_bytes(b"\xff\xd8\xff" + b"x" * 300)
    args = {"concurrency": 3, "duration_s": 0.6, "warmup_s": 0.0, "processes": 1} | kw
    return LoadSpec(url=f"http://127.0.0.1:{port}/v1/predict", images=[img], **args)


@pytest.mark.parametrize("mode", ["close", "dribble", "extra"])
def test_answers_in_pieces_or_on_closed_connections_are_all_read(tmp_path, mode):
    srv = Trivial(mode)
    r = run_loadtest(_spec(tmp_path, srv.port))
    assert r.sent == srv.count and r.statuses == {"200": r.requests} and r.requests > 20
    assert r.server_timing_mean_ms == pytest.approx({"infer": 1.5, "total": 2.0})
    if mode in ("close", "extra"):  # a new connection for every request (bytes past an answer end the connection)
        assert srv.connections == srv.count
    else:
        assert srv.connections == 3


def test_a_server_that_never_answers_times_out_within_the_limit(tmp_path):
    srv = Trivial("silent")
    t0 = time.monotonic()
    r = run_loadtest(_spec(tmp_path, srv.port, duration_s=1.0, timeout_s=0.3))
    assert time.monotonic() - t0 < 6
    assert r.sent == srv.count and r.statuses == {"0": r.requests} and r.requests >= 3  # each failed at its timeout
    assert 300 <= r.latency_ms["p50"] <= 600  # the watchdog looks every 75 ms here
    assert any("TimeoutError" in e and "0.3 s" in e for e in r.errors)


def test_a_chunked_answer_or_a_refused_connection_is_a_failed_request_with_its_reason(tmp_path):
    srv = Trivial("chunked")
    r = run_loadtest(_spec(tmp_path, srv.port, duration_s=0.3))
    assert r.requests > 0 and r.statuses == {"0": r.requests}
    assert any("chunked" in e for e in r.errors)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = run_loadtest(_spec(tmp_path, port, duration_s=0.3))
    assert r.requests > 0 and r.statuses == {"0": r.requests}
    assert any("Connect" in e or "refused" in e.lower() for e in r.errors)


def test_response_heads_and_server_timing_are_read_as_sent():
    from gpukit.serve._loadgen import BadResponse, _names, _parse_timing, parse_head

    head = b"HTTP/1.1 503 Service Unavailable\r\ncontent-LENGTH: 17\r\nCONNECTION: Close\r\nServer-Timing: a;dur=1"
    assert parse_head(head) == (503, 17, False, b"a;dur=1")
    assert parse_head(b"HTTP/1.0 204 No Content") == (204, 0, False, None)  # HTTP/1.0 closes unless it says not
    assert parse_head(b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 3") == (200, 3, True, None)
    assert parse_head(b"HTTP/1.1 200 OK\r\nContent-Length:5") == (200, 5, True, None)
    bad_heads = [b"SSH-2.0-OpenSSH", b"HTTP/1.1 2xx OK"]
    bad_heads += [b"HTTP/1.1 200 OK\r\nContent-Length: " + v for v in (b"ten", b"-5")]
    for bad in bad_heads:
        with pytest.raises(BadResponse):
            parse_head(bad)
    raw: dict[bytes, float] = {}
    _parse_timing(b'read;dur=0.5, db;desc="x";dur=2, cache;desc=hit, total;dur=3;x=1,read;dur=1.5, bad;dur=z', raw)
    _parse_timing(b"total;dur=1", raw)
    assert _names(raw) == {"read": 2.0, "db": 2.0, "total": 4.0}


def test_loadtest_save_goes_to_the_results_history(run_cli, tmp_path):
    from gpukit.serve._store import open_history

    img = tmp_path / "a.jpg"
    img.write_bytes(b"\xff\xd8\xff" + b"x" * 100)
    srv = Trivial()
    db = tmp_path / "results.db"
    url = f"http://127.0.0.1:{srv.port}/v1/predict"
    res = run_cli(
        "loadtest",
        url,
        "--image",
        str(img),
        "--duration",
        "0.5",
        "--warmup",
        "0",
        "--concurrency",
        "2",
        "--processes",
        "1",
        "--save",
        "--db",
        str(db),
        "--json",
    )
    assert res.exit_code == 0, res.stderr
    doc = __import__("json").loads(res.stdout)
    with open_history(db, create=False) as h:
        (row,) = h.loadtests()
    assert row["id"] == doc["id"] and row["url"] == url and row["sent"] == doc["sent"] == srv.count


def test_shortfall_names_a_failed_run():
    from gpukit.serve.loadtest import LoadResult, shortfall

    def result(statuses: dict[str, int]) -> LoadResult:
        n = sum(statuses.values())
        return LoadResult("u", "closed", 1, None, 1, 1.0, 1, n, n, 0, n, statuses.get("200", 0), {}, statuses, {},
                          {}, 0.0, [0.0], False)  # fmt: skip

    assert "no request succeeded" in (shortfall(result({"0": 500}), None) or "")
    assert "no request succeeded" in (shortfall(result({"401": 20}), 0.1) or "")
    assert shortfall(result({"200": 90, "503": 10}), None) is None
    assert shortfall(result({"200": 90, "503": 10}), 0.9) is None
    assert "under --min-success 95 %" in (shortfall(result({"200": 90, "503": 10}), 0.95) or "")
