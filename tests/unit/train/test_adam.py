"""The trainer's Adam takes torch.optim.Adam's steps bit for bit, and keeps its state layout."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from gpukit.train.adam import Adam  # noqa: E402


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(144, 2))
    return net.to(memory_format=torch.channels_last)  # type: ignore[call-overload]


def _train(make_opt, lrs: list[float]) -> tuple[torch.nn.Module, object]:
    net = _net()
    opt = make_opt(net.parameters())
    g = torch.Generator().manual_seed(1)
    for lr in lrs:
        x, y = torch.randn(5, 3, 8, 8, generator=g), torch.randint(0, 2, (5,), generator=g)
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(net(x), y).backward()
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
    return net, opt


@pytest.mark.parametrize("fused", [False, True])
def test_weight_decay_is_torch_adamw(fused: bool) -> None:
    """``weight_decay`` is decoupled: the same bits as torch.optim.AdamW, and not Adam's L2 penalty."""
    lrs = [1e-2, 5e-3, 3e-2, 1e-3]
    ours, _ = _train(lambda p: Adam(p, lr=1e-2, weight_decay=0.1, fused=fused), lrs)
    ref, _ = _train(lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, fused=fused), lrs)
    l2, _ = _train(lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.1, fused=fused), lrs)
    for a, b, c in zip(ours.parameters(), ref.parameters(), l2.parameters(), strict=True):
        assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("fused", [False, True])
def test_same_bits_and_state_as_torch_adam(fused: bool) -> None:
    lrs = [1e-2, 5e-3, 3e-2, 1e-3, 2e-2, 1e-2]
    ours, o_opt = _train(lambda p: Adam(p, lr=1e-2, fused=fused), lrs)
    ref, r_opt = _train(lambda p: torch.optim.Adam(p, lr=1e-2, fused=fused), lrs)
    for a, b in zip(ours.parameters(), ref.parameters(), strict=True):
        assert torch.equal(a, b)
    for pa, pb in zip(ours.parameters(), ref.parameters(), strict=True):
        sa, sb = o_opt.state[pa], r_opt.state[pb]  # type: ignore[attr-defined]
        assert sorted(sa) == sorted(sb) == ["exp_avg", "exp_avg_sq", "step"]
        for key in sa:
            assert torch.equal(sa[key], sb[key]) and sa[key].dtype == sb[key].dtype
            assert sa[key].device == sb[key].device and sa[key].stride() == sb[key].stride()
    assert float(o_opt.state[next(ours.parameters())]["step"]) == len(lrs)  # type: ignore[attr-defined]


def test_no_grad_no_state_and_zero_grad() -> None:
    net = _net()
    opt = Adam(net.parameters(), lr=0.1)
    before = [p.detach().clone() for p in net.parameters()]
    opt.step()  # no gradients yet: nothing moves and no state is made
    assert opt.state == {} and all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))
    net(torch.randn(1, 3, 8, 8)).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in net.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_refuses_what_it_cannot_do() -> None:
    with pytest.raises(ValueError, match="no parameters"):
        Adam([], lr=0.1)
    with pytest.raises(ValueError, match="tensor lr"):
        Adam(_net().parameters(), lr=torch.tensor(0.1))


def test_import_and_step_do_not_import_dynamo() -> None:
    """The point of the class: torch.optim.Optimizer's methods import torch._dynamo (seconds) on first call."""
    import subprocess

    code = ("import sys, torch\nfrom gpukit.train.adam import Adam\n"
            "p = torch.nn.Parameter(torch.ones(3)); o = Adam([p], lr=0.1)\n"
            "(p * p).sum().backward(); o.step(); o.zero_grad()\n"
            "assert float(p[0]) < 1.0\nprint('torch._dynamo' in sys.modules)\n")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"
