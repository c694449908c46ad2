# SPDX-License-Identifier: Apache-2.0
# Sourced by the server scripts (tests/redis/redis.sh, etcd/etcd.sh, zookeeper/zookeeper.sh):
#   as_member I  sets member_prefix to the command prefix that runs member I
#               of the cluster in $dir under group id base+I (setpriv; base
#               from $dir/gid-base, written at start from
#               COORD_MEMBER_GID_BASE), or to nothing
#   alive PID   true while any thread of the process runs. Every thread gone
#               or a zombie is dead: a killed process's leader is a zombie
#               while its other threads still exit, holding its sockets, and
#               a restart then finds the port taken.
alive() {
  local t st
  for t in /proc/"$1"/task/*/stat; do
    st=$(sed 's/.*) //' "$t" 2>/dev/null | cut -d' ' -f1)
    [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ] && return 0
  done
  return 1
}
as_member() {
  local g
  g=$(cat "$dir/gid-base" 2>/dev/null || true)
  member_prefix=()
  [ -z "$g" ] || member_prefix=(setpriv --regid "$((g + $1))" --clear-groups --)
}
