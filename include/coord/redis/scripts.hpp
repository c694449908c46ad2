// SPDX-License-Identifier: Apache-2.0
// coord/redis/scripts.hpp: the rules of coord/rules/ in Lua, one script per
// store operation, each run by the server as one atomic step (EVALSHA).
//
// Numbers. Lua's numbers are doubles: exact only up to 2^53. Fence tokens,
// sequence numbers, times in nanoseconds (about 1.8e18 today), counters and
// versions are therefore kept and compared as canonical decimal strings
// (compared by length, then bytes) and added digit-group by digit-group
// (`uadd`, `add` saturating at 2^63-1, as add_saturated does in C++); segment
// counters are advanced by INCRBY, which the server does in 64-bit integers.
// Only small counts (attempts, tickets, positions) are Lua numbers. The fence
// and lease records keep their tokens as 20 digits (zeros in front), so that
// their common paths compare records without parsing them.
//
// Time. `clock(ARGV)` is the server's TIME (microseconds, as nanoseconds)
// unless a test clock sent its reading. No script takes the caller's time
// otherwise.
//
// Data loss. Scripts whose promise needs earlier data (fences, reservations,
// segments, the ledger, revocations) check the store's identity key
// (`unsafe`): absent, the store was never initialized or lost its data ('U');
// another value than the one this client opened, it was initialized again
// ('C'). The fence and the segment counter check it only where data can be
// missing (a record missing or written under another identity, a counter
// that was 0), so that their common path is one command besides the
// generation's. Leases need no identity: a new token is at least the
// server's time in microseconds, so tokens never go back even when the
// lease's record is lost. Sessions need none: a lost session is a
// signed-out user.
//
// Rollback. An older append-only file or snapshot keeps the identity key, so
// the same scripts also count the store's generation (one INCR, or a GET for
// a read: "The store's generation" below) and refuse when it is not above
// the generation the calling store object saw ('W').
//
// Floors. The identity key's value is the identity (32 hex digits), then,
// when the operator initialized the store stating what it had handed out
// before (store::initialize), ":<segment>:<fence, 20 digits>:<ledger ms>:
// <reservation ms>": where a record is missing (possibly lost) or was
// written under an earlier identity, a fence refuses tokens below the fence
// floor; where a counter is missing, a segment counter continues above the
// segment floor (initialize raises every counter that is below it first);
// a slot scheduled at or before the ledger floor and not done is not run
// again (expired), and a time reservation is at least the reservation
// floor: records that survived in an older state obey the floors too. They
// are read only where `unsafe` reads the identity key anyway.
//
// Cost. A command inside a script (redis.call) costs about as much server
// time as the script's own call, and so does every few arguments: the scripts
// of the hot paths (fence write, lease acquire and release, segment
// allocation) take few arguments, return one string, make no helper
// functions on their common path (Lua makes a script's functions anew on
// every call) and write first (SET ... GET), putting the old record back
// when it shows another case than the common one; see the fence and lease
// sections.
//
// Every key of one call shares the store's hash tag ({prefix}), so the
// scripts run on Redis Cluster too; they carry the #!lua shebang (Redis 7:
// the server refuses a script it could not run whole, for example out of
// memory, before it starts, instead of failing it half way).
#pragma once

#include "coord/redis/connection.hpp"

namespace coord::redis::scripts {

// The first line of a script: its Redis 7 flags.
#define COORD_REDIS_LUA_WRITES "#!lua\n"
#define COORD_REDIS_LUA_READS "#!lua flags=no-writes\n"

// The helpers, each script including those it calls (a script's helpers
// are made anew on every call: Lua closures, so fewer is faster). The
// order matters: CMP and ADD use UCMP.
#define COORD_REDIS_LUA_UCMP                                                                            \
    "local MAX = '9223372036854775807'\n"                                                               \
    "local function ucmp(a, b)\n"                                                                       \
    "  if #a ~= #b then if #a < #b then return -1 else return 1 end end\n"                              \
    "  if a == b then return 0 end\n"                                                                   \
    "  if a < b then return -1 else return 1 end\n"                                                     \
    "end\n"
#define COORD_REDIS_LUA_CMP                                                                             \
    "local function cmp(a, b)\n"                                                                        \
    "  local na, nb = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'\n"                         \
    "  if na and not nb then return -1 end\n"                                                           \
    "  if nb and not na then return 1 end\n"                                                            \
    "  if na then return ucmp(string.sub(b, 2), string.sub(a, 2)) end\n"                                \
    "  return ucmp(a, b)\n"                                                                             \
    "end\n"
// inc: a + 1 (below 9 * 10^15, in a double, exact: below 2^53; above, digit groups).
#define COORD_REDIS_LUA_ADD                                                                             \
    "local function uadd(a, b)\n"                                                                       \
    "  local out, carry, i, j = {}, 0, #a, #b\n"                                                        \
    "  while i > 0 or j > 0 or carry > 0 do\n"                                                          \
    "    local x = 0; if i > 0 then x = tonumber(string.sub(a, math.max(1, i - 8), i)) end\n"           \
    "    local y = 0; if j > 0 then y = tonumber(string.sub(b, math.max(1, j - 8), j)) end\n"           \
    "    local s = x + y + carry\n"                                                                     \
    "    if s >= 1000000000 then carry = 1; s = s - 1000000000 else carry = 0 end\n"                    \
    "    out[#out + 1] = s; i = i - 9; j = j - 9\n"                                                     \
    "  end\n"                                                                                           \
    "  if #out == 0 then return '0' end\n"                                                              \
    "  local t = string.format('%d', out[#out])\n"                                                      \
    "  for k = #out - 1, 1, -1 do t = t .. string.format('%09d', out[k]) end\n"                         \
    "  return t\n"                                                                                      \
    "end\n"                                                                                             \
    "local function add(a, b)\n"                                                                        \
    "  local s = uadd(a, b)\n"                                                                          \
    "  if ucmp(s, MAX) > 0 then return MAX end\n"                                                       \
    "  return s\n"                                                                                      \
    "end\n"                                                                                             \
    "local function inc(a)\n"                                                                           \
    "  if #a < 16 or (#a == 16 and a < '9000000000000000') then return string.format('%d', tonumber(a) + 1) end\n" \
    "  return add(a, '1')\n"                                                                            \
    "end\n"
#define COORD_REDIS_LUA_CLOCK                                                                           \
    "local function clock(sent)\n"                                                                      \
    "  if sent ~= '' then return sent end\n"                                                            \
    "  local t = redis.call('TIME')\n"                                                                  \
    "  return t[1] .. string.format('%06d', tonumber(t[2])) .. '000'\n"                                 \
    "end\n"                                                                                             \
    "local function ms_of(ns) if #ns <= 6 then return '0' end return string.sub(ns, 1, #ns - 6) end\n"  \
    "local function us_of(ns) if #ns <= 3 then return '0' end return string.sub(ns, 1, #ns - 3) end\n"
#define COORD_REDIS_LUA_UNSAFE                                                                          \
    "local function unsafe(idkey, want)\n"                                                              \
    "  local id = redis.call('GET', idkey)\n"                                                           \
    "  if not id then return 'U' end\n"                                                                 \
    "  if want ~= '' and string.sub(id, 1, 32) ~= want then return 'C' end\n"                          \
    "  return false, id\n"                                                                              \
    "end\n"
// The store's generation (KEYS' last, "{prefix}:generation"; ARGV's last,
// the highest generation this store object saw): a script that can hand
// something out adds one to it before anything else, one that reads
// compares it. A generation that is not above what the client saw means the
// server went back (an older append-only file or snapshot, a replica that
// missed writes): the script undoes its increment and answers {generation,
// 'W'} before doing anything. Otherwise the operation's answer comes as
// {generation, answer}, and the client keeps the larger generation. The
// operation is the script's body made a function (`op`), so that its own
// answers stay as they were.
//
// The generation alone misses a loss that other clients' later calls
// covered (a replica promoted without one client's last writes, then
// written to by others). So each store object also has a writer key of its
// own (KEYS' last but one, "{prefix}:writer:<id>"; ARGV's last but two and
// last but one: lo and next), which only its calls set: a script that can
// hand something out raises it to next (the store object numbers its
// writes), and every script first checks it is at least lo, the highest
// number of a write the store object saw acknowledged; below, that write is
// gone, and the answer is {generation, 'L'} before anything was done. The
// key lives 7 days after the store object's last write (one quiet for
// longer sends lo = 0).
#define COORD_REDIS_LUA_OP "local function op()\n"
#define COORD_REDIS_LUA_WRITER_LOST                                                                     \
    "local gk, wk = KEYS[#KEYS], KEYS[#KEYS - 1]\n"                                                     \
    "local wn = tonumber(redis.call('GET', wk) or '0')\n"                                               \
    "if wn < tonumber(ARGV[#ARGV - 2]) then return {tonumber(redis.call('GET', gk) or '0'), 'L'} end\n"
// (Writes set the writer and read its count in one SET ... GET, and put the
// count back on the rare ways out: a count below lo, a generation not above
// what the client saw, or a larger count already there.)
#define COORD_REDIS_LUA_GEN_WRITES                                                                      \
    "end\n"                                                                                             \
    "local gk, wk, ttl = KEYS[#KEYS], KEYS[#KEYS - 1], '604800000'\n"                                   \
    "local old = redis.call('SET', wk, ARGV[#ARGV - 1], 'PX', ttl, 'GET')\n"                            \
    "local wn = tonumber(old or '0')\n"                                                                 \
    "local back = wn < tonumber(ARGV[#ARGV - 2])\n"                                                     \
    "local g = 0\n"                                                                                     \
    "if not back then\n"                                                                                \
    "  g = redis.call('INCR', gk)\n"                                                                    \
    "  if g <= tonumber(ARGV[#ARGV]) then redis.call('DECR', gk) g = g - 1 back = 'W' end\n"            \
    "end\n"                                                                                             \
    "if back or wn > tonumber(ARGV[#ARGV - 1]) then\n"                                                  \
    "  if old then redis.call('SET', wk, old, 'PX', ttl) else redis.call('DEL', wk) end\n"              \
    "end\n"                                                                                             \
    "if back == 'W' then return {g, 'W'} end\n"                                                         \
    "if back then return {tonumber(redis.call('GET', gk) or '0'), 'L'} end\n"                           \
    "local r = op()\n"                                                                                  \
    "if type(r) == 'table' and r.err then return r end\n"                                               \
    "return {g, r}\n"
#define COORD_REDIS_LUA_GEN_READS                                                                       \
    "end\n"                                                                                             \
    COORD_REDIS_LUA_WRITER_LOST                                                                         \
    "local g = tonumber(redis.call('GET', gk) or '0')\n"                                                \
    "if g < tonumber(ARGV[#ARGV]) then return {g, 'W'} end\n"                                           \
    "local r = op()\n"                                                                                  \
    "if type(r) == 'table' and r.err then return r end\n"                                               \
    "return {g, r}\n"

// Every helper: for the scripts off the hot paths.
#define COORD_REDIS_LUA_PRELUDE \
    COORD_REDIS_LUA_UCMP COORD_REDIS_LUA_CMP COORD_REDIS_LUA_ADD COORD_REDIS_LUA_CLOCK COORD_REDIS_LUA_UNSAFE

// ---------------------------------------------------------------- fence
// The fence record is one string: "<identity><highest> <seq>\n<value>": the
// identity it was written under (32 hex digits, the only shape the client
// accepts from the identity key), the highest token as 20 digits (zeros in
// front: every 64-bit token fits), and seq ('' when the last write under
// `highest` had none; a record exists only once a write was accepted).
//
// The fixed widths make the common path two string comparisons and no
// parse. With p = "<identity><new token>" (the new record's first 52 bytes)
// and i = its first 33 (the identity and the token's first digit), the old
// record passes when i < old < p: old > i holds for records of this identity
// whose token's first digit is at least the new one's (and for larger
// identities), old < p for an older token of this identity (and for smaller
// identities), so both hold only when old carries this identity and a token
// below the new one (an equal token makes old the longer: not below p). The
// digit in i keeps out a record of the earlier layout ("<identity> <token>
// ...": a space where the digits start), which the whole rule then refuses
// as not a record; a record with a smaller first digit just takes the whole
// rule.
// Lua compares strings with strcoll: the bytes that decide are hex digits,
// ordered as bytes in every locale; where they are all equal, a tie sends the
// write to the whole rule, which is the safe side.
//
// Everything else takes the whole rule in the same script: a record missing
// or written under another identity sends the script to the identity key
// (data lost, or initialized again). Writes are optimistic: the script
// replaces the record with SET ... GET (one command on the common path) and,
// when the rule refuses, puts the old record back before it answers. Both
// happen inside the one script, so no other client ever sees the refused write.

// A write-first script's way back: the key as it was before its SET ... GET.
#define COORD_REDIS_LUA_PUT_BACK                                                                        \
    "local function put_back(k, old) if old then redis.call('SET', k, old) else redis.call('DEL', k) end end\n"

// The record's head as a pattern: identity and token captured.
#define COORD_REDIS_LUA_X8 "%x%x%x%x%x%x%x%x"
#define COORD_REDIS_LUA_D10 "%d%d%d%d%d%d%d%d%d%d"
#define COORD_REDIS_LUA_FENCE_HEAD \
    "^(" COORD_REDIS_LUA_X8 COORD_REDIS_LUA_X8 COORD_REDIS_LUA_X8 COORD_REDIS_LUA_X8 ")(" COORD_REDIS_LUA_D10 COORD_REDIS_LUA_D10 ")"

#define COORD_REDIS_LUA_FENCE_RULE(K)                                                                  \
    "if old then\n"                                                                                       \
    "  local c = ucmp(token, h)\n"                                                                        \
    "  if c < 0 then redis.call('SET', " K ", old) return 'S' .. h end\n"                                  \
    "  if c == 0 and q ~= '' then\n"                                                                      \
    "    if seq == '' then\n"                                                                             \
    "      redis.call('SET', " K ", string.sub(rec, 1, 52) .. ' ' .. q .. '\\n' .. string.sub(rec, at))\n" \
    "    elseif ucmp(seq, q) <= 0 then\n"                                                                 \
    "      redis.call('SET', " K ", old) return 'Q' .. h\n"                                                \
    "    end\n"                                                                                           \
    "  end\n"                                                                                             \
    "end\n"                                                                                               \
    "return 'OK'\n"
// The parse of the whole rule: the new record and the old one (tokens of
// 20 digits each, so ucmp compares them as numbers).
#define COORD_REDIS_LUA_FENCE_PARSE(K)                                                                 \
    "local id, token, seq, at, oid, h, q\n"                                                               \
    "id, token, seq, at = string.match(rec, '" COORD_REDIS_LUA_FENCE_HEAD " (%d*)\\n()')\n"              \
    "if old then\n"                                                                                       \
    "  oid, h, q = string.match(old, '" COORD_REDIS_LUA_FENCE_HEAD " (%d*)\\n')\n"                       \
    "  if not h then redis.call('SET', " K ", old) return 'B' end\n"                                     \
    "end\n"                                                                                               \
    "if not token then put_back(" K ", old) return 'B' end\n"

/// The write's common path. KEYS: fence (only: the identity key is not
/// declared, so every fenced write saves a key's cost). ARGV: the new record,
/// "<identity><token: 20 digits> <seq>\n<value>". 'OK' | 'S<highest>' |
/// 'Q<highest>' | 'B' (the key holds no fence record) | 'M': the record is
/// missing or was written under another identity, nothing was done, and the
/// identity key must decide: fence_write_checked.
inline const detail::script fence_write{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_OP R"LUA(
local rec = ARGV[1]
local old = redis.call('SET', KEYS[1], rec, 'GET')
if old then
  local p = string.sub(rec, 1, 52)
  if old < p and old > string.sub(p, 1, 33) then return 'OK' end
end
)LUA" COORD_REDIS_LUA_UCMP COORD_REDIS_LUA_PUT_BACK COORD_REDIS_LUA_FENCE_PARSE("KEYS[1]") R"LUA(
if oid ~= id then put_back(KEYS[1], old) return 'M' end
)LUA" COORD_REDIS_LUA_FENCE_RULE("KEYS[1]") COORD_REDIS_LUA_GEN_WRITES};

/// The write where the record is missing or was written under another
/// identity: the whole rule with the identity check. KEYS: identity, fence.
/// ARGV: the new record. The answers of fence_write, or 'U' | 'C'.
inline const detail::script fence_write_checked{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_OP
    "local rec = ARGV[1]\n"
    "local old = redis.call('SET', KEYS[2], rec, 'GET')\n"
    COORD_REDIS_LUA_UCMP COORD_REDIS_LUA_UNSAFE COORD_REDIS_LUA_PUT_BACK COORD_REDIS_LUA_FENCE_PARSE("KEYS[2]") R"LUA(
if oid ~= id then
  local bad, idv = unsafe(KEYS[1], id)
  if bad then put_back(KEYS[2], old) return bad end
  local _, fl = string.match(idv, '^%x+:(%d+):(%d+):')
  if fl and ucmp(token, fl) < 0 then put_back(KEYS[2], old) return 'S' .. fl end
end
)LUA" COORD_REDIS_LUA_FENCE_RULE("KEYS[2]") COORD_REDIS_LUA_GEN_WRITES};

/// KEYS: identity, fence. ARGV: identity, '1' for the record's version (a
/// SHA-1 of the record; '' when there is none). {'OK', highest, written, value, version}
inline const detail::script fence_read{COORD_REDIS_LUA_READS COORD_REDIS_LUA_OP COORD_REDIS_LUA_UNSAFE "local rec = redis.call('GET', KEYS[2])\n"
    "local oid, h, at\n"
    "if rec then\n"
    "  oid, h, at = string.match(rec, '" COORD_REDIS_LUA_FENCE_HEAD " %d*\\n()')\n"
    "  if not h then return {'B'} end\n"
    "end\n" R"LUA(if oid ~= ARGV[1] then
  local bad, idv = unsafe(KEYS[1], ARGV[1]) if bad then return {bad} end
  local _, fl = string.match(idv, '^%x+:(%d+):(%d+):')
  if fl and not rec then return {'OK', fl, '0', '', ''} end
  if fl and h < fl then h = fl end
end
if not rec then return {'OK', '0', '0', '', ''} end
local version = '' if ARGV[2] == '1' then version = redis.sha1hex(rec) end
return {'OK', h, '1', string.sub(rec, at), version}
)LUA" COORD_REDIS_LUA_GEN_READS};

/// The write of a fence_update: a compare-and-set on the version read.
/// ARGV: identity, token (20 digits), version read, value.
/// 'OK' | 'S<highest>' | 'R' (changed: read again) | 'U' | 'C' | 'B'
inline const detail::script fence_cas{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_OP COORD_REDIS_LUA_UCMP COORD_REDIS_LUA_UNSAFE R"LUA(
local id, token = ARGV[1], ARGV[2]
local rec = redis.call('GET', KEYS[2])
local oid, h, q
if rec then
)LUA" "  oid, h, q = string.match(rec, '" COORD_REDIS_LUA_FENCE_HEAD " (%d*)\\n')\n" R"LUA(  if not h then return 'B' end
end
if oid ~= id then
  local bad, idv = unsafe(KEYS[1], id) if bad then return bad end
  local _, fl = string.match(idv, '^%x+:(%d+):(%d+):')
  if fl and ucmp(token, fl) < 0 then return 'S' .. fl end
end
if rec and ucmp(token, h) < 0 then return 'S' .. h end
local version = '' if rec then version = redis.sha1hex(rec) end
if version ~= ARGV[3] then return 'R' end
local keep = '' if rec and token == h then keep = q end
redis.call('SET', KEYS[2], id .. token .. ' ' .. keep .. '\n' .. ARGV[4])
return 'OK'
)LUA" COORD_REDIS_LUA_GEN_WRITES};

// ---------------------------------------------------------------- leases
// The lease record is one string: "<held><w><last> <n>\n<holder> <ttl> <start>"
// while held, "<held><w><last> <n>\n<holder> " when not: held '1' or '0', w
// (below), the last token granted as 20 digits (zeros in front; the holder's
// token while held), the holder's length n and the holder (the last one's,
// or '', when not held), and the term's length and start in ns (it ends at
// start + ttl, saturated at 2^63-1). w '0': nobody joined the line or
// observes the name since a release found the line empty and no observer
// (enqueue and lease_observe set '1'; a release that finds neither sets '0'),
// so a release with w '0' has no one to wake and leaves the line unread, and
// a grant or release with w '1' PUBLISHes on the channel named as the lease's
// key (an observer's, election's observe()); a missing record counts as '1'. The line is a sorted set of
// tickets and a hash (t last ticket, u:<t> until, o:<t> who).
// Answers: 'CODE token ttl start now ahead\nholder' (token and term of the
// live holder, else 0; the holder '' on a grant: the caller's owner); codes
// OK, H held, N not the holder, X expired, L the place lapsed; 'B' the key
// holds no lease record.
// The acquire and the release write first: SET ... GET puts the record as it
// is on the common path (the name released, nobody in line since, the
// server's clock ahead of the last token; a release by the holder with its
// token) and answers when the old record shows that path was right, which
// the layout lets them see without a parse: a released record with an older
// token lies between "000" and "00<new token>" (the third byte keeps out the
// earlier layout, "00 <token> ...", and a last token of 10^19 or more just
// takes the whole rule; the bytes that decide are digits: the same order in
// every locale, as for the fence), and the holder's record starts with "1"
// and holds "0<token> <n>\n<holder> " from its second byte (a plain find:
// bytes, not collation).
// Otherwise the script puts the old record back and applies the whole rule,
// still inside the one script: no other client sees the first write. The
// helpers of the whole rule are made only on that path (Lua makes a
// script's functions anew on every call).

#define COORD_REDIS_LUA_LEASE                                                                              \
    "local function lease_of(rec, now)\n"                                                                  \
    "  local s = {last = '0', held = false, start = '0', ttl = '0', w = '1', holder = ''}\n"               \
    "  if rec then\n"                                                                                      \
    "    local held, w, last, n, at = string.match(rec, '^([01])([01])(" COORD_REDIS_LUA_D10 COORD_REDIS_LUA_D10 ") (%d+)\\n()')\n" \
    "    if not last then return nil end\n"                                                                \
    "    n = tonumber(n)\n"                                                                                \
    "    if #rec < at + n then return nil end\n"                                                           \
    "    local tail, ttl, start = string.sub(rec, at + n), '0', '0'\n"                                     \
    "    if held == '1' then\n"                                                                            \
    "      ttl, start = string.match(tail, '^ (%d+) (%d+)$')\n"                                             \
    "      if not ttl then return nil end\n"                                                               \
    "    elseif tail ~= ' ' then return nil end\n"                                                         \
    "    s.last, s.held, s.start, s.ttl, s.w = string.match(last, '^0*(%d+)$'), held == '1', start, ttl, w\n" \
    "    s.holder = string.sub(rec, at, at + n - 1)\n"                                                     \
    "  end\n"                                                                                              \
    "  s.live = now and s.held and ucmp(now, add(s.start, s.ttl)) < 0\n"                                   \
    "  return s\n"                                                                                         \
    "end\n"                                                                                                \
    "local function lease_rec(last, held, start, ttl, w, holder)\n"                                        \
    "  local r = held .. w .. string.rep('0', 20 - #last) .. last .. ' ' .. #holder .. '\\n' .. holder .. ' '\n" \
    "  if held == '1' then return r .. ttl .. ' ' .. start end\n"                                          \
    "  return r\n"                                                                                         \
    "end\n"                                                                                                \
    "local function answer(code, s, now, ahead)\n"                                                         \
    "  if s.live then\n"                                                                                   \
    "    return code .. ' ' .. s.last .. ' ' .. s.ttl .. ' ' .. s.start .. ' ' .. now .. ' ' .. (ahead or '0') .. '\\n' .. s.holder\n" \
    "  end\n"                                                                                              \
    "  return code .. ' 0 0 0 ' .. now .. ' ' .. (ahead or '0') .. '\\n'\n"                                \
    "end\n"                                                                                                \
    "local function holds(s, owner, token)\n"                                                              \
    "  return s.held and s.holder == owner and (token == '0' or token == s.last)\n"                        \
    "end\n"                                                                                                \
    "local function grant(k, s, owner, ttl, now)\n"                                                        \
    "  local t = inc(s.last)\n"                                                                            \
    "  local floor = us_of(now)\n"                                                                         \
    "  if ucmp(floor, t) > 0 then t = floor end\n"                                                         \
    "  redis.call('SET', k, lease_rec(t, '1', now, ttl, s.w, owner))\n"                                    \
    "  if s.w ~= '0' then redis.call('PUBLISH', k, '') end\n"                                              \
    "  return 'OK ' .. t .. ' ' .. ttl .. ' ' .. now .. ' ' .. now .. ' 0\\n'\n"                           \
    "end\n"
// The line of waiters (lease_queue_store), in three keys: the line (a sorted
// set of places, scored by the ticket: arrival order), the places' ends (the
// same members, scored by the end of each place in microseconds on the
// store's clock: a place lives while end * 1000 > now) and the ticket counter.
// A place's member is "<ticket> <owner>", so that finding it checks its
// owner. Keeping a place is one ZADD and finding the lapsed ones one
// ZRANGEBYSCORE, so a waiter's upkeep costs the same however long the line
// is. (Scores are doubles: exact below 2^53 microseconds, the year 2255.)
// purge: removes the lapsed places; first_live: the first live place without
// writing (for read-only scripts); wake: PUBLISH to the first.
#define COORD_REDIS_LUA_LINE                                                                               \
    "local function purge(z, e, now)\n"                                                                    \
    "  for _, m in ipairs(redis.call('ZRANGEBYSCORE', e, '-inf', us_of(now))) do\n"                        \
    "    redis.call('ZREM', z, m); redis.call('ZREM', e, m)\n"                                             \
    "  end\n"                                                                                              \
    "end\n"                                                                                                \
    "local function ticket_of(m) return string.match(m, '^(%d+) ') end\n"                                  \
    "local function first_live(z, e, now)\n"                                                               \
    "  local i, floor = 0, us_of(now)\n"                                                                   \
    "  while true do\n"                                                                                    \
    "    local m = redis.call('ZRANGE', z, i, i)[1]\n"                                                     \
    "    if not m then return nil end\n"                                                                   \
    "    local u = redis.call('ZSCORE', e, m)\n"                                                           \
    "    if u and ucmp(u, floor) > 0 then return ticket_of(m) end\n"                                       \
    "    i = i + 1\n"                                                                                      \
    "  end\n"                                                                                              \
    "end\n"                                                                                                \
    "local function wake(z, e, channel, now)\n"                                                            \
    "  purge(z, e, now)\n"                                                                                 \
    "  local first = redis.call('ZRANGE', z, 0, 0)[1]\n"                                                   \
    "  if first then redis.call('PUBLISH', channel .. ticket_of(first), '') return true end\n"             \
    "  return false\n"                                                                                     \
    "end\n"                                                                                                \
    "local function place_end(now, ttl) return us_of(add(now, ttl)) end\n"

/// KEYS: lease. ARGV: " <n>\n<owner> <ttl> " (the record's middle: one
/// argument, as every argument costs the server as much as a few string
/// operations), then a test clock's reading (without it the server's TIME).
/// A grant on the common path answers its token alone (digits): the term
/// starts at the reading sent, or at token * 1000 ns (TIME), and is as long
/// as asked; every other outcome is a full answer.
inline const detail::script lease_acquire{COORD_REDIS_LUA_WRITES R"LUA(
local t, now = '0', ARGV[2]
if now then
  if #now > 3 then t = string.sub(now, 1, -4) end
  t = string.rep('0', 20 - #t) .. t
else
  local c = redis.call('TIME')
  local sec, us = c[1], c[2]
  if #sec == 10 and #us == 6 then
    t = '0000' .. sec .. us
  else
    us = string.sub('00000' .. us, -6)
    t = string.rep('0', 14 - #sec) .. sec .. us
  end
  now = sec .. us .. '000'
end
local old = redis.call('SET', KEYS[1], '10' .. t .. ARGV[1] .. now, 'GET')
if old and old > '000' and old < '00' .. t then return t end
)LUA" COORD_REDIS_LUA_UCMP COORD_REDIS_LUA_ADD COORD_REDIS_LUA_CLOCK COORD_REDIS_LUA_LEASE COORD_REDIS_LUA_PUT_BACK R"LUA(
put_back(KEYS[1], old)
local n, at = string.match(ARGV[1], '^ (%d+)\n()')
local owner, ttl
if n then
  owner = string.sub(ARGV[1], at, at + tonumber(n) - 1)
  ttl = string.match(ARGV[1], '^ (%d+) $', at + tonumber(n))
end
if not ttl then return redis.error_reply('coord: malformed lease_acquire argument') end
local s = lease_of(old, now)
if not s then return 'B' end
if s.live then return answer('H', s, now) end
return grant(KEYS[1], s, owner, ttl, now)
)LUA"};

/// KEYS: lease. ARGV: now, owner, token, ttl ('0': the granted term).
inline const detail::script lease_renew{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_UCMP COORD_REDIS_LUA_ADD COORD_REDIS_LUA_CLOCK COORD_REDIS_LUA_LEASE R"LUA(
local now = clock(ARGV[1])
local s = lease_of(redis.call('GET', KEYS[1]), now)
if not s then return 'B' end
if not holds(s, ARGV[2], ARGV[3]) then return answer('N', s, now) end
if not s.live then return answer('X', s, now) end
local ttl = s.ttl if ARGV[4] ~= '0' then ttl = ARGV[4] end
redis.call('SET', KEYS[1], lease_rec(s.last, '1', now, ttl, s.w, s.holder))
return 'OK ' .. s.last .. ' ' .. ttl .. ' ' .. now .. ' ' .. now .. ' 0\n'
)LUA"};

/// A release by a token (not '0'). KEYS: lease. ARGV: "0<token> <n>\n<owner> "
/// (the holder's record from its second byte: token as 20 digits, the
/// owner's length, the owner), then a test clock's reading.
/// 'OK' | a refusal | 'W': the holder's, but someone joined the line since
/// the last release: nothing done, release with lease_release_line (which
/// wakes the first waiter).
inline const detail::script lease_release{COORD_REDIS_LUA_WRITES R"LUA(
local e = ARGV[1]
local old = redis.call('SET', KEYS[1], '0' .. e, 'GET')
if old and old > '1' and old < '2' and string.find(old, e, 2, true) == 2 then return 'OK' end
)LUA" COORD_REDIS_LUA_UCMP COORD_REDIS_LUA_ADD COORD_REDIS_LUA_CLOCK COORD_REDIS_LUA_LEASE COORD_REDIS_LUA_PUT_BACK R"LUA(
put_back(KEYS[1], old)
local token, n, at = string.match(e, '^0(%d+) (%d+)\n()')
if not token then return redis.error_reply('coord: malformed lease_release argument') end
token = string.match(token, '^0*(%d+)$')
local owner = string.sub(e, at, at + tonumber(n) - 1)
local now = clock(ARGV[2] or '')
local s = lease_of(old, now)
if not s then return 'B' end
if holds(s, owner, token) then return 'W' end
return answer('N', s, now)
)LUA"};

/// The release that reads the line: by any token ('0') or with someone in
/// line. KEYS: lease, line, ends. ARGV: now, owner, token, channel prefix. 'OK' or a refusal. Wakes only the first live waiter (PUBLISH on
/// its place's channel).
inline const detail::script lease_release_line{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_PRELUDE COORD_REDIS_LUA_LEASE COORD_REDIS_LUA_LINE R"LUA(
local now = clock(ARGV[1])
local s = lease_of(redis.call('GET', KEYS[1]), now)
if not s then return 'B' end
if not holds(s, ARGV[2], ARGV[3]) then return answer('N', s, now) end
local w = '0'
if s.w ~= '0' then
  if wake(KEYS[2], KEYS[3], ARGV[4], now) then w = '1' end
  if redis.call('PUBLISH', KEYS[1], '') > 0 then w = '1' end
end
redis.call('SET', KEYS[1], lease_rec(s.last, '0', '0', '0', w, ''))
return 'OK'
)LUA"};

/// An observer (SUBSCRIBEd already to the channel named as the lease's key)
/// makes grants and releases take the paths that PUBLISH: w '1'. KEYS: lease.
/// 'OK' | 'B'.
inline const detail::script lease_observe{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_UCMP COORD_REDIS_LUA_ADD COORD_REDIS_LUA_LEASE R"LUA(
local rec = redis.call('GET', KEYS[1])
if not rec then return 'OK' end
local s = lease_of(rec, nil)
if not s then return 'B' end
if s.w ~= '1' then
  local held = '0' if s.held then held = '1' end
  redis.call('SET', KEYS[1], lease_rec(s.last, held, s.start, s.ttl, '1', s.holder))
end
return 'OK'
)LUA"};

/// KEYS: lease. ARGV: now. An answer with code OK, or 'NONE'.
inline const detail::script lease_read{COORD_REDIS_LUA_READS COORD_REDIS_LUA_UCMP COORD_REDIS_LUA_ADD COORD_REDIS_LUA_CLOCK COORD_REDIS_LUA_LEASE R"LUA(local now = clock(ARGV[1])
local s = lease_of(redis.call('GET', KEYS[1]), now)
if not s then return 'B' end
if not s.live then return 'NONE' end
return answer('OK', s, now)
)LUA"};

/// KEYS: line, ends, counter, lease. ARGV: now, who, place ttl. {'OK', ticket} | {'B'}
inline const detail::script lease_enqueue{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_PRELUDE COORD_REDIS_LUA_LEASE COORD_REDIS_LUA_LINE R"LUA(
local now = clock(ARGV[1])
local rec = redis.call('GET', KEYS[4])
local s = lease_of(rec, now)
if not s then return {'B'} end
purge(KEYS[1], KEYS[2], now)
if not rec or s.w ~= '1' then
  local held = '0' if s.held then held = '1' end
  redis.call('SET', KEYS[4], lease_rec(s.last, held, s.start, s.ttl, '1', s.holder))
end
local t = string.format('%d', redis.call('INCR', KEYS[3]))
local m = t .. ' ' .. ARGV[2]
redis.call('ZADD', KEYS[1], t, m)
redis.call('ZADD', KEYS[2], place_end(now, ARGV[3]), m)
return {'OK', t}
)LUA"};

/// lease_queue_rule::acquire. KEYS: lease, line, ends.
/// ARGV: now, owner, ttl, ticket, place ttl. While it waits, a waiter costs
/// five commands a call (the script, GET, ZRANGEBYSCORE, ZRANK, ZADD),
/// however long the line is.
inline const detail::script lease_acquire_queued{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_PRELUDE COORD_REDIS_LUA_LEASE COORD_REDIS_LUA_LINE R"LUA(
local now = clock(ARGV[1])
local s = lease_of(redis.call('GET', KEYS[1]), now)
if not s then return 'B' end
purge(KEYS[2], KEYS[3], now)
local m = ARGV[4] .. ' ' .. ARGV[2]
local rank = redis.call('ZRANK', KEYS[2], m)
if not rank then return answer('L', s, now) end
if rank > 0 or s.live then
  redis.call('ZADD', KEYS[3], place_end(now, ARGV[5]), m)
  return answer('H', s, now, string.format('%d', rank))
end
redis.call('ZREM', KEYS[2], m); redis.call('ZREM', KEYS[3], m)
return grant(KEYS[1], s, ARGV[2], ARGV[3], now)
)LUA"};

/// KEYS: line, ends. ARGV: now, ticket, channel prefix.
inline const detail::script lease_dequeue{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_PRELUDE COORD_REDIS_LUA_LEASE COORD_REDIS_LUA_LINE R"LUA(
local now = clock(ARGV[1])
local m = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[2], ARGV[2])[1]
if m then
  redis.call('ZREM', KEYS[1], m); redis.call('ZREM', KEYS[2], m)
  wake(KEYS[1], KEYS[2], ARGV[3], now)
end
return {'OK'}
)LUA"};

/// KEYS: line, ends. ARGV: now. {'OK', ticket, who, until, ...} (live places, in order)
inline const detail::script lease_queue_read{COORD_REDIS_LUA_READS COORD_REDIS_LUA_PRELUDE COORD_REDIS_LUA_LEASE COORD_REDIS_LUA_LINE R"LUA(local now = clock(ARGV[1])
local out, floor = {'OK'}, us_of(now)
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local u = redis.call('ZSCORE', KEYS[2], m)
  local t = ticket_of(m)
  if u and t and ucmp(u, floor) > 0 then
    out[#out + 1] = t; out[#out + 1] = string.sub(m, #t + 2); out[#out + 1] = u .. '000'
  end
end
return out
)LUA"};

/// True ('1') when the ticket is first in line and nobody holds the lease.
/// KEYS: lease, line, ends. ARGV: now, ticket.
inline const detail::script lease_next_in_line{COORD_REDIS_LUA_READS COORD_REDIS_LUA_PRELUDE COORD_REDIS_LUA_LEASE COORD_REDIS_LUA_LINE R"LUA(local now = clock(ARGV[1])
local s = lease_of(redis.call('GET', KEYS[1]), now)
if not s then return {'0'} end
if not s.live and first_live(KEYS[2], KEYS[3], now) == ARGV[2] then return {'1'} end
return {'0'}
)LUA"};

// ---------------------------------------------------------------- reservation, segment

/// KEYS: identity, reservation hash (h highest token, u until_ms). ARGV: identity, until_ms, token.
inline const detail::script time_reserve{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_OP COORD_REDIS_LUA_UCMP COORD_REDIS_LUA_CMP COORD_REDIS_LUA_UNSAFE R"LUA(
local bad, idv = unsafe(KEYS[1], ARGV[1]) if bad then return {bad} end
local f = redis.call('HMGET', KEYS[2], 'h', 'u')
local h, u = f[1] or '0', f[2] or '0'
local fu = string.match(idv, '^%x+:%d+:%d+:%d+:(%d+)$')
if fu and cmp(fu, u) > 0 then u = fu end
if ucmp(ARGV[3], h) < 0 then return {'S', h} end
if cmp(ARGV[2], u) > 0 then u = ARGV[2] end
redis.call('HSET', KEYS[2], 'h', ARGV[3], 'u', u)
return {'OK', u}
)LUA" COORD_REDIS_LUA_GEN_WRITES};

/// KEYS: identity, the tag's counter (the last ID handed out). ARGV: identity, step.
/// The last ID now, as digits | 'E' (past 2^63-1: exhausted) | 'U' | 'C'.
/// INCRBY first: a counter that was not 0 (or missing) before it is data
/// the store kept, so the identity is read only when INCRBY answers the step
/// itself, and then the increment is taken back if the store lost its data
/// or was initialized again. INCRBY's answer is a double in Lua, exact below
/// 2^53; above, the counter is read back as text (and the comparison with the
/// step can only err towards reading the identity).
inline const detail::script segment_allocate{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_OP COORD_REDIS_LUA_UNSAFE R"LUA(
local r = redis.pcall('INCRBY', KEYS[2], ARGV[2])
if type(r) == 'table' and r.err then
  if string.find(r.err, 'overflow', 1, true) then return 'E' end
  return r
end
if r == tonumber(ARGV[2]) then
  local bad, idv = unsafe(KEYS[1], ARGV[1])
  if bad then redis.call('DECRBY', KEYS[2], ARGV[2]) return bad end
  local fl = string.match(idv, '^%x+:(%d+):')
  if fl and fl ~= '0' then
    r = redis.pcall('INCRBY', KEYS[2], fl)
    if type(r) == 'table' then redis.call('DECRBY', KEYS[2], ARGV[2]) return 'E' end
  end
end
if r < 9007199254740992 then return string.format('%d', r) end
return redis.call('GET', KEYS[2])
)LUA" COORD_REDIS_LUA_GEN_WRITES};

// ---------------------------------------------------------------- ledger
// The slot's hash: k key, sm scheduled_ms, sv schedule_version, st state (0
// idle, 1 running, 2 done), f fence, a attempt, h holder, lu lease_until_ns,
// sn started_ns, cn completed_ns, ru retain_until_ns, ph payload hash, r
// result, fr fail reason. Done slots are indexed by retention end (ms) for prune.

/// KEYS: identity, slot. ARGV: now, identity, key, scheduled_ms, version,
/// worker, payload hash, lease ttl ns, scheduled_ms + replay window (saturated).
/// {kind, fence, attempt, holder, lease_until, result}; kind as claim_outcome.
inline const detail::script ledger_claim{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_OP COORD_REDIS_LUA_PRELUDE R"LUA(
local now = clock(ARGV[1])
local bad, idv = unsafe(KEYS[1], ARGV[2]) if bad then return {bad} end
if cmp(ARGV[9], ms_of(now)) < 0 then return {'4', '0', '0', '', '0', ''} end
local lf = string.match(idv, '^%x+:%d+:%d+:(%d+):')
local r = redis.call('HMGET', KEYS[2], 'st', 'f', 'a', 'h', 'lu', 'ph', 'r')
local st, f, a = r[1] or '0', r[2] or '0', tonumber(r[3] or '0')
if lf and st ~= '2' and ucmp(ARGV[4], lf) <= 0 then return {'4', '0', '0', '', '0', ''} end
if (a > 0 or st ~= '0') and (r[6] or '') ~= ARGV[7] then return {'3', '0', '0', '', '0', ''} end
if st == '2' then return {'1', f, string.format('%d', a), '', '0', r[7] or ''} end
if st == '1' and ucmp(now, r[5] or '0') < 0 then return {'2', f, string.format('%d', a), r[4] or '', r[5], ''} end
local ff = string.match(idv, '^%x+:%d+:0*(%d-):') or ''
if ff ~= '' and ucmp(ff, f) > 0 then f = ff end
f = uadd(f, '1')
local attempt = string.format('%d', a + 1)
local lu = add(now, ARGV[8])
redis.call('HSET', KEYS[2], 'k', ARGV[3], 'sm', ARGV[4], 'sv', ARGV[5], 'ph', ARGV[7], 'st', '1', 'f', f,
           'a', attempt, 'h', ARGV[6], 'lu', lu, 'sn', now)
return {'0', f, attempt, ARGV[6], lu, ''}
)LUA" COORD_REDIS_LUA_GEN_WRITES};

/// KEYS: identity, slot. ARGV: now, identity, fence, ttl ns. {'OK'} | {'S'}
inline const detail::script ledger_heartbeat{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_OP COORD_REDIS_LUA_PRELUDE R"LUA(
local now = clock(ARGV[1])
local bad = unsafe(KEYS[1], ARGV[2]) if bad then return {bad} end
local r = redis.call('HMGET', KEYS[2], 'st', 'f')
if r[1] ~= '1' or r[2] ~= ARGV[3] then return {'S'} end
redis.call('HSET', KEYS[2], 'lu', add(now, ARGV[4]))
return {'OK'}
)LUA" COORD_REDIS_LUA_GEN_WRITES};

/// KEYS: identity, slot, done index. ARGV: now, identity, fence, result,
/// retain_until ns, its milliseconds (the index's score), the slot's key.
inline const detail::script ledger_complete{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_OP COORD_REDIS_LUA_PRELUDE R"LUA(
local now = clock(ARGV[1])
local bad = unsafe(KEYS[1], ARGV[2]) if bad then return {bad} end
local r = redis.call('HMGET', KEYS[2], 'st', 'f')
if r[1] ~= '1' or r[2] ~= ARGV[3] then return {'S'} end
redis.call('HSET', KEYS[2], 'st', '2', 'r', ARGV[4], 'cn', now, 'ru', ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[7])
return {'OK'}
)LUA" COORD_REDIS_LUA_GEN_WRITES};

/// KEYS: identity, slot. ARGV: identity, fence, reason.
inline const detail::script ledger_fail{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_OP COORD_REDIS_LUA_PRELUDE R"LUA(
local bad = unsafe(KEYS[1], ARGV[1]) if bad then return {bad} end
local r = redis.call('HMGET', KEYS[2], 'st', 'f')
if r[1] ~= '1' or r[2] ~= ARGV[2] then return {'S'} end
redis.call('HSET', KEYS[2], 'st', '0', 'fr', ARGV[3], 'lu', '0')
return {'OK'}
)LUA" COORD_REDIS_LUA_GEN_WRITES};

/// KEYS: identity, slot. ARGV: identity, reason. {'OK', new fence} | {'S'}
inline const detail::script ledger_revoke{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_OP COORD_REDIS_LUA_PRELUDE R"LUA(
local bad = unsafe(KEYS[1], ARGV[1]) if bad then return {bad} end
local r = redis.call('HMGET', KEYS[2], 'st', 'f')
if r[1] ~= '1' then return {'S'} end
local f = uadd(r[2] or '0', '1')
redis.call('HSET', KEYS[2], 'f', f, 'st', '0', 'fr', ARGV[2], 'lu', '0')
return {'OK', f}
)LUA" COORD_REDIS_LUA_GEN_WRITES};

/// KEYS: identity, slot. ARGV: identity. {'OK', k, sm, sv, st, f, a, h, lu, sn, cn, ru, ph, r, fr} | {'NONE'}
inline const detail::script ledger_read{COORD_REDIS_LUA_READS COORD_REDIS_LUA_OP COORD_REDIS_LUA_PRELUDE R"LUA(local bad = unsafe(KEYS[1], ARGV[1]) if bad then return {bad} end
if redis.call('EXISTS', KEYS[2]) == 0 then return {'NONE'} end
local r = redis.call('HMGET', KEYS[2], 'k', 'sm', 'sv', 'st', 'f', 'a', 'h', 'lu', 'sn', 'cn', 'ru', 'ph', 'r', 'fr')
local out = {'OK'}
for i = 1, 14 do out[i + 1] = r[i] or '' end
return out
)LUA" COORD_REDIS_LUA_GEN_READS};

/// KEYS: identity, done index. ARGV: now, identity, the slots' key prefix. {'OK', removed}
inline const detail::script ledger_prune{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_OP COORD_REDIS_LUA_PRELUDE R"LUA(
local now = clock(ARGV[1])
local bad = unsafe(KEYS[1], ARGV[2]) if bad then return {bad} end
local n = 0
for _, key in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ms_of(now))) do
  local slot = ARGV[3] .. key
  local r = redis.call('HMGET', slot, 'st', 'ru')
  if r[1] ~= '2' then
    redis.call('ZREM', KEYS[2], key)
  elseif ucmp(r[2], now) <= 0 and r[2] ~= MAX then
    redis.call('DEL', slot); redis.call('ZREM', KEYS[2], key); n = n + 1
  end
end
return {'OK', string.format('%d', n)}
)LUA" COORD_REDIS_LUA_GEN_WRITES};

// ---------------------------------------------------------------- sessions
// A session's hash: u user, d data, c created_ms, ls last_seen_ms, ax
// absolute_expiry_ms, it idle_timeout_ms, v version. The user's set holds
// the keys of their sessions. Each key expires (PEXPIRE) a minute after the
// session's rule says it ended, so Redis collects what nobody loads; the
// rule itself is judged here, on the server's clock.

#define COORD_REDIS_LUA_SESSION                                                                         \
    "local MARGIN_MS = 60000\n"                                                                         \
    "local function keep_ms(ls, it, ax, now)\n"                                                         \
    "  local e = add(ls, it)\n"                                                                         \
    "  if ucmp(ax, e) < 0 then e = ax end\n"                                                            \
    "  local rel = tonumber(e) - tonumber(now) + MARGIN_MS\n"                                           \
    "  if rel > 315360000000 then rel = 315360000000 end\n"                                             \
    "  if rel < 1 then rel = 1 end\n"                                                                   \
    "  return string.format('%d', rel)\n"                                                               \
    "end\n"                                                                                             \
    "local function keep(k, users, ms)\n"                                                               \
    "  redis.call('PEXPIRE', k, ms)\n"                                                                  \
    "  if redis.call('PTTL', users) < tonumber(ms) then redis.call('PEXPIRE', users, ms) end\n"         \
    "end\n"                                                                                             \
    "local function live(k, now, prefix)\n"                                                             \
    "  local r = redis.call('HMGET', k, 'u', 'd', 'c', 'ls', 'ax', 'it', 'v')\n"                        \
    "  if not r[1] then return nil, '1' end\n"                                                          \
    "  if ucmp(now, r[5]) >= 0 or ucmp(now, add(r[4], r[6])) >= 0 then\n"                               \
    "    redis.call('DEL', k); redis.call('SREM', prefix .. 'su:' .. r[1], k)\n"                        \
    "    return nil, '2'\n"                                                                             \
    "  end\n"                                                                                           \
    "  return r\n"                                                                                      \
    "end\n"

/// KEYS: session, the user's set. ARGV: now, user, data, idle ms, absolute ms.
/// {'0', created, absolute expiry} | {'3'}
inline const detail::script session_create{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_PRELUDE COORD_REDIS_LUA_SESSION R"LUA(
local now = ms_of(clock(ARGV[1]))
if redis.call('EXISTS', KEYS[1]) == 1 then return {'3'} end
local ax = add(now, ARGV[5])
redis.call('HSET', KEYS[1], 'u', ARGV[2], 'd', ARGV[3], 'c', now, 'ls', now, 'ax', ax, 'it', ARGV[4], 'v', '1')
for _, other in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if redis.call('EXISTS', other) == 0 then redis.call('SREM', KEYS[2], other) end
end
redis.call('SADD', KEYS[2], KEYS[1])
keep(KEYS[1], KEYS[2], keep_ms(now, ARGV[4], ax, now))
return {'0', now, ax}
)LUA"};

/// KEYS: session. ARGV: now, key prefix. {'0', user, data, created, last_seen, expiry, idle, version} | {'1'|'2'}
inline const detail::script session_load{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_PRELUDE COORD_REDIS_LUA_SESSION R"LUA(
local now = ms_of(clock(ARGV[1]))
local r, st = live(KEYS[1], now, ARGV[2]) if not r then return {st} end
local ls = r[4] if ucmp(now, ls) > 0 then ls = now end
redis.call('HSET', KEYS[1], 'ls', ls)
keep(KEYS[1], ARGV[2] .. 'su:' .. r[1], keep_ms(ls, r[6], r[5], now))
return {'0', r[1], r[2], r[3], ls, r[5], r[6], r[7]}
)LUA"};

/// KEYS: session. ARGV: now, key prefix, version, data. {'0', version} | {'1'|'2'} | {'3', version}
inline const detail::script session_save{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_PRELUDE COORD_REDIS_LUA_SESSION R"LUA(
local now = ms_of(clock(ARGV[1]))
local r, st = live(KEYS[1], now, ARGV[2]) if not r then return {st} end
if r[7] ~= ARGV[3] then return {'3', r[7]} end
local ls = r[4] if ucmp(now, ls) > 0 then ls = now end
local v = uadd(r[7], '1')
redis.call('HSET', KEYS[1], 'd', ARGV[4], 'ls', ls, 'v', v)
keep(KEYS[1], ARGV[2] .. 'su:' .. r[1], keep_ms(ls, r[6], r[5], now))
return {'0', v}
)LUA"};

/// KEYS: old session, new session. ARGV: now, key prefix, version. As save.
inline const detail::script session_rotate{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_PRELUDE COORD_REDIS_LUA_SESSION R"LUA(
local now = ms_of(clock(ARGV[1]))
local r, st = live(KEYS[1], now, ARGV[2]) if not r then return {st} end
if r[7] ~= ARGV[3] then return {'3', r[7]} end
if redis.call('EXISTS', KEYS[2]) == 1 then return {'3', r[7]} end
local ls = r[4] if ucmp(now, ls) > 0 then ls = now end
local v = uadd(r[7], '1')
local users = ARGV[2] .. 'su:' .. r[1]
redis.call('HSET', KEYS[2], 'u', r[1], 'd', r[2], 'c', r[3], 'ls', ls, 'ax', r[5], 'it', r[6], 'v', v)
redis.call('DEL', KEYS[1]); redis.call('SREM', users, KEYS[1]); redis.call('SADD', users, KEYS[2])
keep(KEYS[2], users, keep_ms(ls, r[6], r[5], now))
return {'0', v}
)LUA"};

/// KEYS: session. ARGV: key prefix. {'1'} removed | {'0'} none
inline const detail::script session_revoke{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_PRELUDE R"LUA(
local u = redis.call('HGET', KEYS[1], 'u')
if not u then return {'0'} end
redis.call('DEL', KEYS[1]); redis.call('SREM', ARGV[1] .. 'su:' .. u, KEYS[1])
return {'1'}
)LUA"};

/// Every session of a user, in one step. KEYS: the user's set. {'OK', removed}
inline const detail::script session_revoke_user{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_PRELUDE R"LUA(
local n = 0
for _, k in ipairs(redis.call('SMEMBERS', KEYS[1])) do n = n + redis.call('DEL', k) end
redis.call('DEL', KEYS[1])
return {'OK', string.format('%d', n)}
)LUA"};

// ---------------------------------------------------------------- revocation

/// KEYS: identity, the token's denial. ARGV: identity, until_s.
/// The denial is dropped by Redis a day after the token's exp (it cannot
/// validate then anyway, unless a validator's clock is a day behind), and
/// never sooner than a day from now on the server's clock.
inline const detail::script revoke_token{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_OP COORD_REDIS_LUA_PRELUDE R"LUA(
local bad = unsafe(KEYS[1], ARGV[1]) if bad then return {bad} end
local u = redis.call('GET', KEYS[2])
if not u or cmp(ARGV[2], u) > 0 then u = ARGV[2] end
redis.call('SET', KEYS[2], u)
local e = tonumber(u) + 86400
local now = tonumber(redis.call('TIME')[1]) + 86400
if e < now then e = now end
if e < 253402300799 then redis.call('EXPIREAT', KEYS[2], string.format('%d', e)) end
return {'OK'}
)LUA" COORD_REDIS_LUA_GEN_WRITES};

/// KEYS: identity, the subject's not-before. ARGV: identity, not_before_s.
inline const detail::script revoke_subject{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_OP COORD_REDIS_LUA_PRELUDE R"LUA(
local bad = unsafe(KEYS[1], ARGV[1]) if bad then return {bad} end
local nb = redis.call('GET', KEYS[2])
if not nb or cmp(ARGV[2], nb) > 0 then redis.call('SET', KEYS[2], ARGV[2]) end
return {'OK'}
)LUA" COORD_REDIS_LUA_GEN_WRITES};

/// KEYS: identity, denial, not-before. ARGV: identity, has jti, has sub, iat ('' none), now_s.
inline const detail::script token_revoked{COORD_REDIS_LUA_READS COORD_REDIS_LUA_OP COORD_REDIS_LUA_PRELUDE R"LUA(local bad = unsafe(KEYS[1], ARGV[1]) if bad then return {bad} end
if ARGV[2] == '1' then
  local u = redis.call('GET', KEYS[2])
  if u and cmp(ARGV[5], u) <= 0 then return {'OK', '1'} end
end
if ARGV[3] == '1' then
  local nb = redis.call('GET', KEYS[3])
  if nb and (ARGV[4] == '' or cmp(ARGV[4], nb) < 0) then return {'OK', '1'} end
end
return {'OK', '0'}
)LUA" COORD_REDIS_LUA_GEN_READS};

// ---------------------------------------------------------------- store

/// Initialization: the identity key's value and the generation raised to at
/// least the server's microseconds (above every generation counted before,
/// so that a client that saw the store before any loss never takes the new
/// one for an older state). KEYS: identity, generation. ARGV: the identity
/// key's value, '1' to replace an identity, the server's microseconds.
/// 'OK' | 'A' (already initialized: nothing changed).
inline const detail::script store_init{COORD_REDIS_LUA_WRITES R"LUA(
if ARGV[2] ~= '1' and redis.call('EXISTS', KEYS[1]) == 1 then return 'A' end
redis.call('SET', KEYS[1], ARGV[1])
local g = tonumber(redis.call('GET', KEYS[2]) or '0')
if g < tonumber(ARGV[3]) then redis.call('SET', KEYS[2], ARGV[3]) end
return 'OK'
)LUA"};

/// A segment counter raised to the segment floor (the recovery's first step,
/// store::initialize). KEYS: counter. ARGV: floor. 'OK'
inline const detail::script segment_raise{COORD_REDIS_LUA_WRITES COORD_REDIS_LUA_UCMP R"LUA(
local v = redis.call('GET', KEYS[1])
if v and string.match(v, '^%d+$') and ucmp(v, ARGV[1]) < 0 then redis.call('SET', KEYS[1], ARGV[1]) end
return 'OK'
)LUA"};

/// A script that returns its argument: the floor the bench compares with.
inline const detail::script echo{"#!lua flags=no-writes\nreturn ARGV[1]\n"};

#undef COORD_REDIS_LUA_WRITES
#undef COORD_REDIS_LUA_READS
#undef COORD_REDIS_LUA_PRELUDE
#undef COORD_REDIS_LUA_PUT_BACK
#undef COORD_REDIS_LUA_LEASE
#undef COORD_REDIS_LUA_LINE
#undef COORD_REDIS_LUA_UCMP
#undef COORD_REDIS_LUA_CMP
#undef COORD_REDIS_LUA_ADD
#undef COORD_REDIS_LUA_CLOCK
#undef COORD_REDIS_LUA_UNSAFE
#undef COORD_REDIS_LUA_SESSION
#undef COORD_REDIS_LUA_OP
#undef COORD_REDIS_LUA_GEN_WRITES
#undef COORD_REDIS_LUA_GEN_READS
#undef COORD_REDIS_LUA_WRITER_LOST

}  // namespace coord::redis::scripts
