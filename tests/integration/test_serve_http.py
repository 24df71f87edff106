"""`gpukit serve` as a real uvicorn server in a subprocess: predictions equal `gpukit predict`'s, every hostile body
gets its 4xx and leaves the server healthy, unusual but valid images get 200, the API key is enforced, and the
metrics and Server-Timing add up."""

from __future__ import annotations

import json
import statistics
import struct
import zlib
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("torch")

from serve_harness import metric, multipart, post_image, request, start_server
from serve_testdata import CLASSES, image_bytes, make_checkpoint

KEY = "s3cret-key-for-tests"
AUTH = {"X-API-Key": KEY}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_checkpoint(tmp_path_factory.mktemp("serve") / "run")


@pytest.fixture(scope="module")
def server(model: Path):
    srv = start_server(
        model,
        "--max-body-mb",
        "1",
        "--max-pixels",
        "4000000",
        "--api-key-env",
        "GPUKIT_TEST_KEY",
        "--quiet",
        env={"GPUKIT_TEST_KEY": KEY},
    )
    yield srv
    assert srv.stop() == 0


def _png_with_size(width: int, height: int) -> bytes:
    """A valid PNG header claiming ``width``×``height`` (a decompression bomb's shape) with a tiny IDAT."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)  # 1-bit grayscale
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b"")
    )


def _ok(server, data: bytes = b"", **kw) -> dict:
    status, _, body = post_image(server.url, data or image_bytes(), headers=AUTH, **kw)
    assert status == 200, body
    return json.loads(body)


def test_without_workers_a_server_on_a_cpu_is_one_process(server):
    """``--workers`` left out: 1 on a CPU (on CUDA one per two CPUs; tests/unit/serve/test_cpus.py)."""
    assert server.wait_log("HTTP processes 1; decode pil"), server.log


def test_predictions_equal_gpukit_predict(server, model, tmp_path, run_cli):
    files = []
    for i, (fmt, suffix) in enumerate([("JPEG", ".jpg"), ("PNG", ".png"), ("WEBP", ".webp"), ("JPEG", ".jpg")]):
        path = tmp_path / f"img{i}{suffix}"
        path.write_bytes(image_bytes(fmt, size=(37 + 11 * i, 29 + 7 * i), seed=i))
        files.append(path)
    res = run_cli("predict", str(model), *map(str, files), "--device", "cpu", "--json")
    assert res.exit_code == 0, res.stderr
    expected = {Path(r["path"]).name: r for r in json.loads(res.stdout)}
    for path in files:
        got = _ok(server, path.read_bytes(), filename=path.name, kind="application/octet-stream")
        want = expected[path.name]
        assert got["label"] == want["label"]
        assert got["probability"] == pytest.approx(want["probability"], abs=1e-6)
        assert got["scores"].keys() == set(CLASSES)
        for name in CLASSES:
            assert got["scores"][name] == pytest.approx(want["scores"][name], abs=1e-6)
    # raw bytes and the batch route give the same answers
    status, _, body = request(server.url + "/v1/predict", files[1].read_bytes(), {"Content-Type": "image/png", **AUTH})
    assert status == 200 and json.loads(body)["probability"] == pytest.approx(
        expected["img1.png"]["probability"], abs=1e-6
    )
    form, ctype = multipart([("files", p.name, p.read_bytes(), "image/jpeg") for p in files])
    status, _, body = request(server.url + "/v1/predict/batch", form, {"Content-Type": ctype, **AUTH})
    assert status == 200
    batch = json.loads(body)["predictions"]
    assert [b["label"] for b in batch] == [expected[p.name]["label"] for p in files]


def _hostile_cases() -> list[tuple[str, bytes, str, str, int, str]]:
    good = image_bytes("JPEG", size=(64, 64))
    pdf = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
    svg = b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>'
    html = b"<!DOCTYPE html><html><body><script>alert(1)</script></body></html>"
    return [  # (case, bytes, filename, part content type, status, error code)
        ("zero-byte", b"", "empty.jpg", "image/jpeg", 400, "empty"),
        ("truncated", good[: len(good) // 2], "half.jpg", "image/jpeg", 400, "corrupt"),
        ("non-image", bytes(range(256)) * 8, "noise.jpg", "image/jpeg", 422, "not_an_image"),
        ("html-as-png", html, "page.png", "image/png", 415, "unsupported_format"),
        ("svg", svg, "vector.svg", "image/svg+xml", 415, "unsupported_type"),
        ("svg-as-png", svg, "vector.png", "image/png", 415, "unsupported_format"),
        ("pdf", pdf, "doc.pdf", "application/pdf", 415, "unsupported_type"),
        ("pdf-as-jpeg", pdf, "doc.jpg", "image/jpeg", 415, "unsupported_format"),
        ("bomb", _png_with_size(60_000, 60_000), "bomb.png", "image/png", 413, "too_many_pixels"),
    ]


@pytest.mark.parametrize("case", _hostile_cases(), ids=lambda c: c[0])
def test_hostile_bodies_get_their_4xx_and_the_server_stays_healthy(server, case):
    _name, data, filename, kind, want_status, want_code = case
    status, headers, body = post_image(server.url, data, filename=filename, kind=kind, headers=AUTH)
    assert status == want_status, body
    doc = json.loads(body)
    assert doc["error"] == want_code and doc["detail"]
    assert "total;dur=" in headers["server-timing"]
    assert request(server.url + "/healthz")[0] == 200
    assert request(server.url + "/readyz")[0] == 200
    assert _ok(server)["label"] in CLASSES  # the next good request is answered


def _raw_exchange(url: str, head: bytes, body_chunks: list[bytes]) -> bytes:
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(head)
        for chunk in body_chunks:
            sock.sendall(chunk)
        data = b""
        while b"\r\n\r\n" not in data:
            more = sock.recv(65536)
            if not more:
                break
            data += more
        return data


def test_oversize_is_refused_while_reading(server):
    host = f"Host: x\r\nX-API-Key: {KEY}\r\nContent-Type: image/jpeg\r\n"
    # a declared length over the limit: 413 before a byte of the body is sent
    reply = _raw_exchange(
        server.url, f"POST /v1/predict HTTP/1.1\r\n{host}Content-Length: 5000000\r\n\r\n".encode(), []
    )
    assert reply.startswith(b"HTTP/1.1 413")
    # no declared length (chunked): refused once the running count passes the limit
    chunk = b"\0" * 65536
    chunked = [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * 17 + [b"0\r\n\r\n"]  # 1.06 MiB > 1 MiB
    reply = _raw_exchange(
        server.url, f"POST /v1/predict HTTP/1.1\r\n{host}Transfer-Encoding: chunked\r\n\r\n".encode(), chunked
    )
    assert reply.startswith(b"HTTP/1.1 413")
    assert request(server.url + "/healthz")[0] == 200
    assert _ok(server)["label"] in CLASSES


def test_wrong_content_types_and_forms(server):
    assert request(server.url + "/v1/predict", b"<html></html>", {"Content-Type": "text/html", **AUTH})[0] == 415
    bad_form = b'--b\r\nContent-Disposition: form-data; name="file"\r\n\r\nabc'  # no closing boundary
    status, _, body = request(
        server.url + "/v1/predict", bad_form, {"Content-Type": "multipart/form-data; boundary=b", **AUTH}
    )
    assert status == 400 and json.loads(body)["error"] == "bad_form"
    form, ctype = multipart([("other", "a.txt", b"hello", "text/plain")])
    assert request(server.url + "/v1/predict", form, {"Content-Type": ctype, **AUTH})[0] == 400


@pytest.mark.parametrize(
    ("fmt", "mode", "size"),
    [
        ("JPEG", "CMYK", (48, 40)),
        ("GIF", "P", (30, 30)),
        ("PNG", "L", (33, 21)),
        ("PNG", "RGBA", (40, 40)),
        ("WEBP", "RGB", (50, 30)),
        ("PNG", "RGB", (1, 1)),
        ("JPEG", "RGB", (4000, 3)),
        ("PNG", "P", (20, 900)),
    ],
    ids=["cmyk-jpeg", "palette-gif", "gray-png", "rgba-png", "webp", "1x1", "very-wide", "very-tall-palette"],
)
def test_unusual_but_valid_images_get_200(server, fmt, mode, size):
    data = image_bytes(fmt, size=size, mode=mode)
    result = _ok(server, data, filename=f"x.{fmt.lower()}", kind=f"image/{fmt.lower()}")
    assert result["label"] in CLASSES
    assert sum(result["scores"].values()) == pytest.approx(1.0, abs=1e-5)


def test_api_key_is_required(server):
    status, _, body = post_image(server.url, image_bytes())
    assert status == 401 and json.loads(body)["error"] == "unauthorized"
    assert post_image(server.url, image_bytes(), headers={"X-API-Key": KEY + "x"})[0] == 401
    assert post_image(server.url, image_bytes(), headers={"Authorization": f"Bearer {KEY}"})[0] == 200


def _timing(header: str) -> dict[str, float]:
    out = {}
    for part in header.split(","):
        name, _, dur = part.strip().partition(";dur=")
        out[name] = float(dur) / 1000
    return out


def test_metrics_and_server_timing_add_up(server):
    before = request(server.url + "/metrics")[2].decode()
    stages = {s: 0.0 for s in ("read", "decode", "to_batch", "queue", "prep", "infer", "from_batch", "encode")}
    n = 12
    gaps = []
    for i in range(n):
        status, headers, _ = post_image(server.url, image_bytes(seed=100 + i), headers=AUTH)
        assert status == 200
        t = _timing(headers["server-timing"])
        assert set(t) == {*stages, "total"}
        parts = sum(t[s] for s in stages)
        assert all(t[s] >= 0 for s in stages)
        assert parts <= t["total"] + 7e-6  # the stages are parts of the total (each rounded to 1 µs)
        gaps.append(t["total"] - parts)
        for s in stages:
            stages[s] += t[s]
    # the stages cover the handler's time: to_batch and from_batch are the way to the batcher and back (the thread
    # hand-offs), so what is left is the few statements between them (a median: one preempted request does not count)
    assert statistics.median(gaps) < 2e-4
    after = request(server.url + "/metrics")[2].decode()
    ok = 'route="/v1/predict",status="200"'
    assert metric(after, "gpukit_requests_total", ok) - metric(before, "gpukit_requests_total", ok) == n
    for s in stages:  # the histogram sums moved by exactly what the headers said
        moved = metric(after, "gpukit_stage_duration_seconds_sum", f'stage="{s}"') - metric(
            before, "gpukit_stage_duration_seconds_sum", f'stage="{s}"'
        )
        assert moved == pytest.approx(stages[s], abs=n * 2e-6)
    assert metric(after, "gpukit_batch_size_count") - metric(before, "gpukit_batch_size_count") == n
    assert metric(after, "gpukit_images_total") - metric(before, "gpukit_images_total") == n
    for name in (
        "gpukit_queue_depth",
        "gpukit_in_flight",
        "gpukit_gpu_memory_bytes",
        "gpukit_request_duration_seconds_bucket",
    ):
        assert f"\n{name}" in after


def test_docs_and_page(server):
    status, _, body = request(server.url + "/openapi.json")
    paths = json.loads(body)["paths"]
    assert {"/v1/predict", "/v1/predict/batch", "/healthz", "/readyz", "/metrics"} <= set(paths)
    assert "multipart/form-data" in paths["/v1/predict"]["post"]["requestBody"]["content"]
    assert request(server.url + "/docs")[0] == 200
    status, _, page = request(server.url + "/")
    assert status == 200 and b'type="file"' in page and b"<script" in page
