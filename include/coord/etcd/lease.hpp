// SPDX-License-Identifier: Apache-2.0
// coord/etcd/lease.hpp: lease_store on etcd leases.
//
// A grant is an etcd lease and a holder key attached to it
// (PREFIX/lease/NAME/holder, the owner as its value), put in a transaction
// that compares the key's create revision with 0 (nobody holds it) and the
// store's identity key with the one this store object knows. The fence
// token is the holder key's create revision plus the store's fence floor
// (context::token_of): etcd's revision only grows, over the whole cluster,
// across member restarts, leader changes and compaction, so every new
// holder's token is larger than every earlier one's; a snapshot restore
// takes the revision back, and the recovery (the store initialized again
// with --fence-floor now: this machine's nanoseconds) puts every later
// token above every earlier one (README, "When a store goes back"). When the
// term ends etcd deletes the key and keeps nothing that tells an ended term
// from a release: a late renew of a grant this store object made (and did
// not release) is told lease_expired, of another process's grant
// not_lease_holder. (A record of each grant outside the lease would tell
// them apart for every process, at the cost of a second put in every
// acquire: measured, the acquire's transaction 1.25x a one-put transaction
// with it.)
//
// The term is etcd's: its leader's lease timer ends it and deletes the holder
// key, never a client's clock. etcd counts whole seconds and has a minimum
// (2 s for etcd 3.4's defaults): the grant asks for the TTL and a quarter
// second (context::reuse_margin), rounded up to whole seconds (etcd raises it
// to its minimum), and reports the term it got. expires_at is this machine's
// clock at the answer plus what etcd said is left (an estimate: the term is
// etcd's).
//
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
// The acquire's and the release's transactions carry nothing in their
// failure branch (etcd is slower over one that does; see fence.hpp): a
// refusal reads the holder and its time to live afterwards, so a refused
// acquire is 3 round trips with a spare (the lease stays a spare). A store
// object remembers the leases of the grants it made: renewing one of them is
// 1 round trip (a keepalive of the grant's own lease, which no other grant
// shares) and releasing it 1 (a transaction that compares the holder key's
// create revision with the token, which names the grant and so its owner,
// and deletes it; the lease becomes a spare). Otherwise (another process's
// grant, a lease gone): renew 2 (the holder read; the keepalive) or 4 with a
// new TTL (a new lease swapped in by a transaction comparing the holder's
// create revision and lease, the old one revoked); release 2 (owner and
// token compared, the lease read from the deleted key and revoked); read 2;
// a refused release 3.
// Spares end with their term when nobody reuses them (etcd's timer).
#pragma once

#include <algorithm>
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
#include "coord/lease.hpp"

namespace coord::etcd {

template <class Clock>
class lease_adapter {
public:
    explicit lease_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    result<lease, lease_error> lease_acquire(std::string_view name, std::string_view owner, std::chrono::nanoseconds ttl) {
        if (auto e = ctx_.expire_due(); !e) return failed(e.error());
        const std::int64_t seconds = detail::context<Clock>::grant_seconds(ttl);
        const std::string holder = holder_key(name);
        auto id = ctx_.identity();
        if (!id) return failed(id.error());
        result<detail::txn_answer> r = unexpected(detail::bad("lease acquire: no attempt"));
        lease_got g;
        // A spare taken without a renewal may have ended after all (this
        // process paused, or it was revoked): etcd then refuses the put and
        // the acquire goes on with a lease of its own.
        for (bool fresh = false;; fresh = true) {
            auto got = fresh ? fresh_lease(ttl) : lease_for(ttl, seconds);
            if (!got) return failed(got.error());
            g = *got;
            r = ctx_.txn({detail::create_is(holder, 0), ctx_.identity_is(ctx_.key(), *id)}, {detail::put(holder, owner, g.held.id)},
                         {}, true);
            if (r || fresh || !g.unrenewed || r.error().detail().find("lease not found") == std::string::npos) break;
        }
        if (!r) {
            (void)ctx_.revoke(g.held.id);  // the answer was lost: the key may carry it
            return failed(r.error());
        }
        if (r->succeeded) {
            const fence_token token = ctx_.token_of(r->revision);
            remember(name, owner, token, seconds, g.held);
            return lease{std::string(name), std::string(owner), token,
                         std::chrono::nanoseconds{g.term.ttl_ns}, std::chrono::nanoseconds{g.term.expires_ns}};
        }
        keep_spare(seconds, g.held);  // no key took it
        return refusal_reading(coord::errc::lease_held, holder);
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
        const std::string holder = holder_key(name);
        auto r = ctx_.txn({}, {detail::get(holder)}, {}, false);
        if (!r) return failed(r.error());
        if (r->ranges.size() != 1) return failed(detail::bad("lease renew: one range expected"));
        const auto& h = r->ranges[0];
        const bool holds = h && h->value == owner && (token == 0 || ctx_.token_of(h->create_revision) == token);
        if (!holds) {
            // A grant this store object made and has not released, and no
            // holder key: its term ended. (Another process's grant whose key
            // is gone: etcd keeps nothing that tells an ended term from a
            // release, so not_lease_holder.)
            const bool ours = !h && recalled(name, owner, token).has_value();
            return refusal(ours ? coord::errc::lease_expired : coord::errc::not_lease_holder, h);
        }
        const fence_token mine = ctx_.token_of(h->create_revision);
        const bool same_term = ttl.count() <= 0 || detail::context<Clock>::grant_seconds(ttl) == current_seconds(h->lease);
        if (same_term || detail::context<Clock>::test_clock) {
            // The keepalive acts on this grant's own lease: no one else's grant shares it.
            auto k = ctx_.keepalive(h->lease, ttl);
            if (!k) return failed(k.error());
            if (!*k) return refusal(coord::errc::lease_expired, std::nullopt);
            return lease{std::string(name), std::string(owner), mine, std::chrono::nanoseconds{(*k)->ttl_ns},
                         std::chrono::nanoseconds{(*k)->expires_ns}};
        }
        // A new TTL: a new lease swapped in while the holder key is still this grant's.
        auto fresh = fresh_lease(ttl);
        if (!fresh) return failed(fresh.error());
        const std::int64_t id = fresh->held.id;
        const detail::term t = fresh->term;
        auto s = ctx_.txn({detail::create_is(holder, h->create_revision), detail::lease_is(holder, h->lease)},
                          {detail::put(holder, owner, id)}, {detail::get(holder)}, true);
        if (!s) {
            (void)ctx_.revoke(id);
            return failed(s.error());
        }
        if (!s->succeeded) {
            (void)ctx_.revoke(id);
            return refusal(coord::errc::lease_expired, s->ranges.empty() ? std::nullopt : s->ranges[0]);
        }
        (void)ctx_.revoke(h->lease);
        remember(name, owner, mine, detail::context<Clock>::grant_seconds(ttl), fresh->held);
        return lease{std::string(name), std::string(owner), mine, std::chrono::nanoseconds{t.ttl_ns},
                     std::chrono::nanoseconds{t.expires_ns}};
    }

    result<void, lease_error> lease_release(std::string_view name, std::string_view owner, fence_token token) {
        if (auto e = ctx_.expire_due(); !e) return unexpected(failed(e.error()).error());
        if (auto id = ctx_.identity(); !id) return unexpected(failed(id.error()).error());
        const auto mine = recalled(name, owner, token);
        if (mine) forget(name);
        const std::string holder = holder_key(name);
        // This store object's own grant, by its token: the holder key's
        // create revision is the grant (one transaction made it, with this
        // owner), so comparing it is enough, and its lease is known.
        // Otherwise the owner is compared (and the token, when given), and the
        // lease read from the key deleted.
        const bool exact = mine && token != 0;
        std::vector<std::string> compare;
        if (!exact) compare.push_back(detail::value_is(holder, owner));
        if (token != 0) compare.push_back(detail::create_is(holder, ctx_.revision_of(token)));
        auto r = ctx_.txn(compare, {exact ? detail::del(holder) : detail::del_prev(holder)}, {}, true);
        if (!r) return unexpected(failed(r.error()).error());
        if (!r->succeeded) return unexpected(refusal_reading(coord::errc::not_lease_holder, holder).error());
        // The key is gone, its lease keyless: this store object's own grant's
        // lease is kept as a spare; another's is revoked.
        const std::int64_t id = exact ? mine->held.id : !r->ranges.empty() && r->ranges[0] ? r->ranges[0]->lease : 0;
        if (mine && mine->held.id == id) keep_spare(mine->seconds, mine->held);
        else if (id != 0) (void)ctx_.revoke(id);
        return {};
    }

    result<std::optional<lease>> lease_read(std::string_view name) {
        if (auto e = ctx_.expire_due(); !e) return unexpected(e.error());
        if (auto id = ctx_.identity(); !id) return unexpected(id.error());
        auto r = ctx_.txn({}, {detail::get(holder_key(name))}, {}, false);
        if (!r) return unexpected(r.error());
        if (r->ranges.empty() || !r->ranges[0]) return std::optional<lease>{};
        const auto& h = *r->ranges[0];
        auto t = ctx_.remaining(h.lease);
        if (!t) return unexpected(t.error());
        if (!*t) return std::optional<lease>{};
        return std::optional<lease>{lease{std::string(name), h.value, ctx_.token_of(h.create_revision),
                                          std::chrono::nanoseconds{(*t)->ttl_ns}, std::chrono::nanoseconds{(*t)->expires_ns}}};
    }

    /// lease_watch_store: an etcd watch on the name's holder key (put at a
    /// grant, deleted at a release and by etcd when the term ends), from the
    /// revision read when it was armed, on a connection of its own. The
    /// first wait reads that revision; after each event the next wait reads
    /// it again.
    class watching {
    public:
        watching(detail::context<Clock>& ctx, std::string key) : ctx_(ctx), key_(std::move(key)) {}
        /// True: read the lease again (just armed, or the key changed);
        /// false: `until` came first.
        bool wait(std::chrono::steady_clock::time_point until) {
            if (revision_ == 0) {
                auto r = ctx_.txn({}, {detail::get(key_)}, {}, false);
                if (!r) {
                    std::this_thread::sleep_until(until);  // not armed: the caller's bound is the poll
                    return false;
                }
                revision_ = r->revision;
                return true;
            }
            switch (ctx_.calls().watch(connection_, key_, revision_ + 1, until)) {
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
        detail::context<Clock>& ctx_;
        std::string key_;
        std::int64_t revision_ = 0;
        detail::connection connection_;
    };
    watching lease_watching(std::string_view name) { return watching(ctx_, holder_key(name)); }

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
    // The grants this store object made, by name: their leases, so that a
    // renew or release of one's own grant acts on its lease directly.
    struct grant_made {
        std::string owner;
        fence_token token = 0;
        std::int64_t seconds = 0;  ///< the whole seconds asked of etcd (grant_seconds)
        lease_held held;
    };
    void remember(std::string_view name, std::string_view owner, fence_token token, std::int64_t seconds,
                  const lease_held& held) {
        std::lock_guard lk(mutex_);
        made_[std::string(name)] = grant_made{std::string(owner), token, seconds, held};
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

    std::string holder_key(std::string_view name) const { return ctx_.key().of("lease", name, "holder"); }

    std::int64_t current_seconds(std::int64_t id) {
        auto t = ctx_.remaining(id);
        if (!t || !*t) return -1;
        return (*t)->ttl_ns / 1'000'000'000;
    }

    static unexpected<lease_error> failed(const coord::error& e) { return unexpected(lease_error{e, {}, 0, {}}); }

    // A refusal describing the live holder of `holder` (read now: the hot
    // transactions carry nothing in their failure branch, see fence.hpp).
    unexpected<lease_error> refusal_reading(coord::errc code, const std::string& holder) {
        auto r = ctx_.txn({}, {detail::get(holder), detail::get(ctx_.key().identity())}, {}, false);
        if (r && r->ranges.size() == 2)
            if (auto bad = ctx_.identity_problem(r->ranges[1])) return failed(*bad);
        return refusal(code, r && !r->ranges.empty() ? r->ranges[0] : std::nullopt);
    }
    // A refusal describing the live holder `h` (its term from etcd).
    unexpected<lease_error> refusal(coord::errc code, const std::optional<detail::kv>& h) {
        lease_error e{coord::make_error_code(code), {}, 0, {}};
        e.now = std::chrono::nanoseconds{ctx_.now_ns()};
        if (h) {
            auto t = ctx_.remaining(h->lease);
            if (t && *t) {
                e.holder = h->value;
                e.token = ctx_.token_of(h->create_revision);
                e.expires_at = std::chrono::nanoseconds{(*t)->expires_ns};
            }
        }
        return unexpected(std::move(e));
    }

    detail::context<Clock>& ctx_;
    std::mutex mutex_;
    std::map<std::string, grant_made, std::less<>> made_;
    std::map<std::int64_t, std::vector<lease_held>> spares_;
    std::size_t spare_count_ = 0;
};

}  // namespace coord::etcd
