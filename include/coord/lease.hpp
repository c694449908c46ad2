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
//   auto l = leases.acquire("db-primary", "node-a#1", std::chrono::seconds{10});
//   if (l) write_with_fence(l->token);        // pass the token to every write
//   else if (l.error() == coord::errc::lease_held) wait_until(l.error().expires_at);
//
// What a lease alone cannot do: stop a holder that paused past its term from
// writing when it wakes. The resource must check the token (coord/fence.hpp).
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "coord/clock.hpp"
#include "coord/detail/text.hpp"
#include "coord/error.hpp"
#include "coord/fence.hpp"
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

/// Grants, renews and releases leases in a lease_store, checking the caller's
/// arguments first. Thread safety: as safe as the store (every model in coord
/// is thread-safe). Holds a reference: the store must outlive it.
///
/// Owners: give each process instance its own owner string (host, pid and a
/// random part), or use the lease-object forms of renew/release, which also
/// check the token.
template <lease_store Store>
class basic_lease_manager {
public:
    explicit basic_lease_manager(Store& store) noexcept : store_(&store) {}

    /// Grants `name` to `owner` for `ttl`, with a new fence token.
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
        if (owner.empty()) throw std::invalid_argument("coord::lease: owner must not be empty");
        if (!detail::valid_name_text(owner))
            throw std::invalid_argument("coord::lease: owner must be valid UTF-8 without NUL");
    }
    static void check_name(std::string_view name) {
        if (name.empty()) throw std::invalid_argument("coord::lease: name must not be empty");
        if (!detail::valid_name_text(name)) throw std::invalid_argument("coord::lease: name must be valid UTF-8 without NUL");
    }
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
