// SPDX-License-Identifier: Apache-2.0
// coord/etcd/segment.hpp: segment_allocator on etcd (Leaf ranges).
//
// The tag's counter, PREFIX/segment/TAG, holds the last ID handed out.
// segment_allocate reads it and its mod revision (a missing counter starts
// at the store's segment floor), then a transaction writes the counter
// advanced by the step only if the mod revision is unchanged and the store's
// identity key is the one this store object knows (refused: a third reads
// the identity key, and a store whose identity is gone or another refuses):
// 2 round trips, and again when another allocator got in between (up to 64
// times, then errc::contention). Ranges never overlap: every range is the
// counter's step from one revision to the next.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "coord/detail/backoff.hpp"
#include "coord/etcd/context.hpp"
#include "coord/segment.hpp"

namespace coord::etcd {

template <class Clock>
class segment_adapter {
public:
    explicit segment_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    result<segment_range> segment_allocate(std::string_view tag, std::uint64_t step) {
        if (step == 0 || step > segment_id_limit - 1) return unexpected(coord::make_error_code(coord::errc::range_exhausted));
        const std::string key = ctx_.key().of("segment", tag);
        using R = result<segment_range>;
        auto decided = coord::detail::retry_conflicts(coord::detail::conflict_tries, [&](int) -> std::optional<R> {
            auto id = ctx_.identity();
            if (!id) return R(unexpected(id.error()));
            auto r = ctx_.txn({}, {detail::get(key)}, {}, false);
            if (!r) return R(unexpected(r.error()));
            if (r->ranges.size() != 1) return R(unexpected(detail::bad("segment allocate: one range expected")));
            // A missing counter continues above the store's segment floor.
            std::uint64_t used = id->floors.segment;
            std::int64_t mod = 0;
            if (r->ranges[0]) {
                auto v = detail::unpadded(r->ranges[0]->value);
                if (!v) return R(unexpected(detail::bad("segment counter is not a number")));
                used = *v;
                mod = r->ranges[0]->mod_revision;
            }
            if (step > segment_id_limit - 1 - used) return R(unexpected(coord::make_error_code(coord::errc::range_exhausted)));
            const std::uint64_t last = used + step;
            auto w = ctx_.txn({detail::mod_is(key, mod), ctx_.identity_is(ctx_.key(), *id)},
                              {detail::put(key, std::to_string(last))}, {}, true);
            if (!w) return R(unexpected(w.error()));
            if (w->succeeded) return R(segment_range{used + 1, last + 1});
            if (auto bad = ctx_.identity_changed()) return R(unexpected(*bad));
            return std::nullopt;  // another allocator got in between: again
        });
        if (decided) return *decided;
        return unexpected(detail::contention("segment allocate"));
    }

private:
    detail::context<Clock>& ctx_;
};

}  // namespace coord::etcd
