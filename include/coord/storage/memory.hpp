// SPDX-License-Identifier: Apache-2.0
// coord/storage/memory.hpp: memory_store, the embedded default store and the
// reference model of every store concept.
//
// Includes only the rules (coord/rules/): the primitives' store concepts,
// the static_asserts that this store models them, and the everyday aliases
// are in coord/aliases.hpp.
//
// Everything lives in this process's memory, guarded by a mutex per table, so
// every operation is one atomic step for all threads of the process. Nothing
// survives the process: use it for one process's own coordination, for tests,
// and as the model the durable stores and engines are checked against.
// Every expiry is judged on the store's Clock (steady_clock by default):
// leases, the ledger's execution leases, replay window and retention, and
// sessions' idle and absolute timeouts. The ledger and sessions keep Unix
// times: on a steady clock the store maps its readings to Unix time once, at
// construction, so they never step.
//
//   coord::memory_store store;
//   coord::lease_manager leases{store};
//   coord::fenced_resource res{store, "orders"};
#pragma once

#include <algorithm>
#include <chrono>
#include <exception>
#include <cstdint>
#include <functional>
#include <mutex>
#include <condition_variable>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "coord/clock.hpp"
#include "coord/detail/string_map.hpp"
#include "coord/error.hpp"
#include "coord/result.hpp"
#include "coord/rules/fence.hpp"
#include "coord/rules/lease.hpp"
#include "coord/rules/ledger.hpp"
#include "coord/rules/reservation.hpp"
#include "coord/rules/revocation.hpp"
#include "coord/rules/segment.hpp"
#include "coord/rules/session.hpp"

/// Defined by every store and engine header (tests check that a primitive
/// header pulls in none).
#ifndef COORD_STORE_HEADER_INCLUDED
#define COORD_STORE_HEADER_INCLUDED 1
#endif

namespace coord {


/// The in-memory store: fence_store, fence_update_store, lease_store,
/// time_reservation_store, segment_allocator, ledger_store and
/// ledger_run_store (a run's effect executes under the ledger's lock),
/// session_store and revocation_store.
/// Thread safety: every member function may be called from any thread.
template <clock Clock = steady_clock>
class basic_memory_store : public detail::fence_writes<basic_memory_store<Clock>> {
    friend class detail::fence_writes<basic_memory_store<Clock>>;

public:
    /// An empty store whose expiries are judged on `clock`.
    explicit basic_memory_store(Clock clock = Clock{}) : clock_(std::move(clock)) {
        if constexpr (!unix_clock<Clock>)
            unix_offset_ns_ = since_epoch_ns(std::chrono::system_clock::now()) - since_epoch_ns(clock_.now());
    }
    basic_memory_store(const basic_memory_store&) = delete;
    basic_memory_store& operator=(const basic_memory_store&) = delete;

    // fence_store ---------------------------------------------------------
    // fence_write, fence_update: detail::fence_writes, through fence_apply.
    ///@{
    /// The fence_store operations, each one atomic step under the store's lock: coord::fence_store says what each does.
    result<fenced_value> fence_read(std::string_view key) const {
        std::lock_guard lk(fence_mutex_);
        auto it = fences_.find(key);
        return detail::fence_rule::view(it == fences_.end() ? nullptr : &it->second);
    }
    ///@}

    // lease_store ---------------------------------------------------------
    ///@{
    /// The lease_store operations, each one atomic step under the store's lock: coord::lease_store says what each does.
    result<lease, lease_error> lease_acquire(std::string_view name, std::string_view owner,
                                             std::chrono::nanoseconds ttl) {
        std::lock_guard lk(lease_mutex_);
        return detail::lease_rule::acquire(name, detail::find_or_insert(leases_, name), owner, ttl.count(),
                                           now_ns());
    }
    result<lease, lease_error> lease_renew(std::string_view name, std::string_view owner, fence_token token,
                                           std::chrono::nanoseconds ttl) {
        std::lock_guard lk(lease_mutex_);
        return detail::lease_rule::renew(name, existing(name), owner, token, ttl.count(), now_ns());
    }
    result<void, lease_error> lease_release(std::string_view name, std::string_view owner, fence_token token) {
        std::lock_guard lk(lease_mutex_);
        auto r = detail::lease_rule::release(existing(name), owner, token, now_ns());
        if (r) wake_first(name);
        return r;
    }
    result<std::optional<lease>> lease_read(std::string_view name) const {
        std::lock_guard lk(lease_mutex_);
        auto it = leases_.find(name);
        return detail::lease_rule::read(name, it == leases_.end() ? nullptr : &it->second, now_ns());
    }
    ///@}

    // lease_queue_store -------------------------------------------------------
    // Waiters of one name in arrival order; a release wakes only the first in
    // line (its own condition variable).

    ///@{
    /// The lease_queue_store operations, each one atomic step under the store's lock: coord::lease_queue_store says what each does.
    result<std::uint64_t> lease_enqueue(std::string_view name, std::string_view who, std::chrono::nanoseconds place_ttl) {
        std::lock_guard lk(lease_mutex_);
        return detail::lease_queue_rule::enqueue(detail::find_or_insert(queues_, name), who, place_ttl.count(), now_ns());
    }
    result<lease, lease_error> lease_acquire_queued(std::string_view name, std::string_view owner, std::chrono::nanoseconds ttl,
                                                    std::uint64_t ticket, std::chrono::nanoseconds place_ttl) {
        std::lock_guard lk(lease_mutex_);
        return detail::lease_queue_rule::acquire(name, detail::find_or_insert(leases_, name),
                                                 detail::find_or_insert(queues_, name), ticket, owner, ttl.count(),
                                                 place_ttl.count(), now_ns());
    }
    result<void> lease_dequeue(std::string_view name, std::uint64_t ticket) {
        std::lock_guard lk(lease_mutex_);
        auto it = queues_.find(name);
        if (it != queues_.end() && detail::lease_queue_rule::leave(it->second, ticket)) wake_first(name);
        return {};
    }
    result<std::vector<lease_waiter>> lease_queue_read(std::string_view name) {
        std::lock_guard lk(lease_mutex_);
        auto q = queues_.find(name);
        if (q == queues_.end()) return std::vector<lease_waiter>{};
        detail::lease_queue_rule::purge(q->second, now_ns());
        return q->second.waiters;
    }
    /// A waiter's turn: each wait checks under the store's lock, so nothing
    /// needs keeping between two waits.
    class waiting {
    public:
        /// The turn of `ticket` in the line of `name` on `s`.
        waiting(basic_memory_store& s, std::string_view name, std::uint64_t ticket) : s_(&s), name_(name), ticket_(ticket) {}
        /// Returns at once when the waiter is next in line; else blocks until a release wakes it, or `until`.
        void wait(std::size_t /*ahead*/, std::chrono::steady_clock::time_point until) { s_->wait_turn(name_, ticket_, until); }

    private:
        basic_memory_store* s_;
        std::string name_;
        std::uint64_t ticket_;
    };
    waiting lease_waiting(std::string_view name, std::uint64_t ticket) { return waiting(*this, name, ticket); }
    ///@}

private:
    void wait_turn(std::string_view name, std::uint64_t ticket, std::chrono::steady_clock::time_point until) {
        std::unique_lock lk(lease_mutex_);
        if (next_in_line(name, ticket)) return;  // already free for it: no wait
        // (`until` already includes the end of the holder's term: the manager
        // computes it from the refusal.)
        blocked w;
        auto& slot = waiting_[std::string(name)];
        slot[ticket] = &w;
        w.cv.wait_until(lk, until, [&] { return w.woken; });
        slot.erase(ticket);
        if (slot.empty()) waiting_.erase(std::string(name));
    }

public:
    // time_reservation_store ----------------------------------------------
    ///@{
    /// The time_reservation_store operations, each one atomic step under the store's lock: coord::time_reservation_store says what each does.
    result<std::int64_t, write_error> time_reserve(std::string_view key, std::int64_t until_ms,
                                                        fence_token token) {
        std::lock_guard lk(reservation_mutex_);
        return detail::reservation_rule::reserve(detail::find_or_insert(reservations_, key), until_ms, token);
    }
    ///@}

    // segment_allocator ---------------------------------------------------
    ///@{
    /// The segment_allocator operations, each one atomic step under the store's lock: coord::segment_allocator says what each does.
    result<segment_range> segment_allocate(std::string_view tag, std::uint64_t step) {
        std::lock_guard lk(segment_mutex_);
        return detail::segment_rule::allocate(detail::find_or_insert(segments_, tag), step);
    }
    ///@}

    // ledger_store --------------------------------------------------------
    ///@{
    /// The ledger_store operations, each one atomic step under the store's lock: coord::ledger_store says what each does.
    result<claim_outcome> ledger_claim(const ledger_claim_request& q) {
        std::lock_guard lk(ledger_mutex_);
        const auto now = unix_now_ns();
        if (detail::ledger_rule::too_old(q, now)) return detail::ledger_rule::expired();
        return detail::ledger_rule::claim(detail::find_or_insert(ledger_, q.key), q, now);
    }
    result<void> ledger_heartbeat(std::string_view key, fence_token fence, std::chrono::nanoseconds ttl) {
        std::lock_guard lk(ledger_mutex_);
        return detail::ledger_rule::heartbeat(find_record(key), fence, ttl.count(), unix_now_ns());
    }
    result<void> ledger_complete(std::string_view key, fence_token fence, std::string_view result_text,
                                 std::chrono::nanoseconds retain_until) {
        std::lock_guard lk(ledger_mutex_);
        return detail::ledger_rule::complete(find_record(key), fence, result_text, unix_now_ns(), retain_until.count());
    }
    result<void> ledger_fail(std::string_view key, fence_token fence, std::string_view reason) {
        std::lock_guard lk(ledger_mutex_);
        return detail::ledger_rule::fail(find_record(key), fence, reason);
    }
    result<std::optional<ledger_record>> ledger_read(std::string_view key) {
        std::lock_guard lk(ledger_mutex_);
        auto* r = find_record(key);
        return r ? std::optional<ledger_record>(*r) : std::nullopt;
    }
    result<std::size_t> ledger_prune() {
        std::lock_guard lk(ledger_mutex_);
        const auto now = unix_now_ns();
        return static_cast<std::size_t>(
            std::erase_if(ledger_, [&](const auto& kv) { return detail::ledger_rule::prunable(kv.second, now); }));
    }
    result<fence_token> ledger_revoke(std::string_view key, std::string_view reason) {
        std::lock_guard lk(ledger_mutex_);
        return detail::ledger_rule::revoke(find_record(key), reason);
    }
    template <class F>
    result<claim_outcome> ledger_run_atomic(const ledger_claim_request& q, std::chrono::nanoseconds retain_until, F&& fn) {
        std::lock_guard lk(ledger_mutex_);
        const auto now = unix_now_ns();
        if (detail::ledger_rule::too_old(q, now)) return detail::ledger_rule::expired();
        auto& r = detail::find_or_insert(ledger_, q.key);
        auto c = detail::ledger_rule::claim(r, q, now);
        if (!c || c->kind != claim_outcome::granted) return c;
        std::string produced;
        try {
            produced = fn(*c);
        } catch (const std::exception& e) {
            (void)detail::ledger_rule::fail(&r, c->fence, e.what());
            throw;
        } catch (...) {
            (void)detail::ledger_rule::fail(&r, c->fence, "unknown exception");
            throw;
        }
        (void)detail::ledger_rule::complete(&r, c->fence, produced, unix_now_ns(), retain_until.count());
        c->result = std::move(produced);
        return c;
    }
    ///@}

    // session_store -------------------------------------------------------
    ///@{
    /// The session_store operations, each one atomic step under the store's lock: coord::session_store says what each does.
    result<session_record> session_create(std::string_view hash, const session_request& req) {
        std::lock_guard lk(session_mutex_);
        auto rec = detail::session_rule::create(req, unix_now_ms());
        if (!sessions_.emplace(std::string(hash), rec).second) return unexpected(errc::session_conflict);
        return rec;
    }
    result<session_record> session_load(std::string_view hash) {
        std::lock_guard lk(session_mutex_);
        const auto now = unix_now_ms();
        auto it = live_session(hash, now);
        if (!it) return unexpected(it.error());
        detail::session_rule::touch((*it)->second, now);
        return (*it)->second;
    }
    result<std::uint64_t> session_save(std::string_view hash, std::uint64_t version, std::string_view data) {
        std::lock_guard lk(session_mutex_);
        const auto now = unix_now_ms();
        auto it = live_session(hash, now);
        if (!it) return unexpected(it.error());
        auto& rec = (*it)->second;
        if (rec.version != version) return unexpected(errc::session_conflict);
        rec.data.assign(data);
        detail::session_rule::touch(rec, now);
        return ++rec.version;
    }
    result<std::uint64_t> session_rotate(std::string_view old_hash, std::string_view new_hash, std::uint64_t version) {
        std::lock_guard lk(session_mutex_);
        const auto now = unix_now_ms();
        auto it = live_session(old_hash, now);
        if (!it) return unexpected(it.error());
        if ((*it)->second.version != version) return unexpected(errc::session_conflict);
        if (sessions_.find(new_hash) != sessions_.end()) return unexpected(errc::session_conflict);
        session_record rec = std::move((*it)->second);
        sessions_.erase(*it);
        detail::session_rule::touch(rec, now);
        ++rec.version;
        const std::uint64_t v = rec.version;
        sessions_.emplace(std::string(new_hash), std::move(rec));
        return v;
    }
    result<bool> session_revoke(std::string_view hash) {
        std::lock_guard lk(session_mutex_);
        auto it = sessions_.find(hash);
        if (it == sessions_.end()) return false;
        sessions_.erase(it);
        return true;
    }
    result<std::size_t> session_revoke_user(std::string_view user) {
        std::lock_guard lk(session_mutex_);
        return static_cast<std::size_t>(std::erase_if(sessions_, [&](const auto& kv) { return kv.second.user == user; }));
    }
    ///@}

    // revocation_store ----------------------------------------------------
    ///@{
    /// The revocation_store operations, each one atomic step under the store's lock: coord::revocation_store says what each does.
    result<void> revoke_token(std::string_view jti, std::int64_t until_s) {
        std::lock_guard lk(revocation_mutex_);
        detail::revocation_rule::deny_until(detail::find_or_insert(denied_tokens_, jti), until_s);
        return {};
    }
    result<void> revoke_subject(std::string_view sub, std::int64_t not_before_s) {
        std::lock_guard lk(revocation_mutex_);
        detail::revocation_rule::not_before(detail::find_or_insert(subject_not_before_, sub), not_before_s);
        return {};
    }
    result<bool> token_revoked(std::string_view jti, std::string_view sub, std::optional<std::int64_t> iat,
                               std::int64_t now_s) {
        std::lock_guard lk(revocation_mutex_);
        if (!jti.empty()) {
            auto it = denied_tokens_.find(jti);
            if (it != denied_tokens_.end()) {
                if (detail::revocation_rule::denied(it->second, now_s)) return true;
                denied_tokens_.erase(it);  // past the token's exp: it can no longer validate anyway
            }
        }
        if (!sub.empty()) {
            auto it = subject_not_before_.find(sub);
            if (it != subject_not_before_.end() && detail::revocation_rule::before_not_before(iat, it->second))
                return true;
        }
        return false;
    }

    /// The clock every expiry is judged on.
    const Clock& clock() const noexcept { return clock_; }
    /// The store's now in Unix nanoseconds: the clock's reading when it is on
    /// the Unix epoch, else the steady reading mapped to Unix time at
    /// construction (so it never steps).
    std::int64_t unix_now_ns() const noexcept { return unix_offset_ns_ + since_epoch_ns(clock_.now()); }
    ///@}

private:
    template <class Assign>
    result<void, write_error> fence_apply(std::string_view key, fence_token token,
                                          std::optional<std::uint64_t> seq, Assign&& assign) {
        std::lock_guard lk(fence_mutex_);
        return detail::fence_rule::apply(detail::find_or_insert(fences_, key), token, seq,
                                         std::forward<Assign>(assign));
    }
    std::int64_t now_ns() const { return since_epoch_ns(clock_.now()); }
    std::int64_t unix_now_ms() const noexcept {
        const auto ns = unix_now_ns();
        return ns / 1'000'000 - (ns % 1'000'000 < 0 ? 1 : 0);
    }
    // The record of a name, or a scratch free record (renew and release of an
    // unknown name are refused without growing the table).
    detail::lease_rule::record& existing(std::string_view name) {
        auto it = leases_.find(name);
        if (it != leases_.end()) return it->second;
        scratch_ = {};
        return scratch_;
    }

    // A waiter blocked in wait_turn (on its own stack).
    struct blocked {
        std::condition_variable cv;
        bool woken = false;
    };
    // True when `ticket` is first in line and the lease is free (lease_mutex_ held).
    bool next_in_line(std::string_view name, std::uint64_t ticket) {
        auto q = queues_.find(name);
        if (q == queues_.end()) return false;
        const auto* first = detail::lease_queue_rule::head(q->second, now_ns());
        if (!first || first->ticket != ticket) return false;
        auto l = leases_.find(name);
        return l == leases_.end() || !detail::lease_rule::live(l->second, now_ns());
    }
    // Wakes the first waiter in line of `name`, if it is waiting (lease_mutex_ held).
    void wake_first(std::string_view name) {
        auto q = queues_.find(name);
        if (q == queues_.end()) return;
        const auto* first = detail::lease_queue_rule::head(q->second, now_ns());
        if (!first) return;
        auto s = waiting_.find(std::string(name));
        if (s == waiting_.end()) return;
        auto w = s->second.find(first->ticket);
        if (w == s->second.end()) return;
        w->second->woken = true;
        w->second->cv.notify_one();
    }

    Clock clock_;
    std::int64_t unix_offset_ns_ = 0;  // added to a steady clock's readings
    mutable std::mutex fence_mutex_;
    detail::string_map<detail::fence_rule::record> fences_;
    mutable std::mutex lease_mutex_;
    detail::string_map<detail::lease_rule::record> leases_;
    detail::lease_rule::record scratch_;  // guarded by lease_mutex_
    detail::string_map<detail::lease_queue_rule::record> queues_;  // guarded by lease_mutex_
    std::unordered_map<std::string, std::unordered_map<std::uint64_t, blocked*>> waiting_;  // guarded by lease_mutex_
    std::mutex reservation_mutex_;
    detail::string_map<detail::reservation_rule::record> reservations_;
    ledger_record* find_record(std::string_view key) {
        auto it = ledger_.find(key);
        return it == ledger_.end() ? nullptr : &it->second;
    }
    std::mutex ledger_mutex_;
    detail::string_map<ledger_record> ledger_;
    std::mutex segment_mutex_;
    detail::string_map<detail::segment_rule::record> segments_;
    // A live session's entry; an expired one is erased and reported once.
    using session_map = detail::string_map<session_record>;
    result<typename session_map::iterator> live_session(std::string_view hash, std::int64_t now_ms) {
        auto it = sessions_.find(hash);
        if (it == sessions_.end()) return unexpected(errc::session_not_found);
        if (detail::session_rule::expired(it->second, now_ms)) {
            sessions_.erase(it);
            return unexpected(errc::session_expired);
        }
        return it;
    }
    std::mutex session_mutex_;
    session_map sessions_;
    std::mutex revocation_mutex_;
    detail::string_map<std::int64_t> denied_tokens_;
    detail::string_map<std::int64_t> subject_not_before_;
};

/// The everyday in-memory store (every expiry judged on steady_clock).
using memory_store = basic_memory_store<>;

}  // namespace coord
