# Sourced by the serving benchmarks' device scripts, from the repository root: installs the wheels in $WHEELS (what
# the GPU machine lacks: benchmarks/scripts/device_wheels.sh fetches them) into /tmp/site, puts it and src/ on the
# path, and writes the host's date, GPU and CPU count to $1 (its folder is made).
#   source benchmarks/scripts/device_site.sh /tmp/r/host.txt || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl || return 1
export PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
mkdir -p "$(dirname "$1")"
{ date; nvidia-smi --query-gpu=name,serial,driver_version --format=csv; nproc; } > "$1"
