#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The capacity page's measurement (docs/internals/capacity.md): starts a
# server of each engine on 127.0.0.1 (tests/*/... scripts, ports 19940 to
# 19948, state under /tmp), initializes each store, runs bench/capacity on
# SQLite and on each server with growing names held and clients, and writes
# every line to OUT_DIR/ENGINE.txt. About 15 minutes with the defaults.
#
#   bench/capacity.sh BUILD_DIR OUT_DIR [HELD] [CLIENTS] [SECONDS] [ENGINES]
#   e.g. bench/capacity.sh build/default /tmp/capacity 10,10000,1000000 1,4,16,64 2
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:?BUILD_DIR}" out="${2:?OUT_DIR}"
held="${3:-10,10000,1000000}" clients="${4:-1,4,16,64}" seconds="${5:-2}"
engines="${6:-sqlite postgres redis etcd zookeeper}"
cap="$build/bench/capacity" ctl="$build/examples/coordctl"
mkdir -p "$out"
stop_all() {
  bash tests/postgres/postgres.sh stop /tmp/coord-capacity-pg >/dev/null 2>&1 || true
  bash tests/redis/redis.sh stop /tmp/coord-capacity-redis >/dev/null 2>&1 || true
  bash tests/etcd/etcd.sh stop /tmp/coord-capacity-etcd >/dev/null 2>&1 || true
  bash tests/zookeeper/zookeeper.sh stop /tmp/coord-capacity-zk >/dev/null 2>&1 || true
  rm -f /tmp/coord-capacity.db /tmp/coord-capacity.db-*
}
trap stop_all EXIT
for engine in $engines; do
  case "$engine" in
    sqlite) rm -f /tmp/coord-capacity.db /tmp/coord-capacity.db-*; url="sqlite:/tmp/coord-capacity.db?sync=off" ;;
    postgres) bash tests/postgres/postgres.sh start /tmp/coord-capacity-pg 19940 >/dev/null
              url="postgres:$(bash tests/postgres/postgres.sh conninfo /tmp/coord-capacity-pg 19940)" ;;
    redis) bash tests/redis/redis.sh start /tmp/coord-capacity-redis 19942 volatile >/dev/null
           url="$(bash tests/redis/redis.sh conninfo /tmp/coord-capacity-redis 19942)" ;;
    etcd) bash tests/etcd/etcd.sh start /tmp/coord-capacity-etcd 19944 1 >/dev/null
          url="$(bash tests/etcd/etcd.sh conninfo /tmp/coord-capacity-etcd 19944 1)" ;;
    zookeeper) bash tests/zookeeper/zookeeper.sh start /tmp/coord-capacity-zk 19946 1 >/dev/null
               url="$(bash tests/zookeeper/zookeeper.sh conninfo /tmp/coord-capacity-zk 19946 1)" ;;
    *) echo "unknown engine $engine" >&2; exit 2 ;;
  esac
  "$ctl" store init --store "$url" --segment-floor 0 --fence-floor 0 --ledger-floor none >/dev/null 2>&1 || [ $? = 3 ]
  echo "# $engine: held $held, clients $clients, $seconds s each ($(nproc) cores, $(date -u +%FT%TZ))" | tee "$out/$engine.txt"
  "$cap" --store "$url" --held "$held" --clients "$clients" --seconds "$seconds" | tee -a "$out/$engine.txt"
  stop_all
done
