#!/usr/bin/env bash
# A PostgreSQL server for the shared-store tests: a cluster of its own, made and started through Debian's wrappers
# (PostgreSQL refuses to run as root; pg_createcluster/pg_ctlcluster run it as the postgres user), password auth on
# localhost, one superuser role for the tests. Prints the URL the tests take as GPUKIT_TEST_PG_URL.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
# Only the URL goes to stdout: the wrappers talk there too ("Removed stale pid file." broke the URL once). The server
# must not inherit the stdout pipe either, or the caller's $(...) waits for it to exit.
start_cluster() {
  if ! command -v pg_createcluster >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  fi
  version=$(ls /usr/lib/postgresql | sort -V | tail -1)
  name=gpukit_ci
  port=${GPUKIT_CI_PG_PORT:-55499}
  if ! pg_lsclusters -h | awk '{print $1 "/" $2}' | grep -qx "$version/$name"; then
    pg_createcluster "$version" "$name" --port "$port" -- --auth-local=peer --auth-host=scram-sha-256 >/dev/null
  fi
  port=$(pg_lsclusters -h | awk -v v="$version" -v n="$name" '$1 == v && $2 == n {print $3}')
  if ! pg_lsclusters -h | awk -v v="$version" -v n="$name" '$1 == v && $2 == n {print $4}' | grep -q online; then
    pg_ctlcluster "$version" "$name" start
  fi
  runuser -u postgres -- psql -p "$port" -qtAc \
    "DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'gpukit_ci') THEN
       CREATE ROLE gpukit_ci LOGIN SUPERUSER PASSWORD 'gpukit_ci'; END IF; END \$\$;
     ALTER ROLE gpukit_ci LOGIN SUPERUSER PASSWORD 'gpukit_ci'" >/dev/null
}
start_cluster >&2  # a function call, not a subshell: it sets $port here
echo "postgresql://gpukit_ci:gpukit_ci@127.0.0.1:$port/postgres"
