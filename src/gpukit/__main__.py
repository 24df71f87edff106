"""``python -m gpukit`` — the same as the ``gpukit`` console script."""

from __future__ import annotations

import sys

from gpukit.cli import main

if __name__ == "__main__":
    sys.exit(main())
