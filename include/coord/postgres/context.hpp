// SPDX-License-Identifier: Apache-2.0
// coord/postgres/context.hpp: what every PostgreSQL adapter works through,
// built once per store before the adapters: the pool the calls use (each
// call guarded by what this store object saw of the store's identity:
// connection.hpp, pool::call), the pool waiting acquires listen on, and the
// clock (server_clock: the server reads its own; a test clock's readings are
// sent).
#pragma once

#include <string>
#include <utility>

#include "coord/detail/options.hpp"
#include "coord/postgres/connection.hpp"

namespace coord::postgres::detail {

template <class Clock>
class context {
public:
    context(std::string conninfo, Clock clock, options opts)
        : calls_(conninfo, opts),
          listeners_(std::move(conninfo), coord::detail::listener_options(opts)),
          clock_(std::move(clock)) {
        calls_.guard_with(&seen_);
    }
    context(const context&) = delete;
    context& operator=(const context&) = delete;

    /// The pool of options::pool_size connections every call holds one of.
    pool& calls() noexcept { return calls_; }
    const pool& calls() const noexcept { return calls_; }
    /// Waiting acquires hold a connection for their wait: a pool of their
    /// own, opened as waits need them, so that waiters never starve the calls.
    pool& listeners() noexcept { return listeners_; }
    const Clock& clock() const noexcept { return clock_; }
    /// The store's identity as this store object saw it (pool::call's guard).
    detail::seen_store& seen() noexcept { return seen_; }

private:
    detail::seen_store seen_;
    pool calls_;
    pool listeners_;
    Clock clock_;
};

}  // namespace coord::postgres::detail
