// SPDX-License-Identifier: Apache-2.0
// coord/lease.hpp: leases that grant fence tokens, the lock-service side of
// fencing.
//
// A lease gives one holder per name at a time, for a term (the TTL). Every new
// holder gets a fence token larger than any granted before for that name, by
// any holder, also across restarts of a durable store. renew and release act
// only for the current holder, so a late release from a holder whose term
// ended can never remove the next holder's lease.
//
// Expiry is judged on the STORE's clock, the one clock that every holder of
// that store shares (memory: the process's steady clock; file: the machine's
// clock; an engine: the server's clock). The caller's own wall clock is never
// trusted: it can be paused, stepped, or simply different on another machine.
//
//   #include <coord/aliases.hpp>  // memory_store and the everyday aliases
//   coord::memory_store store;
//   coord::lease_manager leases{store};
//   const std::string me = coord::unique_owner();  // host:pid:random, this instance's own
//   auto l = leases.acquire("db-primary", me, std::chrono::seconds{10});
//   if (l) write_with_fence(l->token);        // pass the token to every write
//   else if (l.error() == coord::errc::lease_held) wait_until(l.error().expires_at);
//
// What a lease alone cannot do: stop a holder that paused past its term from
// writing when it wakes. The resource must check the token (coord/fence.hpp).
#pragma once

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "coord/clock.hpp"
#include "coord/detail/term.hpp"
#include "coord/detail/text.hpp"
#include "coord/error.hpp"
#include "coord/fence.hpp"
#include "coord/owner.hpp"
#include "coord/rules/lease.hpp"
#include "coord/result.hpp"

namespace coord {

/// A store that grants leases with fence tokens.
///
/// Semantic requirements the compiler cannot check:
/// - Each operation is ONE atomic step judged on the store's own clock (one
///   clock shared by every holder of the store; the caller's clock is never
///   consulted).
/// - lease_acquire(name, owner, ttl) grants when nobody holds `name` or the
///   holder's term ended (now >= expires_at), with a token larger than every
///   token granted before for `name`, also across restarts of a durable store;
///   otherwise errc::lease_held with the holder, its token and expiry. It
///   refuses while the term runs even when owner is the holder itself.
/// - lease_renew(name, owner, token, ttl) extends the current holder's term to
///   now + ttl (ttl 0: the term it was granted with). token 0 matches any
///   token of that owner. Refusals: errc::not_lease_holder when owner (or
///   token) is not the current holder's; errc::lease_expired when its term
///   already ended (expiry is final: acquire again for a new token).
/// - lease_release(name, owner, token) ends the holder's lease; refused with
///   errc::not_lease_holder for anybody else.
/// - lease_read(name) returns the current holder, or nullopt when the name is
///   free or its term ended.
/// - A transport or I/O failure returns that error and never a grant; when a
///   grant may have happened anyway the code is errc::outcome_unknown. The
///   caller then does not know whether it holds the lease: it must not act
///   as the holder; lease_read (or a later acquire, which a grant to it
///   refuses as held) tells, and the term ends on its own if it was granted.
template <class S>
concept lease_store = requires(S& s, std::string_view name, std::string_view owner, fence_token t,
                               std::chrono::nanoseconds ttl) {
    { s.lease_acquire(name, owner, ttl) } -> std::same_as<result<lease, lease_error>>;
    { s.lease_renew(name, owner, t, ttl) } -> std::same_as<result<lease, lease_error>>;
    { s.lease_release(name, owner, t) } -> std::same_as<result<void, lease_error>>;
    { s.lease_read(name) } -> std::same_as<result<std::optional<lease>>>;
};

/// A lease store whose waiters queue for a name, first come, first served,
/// and are woken when it comes free (a waiting acquire).
///
/// Semantic requirements the compiler cannot check:
/// - lease_enqueue(name, who, place_ttl) puts a new place at the back of
///   name's line and returns its ticket (increasing per name). A place
///   lapses place_ttl after it was last renewed (on the store's clock), so a
///   waiter that died stops blocking the ones behind it.
/// - lease_acquire_queued(name, owner, ttl, ticket, place_ttl) is ONE atomic
///   step: the rule of coord/rules/lease.hpp (lease_queue_rule::acquire):
///   granted, with a new token, only to the first live place when nobody
///   holds the lease; else lease_held with `ahead`, and the place renewed;
///   errc::wait_place_lost for a lapsed place.
/// - lease_dequeue(name, ticket) leaves the line (no error when the place is
///   already gone). lease_queue_read(name): the live places, in order.
/// - lease_waiting(name, ticket) gives the waiter under that ticket an
///   object it keeps while it waits; its wait(ahead, until) returns when
///   this waiter may be next (a release or an expiry of the lease, the
///   places ahead gone), or at `until` (steady clock), whichever is first;
///   it may return early. `ahead` is the waiter's position (0, 1, more) from its last
///   queued acquire (a store that polls may poll the first in line sooner).
///   Only the first waiter in line is woken by a release, not every waiter.
///   A store that notifies keeps listening from the first wait until the
///   object ends, so that no wake sent between two waits is lost and a wait
///   need not ask the store again.
template <class S>
concept lease_queue_store =
    lease_store<S> && requires(S& s, std::string_view name, std::string_view owner, std::chrono::nanoseconds ttl,
                               std::uint64_t ticket, std::chrono::steady_clock::time_point until) {
        { s.lease_enqueue(name, owner, ttl) } -> std::same_as<result<std::uint64_t>>;
        { s.lease_acquire_queued(name, owner, ttl, ticket, ttl) } -> std::same_as<result<lease, lease_error>>;
        { s.lease_dequeue(name, ticket) } -> std::same_as<result<void>>;
        { s.lease_queue_read(name) } -> std::same_as<result<std::vector<lease_waiter>>>;
        { s.lease_waiting(name, ticket).wait(std::size_t{0}, until) } -> std::same_as<void>;
    };

/// A lease store that notifies a change of a name's lease (the engine's
/// watch or notification): lease_watching(name) gives an object whose
/// wait(until) returns true when the caller should read the lease again
/// (the first wait arms the notification and returns true at once, so a
/// change after the caller's next read is not missed; later waits return
/// true when the lease may have changed: a grant, a renewal or a release;
/// wakes without a change are allowed) and false at `until` (steady clock).
/// A term that ends without a release need not be notified: read again by
/// `until` to see it.
template <class S>
concept lease_watch_store =
    lease_store<S> && requires(S& s, std::string_view name, std::chrono::steady_clock::time_point until) {
        { s.lease_watching(name).wait(until) } -> std::same_as<bool>;
    };

/// Grants, renews and releases leases in a lease_store, checking the caller's
/// arguments first. Thread safety: as safe as the store (every model in coord
/// is thread-safe). Holds a reference: the store must outlive it.
///
/// Owners: give each process instance its own owner string
/// (coord::unique_owner(): host, pid and a random part), and prefer the
/// lease-object forms of renew/release, which also check the token.
template <lease_store Store>
class basic_lease_manager {
public:
    /// Leases on `store`, which must outlive the manager.
    explicit basic_lease_manager(Store& store) noexcept : store_(&store) {}

    /// Grants `name` to `owner` for `ttl`, with a new fence token, at once or
    /// not at all (see the acquire with a deadline to wait). It does not
    /// queue: a free lease goes to this call even while waiters are in line
    /// (as a non-fair tryLock does).
    /// Refusals: errc::lease_held (error().holder, token and expires_at say
    /// who and until when), or the store's error. Cost: one store operation.
    /// Throws std::invalid_argument for an empty name or owner, one that is
    /// not valid UTF-8 or holds NUL (the same on every store), or ttl <= 0.
    template <class Rep, class Period>
    result<lease, lease_error> acquire(std::string_view name, std::string_view owner,
                                       std::chrono::duration<Rep, Period> ttl) {
        check(name, owner);
        return store_->lease_acquire(name, owner, checked_ttl(ttl));
    }

    /// Waits for `name` until `deadline` (steady clock): the lease as soon as
    /// it is free (released, or its term ended on the store's clock) and
    /// every waiter that came before has been served; errc::lease_held at
    /// the deadline (error() says who holds it), or the store's error.
    /// Waiters are served in arrival order. A waiter keeps its place by a
    /// short lease of its own (`place_ttl`, renewed while it waits): one that
    /// dies blocks the ones behind it at most that long. A deadline already
    /// passed is one queued try.
    template <class Rep, class Period>
        requires lease_queue_store<Store>
    result<lease, lease_error> acquire(std::string_view name, std::string_view owner,
                                       std::chrono::duration<Rep, Period> ttl,
                                       std::chrono::steady_clock::time_point deadline,
                                       std::chrono::milliseconds place_ttl = std::chrono::seconds{2}) {
        return acquire(name, owner, ttl, deadline, place_ttl, [] {});
    }

    /// As the waiting acquire above, calling `before_try()` just before each
    /// store call that may grant: a holder that bounds its ownership on its
    /// own clock (coord/keeper.hpp) notes there the instant the granting call
    /// was sent.
    template <class Rep, class Period, std::invocable BeforeTry>
        requires lease_queue_store<Store>
    result<lease, lease_error> acquire(std::string_view name, std::string_view owner,
                                       std::chrono::duration<Rep, Period> ttl,
                                       std::chrono::steady_clock::time_point deadline,
                                       std::chrono::milliseconds place_ttl, BeforeTry&& before_try) {
        check(name, owner);
        const auto term = checked_ttl(ttl);
        const auto place = checked_ttl(place_ttl);
        using steady = std::chrono::steady_clock;
        for (;;) {  // one place in line a pass: a new one when the last lapsed
            // The place is a term renewed by the keeper's rule
            // (coord/detail/term.hpp): every half of it from when the last
            // queued acquire (which renews it) was sent.
            detail::renewed_term<steady::time_point> place_term(place, detail::drift_allowance(place), place / 2,
                                                                steady::now());
            auto ticket = store_->lease_enqueue(name, owner, place);
            if (!ticket) return unexpected(lease_error{ticket.error(), {}, 0, {}});
            auto waiting = store_->lease_waiting(name, *ticket);
            for (;;) {
                const auto sent = steady::now();
                before_try();
                auto r = store_->lease_acquire_queued(name, owner, term, *ticket, place);
                if (r) return r;
                if (r.error() == errc::wait_place_lost) break;  // too slow to renew: queue again
                const auto now = steady::now();
                if (r.error() != errc::lease_held || now >= deadline) {
                    (void)store_->lease_dequeue(name, *ticket);
                    return r;
                }
                place_term.renewed(sent);
                // Woken by the store (a release), at the end of the holder's
                // term (the first in line), or in time to renew the place, so
                // that a waiter behind others costs the store one queued
                // acquire per place / 2.
                auto wake = std::min(deadline, place_term.next_renewal);
                const auto& e = r.error();
                if (e.ahead == 0 && e.now.count() != 0 && e.expires_at > e.now)
                    wake = std::min(wake, now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(e.expires_at - e.now));
                waiting.wait(e.ahead, wake);
            }
        }
    }

    /// Who waits for `name`, first in line first (live places only).
    result<std::vector<lease_waiter>> waiters(std::string_view name)
        requires lease_queue_store<Store>
    {
        check_name(name);
        return store_->lease_queue_read(name);
    }

    /// Extends owner's lease on `name` by the term it was granted with.
    /// Refusals: errc::not_lease_holder, errc::lease_expired, or the store's error.
    result<lease, lease_error> renew(std::string_view name, std::string_view owner) {
        check(name, owner);
        return store_->lease_renew(name, owner, 0, std::chrono::nanoseconds{0});
    }
    /// Extends exactly this grant (owner and token must match) by `ttl`.
    template <class Rep, class Period>
    result<lease, lease_error> renew(const lease& l, std::chrono::duration<Rep, Period> ttl) {
        check(l.name, l.owner);
        return store_->lease_renew(l.name, l.owner, l.token, checked_ttl(ttl));
    }
    /// Extends exactly this grant by the term it was granted with.
    result<lease, lease_error> renew(const lease& l) {
        check(l.name, l.owner);
        return store_->lease_renew(l.name, l.owner, l.token, std::chrono::nanoseconds{0});
    }

    /// Ends owner's lease on `name`. Refusals: errc::not_lease_holder when
    /// someone else holds it (their lease stays), or the store's error.
    result<void, lease_error> release(std::string_view name, std::string_view owner) {
        check(name, owner);
        return store_->lease_release(name, owner, 0);
    }
    /// Ends exactly this grant (owner and token must match).
    result<void, lease_error> release(const lease& l) {
        check(l.name, l.owner);
        return store_->lease_release(l.name, l.owner, l.token);
    }

    /// The current holder of `name`, or nullopt when it is free.
    result<std::optional<lease>> holder(std::string_view name) {
        check_name(name);
        return store_->lease_read(name);
    }

private:
    static void check(std::string_view name, std::string_view owner) {
        check_name(name);
        detail::check_name("coord::lease: owner", owner);
    }
    static void check_name(std::string_view name) { detail::check_name("coord::lease: name", name); }
    template <class Rep, class Period>
    static std::chrono::nanoseconds checked_ttl(std::chrono::duration<Rep, Period> ttl) {
        if (ttl <= ttl.zero()) throw std::invalid_argument("coord::lease: ttl must be > 0");
        using ns = std::chrono::nanoseconds;
        if (std::chrono::duration_cast<std::chrono::duration<double, std::nano>>(ttl).count() >
            static_cast<double>(std::numeric_limits<ns::rep>::max() / 2))
            throw std::invalid_argument("coord::lease: ttl is out of range");
        return std::chrono::duration_cast<ns>(ttl);
    }

    Store* store_;
};

}  // namespace coord
