// SPDX-License-Identifier: Apache-2.0
// coord/zookeeper/segment.hpp: segment_allocator on ZooKeeper (Leaf ranges).
//
// The tag's counter, ROOT/segment/TAG, holds the last ID handed out. A range
// is a versioned compare-and-set: read the counter and its version, write
// it advanced by the step with a conditional setData (or create, the first
// time); the ensemble refuses the write if another allocator got in between,
// and it is read again (up to 64 times, then errc::contention). 2 round
// trips; ranges never overlap, across processes, machines, server restarts
// and leader elections. A tag's first range (4 round trips) checks the
// store's identity and the count of counters in ROOT/segment and starts
// above the segment floor (context::absent): a counter deleted by another
// client is detected (errc::state_went_back), never started over.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "coord/detail/backoff.hpp"
#include "coord/segment.hpp"
#include "coord/zookeeper/context.hpp"

namespace coord::zookeeper {

template <class Clock>
class segment_adapter {
public:
    explicit segment_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    result<segment_range> segment_allocate(std::string_view tag, std::uint64_t step) {
        if (step == 0 || step > segment_id_limit - 1) return unexpected(coord::make_error_code(coord::errc::range_exhausted));
        const std::string p = ctx_.path("segment", tag);
        using R = result<segment_range>;
        auto decided = coord::detail::retry_conflicts(coord::detail::conflict_tries, [&](int) -> std::optional<R> {
            auto n = ctx_.get(p);
            if (!n) return R(unexpected(n.error()));
            std::uint64_t used = 0;
            int version = -1;
            std::optional<typename detail::context<Clock>::absence> gap;
            if (*n) {
                auto v = detail::u64((*n)->data);
                if (!v) return R(unexpected(detail::corrupt(p, "a segment counter is not a number")));
                used = *v;
                version = (*n)->stat.version;
            } else {  // a new tag, or one whose counter was lost: the floor, after the checks
                auto a = ctx_.absent("segment");
                if (!a) return R(unexpected(a.error()));
                used = a->floors.segment;
                gap = std::move(*a);
            }
            if (step > segment_id_limit - 1 - used) return R(unexpected(coord::make_error_code(coord::errc::range_exhausted)));
            const std::uint64_t last = used + step;
            auto w = gap ? ctx_.create_counted(*gap, p, std::to_string(last)) : ctx_.set(p, std::to_string(last), version);
            if (!w) return R(unexpected(w.error()));
            if (w->rc == ZOK) return R(segment_range{used + 1, last + 1});
            return std::nullopt;
        });
        if (decided) return *decided;
        return unexpected(detail::contention("segment allocate"));
    }

private:
    detail::context<Clock>& ctx_;
};

}  // namespace coord::zookeeper
