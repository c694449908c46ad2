#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Starts and stops the throwaway PostgreSQL server coord's tests run against:
# a plain process on 127.0.0.1, its state and unix socket inside DIR, no
# fsync. Installs postgresql-15 when it is missing and the user is root (the
# packaged cluster on 5432 is never started). ctest runs `start` and `stop`
# as the fixture of every test that needs the server.
#
#   tests/postgres/postgres.sh install         # the server's packages when missing (as root), nothing started
#   tests/postgres/postgres.sh start DIR PORT [durable|secure]
#                                        # fresh server, database "coord"; durable: fsync and
#                                        # synchronous commit on (the fault suite: an
#                                        # acknowledged commit survives a SIGKILL); secure:
#                                        # TLS only (a throwaway CA made with openssl in DIR/tls,
#                                        # the server's certificate for localhost and 127.0.0.1,
#                                        # and another CA that signed nothing here), SCRAM-SHA-256
#                                        # passwords, plain TCP rejected; roles coord_app (owns
#                                        # the database) and coord_reader (no rights on coord's
#                                        # tables), their passwords in DIR/passfile (libpq's
#                                        # format, mode 600), wrong ones in DIR/passfile-wrong
#   tests/postgres/postgres.sh stop DIR           # clean shutdown, removes DIR
#   tests/postgres/postgres.sh restart DIR PORT   # stop and start on the same data (tests of a server restart)
#   tests/postgres/postgres.sh conninfo DIR PORT  # the libpq conninfo of the server
#   tests/postgres/postgres.sh conninfo-secure DIR PORT  # of a secure one, as coord_app: sslmode=verify-full
#                                        # (host localhost, hostaddr 127.0.0.1), DIR/tls/ca.crt, DIR/passfile
#   tests/postgres/postgres.sh kill DIR PORT      # SIGKILL the server and every backend, then start it on its data
#                                        # (crash recovery from the write-ahead log)
#   tests/postgres/postgres.sh pause DIR          # SIGSTOP the server and every backend (a long pause, a frozen VM)
#   tests/postgres/postgres.sh resume DIR         # SIGCONT them
#
# Gotchas handled here: initdb and postgres refuse to run as root (they run as
# the postgres user then); the socket directory must be one the server user
# can write; a stale server from an earlier run on DIR is stopped first.
set -euo pipefail
# shellcheck source=tests/apt_install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../apt_install.sh"
# shellcheck source=tests/tls.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tls.sh"

cmd="${1:-}"
dir="${2:-}"
port="${3:-15432}"
pg_bin="${COORD_PG_BIN:-/usr/lib/postgresql/15/bin}"
[ "$cmd" = install ] || { [ -n "$cmd" ] && [ -n "$dir" ]; } || { echo "usage: $0 install | start|stop|restart|conninfo DIR [PORT]" >&2; exit 2; }
case "$dir" in /*) ;; *) dir="$PWD/$dir" ;; esac
cd /  # the server user may not be able to enter the caller's directory

log() { printf '[postgres.sh] %s\n' "$*" >&2; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pg_user() { if [ "$(id -u)" = 0 ]; then echo postgres; else id -un; fi; }

install_server() {
  [ -x "$pg_bin/initdb" ] && return 0
  if [ "$(id -u)" != 0 ]; then
    log "PostgreSQL 15 is not installed ($pg_bin/initdb missing) and this user cannot install it: apt-get install postgresql-15"
    exit 1
  fi
  log "installing postgresql-15"
  apt_install postgresql-15
  return 0
}
[ "$cmd" = install ] && { install_server; exit 0; }

# The tests' server trades durability for speed (a SIGKILL of the server
# can lose an acknowledged commit: the WAL buffers die with it); durable keeps
# PostgreSQL's defaults.
settings() {
  local mode; mode=$(cat "$dir/mode" 2>/dev/null || true)
  if [ "$mode" = durable ]; then printf '%s' "-c fsync=on -c synchronous_commit=on -c full_page_writes=on"
  else printf '%s' "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"; fi
  if [ "$mode" = secure ]; then  # (one line: pg_ctl hands it to a shell)
    printf ' %s' "-c ssl=on -c ssl_cert_file=$dir/tls/server.crt -c ssl_key_file=$dir/tls/server.key -c password_encryption=scram-sha-256"
  fi
}

# secure: the throwaway certificates (tests/tls.sh), readable by the server.
make_tls() {
  make_test_certs "$dir/tls"
  [ "$(id -u)" = 0 ] && chown -R postgres:postgres "$dir/tls"
  return 0
}
secure_hba() {
  cat > "$dir/data/pg_hba.conf" <<HBA
local   all all                trust
hostssl all all 127.0.0.1/32   scram-sha-256
host    all all 127.0.0.1/32   reject
HBA
}
# The roles, their passwords (random, given to psql on its standard input)
# in DIR/passfile, and wrong ones in DIR/passfile-wrong.
secure_roles() {
  local app reader
  app=$(openssl rand -hex 16); reader=$(openssl rand -hex 16)
  as_pg "$pg_bin/psql" -q -h "$dir" -p "$port" -U "$(pg_user)" -d postgres -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE ROLE coord_app LOGIN PASSWORD '$app';
CREATE ROLE coord_reader LOGIN PASSWORD '$reader';
ALTER DATABASE coord OWNER TO coord_app;
SQL
  printf 'localhost:%s:coord:coord_app:%s\nlocalhost:%s:coord:coord_reader:%s\n' "$port" "$app" "$port" "$reader" > "$dir/passfile"
  printf 'localhost:%s:coord:coord_app:%s\n' "$port" "$(openssl rand -hex 16)" > "$dir/passfile-wrong"
  chmod 600 "$dir/passfile" "$dir/passfile-wrong"
}

# pg_stat_statements (in Debian's server package): the waiting bench counts
# the statements coord's waiters send with it (bench/lease_wait_bench.cpp).
server_start() {
  as_pg "$pg_bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 start -o \
    "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$dir $(settings) -c max_connections=200 -c shared_preload_libraries=pg_stat_statements" \
    >/dev/null || { log "server did not start; log tail:"; tail -n 30 "$dir/log" >&2; exit 1; }
}

server_stop() {
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_pg "$pg_bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 || true
  fi
}

case "$cmd" in
  start)
    install_server
    server_stop
    rm -rf "$dir"
    mkdir -p "$dir"
    echo "${4:-fast}" > "$dir/mode"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir" "$dir/mode"
    as_pg "$pg_bin/initdb" -D "$dir/data" -U "$(pg_user)" -A trust -E UTF8 --locale=C.UTF-8 --no-sync \
      >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    if [ "${4:-fast}" = secure ]; then make_tls; secure_hba; fi
    server_start
    as_pg "$pg_bin/psql" -q -h "$dir" -p "$port" -U "$(pg_user)" -d postgres -c 'CREATE DATABASE coord' >/dev/null
    if [ "${4:-fast}" = secure ]; then secure_roles; fi
    log "ready on 127.0.0.1:$port (state in $dir)"
    ;;
  stop)
    server_stop
    rm -rf "$dir"
    ;;
  restart)
    server_stop
    server_start
    ;;
  kill)
    [ -f "$dir/data/postmaster.pid" ] || { log "no server in $dir"; exit 1; }
    pm="$(head -n 1 "$dir/data/postmaster.pid")"
    kids="$(pgrep -P "$pm" || true)"
    # shellcheck disable=SC2086
    kill -KILL "$pm" $kids 2>/dev/null || true
    for p in $pm $kids; do
      for _ in $(seq 1 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
    done
    server_start
    ;;
  pause|resume)
    # The postmaster first on pause (no new backends), last on resume.
    [ -f "$dir/data/postmaster.pid" ] || { log "no server in $dir"; exit 1; }
    pm="$(head -n 1 "$dir/data/postmaster.pid")"
    if [ "$cmd" = pause ]; then
      kill -STOP "$pm"
      pkill -STOP -P "$pm" || true
    else
      pkill -CONT -P "$pm" || true
      kill -CONT "$pm"
    fi
    ;;
  conninfo)
    echo "host=127.0.0.1 port=$port user=$(pg_user) dbname=coord connect_timeout=5"
    ;;
  conninfo-secure)
    echo "host=localhost hostaddr=127.0.0.1 port=$port user=coord_app dbname=coord sslmode=verify-full sslrootcert=$dir/tls/ca.crt passfile=$dir/passfile connect_timeout=5"
    ;;
  *)
    echo "usage: $0 start|stop|restart|kill|pause|resume|conninfo DIR [PORT]" >&2
    exit 2
    ;;
esac
