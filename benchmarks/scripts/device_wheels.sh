#!/usr/bin/env bash
# What the H200 image lacks for gpukit serve, its tests and its benchmark, fetched here as cp312 manylinux wheels into
# .whl/ and Debian packages into .deb/ (both git-ignored; name them in the device call's `carry`). The versions are
# those the serving benchmarks ran with (docs/serve.md, "The H200 benchmark"). EXTRA="name==version ..." adds more
# (a peer to run beside gpukit, say). numpy 2.4.6 is for numba-cuda (numpy 2.5 removed np.row_stack).
#   bash benchmarks/scripts/device_wheels.sh && du -sh .whl .deb
# On the device: python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#   --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src; for f in .deb/*.deb; do dpkg -x $f .deb; done
set -euo pipefail
cd "$(dirname "$0")/../.."
WHEELS=(
  fastapi==0.165.0 starlette==1.10.0 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0
  typing-inspection==0.4.5 uvicorn==0.54.0 h11==0.16.0 click==8.5.1 httptools==0.9.0 opentelemetry-api==1.45.2
  orjson==3.13.0 simplejpeg==1.9.0 python-multipart==0.0.34 numpy==2.4.6
)
mkdir -p .whl .deb
for w in "${WHEELS[@]}" ${EXTRA:-}; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d .whl "$w" 2>&1 \
    | grep -v "^WARNING: Location" || true
done
# wrk beside gpukit loadtest (its LuaJIT too); amd64 whatever this machine is
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64-lists'
mkdir -p /tmp/amd64-lists/partial
apt-get $o update -qq >/dev/null
(cd .deb && apt-get $o download -qq wrk libluajit-5.1-2 libluajit-5.1-common >/dev/null)
ls .whl .deb
