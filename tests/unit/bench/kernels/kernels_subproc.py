"""Run a test body in a fresh interpreter with an environment switch (a simulator) set before any import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[4] / "src"


def run_json(body: str, env: dict[str, str], timeout: float = 120) -> dict[str, Any]:
    """Run ``body`` (which must print one JSON object as its last line) with ``env`` added; return that object."""
    full_env = {**os.environ, **env, "PYTHONPATH": str(SRC)}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(body)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, f"subprocess failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]
