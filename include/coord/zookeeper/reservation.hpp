// SPDX-License-Identifier: Apache-2.0
// coord/zookeeper/reservation.hpp: time_reservation_store on ZooKeeper (the
// Snowflake generator's high-water mark of reserved time, per node id).
//
// ROOT/reservation/KEY holds the highest token and the reservation; the rule
// of coord/rules/reservation.hpp is applied to what was read and written
// with a conditional setData on its version (or create), read and ruled
// again on a conflict (up to 64 times). 2 round trips; a key's first
// reservation 4 (context::absent: the store's identity and the count of
// records checked, the reservation floor kept).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "coord/detail/backoff.hpp"
#include "coord/reservation.hpp"
#include "coord/rules/reservation.hpp"
#include "coord/zookeeper/context.hpp"

namespace coord::zookeeper {

template <class Clock>
class reservation_adapter {
public:
    explicit reservation_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    result<std::int64_t, write_error> time_reserve(std::string_view key, std::int64_t until_ms, fence_token token) {
        const std::string p = ctx_.path("reservation", key);
        using R = result<std::int64_t, write_error>;
        auto decided = coord::detail::retry_conflicts(coord::detail::conflict_tries, [&](int) -> std::optional<R> {
            auto n = ctx_.get(p);
            if (!n) return R(unexpected(write_error{n.error(), 0}));
            coord::detail::reservation_rule::record rec;
            int version = -1;
            std::optional<typename detail::context<Clock>::absence> gap;
            if (*n) {
                auto f = detail::decode((*n)->data, 2);
                auto h = f ? detail::u64((*f)[0]) : std::nullopt;
                auto u = f ? detail::i64((*f)[1]) : std::nullopt;
                if (!h || !u) return R(unexpected(write_error{detail::corrupt(p, "a reservation record is malformed"), 0}));
                rec.highest = *h;
                rec.until_ms = *u;
                version = (*n)->stat.version;
            } else {  // a new key, or one whose record was lost: the floor, after the checks
                auto a = ctx_.absent("reservation");
                if (!a) return R(unexpected(write_error{a.error(), 0}));
                rec.until_ms = a->floors.reservation_ms;
                gap = std::move(*a);
            }
            auto ruled = coord::detail::reservation_rule::reserve(rec, until_ms, token);
            if (!ruled) return R(unexpected(ruled.error()));
            const std::string data = detail::encode({std::to_string(rec.highest), std::to_string(rec.until_ms)});
            auto w = gap ? ctx_.create_counted(*gap, p, data) : ctx_.set(p, data, version);
            if (!w) return R(unexpected(write_error{w.error(), 0}));
            if (w->rc == ZOK) return R(*ruled);
            return std::nullopt;
        });
        if (decided) return *decided;
        return unexpected(write_error{detail::contention("time reserve"), 0});
    }

private:
    detail::context<Clock>& ctx_;
};

}  // namespace coord::zookeeper
