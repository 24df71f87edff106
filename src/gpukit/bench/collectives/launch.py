"""One process per rank: spawn, watch, time out, clean up.

Each rank is ``python -m gpukit.bench.collectives.worker JOB_DIR`` in its own session (its own process group, so
anything it starts goes with it), with RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT set as torchrun
would. The launcher polls: every rank exited 0 → rank 0's ``result.json``; a rank exited otherwise → that rank and
its exit status (and the last line of its stderr) — a dead rank; no rank's heartbeat moved for ``timeout_s`` → the
rank(s) furthest behind, and the stage they were in — a hung rank. Either way every process group is sent SIGTERM,
then SIGKILL after a grace period, and reaped: no orphan is left. Under torchrun (RANK set by it) :func:`run_inline`
runs the rank in this process instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpukit.hardware.cpu import cpu_budget

__all__ = ["LaunchResult", "RankFailure", "launch", "run_inline", "under_torchrun"]

POLL_S = 0.05
GRACE_S = 3.0
STARTUP_S = 60.0


@dataclass(frozen=True)
class RankFailure:
    rank: int | None  # None: every rank stalled at the same stage
    kind: str  # "died" | "hung"
    reason: str

    def message(self) -> str:
        who = "every rank" if self.rank is None else f"rank {self.rank}"
        return f"{who} {self.kind}: {self.reason}"


@dataclass
class LaunchResult:
    rows: list[dict[str, Any]] = field(default_factory=list)  # rank 0's rows (the partial ones on failure)
    failure: RankFailure | None = None
    pids: list[int] = field(default_factory=list)  # for tests: every one of them is gone when launch returns
    wall_s: float = 0.0


def under_torchrun() -> bool:
    """Started by torchrun (or another launcher that sets RANK), not by gpukit's own launcher."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ and "GPUKIT_RANK_WORKER" not in os.environ


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(rank: int, ranks: int, port: int, extra: dict[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[3])  # this gpukit's own source first, as the parent runs it
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(ranks),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GPUKIT_RANK_WORKER="1")  # fmt: skip
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    env.setdefault("OMP_NUM_THREADS", str(max(1, cpu_budget() // ranks)))
    env.update(extra or {})
    return env


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _heartbeat(job_dir: Path, rank: int) -> tuple[int, str, float]:
    """(beats, stage, mtime) of a rank; (0, 'starting', 0) before its first."""
    path = job_dir / f"hb.{rank}"
    try:
        text = path.read_text().strip()
        beats, _, stage = text.partition(" ")
        return int(beats), stage, path.stat().st_mtime
    except (OSError, ValueError):
        return 0, "starting (importing torch, joining the group)", 0.0


def _kill_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, sig)  # the rank's whole session: its own children too
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            time.sleep(POLL_S)
    for p in procs:
        p.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)  # a grandchild that outlived its rank


def _died(procs: list[subprocess.Popen[bytes]], job_dir: Path) -> RankFailure | None:
    for rank, p in enumerate(procs):
        code = p.poll()
        if code not in (None, 0):
            how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
            last = _last_line(job_dir / f"stderr.{rank}")
            return RankFailure(rank, "died", how + (f" ({last})" if last else ""))
    return None


def _hung(job_dir: Path, ranks: int, started: float, timeout_s: float) -> RankFailure | None:
    beats = [_heartbeat(job_dir, r) for r in range(ranks)]
    newest = max([started] + [b[2] for b in beats])
    # Until every rank has joined the group, importing torch on a loaded machine may take longer than a short
    # --timeout: starting up gets at least STARTUP_S.
    allowed = timeout_s if all(b[0] for b in beats) else max(timeout_s, STARTUP_S)
    if time.time() - newest < allowed:
        return None
    low = min(b[0] for b in beats)
    behind = [r for r, b in enumerate(beats) if b[0] == low]
    stage = beats[behind[0]][1]
    reason = f"no progress for {allowed:g} s (--timeout), at: {stage}"
    if len(behind) == ranks:
        return RankFailure(None, "hung", reason)
    return RankFailure(behind[0] if len(behind) == 1 else None, "hung",
                       reason + ("" if len(behind) == 1 else f" (ranks {behind})"))  # fmt: skip


def _rows(job_dir: Path) -> list[dict[str, Any]]:
    done = job_dir / "result.json"
    if done.exists():
        return list(json.loads(done.read_text()))
    partial = job_dir / "rows.jsonl"
    if not partial.exists():
        return []
    return [json.loads(line) for line in partial.read_text().splitlines() if line.strip()]


def launch(job: dict[str, Any], ranks: int, timeout_s: float, env: dict[str, str] | None = None) -> LaunchResult:
    """Run ``job`` on ``ranks`` fresh processes of this machine; never leaves one running."""
    with tempfile.TemporaryDirectory(prefix="gpukit-ranks-") as tmp:
        job_dir = Path(tmp)
        (job_dir / "job.json").write_text(json.dumps(dict(job, timeout_s=timeout_s)))
        port = _free_port()
        procs: list[subprocess.Popen[bytes]] = []
        started = time.time()
        result = LaunchResult()
        try:
            for rank in range(ranks):
                with open(job_dir / f"stderr.{rank}", "wb") as err:
                    procs.append(
                        subprocess.Popen(
                            [sys.executable, "-m", "gpukit.bench.collectives.worker", str(job_dir)],
                            env=_env(rank, ranks, port, env),
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            stderr=err,
                            start_new_session=True,
                        )
                    )
            result.pids = [p.pid for p in procs]
            while True:
                if all(p.poll() == 0 for p in procs):
                    break
                result.failure = _died(procs, job_dir) or _hung(job_dir, ranks, started, timeout_s)
                if result.failure is not None:
                    break
                time.sleep(POLL_S)
        finally:
            _kill_all(procs)
        result.rows = _rows(job_dir)
        if result.failure is None and not (job_dir / "result.json").exists():
            result.failure = RankFailure(0, "died", "exited 0 without writing its result")
        result.wall_s = time.time() - started
    return result


# What a rank runs, per job kind, named (not imported) here: the worker and scaling import this module, so launch
# importing them would close a circle. ``rank_function`` resolves the name when a rank starts.
RANK_ENTRIES = {
    "collectives": "gpukit.bench.collectives.worker:run_collectives",
    "scaling": "gpukit.bench.collectives.scaling:run_scaling_rank",
}


def rank_function(job: dict[str, Any]) -> Any:
    """The function one rank of ``job`` runs: ``fn(job, job_dir | None) -> rows``."""
    import importlib

    module, _, name = RANK_ENTRIES[job["kind"]].partition(":")
    return getattr(importlib.import_module(module), name)


def run_inline(job: dict[str, Any], timeout_s: float) -> LaunchResult:
    """This process is one rank of a torchrun job: run it here. Rank 0 gets the rows, the others an empty list."""
    from gpukit.bench.collectives import group

    started = time.time()
    job = dict(job, timeout_s=timeout_s)
    job["device_name"] = group.join(job["device"], timeout_s)
    try:
        rows = rank_function(job)(job, None)
    finally:
        group.leave()
    return LaunchResult(rows=rows, wall_s=time.time() - started)
