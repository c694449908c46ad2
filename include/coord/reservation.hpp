// SPDX-License-Identifier: Apache-2.0
// coord/reservation.hpp: time reservations, how time-ordered ID generators
// (Snowflake, UUIDv7) keep their order across restarts.
//
// A generator may only issue IDs whose time lies below a reserved-until time
// that it first made durable in its store, a window at a time (not per ID).
// A generator started after a restart reads the reservation and starts above
// it, even when the clock was set back meanwhile. The reservation can be
// fenced by a lease token, so that a generator that lost its lease cannot
// extend into its successor's time.
//
//   auto until = store.time_reserve("snowflake/7", now_ms + 200, lease_token);
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <string_view>

#include "coord/error.hpp"
#include "coord/fence.hpp"
#include "coord/rules/reservation.hpp"
#include "coord/result.hpp"

namespace coord {

/// A store that keeps, per key, a reserved-until time and a fence.
///
/// Semantic requirements the compiler cannot check:
/// - time_reserve(key, until_ms, token) is ONE atomic step: refuse with
///   errc::stale_fence (changing nothing) when token is below the highest
///   token seen for key; else record token as highest, set reserved-until to
///   max(reserved-until, until_ms) and return the new reserved-until (Unix
///   milliseconds; 0 for a key never reserved). until_ms 0 just reads (and fences).
/// - reserved-until never goes back, across threads, processes and restarts.
/// - A transport failure returns its error and is never reported as success;
///   a write that may have happened is errc::outcome_unknown: the generator
///   then issues nothing past the reservation it knows and asks again (a
///   reservation that did apply only moved reserved-until ahead: a hole in
///   time, never a reissue).
template <class S>
concept time_reservation_store = requires(S& s, std::string_view key, std::int64_t until_ms, fence_token t) {
    { s.time_reserve(key, until_ms, t) } -> std::same_as<result<std::int64_t, write_error>>;
};

/// For generators that keep no reservation: order holds within the process
/// only. time_reserve always grants what is asked.
struct no_time_reservation {
    /// Grants `until_ms`: there is no record to keep.
    result<std::int64_t, write_error> time_reserve(std::string_view, std::int64_t until_ms, fence_token) {
        return until_ms;
    }
};
static_assert(time_reservation_store<no_time_reservation>);

}  // namespace coord
