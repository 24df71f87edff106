"""`gpukit plan`'s tables agree with its headline, and an all-n/a cost column says which option fills it (issue 26,
item 7)."""

from __future__ import annotations

import json
import re
from typing import Any


def _plan(run_cli: Any, *args: str) -> tuple[str, dict[str, Any]]:
    text = run_cli("plan", *args)
    doc = run_cli("plan", *args, "--json")
    assert text.exit_code == 0 and doc.exit_code == 0, text.stderr + doc.stderr
    return " ".join(text.stdout.split()), json.loads(doc.stdout)


def test_fit_table_names_the_layout_the_headline_times(run_cli: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    text, doc = _plan(run_cli, "llama-2-7b")
    t = doc["time"]
    assert t["gpu"] == "h100-sxm" and not t["as_asked"]  # 1 GPU does not fit: the headline picks a layout
    fit = next(f for f in doc["fits"] if f["gpu"] == t["gpu"])
    assert fit["fewest_gpus_layout"] != t["layout"]  # the case the issue saw: "2 (fsdp × 2)" against "tp 2"
    row = re.search(r"NVIDIA H100 SXM │[^\n]*?│ no │ ([^│]*)│", text)
    assert row, text
    assert f"{fit['fewest_gpus']} ({fit['fewest_gpus_layout']}, or {t['layout']}: timed below)" in row.group(1)
    assert f"time on h100-sxm, {t['layout']} (as asked it does not fit: the fastest layout of the fewest GPUs" in text


def test_cost_without_a_run_size_hints_at_tokens(run_cli: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    text, doc = _plan(run_cli, "llama-2-7b")
    fitting = [c for c in doc["cost"] if c["fits"]]
    assert fitting and all(c["usd"] is None for c in fitting)
    assert "hint: time and cost are per run: give the run's size with --tokens (e.g. --tokens 2B)" in text
    text, doc = _plan(run_cli, "llama-2-7b", "--tokens", "2B")
    assert all(c["usd"] is not None for c in doc["cost"] if c["fits"]) and "hint:" not in text
    text, _ = _plan(run_cli, "resnet50")
    assert "--samples (e.g. --samples 1M)" in text
