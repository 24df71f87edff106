#!/usr/bin/env bash
# Is `import torch` slow on this machine because its bytecode is compiled at every start? Prints the Python
# environment, whether torch's __pycache__ is there and writable, and `import torch` timed three ways: as found,
# with a bytecode cache under PYTHONPYCACHEPREFIX (filled once by compileall), and its -X importtime top entries.
set -uo pipefail
: "${OUT:=benchmarks/out}"
mkdir -p "$OUT"
{
env | grep -E '^PYTHON' || echo "no PYTHON* variables"
site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "site-packages: $site"
ls -ld "$site/torch/__pycache__" 2>&1 | head -2
ls "$site/torch/__pycache__" 2>/dev/null | head -3
touch "$site/torch/.w" 2>&1 && echo writable && rm -f "$site/torch/.w"
mount | grep -E " / | /opt" | head -3
for i in 1 2; do /usr/bin/time -f "import torch as found: %e s" python3 -c "import torch"; done
export PYTHONPYCACHEPREFIX=/tmp/pycache
/usr/bin/time -f "compileall into the prefix: %e s" python3 -m compileall -q -j 16 "$site" /usr/lib/python3.12 src >/dev/null 2>&1
for i in 1 2 3; do /usr/bin/time -f "import torch with a bytecode cache: %e s" python3 -c "import torch"; done
python3 -X importtime -c "import torch" 2>&1 | sort -t'|' -k2 -n -r | head -15
} 2>&1 | tee "$OUT/pycache-probe.txt"
