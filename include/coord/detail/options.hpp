// SPDX-License-Identifier: Apache-2.0
// coord/detail/options.hpp: what every store's options share, written once:
// the defaults they start from (one table, docs/internals/architecture.md "Options and
// their defaults") and the checks: a timeout is 1 ms to 24 h (a store's
// operation, connect, lock and busy timeouts, the cron runner's grace),
// refused with std::invalid_argument naming the option.
#pragma once

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace coord::detail {

/// The defaults of every engine's options: an option of the same name has
/// the same default on every engine.
namespace defaults {
/// Connections kept per store object (PostgreSQL, Redis, etcd).
inline constexpr std::size_t pool_size = 4;
/// Connections a store object may open for waiting acquires, which hold one
/// for their whole wait (PostgreSQL LISTEN, Redis SUBSCRIBE): a pool of their
/// own, opened as waits need them, so that waiters never starve the calls.
inline constexpr std::size_t listener_pool_size = 64;
/// Bounds one call to the server, from sending to the answer.
inline constexpr std::chrono::milliseconds operation_timeout{5000};
/// Bounds making one connection (or, on ZooKeeper, a session).
inline constexpr std::chrono::milliseconds connect_timeout{3000};
/// Bounds the wait for a lock the store takes (the file store's lock,
/// SQLite's busy timeout).
inline constexpr std::chrono::milliseconds lock_timeout{10000};
/// The key prefix on stores that share a key space (Redis, etcd).
inline constexpr const char* prefix = "coord";
}  // namespace defaults

/// The options of the pool waiting acquires listen on: the store's own,
/// with defaults::listener_pool_size connections.
template <class Options>
Options listener_options(Options o) {
    o.pool_size = defaults::listener_pool_size;
    return o;
}

/// Throws std::invalid_argument("<what> must be 1 ms to 24 h") unless
/// 1 ms <= d <= 24 h.
template <class Rep, class Period>
void check_timeout(const char* what, std::chrono::duration<Rep, Period> d) {
    if (d < std::chrono::milliseconds{1} || d > std::chrono::hours{24})
        throw std::invalid_argument(std::string(what) + " must be 1 ms to 24 h");
}

}  // namespace coord::detail
