"""Count, from the Hugging Face code path itself, what one decoder layer's element-wise kernels move and launch.

    PYTHONPATH=src python3 benchmarks/scripts/count_layer_traffic.py [--json OUT.json]

Runs tiny GPT-2 / Llama / Qwen2 models (forward + backward, on the CPU, a second) under a TorchDispatchMode that
records every aten op the way the GPU would see it: matmuls (mm, addmm, bmm) and the attention kernel are left out
(the time model counts them as FLOPs); views move nothing; every other op is one kernel that reads its tensor inputs
and writes its outputs once. Differences over layers (1 vs 2), tokens (batch 2 vs 4) and widths (h, i, k·d, V)
give the coefficients that plan/profiles.py's ``TRAFFIC`` holds:

* ``fwd`` / ``bwd``: bytes per token of one layer = ``h·per_h + i·per_i + kd·per_kv`` (bwd: the autograd backward,
  without the recomputation checkpointing adds — that is one more forward);
* ``head_fwd`` / ``head_bwd``: bytes per token of the output head's element-wise work (logits, the loss) per V;
* ``kernels_fwd`` / ``kernels_bwd``: kernels one layer launches (forward; backward without recomputation).

The CPU's autocast casts a few ops differently from CUDA's (``pow`` and the norms run in fp32 there), so the amp
rows are counted with those ops' bf16 inputs cast to fp32 first, as CUDA's autocast does (the cast counted too).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SKIP = ("aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten._scaled_dot_product", "aten._efficient_attention",
        "aten._flash_attention", "aten.scaled_dot_product")  # fmt: skip
VIEWS = ("view", "_unsafe_view", "t.default", "transpose", "expand", "unsqueeze", "squeeze", "slice", "select",
         "as_strided", "detach", "alias", "permute", "split", "unbind", "lift_fresh", "_reshape_alias",
         "empty", "reshape", "flatten", "chunk")  # fmt: skip
# CUDA autocast's fp32 list, as far as these models reach it (the CPU's runs these in bf16)
CUDA_FP32 = ("aten.pow", "aten._log_softmax", "aten._softmax", "aten.native_layer_norm", "aten.rsqrt")


def _bytes(x: Any) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(_bytes(y) for y in x)
    return 0


class Tally(TorchDispatchMode):
    """Bytes and kernels of the non-matmul, non-view ops, per phase ('forward' / 'backward')."""

    def __init__(self, amp_cuda: bool) -> None:
        super().__init__()
        self.amp_cuda, self.phase = amp_cuda, "forward"
        self.bytes = {"forward": 0, "backward": 0}
        self.kernels = {"forward": 0, "backward": 0}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = str(func)
        if self.amp_cuda and self.phase == "forward" and name.startswith(CUDA_FP32):
            args = tuple(self._fp32(a) for a in args)  # CUDA's autocast runs it in fp32: its output promotes on
        out = func(*args, **(kwargs or {}))
        if name.startswith(SKIP) or any(f".{v}" in name for v in VIEWS):
            return out
        self.bytes[self.phase] += _bytes(list(args)) + _bytes(list((kwargs or {}).values())) + _bytes(out)
        self.kernels[self.phase] += 1
        return out

    def _fp32(self, a: Any) -> Any:
        if not (isinstance(a, torch.Tensor) and a.dtype == torch.bfloat16):
            return a
        self.bytes[self.phase] += a.numel() * 6  # the cast kernel: read bf16, write fp32
        self.kernels[self.phase] += 1
        return a.float()


def _config(family: str, h: int, i: int, k: int, v: int, layers: int) -> Any:
    import transformers

    d = 16
    if family == "gpt2":
        # attention dropout 0: on the CPU a dropout SDPA falls back to the math kernel's element-wise ops, on CUDA
        # it stays inside the fused kernel; the residual and embedding dropouts are real kernels on both
        kw: dict[str, Any] = {"n_embd": h, "n_inner": i, "n_head": h // d, "n_layer": layers, "n_positions": 64,
                              "vocab_size": v, "attn_pdrop": 0.0}  # fmt: skip
    else:
        kw = {"hidden_size": h, "intermediate_size": i, "num_attention_heads": h // d, "num_key_value_heads": k,
              "num_hidden_layers": layers, "vocab_size": v, "max_position_embeddings": 64, "head_dim": d}  # fmt: skip
    cfg = transformers.AutoConfig.for_model(family, **kw)
    cfg.use_cache = False
    return cfg


def run(family: str, mode: str, h: int, i: int, k: int, v: int, layers: int, batch: int, seq: int = 16
        ) -> tuple[dict[str, int], dict[str, int]]:  # fmt: skip
    import transformers

    torch.manual_seed(0)
    dtype = torch.bfloat16 if mode == "bf16" else torch.float32
    model = transformers.AutoModelForCausalLM.from_config(_config(family, h, i, k, v, layers), dtype=dtype,
                                                          attn_implementation="sdpa").train()  # fmt: skip
    ids = torch.randint(0, v, (batch, seq))
    amp = torch.autocast("cpu", dtype=torch.bfloat16) if mode == "amp" else contextlib.nullcontext()
    tally = Tally(amp_cuda=mode == "amp")
    with tally:
        with amp:
            loss = model(input_ids=ids, labels=ids).loss
        tally.phase = "backward"
        loss.backward()
    return tally.bytes, tally.kernels


def per_token_layer(family: str, mode: str, h: int, i: int, k: int, v: int) -> dict[str, float]:
    """Per layer and token (bytes), per token outside the layers (bytes), and kernels per layer."""
    r = {(lay, b): run(family, mode, h, i, k, v, lay, b) for lay in (1, 2) for b in (2, 4)}
    out: dict[str, float] = {}
    for ph in ("forward", "backward"):
        b = {key: val[0][ph] for key, val in r.items()}
        layer = (b[2, 4] - b[1, 4] - b[2, 2] + b[1, 2]) / (2 * 16)
        out[f"layer_{ph}"] = layer
        out[f"rest_{ph}"] = (b[1, 4] - b[1, 2]) / (2 * 16) - layer
        out[f"kernels_{ph}"] = r[2, 2][1][ph] - r[1, 2][1][ph]
    return out


def coefficients(family: str, mode: str) -> dict[str, Any]:
    """Solve bytes/token = h·per_h + i·per_i + kd·per_kv for one layer, and the head's bytes per V."""
    h, i, k, v, d = 64, 160, 2, 256, 16
    base = per_token_layer(family, mode, h, i, k, v)
    wide_i = per_token_layer(family, mode, h, 2 * i, k, v)
    wide_v = per_token_layer(family, mode, h, i, k, 2 * v)
    wide_k = per_token_layer(family, mode, h, i, 2 * k, v) if family != "gpt2" else base
    out: dict[str, Any] = {}
    for ph, short in (("forward", "fwd"), ("backward", "bwd")):
        per_i = (wide_i[f"layer_{ph}"] - base[f"layer_{ph}"]) / i
        per_kv = (wide_k[f"layer_{ph}"] - base[f"layer_{ph}"]) / (k * d)
        per_h = (base[f"layer_{ph}"] - per_i * i - per_kv * k * d) / h
        per_v = (wide_v[f"rest_{ph}"] - base[f"rest_{ph}"]) / v
        out[short] = {"per_h": round(per_h, 2), "per_i": round(per_i, 2), "per_kv": round(per_kv, 2)}
        out[f"head_{short}"] = round(per_v, 2)
        out[f"kernels_{short}"] = base[f"kernels_{ph}"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="write the table here too")
    args = ap.parse_args()
    table = {fam: {mode: coefficients(fam, mode) for mode in ("fp32", "amp", "bf16")} for fam in ("gpt2", "llama",
             "qwen2")}  # fmt: skip
    text = json.dumps(table, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
