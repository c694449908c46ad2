// SPDX-License-Identifier: Apache-2.0
// coord/postgres/segment.hpp: segment_allocator on PostgreSQL (Leaf ranges).
//
// Round trips: segment_allocate 1, one INSERT ... ON CONFLICT ... DO UPDATE
// ... RETURNING: the tag's row is locked and advanced in one statement, so
// ranges never overlap, also across processes and machines; the store's
// guard is compared inside it (connection.hpp, pool::call::exec_checking).
// The first call of a store object, and a refusal: 1 more (the guard alone).
// A tag without a counter (new, or lost) continues above the store's segment
// floor (store::initialize).
#pragma once

#include <cstdint>
#include <string_view>

#include "coord/postgres/context.hpp"
#include "coord/segment.hpp"

namespace coord::postgres {

template <class Clock>
class segment_adapter {
public:
    explicit segment_adapter(detail::context<Clock>& ctx) noexcept : pool_(ctx.calls()) {}

    result<segment_range> segment_allocate(std::string_view tag, std::uint64_t step) {
        using namespace detail;
        if (step == 0 || step > segment_id_limit - 1) return unexpected(coord::make_error_code(coord::errc::range_exhausted));
        pool::call c(pool_);
        auto seen = c.seen();
        if (!seen) return unexpected(seen.error());
        // The row to insert comes from the store's row only when it is the
        // one seen (the guard's comparison: pool::call::exec_checking).
        auto r = c.exec_checking(
            "INSERT INTO coord_segment AS s (tag, next) SELECT $1, segment_floor + 1 + $2::numeric FROM coord_store "
            "WHERE id = 1 AND " COORD_PG_STORE_SEEN " = $3 AND segment_floor + 1 + $2::numeric <= "
            "9223372036854775808 ON CONFLICT (tag) DO UPDATE SET next = s.next + $2::numeric "
            "WHERE s.next + $2::numeric <= 9223372036854775808 RETURNING next - $2::numeric, next",
            {param(tag), param(static_cast<std::int64_t>(step)), param(*seen)}, true);
        if (!r) return unexpected(r.error());
        if (r->rows() == 1) return segment_range{r->u64(0, 0), r->u64(0, 1)};
        // Nothing allocated: the store is not the one seen (the guard says
        // how), or the range is exhausted.
        if (auto g = c.check(); !g) return unexpected(g.error());
        return unexpected(coord::make_error_code(coord::errc::range_exhausted));
    }

private:
    pool& pool_;
};

}  // namespace coord::postgres
