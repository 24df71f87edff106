"""Issue 25: does `plan --measure` count the cuBLAS workspace when an earlier GEMM in the process left one? (one GPU,
about 30 s) Each configuration measured by measure() in one process after a GEMM, beside the plan's prediction.

    PYTHONPATH=src python3 benchmarks/scripts/plan_workspace_check.py
"""

import torch

from gpukit.plan.measure import measure
from gpukit.plan.memory import PlanSettings, estimate_memory
from gpukit.plan.models import load_model

a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
(a @ a)
torch.cuda.synchronize()
print("allocated after a GEMM, MiB:", torch.cuda.memory_allocated() // 2**20)
for name, kw in [
    ("gpt2", dict(batch=8, prompt=384, new_tokens=64)),
    ("gpt2-medium", dict(batch=1, prompt=128, new_tokens=64)),
    ("seed-cnn", dict(task="train", recipe="bf16", batch=64)),
]:
    s = PlanSettings(**({"task": "infer"} | kw))
    m = measure(load_model(name), s)
    p = estimate_memory(load_model(name), s).peak_allocated_bytes
    err = p / m.peak_allocated_bytes - 1
    print(f"{name} {kw}: measured {m.peak_allocated_bytes / 2**20:.0f} MiB, predicted {p / 2**20:.0f} MiB, {err:+.1%}")
