// SPDX-License-Identifier: Apache-2.0
// coord/initial_floors.hpp: what an operator states when initializing a
// store that can lose its data (Redis, ZooKeeper: store::initialize, or
// `coordctl store init`), and the one text form both engines keep it in.
//
// A store whose records can go missing (lost with the data, deleted by
// another client) cannot tell a record that never existed from one that was
// lost. Initializing a store writes its identity with floors at or above
// everything it handed out before; where a record is missing, coord answers
// from the floors instead of from nothing, so a store that lost its data
// hands nothing out twice (docs/concepts/went-back.md). A store that
// never served coord takes zeros.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "coord/fence.hpp"
#include "coord/random.hpp"

namespace coord {

/// The floors a store is initialized with (store::initialize).
struct initial_floors {
    /// The largest segment ID the store ever handed out (any tag): a tag
    /// whose counter is missing continues above it. 0: none handed out.
    std::uint64_t segment = 0;
    /// The highest fence token any fenced key accepted: a key whose record
    /// is missing refuses tokens below it. With fence_now, a number above
    /// every lease token the store granted before instead (Redis: the
    /// server's time in microseconds; etcd: this machine's time in
    /// nanoseconds; ZooKeeper: the ensemble's time in nanoseconds, and at
    /// least the floor before plus the initialization's zxid. On etcd and
    /// ZooKeeper lease tokens are the fence floor plus the cluster's counter).
    fence_token fence = 0;
    bool fence_now = false;  ///< raise `fence` to the store's now in nanoseconds as well
    /// Slots scheduled at or before this instant (Unix milliseconds) that
    /// have no record are not run again (a claim answers expired): their
    /// done records may have been lost. With ledger_now, the store's now.
    std::int64_t ledger_ms = 0;
    bool ledger_now = false;  ///< raise `ledger_ms` to the store's now as well
    /// A time reservation (Snowflake's reserved-until) whose record is
    /// missing starts at this instant (Unix milliseconds): at least the
    /// latest instant any reservation reached (a generator reserves up to
    /// its reserve_ahead past its clock). With reservation_now, the store's
    /// now.
    std::int64_t reservation_ms = 0;
    bool reservation_now = false;  ///< raise `reservation_ms` to the store's now as well
};

namespace detail {

/// The floors as a store keeps them, resolved (no "now" left).
struct stated_floors {
    std::uint64_t segment = 0;
    fence_token fence = 0;
    std::int64_t ledger_ms = 0;
    std::int64_t reservation_ms = 0;
};

/// A new store identity: 32 lowercase hex digits from the OS's entropy.
inline std::string new_store_identity() {
    unsigned char raw[16];
    os_entropy(raw, sizeof raw);
    static constexpr char hex[] = "0123456789abcdef";
    std::string id;
    for (unsigned char b : raw) {
        id += hex[b >> 4];
        id += hex[b & 15];
    }
    return id;
}

/// The identity's text: "<32 hex digits>:<segment>:<fence: 20 digits>:
/// <ledger ms>:<reservation ms>" (the fence as 20 digits so that Redis's
/// scripts compare it without parsing).
inline std::string identity_text(const std::string& id, const stated_floors& f) {
    std::string fence = std::to_string(f.fence);
    fence.insert(0, 20 - fence.size(), '0');
    return id + ":" + std::to_string(f.segment) + ":" + fence + ":" + std::to_string(f.ledger_ms < 0 ? 0 : f.ledger_ms) +
           ":" + std::to_string(f.reservation_ms < 0 ? 0 : f.reservation_ms);
}

/// An identity as written: its 32 hex digits and the floors (zeros when it
/// has none: an identity written by an earlier coord). nullopt for any
/// other text.
struct store_identity {
    std::string id;
    stated_floors floors;
};
inline std::optional<store_identity> parse_identity(std::string_view v) {
    if (v.size() < 32) return std::nullopt;
    for (char ch : v.substr(0, 32))
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return std::nullopt;
    store_identity out{std::string(v.substr(0, 32)), {}};
    if (v.size() == 32) return out;
    std::uint64_t fields[4] = {};
    int n = 0;
    for (std::size_t i = 32; i < v.size();) {
        if (v[i] != ':' || n == 4) return std::nullopt;
        const auto end = v.find(':', i + 1);
        const auto f = v.substr(i + 1, (end == std::string_view::npos ? v.size() : end) - i - 1);
        if (f.empty() || f.size() > 20 || (n == 1 && f.size() != 20)) return std::nullopt;
        std::uint64_t x = 0;
        const auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), x);
        if (ec != std::errc{} || p != f.data() + f.size()) return std::nullopt;
        fields[n++] = x;
        i = end == std::string_view::npos ? v.size() : end;
    }
    if (n != 4 || fields[0] > 0x7ffffffffffffffeull || fields[2] > 0x7fffffffffffffffull ||
        fields[3] > 0x7fffffffffffffffull)
        return std::nullopt;
    out.floors = {fields[0], fields[1], static_cast<std::int64_t>(fields[2]), static_cast<std::int64_t>(fields[3])};
    return out;
}

}  // namespace detail
}  // namespace coord
