// SPDX-License-Identifier: Apache-2.0
// coord/postgres/lease.hpp: lease_store on PostgreSQL.
//
// Round trips: every operation 1, a call of one PL/pgSQL function
// (coord_lease_acquire, _renew, _release, _read) that locks the row
// (SELECT ... FOR UPDATE), judges the term on the server's clock
// (clock_timestamp(), read inside the statement) and writes, all in the
// statement's one transaction.
#pragma once

#ifndef COORD_STORE_HEADER_INCLUDED
#define COORD_STORE_HEADER_INCLUDED 1
#endif

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coord/lease.hpp"
#include "coord/postgres/connection.hpp"

namespace coord::postgres {

template <class Clock>
class lease_adapter {
public:
    lease_adapter(pool& p, const Clock& clock) noexcept : pool_(p), clock_(clock) {}

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
        pool::call c(pool_);
        auto r = c.exec("SELECT * FROM coord_lease_read($1, $2)", {param(name), now_ns_param(clock_)}, false);
        if (!r) return unexpected(r.error());
        if (r->rows() == 0) return std::optional<lease>{};
        return std::optional<lease>{lease{std::string(name), r->text(0, 0), r->u64(0, 1),
                                          std::chrono::nanoseconds{r->i64(0, 2)}, std::chrono::nanoseconds{r->i64(0, 3)}}};
    }

private:
    // status 0: the lease; 1: `refused` (held, or not the holder); 2: expired.
    result<lease, lease_error> call(const char* sql, std::string_view name, std::vector<detail::param_value> params,
                                    coord::errc refused) {
        pool::call c(pool_);
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
    const Clock& clock_;
};

}  // namespace coord::postgres
