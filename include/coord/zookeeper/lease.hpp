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
// read and ruled again on a conflict. The token is the zxid of the granting
// transaction (the node's mzxid after it): zxids only grow, across server
// restarts and leader elections (the epoch is their high half).
// Round trips: acquire 2 (the record; the conditional write), 3 when the
// record shows a holder (the ensemble's now), 1 after this store object's
// own release (it remembers the record and version it wrote); renew 1 or 2
// (the write, whose own stamp judges whether the term was still running: a
// renew that landed after the end is undone and refused as expired);
// release 1 or 2; read 1, 2 when held.
//
// session_lease_adapter (store.session_bound()): a lease bound to this store
// object's ZooKeeper session, for holders that keep one connection open:
// an ephemeral node ROOT/slease/NAME/holder created in one multi-operation
// with the name's record. The term is the session timeout the ensemble
// negotiated (a TTL is not ZooKeeper's to give here: the grant reports the
// term it has), renewed by the session's own heartbeats; expiry is the
// ensemble's decision (it deletes the node when it expires the session).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

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
                known mine{next, w->stat};
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
            known mine{next, w->stat};
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
                remember(name, known{next, w->stat});
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

private:
    // The record: held, holder, token (0: the mzxid of the version that
    // granted it, written by the grant itself), TTL, and the test clock's
    // stamp (0 with the ensemble's clock, which stamps the node itself).
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
        int version = -1;  // -1: no node yet
        known() = default;
        known(rec_t r, const Stat& s) : rec(std::move(r)), stat(s), version(s.version) {}
        fence_token token() const { return rec.token ? rec.token : static_cast<fence_token>(stat.mzxid); }
        std::int64_t started_ns() const { return detail::context<Clock>::written_at(stat, rec.stamp_ns); }
        std::int64_t expires_ns() const { return coord::detail::add_saturated(started_ns(), rec.ttl_ns); }
    };

    static bool holds(const known& k, std::string_view owner, fence_token token) {
        return k.rec.held && k.rec.holder == owner && (token == 0 || k.token() == token);
    }

    result<known> read(const std::string& p) {
        auto n = ctx_.get(p);
        if (!n) return unexpected(n.error());
        if (!*n) return known{};
        auto f = detail::decode((*n)->data, 5);
        auto token = f ? detail::u64((*f)[2]) : std::nullopt;
        auto ttl = f ? detail::i64((*f)[3]) : std::nullopt;
        auto stamp = f ? detail::i64((*f)[4]) : std::nullopt;
        if (!f || !token || !ttl || !stamp) return unexpected(detail::corrupt(p, "a lease record is malformed"));
        return known{rec_t{(*f)[0] == "1", (*f)[1], *token, *ttl, *stamp}, (*n)->stat};
    }

    result<detail::reply> write(const std::string& p, rec_t& r, int version) {
        if constexpr (detail::context<Clock>::test_clock) r.stamp_ns = *detail::i64(ctx_.stamp());
        const std::string data = detail::encode({r.held ? "1" : "0", r.holder, std::to_string(r.token), std::to_string(r.ttl_ns),
                                                 std::to_string(r.stamp_ns)});
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
