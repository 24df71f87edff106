"""`gpukit serve --decode-threads N`: the Pillow threads of each HTTP process (0: chosen from the CPUs it may use)."""

from __future__ import annotations

import pytest
from serve_testdata import make_checkpoint

from gpukit.errors import ConfigError
from gpukit.serve import core as core_module
from gpukit.serve.config import ServeConfig
from gpukit.serve.core import Core
from gpukit.serve.metrics import Metrics


def test_the_setting_sizes_each_http_process_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    core = Core(ServeConfig(model="m", decode_threads=3).validate(), Metrics())  # type: ignore[arg-type]
    assert core.pool._max_workers == 3
    core.pool.shutdown()
    for budget, threads in ((1, 2), (5, 5), (64, 8)):  # 0: the CPUs this process may use, 2 to 8
        monkeypatch.setattr(core_module, "cpu_budget", lambda n=budget: n)
        chosen = Core(ServeConfig(model="m"), Metrics())  # type: ignore[arg-type]
        assert chosen.pool._max_workers == threads
        chosen.pool.shutdown()


def test_out_of_range_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"--decode-threads must be in 0\.\.256"):
        ServeConfig(model="m", decode_threads=-1).validate()  # type: ignore[arg-type]


def test_the_cli_refuses_it_before_any_process_starts(tmp_path, run_cli) -> None:
    pytest.importorskip("fastapi")
    r = run_cli("serve", str(make_checkpoint(tmp_path / "run")), "--decode-threads", "999", "--device", "cpu")
    assert r.exit_code == 2 and "error: --decode-threads must be in 0..256" in r.stderr and "Traceback" not in r.stderr
