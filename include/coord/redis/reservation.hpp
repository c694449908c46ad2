// SPDX-License-Identifier: Apache-2.0
// coord/redis/reservation.hpp: time_reservation_store on Redis (the Snowflake
// generator's high-water mark of reserved time, per node).
//
// Round trips: time_reserve 1, one script: the store's identity checked, the
// fence rule applied to the node lease's token, the reservation raised
// (never lowered). A store that lost its data refuses
// (errc::store_uninitialized) instead of letting a generator reissue times.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "coord/redis/context.hpp"
#include "coord/redis/scripts.hpp"
#include "coord/reservation.hpp"

namespace coord::redis {

template <class Clock>
class reservation_adapter {
public:
    explicit reservation_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    result<std::int64_t, write_error> time_reserve(std::string_view key, std::int64_t until_ms, fence_token token) {
        pool::call c(ctx_.calls());
        auto r = ctx_.checked(c, scripts::time_reserve, {ctx_.key().of("reservation", key)},
                              {std::to_string(until_ms), std::to_string(token)}, true);
        if (!r) return unexpected(write_error{r.error(), 0});
        const auto status = detail::element(r->get(), 0);
        if (status == "S") {
            const auto highest = detail::u64_of(detail::element(r->get(), 1));
            if (!highest) return unexpected(write_error{detail::bad_reply("time reserve"), 0});
            return unexpected(write_error{coord::make_error_code(coord::errc::stale_fence), *highest});
        }
        const auto until = detail::i64_of(detail::element(r->get(), 1));
        if (status != "OK" || !until) return unexpected(write_error{detail::bad_reply("time reserve"), 0});
        return *until;
    }

private:
    detail::context<Clock>& ctx_;
};

}  // namespace coord::redis
