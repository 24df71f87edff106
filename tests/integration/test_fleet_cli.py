"""`gpukit fleet status | outliers | compare` over a real store (SQLite; PostgreSQL too when GPUKIT_TEST_PG_URL
names a server): simulated acceptances written with the store's own save_acceptance, read back by the CLI."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import fleet_synthetic as synth

SLOW = {(1, 2): ("gemm_bf16_tflops", 0.06), (4, 7): ("hbm_copy_gbps", 0.10)}


def _store(db: str, records: list[dict]) -> str:
    from gpukit.history import open_history

    with open_history(db) as history:
        for rec in records:
            history.save_acceptance(rec)
    return db


@pytest.fixture
def fleet_db(tmp_path: Path) -> str:
    return _store(str(tmp_path / "fleet.db"), synth.fleet(6, 8, seed=3, slowed=SLOW))


def _no_traceback(res) -> None:
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout


def test_status_shows_each_figure_as_a_fraction_of_the_fleet_median(run_cli, fleet_db: str) -> None:
    res = run_cli("fleet", "status", "--db", fleet_db, "--json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert len(doc["nodes"]) == 6 and len(doc["gpus"]) == 48
    assert {(f["node"], f["gpu"]) for f in doc["flagged"]} == {("node-001", 2), ("node-004", 7)}
    slow = next(g for g in doc["gpus"] if (g["node"], g["gpu"]) == ("node-001", 2))
    cell = slow["figures"]["gemm_bf16_tflops"]
    assert cell["vs_fleet"] == pytest.approx(0.94, abs=0.015)
    assert set(cell["flags"]) >= {"slow_vs_fleet", "slow_vs_peers"} and slow["verdict"] == "slow"
    healthy = [g["figures"][f]["vs_fleet"] for g in doc["gpus"] if g["verdict"] == "ok" for f in g["figures"]]
    assert len(healthy) == 46 * 7 and all(0.975 < v < 1.025 for v in healthy)
    table = run_cli("fleet", "status", "--db", fleet_db)
    assert table.exit_code == 0
    line = next(ln for ln in table.stdout.splitlines() if ln.split()[:2] == ["node-001", "2"])
    assert "*" in line and "slow" in line  # the flagged cell is marked in the row of that GPU
    assert "2 GPU(s) flagged" in table.stdout


def test_outliers_names_the_gpu_the_figure_the_mads_and_the_telemetry(run_cli, fleet_db: str) -> None:
    res = run_cli("fleet", "outliers", "--db", fleet_db, "--json")
    assert res.exit_code == 1, res.stderr
    doc = json.loads(res.stdout)
    assert doc["flagged_gpus"] == 2
    first, second = doc["outliers"]  # worst first: the 10 % one, then the 6 % one
    assert (first["node"], first["gpu"], first["figure"]) == ("node-004", 7, "hbm_copy_gbps")
    assert (second["node"], second["gpu"], second["figure"]) == ("node-001", 2, "gemm_bf16_tflops")
    assert first["fleet_mads"] < -10 and "slow_vs_reference" in first["flags"]
    assert second["telemetry"]["throttle_reasons"] == ["hw_thermal_slowdown"]
    text = run_cli("fleet", "outliers", "--db", fleet_db)
    assert text.exit_code == 1
    assert "node-004" in text.stdout and "hbm_copy_gbps" in text.stdout and "hw_thermal_slowdown" in text.stdout
    assert "2 of 48 GPUs flagged" in text.stdout


def test_outliers_exit_zero_on_a_healthy_fleet(run_cli, tmp_path: Path) -> None:
    db = _store(str(tmp_path / "ok.db"), synth.fleet(4, 8, seed=5))
    res = run_cli("fleet", "outliers", "--db", db)
    assert res.exit_code == 0 and "no outliers: 32 GPUs on 4 nodes" in res.stdout


def test_compare_refuses_different_settings_unless_forced(run_cli, tmp_path: Path) -> None:
    recs = synth.fleet(3, 8, seed=1)
    recs.append(synth.acceptance("node-new-driver", 8, seed=1, driver="575.57.08"))
    recs.append(synth.acceptance("node-600w", 8, seed=1, power_limit_w=600.0))
    db = _store(str(tmp_path / "cmp.db"), recs)
    same = run_cli("fleet", "compare", "node-000", "node-001", "--db", db, "--json")
    assert same.exit_code == 0, same.stderr
    doc = json.loads(same.stdout)
    assert doc["comparable"] and {f["verdict"] for f in doc["figures"]} == {"same"}
    refused = run_cli("fleet", "compare", "node-000", "node-new-driver", "--db", db)
    assert refused.exit_code == 2 and "error:" in refused.stderr and "driver 580.159.04 vs 575.57.08" in refused.stderr
    assert "hint:" in refused.stderr and "--force" in refused.stderr
    power = run_cli("fleet", "compare", "node-000", "node-600w", "--db", db)
    assert power.exit_code == 2 and "power_limit_w of GPU 0 700.0 vs 600.0" in power.stderr
    forced = run_cli("fleet", "compare", "node-000", "node-new-driver", "--db", db, "--force")
    assert forced.exit_code == 0 and "≠" in forced.stdout and "575.57.08" in forced.stdout


def test_bad_input_is_an_error_and_a_hint(run_cli, tmp_path: Path) -> None:
    empty = run_cli("fleet", "status", "--db", str(tmp_path / "none.db"))
    assert empty.exit_code == 2 and "no acceptance runs" in empty.stderr and "hint:" in empty.stderr
    one = _store(str(tmp_path / "one.db"), [synth.acceptance("lonely", 8)])
    for cmd in ("status", "outliers", "report"):
        res = (
            run_cli("fleet", cmd, "--db", one, "-o", str(tmp_path / "r.html"))
            if cmd == "report"
            else run_cli("fleet", cmd, "--db", one)
        )
        assert res.exit_code == 2, (cmd, res.stdout)
        flat = " ".join(res.stderr.split())  # the console wraps at its width, and the temporary path's length varies
        assert "only one node (lonely)" in flat and "no fleet median" in flat and "hint:" in flat
    db = _store(str(tmp_path / "two.db"), synth.fleet(2, 2))
    unknown = run_cli("fleet", "compare", "node-000", "nope", "--db", db)
    assert unknown.exit_code == 2 and "node 'nope' is not in the store" in unknown.stderr
    assert "node-000, node-001" in unknown.stderr
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite" * 100)
    for bad in (str(garbage), str(tmp_path)):
        res = run_cli("fleet", "status", "--db", bad)
        assert res.exit_code == 2 and "error:" in res.stderr and "hint:" in res.stderr, res.stderr
        _no_traceback(res)
    spread = tmp_path / "spread.json"
    spread.write_text("{not json", encoding="utf-8")
    res = run_cli("fleet", "status", "--db", db, "--spreads", str(spread))
    assert res.exit_code == 2 and "cannot read the spread file" in res.stderr


def _timed_status(run_cli, db: str) -> float:
    t0 = time.perf_counter()
    res = run_cli("fleet", "status", "--db", db)
    elapsed = time.perf_counter() - t0
    assert res.exit_code == 0, res.stderr
    assert "Fleet: 64 nodes, 512 GPUs" in res.stdout
    return elapsed


def test_status_over_64_nodes_answers_within_a_regression_bound(run_cli, store_url: str) -> None:
    """On SQLite and on the PostgreSQL test server (skipped without one, failed in CI without one). The documents are
    as large as real ones (NVML sampled at 2 Hz: ~180 kB a node, 12 MB in all). Best of three calls after a first
    that imports the modules. The design target, 2 s for the whole command, is a benchmark's
    (benchmarks/scripts/fleet_status_time.py: 0.96-1.14 s in-process and 1.83-1.91 s as a new process on the 2-core
    test machine, benchmarks/fleet-status_cpu_2026-12-02.md); a test machine may be slower or busy (the same calls
    took 2.26 s inside a full test run there), so this bound only catches what is several times slower."""
    db = _store(store_url, synth.fleet(64, 8, seed=2))
    _timed_status(run_cli, db)
    assert min(_timed_status(run_cli, db) for _ in range(3)) < 6.0


def test_every_command_reads_a_postgresql_store(run_cli, pg_url: str) -> None:
    db = _store(pg_url, synth.fleet(6, 8, seed=3, slowed=SLOW))
    res = run_cli("fleet", "outliers", "--db", db, "--json")
    assert res.exit_code == 1, res.stderr
    assert {(o["node"], o["gpu"]) for o in json.loads(res.stdout)["outliers"]} == {("node-001", 2), ("node-004", 7)}
    assert run_cli("fleet", "compare", "node-000", "node-003", "--db", db).exit_code == 0
