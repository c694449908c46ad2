// SPDX-License-Identifier: Apache-2.0
// coord/postgres/lease.hpp: lease_store on PostgreSQL.
//
// Round trips: every operation 1, a call of one PL/pgSQL function
// (coord_lease_acquire, _renew, _release, _read; for the line _enqueue,
// _acquire_queued, _dequeue, and a select of the live places) that locks the
// row (SELECT ... FOR UPDATE), judges the term on the server's clock
// (clock_timestamp(), read inside the statement) and writes, all in the
// statement's one transaction. A new token is the larger of the name's last
// token + 1 and the server's clock in microseconds (migration 5): tokens never
// go back, also when the database went back (a restored dump, a failover that
// lost the last commits), as long as the server's clock did not go back by
// more than the time between the lost grant and the next. So lease calls
// carry no store guard (connection.hpp, pool::call): a store that went back
// (or was never initialized; its tables are made by opening it) still grants
// only larger tokens, and an older record can at most refuse a holder's
// renewal or make an acquire wait out a term that had ended. A waiter
// LISTENs on a connection of the listener pool for as long as it waits: 3 round trips (LISTEN, a check,
// UNLISTEN) a waiting acquire, besides its queued acquires. An observer
// (lease_watching: election's observe) LISTENs the same way on the name's
// own channel: 3 round trips (LISTEN, marking the name watched, UNLISTEN),
// and one more a 20 s while it observes.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coord/detail/lease_poll.hpp"
#include "coord/detail/sha256.hpp"
#include "coord/lease.hpp"
#include "coord/postgres/context.hpp"

namespace coord::postgres {

template <class Clock>
class lease_adapter {
public:
    explicit lease_adapter(detail::context<Clock>& ctx) noexcept
        : pool_(ctx.calls()), listeners_(ctx.listeners()), clock_(ctx.clock()) {}

    result<lease, lease_error> lease_acquire(std::string_view name, std::string_view owner,
                                             std::chrono::nanoseconds ttl) {
        using namespace detail;
        return call("SELECT * FROM coord_lease_acquire($1, $2, $3, $4)", name,
                    {param(name), param(owner), param(ttl.count()), now_ns_param(clock_)}, coord::errc::lease_held);
    }
    result<lease, lease_error> lease_renew(std::string_view name, std::string_view owner, fence_token token,
                                           std::chrono::nanoseconds ttl) {
        using namespace detail;
        return call("SELECT * FROM coord_lease_renew($1, $2, $3, $4, $5)", name,
                    {param(name), param(owner), param(static_cast<std::int64_t>(token)), param(ttl.count()),
                     now_ns_param(clock_)},
                    coord::errc::not_lease_holder);
    }
    result<void, lease_error> lease_release(std::string_view name, std::string_view owner, fence_token token) {
        using namespace detail;
        auto r = call("SELECT * FROM coord_lease_release($1, $2, $3, $4)", name,
                      {param(name), param(owner), param(static_cast<std::int64_t>(token)), now_ns_param(clock_)},
                      coord::errc::not_lease_holder);
        if (!r) return unexpected(r.error());
        return {};
    }
    result<std::optional<lease>> lease_read(std::string_view name) {
        using namespace detail;
        pool::call c(pool_, pool::unguarded);
        auto r = c.exec("SELECT * FROM coord_lease_read($1, $2)", {param(name), now_ns_param(clock_)}, false);
        if (!r) return unexpected(r.error());
        if (r->rows() == 0) return std::optional<lease>{};
        return std::optional<lease>{lease{std::string(name), r->text(0, 0), r->u64(0, 1),
                                          std::chrono::nanoseconds{r->i64(0, 2)}, std::chrono::nanoseconds{r->i64(0, 3)}}};
    }

    // lease_queue_store: the line in coord_lease_queue / coord_lease_waiter,
    // the rule of lease_queue_rule in coord_lease_acquire_queued (1 round
    // trip each). A waiter LISTENs on its place's own channel; a release (or
    // a waiter leaving) NOTIFYs only the first in line, so a release wakes
    // one waiter, not all. A waiter holds a connection of the store's
    // listener pool (not the pool calls use) while it waits: LISTEN and a
    // check at its first wait, UNLISTEN at its end. While nobody moves, a
    // waiter costs 1 transaction per renewal of its place (every half of
    // the place's term), reading a bounded number of rows.

    result<std::uint64_t> lease_enqueue(std::string_view name, std::string_view who, std::chrono::nanoseconds place_ttl) {
        using namespace detail;
        pool::call c(pool_, pool::unguarded);
        auto r = c.exec("SELECT coord_lease_enqueue($1, $2, $3, $4)",
                        {param(name), param(who), param(place_ttl.count()), now_ns_param(clock_)}, true);
        if (!r) return unexpected(r.error());
        if (r->rows() != 1) return unexpected(make_error_code(errc::bad_answer));
        return r->u64(0, 0);
    }
    result<lease, lease_error> lease_acquire_queued(std::string_view name, std::string_view owner, std::chrono::nanoseconds ttl,
                                                    std::uint64_t ticket, std::chrono::nanoseconds place_ttl) {
        using namespace detail;
        pool::call c(pool_, pool::unguarded);
        auto r = c.exec("SELECT * FROM coord_lease_acquire_queued($1, $2, $3, $4, $5, $6)",
                        {param(name), param(owner), param(ttl.count()), param_u64(ticket), param(place_ttl.count()),
                         now_ns_param(clock_)},
                        true);
        if (!r) return unexpected(lease_error{r.error(), {}, 0, {}});
        if (r->rows() != 1) return unexpected(lease_error{make_error_code(errc::bad_answer), {}, 0, {}});
        const auto status = r->i64(0, 0);
        lease l{std::string(name), r->text(0, 1), r->u64(0, 2), std::chrono::nanoseconds{r->i64(0, 3)},
                std::chrono::nanoseconds{r->i64(0, 4)}};
        if (status == 0) return l;
        lease_error e{coord::make_error_code(status == 3 ? coord::errc::wait_place_lost : coord::errc::lease_held), l.owner,
                      l.token, l.expires_at};
        e.ahead = static_cast<std::size_t>(r->u64(0, 5));
        e.now = std::chrono::nanoseconds{r->i64(0, 6)};
        return unexpected(std::move(e));
    }
    result<void> lease_dequeue(std::string_view name, std::uint64_t ticket) {
        using namespace detail;
        pool::call c(pool_, pool::unguarded);
        auto r = c.exec("SELECT coord_lease_dequeue($1, $2, $3)", {param(name), param_u64(ticket), now_ns_param(clock_)}, true);
        if (!r) return unexpected(r.error());
        return {};
    }
    result<std::vector<lease_waiter>> lease_queue_read(std::string_view name) {
        using namespace detail;
        pool::call c(pool_, pool::unguarded);
        auto r = c.exec("SELECT ticket, who, until_ns FROM coord_lease_waiter WHERE name = $1 AND until_ns > coord_now_ns($2) "
                        "ORDER BY ticket",
                        {param(name), now_ns_param(clock_)}, false);
        if (!r) return unexpected(r.error());
        std::vector<lease_waiter> out;
        for (int i = 0; i < r->rows(); ++i) out.push_back(lease_waiter{r->u64(i, 0), r->text(i, 1), std::chrono::nanoseconds{r->i64(i, 2)}});
        return out;
    }
    /// A waiter's turn: its place's channel stays LISTENed from the first
    /// wait to the end of this object, so a NOTIFY sent between two waits is
    /// read by the next one. After the LISTEN, the waiter asks once whether
    /// it may go now (a release notified before it).
    class waiting {
    public:
        waiting(lease_adapter& a, std::string_view name, std::uint64_t ticket)
            : a_(a), name_(name), ticket_(ticket), channel_(channel_of(name, ticket)) {}
        waiting(const waiting&) = delete;
        waiting& operator=(const waiting&) = delete;
        ~waiting() {
            if (listener_) (void)listener_->unlisten(channel_);
        }

        void wait(std::size_t ahead, std::chrono::steady_clock::time_point until) {
            using namespace detail;
            if (!listener_) {
                listener_.emplace(a_.listeners_);
                if (!listener_->listen(channel_)) return coord::detail::lease_wait_unlistened(listener_, ahead, until);
                pool::call c(a_.pool_, pool::unguarded);
                auto r = c.exec("SELECT coord_lease_next_in_line($1, $2, $3)",
                                {param(name_), param_u64(ticket_), now_ns_param(a_.clock_)}, false);
                if (!r || (r->rows() == 1 && r->boolean(0, 0))) return;
            }
            if (!listener_->wait_notification(channel_, until)) coord::detail::lease_wait_unlistened(listener_, ahead, until);
        }

    private:
        static std::string channel_of(std::string_view name, std::uint64_t ticket) {
            return "coord_lw_" + coord::detail::sha256_hex(name).substr(0, 32) + "_" + std::to_string(ticket);
        }
        lease_adapter& a_;
        std::string name_;
        std::uint64_t ticket_;
        std::string channel_;
        std::optional<pool::call> listener_;
    };
    waiting lease_waiting(std::string_view name, std::uint64_t ticket) { return waiting(*this, name, ticket); }

    /// lease_watch_store: LISTEN on the name's observer channel (a
    /// connection of the listener pool, from the first wait to the end of
    /// this object), and the name marked watched on the server (migration 5:
    /// a grant or a release of a watched name NOTIFYs the channel), for a
    /// minute at a time, marked again at a wait once 20 s have passed. A term
    /// that ends unrenewed writes nothing: it is seen by the next read.
    class watching {
    public:
        watching(lease_adapter& a, std::string_view name) : a_(a), name_(name), channel_(channel_of(name)) {}
        watching(const watching&) = delete;
        watching& operator=(const watching&) = delete;
        ~watching() {
            if (listener_) (void)listener_->unlisten(channel_);
        }
        /// True: read the lease again (LISTEN just began, or a NOTIFY came);
        /// false: `until` came first.
        bool wait(std::chrono::steady_clock::time_point until) {
            if (!listener_) {
                listener_.emplace(a_.listeners_);
                if (!listener_->listen(channel_) || !mark()) return coord::detail::lease_watch_unlistened(listener_, until);
                return true;
            }
            // A long wait marks the name again every 20 s, so that the mark
            // (a minute) never lapses while this observer listens.
            for (;;) {
                const bool mark_due = std::chrono::steady_clock::now() - marked_ >= std::chrono::seconds{20};
                if (mark_due && !mark()) return coord::detail::lease_watch_unlistened(listener_, until);
                const auto bound = std::min(until, marked_ + std::chrono::seconds{20});
                auto n = listener_->wait_notification(channel_, bound);
                if (!n) return coord::detail::lease_watch_unlistened(listener_, until);
                if (*n) return true;
                if (bound == until) return false;
            }
        }

    private:
        static std::string channel_of(std::string_view name) {
            return "coord_lo_" + coord::detail::sha256_hex(name).substr(0, 32);
        }
        bool mark() {
            using namespace detail;
            pool::call c(a_.pool_, pool::unguarded);
            const auto at = std::chrono::steady_clock::now();
            auto r = c.exec("SELECT coord_lease_observe($1, $2)",
                            {param(name_), param(std::int64_t{60'000'000'000})}, true);
            if (!r) return false;
            marked_ = at;
            return true;
        }
        lease_adapter& a_;
        std::string name_;
        std::string channel_;
        std::optional<pool::call> listener_;
        std::chrono::steady_clock::time_point marked_{};
    };
    watching lease_watching(std::string_view name) { return watching(*this, name); }

private:
    // status 0: the lease; 1: `refused` (held, or not the holder); 2: expired.
    result<lease, lease_error> call(const char* sql, std::string_view name, std::vector<detail::param_value> params,
                                    coord::errc refused) {
        pool::call c(pool_, pool::unguarded);
        auto r = c.exec(sql, params, true);
        if (!r) return unexpected(lease_error{r.error(), {}, 0, {}});
        if (r->rows() != 1) return unexpected(lease_error{make_error_code(errc::bad_answer), {}, 0, {}});
        const auto status = r->i64(0, 0);
        lease l{std::string(name), r->text(0, 1), r->u64(0, 2), std::chrono::nanoseconds{r->i64(0, 3)},
                std::chrono::nanoseconds{r->i64(0, 4)}};
        if (status == 0) return l;
        const coord::errc code = status == 2 ? coord::errc::lease_expired : refused;
        return unexpected(lease_error{coord::make_error_code(code), l.owner, l.token, l.expires_at});
    }

    pool& pool_;
    pool& listeners_;
    const Clock& clock_;
};

}  // namespace coord::postgres
