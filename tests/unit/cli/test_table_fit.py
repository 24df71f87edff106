"""Tables fit the terminal without cutting a word (issue 26, item 5): `history show` and `history compare` at 80, 100
and 200 columns, and a plain fixed width when stdout is a pipe."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console

from gpukit.bench.results import Result, Run
from gpukit.cli import render


def _row(backend: str, device: str, size: str, gbps: float, spread: float = 0.02) -> Result:
    t = 2**24 * 3 / (gbps * 1e9)
    return Result("vector-add", backend, device, size, kernel_median_s=t, kernel_min_s=t * (1 - spread),
                  kernel_max_s=t * (1 + spread), compile_s=0.4, h2d_s=1e-3 if device == "cuda" else 0.0,
                  d2h_s=2e-3 if device == "cuda" else 0.0, gbps=gbps, throughput_unit="gbps", pct_of_ceiling=81.0,
                  speedup=gbps / 13.8, samples_s=[t * (1 - spread), t, t * (1 + spread)], check=True)  # fmt: skip


def _run(scale: float = 1.0) -> Run:
    rows = [
        _row("numpy", "cpu", "16MiB:float32", 13.8 * scale),
        _row("torch-cpu", "cpu", "16MiB:float32", 2.7),
        _row("cupy-cuda-c-naive", "cuda", "16MiB:float32", 3100.0 * scale),
        Result("vector-add", "python", "cpu", "1GiB:float32", status="skipped", skip_cause="estimate",
               reason="estimated 26.3 s per call (~132 s to measure) exceeds the 10 s budget",
               hint="pick a smaller --size for this backend, or raise --budget"),
    ]  # fmt: skip
    return Run(started_at="2026-12-01T00:00:00Z", machine={"hostname": "node1"}, results=rows)


WORDS = ["workload", "vector-add", "cupy-cuda-c-naive", "16MiB:float32", "torch-cpu", "throughput"]


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _assert_fits(text: str, width: int, words: list[str]) -> None:
    lines = _lines(text)
    assert lines and max(cell_len(line) for line in lines) <= width
    cells = " ".join(re.split(r"[│┃┆|]", text))
    for word in words:  # whole, never split across two lines of a cell
        assert word in cells, (word, text)


def _print(monkeypatch: pytest.MonkeyPatch, width: int, show: object, *args: object) -> str:
    buf = io.StringIO()
    monkeypatch.setattr(render, "console", Console(file=buf, width=width, highlight=False, soft_wrap=False))
    show(*args)  # type: ignore[operator]
    return buf.getvalue()


@pytest.mark.parametrize("width", [80, 100, 200])
def test_history_show_fits(monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    from gpukit.cli.bench_render import print_run

    text = _print(monkeypatch, width, print_run, _run())
    _assert_fits(text, width, WORDS)
    results = text[text.index("Results") :]
    header = results[results.index("┏") : results.index("┡")]
    assert ("speedup" in header) == (width >= 100), header  # kept at 100 with cells wrapped; at 80 it must go
    if width == 200:  # room for every column, each row on one line
        assert "left out" not in text and "transfers (h2d + d2h)" in text
        assert sum("vector-add" in line for line in _lines(text)) == 4
    if width in (80, 100):  # the optional columns go first, the rest stays a table
        assert f"left out to fit {width} columns" in " ".join(text.split()) and "┃ workload" in text
    assert "estimated 26.3 s per call (~132 s to measure) exceeds the 10 s budget" in " ".join(text.split())


def _cli(*argv: str) -> None:
    from gpukit.cli import main

    assert main(list(argv)) == 0


def _compare(db: Path) -> None:
    _cli("history", "compare", "1", "2", "--db", str(db))


@pytest.fixture
def two_runs(tmp_path: Path) -> Path:
    from gpukit.history import open_history

    db = tmp_path / "r.db"
    with open_history(db) as h:
        h.save_run(_run().to_dict())
        h.save_run(_run(scale=1.5).to_dict())
    return db


@pytest.mark.parametrize("width", [80, 100, 200])
def test_history_compare_fits(monkeypatch: pytest.MonkeyPatch, two_runs: Path, width: int) -> None:
    text = _print(monkeypatch, width, _compare, two_runs)
    _assert_fits(text, width, ["verdict", "UNSURE", "SAME", "cupy-cuda-c-naive", "16MiB:float32", "workload"])
    if width >= 100:
        assert "┃ workload" in text  # a table, not the narrow layout
    if width == 200:
        assert "left out" not in text and "spread" in text


def test_narrow_layout_keeps_every_value(monkeypatch: pytest.MonkeyPatch) -> None:
    cols = ["a long column name", "another long one", "third"]
    rows = [["supercalifragilistic-" + "x" * 9, "expialidocious-" * 2, "x"]]  # 30-letter words: no table fits
    text = _print(monkeypatch, 60, lambda: render.print_table(cols, rows, title="t"))
    _assert_fits(text, 60, [rows[0][0], rows[0][1], "a long column name", "third"])
    assert "┃" not in text  # no header row: one block of column/value lines


def test_piped_output_has_a_fixed_width(two_runs: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Any) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    result = run_cli("history", "show", "1", "--db", str(two_runs))
    assert result.exit_code == 0, result.stderr
    widths = [cell_len(line) for line in result.stdout.splitlines()]
    assert max(widths) <= render.PIPED_WIDTH
    assert any(w > 80 for w in widths)  # the results table uses the piped width, not rich's 80 for a pipe


@pytest.mark.parametrize("width", [80, 100])
def test_history_list_counts_rows_measured_not_failures(
    monkeypatch: pytest.MonkeyPatch, two_runs: Path, width: int
) -> None:
    text = _print(monkeypatch, width, lambda: _cli("history", "list", "--db", str(two_runs)))
    _assert_fits(text, width, ["measured"])
    assert "rows with a verified result, of all rows (skipped rows are not failures)" in " ".join(text.split())
    assert "3/4" in text and "┃ ok" not in text  # 3 measured, 1 skipped on its estimate: not "ok 3/4"
