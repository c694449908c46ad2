#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Starts and stops the throwaway ZooKeeper servers coord's tests run against:
# plain Java processes (Debian's zookeeper package, QuorumPeerMain) on
# 127.0.0.1, state inside DIR. Installs zookeeper and a JRE when missing and
# the user is root (the packaged service is never started). ctest runs
# `start` and `stop` as the fixtures of the tests that need them.
#
#   tests/zookeeper/zookeeper.sh install          # the server's packages when missing (as root), nothing started
#   tests/zookeeper/zookeeper.sh start DIR PORT [N] [durable]
#                                            # a fresh standalone server (N=1) or ensemble (N=3):
#                                            # server i serves clients on PORT+3i, the quorum on
#                                            # PORT+3i+1, elections on PORT+3i+2; durable:
#                                            # forceSync=yes (the fault suite), and an ensemble's
#                                            # ticks of 500 ms (a silent leader left after 2 s)
#   tests/zookeeper/zookeeper.sh stop DIR              # every server stopped, DIR removed
#   tests/zookeeper/zookeeper.sh kill DIR I            # SIGKILL server I (0-based)
#   tests/zookeeper/zookeeper.sh restart DIR I         # start server I again on its data
#   tests/zookeeper/zookeeper.sh restart-all DIR       # SIGKILL every server, start them all again on their data
#   tests/zookeeper/zookeeper.sh pause DIR I / resume DIR I   # SIGSTOP / SIGCONT server I
#   tests/zookeeper/zookeeper.sh backup DIR COPY       # a standalone server's data directory (its snapshots,
#                                            # transaction logs and epoch files) copied to COPY, cold:
#                                            # the server stopped, copied, started again on its data
#   tests/zookeeper/zookeeper.sh restore DIR COPY      # the server stopped, its data directory replaced
#                                            # by COPY, started on the same endpoint
#   tests/zookeeper/zookeeper.sh leader DIR            # the index of the leader (standalone: 0)
#   tests/zookeeper/zookeeper.sh conninfo DIR PORT [N] # zookeeper://127.0.0.1:PORT[,...]
#   tests/zookeeper/zookeeper.sh cli DIR COMMAND ARGS...  # ZooKeeper's own command-line client
#                                            # (zkCli: ZooKeeperMain) run once against server 0,
#                                            # e.g. deleteall /coord; its output on stdout
#
# COORD_MEMBER_GID_BASE=G at start (root): server i runs with group id G+i
# (setpriv), so that iptables' owner match tells its packets from the other
# servers' (on loopback every connection comes from 127.0.0.1): the fault
# suite partitions a leader from the majority this way.
#
# forceSync=no unless started durable: a SIGKILL loses nothing the OS holds
# (the tests kill processes, not machines); production wants forceSync=yes
# (README).
set -euo pipefail
# shellcheck source=tests/apt_install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../apt_install.sh"
# shellcheck source=tests/process.sh
source "$(dirname "${BASH_SOURCE[0]}")/../process.sh"

cmd="${1:-}"
dir="${2:-}"
[ "$cmd" = install ] || { [ -n "$cmd" ] && [ -n "$dir" ]; } || { echo "usage: $0 install | start|stop|kill|restart|restart-all|pause|resume|backup|restore|leader|conninfo DIR ..." >&2; exit 2; }
case "$dir" in /*) ;; *) dir="$PWD/$dir" ;; esac

log() { printf '[zookeeper.sh] %s\n' "$*" >&2; }

# The server, and kazoo (the foreign client the lock recipe's tests run).
install_server() {
  # The foreign lock clients too: kazoo, and Curator (run from its source by
  # the JDK's launcher, tests/zookeeper/CuratorLock.java).
  [ -f /usr/share/java/zookeeper.jar ] && [ -f /usr/share/java/curator-recipes.jar ] && command -v javac >/dev/null &&
    /usr/bin/python3 -c 'import kazoo' 2>/dev/null && return 0
  if [ "$(id -u)" != 0 ]; then
    log "ZooKeeper is not installed and this user cannot install it: apt-get install zookeeper default-jdk-headless python3-kazoo libcurator-recipes-java"
    exit 1
  fi
  log "installing zookeeper, a JDK, python3-kazoo, Curator"
  apt_install zookeeper default-jdk-headless python3-kazoo libcurator-recipes-java
}
[ "$cmd" = install ] && { install_server; exit 0; }

base() { cat "$dir/port"; }
members() { cat "$dir/members"; }
client_port() { echo $(( $(base) + 3 * $1 )); }
say() {  # say PORT WORD: a four-letter word's answer
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf '%s' "$2" >&3
  timeout 2 cat <&3 || true
  exec 3<&- 3>&-
}
mode_of() { say "$(client_port "$1")" srvr 2>/dev/null | sed -n 's/^Mode: //p'; }
serving() { local m; m=$(mode_of "$1"); [ "$m" = leader ] || [ "$m" = follower ] || [ "$m" = standalone ]; }

classpath() {
  local cp="/usr/share/java/zookeeper.jar"
  [ -f /usr/share/java/slf4j-simple.jar ] && cp="$cp:/usr/share/java/slf4j-simple.jar"
  echo "$cp"
}

server_start() {
  local i=$1
  local d="$dir/s$i"
  as_member "$i"
  setsid "${member_prefix[@]}" java -Xms32m -Xmx192m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dzookeeper.log.dir="$d" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
    -Dzookeeper.admin.enableServer=false -Dzookeeper.jmx.log4j.disable=true \
    -cp "$(classpath)" org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg" \
    </dev/null >>"$d/log" 2>&1 &
  echo $! > "$d/pid"
}
wait_serving() {
  local t i
  for t in $(seq 1 900); do
    local ok=1
    for i in "$@"; do serving "$i" || ok=0; done
    [ "$ok" = 1 ] && return 0
    for i in "$@"; do alive "$(cat "$dir/s$i/pid")" || { log "server $i died; log tail:"; tail -n 20 "$dir/s$i/log" >&2; exit 1; }; done
    sleep 0.1
  done
  log "servers $* not serving after 90 s"; exit 1
}
server_stop() {
  local pidf="$dir/s$1/pid" pid
  [ -f "$pidf" ] || return 0
  pid=$(cat "$pidf")
  alive "$pid" || return 0
  kill -CONT "$pid" 2>/dev/null || true
  kill -"${2:-TERM}" "$pid" 2>/dev/null || true
  local t; for t in $(seq 1 300); do alive "$pid" || return 0; sleep 0.05; done
  kill -KILL "$pid" 2>/dev/null || true
}

case "$cmd" in
  start)
    b="${3:?PORT}"; n="${4:-1}"
    case "$n" in 1|3) ;; *) echo "N must be 1 or 3" >&2; exit 2 ;; esac
    install_server
    if [ -f "$dir/members" ]; then for i in $(seq 0 $(( $(members) - 1 ))); do server_stop "$i" KILL; done; fi
    rm -rf "$dir"; mkdir -p "$dir"
    echo "$b" > "$dir/port"; echo "$n" > "$dir/members"; echo "${COORD_MEMBER_GID_BASE:-}" > "$dir/gid-base"
    for i in $(seq 0 $((n - 1))); do
      d="$dir/s$i"; mkdir -p "$d/data"
      {
        # An ensemble in the fault suite: a silent leader given up on after
        # 2 s (syncLimit ticks of 500 ms) rather than 10 s, so that a 20 s run
        # sees elections; sessions still up to 10 s (20 ticks).
        if [ "$n" = 3 ] && [ "${5:-fast}" = durable ]; then echo "tickTime=500"; echo "initLimit=20"; echo "syncLimit=4"
        else echo "tickTime=2000"; echo "initLimit=10"; echo "syncLimit=5"; fi
        echo "dataDir=$d/data"; echo "clientPort=$((b + 3 * i))"; echo "clientPortAddress=127.0.0.1"
        echo "maxClientCnxns=500"; echo "admin.enableServer=false"; echo "4lw.commands.whitelist=ruok,srvr,stat,mntr"
        if [ "${5:-fast}" = durable ]; then echo "forceSync=yes"; else echo "forceSync=no"; fi
        if [ "$n" = 3 ]; then
          for j in 0 1 2; do echo "server.$((j + 1))=127.0.0.1:$((b + 3 * j + 1)):$((b + 3 * j + 2))"; done
        fi
      } > "$d/zoo.cfg"
      [ "$n" = 3 ] && echo $((i + 1)) > "$d/data/myid"
      server_start "$i"
    done
    wait_serving $(seq 0 $((n - 1)))
    log "ready: $n server(s) from 127.0.0.1:$b (state in $dir)"
    ;;
  stop)
    if [ -f "$dir/members" ]; then for i in $(seq 0 $(( $(members) - 1 ))); do server_stop "$i"; done; fi
    rm -rf "$dir"
    ;;
  kill) server_stop "${3:?I}" KILL ;;
  restart) server_start "${3:?I}"; wait_serving "$3" ;;
  restart-all)
    all=$(seq 0 $(( $(members) - 1 )))
    for i in $all; do server_stop "$i" KILL; done
    for i in $all; do server_start "$i"; done
    # shellcheck disable=SC2086
    wait_serving $all
    ;;
  backup|restore)
    copy="${3:?COPY}"
    [ "$(members)" = 1 ] || { echo "$cmd: a standalone server only" >&2; exit 2; }
    server_stop 0
    if [ "$cmd" = backup ]; then
      rm -rf "$copy"; cp -a "$dir/s0/data" "$copy"
    else
      rm -rf "$dir/s0/data"; cp -a "$copy" "$dir/s0/data"
    fi
    server_start 0; wait_serving 0
    ;;
  pause) kill -STOP "$(cat "$dir/s${3:?I}/pid")" ;;
  resume) kill -CONT "$(cat "$dir/s${3:?I}/pid")" ;;
  leader)
    for t in $(seq 1 300); do
      for i in $(seq 0 $(( $(members) - 1 ))); do
        m=$(mode_of "$i")
        if [ "$m" = leader ] || [ "$m" = standalone ]; then echo "$i"; exit 0; fi
      done
      sleep 0.1
    done
    log "no leader after 30 s"; exit 1
    ;;
  cli)
    shift 2
    [ $# -gt 0 ] || { echo "usage: $0 cli DIR COMMAND ARGS..." >&2; exit 2; }
    java -Xms16m -Xmx64m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
      -cp "$(classpath)" org.apache.zookeeper.ZooKeeperMain -server "127.0.0.1:$(client_port 0)" "$@" </dev/null 2>&1
    ;;
  conninfo)
    b="${3:?PORT}"; n="${4:-1}"; spec=""
    for i in $(seq 0 $((n - 1))); do spec="${spec:+$spec,}127.0.0.1:$((b + 3 * i))"; done
    echo "zookeeper://$spec"
    ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
