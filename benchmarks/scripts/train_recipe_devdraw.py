# ruff: noqa
# mypy: ignore-errors
"""Issue 23: writes one shapes-small dev draw (generator seed SEED, never the benchmark's images) as PNG folders for the
plain CLI: DIR/data/CLASS (N a class, what `gpukit train` sees) and DIR/held/CLASS (500 a class from generator seed
SEED + 1000), plus each image's object radius (data_r.npy, held_r.npy). Used with train_recipe_devdraw_run.sh:

    python benchmarks/scripts/train_recipe_devdraw.py /tmp/d101 101 200
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
import numpy as np
from PIL import Image
import train_recipe_screen as T

out, gseed, n = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for part, seed, k in (("data", gseed, n), ("held", gseed + 1000, 500)):
    x, y, r = T.gen_set("shapes-small", seed, k)
    for i in range(len(y)):
        d = out / part / ("square", "triangle")[y[i]]
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(x[i].transpose(1, 2, 0)).save(d / f"{i:05d}.png")
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / f"{part}_r.npy", r)  # radius of image i (file i)
