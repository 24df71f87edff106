"""One writer of the concurrency test: waits for the start file, then saves N bench runs and N acceptances under
its own node name, each tagged with its sequence number, as fast as it can. Prints the ids it got as JSON.

    python store_writer.py DB NODE N START_FILE
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from gpukit.history import open_history


def main(db: str, node: str, n: int, start: Path) -> None:
    with open_history(db, node=node) as h:
        h.identity()  # read before the start: the writes race, not the NVML probe
        while not start.exists():
            time.sleep(0.005)
        ids = []
        for seq in range(n):
            run = {"started_at": "2026-12-01T20:00:00Z", "duration_s": 0.1, "machine": {"hostname": node},
                   "settings": {"workloads": ["vector-add"], "writer": node, "seq": seq},
                   "results": [{"workload": "vector-add", "backend": "numpy", "device": "cpu", "size": f"{seq}",
                                "status": "ok", "kernel_median_s": 1e-3} for _ in range(3)]}  # fmt: skip
            ids.append(("run", h.save_run(run)))
            doc = {"kind": "gpukit-accept", "version": 1, "verdict": "ok", "seq": seq, "gpus": []}
            ids.append(("acceptance", h.save_acceptance(doc)))
    print(json.dumps(ids))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]))
