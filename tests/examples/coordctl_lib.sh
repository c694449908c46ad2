# SPDX-License-Identifier: Apache-2.0
# Sourced by the coordctl scripts of the engines: `expect` and `fail` (they
# count into $failures; $ctl is the coordctl binary, $err a scratch file), and
# the checks every networked store answers the same way.

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# expect RC OUT -- ARGS...: coordctl ARGS exits RC and prints exactly OUT.
expect() {
  local want_rc="$1" want_out="$2"; shift 3
  local out rc
  out=$("$ctl" "$@" 2>"$err"); rc=$?
  if [ "$rc" != "$want_rc" ] || [ "$out" != "$want_out" ]; then
    fail "coordctl $*"
    echo "  want rc=$want_rc out='$want_out'"
    echo "  got  rc=$rc out='$out' stderr='$(cat "$err")'"
  fi
}

# grant VAR -- ARGS...: coordctl ARGS exits 0 printing token=N, and VAR=N.
# Tokens are compared, never spelled: a grant's token is at least the store's
# clock in microseconds (etcd and ZooKeeper: the cluster's counter).
grant() {
  local var="$1"; shift 2
  local out rc
  out=$("$ctl" "$@" 2>"$err"); rc=$?
  if [ "$rc" != 0 ] || ! [[ "$out" =~ ^token=[0-9]+$ ]]; then
    fail "coordctl $*"
    echo "  want rc=0 out='token=N'"
    echo "  got  rc=$rc out='$out' stderr='$(cat "$err")'"
    out=token=0
  fi
  printf -v "$var" '%s' "${out#token=}"
}
# first_init STORE: before `store init`, nothing that needs the store's data
# is served and nothing is created (exit 1, naming the step); init without
# floors is a usage error (2); init is 0 once and refused (3) after.
first_init() {
  local s="$1" out rc
  expect 1 "" -- fence write --store "$s" --key k --token 5 --value v
  grep -q "coordctl store init" "$err" || fail "an uninitialized store does not name store init: $(cat "$err")"
  expect 2 "" -- store init --store "$s"
  out=$("$ctl" store init --store "$s" --segment-floor 0 --fence-floor 0 --ledger-floor none); rc=$?
  [ "$rc" = 0 ] && [[ "$out" =~ ^initialized:\ identity\ [0-9a-f]{32}$ ]] || fail "store init: rc=$rc '$out'"
  out=$("$ctl" store init --store "$s" --segment-floor 0 --fence-floor 0 --ledger-floor none); rc=$?
  [ "$rc" = 3 ] && [[ "$out" == "refused: the store is already initialized: "*"--force"* ]] \
    || fail "store init over an initialized store: rc=$rc '$out'"
}

# init_store: $store initialized as one that never served coord (zero
# floors), or already initialized (exit 3: refused, nothing changed).
init_store() {
  "$ctl" store init --store "$store" --segment-floor 0 --fence-floor 0 --ledger-floor none >/dev/null 2>"$err"
  local rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 3 ] || fail "store init: rc=$rc $(cat "$err")"
}

# above A B WHAT: token B is larger than token A.
above() { [ "$2" -gt "$1" ] 2>/dev/null || fail "$3: token $2 is not above $1"; }

# engine_store_checks STORE RUN NODE: fences (with the largest token), leases
# (their tokens only compared: a store-wide counter or time, not 1, 2, 3),
# segment IDs across invocations and Snowflake IDs with --state STORE.
engine_store_checks() {
  local store="$1" run="$2" node="$3" a1 b1 a b all ids rc long
  expect 0 "fence=0 value=" -- fence read --store "$store" --key "$run"
  expect 0 "accepted" -- fence write --store "$store" --key "$run" --token 42 --value B
  expect 3 "rejected: stale fence (highest 42)" -- fence write --store "$store" --key "$run" --token 41 --value A
  expect 0 "fence=42 value=B" -- fence read --store "$store" --key "$run"
  expect 0 "accepted" -- fence write --store "$store" --key "$run" --token 18446744073709551615 --value top
  expect 3 "rejected: stale fence (highest 18446744073709551615)" -- fence write --store "$store" --key "$run" --token 18446744073709551614 --value A
  a1=$("$ctl" lease acquire --store "$store" --name "$run" --owner A --ttl 60000); rc=$?
  [ "$rc" = 0 ] && [[ "$a1" =~ ^token=[0-9]+$ ]] || fail "lease acquire: rc=$rc '$a1'"
  expect 3 "held by A" -- lease acquire --store "$store" --name "$run" --owner B --ttl 60000
  expect 3 "not the holder" -- lease release --store "$store" --name "$run" --owner B
  expect 0 "renewed $a1" -- lease renew --store "$store" --name "$run" --owner A
  expect 0 "released" -- lease release --store "$store" --name "$run" --owner A
  b1=$("$ctl" lease acquire --store "$store" --name "$run" --owner B --ttl 60000)
  [ "${b1#token=}" -gt "${a1#token=}" ] 2>/dev/null || fail "the next token $b1 is not above $a1"
  expect 3 "not the holder" -- lease release --store "$store" --name "$run" --owner B --token "${a1#token=}"
  expect 0 "released" -- lease release --store "$store" --name "$run" --owner B --token "${b1#token=}"
  # Without --owner: a unique owner per invocation, printed with the token.
  a=$("$ctl" lease acquire --store "$store" --name "$run-u" --ttl 60000); rc=$?
  [ "$rc" = 0 ] && [[ "$a" =~ ^token=[0-9]+\ owner=[^:\ ]+:[0-9]+:[0-9a-f]{16}$ ]] || fail "lease acquire without --owner: rc=$rc '$a'"
  expect 3 "held by ${a#* owner=}" -- lease acquire --store "$store" --name "$run-u" --ttl 60000
  expect 0 "released" -- lease release --store "$store" --name "$run-u" --owner "${a#* owner=}"
  # One limit on names on every store: 1024 bytes work, 3000 are bad input (2).
  long="$run$(head -c $((1024 - ${#run})) /dev/zero | tr '\0' k)"
  expect 0 "accepted" -- fence write --store "$store" --key "$long" --token 1 --value v
  expect 2 "" -- lease acquire --store "$store" --name "$(head -c 3000 /dev/zero | tr '\0' n)" --owner A --ttl 60000
  grep -q "at most 1024 bytes" "$err" || fail "a 3000-byte name: $(cat "$err")"
  a=$("$ctl" segment next --store "$store" --tag "$run" -n 3)
  b=$("$ctl" segment next --store "$store" --tag "$run" -n 3)
  all=$(printf '%s\n%s\n' "$a" "$b")
  [ "$(echo "$all" | wc -l)" = 6 ] && [ "$(echo "$all" | sort -n | uniq | wc -l)" = 6 ] || fail "segment IDs across invocations: $all"
  ids=$("$ctl" snowflake next --node "$node" -n 3 --state "$store"); rc=$?
  [ "$rc" = 0 ] && [ "$(echo "$ids" | sort -n | uniq | wc -l)" = 3 ] || fail "snowflake with --state $store: rc=$rc '$ids'"
}

# no_sessions STORE / no_ledger STORE: what the store does not keep is a clear usage error (2).
no_sessions() {
  expect 2 "" -- session create --store "$1" --user alice
  grep -q "keeps no sessions" "$err" || fail "sessions on $1: $(cat "$err")"
}
no_ledger() {
  expect 2 "" -- ledger claim --store "$1" --slot "billing$$@$(date -u +%Y-%m-%dT%H:%M)Z" --worker A
  grep -q "keeps no job ledger" "$err" || fail "ledger on $1: $(cat "$err")"
  expect 2 "" -- cron run --store "$1" --job j --cron "* * * * *" --tz UTC -- true
  grep -q "keeps no job ledger" "$err" || fail "cron on $1: $(cat "$err")"
}

# refused WHAT WORDS ARGS...: on a secured store ($store, whose server
# keeps its users' passwords in $dir/*.password), `fence write` of key $run
# with ARGS exits 2 (a configuration to fix), its message says WORDS and
# holds no password.
refused() {
  local what="$1" words="$2" p; shift 2
  expect 2 "" -- fence write --store "$store" "$@" --key "$run" --token 8 --value v
  grep -q -- "$words" "$err" || fail "$what: the message does not say '$words': $(cat "$err")"
  for p in "$dir"/*.password; do grep -q -- "$(cat "$p")" "$err" && fail "$what: a password in the message"; done
}

# stop_clear PID [GROUP]: SIGSTOP the process PID (a coordctl), the process
# group GROUP and every command PID runs (a paused machine). On an embedded
# store (file:, sqlite: in $store) it must not stop inside a write: it
# would hold the store's lock, and nobody could take its lease over until
# it woke. The kernel's table of locks (/proc/locks) says whether a stopped
# process holds one that stops another writer: any flock (the file store's
# shared and exclusive locks) or an fcntl write lock (SQLite's WAL writer,
# checkpoint and recovery locks; its read locks stop no writer). If one
# does, everything runs again until none holds one, and is stopped again;
# the stopped processes run for as long as their write takes, never for a
# lock timeout, so a runner's claims do not lapse while it is being
# stopped (false when no stop was clear in 10 s). $stop_tries counts the
# stops it took.
stop_tries=0
stop_clear() {
  local until=$(( $(date +%s) + 10 ))
  stop_tries=0
  while [ "$(date +%s)" -lt "$until" ]; do
    stop_tries=$((stop_tries + 1))
    signal_all STOP "$@"
    case "$store" in file:*|sqlite:*) ;; *) return 0 ;; esac
    store_locks_held "$@" || return 0
    signal_all CONT "$@"
    while store_locks_held "$@" && [ "$(date +%s)" -lt "$until" ]; do sleep 0.005; done
  done
  return 1
}
# signal_all SIG PID [GROUP]: SIG to PID, to GROUP and to the process group
# of every command PID runs.
signal_all() {
  local c
  kill -"$1" "$2"
  [ -n "${3:-}" ] && kill -"$1" -- "-$3" 2>/dev/null
  for c in $(pgrep -P "$2"); do kill -"$1" -- "-$c" 2>/dev/null; done
}
# store_locks_held PID [GROUP]: PID, a process of GROUP or of the process
# group of a command PID runs holds a flock or an fcntl write lock (a
# waiter's line, marked "->", holds nothing).
store_locks_held() {
  local c pids=" $1 "
  [ -n "${2:-}" ] && pids="$pids$(pgrep -g "$2" | tr '\n' ' ') "
  for c in $(pgrep -P "$1"); do pids="$pids$(pgrep -g "$c" | tr '\n' ' ') "; done
  awk -v pids="$pids" '$2 != "->" && ($2 == "FLOCK" || ($2 == "POSIX" && $4 == "WRITE")) && index(pids, " " $5 " ") { held = 1 }
                       END { exit !held }' /proc/locks
}
# resume_all PID: SIGCONT every command PID runs, then PID.
resume_all() { signal_all CONT "$1"; }
