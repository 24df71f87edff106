"""The models behind the H200 measurements the plan tests pin (tests import this module by name)."""

from __future__ import annotations

from gpukit.plan.models import ModelSpec, load_model, parse_hf_config

# The Llama-family config with grouped-query attention, scaled down to ~0.5 B parameters, that the calibration and
# the validation grid ran (benchmarks/scripts/plan_grid.py carries the same numbers).
LLAMA_GQA = {
    "model_type": "llama",
    "vocab_size": 32000,
    "hidden_size": 1536,
    "num_hidden_layers": 16,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "intermediate_size": 4096,
}


def measured_model(name: str) -> ModelSpec:
    """A preset by name, or the small GQA Llama for ``llama-gqa``."""
    return parse_hf_config(LLAMA_GQA, name) if name == "llama-gqa" else load_model(name)
