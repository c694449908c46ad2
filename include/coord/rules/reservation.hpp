// SPDX-License-Identifier: Apache-2.0
// coord/rules/reservation.hpp: the time reservation rule (how time-ordered ID generators keep their order across restarts).
//
// A pure transition on records: no store, no clock, no I/O. The memory and
// file stores apply it; every engine's SQL or script is held to it by the
// conformance suites (tests/conformance/). Include the primitive's header
// (coord/reservation.hpp) for its store concept and class template.
#pragma once

#include <algorithm>
#include <cstdint>

#include "coord/error.hpp"
#include "coord/result.hpp"
#include "coord/rules/fence.hpp"

namespace coord {

namespace detail {

/// The reservation rule shared by the embedded stores (the reference model).
struct reservation_rule {
    struct record {
        fence_token highest = 0;
        std::int64_t until_ms = 0;
    };
    static result<std::int64_t, write_error> reserve(record& r, std::int64_t until_ms, fence_token token) {
        if (token < r.highest) return unexpected(write_error{make_error_code(errc::stale_fence), r.highest});
        r.highest = token;
        r.until_ms = std::max(r.until_ms, until_ms);
        return r.until_ms;
    }
};

}  // namespace detail

}  // namespace coord
