// SPDX-License-Identifier: Apache-2.0
// coord/rules/fence.hpp: the fence rule, and the fence token, value and refusal it speaks of.
//
// A pure transition on records: no store, no clock, no I/O. The memory and
// file stores apply it; every engine's SQL or script is held to it by the
// conformance suites (tests/conformance/). Include the primitive's header
// (coord/fence.hpp) for its store concept and class template.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "coord/error.hpp"
#include "coord/result.hpp"

namespace coord {

/// A fence token: granted by a lease, strictly increasing per lease name.
/// Token 0 is below every token a lease grants.
using fence_token = std::uint64_t;

/// What a fenced resource holds for one key.
struct fenced_value {
    /// The highest fence token accepted for the key (0 if never written).
    fence_token fence = 0;
    /// The value of the last accepted write.
    std::string value;
    /// False when no write was ever accepted for the key.
    bool written = false;
};

/// Why a fenced write was refused.
struct write_error {
    /// errc::stale_fence, errc::stale_sequence, or the store's infrastructure error.
    error code;
    /// The highest fence the key had when the write was refused (0 for
    /// infrastructure errors, when it is not known).
    fence_token highest = 0;

    /// Compares like `code`: with a coord::errc, an engine's code enum, or a
    /// coord::condition (`e == coord::condition::refused`).
    template <class E>
        requires std::is_error_code_enum_v<E> || std::is_error_condition_enum_v<E>
    friend bool operator==(const write_error& e, E c) noexcept {
        return e.code == c;
    }
};

namespace detail {

/// The fence rule on one key's record, shared by every embedded store (the
/// reference model). `assign` stores the new value. Returns the refusal, or
/// nothing when the write was applied.
struct fence_rule {
    struct record {
        fence_token highest = 0;
        bool written = false;
        bool has_seq = false;  // an ordered write was accepted under `highest`
        std::uint64_t seq = 0;
        std::string value;
    };

    template <class Assign>
    static result<void, write_error> apply(record& r, fence_token token, std::optional<std::uint64_t> seq,
                                           Assign&& assign) {
        if (r.written && token < r.highest)
            return unexpected(write_error{make_error_code(errc::stale_fence), r.highest});
        const bool same_token = r.written && token == r.highest;
        if (seq && same_token && r.has_seq && *seq <= r.seq)
            return unexpected(write_error{make_error_code(errc::stale_sequence), r.highest});
        assign(r.value);
        if (!same_token) r.has_seq = false;
        if (seq) {
            r.has_seq = true;
            r.seq = *seq;
        }
        r.highest = token;
        r.written = true;
        return {};
    }

    static fenced_value view(const record* r) {
        if (!r) return {};
        return fenced_value{r->highest, r->value, r->written};
    }
};

/// A fence_store's three writes, written once for every store that applies
/// fence_rule in one step of its own (memory, file, SQLite): Store has
/// `fence_apply(key, token, optional seq, assign)` (may be private, with
/// this class a friend).
template <class Store>
class fence_writes {
public:
    result<void, write_error> fence_write(std::string_view key, fence_token token, std::string_view value) {
        return self().fence_apply(key, token, std::nullopt, [&](std::string& v) { v.assign(value); });
    }
    result<void, write_error> fence_write(std::string_view key, fence_token token, std::uint64_t seq,
                                          std::string_view value) {
        return self().fence_apply(key, token, seq, [&](std::string& v) { v.assign(value); });
    }
    template <class F>
    result<void, write_error> fence_update(std::string_view key, fence_token token, F&& fn) {
        return self().fence_apply(key, token, std::nullopt, std::forward<F>(fn));
    }

private:
    Store& self() noexcept { return static_cast<Store&>(*this); }
};

}  // namespace detail

}  // namespace coord
