// SPDX-License-Identifier: Apache-2.0
// coord/etcd/fence.hpp: fence_store on etcd.
//
// A key's fence is PREFIX/fence/KEY/order: the highest token as 20 digits,
// ':' and, after an ordered write, its sequence as 20 digits, so that etcd's
// byte-wise compare orders (token, sequence) pairs; the value is
// PREFIX/fence/KEY/value. fence_write is ONE transaction: it compares the
// order with the bound the write must be below (the token followed by ';'
// for a plain write, "token:seq" for an ordered one) and writes the value
// and the order together (a plain write of the same token keeps the order,
// through a nested transaction); otherwise it reads the order for the
// refusal (a new key, whose VALUE etcd never compares, is told apart by its
// create revision in the same transaction). fence_read is one transaction
// reading both keys. 1 round trip each.
#pragma once

#ifndef COORD_STORE_HEADER_INCLUDED
#define COORD_STORE_HEADER_INCLUDED 1
#endif

#include <optional>
#include <string>
#include <string_view>

#include "coord/etcd/context.hpp"
#include "coord/fence.hpp"

namespace coord::etcd {

template <class Clock>
class fence_adapter {
public:
    explicit fence_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    result<void, write_error> fence_write(std::string_view key, fence_token token, std::string_view value) {
        return write(key, token, std::nullopt, value);
    }
    result<void, write_error> fence_write(std::string_view key, fence_token token, std::uint64_t seq, std::string_view value) {
        return write(key, token, seq, value);
    }

    /// fence_update_store: a compare-and-set. Reads the order and the value
    /// with their mod revisions (1 round trip); fn runs on the value only
    /// when the token passes; a transaction writes both only if neither
    /// changed (1 round trip), or reads and runs fn again (up to 64 times,
    /// then errc::contention). fn may run more than once (the concept allows).
    template <class F>
    result<void, write_error> fence_update(std::string_view key, fence_token token, F&& fn) {
        const std::string order = order_key(key), val = value_key(key);
        for (int attempt = 0; attempt < 64; ++attempt) {
            auto r = ctx_.txn({}, {detail::get(order), detail::get(val)}, {}, false);
            if (!r) return unexpected(write_error{r.error(), 0});
            if (r->ranges.size() != 2) return unexpected(write_error{detail::bad("fence update: two ranges expected"), 0});
            const auto& o = r->ranges[0];
            const auto& v = r->ranges[1];
            std::string stored_order = o ? o->value : std::string();
            if (o) {
                auto highest = detail::unpadded(stored_order.substr(0, 20));
                if (!highest) return unexpected(write_error{detail::bad("fence update: the order is not a number"), 0});
                if (token < *highest)
                    return unexpected(write_error{coord::make_error_code(coord::errc::stale_fence), *highest});
                // A new token drops the sequence; the same token keeps it.
                if (*highest != token) stored_order.clear();
            }
            if (stored_order.empty()) stored_order = detail::padded(token) + ":";
            std::string value = v ? v->value : std::string();
            fn(value);
            auto w = ctx_.txn({detail::mod_is(order, o ? o->mod_revision : 0), detail::mod_is(val, v ? v->mod_revision : 0)},
                              {detail::put(order, stored_order), detail::put(val, value)}, {}, true);
            if (!w) return unexpected(write_error{w.error(), 0});
            if (w->succeeded) return {};
        }
        return unexpected(write_error{coord::error(make_error_code(errc::contention), "fence update: 64 conflicts in a row"), 0});
    }

    result<fenced_value> fence_read(std::string_view key) {
        auto r = ctx_.txn({}, {detail::get(order_key(key)), detail::get(value_key(key))}, {}, false);
        if (!r) return unexpected(r.error());
        if (r->ranges.size() != 2) return unexpected(detail::bad("fence read: two ranges expected"));
        if (!r->ranges[0]) return fenced_value{};
        auto highest = detail::unpadded(r->ranges[0]->value.substr(0, 20));
        if (!highest) return unexpected(detail::bad("fence read: the order is not a number"));
        return fenced_value{*highest, r->ranges[1] ? r->ranges[1]->value : std::string(), true};
    }

private:
    std::string order_key(std::string_view key) const { return ctx_.key().of("fence", key, "order"); }
    std::string value_key(std::string_view key) const { return ctx_.key().of("fence", key, "value"); }

    result<void, write_error> write(std::string_view key, fence_token token, std::optional<std::uint64_t> seq,
                                    std::string_view value) {
        const std::string order = order_key(key), val = value_key(key);
        const std::string t = detail::padded(token);
        std::vector<std::string> success{detail::put(val, value)};
        std::string bound, first;
        if (seq) {
            bound = first = t + ":" + detail::padded(*seq);
            success.push_back(detail::put(order, bound));
        } else {
            bound = t + ";";  // below it: every order of a token up to this one
            first = t + ":";
            // A lower token becomes this token; the same token keeps its sequence.
            success.push_back(detail::nested({detail::value_is(order, first, "LESS")}, {detail::put(order, first)}, {}));
        }
        // etcd fails every VALUE compare on a key that does not exist: a new
        // key is told apart first (its create revision is 0).
        auto r = ctx_.txn({detail::create_is(order, 0)}, {detail::put(order, first), detail::put(val, value)},
                          {detail::nested({detail::value_is(order, bound, "LESS")}, success, {detail::get(order)})}, true);
        if (!r) return unexpected(write_error{r.error(), 0});
        if (r->succeeded) return {};
        if (r->inner.empty()) return unexpected(write_error{detail::bad("fence write: no nested answer"), 0});
        const auto& in = r->inner[0];
        if (in.succeeded) return {};
        if (in.ranges.empty() || !in.ranges[0]) return unexpected(write_error{detail::bad("fence write refused without an order"), 0});
        auto highest = detail::unpadded(in.ranges[0]->value.substr(0, 20));
        if (!highest) return unexpected(write_error{detail::bad("fence write: the order is not a number"), 0});
        const bool sequence = seq && *highest == token;
        return unexpected(
            write_error{coord::make_error_code(sequence ? coord::errc::stale_sequence : coord::errc::stale_fence), *highest});
    }

    detail::context<Clock>& ctx_;
};

}  // namespace coord::etcd
