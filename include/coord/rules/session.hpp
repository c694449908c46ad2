// SPDX-License-Identifier: Apache-2.0
// coord/rules/session.hpp: the session rule (creation, idle and absolute expiry, the idle clock), and the records it speaks of.
//
// A pure transition on records: no store, no clock, no I/O. The memory and
// file stores apply it; every engine's SQL or script is held to it by the
// conformance suites (tests/conformance/). Include the primitive's header
// (coord/session.hpp) for its store concept and class template.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "coord/clock.hpp"

namespace coord {

/// What a session store keeps per session (under the hash of its ID). Times
/// are Unix milliseconds on the store's clock.
struct session_record {
    std::string user;  ///< the user the session belongs to
    std::string data;  ///< the application's data, opaque to the store
    std::int64_t created_ms = 0;  ///< when the session was created
    std::int64_t last_seen_ms = 0;        ///< the latest load, save or rotate
    std::int64_t absolute_expiry_ms = 0;  ///< the session ends here whatever its use
    std::int64_t idle_timeout_ms = 0;     ///< the session ends this long after last_seen
    std::uint64_t version = 1;            ///< bumped by every save and rotate
};

/// What a new session asks of the store; the store stamps the times.
struct session_request {
    std::string_view user;  ///< the user the session is for
    std::string_view data;  ///< the application's data
    std::int64_t idle_timeout_ms = 0;  ///< the session ends this long after its last use
    std::int64_t absolute_timeout_ms = 0;  ///< the session ends this long after its creation, whatever its use
};

namespace detail {

/// The expiry rule every session store applies.
struct session_rule {
    static session_record create(const session_request& q, std::int64_t now_ms) {
        session_record rec;
        rec.user.assign(q.user);
        rec.data.assign(q.data);
        rec.created_ms = now_ms;
        rec.last_seen_ms = now_ms;
        rec.absolute_expiry_ms = add_saturated(now_ms, q.absolute_timeout_ms);
        rec.idle_timeout_ms = q.idle_timeout_ms;
        rec.version = 1;
        return rec;
    }
    static bool expired(const session_record& r, std::int64_t now_ms) noexcept {
        return now_ms >= r.absolute_expiry_ms || now_ms >= add_saturated(r.last_seen_ms, r.idle_timeout_ms);
    }
    static void touch(session_record& r, std::int64_t now_ms) noexcept { r.last_seen_ms = std::max(r.last_seen_ms, now_ms); }
};

}  // namespace detail

}  // namespace coord
