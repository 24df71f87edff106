"""`gpukit serve` under load, as a real server in a subprocess: overload gets 503 + Retry-After with bounded memory,
a request past its deadline gets 504, SIGTERM during load loses no admitted request, and `gpukit loadtest` against a
several-process server counts exactly what the server's metrics count."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("torch")

from serve_harness import metric, post_image, request, start_server
from serve_testdata import huffman_undefined, image_bytes, make_checkpoint, tables_overwritten

from gpukit.serve.decode import nvimgcodec_unavailable


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_checkpoint(tmp_path_factory.mktemp("serve-load") / "run")


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("img") / "a.jpg"
    path.write_bytes(image_bytes("JPEG", size=(64, 48)))
    return path


def test_overload_gets_503_with_bounded_memory_and_deadline_gets_504(model, image):
    # a slow batcher (waits 150 ms to fill batches of 4) with room for 8 requests; deadline 0.1 s
    srv = start_server(
        model, "--queue-size", "8", "--max-batch", "4", "--max-wait-ms", "150", "--timeout-s", "0.1", "--quiet"
    )
    try:
        status, headers, body = post_image(srv.url, image.read_bytes())  # alone: waits 150 ms for a batch, dies at 100
        assert status == 504 and json.loads(body)["error"] == "timeout"
        assert request(srv.url + "/readyz")[0] == 200
        from gpukit.serve.loadtest import LoadSpec, run_loadtest

        rss0 = srv.rss_bytes()
        spec = LoadSpec(
            url=srv.url + "/v1/predict",
            images=[image],
            concurrency=48,
            duration_s=3,
            warmup_s=0,
            processes=2,
            timeout_s=10,
        )
        result = run_loadtest(spec)
        rss1 = srv.rss_bytes()
        assert result.statuses.get("503", 0) > 0  # the queue bound answered at once
        assert set(result.statuses) <= {"503", "504", "200"}  # never a 5xx of another kind, never a dropped socket
        assert rss1 - rss0 < 150 * 2**20  # memory stays bounded under overload
        metrics = request(srv.url + "/metrics")[2].decode()
        served = sum(
            metric(metrics, "gpukit_requests_total", f'route="/v1/predict",status="{c}"') for c in (200, 503, 504)
        )
        assert served == result.sent + 1  # the one 504 above, and every request the generator sent
        assert metric(metrics, "gpukit_in_flight") == 0
        # requests answered 504 stay in the batch queue until the batcher takes them; one still there would make the
        # next request's batch start at once (a 200: the flake of issue 26). Alone in an empty queue, the request
        # waits 150 ms for company and its deadline of 100 ms passes first: always 504
        deadline = time.monotonic() + 10
        while metric(request(srv.url + "/metrics")[2].decode(), "gpukit_queue_depth") and time.monotonic() < deadline:
            time.sleep(0.05)
        status, headers, body = post_image(srv.url, image.read_bytes())
        assert status == 504 and json.loads(body)["error"] == "timeout" and "retry-after" not in headers
    finally:
        assert srv.stop() == 0


def test_sigterm_during_load_loses_no_admitted_request(model, image):
    srv = start_server(model, "--max-wait-ms", "20", "--quiet")
    outcomes: list[int | str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            try:
                status, _, _ = post_image(srv.url, image.read_bytes())
            except OSError as exc:  # refused after the listener closed: never admitted
                status = type(exc).__name__
            with lock:
                outcomes.append(status)
            if status != 200 and status != 503:
                time.sleep(0.02)

    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(2.0)
    srv.proc.send_signal(signal.SIGTERM)
    code = srv.wait(60)
    stop.set()
    for t in threads:
        t.join(30)
    assert code == 0
    m = re.fullmatch(
        r"stopped: (\d+) requests admitted, (\d+) answered \((\d+) with 200\), (\d+) left by their "
        r"clients; \d+ connections, \d+ idle ones closed by the drain, \d+ refused before their headers were "
        r"complete",
        srv.log[-1],
    )
    assert m, srv.log
    admitted, answered, ok, cancelled = map(int, m.groups())
    assert admitted == answered and cancelled == 0
    assert outcomes.count(200) == ok > 20  # every 200 the server gave reached its client, and load was real
    assert set(outcomes) <= {
        200,
        503,
        "URLError",
        "ConnectionRefusedError",
        "RemoteDisconnected",
        "ConnectionResetError",
    }


def _check_batch_decoding(srv, model, tmp_path, run_cli) -> None:
    """--decode nvjpeg: JPEGs decoded with their batch in the model process (torchvision's decoder on a CPU)."""
    good = tmp_path / "small.jpg"
    good.write_bytes(image_bytes("JPEG", size=(16, 16), seed=5))  # the model's size: no resize, same pixels as Pillow
    res = run_cli("predict", str(model), str(good), "--device", "cpu", "--json")
    want = json.loads(res.stdout)[0]
    status, _, body = post_image(srv.url, good.read_bytes())
    assert status == 200 and json.loads(body)["probability"] == pytest.approx(want["probability"], abs=1e-6)
    data = good.read_bytes()
    status, _, body = post_image(srv.url, huffman_undefined(data))  # a clean header: the batch decoder fails
    assert status == 400 and json.loads(body)["error"] == "corrupt"
    # its quantization tables overwritten: Pillow's header parser skips the garbage, so only the plain-JPEG reader
    # keeps it from the batch decoder (nvJPEG decoded such a file on an H100); Pillow in the worker refuses it
    status, _, body = post_image(srv.url, tables_overwritten(data))
    assert status == 400 and json.loads(body)["error"] == "corrupt"
    assert post_image(srv.url, data[: len(data) // 2])[0] == 400  # truncated: goes the Pillow path, refused there
    cmyk = image_bytes("JPEG", size=(20, 20), mode="CMYK")
    assert post_image(srv.url, cmyk)[0] == 200  # not RGB/gray: decoded by Pillow in the worker
    assert post_image(srv.url, image_bytes("PNG"), "x.png", "image/png")[0] == 200
    # large JPEGs (noise, ~380 kB each) from 8 clients at once: every message down the pipe arrives whole, whatever
    # the event loop did to the pipe (uvloop makes a watched descriptor non-blocking)
    big = image_bytes("JPEG", size=(900, 700), seed=6)
    assert len(big) > 300_000
    statuses: list[int] = []
    threads = [threading.Thread(target=lambda: statuses.extend(post_image(srv.url, big)[0] for _ in range(3)))
               for _ in range(8)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * 24
    assert post_image(srv.url, good.read_bytes())[0] == 200


@pytest.mark.skipif(nvimgcodec_unavailable() is not None, reason=str(nvimgcodec_unavailable()))
def test_a_server_decoding_with_nvimgcodec_answers_as_predict(model, run_cli, tmp_path):
    """--decode nvimgcodec on a CPU device: nvImageCodec's CPU backend in the model process, behind real HTTP."""
    srv = start_server(model, "--workers", "2", "--decode", "nvimgcodec", "--quiet")
    try:
        _check_batch_decoding(srv, model, tmp_path, run_cli)
        assert srv.wait_log("decode nvimgcodec"), srv.log
    finally:
        assert srv.stop() == 0


def test_loadtest_counts_match_the_metrics_of_a_several_process_server(model, image, run_cli, tmp_path):
    srv = start_server(model, "--workers", "2", "--decode", "nvjpeg", "--quiet")
    try:
        _check_batch_decoding(srv, model, tmp_path, run_cli)
        before = request(srv.url + "/metrics")[2].decode()
        res = run_cli(
            "loadtest",
            srv.url + "/v1/predict",
            "--image",
            str(image),
            "--concurrency",
            "8",
            "--duration",
            "2",
            "--warmup",
            "0.5",
            "--processes",
            "2",
            "--json",
        )
        assert res.exit_code == 0, res.stderr
        doc = json.loads(res.stdout)
        after = request(srv.url + "/metrics")[2].decode()
        ok = 'route="/v1/predict",status="200"'
        served = metric(after, "gpukit_requests_total", ok) - metric(before, "gpukit_requests_total", ok)
        assert doc["statuses"] == {"200": doc["requests"]} and doc["requests"] > 20
        assert served == doc["sent"]  # every request sent (warm-up and tail included) was counted once
        assert metric(after, "gpukit_images_total") - metric(before, "gpukit_images_total") == doc["sent"]
        assert doc["throughput_rps"] == pytest.approx(doc["requests"] / doc["duration_s"])
        lat = doc["latency_ms"]
        assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
        timing = doc["server_timing_mean_ms"]
        assert set(timing) >= {"decode", "to_batch", "queue", "prep", "infer", "from_batch", "total"}
        # two HTTP processes: an image crosses the pipe to the model process and back, which takes time each way
        # (to_batch is read across processes, on the host's one monotonic clock)
        assert timing["to_batch"] > 0 and timing["from_batch"] > 0
        assert sum(v for k, v in timing.items() if k != "total") <= timing["total"] + 0.01  # ms; each 1 µs rounded
        assert len(doc["generator_cpu_per_process"]) == 2 and doc["generator_cpu_s"] > 0
        assert doc["model"]["model"] == "seed-cnn"
    finally:
        assert srv.stop() == 0  # and every line it printed is in srv.log
    summary = r"stopped \(2 HTTP processes\): (\d+) requests admitted, (\d+) answered .*; (\d+) connections"
    m = re.match(summary, srv.log[-1])
    assert m, srv.log[-3:]
    admitted, answered, connections = map(int, m.groups())
    assert admitted == answered >= doc["sent"] and connections >= 8  # the workers' counts, summed


def _http_workers(srv) -> list:  # type: ignore[no-untyped-def]
    import psutil

    kids = psutil.Process(srv.proc.pid).children()
    return [k for k in kids if k.is_running() and "spawn_main" in " ".join(k.cmdline())]


def test_a_dead_http_worker_is_replaced_and_a_crash_loop_stops_the_server(model, image):
    """SIGKILL one of two HTTP workers: a new one takes its place, the server keeps answering; killing them
    faster than MAX_RESTARTS a minute ends the server with an error instead of restarting forever."""
    from gpukit.serve.server import MAX_RESTARTS

    data = image.read_bytes()
    srv = start_server(model, "--workers", "2", "--quiet")
    try:
        first = _http_workers(srv)
        assert len(first) == 2
        first[0].kill()
        assert srv.wait_log("exited with code -9; started a new one", timeout=60), srv.log
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the new worker is up once readyz answers from both processes
            now = _http_workers(srv)
            if len(now) == 2 and first[0].pid not in {p.pid for p in now}:
                break
            time.sleep(0.1)
        assert len(_http_workers(srv)) == 2
        codes = [post_image(srv.url, data)[0] for _ in range(30)]  # connections spread over both workers
        assert codes == [200] * 30
        for _ in range(MAX_RESTARTS + 1):  # a crash loop
            if srv.proc.poll() is not None:
                break
            for w in _http_workers(srv):
                w.kill()
            time.sleep(0.3)
        assert srv.wait(60) == 1
        assert any("giving up" in line for line in srv.log), srv.log
        assert "Traceback" not in "\n".join(srv.log)
    finally:
        srv.stop()


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to split"
)
def test_model_cpus_keeps_the_model_process_apart_from_the_http_workers_and_their_replacements(model, image):
    """--model-cpus 1 with two workers: every thread of the model process on the first allowed CPU, every thread
    of each HTTP worker on the others, a replaced worker too; the start-up line says so; requests are answered."""
    import psutil

    cpus = sorted(os.sched_getaffinity(0))
    rest = set(cpus[1:])
    srv = start_server(model, "--workers", "2", "--model-cpus", "1")
    try:
        assert srv.wait_log(f"model process on CPUs {cpus[0]}, HTTP processes on", timeout=30), srv.log
        assert _affinities(srv.proc.pid) == [{cpus[0]}]
        first = _http_workers(srv)
        assert len(first) == 2
        assert [_affinities(w.pid) for w in first] == [[rest], [rest]]
        assert post_image(srv.url, image.read_bytes())[0] == 200
        first[0].kill()
        assert srv.wait_log("exited with code -9; started a new one", timeout=60), srv.log
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(now := _http_workers(srv)) < 2:
            time.sleep(0.1)
        new = [w for w in now if w.pid != first[1].pid]
        assert len(new) == 1
        while time.monotonic() < deadline and _affinities(new[0].pid) != [rest]:  # it pins itself as it starts
            time.sleep(0.05)
        assert _affinities(new[0].pid) == [rest]
        assert [post_image(srv.url, image.read_bytes())[0] for _ in range(10)] == [200] * 10
        assert psutil.Process(srv.proc.pid).cpu_affinity() == [cpus[0]]
    finally:
        srv.stop()


def _affinities(pid: int) -> list[set[int]]:
    """The distinct CPU sets of a process's threads (one that ends meanwhile is skipped)."""
    out: list[set[int]] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            cpus = os.sched_getaffinity(int(tid))
        except ProcessLookupError:
            continue
        if cpus not in out:
            out.append(cpus)
    return out


def test_a_ctrl_c_heard_by_the_http_workers_leaves_the_drain_to_the_server(model, image):
    """A terminal's Ctrl-C reaches every process of the group. An HTTP worker does not drain on it by itself: one
    draining while the socket still listens for the others sends its clients (Connection: close) to reconnect into
    a backlog that is reset when the last copy closes. The server's own SIGINT stops the socket for all, then drains
    every worker: exit 0."""
    data = image.read_bytes()
    srv = start_server(model, "--workers", "2", "--quiet")
    try:
        workers = _http_workers(srv)
        assert len(workers) == 2
        for w in workers:
            w.send_signal(signal.SIGINT)
        time.sleep(1.0)  # a worker that drained would have exited by now, and been replaced
        assert [w.pid for w in _http_workers(srv)] == [w.pid for w in workers]
        assert [post_image(srv.url, data)[0] for _ in range(10)] == [200] * 10
        srv.proc.send_signal(signal.SIGINT)
        assert srv.wait(60) == 0
        log = "\n".join(srv.log)
        assert "started a new one" not in log and "Traceback" not in log, log
    finally:
        srv.stop()


def test_keepalive_connections_spread_evenly_over_the_workers_and_the_drain_refuses_new_ones(model, image):
    """--workers 2: keep-alive connections end 5 and 5 (least connections, not the kernel's hash: 5/5 would be
    1 chance in 4); SIGTERM with all of them posting loses none and resets none; a connection tried during the
    drain is refused at once, not left in a backlog until the server exits."""
    import http.client
    import socket

    from serve_harness import multipart

    srv = start_server(model, "--workers", "2", "--timeout-s", "5", "--quiet")
    host, port = srv.url.removeprefix("http://").split(":")
    body, ctype = multipart([("file", "a.jpg", image.read_bytes(), "image/jpeg")])
    conns = []
    try:
        for _ in range(10):  # one after another, each answered once
            conn = http.client.HTTPConnection(host, int(port), timeout=30)
            conn.request("GET", "/healthz")
            assert conn.getresponse().read() and conn.sock is not None
            conns.append(conn)
        held = [[c for c in w.net_connections("tcp") if c.status == "ESTABLISHED"] for w in _http_workers(srv)]
        assert sorted(map(len, held)) == [5, 5]
        outcomes: list[int | str] = []
        lock = threading.Lock()

        def client(conn: http.client.HTTPConnection) -> None:
            while True:
                try:
                    conn.request("POST", "/v1/predict", body, {"Content-Type": ctype})
                    resp = conn.getresponse()
                    resp.read()
                    status: int | str = resp.status
                except ConnectionRefusedError:
                    return  # the drain closed this idle connection cleanly, and the listener is closed: done
                except (OSError, http.client.HTTPException) as exc:
                    status = type(exc).__name__
                with lock:
                    outcomes.append(status)
                if status != 200:
                    return  # 503 (draining, then closed), or a reset

        threads = [threading.Thread(target=client, args=(c,)) for c in conns]
        for t in threads:
            t.start()
        time.sleep(1.5)
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)  # the listener is closed before the drain begins
        t0 = time.monotonic()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, int(port)), timeout=10).close()
        assert time.monotonic() - t0 < 1.0
        assert srv.wait(60) == 0
        for t in threads:
            t.join(30)
        assert outcomes.count(200) > 20 and set(outcomes) <= {200, 503}, outcomes[-20:]  # no reset, none lost
    finally:
        for conn in conns:
            conn.close()
        srv.stop()
