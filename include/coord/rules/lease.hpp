// SPDX-License-Identifier: Apache-2.0
// coord/rules/lease.hpp: the lease rule, and the lease and refusal it speaks of.
//
// A pure transition on records: no store, no clock, no I/O. The memory and
// file stores apply it; every engine's SQL or script is held to it by the
// conformance suites (tests/conformance/). Include the primitive's header
// (coord/lease.hpp) for its store concept and class template.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "coord/clock.hpp"
#include "coord/error.hpp"
#include "coord/result.hpp"
#include "coord/rules/fence.hpp"

namespace coord {

/// A granted lease.
struct lease {
    std::string name;  ///< the lease's name
    std::string owner;  ///< who holds it
    /// The fence token of this grant: larger than every earlier grant's for `name`.
    fence_token token = 0;
    /// The term the lease was granted or last renewed for.
    std::chrono::nanoseconds ttl{0};
    /// When the term ends, on the store's clock (time since that clock's epoch).
    std::chrono::nanoseconds expires_at{0};
};

/// Why a lease operation was refused.
struct lease_error {
    /// errc::lease_held, errc::not_lease_holder, errc::lease_expired, or the
    /// store's infrastructure error.
    error code;
    /// For lease_held and not_lease_holder: who holds the lease now (empty if nobody).
    std::string holder;
    /// That holder's fence token.
    fence_token token = 0;
    /// When that holder's term ends, on the store's clock.
    std::chrono::nanoseconds expires_at{0};
    /// For a queued acquire refused with lease_held: how many live waiters
    /// are ahead of this one (0: first in line). PostgreSQL counts to 2 (2:
    /// two or more), so that the call reads a bounded number of rows.
    std::size_t ahead = 0;
    /// The store's clock when it refused (0 when not known): expires_at - now
    /// is how long the holder's term still runs.
    std::chrono::nanoseconds now{0};

    /// Compares like `code`: with a coord::errc, an engine's code enum, or a
    /// coord::condition (`e == coord::condition::refused`).
    template <class E>
        requires std::is_error_code_enum_v<E> || std::is_error_condition_enum_v<E>
    friend bool operator==(const lease_error& e, E c) noexcept {
        return e.code == c;
    }
};

/// A waiter's place in the queue of one lease name.
struct lease_waiter {
    std::uint64_t ticket = 0;  ///< increasing per name: the arrival order
    std::string who;  ///< the waiter's owner name
    std::chrono::nanoseconds until{0};  ///< the place lapses here (store clock, since the Unix epoch) unless renewed
};

namespace detail {

/// The lease rule on one name's record, shared by every embedded store (the
/// reference model). `now` is the store clock's reading in ns since its epoch.
struct lease_rule {
    struct record {
        fence_token last_token = 0;  // highest token ever granted for the name
        bool held = false;
        std::string holder;
        fence_token token = 0;
        std::int64_t ttl_ns = 0;
        std::int64_t expires_ns = 0;
    };

    static bool live(const record& r, std::int64_t now) noexcept { return r.held && now < r.expires_ns; }

    /// A grant's token: above the last one, and at least the store clock's
    /// reading in microseconds (as every engine's), so that a token never
    /// goes back when the record went back (a database file replaced by an
    /// older copy, a store made anew), as long as the clock did not go back
    /// by more than the time between the lost grant and the next one.
    static fence_token next_token(fence_token last, std::int64_t now) noexcept {
        const fence_token floor = now > 0 ? static_cast<fence_token>(now / 1000) : 0;
        return std::max(last + 1, floor);
    }

    static lease view(std::string_view name, const record& r) {
        return lease{std::string(name), r.holder, r.token, std::chrono::nanoseconds{r.ttl_ns},
                     std::chrono::nanoseconds{r.expires_ns}};
    }

    static lease_error refusal(errc c, const record& r, std::int64_t now) {
        lease_error e{make_error_code(c), {}, 0, {}};
        e.now = std::chrono::nanoseconds{now};
        if (live(r, now)) {
            e.holder = r.holder;
            e.token = r.token;
            e.expires_at = std::chrono::nanoseconds{r.expires_ns};
        }
        return e;
    }

    static result<lease, lease_error> acquire(std::string_view name, record& r, std::string_view owner,
                                              std::int64_t ttl_ns, std::int64_t now) {
        if (live(r, now)) return unexpected(refusal(errc::lease_held, r, now));
        r.held = true;
        r.holder = std::string(owner);
        r.token = r.last_token = next_token(r.last_token, now);
        r.ttl_ns = ttl_ns;
        r.expires_ns = add_saturated(now, ttl_ns);
        return view(name, r);
    }

    static bool is_holder(const record& r, std::string_view owner, fence_token token) noexcept {
        return r.held && r.holder == owner && (token == 0 || token == r.token);
    }

    static result<lease, lease_error> renew(std::string_view name, record& r, std::string_view owner,
                                            fence_token token, std::int64_t ttl_ns, std::int64_t now) {
        if (!is_holder(r, owner, token)) return unexpected(refusal(errc::not_lease_holder, r, now));
        if (!live(r, now)) return unexpected(refusal(errc::lease_expired, r, now));
        if (ttl_ns > 0) r.ttl_ns = ttl_ns;
        r.expires_ns = add_saturated(now, r.ttl_ns);
        return view(name, r);
    }

    static result<void, lease_error> release(record& r, std::string_view owner, fence_token token,
                                             std::int64_t now) {
        if (!is_holder(r, owner, token)) return unexpected(refusal(errc::not_lease_holder, r, now));
        r.held = false;
        r.holder.clear();
        r.expires_ns = 0;
        return {};
    }

    static std::optional<lease> read(std::string_view name, const record* r, std::int64_t now) {
        if (!r || !live(*r, now)) return std::nullopt;
        return view(name, *r);
    }
};

/// The waiting queue of one lease name: first come, first served. A place
/// is a short lease of its own (renewed by every queued acquire), so a
/// waiter that died or gave up without leaving stops blocking the ones
/// behind it when its place lapses.
struct lease_queue_rule {
    struct record {
        std::uint64_t last_ticket = 0;  // never goes back (a lapsed waiter's ticket is never reissued)
        std::vector<lease_waiter> waiters;  // in arrival order
        friend bool operator==(const record& a, const record& b) {
            if (a.last_ticket != b.last_ticket || a.waiters.size() != b.waiters.size()) return false;
            for (std::size_t i = 0; i < a.waiters.size(); ++i)
                if (a.waiters[i].ticket != b.waiters[i].ticket || a.waiters[i].until != b.waiters[i].until) return false;
            return true;
        }
    };

    static void purge(record& q, std::int64_t now) {
        std::erase_if(q.waiters, [&](const lease_waiter& w) { return w.until.count() <= now; });
    }

    /// A new place at the back of the line.
    static std::uint64_t enqueue(record& q, std::string_view who, std::int64_t place_ttl_ns, std::int64_t now) {
        purge(q, now);
        const std::uint64_t ticket = ++q.last_ticket;
        q.waiters.push_back(lease_waiter{ticket, std::string(who), std::chrono::nanoseconds{add_saturated(now, place_ttl_ns)}});
        return ticket;
    }

    /// Leaves the line (true when the place was there).
    static bool leave(record& q, std::uint64_t ticket) {
        return std::erase_if(q.waiters, [&](const lease_waiter& w) { return w.ticket == ticket; }) > 0;
    }

    /// The first live place, if any (lapsed places are dropped first).
    static const lease_waiter* head(record& q, std::int64_t now) {
        purge(q, now);
        return q.waiters.empty() ? nullptr : &q.waiters.front();
    }

    /// The queued acquire: grants the lease to `ticket` when it is first in
    /// line and nobody holds the lease (the grant takes it out of the line);
    /// otherwise renews its place and refuses with errc::lease_held, `ahead`
    /// telling its position. A place that lapsed: errc::wait_place_lost
    /// (enqueue again, at the back).
    static result<lease, lease_error> acquire(std::string_view name, lease_rule::record& l, record& q, std::uint64_t ticket,
                                              std::string_view owner, std::int64_t ttl_ns, std::int64_t place_ttl_ns,
                                              std::int64_t now) {
        purge(q, now);
        std::size_t ahead = 0;
        auto it = q.waiters.begin();
        for (; it != q.waiters.end() && it->ticket != ticket; ++it) ++ahead;
        if (it == q.waiters.end() || it->who != owner) return unexpected(lease_rule::refusal(errc::wait_place_lost, l, now));
        // The place is renewed once a quarter of its term is gone: a waiter
        // that comes back every half term (the lease manager) renews every
        // time, with margin for a late wake, and a store that persists the
        // place writes at most four times a term, not on every poll.
        if (it->until.count() - now < place_ttl_ns - place_ttl_ns / 4) it->until = std::chrono::nanoseconds{add_saturated(now, place_ttl_ns)};
        if (ahead > 0 || lease_rule::live(l, now)) {
            auto e = lease_rule::refusal(errc::lease_held, l, now);
            e.ahead = ahead;
            return unexpected(std::move(e));
        }
        auto granted = lease_rule::acquire(name, l, owner, ttl_ns, now);
        if (granted) q.waiters.erase(it);
        return granted;
    }
};

}  // namespace detail

}  // namespace coord
