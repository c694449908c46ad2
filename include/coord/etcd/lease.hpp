// SPDX-License-Identifier: Apache-2.0
// coord/etcd/lease.hpp: lease_store and lease_queue_store on etcd, in the
// layout of etcd's own lock (the concurrency package's Mutex, which
// `etcdctl lock` uses).
//
// A name's line is the keys under PREFIX/lock/NAME/ (NAME with '%' and '/'
// written %25 and %2F), each bound to an etcd lease and named after one
// (its ID in lowercase hex, as the Mutex names its key after its session's
// lease). The key with the lowest create revision holds the lease; every
// other key waits. So `etcdctl lock coord/lock/NAME` (the default prefix)
// and coord exclude each other both ways, and waiters are served in the
// order their keys were created. The fence token is the holder key's create
// revision plus the store's fence floor (context::token_of): etcd's revision
// only grows, over the whole cluster, across member restarts, leader changes
// and compaction, and every key after the holder's was created later, so
// every new holder's token is larger than every earlier one's; a snapshot
// restore takes the revision back, and the recovery (the store initialized
// again with --fence-floor now: this machine's nanoseconds) puts every later
// token above every earlier one (docs/concepts/went-back.md). A
// holder's value is its owner (etcdctl's is empty: the holder is then named
// by its key). When the term ends etcd deletes the key and keeps nothing
// that tells an ended term from a release: a late renew of a grant this
// store object made (and did not release) is told lease_expired when nobody
// holds the name, otherwise not_lease_holder.
//
// The term is etcd's: its leader's lease timer ends it and deletes the holder
// key, never a client's clock. etcd counts whole seconds and has a minimum
// (2 s for etcd 3.4's defaults): the grant asks for the TTL and a quarter
// second (context::reuse_margin), rounded up to whole seconds (etcd raises it
// to its minimum), and reports the term it got. expires_at is this machine's
// clock at the answer plus what etcd said is left (an estimate: the term is
// etcd's).
//
// acquire (not waiting): one transaction puts the key on condition that the
// line is empty (a compare over the whole prefix: no key there) and that
// the store's identity key is the one this store object knows. It takes no
// place in line: with waiters in line it is refused, as the first of them
// holds by the recipe's rule (the lowest key).
// Round trips: acquire 2 (a lease for the term, then the transaction: etcd
// grants a lease only on its own, before a key can carry it), or 1 with a
// spare. A store object keeps the leases of the grants it released, keyless,
// as spares (at most `max_spares`): the next acquire with the same whole
// seconds takes one. A spare whose term began less than the margin ago still
// has the asked TTL left and serves as it is (the grant reports no later end
// than from when the spare was asked for, measured on this machine's steady
// clock before the request went out); an older one is renewed by a keepalive
// first. A spare is only ever a lease with no key: released by a
// transaction that deleted its holder key, or refused before any key took it;
// if etcd no longer has it (revoked by another client, or this process paused
// past its term) the put is refused and the acquire takes a new lease.
// A refusal reads the holder and its time to live afterwards (the hot
// transactions carry nothing in their failure branch: etcd is slower over
// one that does; see fence.hpp), so a refused acquire is 3 round trips with
// a spare (the lease stays a spare). A store object remembers the grants it
// made: renewing one of them is 1 round trip (a keepalive of the grant's own
// lease, which no other grant shares) and releasing it 1 (a transaction that
// compares the key's create revision with the token, which names the grant,
// and deletes it; the lease becomes a spare). Otherwise (another process's
// grant, a lease gone): renew 2 (the holder read; the keepalive) or 4 with a
// new TTL (a new lease swapped in by a transaction comparing the holder's
// create revision and lease, the old one revoked); release 3 (the holder
// read and its owner checked; its deletion on condition of its create
// revision; its lease revoked); read 2.
//
// The waiting acquire (lease_queue_store): a waiter's place is its key,
// bound to a lease of the place's TTL (enqueue: 2 round trips; its ticket
// is the key's create revision). A queued acquire reads, in one
// transaction, the keys created before the place (the first three) and the
// place itself: keys before it, the place's lease is renewed
// (a keepalive) and the acquire refused with how many wait ahead (2 round
// trips, 3 with the holder's time to live); none, it holds by the recipe's
// rule, and a transaction moves the key to a lease for the term (its create
// revision, the token, stays), and the place's lease is revoked (3 or 4
// round trips). A waiter watches only the key just before its own, for its
// deletion (etcd leaves puts out of that watch): a release or an ended term
// wakes the next waiter alone, whatever the number of waiters (herd-free;
// tests/etcd/etcd_lock_test.cpp counts etcd's events). A waiter that died
// blocks the line until its place's lease ends.
// Spares end with their term when nobody reuses them (etcd's timer).
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "coord/etcd/context.hpp"
#include "coord/rules/lease.hpp"
#include "coord/lease.hpp"

namespace coord::etcd {

template <class Clock>
class lease_adapter {
    using ctx_t = detail::context<Clock>;

public:
    explicit lease_adapter(ctx_t& ctx) noexcept : ctx_(ctx) {}

    result<lease, lease_error> lease_acquire(std::string_view name, std::string_view owner, std::chrono::nanoseconds ttl) {
        if (auto e = ctx_.expire_due(); !e) return failed(e.error());
        const std::int64_t seconds = ctx_t::grant_seconds(ttl);
        const std::string line = line_of(name);
        auto id = ctx_.identity();
        if (!id) return failed(id.error());
        result<detail::txn_answer> r = unexpected(detail::bad("lease acquire: no attempt"));
        lease_got g;
        std::string key;
        // A spare taken without a renewal may have ended after all (this
        // process paused, or it was revoked): etcd then refuses the put and
        // the acquire goes on with a lease of its own.
        for (bool fresh = false;; fresh = true) {
            auto got = fresh ? fresh_lease(ttl) : lease_for(ttl, seconds);
            if (!got) return failed(got.error());
            g = *got;
            key = key_of(line, g.held.id);
            r = ctx_.txn({detail::created_in(line, detail::prefix_end(line), "EQUAL", 0), ctx_.identity_is(ctx_.key(), *id)},
                         {detail::put(key, owner, g.held.id)}, {}, true);
            if (r || fresh || !g.unrenewed || r.error().detail().find("lease not found") == std::string::npos) break;
        }
        if (!r) {
            (void)ctx_.revoke(g.held.id);  // the answer was lost: the key may carry it
            return failed(r.error());
        }
        if (r->succeeded) {
            const fence_token token = ctx_.token_of(r->revision);
            remember(name, grant_made{std::string(owner), token, seconds, g.held, key});
            return lease{std::string(name), std::string(owner), token, std::chrono::nanoseconds{g.term.ttl_ns},
                         std::chrono::nanoseconds{g.term.expires_ns}};
        }
        keep_spare(seconds, g.held);  // no key took it
        return refusal_reading(coord::errc::lease_held, line);
    }

    result<lease, lease_error> lease_renew(std::string_view name, std::string_view owner, fence_token token,
                                           std::chrono::nanoseconds ttl) {
        if (auto e = ctx_.expire_due(); !e) return failed(e.error());
        if (auto id = ctx_.identity(); !id) return failed(id.error());  // tokens rest on its floor
        // This store object's own grant, for its term: a keepalive of the
        // grant's own lease (1 round trip). Gone: ask etcd what happened.
        if (auto mine = recalled(name, owner, token); mine && ttl.count() <= 0) {
            const auto sent = std::chrono::steady_clock::now();
            auto k = ctx_.keepalive(mine->held.id, ttl);
            if (!k) return failed(k.error());
            if (*k) {
                renewed(name, lease_held{mine->held.id, sent, (*k)->ttl_ns});
                return lease{std::string(name), std::string(owner), mine->token, std::chrono::nanoseconds{(*k)->ttl_ns},
                             std::chrono::nanoseconds{(*k)->expires_ns}};
            }
        }
        auto first = holder_of(line_of(name));
        if (!first) return failed(first.error());
        const auto& h = *first;
        const bool holds = h && h->value == owner && (token == 0 || ctx_.token_of(h->create_revision) == token);
        if (!holds) {
            // A grant this store object made and has not released, and no
            // holder: its term ended. (Another process's grant whose key is
            // gone: etcd keeps nothing that tells an ended term from a
            // release, so not_lease_holder.)
            const bool ours = !h && recalled(name, owner, token).has_value();
            return refusal(ours ? coord::errc::lease_expired : coord::errc::not_lease_holder, h);
        }
        const fence_token mine = ctx_.token_of(h->create_revision);
        const bool same_term = ttl.count() <= 0 || ctx_t::grant_seconds(ttl) == current_seconds(h->lease);
        if (same_term || ctx_t::test_clock) {
            // The keepalive acts on this grant's own lease: no one else's grant shares it.
            auto k = ctx_.keepalive(h->lease, ttl);
            if (!k) return failed(k.error());
            if (!*k) return refusal(coord::errc::lease_expired, std::nullopt);
            return lease{std::string(name), std::string(owner), mine, std::chrono::nanoseconds{(*k)->ttl_ns},
                         std::chrono::nanoseconds{(*k)->expires_ns}};
        }
        // A new TTL: a new lease swapped in while the holder key is still this
        // grant's (a put keeps the key's create revision: the token stays).
        auto fresh = fresh_lease(ttl);
        if (!fresh) return failed(fresh.error());
        const std::int64_t id = fresh->held.id;
        const detail::term t = fresh->term;
        auto s = ctx_.txn({detail::create_is(h->key, h->create_revision), detail::lease_is(h->key, h->lease)},
                          {detail::put(h->key, h->value, id)}, {detail::get(h->key)}, true);
        if (!s) {
            (void)ctx_.revoke(id);
            return failed(s.error());
        }
        if (!s->succeeded) {
            (void)ctx_.revoke(id);
            return refusal(coord::errc::lease_expired, s->ranges.empty() ? std::nullopt : s->ranges[0]);
        }
        (void)ctx_.revoke(h->lease);
        remember(name, grant_made{std::string(owner), mine, ctx_t::grant_seconds(ttl), fresh->held, h->key});
        return lease{std::string(name), std::string(owner), mine, std::chrono::nanoseconds{t.ttl_ns},
                     std::chrono::nanoseconds{t.expires_ns}};
    }

    result<void, lease_error> lease_release(std::string_view name, std::string_view owner, fence_token token) {
        if (auto e = ctx_.expire_due(); !e) return unexpected(failed(e.error()).error());
        if (auto id = ctx_.identity(); !id) return unexpected(failed(id.error()).error());
        const auto mine = recalled(name, owner, token);
        if (mine) forget(name);
        const std::string line = line_of(name);
        // This store object's own grant, by its token: the key's create
        // revision is the grant (one transaction made it, with this owner),
        // so comparing it is enough, and its lease is known. Otherwise the
        // holder is read, its owner (and the token, when given) checked, and
        // it is deleted on condition of the create revision read (the same
        // grant: a renewal keeps its value).
        std::optional<detail::kv> h;
        if (!mine || token == 0) {
            auto first = holder_of(line);
            if (!first) return unexpected(failed(first.error()).error());
            h = *first;
            if (!h || h->value != owner || (token != 0 && ctx_.token_of(h->create_revision) != token))
                return unexpected(refusal(coord::errc::not_lease_holder, h).error());
        }
        const std::string key = h ? h->key : mine->key;
        const std::int64_t created = h ? h->create_revision : ctx_.revision_of(token);
        auto r = ctx_.txn({detail::create_is(key, created)}, {detail::del(key)}, {}, true);
        if (!r) return unexpected(failed(r.error()).error());
        if (!r->succeeded) return unexpected(refusal_reading(coord::errc::not_lease_holder, line).error());
        // The key is gone, its lease keyless: this store object's own grant's
        // lease is kept as a spare; another's is revoked.
        const std::int64_t id = h ? h->lease : mine->held.id;
        if (mine && mine->held.id == id) keep_spare(mine->seconds, mine->held);
        else if (id != 0) (void)ctx_.revoke(id);
        return {};
    }

    result<std::optional<lease>> lease_read(std::string_view name) {
        if (auto e = ctx_.expire_due(); !e) return unexpected(e.error());
        if (auto id = ctx_.identity(); !id) return unexpected(id.error());
        // The key and its lease's time are two reads. A waiter whose place
        // came first moves its key from the place's lease to its term's
        // (same key, same create revision: the same grant) and revokes the
        // place's lease, so a lease found gone between the two reads is
        // checked against the key again: moved or replaced, read once more;
        // the same key still on it, an ended term etcd has not deleted yet.
        const std::string line = line_of(name);
        auto first = holder_of(line);
        for (int tries = 0;; ++tries) {
            if (!first) return unexpected(first.error());
            if (!*first) return std::optional<lease>{};
            const auto& h = **first;
            auto t = ctx_.remaining(h.lease);
            if (!t) return unexpected(t.error());
            if (*t)
                return std::optional<lease>{lease{std::string(name), owner_of(h), ctx_.token_of(h.create_revision),
                                                  std::chrono::nanoseconds{(*t)->ttl_ns},
                                                  std::chrono::nanoseconds{(*t)->expires_ns}}};
            auto again = holder_of(line);
            if (again && *again && (*again)->mod_revision == h.mod_revision && (*again)->key == h.key)
                return std::optional<lease>{};
            if (tries == 8) return std::optional<lease>{};  // the line kept changing under the reads
            first = std::move(again);
        }
    }

    // lease_queue_store ------------------------------------------------------

    /// A place at the back of the line: a key under a lease of `place_ttl`.
    /// The ticket is the key's create revision.
    result<std::uint64_t> lease_enqueue(std::string_view name, std::string_view who, std::chrono::nanoseconds place_ttl) {
        if (auto e = ctx_.expire_due(); !e) return unexpected(e.error());
        auto id = ctx_.identity();
        if (!id) return unexpected(id.error());
        auto g = fresh_lease(place_ttl);
        if (!g) return unexpected(g.error());
        const std::string key = key_of(line_of(name), g->held.id);
        auto r = ctx_.txn({detail::create_is(key, 0), ctx_.identity_is(ctx_.key(), *id)}, {detail::put(key, who, g->held.id)},
                          {}, true);
        if (!r || !r->succeeded) {
            (void)ctx_.revoke(g->held.id);  // a lost answer: the key may carry it, and goes with it
            if (!r) return unexpected(r.error());
            if (auto bad = ctx_.identity_changed()) return unexpected(*bad);
            return unexpected(detail::bad("lease enqueue: a new lease's key was there already"));
        }
        return static_cast<std::uint64_t>(r->revision);
    }

    /// The rule of lease_queue_rule::acquire in the recipe's terms: the place
    /// holds when no key in the line was created before it.
    result<lease, lease_error> lease_acquire_queued(std::string_view name, std::string_view owner, std::chrono::nanoseconds ttl,
                                                    std::uint64_t ticket, std::chrono::nanoseconds place_ttl) {
        if (auto e = ctx_.expire_due(); !e) return failed(e.error());
        auto id = ctx_.identity();
        if (!id) return failed(id.error());
        const std::string line = line_of(name), end = detail::prefix_end(line);
        const auto created = static_cast<std::int64_t>(ticket);
        // The keys created before the place, first first (three at most:
        // etcd counts a range before it applies the create-revision filter,
        // so `ahead` is 0, 1 or 2 for two or more, as PostgreSQL counts).
        detail::range_options before{end, true, false, 3}, place{end};
        before.max_create = created - 1;
        place.min_create = place.max_create = created;
        if (created <= 0) return refusal(coord::errc::wait_place_lost, std::nullopt);
        auto r = ctx_.txn({}, {detail::range(line, before), detail::range(line, place), detail::get(ctx_.key().identity())}, {},
                          false);
        if (!r) return failed(r.error());
        if (r->ranges.size() != 3) return failed(detail::bad("lease acquire: three ranges expected"));
        if (auto bad = ctx_.identity_problem(r->ranges[2])) return failed(*bad);
        const auto& mine = r->ranges[1];
        if (!mine || mine->value != owner) return refusal(coord::errc::wait_place_lost, r->ranges[0]);
        if (const std::size_t n = r->lists[0].size(); n > 0) {  // the holder, and who waits ahead
            auto k = ctx_.keepalive(mine->lease, place_ttl);
            if (!k) return failed(k.error());
            if (!*k) return refusal(coord::errc::wait_place_lost, r->ranges[0]);
            auto e = refusal(coord::errc::lease_held, r->ranges[0]);
            e.error().ahead = n - 1;
            return e;
        }
        // First: the place holds. Its key moves to a lease for the term (a
        // put keeps its create revision, the token), on condition that it is
        // still the place (its lease).
        const std::int64_t seconds = ctx_t::grant_seconds(ttl);
        result<detail::txn_answer> s = unexpected(detail::bad("lease acquire: no attempt"));
        lease_got g;
        for (bool fresh = false;; fresh = true) {
            auto got = fresh ? fresh_lease(ttl) : lease_for(ttl, seconds);
            if (!got) return failed(got.error());
            g = *got;
            s = ctx_.txn({detail::create_is(mine->key, created), detail::lease_is(mine->key, mine->lease),
                          ctx_.identity_is(ctx_.key(), *id)},
                         {detail::put(mine->key, owner, g.held.id)}, {}, true);
            if (s || fresh || !g.unrenewed || s.error().detail().find("lease not found") == std::string::npos) break;
        }
        if (!s) {
            (void)ctx_.revoke(g.held.id);  // the answer was lost: the key may carry it (and goes with it)
            return failed(s.error());
        }
        if (!s->succeeded) {
            keep_spare(seconds, g.held);
            if (auto bad = ctx_.identity_changed()) return failed(*bad);
            return refusal(coord::errc::wait_place_lost, std::nullopt);
        }
        (void)ctx_.revoke(mine->lease);  // the place's lease, keyless now
        const fence_token token = ctx_.token_of(created);
        remember(name, grant_made{std::string(owner), token, seconds, g.held, mine->key});
        return lease{std::string(name), std::string(owner), token, std::chrono::nanoseconds{g.term.ttl_ns},
                     std::chrono::nanoseconds{g.term.expires_ns}};
    }

    /// Leaves the line: the place's lease revoked (its key goes with it; a
    /// key that already holds is on another lease and stays).
    result<void> lease_dequeue(std::string_view name, std::uint64_t ticket) {
        auto p = place_of(line_of(name), ticket);
        if (!p) return unexpected(p.error());
        if (!*p || granted_key((*p)->key)) return {};  // a place that became this store object's grant stays held
        if (auto r = ctx_.revoke((*p)->lease); !r) return r;
        return {};
    }

    /// The waiters: every key after the holder's, in create order, with
    /// when each place's lease ends (1 round trip and one per waiter).
    result<std::vector<lease_waiter>> lease_queue_read(std::string_view name) {
        if (auto e = ctx_.expire_due(); !e) return unexpected(e.error());
        const std::string line = line_of(name);
        auto r = ctx_.txn({}, {detail::range(line, detail::range_options{detail::prefix_end(line), true})}, {}, false);
        if (!r) return unexpected(r.error());
        std::vector<lease_waiter> out;
        if (r->lists.empty()) return unexpected(detail::bad("lease waiters: one range expected"));
        const auto& keys = r->lists[0];
        for (std::size_t i = 1; i < keys.size(); ++i) {
            auto t = ctx_.remaining(keys[i].lease);
            if (!t) return unexpected(t.error());
            if (!*t) continue;  // ended: etcd deletes it
            out.push_back(lease_waiter{static_cast<std::uint64_t>(keys[i].create_revision), owner_of(keys[i]),
                                       std::chrono::nanoseconds{(*t)->expires_ns}});
        }
        return out;
    }

    /// A waiter's wait: a watch on the key just before its place (read
    /// again at each wait, with the revision of that read: no deletion
    /// after it is missed), for its deletion only, on a connection of its
    /// own. No key before it: returns at once (the place may hold now).
    class waiting {
    public:
        waiting(ctx_t& ctx, std::string line, std::uint64_t ticket) : ctx_(ctx), line_(std::move(line)), ticket_(ticket) {}
        void wait(std::size_t, std::chrono::steady_clock::time_point until) {
            detail::range_options o{detail::prefix_end(line_), true, true, 1};
            o.max_create = static_cast<std::int64_t>(ticket_) - 1;
            auto r = ctx_.txn({}, {detail::range(line_, o)}, {}, false);
            if (!r || r->ranges.empty()) return pause(until);
            if (!r->ranges[0]) return;  // nobody before: ask again
            switch (ctx_.calls().watch(connection_, r->ranges[0]->key, r->revision + 1, until, {}, true)) {
            case pool::watched::until:
            case pool::watched::event: return;
            case pool::watched::other: return pause(until);  // not at once (a member that keeps refusing)
            }
        }

    private:
        static void pause(std::chrono::steady_clock::time_point until) {
            std::this_thread::sleep_until(std::min(until, std::chrono::steady_clock::now() + std::chrono::milliseconds{100}));
        }
        ctx_t& ctx_;
        std::string line_;
        std::uint64_t ticket_;
        detail::connection connection_;
    };
    waiting lease_waiting(std::string_view name, std::uint64_t ticket) { return waiting(ctx_, line_of(name), ticket); }

    /// lease_watch_store: an etcd watch on the name's line (a grant, a
    /// release, an ended term, a waiter coming or going), from the revision
    /// read when it was armed, on a connection of its own. The first wait
    /// reads that revision; after each event the next wait reads it again.
    class watching {
    public:
        watching(ctx_t& ctx, std::string line) : ctx_(ctx), line_(std::move(line)) {}
        /// True: read the lease again (just armed, or the line changed);
        /// false: `until` came first.
        bool wait(std::chrono::steady_clock::time_point until) {
            if (revision_ == 0) {
                auto r = ctx_.txn({}, {detail::get(line_)}, {}, false);
                if (!r) {
                    std::this_thread::sleep_until(until);  // not armed: the caller's bound is the poll
                    return false;
                }
                revision_ = r->revision;
                return true;
            }
            switch (ctx_.calls().watch(connection_, line_, revision_ + 1, until, detail::prefix_end(line_))) {
            case pool::watched::until: return false;
            case pool::watched::event: break;
            case pool::watched::other:  // armed again at the next wait; not at once (a member that keeps refusing)
                std::this_thread::sleep_until(std::min(until, std::chrono::steady_clock::now() + std::chrono::milliseconds{100}));
                break;
            }
            revision_ = 0;
            return true;
        }

    private:
        ctx_t& ctx_;
        std::string line_;
        std::int64_t revision_ = 0;
        detail::connection connection_;
    };
    watching lease_watching(std::string_view name) { return watching(ctx_, line_of(name)); }

private:
    // A lease of this store object's: its ID, etcd's TTL for it at the last
    // answer, and when that was asked (this machine's steady clock, read
    // before the request went out: etcd's timer started after it, so the
    // lease lasts at least until then + that TTL).
    struct lease_held {
        std::int64_t id = 0;
        std::chrono::steady_clock::time_point asked{};
        std::int64_t ttl_ns = 0;
    };
    // A lease for a new grant: the lease, the term to report, and whether it
    // is a spare taken without a renewal (etcd may no longer have it).
    struct lease_got {
        lease_held held;
        detail::term term;
        bool unrenewed = false;
    };
    // The grants this store object made, by name: their keys and leases, so
    // that a renew or release of one's own grant acts on them directly.
    struct grant_made {
        std::string owner;
        fence_token token = 0;
        std::int64_t seconds = 0;  ///< the whole seconds asked of etcd (grant_seconds)
        lease_held held;
        std::string key;
    };
    void remember(std::string_view name, grant_made g) {
        std::lock_guard lk(mutex_);
        made_[std::string(name)] = std::move(g);
    }
    void renewed(std::string_view name, const lease_held& held) {
        std::lock_guard lk(mutex_);
        if (auto it = made_.find(name); it != made_.end()) it->second.held = held;
    }

    // Spare leases: keyless etcd leases of this store object, by the whole
    // seconds they were granted for. etcd renews a lease for the TTL it was
    // granted, so only an acquire asking the same seconds reuses one; and
    // since grants are at least reuse_margin longer than asked, a spare
    // whose term started less than that margin ago still has the asked TTL
    // left and serves without a renewal (its term as etcd counts it: no
    // longer than from when it was asked).
    static constexpr std::size_t max_spares = 16;
    void keep_spare(std::int64_t seconds, const lease_held& held) {
        {
            std::lock_guard lk(mutex_);
            if (spare_count_ < max_spares) {
                spares_[seconds].push_back(held);
                ++spare_count_;
                return;
            }
        }
        (void)ctx_.revoke(held.id);
    }
    std::optional<lease_held> take_spare(std::int64_t seconds) {
        std::lock_guard lk(mutex_);
        auto it = spares_.find(seconds);
        if (it == spares_.end() || it->second.empty()) return std::nullopt;
        const lease_held l = it->second.back();
        it->second.pop_back();
        --spare_count_;
        return l;
    }
    // A lease for a new grant's term: a spare with the asked TTL still left,
    // a spare renewed for its full term, or a new one. A spare whose term
    // ended (nobody reused it in time) is dropped.
    result<lease_got> lease_for(std::chrono::nanoseconds ttl, std::int64_t seconds) {
        while (auto l = take_spare(seconds)) {
            if constexpr (!detail::context<Clock>::test_clock) {
                const std::int64_t left =
                    l->ttl_ns - std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - l->asked).count();
                if (left >= ttl.count())
                    return lease_got{*l, detail::term{l->ttl_ns, coord::detail::add_saturated(ctx_.now_ns(), left)}, true};
            }
            const auto asked = std::chrono::steady_clock::now();
            auto k = ctx_.keepalive(l->id, ttl);
            if (!k) return unexpected(k.error());
            if (*k) return lease_got{lease_held{l->id, asked, (*k)->ttl_ns}, **k, false};
        }
        return fresh_lease(ttl);
    }
    result<lease_got> fresh_lease(std::chrono::nanoseconds ttl) {
        const auto asked = std::chrono::steady_clock::now();
        auto g = ctx_.grant(ttl);
        if (!g) return unexpected(g.error());
        return lease_got{lease_held{g->first, asked, g->second.ttl_ns}, g->second, false};
    }
    bool granted_key(const std::string& key) {
        std::lock_guard lk(mutex_);
        for (const auto& [n, g] : made_)
            if (g.key == key) return true;
        return false;
    }
    void forget(std::string_view name) {
        std::lock_guard lk(mutex_);
        if (auto it = made_.find(name); it != made_.end()) made_.erase(it);
    }
    std::optional<grant_made> recalled(std::string_view name, std::string_view owner, fence_token token) {
        std::lock_guard lk(mutex_);
        auto it = made_.find(name);
        if (it == made_.end() || it->second.owner != owner || (token != 0 && it->second.token != token)) return std::nullopt;
        return it->second;
    }

    // The name's line: "PREFIX/lock/NAME/", NAME with '%' and '/' escaped
    // (a name holding a slash would otherwise share another name's line).
    std::string line_of(std::string_view name) const {
        std::string n;
        for (const char c : name) {
            if (c == '%') n += "%25";
            else if (c == '/') n += "%2F";
            else n += c;
        }
        return ctx_.key().of("lock", n) + "/";
    }
    // A key of the line, named after its lease (as etcd's Mutex names it).
    static std::string key_of(const std::string& line, std::int64_t lease) {
        char hex[17];
        auto [p, ec] = std::to_chars(hex, hex + sizeof hex, static_cast<std::uint64_t>(lease), 16);
        return line + std::string(hex, p);
    }
    // Who a key names as its owner: its value, or (etcdctl's lock, whose
    // value is empty) the key itself.
    static std::string owner_of(const detail::kv& k) { return k.value.empty() ? k.key : k.value; }

    // The read of a line's holder: its first key by create revision.
    static std::string first_of(const std::string& line) {
        return detail::range(line, detail::range_options{detail::prefix_end(line), true, false, 1});
    }
    // The line's holder (nullopt: free).
    result<std::optional<detail::kv>> holder_of(const std::string& line) {
        auto r = ctx_.txn({}, {first_of(line)}, {}, false);
        if (!r) return unexpected(r.error());
        return r->ranges.empty() ? std::nullopt : r->ranges[0];
    }
    // The key whose create revision is `ticket` (a place, or the grant it became).
    result<std::optional<detail::kv>> place_of(const std::string& line, std::uint64_t ticket) {
        detail::range_options o{detail::prefix_end(line)};
        o.min_create = o.max_create = static_cast<std::int64_t>(ticket);
        if (o.min_create <= 0) return std::optional<detail::kv>{};
        auto r = ctx_.txn({}, {detail::range(line, o)}, {}, false);
        if (!r) return unexpected(r.error());
        return r->ranges.empty() ? std::nullopt : r->ranges[0];
    }

    std::int64_t current_seconds(std::int64_t id) {
        auto t = ctx_.remaining(id);
        if (!t || !*t) return -1;
        return (*t)->ttl_ns / 1'000'000'000;
    }

    static unexpected<lease_error> failed(const coord::error& e) { return unexpected(lease_error{e, {}, 0, {}}); }

    // A refusal describing the holder of `line` (read now: the hot
    // transactions carry nothing in their failure branch, see fence.hpp).
    unexpected<lease_error> refusal_reading(coord::errc code, const std::string& line) {
        auto r = ctx_.txn({}, {first_of(line), detail::get(ctx_.key().identity())}, {}, false);
        if (r && r->ranges.size() == 2)
            if (auto bad = ctx_.identity_problem(r->ranges[1])) return failed(*bad);
        return refusal(code, r && !r->ranges.empty() ? r->ranges[0] : std::nullopt);
    }
    // A refusal describing the holder `h` (its term from etcd).
    unexpected<lease_error> refusal(coord::errc code, const std::optional<detail::kv>& h) {
        lease_error e{coord::make_error_code(code), {}, 0, {}};
        e.now = std::chrono::nanoseconds{ctx_.now_ns()};
        if (h) {
            auto t = ctx_.remaining(h->lease);
            if (t && *t) {
                e.holder = owner_of(*h);
                e.token = ctx_.token_of(h->create_revision);
                e.expires_at = std::chrono::nanoseconds{(*t)->expires_ns};
            }
        }
        return unexpected(std::move(e));
    }

    ctx_t& ctx_;
    std::mutex mutex_;
    std::map<std::string, grant_made, std::less<>> made_;
    std::map<std::int64_t, std::vector<lease_held>> spares_;
    std::size_t spare_count_ = 0;
};

}  // namespace coord::etcd
