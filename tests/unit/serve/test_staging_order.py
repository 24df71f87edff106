"""The model process's CUDA set-up, tested with stand-ins on a CPU: the staging stream's order of events for one
batch (``gpukit.serve.staging._stage``), and the hardware queues asked for before CUDA starts
(``gpukit.serve.cuda_env``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpukit.serve.cuda_env import CUDA_QUEUES, QUEUES_VAR, set_cuda_queues
from gpukit.serve.staging import _stage


class _Log:
    """A stream, an event pair and a fill that write what was done, in order, to one list."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.free, self.ready = self.Event(self, "free"), self.Event(self, "ready")

    class Event:
        def __init__(self, log: _Log, name: str) -> None:
            self.log, self.name = log, name

        def record(self, stream: object) -> None:
            assert stream is self.log
            self.log.calls.append(f"record {self.name}")

    def synchronize(self) -> None:
        self.calls.append("synchronize")

    def wait_event(self, event: _Log.Event) -> None:
        self.calls.append(f"wait {event.name}")

    def fill(self) -> str:
        self.calls.append("fill")
        return "filled"


def test_a_batch_syncs_before_it_writes_and_hands_off_with_no_sync_after() -> None:
    log = _Log()
    assert _stage(log, log, True, log.fill) == "filled"
    # the batch before is complete before anything here is overwritten (pinned buffer, freed images, reused ones);
    # the slot is written only after the executor's copy out of it; ready is the last thing, no host wait after it
    assert log.calls == ["synchronize", "wait free", "fill", "record ready"]


def test_the_old_order_syncs_at_the_end() -> None:
    log = _Log()
    _stage(log, log, False, log.fill)
    assert log.calls == ["wait free", "fill", "record ready", "synchronize"]


def test_a_failed_fill_records_no_ready_event() -> None:
    log = _Log()

    def boom() -> None:
        raise RuntimeError("decoder failed")

    with pytest.raises(RuntimeError):
        _stage(log, log, True, boom)
    assert "record ready" not in log.calls  # the batcher fails this batch; the executor never waits on it


def test_cuda_queues_are_asked_for_unless_the_user_chose() -> None:
    env: dict[str, str] = {}
    assert set_cuda_queues("cuda", env) == str(CUDA_QUEUES) == env[QUEUES_VAR]
    env = {}
    assert set_cuda_queues("auto", env) == "32"
    env = {QUEUES_VAR: "8"}
    assert set_cuda_queues("cuda:1", env) == "8" and env == {QUEUES_VAR: "8"}  # the user's value stands
    env = {}
    assert set_cuda_queues("cpu", env) is None and env == {}  # nothing to ask of a CPU


def test_gpukit_serve_asks_before_the_decoder_is_resolved(run_cli, tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("torch")
    from serve_testdata import make_checkpoint

    import gpukit.serve.config as config

    monkeypatch.setenv(QUEUES_VAR, "1")
    monkeypatch.delenv(QUEUES_VAR)  # absent now; restored to how it was after the test
    seen: list[str | None] = []
    real = config.resolve_decode

    def resolve(c):  # the first thing that may start CUDA (torch.cuda.is_available for --device auto)
        import os

        seen.append(os.environ.get(QUEUES_VAR))
        return real(c)

    monkeypatch.setattr(config, "resolve_decode", resolve)
    res = run_cli("serve", str(make_checkpoint(tmp_path / "run")), "--api-key-env", "GPUKIT_SURELY_UNSET_VAR")
    assert res.exit_code == 2  # refused (the key) after the decoder was resolved: nothing started
    assert seen and seen[0] == str(CUDA_QUEUES)
