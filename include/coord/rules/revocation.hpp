// SPDX-License-Identifier: Apache-2.0
// coord/rules/revocation.hpp: the token revocation rule: a denylist of token IDs until their exp, and a not-before time per subject.
//
// A pure transition on records: no store, no clock, no I/O. The memory and
// file stores apply it; every engine's SQL or script is held to it by the
// conformance suites (tests/conformance/). Include the primitive's header
// (coord/session.hpp) for its store concept and class template.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

namespace coord {

namespace detail {

/// The revocation rule: one denied token's end, one subject's not-before.
/// Times are Unix seconds (the token's own exp and iat).
struct revocation_rule {
    /// A denial lasts until the latest exp it was given.
    static void deny_until(std::int64_t& until, std::int64_t until_s) noexcept { until = std::max(until, until_s); }
    /// A subject's not-before never moves back.
    static void not_before(std::int64_t& nb, std::int64_t not_before_s) noexcept { nb = std::max(nb, not_before_s); }
    /// Whether a denial recorded until `until` still holds at `now_s` (past the
    /// token's exp the entry may be dropped: the token cannot validate anyway).
    static bool denied(std::int64_t until, std::int64_t now_s) noexcept { return now_s <= until; }
    /// Whether a token issued at `iat` (nullopt: without iat) falls before the subject's not-before.
    static bool before_not_before(std::optional<std::int64_t> iat, std::int64_t nb) noexcept { return !iat || *iat < nb; }
};

}  // namespace detail

}  // namespace coord
