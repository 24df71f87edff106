"""`gpukit report` and `gpukit bench --sweep` through the CLI, with a real SQLite history."""

from __future__ import annotations

import json

import pytest

from gpukit.history import open_history

pytest.importorskip("matplotlib")

from report_synthetic import synthetic_run  # tests/unit/bench is on sys.path under pytest
from test_sweep_fake_device import fake_registry  # noqa: F401  (fixture)


def _save(db, run):
    with open_history(db) as history:
        return history.save_run(run.to_dict())


def test_report_last_html_and_md(run_cli, tmp_path):
    db = tmp_path / "h.db"
    with open_history(db) as store:
        first = store.save_run(synthetic_run(with_training=False).to_dict())
        second = store.save_run(synthetic_run().to_dict())
    html_out = tmp_path / "out" / "report.html"
    res = run_cli("report", "--last", "--db", str(db), "-o", str(html_out))
    assert res.exit_code == 0, res.stderr
    assert f"run {second}" in res.stdout
    doc = html_out.read_text()
    assert '<section id="seed-claims">' in doc and doc.count("<img ") == 11
    res = run_cli(
        "report", "--run", str(first), "--db", str(db), "-o", str(tmp_path / "r.md"), "--format", "md", "--json"
    )
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["run"] == first and doc["format"] == "md"
    assert doc["gemm"] == ["triton bf16 at 4096³: 547.4 TFLOP/s = 86.2% of cuBLAS bf16 (635.3 TFLOP/s), same run"]
    md = (tmp_path / "r.md").read_text()
    for name in doc["plots"]:
        assert (tmp_path / "r_plots" / f"{name}.png").read_bytes().startswith(b"\x89PNG")
        assert f"(r_plots/{name}.png)" in md
    assert {c["key"]: c["measured"] for c in doc["claims"]}["cnn"] is None  # run 1 had no training rows


def test_report_errors(run_cli, tmp_path):
    empty = run_cli("report", "--db", str(tmp_path / "none.db"), "-o", str(tmp_path / "x.html"))
    assert empty.exit_code == 2 and "no runs" in empty.stderr
    db = tmp_path / "h.db"
    _save(db, synthetic_run())
    assert run_cli("report", "--run", "99", "--db", str(db)).exit_code == 2  # no run 99: bad input, like no runs
    assert run_cli("report", "--format", "pdf", "--db", str(db)).exit_code == 2
    assert run_cli("report", "--run", "1", "--last", "--db", str(db)).exit_code == 2
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    unwritable = run_cli("report", "--db", str(db), "-o", str(blocker / "report.html"))
    assert unwritable.exit_code == 2 and "cannot write" in unwritable.stderr  # not a traceback


def test_bench_sweep_saves_and_reports(run_cli, tmp_path, fake_registry):  # noqa: F811
    db = tmp_path / "h.db"
    res = run_cli("bench", "fake-copy", "--sweep", "--quick", "--db", str(db), "--seed", "1", "--json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["settings"]["sweep"] is True
    assert {c["mode"]: c["size"] for c in doc["settings"]["crossovers"]}["kernel"] == "128"
    res = run_cli("bench", "fake-copy", "--sweep", "--quick", "--db", str(db), "--seed", "1")
    assert res.exit_code == 0, res.stderr
    assert "CPU/GPU crossover" in res.stdout and "128" in res.stdout
    res = run_cli("report", "--last", "--db", str(db), "-o", str(tmp_path / "s.html"))
    assert res.exit_code == 0 and "run 2" in res.stdout
    assert 'id="plot-speedup-fake-copy"' in (tmp_path / "s.html").read_text()


def test_sweep_refuses_flags_it_would_ignore(run_cli, tmp_path):
    """--sweep with --baseline used to exit 0 without checking anything; now it is a usage error before measuring."""
    db = tmp_path / "h.db"
    for extra in (("--baseline", "h200"), ("--markdown", str(tmp_path / "s.md")), ("--size", "1KiB"), ("--csv",)):
        res = run_cli("bench", "fake-copy", "--sweep", "--quick", "--db", str(db), *extra)
        assert res.exit_code == 2 and f"--sweep does not take {extra[0]}" in res.stderr, res.stderr
    assert not db.exists() and not (tmp_path / "s.md").exists()
