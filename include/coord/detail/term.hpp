// SPDX-License-Identifier: Apache-2.0
// coord/detail/term.hpp: the one rule by which a holder keeps a term that it
// must renew: a lease held by the keeper (and through it the Snowflake node
// lease), a cron run's ledger claim, a waiter's place in a lease queue.
//
// The holder cannot read the store's clock, on which the term ends, so it
// bounds the term on its own steady clock: renew `renew_every` after the last
// renewal (or the grant) was SENT; vouch for the term until the safe
// deadline, the instant that renewal was sent plus the term, less an
// allowance for the two clocks' rates (a share of the term, plus a floor).
// A renewal whose answer did not come (the store unavailable, the outcome
// unknown) is tried again a tenth of the term later, never past the safe
// deadline; past it the term is no longer vouched for, answered or not.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace coord::detail {

/// The defaults of the allowance (keeper_options documents them): the
/// holder's clock may run 1% slower than the store's, plus 2 ms for the
/// clocks' granularity and the delay between reading the clock and sending.
inline constexpr double default_max_clock_drift = 0.01;
inline constexpr std::chrono::milliseconds default_allowance_floor{2};

/// How much earlier than the term the safe deadline falls.
inline std::chrono::nanoseconds drift_allowance(std::chrono::nanoseconds ttl, double drift = default_max_clock_drift,
                                                std::chrono::nanoseconds floor = default_allowance_floor) {
    return std::chrono::nanoseconds{static_cast<std::int64_t>(static_cast<double>(ttl.count()) * drift)} + floor;
}

/// One renewed term on the holder's steady clock (TimePoint: its time_point).
template <class TimePoint>
struct renewed_term {
    using duration = typename TimePoint::duration;

    renewed_term(std::chrono::nanoseconds term, std::chrono::nanoseconds early, std::chrono::nanoseconds every,
                 TimePoint sent)
        : ttl(term), allowance(early), renew_every(every) {
        renewed(sent);
    }

    /// A renewal (or the grant) sent at `sent` was answered.
    void renewed(TimePoint sent) {
        safe_until = sent + std::chrono::duration_cast<duration>(ttl - allowance);
        next_renewal = sent + std::chrono::duration_cast<duration>(renew_every);
    }
    /// A renewal was not answered (unavailable, unknown) at `now`: try again
    /// a tenth of the term later, or at the safe deadline.
    void unanswered(TimePoint now) {
        next_renewal = std::min(now + std::chrono::duration_cast<duration>(ttl / 10), safe_until);
    }
    bool due(TimePoint now) const { return now >= next_renewal; }
    /// Whether the term is still vouched for at `now`.
    bool vouched(TimePoint now) const { return now < safe_until; }
    /// The next instant something is due: a renewal, or the safe deadline.
    TimePoint next_due() const { return std::min(next_renewal, safe_until); }

    std::chrono::nanoseconds ttl;
    std::chrono::nanoseconds allowance;
    std::chrono::nanoseconds renew_every;
    TimePoint safe_until{};
    TimePoint next_renewal{};
};

}  // namespace coord::detail
