"""Element-wise traffic and launches per layer (plan/traffic.py), against counts made by hand from the HF code."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpukit.plan.models import load_model
from gpukit.plan.traffic import TRAFFIC, head_bytes, layer_bytes, layer_launches

ROOT = Path(__file__).resolve().parents[3]


def test_llama_bf16_layer_bytes_by_hand() -> None:
    # per token: two RMSNorms (to fp32 2+4, pow 4+4, mean 4, × rsqrt 4+4, to bf16 4+2, × weight 2+2 = 36 per h),
    # two residual adds (2+2+2 per h), rotary on q (× cos 4, neg 2, cat 4, × sin 4, add 6 = 20 per h) and on k
    # (20 per k·d), SiLU (2+2) and × up (2+2+2) per i; the table's extra 0.75 per h is the [tokens, 1] variances
    per_h, per_i, per_kv = TRAFFIC["llama"]["bf16"].fwd
    assert per_h == pytest.approx(2 * 36 + 2 * 6 + 20, abs=1.0)
    assert (per_i, per_kv) == (10.0, 20.0)
    m = load_model("tinyllama-1.1b")  # h 2048, i 5632, 4 KV heads × 64
    tokens = 8 * 2048
    assert layer_bytes(m, "bf16", tokens, "forward") == pytest.approx(tokens * (104.75 * 2048 + 10 * 5632 + 20 * 256))
    assert layer_bytes(m, "bf16", tokens, "forward") / 2**30 == pytest.approx(4.21, abs=0.01)  # GiB per layer


def test_backward_moves_more_than_the_forward_and_fp32_more_than_bf16() -> None:
    m = load_model("tinyllama-1.1b")
    fwd, bwd = (layer_bytes(m, "bf16", 1024, ph) for ph in ("forward", "backward"))
    assert 2.0 < bwd / fwd < 2.5  # RMSNorm's decomposed backward: 84 bytes per h against the forward's 36
    assert layer_bytes(m, "fp32", 1024, "forward") > fwd


def test_loss_logits_in_fp32() -> None:
    m = load_model("tinyllama-1.1b")
    # bf16 logits: upcast (2 + 4), log-softmax (4 + 4), the loss reads them (4) — 18 bytes per token per vocab entry
    assert head_bytes(m, "bf16", 100, "forward") == 100 * 32000 * 18
    assert head_bytes(m, "fp32", 100, "forward") == 100 * 32000 * 12  # no upcast


def test_launches_count_matmuls_attention_and_recompute() -> None:
    assert layer_launches("llama", "bf16", "forward") == 30 + 7 + 1  # element-wise, q k v o gate up down, SDPA
    assert layer_launches("gpt2", "bf16", "forward") == 18 + 4 + 1  # fused c_attn, c_proj, c_fc, mlp c_proj
    assert layer_launches("llama", "bf16", "backward") == 52 + 14 + 1
    assert layer_launches("llama", "bf16", "backward", "non-reentrant") == 52 + 14 + 1 + 38


def test_the_table_is_the_count_of_this_transformers() -> None:
    pytest.importorskip("transformers")
    sys.path.insert(0, str(ROOT / "benchmarks" / "scripts"))
    from count_layer_traffic import coefficients

    got = coefficients("llama", "bf16")
    t = TRAFFIC["llama"]["bf16"]
    assert (got["fwd"]["per_h"], got["fwd"]["per_i"], got["fwd"]["per_kv"]) == pytest.approx(t.fwd, abs=1.0)
    assert (got["bwd"]["per_h"], got["bwd"]["per_i"], got["bwd"]["per_kv"]) == pytest.approx(t.bwd, abs=2.0)
    assert got["head_fwd"] == t.head_fwd
