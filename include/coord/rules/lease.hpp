// SPDX-License-Identifier: Apache-2.0
// coord/rules/lease.hpp: the lease rule, and the lease and refusal it speaks of.
//
// A pure transition on records: no store, no clock, no I/O. The memory and
// file stores apply it; every engine's SQL or script is held to it by the
// conformance suites (tests/conformance/). Include the primitive's header
// (coord/lease.hpp) for its store concept and class template.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "coord/clock.hpp"
#include "coord/error.hpp"
#include "coord/result.hpp"
#include "coord/rules/fence.hpp"

namespace coord {

/// A granted lease.
struct lease {
    std::string name;
    std::string owner;
    /// The fence token of this grant: larger than every earlier grant's for `name`.
    fence_token token = 0;
    /// The term the lease was granted or last renewed for.
    std::chrono::nanoseconds ttl{0};
    /// When the term ends, on the store's clock (time since that clock's epoch).
    std::chrono::nanoseconds expires_at{0};
};

/// Why a lease operation was refused.
struct lease_error {
    /// errc::lease_held, errc::not_lease_holder, errc::lease_expired, or the
    /// store's infrastructure error.
    error code;
    /// For lease_held and not_lease_holder: who holds the lease now (empty if nobody).
    std::string holder;
    /// That holder's fence token.
    fence_token token = 0;
    /// When that holder's term ends, on the store's clock.
    std::chrono::nanoseconds expires_at{0};

    friend bool operator==(const lease_error& e, errc c) noexcept { return e.code == c; }
};

namespace detail {

/// The lease rule on one name's record, shared by every embedded store (the
/// reference model). `now` is the store clock's reading in ns since its epoch.
struct lease_rule {
    struct record {
        fence_token last_token = 0;  // highest token ever granted for the name
        bool held = false;
        std::string holder;
        fence_token token = 0;
        std::int64_t ttl_ns = 0;
        std::int64_t expires_ns = 0;
    };

    static bool live(const record& r, std::int64_t now) noexcept { return r.held && now < r.expires_ns; }

    static lease view(std::string_view name, const record& r) {
        return lease{std::string(name), r.holder, r.token, std::chrono::nanoseconds{r.ttl_ns},
                     std::chrono::nanoseconds{r.expires_ns}};
    }

    static lease_error refusal(errc c, const record& r, std::int64_t now) {
        lease_error e{make_error_code(c), {}, 0, {}};
        if (live(r, now)) {
            e.holder = r.holder;
            e.token = r.token;
            e.expires_at = std::chrono::nanoseconds{r.expires_ns};
        }
        return e;
    }

    static result<lease, lease_error> acquire(std::string_view name, record& r, std::string_view owner,
                                              std::int64_t ttl_ns, std::int64_t now) {
        if (live(r, now)) return unexpected(refusal(errc::lease_held, r, now));
        r.held = true;
        r.holder = std::string(owner);
        r.token = ++r.last_token;
        r.ttl_ns = ttl_ns;
        r.expires_ns = add_saturated(now, ttl_ns);
        return view(name, r);
    }

    static bool is_holder(const record& r, std::string_view owner, fence_token token) noexcept {
        return r.held && r.holder == owner && (token == 0 || token == r.token);
    }

    static result<lease, lease_error> renew(std::string_view name, record& r, std::string_view owner,
                                            fence_token token, std::int64_t ttl_ns, std::int64_t now) {
        if (!is_holder(r, owner, token)) return unexpected(refusal(errc::not_lease_holder, r, now));
        if (!live(r, now)) return unexpected(refusal(errc::lease_expired, r, now));
        if (ttl_ns > 0) r.ttl_ns = ttl_ns;
        r.expires_ns = add_saturated(now, r.ttl_ns);
        return view(name, r);
    }

    static result<void, lease_error> release(record& r, std::string_view owner, fence_token token,
                                             std::int64_t now) {
        if (!is_holder(r, owner, token)) return unexpected(refusal(errc::not_lease_holder, r, now));
        r.held = false;
        r.holder.clear();
        r.expires_ns = 0;
        return {};
    }

    static std::optional<lease> read(std::string_view name, const record* r, std::int64_t now) {
        if (!r || !live(*r, now)) return std::nullopt;
        return view(name, *r);
    }
};

}  // namespace detail

}  // namespace coord
