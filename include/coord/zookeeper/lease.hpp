// SPDX-License-Identifier: Apache-2.0
// coord/zookeeper/lease.hpp: the two lease forms on ZooKeeper.
//
// lease_adapter (the store's lease_store): a lease that outlives the process
// that took it, for its TTL, as on every other store. Its record is the
// persistent node ROOT/lease/NAME (held, holder, TTL). Its term starts at
// the node's modification time, which the ensemble stamps when it writes the
// node (its clock, never a client's), and the store's now is the stamp the
// ensemble puts on ROOT/clock when the store writes it. Grants, renewals and
// releases are conditional setData on the version read (compare-and-set),
// read and ruled again on a conflict. The token is the store's fence floor
// plus the zxid of the granting transaction (the node's mzxid after it):
// zxids only grow, across server restarts and leader elections (the epoch is
// their high half), and go back only with a whole ensemble restored from an
// old snapshot, after which the recovery's floor puts every later token
// above every earlier one (context::lease_floor).
// Round trips: acquire 2 (the record; the conditional write), 3 when the
// record shows a holder (the ensemble's now), 1 after this store object's
// own release (it remembers the record and version it wrote); renew 1 or 2
// (the write, whose own stamp judges whether the term was still running: a
// renew that landed after the end is undone and refused as expired);
// release 1 or 2; read 1, 2 when held.
//
// The waiting acquire (lease_queue_store): a waiter's place is a persistent
// sequential child of the record, ROOT/lease/NAME/p-<10-digit sequence>
// (who waits, the place's TTL), its ticket the sequence + 1. A place lapses
// its TTL after the ensemble's stamp on its last write, so a waiter that
// died stops blocking the line; any waiter behind it deletes it then (on
// condition of the version read: a renewal in between keeps it). A queued
// try reads the line, its place, the ensemble's now and the places ahead
// until two live ones; the first live place, with nobody holding, takes
// the lease in one multi-operation: its place deleted and the record
// written, each on condition of the version read. Waiting is a watch: the
// first in line watches the record (a release writes it), every other
// place only the place just before its own, so a release wakes one waiter.
// Round trips: enqueue 1 (2 the first time a name is used), a queued try
// 4 + the places ahead read (at most 2 live; + 1 when the place is renewed,
// once a quarter of its TTL is gone; + 1 for the record when first), a
// wait 2 (the watch armed, the node read) or 3 (the line, when not first),
// dequeue 1, the waiters 2 + one per place.
//
// session_lease_adapter (store.session_bound(), session_lease.hpp): a lease
// bound to this store object's ZooKeeper session, on ZooKeeper's lock
// recipe.
#pragma once

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "coord/detail/backoff.hpp"
#include "coord/lease.hpp"
#include "coord/zookeeper/context.hpp"

namespace coord::zookeeper {

template <class Clock>
class lease_adapter {
public:
    explicit lease_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    result<lease, lease_error> lease_acquire(std::string_view name, std::string_view owner, std::chrono::nanoseconds ttl) {
        const std::string p = ctx_.path("lease", name);
        auto k = recall(name);
        using R = result<lease, lease_error>;
        auto decided = coord::detail::retry_conflicts(coord::detail::conflict_tries, [&](int attempt) -> std::optional<R> {
            if (!k) {
                auto n = read(p);
                if (!n) return R(failed(n.error()));
                k = *n;
            }
            if (k->rec.held) {
                auto now = ctx_.now_ns();
                if (!now) return R(failed(now.error()));
                if (*now < k->expires_ns()) {
                    if (attempt == 0 && recall(name)) {  // what we knew may be old: read it again
                        forget(name);
                        k.reset();
                        return std::nullopt;
                    }
                    return R(refusal(coord::errc::lease_held, *k, *now));
                }
            }
            rec_t next{true, std::string(owner), 0, ttl.count() < 0 ? 0 : ttl.count(), 0};
            auto w = write(p, next, k->version);
            if (!w) return R(failed(w.error()));
            if (w->rc == ZOK) {
                known mine{next, w->stat, k->floor};
                remember(name, mine);
                return R(view(name, mine));
            }
            k.reset();
            return std::nullopt;
        });
        if (decided) return *decided;
        return failed(detail::contention("lease acquire"));
    }

    result<lease, lease_error> lease_renew(std::string_view name, std::string_view owner, fence_token token,
                                           std::chrono::nanoseconds ttl) {
        const std::string p = ctx_.path("lease", name);
        auto k = recall(name);
        using R = result<lease, lease_error>;
        auto decided = coord::detail::retry_conflicts(coord::detail::conflict_tries, [&](int attempt) -> std::optional<R> {
            auto h = held_by(p, name, k, owner, token, attempt);
            if (!h) return R(unexpected(h.error()));
            if (*h == step::read_again) return std::nullopt;
            const std::int64_t ends = k->expires_ns();
            if constexpr (detail::context<Clock>::test_clock) {
                auto now = ctx_.now_ns();
                if (!now) return R(failed(now.error()));
                if (*now >= ends) return R(refusal(coord::errc::lease_expired, *k, *now));
            }
            rec_t next = k->rec;
            next.token = k->token();
            if (ttl.count() > 0) next.ttl_ns = ttl.count();
            auto w = write(p, next, k->stat.version);
            if (!w) return R(failed(w.error()));
            if (w->rc != ZOK) {
                k.reset();
                return std::nullopt;
            }
            known mine{next, w->stat, k->floor};
            if (mine.started_ns() >= ends) {
                // The write landed after the term ended (the ensemble's stamp
                // says so): expiry is final. Undone, if nobody wrote since.
                rec_t undone = next;
                undone.held = false;
                (void)write(p, undone, w->stat.version);
                forget(name);
                return R(refusal(coord::errc::lease_expired, mine, mine.started_ns()));
            }
            remember(name, mine);
            return R(view(name, mine));
        });
        if (decided) return *decided;
        return failed(detail::contention("lease renew"));
    }

    result<void, lease_error> lease_release(std::string_view name, std::string_view owner, fence_token token) {
        const std::string p = ctx_.path("lease", name);
        auto k = recall(name);
        using R = result<void, lease_error>;
        auto decided = coord::detail::retry_conflicts(coord::detail::conflict_tries, [&](int attempt) -> std::optional<R> {
            auto h = held_by(p, name, k, owner, token, attempt);
            if (!h) return R(unexpected(h.error()));
            if (*h == step::read_again) return std::nullopt;
            rec_t next = k->rec;
            next.token = k->token();
            next.held = false;
            next.holder.clear();
            auto w = write(p, next, k->stat.version);
            if (!w) return R(unexpected(failed(w.error()).error()));
            if (w->rc == ZOK) {
                remember(name, known{next, w->stat, k->floor});
                return R();
            }
            k.reset();
            return std::nullopt;
        });
        if (decided) return *decided;
        return unexpected(failed(detail::contention("lease release")).error());
    }

    result<std::optional<lease>> lease_read(std::string_view name) {
        auto n = read(ctx_.path("lease", name));
        if (!n) return unexpected(n.error());
        if (!n->rec.held) return std::optional<lease>{};
        auto now = ctx_.now_ns();
        if (!now) return unexpected(now.error());
        if (*now >= n->expires_ns()) return std::optional<lease>{};
        return std::optional<lease>{view(name, *n)};
    }

    /// lease_watch_store: a watch on the name's node (its record changes at
    /// every grant, renewal and release), armed at the first wait and again
    /// after each wake. A term that ends unrenewed writes nothing: it is
    /// seen by the next read.
    class watching {
    public:
        watching(detail::context<Clock>& ctx, std::string path) : ctx_(ctx), path_(std::move(path)) {}
        /// True: read the lease again (the watch was just armed, or it fired);
        /// false: `until` came first.
        bool wait(std::chrono::steady_clock::time_point until) {
            if (!flag_) {
                auto f = ctx_.watch(path_);
                if (!f) {
                    std::this_thread::sleep_until(until);  // not armed: the caller's bound is the poll
                    return false;
                }
                flag_ = std::move(*f);
                return true;
            }
            std::unique_lock lk(flag_->mutex);
            if (!flag_->cv.wait_until(lk, until, [&] { return flag_->fired; })) return false;
            lk.unlock();
            flag_.reset();
            return true;
        }

    private:
        detail::context<Clock>& ctx_;
        std::string path_;
        std::shared_ptr<detail::watch_flag> flag_;
    };
    watching lease_watching(std::string_view name) { return watching(ctx_, ctx_.path("lease", name)); }

    // lease_queue_store ------------------------------------------------------

    /// A place at the back of the line: a sequential child of the record.
    result<std::uint64_t> lease_enqueue(std::string_view name, std::string_view who, std::chrono::nanoseconds place_ttl) {
        const std::string rec = ctx_.path("lease", name);
        for (int attempt = 0; attempt < 2; ++attempt) {
            auto r = ctx_.create_raw(rec + "/p-", place_data(who, place_ttl.count()), ZOO_SEQUENCE);
            if (!r) return unexpected(r.error());
            if (r->rc == ZOK) {
                auto seq = detail::sequence_of(r->path);
                if (!seq) return unexpected(detail::bad("a sequential node without a sequence: " + r->path));
                return *seq + 1;
            }
            if (r->rc != ZNONODE || attempt > 0) return unexpected(session::failure(r->rc, true));
            rec_t blank;  // the name's first use: its record, free
            auto c = write(rec, blank, -1);
            if (!c) return unexpected(c.error());
        }
        return unexpected(detail::bad("lease enqueue: the record is missing after it was made"));
    }

    /// The rule of coord/rules/lease.hpp (lease_queue_rule::acquire), in
    /// ZooKeeper's terms: lapsed places ahead deleted, the first live place
    /// granted the lease when nobody holds it (its place deleted and the
    /// record written in one multi-operation, on the versions read).
    result<lease, lease_error> lease_acquire_queued(std::string_view name, std::string_view owner, std::chrono::nanoseconds ttl,
                                                    std::uint64_t ticket, std::chrono::nanoseconds place_ttl) {
        const std::string rec = ctx_.path("lease", name);
        const std::string mine = place_of(rec, ticket);
        using R = result<lease, lease_error>;
        auto decided = coord::detail::retry_conflicts(coord::detail::conflict_tries, [&](int) -> std::optional<R> {
            auto l = line(rec);
            if (!l) return R(failed(l.error()));
            const auto at = std::find(l->begin(), l->end(), ticket);
            if (at == l->end()) return R(place_lost());
            auto me = read_place(mine);
            if (!me) return R(failed(me.error()));
            if (!*me || (*me)->who != owner) return R(place_lost());
            auto now = ctx_.now_ns();
            if (!now) return R(failed(now.error()));
            if ((*me)->until_ns() <= *now) {
                (void)ctx_.del(mine, (*me)->stat.version);
                return R(place_lost());
            }
            // The places ahead: lapsed ones deleted, live ones counted (to 2).
            std::size_t ahead = 0;
            for (auto it = l->begin(); it != at && ahead < 2; ++it) {
                const std::string p = place_of(rec, *it);
                auto other = read_place(p);
                if (!other) return R(failed(other.error()));
                if (!*other) continue;
                if ((*other)->until_ns() > *now) {
                    ++ahead;
                    continue;
                }
                auto d = ctx_.del(p, (*other)->stat.version);
                if (!d) return R(failed(d.error()));
                if (d->rc == ZBADVERSION) ++ahead;  // renewed since: live
            }
            std::optional<known> k;
            if (ahead == 0) {
                auto n = read(rec);
                if (!n) return R(failed(n.error()));
                k = *n;
                if (k->version >= 0 && !(k->rec.held && *now < k->expires_ns())) {
                    rec_t next{true, std::string(owner), 0, ttl.count() < 0 ? 0 : ttl.count(), 0};
                    const std::string data = encoded(next);
                    auto w = ctx_.multi([&](auto& st) {
                        st.keep = {mine, rec, data};
                        st.ops.resize(2);
                        st.op_stats.resize(1);
                        zoo_delete_op_init(&st.ops[0], st.keep[0].c_str(), (*me)->stat.version);
                        zoo_set_op_init(&st.ops[1], st.keep[1].c_str(), st.keep[2].data(), static_cast<int>(st.keep[2].size()),
                                        k->version, &st.op_stats[0]);
                    });
                    if (!w) return R(failed(w.error()));
                    if (w->rc != ZOK) return std::nullopt;  // the place or the record changed: read again
                    known granted{next, w->stats.size() > 1 ? w->stats[1] : Stat{}, k->floor};
                    remember(name, granted);
                    return R(view(name, granted));
                }
            }
            // Not this place's turn: renewed once a quarter of its TTL is gone.
            if ((*me)->until_ns() - *now < place_ttl.count() - place_ttl.count() / 4) {
                auto w = ctx_.set(mine, place_data(owner, place_ttl.count()), (*me)->stat.version);
                if (!w) return R(failed(w.error()));
                if (w->rc != ZOK) return R(place_lost());
            }
            lease_error e{coord::make_error_code(coord::errc::lease_held), {}, 0, {}};
            if (k) e = refusal(coord::errc::lease_held, *k, *now).error();
            e.now = std::chrono::nanoseconds{*now};
            e.ahead = ahead;
            return R(unexpected(std::move(e)));
        });
        if (decided) return *decided;
        return failed(detail::contention("lease acquire (queued)"));
    }

    /// Leaves the line: the place deleted (already gone: done).
    result<void> lease_dequeue(std::string_view name, std::uint64_t ticket) {
        auto d = ctx_.del(place_of(ctx_.path("lease", name), ticket), -1);
        if (!d) return unexpected(d.error());
        return {};
    }

    /// The live places, first in line first.
    result<std::vector<lease_waiter>> lease_queue_read(std::string_view name) {
        const std::string rec = ctx_.path("lease", name);
        auto l = line(rec);
        if (!l) return unexpected(l.error());
        std::vector<lease_waiter> out;
        if (l->empty()) return out;
        auto now = ctx_.now_ns();
        if (!now) return unexpected(now.error());
        for (const auto t : *l) {
            auto p = read_place(place_of(rec, t));
            if (!p) return unexpected(p.error());
            if (*p && (*p)->until_ns() > *now) out.push_back(lease_waiter{t, (*p)->who, std::chrono::nanoseconds{(*p)->until_ns()}});
        }
        return out;
    }

    /// A waiter's wait: a watch on the record (first in line: a release
    /// writes it) or on the place just before its own (its deletion, or its
    /// renewal), armed and then read, so a change between the waiter's last
    /// try and the watch is not missed. Kept armed across waits.
    class waiting {
    public:
        waiting(lease_adapter& a, std::string rec, std::uint64_t ticket) : a_(a), rec_(std::move(rec)), ticket_(ticket) {}
        void wait(std::size_t ahead, std::chrono::steady_clock::time_point until) {
            std::string target = rec_;
            if (ahead > 0) {
                auto l = a_.line(rec_);
                if (!l) return detail::watchless_pause(until);
                const auto at = std::find(l->begin(), l->end(), ticket_);
                if (at == l->begin() || at == l->end()) return;  // first now, or the place is gone: try again
                target = place_of(rec_, *(at - 1));
            }
            if (!flag_ || target != path_) {
                auto f = a_.ctx_.watch(target);
                if (!f) return detail::watchless_pause(until);
                flag_ = std::move(*f);
                path_ = target;
                auto n = a_.ctx_.get(target);
                if (!n || !*n) return;  // the place before is gone: try again
                if (ahead == 0) {
                    auto f5 = detail::decode((**n).data, 5);
                    if (!f5 || (*f5)[0] != "1") return;  // the record is free: try again
                }
            }
            std::unique_lock lk(flag_->mutex);
            if (!flag_->cv.wait_until(lk, until, [&] { return flag_->fired; })) return;
            lk.unlock();
            flag_.reset();
        }

    private:
        lease_adapter& a_;
        std::string rec_;
        std::uint64_t ticket_;
        std::string path_;
        std::shared_ptr<detail::watch_flag> flag_;
    };
    waiting lease_waiting(std::string_view name, std::uint64_t ticket) { return waiting(*this, ctx_.path("lease", name), ticket); }

private:
    // The record: held, holder, token (0: the store's fence floor plus the
    // mzxid of the version that granted it, written by the grant itself),
    // TTL, and the test clock's stamp (0 with the ensemble's clock, which
    // stamps the node itself).
    struct rec_t {
        bool held = false;
        std::string holder;
        fence_token token = 0;
        std::int64_t ttl_ns = 0;
        std::int64_t stamp_ns = 0;
    };
    struct known {
        rec_t rec;
        Stat stat{};
        int version = -1;       // -1: no node yet
        fence_token floor = 0;  // the store's fence floor when it was read (context::lease_floor)
        known() = default;
        explicit known(fence_token f) : floor(f) {}
        known(rec_t r, const Stat& s, fence_token f) : rec(std::move(r)), stat(s), version(s.version), floor(f) {}
        fence_token token() const { return rec.token ? rec.token : detail::context<Clock>::token_of(floor, stat.mzxid); }
        std::int64_t started_ns() const { return detail::context<Clock>::written_at(stat, rec.stamp_ns); }
        std::int64_t expires_ns() const { return coord::detail::add_saturated(started_ns(), rec.ttl_ns); }
    };

    // A place: who waits, its TTL, and the test clock's stamp (0 with the
    // ensemble's clock, which stamps the node itself).
    struct place {
        std::string who;
        std::int64_t ttl_ns = 0;
        std::int64_t stamp_ns = 0;
        Stat stat{};
        std::int64_t until_ns() const {
            return coord::detail::add_saturated(detail::context<Clock>::written_at(stat, stamp_ns), ttl_ns);
        }
    };
    std::string place_data(std::string_view who, std::int64_t ttl_ns) const {
        return detail::encode({std::string(who), std::to_string(ttl_ns), ctx_.stamp()});
    }
    result<std::optional<place>> read_place(const std::string& p) {
        auto n = ctx_.get(p);
        if (!n) return unexpected(n.error());
        if (!*n) return std::optional<place>{};
        auto f = detail::decode((*n)->data, 3);
        auto ttl = f ? detail::i64((*f)[1]) : std::nullopt;
        auto stamp = f ? detail::i64((*f)[2]) : std::nullopt;
        if (!f || !ttl || !stamp) return unexpected(detail::corrupt(p, "a lease queue place is malformed"));
        return std::optional<place>{place{(*f)[0], *ttl, *stamp, (*n)->stat}};
    }
    /// The place of `ticket` under the record `rec` (ticket: its sequence + 1).
    static std::string place_of(const std::string& rec, std::uint64_t ticket) {
        char digits[16];
        std::snprintf(digits, sizeof digits, "%010llu", static_cast<unsigned long long>(ticket - 1));
        return rec + "/p-" + digits;
    }
    /// The line: the tickets of the record's places, first first.
    result<std::vector<std::uint64_t>> line(const std::string& rec) {
        auto names = ctx_.children(rec);
        if (!names) return unexpected(names.error());
        std::vector<std::uint64_t> out;
        for (const auto& n : *names)
            if (n.rfind("p-", 0) == 0)
                if (auto seq = detail::sequence_of(n)) out.push_back(*seq + 1);
        std::sort(out.begin(), out.end());
        return out;
    }
    static unexpected<lease_error> place_lost() {
        return unexpected(lease_error{coord::make_error_code(coord::errc::wait_place_lost), {}, 0, {}});
    }

    static bool holds(const known& k, std::string_view owner, fence_token token) {
        return k.rec.held && k.rec.holder == owner && (token == 0 || k.token() == token);
    }

    result<known> read(const std::string& p) {
        auto floor = ctx_.lease_floor();  // what the record's token rests on (read once)
        if (!floor) return unexpected(floor.error());
        auto n = ctx_.get(p);
        if (!n) return unexpected(n.error());
        if (!*n) return known{*floor};
        auto f = detail::decode((*n)->data, 5);
        auto token = f ? detail::u64((*f)[2]) : std::nullopt;
        auto ttl = f ? detail::i64((*f)[3]) : std::nullopt;
        auto stamp = f ? detail::i64((*f)[4]) : std::nullopt;
        if (!f || !token || !ttl || !stamp) return unexpected(detail::corrupt(p, "a lease record is malformed"));
        return known{rec_t{(*f)[0] == "1", (*f)[1], *token, *ttl, *stamp}, (*n)->stat, *floor};
    }

    // A record's data (the test clock's stamp set in it first).
    std::string encoded(rec_t& r) {
        if constexpr (detail::context<Clock>::test_clock) r.stamp_ns = *detail::i64(ctx_.stamp());
        return detail::encode({r.held ? "1" : "0", r.holder, std::to_string(r.token), std::to_string(r.ttl_ns),
                               std::to_string(r.stamp_ns)});
    }
    result<detail::reply> write(const std::string& p, rec_t& r, int version) {
        const std::string data = encoded(r);
        if (version < 0) return ctx_.create_or_exists(p, data, 0);
        return ctx_.set(p, data, version);
    }

    lease view(std::string_view name, const known& k) const {
        return lease{std::string(name), k.rec.holder, k.token(), std::chrono::nanoseconds{k.rec.ttl_ns},
                     std::chrono::nanoseconds{k.expires_ns()}};
    }

    static unexpected<lease_error> failed(const coord::error& e) { return unexpected(lease_error{e, {}, 0, {}}); }
    unexpected<lease_error> refusal(coord::errc code, const known& k, std::int64_t now) const {
        lease_error e{coord::make_error_code(code), {}, 0, {}};
        e.now = std::chrono::nanoseconds{now};
        if (k.rec.held && now < k.expires_ns()) {
            e.holder = k.rec.holder;
            e.token = k.token();
            e.expires_at = std::chrono::nanoseconds{k.expires_ns()};
        }
        return unexpected(std::move(e));
    }

    enum class step { go_on, read_again };
    // Renew's and release's first step: the record as known (recalled, else
    // read), checked to be (owner, token)'s. read_again: what was recalled
    // refused them but may be old; the caller reads it again.
    result<step, lease_error> held_by(const std::string& p, std::string_view name, std::optional<known>& k,
                                      std::string_view owner, fence_token token, int attempt) {
        if (!k) {
            auto n = read(p);
            if (!n) return unexpected(failed(n.error()).error());
            k = *n;
        }
        if (holds(*k, owner, token)) return step::go_on;
        if (attempt == 0 && recall(name)) {
            forget(name);
            k.reset();
            return step::read_again;
        }
        auto now = ctx_.now_ns();
        if (!now) return unexpected(failed(now.error()).error());
        return unexpected(refusal(coord::errc::not_lease_holder, *k, *now).error());
    }

    void remember(std::string_view name, const known& k) {
        std::lock_guard lk(mutex_);
        if (cache_.size() > 4096) cache_.clear();
        cache_[std::string(name)] = k;
    }
    void forget(std::string_view name) {
        std::lock_guard lk(mutex_);
        if (auto it = cache_.find(name); it != cache_.end()) cache_.erase(it);
    }
    std::optional<known> recall(std::string_view name) {
        std::lock_guard lk(mutex_);
        auto it = cache_.find(name);
        if (it == cache_.end()) return std::nullopt;
        return it->second;
    }

    detail::context<Clock>& ctx_;
    std::mutex mutex_;
    std::map<std::string, known, std::less<>> cache_;
};

}  // namespace coord::zookeeper
