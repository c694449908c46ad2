// SPDX-License-Identifier: Apache-2.0
// coord/postgres/reservation.hpp: time_reservation_store on PostgreSQL (the
// Snowflake generator's high-water mark of reserved time, per node).
//
// Round trips: time_reserve 1, a call of coord_time_reserve, which locks the
// key's row, applies the fence rule to the node lease's token and raises the
// reservation, in the statement's one transaction.
#pragma once

#include <cstdint>
#include <string_view>

#include "coord/postgres/context.hpp"
#include "coord/reservation.hpp"

namespace coord::postgres {

template <class Clock>
class reservation_adapter {
public:
    explicit reservation_adapter(detail::context<Clock>& ctx) noexcept : pool_(ctx.calls()) {}

    result<std::int64_t, write_error> time_reserve(std::string_view key, std::int64_t until_ms, fence_token token) {
        using namespace detail;
        pool::call c(pool_);
        auto r = c.exec("SELECT * FROM coord_time_reserve($1, $2, $3)", {param(key), param(until_ms), param_u64(token)},
                        true);
        if (!r) return unexpected(write_error{r.error(), 0});
        if (r->rows() != 1) return unexpected(write_error{make_error_code(errc::bad_answer), 0});
        if (r->i64(0, 0) == 1)
            return unexpected(write_error{coord::make_error_code(coord::errc::stale_fence), r->u64(0, 1)});
        return r->i64(0, 1);
    }

private:
    pool& pool_;
};

}  // namespace coord::postgres
