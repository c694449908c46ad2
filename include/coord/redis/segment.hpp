// SPDX-License-Identifier: Apache-2.0
// coord/redis/segment.hpp: segment_allocator on Redis (Leaf ranges).
//
// Round trips: segment_allocate 1, one script: INCRBY on the tag's counter
// (the last ID handed out), which the server does in 64-bit integers, so
// ranges never overlap, also across processes and machines, up to 2^63-1;
// the store's identity is checked when the counter was 0 or missing (the
// increment taken back when the identity is gone or another). A store that lost its data refuses
// (errc::store_uninitialized) instead of starting the tag at 1 again; and a
// range that begins below the end of one this store object already got (a
// restored snapshot, a failover to a replica without the last writes) is
// refused with errc::state_went_back.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "coord/redis/context.hpp"
#include "coord/redis/scripts.hpp"
#include "coord/segment.hpp"

namespace coord::redis {

template <class Clock>
class segment_adapter {
public:
    explicit segment_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    result<segment_range> segment_allocate(std::string_view tag, std::uint64_t step) {
        if (step == 0 || step > segment_id_limit - 1) return unexpected(coord::make_error_code(coord::errc::range_exhausted));
        // One allocation at a time per store object, so that ranges come back
        // in the order the server handed them out (the check below).
        std::lock_guard lk(mutex_);
        pool::call c(ctx_.calls());
        auto r = ctx_.checked(c, scripts::segment_allocate, {ctx_.key().of("segment", tag)}, {std::to_string(step)}, true);
        if (!r) return unexpected(r.error());
        if (detail::text(r->get()) == "E") return unexpected(coord::make_error_code(coord::errc::range_exhausted));
        const auto last = detail::u64_of(detail::text(r->get()));
        if (!last || *last < step) return unexpected(detail::bad_reply("segment allocate"));
        const segment_range range{*last - step + 1, *last + 1};
        auto& seen = ends_[std::string(tag)];
        if (range.begin < seen)
            return unexpected(coord::error(coord::make_error_code(coord::errc::state_went_back),
                                           "Redis handed out a range of '" + std::string(tag) + "' from " +
                                               std::to_string(range.begin) + ", below " + std::to_string(seen) +
                                               " which this process already got: the store went back (lost writes)"));
        seen = range.end;
        return range;
    }

private:
    detail::context<Clock>& ctx_;
    std::mutex mutex_;
    std::map<std::string, std::uint64_t, std::less<>> ends_;  // per tag: the end of the last range handed out here
};

}  // namespace coord::redis
