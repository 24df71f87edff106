# ruff: noqa
# mypy: ignore-errors
"""Issue 23's screening of the default recipe on separately generated dev sets (generator seeds >= 101, never the
benchmark's images): the gpukit augmentation and schedule code, the default network or a variant, outside the CLI.

One run: a set from ``train_recipe_sets.shapes_images`` with generator seed ``gseed`` (``n_train`` a class; 20 %
of it held back as the validation split that picks the epoch of lowest loss), 1,000 held-out images from
generator seed ``held_seed + 1000``; prints one JSON line: held-out accuracy at the best epoch and at the last, by
object radius quartile, by luminance contrast quartile, by class. As it ran for benchmarks/train-recipe_cpu_2026-12-02-run4.md:

    flock /work/wt/cpu.lock nice -n 5 timeout -s KILL 290 python benchmarks/scripts/train_recipe_screen.py \
        '{"tag": "neutral", "gseed": 101, "held_seed": 101, "threads": 2}'

Knobs: ``knobs`` (augmentation knobs on the default recipe), ``arch_spec`` ("base": small-cnn; or
"g|max|16x2p0,32,64,128": widths, "xN" convolutions, "p0" no pool after that stage), ``steps``, ``mixup``, ``geom_p`` (the
share of images resampled by the crop/shift; the rest pass as they are), ``mode`` (grid_sample's), ``ema`` (a decay: score the
weights' moving average), ``device`` (cuda: the
model in channels_last, as the CLI's; the augmentation's random draws stay on the CPU, as in the CLI).
``SCREEN_SRC=DIR``: import gpukit from DIR instead (the "before" rows ran on main's src at cba693d, the crop
that only zooms in: ``git archive cba693d src | tar -x -C OLD`` then ``SCREEN_SRC=OLD/src``).
A scratch tool (one-letter names as it ran); not part of the package.
"""

import sys, time, json, copy, math
from pathlib import Path

HERE = Path(__file__).resolve().parent
import os

sys.path.insert(0, os.environ.get("SCREEN_SRC", str(HERE.parents[1] / "src")))
sys.path.insert(0, str(HERE))
import numpy as np, torch, torch.nn as nn, torch.nn.functional as F
import train_recipe_sets as S
from gpukit.train.augment import recipe, draw_thetas, draw_jitter, apply_affine, apply_jitter
from gpukit.train.schedule import lr_at
from gpukit.train.models import small_cnn


class GP(nn.Module):
    def forward(self, x):
        return torch.cat([x.mean((2, 3)), x.amax((2, 3))], 1)


def cbr(c, o, stride=1):
    return [nn.Conv2d(c, o, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True)]


class BlurPool(nn.Module):
    def __init__(self, c):
        super().__init__()
        k = torch.tensor([1.0, 2.0, 1.0])
        k = (k[:, None] * k[None, :]) / 16
        self.register_buffer("k", k.expand(c, 1, 3, 3).contiguous())
        self.c = c

    def forward(self, x):
        x = F.max_pool2d(F.pad(x, (0, 1, 0, 1), mode="replicate"), 2, 1)
        return F.conv2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), self.k, stride=2, groups=self.c)


def gen_set(name, seed, n_per_class):
    rs = []
    cs = []
    orig = S.shape_mask
    origc = S._contrasting

    def rec(kind, cx, cy, r, angle, size=64):
        rs.append(r)
        return orig(kind, cx, cy, r, angle, size)

    def recc(rng, against):
        c = origc(rng, against)
        w = np.array([0.299, 0.587, 0.114])
        cs.append(abs(float((c - against) @ w)))
        return c

    S.shape_mask = rec
    S._contrasting = recc
    kinds, radius, bg = S.SHAPES[name]
    im, lb = S.shapes_images(kinds, radius, bg, n_per_class=n_per_class, seed=seed)
    S.shape_mask = orig
    S._contrasting = origc
    gen_set.contrast = np.asarray(cs)
    x = (np.clip(im, 0, 1) * 255).astype(np.uint8).transpose(0, 3, 1, 2).copy()
    return x, lb.astype(np.int64), np.asarray(rs)


def arch(spec):
    # "base" | "g|max|24x2p0,48,96,192"  (p0: no pool after that stage) | blur
    if spec == "base":
        return small_cnn(2)
    _, pool, st = spec.split("|")
    L = []
    c = 3
    for tok in st.split(","):
        pool_it = not tok.endswith("p0")
        tok = tok.replace("p0", "")
        o, n = (int(v) for v in tok.split("x")) if "x" in tok else (int(tok), 1)
        for _ in range(n):
            L += cbr(c, o)
            c = o
        if pool_it:
            L.append(BlurPool(c) if pool == "blur" else nn.MaxPool2d(2))
    return nn.Sequential(*L, GP(), nn.Flatten(), nn.Dropout(0.2), nn.Linear(2 * c, 1))


def affine(batch_u8, theta, mode):
    if mode == "bilinear":
        return apply_affine(batch_u8, theta)
    x = batch_u8.float() / 255
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode=mode, padding_mode="border", align_corners=False).clamp_(0, 1)


def logits(m, X):
    m.eval()
    with torch.no_grad():
        dev = next(m.parameters()).device
        out = [m(torch.from_numpy(X[i : i + 100]).to(dev).float() / 255) for i in range(0, len(X), 100)]
    m.train()
    return torch.cat(out).view(-1).cpu()


def score(out, Y):
    y = torch.from_numpy(Y).float()
    return float(((out > 0).float() == y).float().mean()), float(F.binary_cross_entropy_with_logits(out, y))


def run(
    name="shapes-small",
    gseed=104,
    n_train=200,
    held_seed=104,
    arch_spec="base",
    knobs=None,
    steps=1200,
    lr=2e-3,
    wd=0.05,
    ls=0.1,
    seed=0,
    threads=1,
    tag="",
    mixup=0.0,
    device="cpu",
    geom_p=1.0,
    mode="bilinear",
    ema=0.0,
):
    torch.set_num_threads(threads)
    X, Y, R = gen_set(name, gseed, n_train)
    HX, HY, HR = gen_set(name, held_seed + 1000, 500)  # held-out: its own generator seed, 1000 images
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(X))
    nv = len(X) // 5
    VX, VY = X[idx[:nv]], Y[idx[:nv]]
    X, Y = X[idx[nv:]], Y[idx[nv:]]
    torch.manual_seed(seed)
    m = arch(arch_spec).to(device)
    if device != "cpu":
        m = m.to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(m.parameters(), lr=lr, weight_decay=wd)
    train_m = m
    if ema:  # validate, choose and score the exponential moving average of the weights (and BN statistics)
        from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

        m = AveragedModel(train_m, multi_avg_fn=get_ema_multi_avg_fn(ema), use_buffers=True)
    Xt = torch.from_numpy(X).to(device)
    Yt = torch.from_numpy(Y).to(device)
    cfg = recipe("default", **(knobs or {}))
    spe = len(Xt) // 32
    epochs = -(-steps // spe)
    total = spe * epochs
    t0 = time.perf_counter()
    s = 0
    best = (9e9, None, 0)
    every = max(1, epochs // 60)
    for ep in range(epochs):
        g = torch.Generator().manual_seed(seed * 1_000_003 + ep)
        perm = torch.randperm(len(Xt), generator=g)[: spe * 32].view(spe, 32)
        perm = perm.to(device)
        th = draw_thetas(spe * 32, cfg, g)
        if geom_p < 1:  # the rest of the images pass unresampled (identity), as crisp as the held-out ones
            keep = torch.rand(spe * 32, generator=g) >= geom_p
            th[keep] = torch.tensor([[1.0, 0, 0], [0, 1.0, 0]])
        th = th.view(spe, 32, 2, 3).to(device)
        jt = draw_jitter(spe * 32, cfg, g).view(spe, 32, 3).to(device)
        for i in range(spe):
            for gr in opt.param_groups:
                gr["lr"] = lr_at(s, total, lr, "cosine", 0.05)
            b = perm[i]
            x = apply_jitter(affine(Xt[b], th[i], mode), jt[i])
            y = Yt[b].float() * (1 - ls) + ls / 2
            if mixup:
                lam = float(np.random.default_rng(s).beta(mixup, mixup))
                p = torch.roll(torch.arange(32), 1)
                x = lam * x + (1 - lam) * x[p]
                y = lam * y + (1 - lam) * y[p]
            loss = F.binary_cross_entropy_with_logits(train_m(x).view(-1), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if ema:
                m.update_parameters(train_m)
            s += 1
        if ep % every == every - 1 or ep == epochs - 1:
            _, vl = score(logits(m, VX), VY)
            if vl < best[0] - 1e-3:
                best = (vl, copy.deepcopy(m.state_dict()), ep + 1)
    dt = time.perf_counter() - t0
    r = dict(
        tag=tag,
        set=name,
        gseed=gseed,
        n_train=len(X),
        arch=arch_spec,
        knobs=knobs,
        steps=total,
        seed=seed,
        mixup=mixup,
        geom_p=geom_p,
        mode=mode,
        ema=ema,
    )
    r["held_last"], _ = score(logits(m, HX), HY)
    m.load_state_dict(best[1])
    out = logits(m, HX)
    r["held_best"], _ = score(out, HY)
    r["best_epoch"] = best[2]
    ok = (out > 0).long().numpy() == HY
    edges = np.quantile(HR, [0, 0.25, 0.5, 0.75, 1])
    r["by_r"] = {
        f"{edges[k]:.1f}-{edges[k + 1]:.1f}": round(float(ok[(HR >= edges[k]) & (HR <= edges[k + 1])].mean()), 3)
        for k in range(4)
    }
    HC = gen_set.contrast
    ce = np.quantile(HC, [0, 0.25, 0.5, 0.75, 1])
    r["by_lum_contrast"] = {
        f"{ce[k]:.2f}-{ce[k + 1]:.2f}": round(float(ok[(HC >= ce[k]) & (HC <= ce[k + 1])].mean()), 3) for k in range(4)
    }
    r["by_class"] = [round(float(ok[HY == c].mean()), 3) for c in (0, 1)]
    r["s"] = round(dt, 1)
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    for line in sys.argv[1:]:
        run(**json.loads(line))
