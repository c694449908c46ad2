// SPDX-License-Identifier: Apache-2.0
// coord/postgres/segment.hpp: segment_allocator on PostgreSQL (Leaf ranges).
//
// Round trips: segment_allocate 1, one INSERT ... ON CONFLICT ... DO UPDATE
// ... RETURNING: the tag's row is locked and advanced in one statement, so
// ranges never overlap, also across processes and machines; the store's
// guard is compared and the writer's step taken inside it (connection.hpp,
// pool::call::exec_checking, writer_step). The first call of a store
// object: 1 more (the guard alone); a refusal 1 more; a connection's first
// call, and its first after a day without one: the guarded statement, 1.
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
        // one seen, and the writer's step was taken (the guard's comparison
        // and step: pool::call::exec_checking, writer_step); without the
        // step, the guarded statement.
        const std::vector<param_value> ps{param(tag), param(static_cast<std::int64_t>(step))};
        auto w = c.writer_step();
        auto r = w ? c.exec_checking(
                         "WITH w AS (UPDATE coord_writer SET n = $4 "
                         "WHERE id = $5 AND n BETWEEN $6 AND $7 AND (cardinality($8::text[]) = 0 OR coord_writers_kept($8, $9, $10)) RETURNING 1) "
                         "INSERT INTO coord_segment AS s (tag, next) SELECT $1, segment_floor + 1 + $2::numeric "
                         "FROM coord_store, w WHERE id = 1 AND " COORD_PG_STORE_SEEN " = $3 AND segment_floor + 1 + "
                         "$2::numeric <= 9223372036854775808 ON CONFLICT (tag) DO UPDATE SET next = s.next + "
                         "$2::numeric WHERE s.next + $2::numeric <= 9223372036854775808 RETURNING next - $2::numeric, next",
                         joined(ps, {param(*seen)}, *w), true)
                   : c.exec("INSERT INTO coord_segment AS s (tag, next) SELECT $1, segment_floor + 1 + $2::numeric "
                            "FROM coord_store WHERE id = 1 AND segment_floor + 1 + $2::numeric <= 9223372036854775808 "
                            "ON CONFLICT (tag) DO UPDATE SET next = s.next + $2::numeric "
                            "WHERE s.next + $2::numeric <= 9223372036854775808 RETURNING next - $2::numeric, next",
                            ps, true);
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
