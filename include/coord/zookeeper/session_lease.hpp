// SPDX-License-Identifier: Apache-2.0
// coord/zookeeper/session_lease.hpp: leases bound to a ZooKeeper session
// (store.session_bound(), a lease_store and lease_queue_store of its own),
// on ZooKeeper's lock recipe in the node names of Curator's InterProcessMutex.
//
// A name's lock node is ROOT/lock/NAME (in NAME, '%' and '/' are written %25
// and %2F). Every contender creates one ephemeral sequential child of it,
// `_c_<id>-lock-<10-digit sequence>` (the owner as its data; <id> a random
// UUID of the attempt), owned by this store object's session. The child with
// the lowest sequence holds; every other waits, watching only the child
// just before its own, so a release wakes one waiter. Children of other
// clients count by the same rule: any child whose name ends in ten digits
// (Curator's `..-lock-0000000007`, kazoo's `..__lock__0000000007`). So
// Curator's InterProcessMutex(client, "ROOT/lock/NAME") and kazoo's
// Lock(client, "ROOT/lock/NAME", extra_lock_patterns=["-lock-"]) exclude
// coord and are excluded by it. The fence token is the store's fence floor
// plus the holder child's creation zxid, not its sequence (a sequence starts
// again when the lock node is made again; zxids only grow, across restarts
// and leader elections, and go back only with a whole ensemble restored
// from an old snapshot, after which the recovery's floor puts every later
// token above every earlier one: context::lease_floor).
//
// The term is the session timeout the ensemble negotiated, whatever TTL was
// asked (the grant reports it); the session's heartbeats renew it; the
// ensemble ends it, and deletes the child, when it expires the session: a
// holder that lost its connection keeps the lease only until then, and
// learns it lost it from the child's absence (renew: lease_expired) once it
// reconnects with a new session.
//
// A create whose answer was lost (a connection loss) is recognised on retry
// by the attempt's id in the child's name (Curator's protection): this
// grant's child, not an orphan.
// Round trips: acquire 2 (the create; the children), 4 the first time a
// name is used (its lock node), refused 5 (the child deleted, the holder
// read: held by this session for this owner already, as after a lost
// answer, is that grant); renew 1 (this store object's grant) or 3; release 3; read 2.
// The waiting acquire: enqueue 1 (the create), a queued try 2 (3 refused:
// the holder read), a wait 3 (the children, the predecessor's watch armed,
// and read); the place is the session's, renewed by its heartbeats (the
// place's TTL is not ZooKeeper's to give: a waiter that died blocks the
// line until the ensemble expires its session).
#pragma once

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "coord/lease.hpp"
#include "coord/random.hpp"
#include "coord/rules/lease.hpp"
#include "coord/zookeeper/context.hpp"

namespace coord::zookeeper {

template <class Clock>
class session_lease_adapter {
    using ctx_t = detail::context<Clock>;

public:
    explicit session_lease_adapter(ctx_t& ctx) noexcept : ctx_(ctx) {}

    /// The term is the session timeout; `ttl` is not ZooKeeper's to give here.
    result<lease, lease_error> lease_acquire(std::string_view name, std::string_view owner, std::chrono::nanoseconds) {
        auto floor = ctx_.lease_floor();  // the token rests on it: nothing is created before `store init`
        if (!floor) return failed(floor.error());
        const std::string dir = lock_of(name);
        auto me = contend(dir, owner);
        if (!me) return failed(me.error());
        auto l = line(dir);
        if (!l) return failed(l.error());  // the child stays: ended with the session, or by a later release
        if (!l->empty() && l->front().child == me->child) {
            const fence_token token = ctx_t::token_of(*floor, me->czxid);
            remember(name, grant{std::string(owner), dir + "/" + me->child, token});
            return term_of(name, owner, token);
        }
        (void)ctx_.del(dir + "/" + me->child, -1);  // not first: withdrawn (tryLock)
        // Held by this session for this owner already (an earlier attempt
        // whose answer was lost): that grant, not a refusal.
        auto h = holder(dir);
        if (!h) return failed(h.error());
        if (*h && (*h)->data == owner && (*h)->stat.ephemeralOwner == ctx_.zk().id()) {
            const auto token = ctx_t::token_of(*floor, (*h)->stat.czxid);
            remember(name, grant{std::string(owner), (*h)->path, token});
            return term_of(name, owner, token);
        }
        return held_by(dir, coord::errc::lease_held, 0);
    }

    result<lease, lease_error> lease_renew(std::string_view name, std::string_view owner, fence_token token,
                                           std::chrono::nanoseconds) {
        // This store object's grant: its child still there is the grant
        // still held (a child before it can never come).
        if (auto g = recalled(name, owner, token)) {
            auto n = ctx_.get(g->path);
            if (!n) return failed(n.error());
            if (*n && (*n)->stat.ephemeralOwner == ctx_.zk().id()) return term_of(name, owner, g->token);
            if (!*n) {
                forget(name);
                return held_by(lock_of(name), coord::errc::lease_expired, 0);
            }
        }
        auto floor = ctx_.lease_floor();
        if (!floor) return failed(floor.error());
        auto h = holder(lock_of(name));
        if (!h) return failed(h.error());
        const fence_token held = *h ? ctx_t::token_of(*floor, (*h)->stat.czxid) : 0;
        if (*h && (*h)->data == owner && (*h)->stat.ephemeralOwner == ctx_.zk().id() && (token == 0 || held == token))
            return term_of(name, owner, held);
        return held_by(lock_of(name), coord::errc::not_lease_holder, 0);
    }

    result<void, lease_error> lease_release(std::string_view name, std::string_view owner, fence_token token) {
        auto floor = ctx_.lease_floor();
        if (!floor) return unexpected(failed(floor.error()).error());
        const std::string dir = lock_of(name);
        auto h = holder(dir);
        if (!h) return unexpected(failed(h.error()).error());
        if (!*h || (*h)->data != owner || (token != 0 && ctx_t::token_of(*floor, (*h)->stat.czxid) != token))
            return unexpected(held_by(dir, coord::errc::not_lease_holder, 0).error());
        auto d = ctx_.del((*h)->path, (*h)->stat.version);
        if (!d) return unexpected(failed(d.error()).error());
        if (d->rc != ZOK) return unexpected(held_by(dir, coord::errc::not_lease_holder, 0).error());
        forget(name);
        return {};
    }

    result<std::optional<lease>> lease_read(std::string_view name) {
        auto floor = ctx_.lease_floor();
        if (!floor) return unexpected(floor.error());
        auto h = holder(lock_of(name));
        if (!h) return unexpected(h.error());
        if (!*h) return std::optional<lease>{};
        return std::optional<lease>{*term_of(name, (*h)->who(), ctx_t::token_of(*floor, (*h)->stat.czxid))};
    }

    // lease_queue_store ------------------------------------------------------

    /// A place at the back of the line: a child of this session. The ticket
    /// is its sequence.
    result<std::uint64_t> lease_enqueue(std::string_view name, std::string_view who, std::chrono::nanoseconds) {
        auto me = contend(lock_of(name), who);
        if (!me) return unexpected(me.error());
        return me->sequence;
    }

    /// The recipe's rule: the place holds when no child of the line has a
    /// lower sequence; else lease_held with how many wait ahead.
    result<lease, lease_error> lease_acquire_queued(std::string_view name, std::string_view owner, std::chrono::nanoseconds,
                                                    std::uint64_t ticket, std::chrono::nanoseconds) {
        auto floor = ctx_.lease_floor();
        if (!floor) return failed(floor.error());
        const std::string dir = lock_of(name);
        auto l = line(dir);
        if (!l) return failed(l.error());
        const auto at = std::find_if(l->begin(), l->end(), [&](const contender& c) { return c.sequence == ticket; });
        if (at == l->end()) return held_by(dir, coord::errc::wait_place_lost, 0);
        auto n = ctx_.get(dir + "/" + at->child);
        if (!n) return failed(n.error());
        if (!*n || (*n)->data != owner || (*n)->stat.ephemeralOwner != ctx_.zk().id())
            return held_by(dir, coord::errc::wait_place_lost, 0);
        if (at == l->begin()) {
            const auto token = ctx_t::token_of(*floor, (*n)->stat.czxid);
            remember(name, grant{std::string(owner), dir + "/" + at->child, token});
            return term_of(name, owner, token);
        }
        return held_by(dir, coord::errc::lease_held, static_cast<std::size_t>(at - l->begin()) - 1);
    }

    /// Leaves the line: the place's child deleted (a place that became this
    /// store object's grant stays held).
    result<void> lease_dequeue(std::string_view name, std::uint64_t ticket) {
        const std::string dir = lock_of(name);
        auto l = line(dir);
        if (!l) return unexpected(l.error());
        for (const auto& c : *l)
            if (c.sequence == ticket) {
                if (granted_path(dir + "/" + c.child)) return {};
                auto d = ctx_.del(dir + "/" + c.child, -1);
                if (!d) return unexpected(d.error());
            }
        return {};
    }

    /// The waiters: every child after the holder's, in sequence order, each
    /// place lasting as long as its session (reported as the session
    /// timeout from now: the ensemble does not tell another session's end).
    result<std::vector<lease_waiter>> lease_queue_read(std::string_view name) {
        const std::string dir = lock_of(name);
        auto l = line(dir);
        if (!l) return unexpected(l.error());
        std::vector<lease_waiter> out;
        for (std::size_t i = 1; i < l->size(); ++i) {
            auto n = ctx_.get(dir + "/" + (*l)[i].child);
            if (!n) return unexpected(n.error());
            if (!*n) continue;  // gone since
            const std::string who = (*n)->data.empty() ? (*l)[i].child : (*n)->data;
            out.push_back(lease_waiter{(*l)[i].sequence, who, std::chrono::nanoseconds{now_ns() + session_term()}});
        }
        return out;
    }

    /// A waiter's wait: a watch on the child just before its place (read
    /// again at each wait). No child before it, or that child already gone:
    /// returns at once (the place may hold now).
    class waiting {
    public:
        waiting(session_lease_adapter& a, std::string dir, std::uint64_t ticket) : a_(a), dir_(std::move(dir)), ticket_(ticket) {}
        void wait(std::size_t, std::chrono::steady_clock::time_point until) {
            auto l = a_.line(dir_);
            if (!l) return detail::watchless_pause(until);
            const contender* before = nullptr;
            for (const auto& c : *l) {
                if (c.sequence >= ticket_) break;
                before = &c;
            }
            if (!before) return;
            const std::string p = dir_ + "/" + before->child;
            auto flag = a_.ctx_.watch(p);
            if (!flag) return detail::watchless_pause(until);
            auto there = a_.ctx_.get(p);  // armed on a child already deleted: do not wait for it
            if (!there || !*there) return;
            std::unique_lock lk((*flag)->mutex);
            (*flag)->cv.wait_until(lk, until, [&] { return (*flag)->fired; });
        }

    private:
        session_lease_adapter& a_;
        std::string dir_;
        std::uint64_t ticket_;
    };
    waiting lease_waiting(std::string_view name, std::uint64_t ticket) { return waiting(*this, lock_of(name), ticket); }

private:
    // A contender of a line: its child's name and sequence.
    struct contender {
        std::string child;
        std::uint64_t sequence = 0;
    };
    // A child read: its path, data and stat.
    struct child_node {
        std::string path;
        std::string data;
        Stat stat{};
        std::string who() const { return data.empty() ? path.substr(path.rfind('/') + 1) : data; }
    };
    // This store object's grants, by name.
    struct grant {
        std::string owner;
        std::string path;
        fence_token token = 0;
    };
    // A child created: its name, sequence and creation zxid.
    struct created {
        std::string child;
        std::uint64_t sequence = 0;
        std::int64_t czxid = 0;
    };

    /// The lock node of `name`: ROOT/lock/NAME, '%' and '/' written %25 and
    /// %2F ("." and ".." as %2E and %2E%2E: no node may be named so).
    std::string lock_of(std::string_view name) const {
        std::string n;
        for (const char c : name) {
            if (c == '%') n += "%25";
            else if (c == '/') n += "%2F";
            else n += c;
        }
        if (n == ".") n = "%2E";
        else if (n == "..") n = "%2E%2E";
        return ctx_.path("lock") + "/" + n;
    }


    /// The line: the contenders under `dir`, lowest sequence first.
    result<std::vector<contender>> line(const std::string& dir) {
        auto names = ctx_.children(dir);
        if (!names) return unexpected(names.error());
        std::vector<contender> out;
        for (auto& n : *names)
            if (auto s = detail::sequence_of(n)) out.push_back(contender{std::move(n), *s});
        std::sort(out.begin(), out.end(), [](const contender& a, const contender& b) { return a.sequence < b.sequence; });
        return out;
    }

    /// The line's holder, read (nullopt: nobody; a holder deleted between
    /// the two reads: the next is read).
    result<std::optional<child_node>> holder(const std::string& dir) {
        for (int tries = 0; tries < 8; ++tries) {
            auto l = line(dir);
            if (!l) return unexpected(l.error());
            if (l->empty()) return std::optional<child_node>{};
            const std::string p = dir + "/" + l->front().child;
            auto n = ctx_.get(p);
            if (!n) return unexpected(n.error());
            if (*n) return std::optional<child_node>{child_node{p, (*n)->data, (*n)->stat}};
        }
        return unexpected(detail::contention("lease read"));
    }

    /// A new child of `dir` for `owner`: `_c_<id>-lock-` and ZooKeeper's
    /// sequence, ephemeral. The lock node (and ROOT/lock) made the first
    /// time, never the root: a root that is gone is the store's state gone.
    /// A lost answer: the child is looked up by the attempt's id.
    result<created> contend(const std::string& dir, std::string_view owner) {
        const std::string prefix = "_c_" + attempt_id() + "-lock-";
        const std::string p = dir + "/" + prefix;
        for (int attempt = 0; attempt < 2; ++attempt) {
            auto r = ctx_.create_raw(p, std::string(owner), ZOO_EPHEMERAL | ZOO_SEQUENCE);
            if (!r) {
                if (r.error() != coord::condition::outcome_unknown) return unexpected(r.error());
                auto names = ctx_.children(dir);  // the create may have landed: its child has the attempt's id
                if (!names) return unexpected(r.error());
                for (const auto& n : *names)
                    if (n.rfind(prefix, 0) == 0)
                        if (auto s = detail::sequence_of(n))
                            if (auto node = ctx_.get(dir + "/" + n); node && *node)
                                return created{n, *s, (*node)->stat.czxid};
                return unexpected(r.error());
            }
            if (r->rc == ZOK) {
                const std::string child = r->path.substr(r->path.rfind('/') + 1);
                auto s = detail::sequence_of(child);
                if (!s) return unexpected(detail::bad("a sequential node without a sequence: " + r->path));
                return created{child, *s, r->stat.czxid};
            }
            if (r->rc == ZNONODE && attempt == 0) {  // the lock node, the first time
                if (auto c = ctx_.create_or_exists(ctx_.path("lock"), "", 0); !c) return unexpected(c.error());
                if (auto c = ctx_.create_or_exists(dir, "", 0); !c) return unexpected(c.error());
                continue;
            }
            return unexpected(session::failure(r->rc, true));
        }
        return unexpected(detail::bad("lease acquire: the lock node is missing after it was made"));
    }

    /// A random UUID (version 4 form), as Curator names an attempt.
    static std::string attempt_id() {
        static constexpr char hex[] = "0123456789abcdef";
        coord::os_random rng;
        const std::uint64_t a = rng.next_u64(), b = rng.next_u64();
        std::string out;
        for (int i = 0; i < 32; ++i) {
            const std::uint64_t w = i < 16 ? a : b;
            int nibble = static_cast<int>((w >> ((15 - i % 16) * 4)) & 15);
            if (i == 12) nibble = 4;
            if (i == 16) nibble = 8 | (nibble & 3);
            if (i == 8 || i == 12 || i == 16 || i == 20) out += '-';
            out += hex[nibble];
        }
        return out;
    }

    void remember(std::string_view name, grant g) {
        std::lock_guard lk(mutex_);
        made_[std::string(name)] = std::move(g);
    }
    std::optional<grant> recalled(std::string_view name, std::string_view owner, fence_token token) {
        std::lock_guard lk(mutex_);
        auto it = made_.find(name);
        if (it == made_.end() || it->second.owner != owner || (token != 0 && it->second.token != token)) return std::nullopt;
        return it->second;
    }
    void forget(std::string_view name) {
        std::lock_guard lk(mutex_);
        if (auto it = made_.find(name); it != made_.end()) made_.erase(it);
    }
    bool granted_path(const std::string& path) {
        std::lock_guard lk(mutex_);
        return std::any_of(made_.begin(), made_.end(), [&](const auto& m) { return m.second.path == path; });
    }

    std::int64_t session_term() {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(ctx_.zk().negotiated_timeout()).count();
    }
    static std::int64_t now_ns() {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    }

    // The grant as this session holds it: the session timeout as its term,
    // ending (at the latest) that long from now on this machine's clock.
    result<lease, lease_error> term_of(std::string_view name, std::string_view owner, fence_token token) {
        const std::chrono::nanoseconds timeout{session_term()};
        return lease{std::string(name), std::string(owner), token, timeout, std::chrono::nanoseconds{now_ns()} + timeout};
    }

    unexpected<lease_error> held_by(const std::string& dir, coord::errc code, std::size_t ahead) {
        lease_error e{coord::make_error_code(code), {}, 0, {}};
        auto h = holder(dir);
        auto floor = ctx_.lease_floor();
        if (h && *h && floor) {
            e.holder = (*h)->who();
            e.token = ctx_t::token_of(*floor, (*h)->stat.czxid);
            e.expires_at = std::chrono::nanoseconds{now_ns() + session_term()};
        }
        e.ahead = ahead;
        e.now = std::chrono::nanoseconds{now_ns()};
        return unexpected(std::move(e));
    }
    static unexpected<lease_error> failed(const coord::error& e) { return unexpected(lease_error{e, {}, 0, {}}); }

    ctx_t& ctx_;
    std::mutex mutex_;
    std::map<std::string, grant, std::less<>> made_;
};

}  // namespace coord::zookeeper
