// SPDX-License-Identifier: Apache-2.0
// coord/etcd/reservation.hpp: time_reservation_store on etcd (the Snowflake
// generator's high-water mark of reserved time, per node).
//
// PREFIX/reservation/KEY holds "highest-token until-ms". time_reserve reads
// it and its mod revision (a missing record starts at the store's
// reservation floor), applies the rule, and a transaction writes it only if
// the mod revision and the store's identity key are unchanged (refused: the
// identity key read, and a store whose identity is gone or another refuses): 2 round trips, again on a conflict (up to
// 64 times, then errc::contention).
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include "coord/detail/backoff.hpp"
#include "coord/etcd/context.hpp"
#include "coord/reservation.hpp"

namespace coord::etcd {

template <class Clock>
class reservation_adapter {
public:
    explicit reservation_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    result<std::int64_t, write_error> time_reserve(std::string_view key, std::int64_t until_ms, fence_token token) {
        const std::string k = ctx_.key().of("reservation", key);
        using R = result<std::int64_t, write_error>;
        auto decided = coord::detail::retry_conflicts(coord::detail::conflict_tries, [&](int) -> std::optional<R> {
            auto id = ctx_.identity();
            if (!id) return R(unexpected(write_error{id.error(), 0}));
            auto r = ctx_.txn({}, {detail::get(k)}, {}, false);
            if (!r) return R(unexpected(write_error{r.error(), 0}));
            if (r->ranges.size() != 1) return R(unexpected(write_error{detail::bad("time reserve: one range expected"), 0}));
            coord::detail::reservation_rule::record rec;
            // A missing record starts at the store's reservation floor.
            rec.until_ms = id->floors.reservation_ms;
            std::int64_t mod = 0;
            if (r->ranges[0]) {
                const std::string& v = r->ranges[0]->value;
                const auto space = v.find(' ');
                auto h = detail::unpadded(v.substr(0, space));
                std::int64_t u = 0;
                const char* b = v.data() + (space == std::string::npos ? v.size() : space + 1);
                auto [p, ec] = std::from_chars(b, v.data() + v.size(), u);
                if (!h || space == std::string::npos || ec != std::errc{} || p != v.data() + v.size())
                    return R(unexpected(write_error{detail::bad("reservation record is malformed"), 0}));
                rec.highest = *h;
                rec.until_ms = u;
                mod = r->ranges[0]->mod_revision;
            }
            auto ruled = coord::detail::reservation_rule::reserve(rec, until_ms, token);
            if (!ruled) return R(unexpected(ruled.error()));
            auto w = ctx_.txn({detail::mod_is(k, mod), ctx_.identity_is(ctx_.key(), *id)},
                              {detail::put(k, std::to_string(rec.highest) + " " + std::to_string(rec.until_ms))}, {}, true);
            if (!w) return R(unexpected(write_error{w.error(), 0}));
            if (w->succeeded) return R(*ruled);
            if (auto bad = ctx_.identity_changed()) return R(unexpected(write_error{*bad, 0}));
            return std::nullopt;
        });
        if (decided) return *decided;
        return unexpected(write_error{detail::contention("time reserve"), 0});
    }

private:
    detail::context<Clock>& ctx_;
};

}  // namespace coord::etcd
