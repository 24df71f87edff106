"""`gpukit plan` through the CLI: JSON schema, tables, bad input exits 2 with an error line, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "plan"
MEMORY_KEYS = (
    "weights_bytes",
    "gradients_bytes",
    "master_bytes",
    "optimizer_bytes",
    "activations_bytes",
    "logits_bytes",
    "kv_cache_bytes",
    "overhead_bytes",
    "total_bytes",
)


def plan_json(run_cli: Callable[..., Any], *args: str) -> dict[str, Any]:
    r = run_cli("plan", *args, "--json")
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_json_schema(run_cli: Callable[..., Any]) -> None:
    d = plan_json(run_cli, "llama-2-7b", "--seq", "1024", "--tokens", "1B")
    assert d["params"] == 6_738_415_616
    for key in MEMORY_KEYS:
        assert isinstance(d[key], int) and d[key] >= 0
    parts = sum(d[k] for k in MEMORY_KEYS if k != "total_bytes") + d["workspace_bytes"]
    assert d["total_bytes"] >= parts - max(d["activations_bytes"], d["gradients_bytes"]) > 0
    assert {f["gpu"] for f in d["fits"]} >= {"h100-sxm", "h200-sxm", "a100-80gb"}
    assert d["time"]["step_s"] > 0 and d["time"]["total_s"] > 0 and 0 < d["time"]["mfu"] <= 0.8
    assert d["cost"][0]["fits"] and d["cost"][0]["usd"] > 0
    fitting = [c["usd"] for c in d["cost"] if c["fits"]]
    assert fitting == sorted(fitting)  # cheapest first
    assert all(c["source"] and c["as_of"] for c in d["cost"])


def test_fp32_7b_weights_through_cli(run_cli: Callable[..., Any]) -> None:
    d = plan_json(run_cli, "--params", "7B", "--recipe", "fp32")
    assert d["weights_bytes"] == 28_000_000_000 and d["params"] == 7_000_000_000


def test_bare_param_count_has_no_invented_time(run_cli: Callable[..., Any]) -> None:
    # --params has no FLOPs or activation model: a step time, MFU or run cost would be made up (it printed MFU 0.0%)
    d = plan_json(run_cli, "--params", "7B", "--tokens", "1B")
    t = d["time"]
    assert t["step_s"] is None and t["mfu"] is None and t["total_s"] is None and t["tokens_per_s"] is None
    fitting = [c for c in d["cost"] if c["fits"]]
    assert fitting and all(c["usd"] is None and c["usd_per_million"] is None for c in fitting)
    assert not any("MFU" in n for n in d["memory_notes"])
    r = run_cli("plan", "--params", "7B")
    assert r.exit_code == 0 and "MFU" not in r.stdout
    text = " ".join(r.stdout.split())
    assert "time on h100-sxm, fsdp × 2 (as asked it does not fit: on the fewest GPUs that fit): n/a" in text
    assert "--tokens" not in text  # no run size can give a bare count a time


def test_inference_kv_cache_and_fewest_gpus(run_cli: Callable[..., Any]) -> None:
    d = plan_json(run_cli, "llama-2-70b", "--task", "infer", "--batch", "4", "--prompt", "1000", "--new-tokens", "24")
    assert d["kv_cache_bytes"] == 2 * 80 * 8 * 128 * 1024 * 4 * 2
    fits = {f["gpu"]: f for f in d["fits"]}
    assert not fits["h100-sxm"]["fits"] and fits["h100-sxm"]["fewest_gpus"] == 2
    assert fits["b200-sxm"]["fits"]
    assert d["time"]["bandwidth_bound_tokens_per_s"] > d["time"]["tokens_per_s"] > 0


def test_prices_override(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    f = tmp_path / "p.toml"
    f.write_text(
        '[instance."cheap-h200"]\ngpu = "h200-sxm"\ngpus = 1\nusd_per_hour = 0.01\nsource = "test"\n'
        'as_of = "2026-11-30"\n'
    )
    d = plan_json(run_cli, "gpt2", "--seq", "1024", "--prices", str(f), "--tokens", "1M")
    assert d["cost"][0]["instance"] == "cheap-h200"


def test_table_output(run_cli: Callable[..., Any]) -> None:
    r = run_cli("plan", "qwen2-0.5b", "--batch", "4", "--seq", "1024", "--tokens", "100M")
    assert r.exit_code == 0, r.stderr
    for text in ("494,032,768 parameters", "memory per GPU", "which GPUs fit", "MFU", "cheapest first", "as of"):
        assert text in r.stdout


def test_config_json_input(run_cli: Callable[..., Any]) -> None:
    d = plan_json(run_cli, str(FIXTURES / "moe_mixtral" / "config.json"), "--seq", "256")
    assert d["params"] == 1_142_400 and d["active_params"] == 749_184


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("llama2-7b",), "did you mean"),
        ((str(FIXTURES / "malformed.json"),), "not valid JSON"),
        ((str(FIXTURES / "incomplete.json"),), "hidden_size"),
        (("llama-2-7b", "--tp", "3", "--gpus", "3"), "does not divide"),
        (("llama-2-7b", "--recipe", "fp16"), "--recipe"),
        (("--params", "lots"), "not a size"),
        ((), "no model given"),
        (("llama-2-7b", "--params", "7B"), "MODEL or --params, not both"),
        (("llama-2-7b", "--tp", "0"), "--tp must be at least 1"),
        (("llama-2-7b", "--tokens", "2Q"), "--tokens '2Q' is not a size"),
        (("seed-cnn", "--samples", "0"), "--samples '0' must be positive"),
        (("llama-2-7b", "--samples", "1M"), "--samples counts images"),
        (("resnet50", "--tokens", "1B"), "--tokens counts tokens, and a CNN"),
    ],
)
def test_bad_input_exits_2(run_cli: Callable[..., Any], args: tuple[str, ...], message: str) -> None:
    r = run_cli("plan", *args)
    assert r.exit_code == 2
    assert "error:" in r.stderr and message in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_measure_without_gpu_is_a_clear_failure(run_cli: Callable[..., Any]) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: tests/gpu covers --measure")
    r = run_cli("plan", "seed-cnn", "--batch", "8", "--measure")
    assert r.exit_code == 1 and "needs a CUDA GPU" in r.stderr


def test_list_presets(run_cli: Callable[..., Any]) -> None:
    r = run_cli("plan", "--list", "--json")
    assert r.exit_code == 0 and "llama-2-7b" in json.loads(r.stdout)


def test_cnn_inference_is_refused_not_guessed(run_cli: Callable[..., Any]) -> None:
    r = run_cli("plan", "resnet50", "--task", "infer")
    assert r.exit_code == 2 and "--task train" in r.stderr


def test_multi_gpu_notes_leave_out_communication(run_cli: Callable[..., Any]) -> None:
    d = plan_json(run_cli, "llama-2-13b", "--gpus", "8", "--shard", "fsdp", "--seq", "4096")
    assert any("communication" in n for n in d["memory_notes"])
    assert d["overhead_bytes"] > 1.5 * 2**30  # NCCL's share per rank


def test_capacity_is_what_the_driver_reports_not_datasheet_gb(run_cli: Callable[..., Any]) -> None:
    """An H200 ("141 GB") gives programs 143,771 MiB = 140.4 GiB; counting 141 × 10⁹ bytes (131.3 GiB) refused a
    68B-parameter bf16 inference that needs 133.8 GiB. Parts without a driver figure keep GB × 10⁹."""
    d = plan_json(run_cli, "--params", "68B", "--task", "infer")
    assert 131.4 * 2**30 < d["total_bytes"] < 140 * 2**30
    fits = {f["gpu"]: f for f in d["fits"]}
    assert fits["h200-sxm"]["memory_bytes"] == 143_771 * 2**20 and fits["h200-sxm"]["fits"]
    assert fits["h100-sxm"]["memory_bytes"] == 81_559 * 2**20
    assert fits["v100-sxm2-16gb"]["memory_bytes"] == 16 * 10**9  # no driver figure sourced: the datasheet's
