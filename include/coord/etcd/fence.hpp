// SPDX-License-Identifier: Apache-2.0
// coord/etcd/fence.hpp: fence_store and fence_update_store on etcd.
//
// A key's fence is PREFIX/fence/KEY: the highest token as 20 digits (so that
// etcd's byte-wise compares order tokens), a NUL, and the value; and, once an
// ordered write came, PREFIX/fence-seq/KEY: "token:sequence" of the last
// ordered write, 20 digits each (an ordered write of a newer token finds an
// older token there, so a plain write never needs to touch it).
//
// fence_write is ONE flat transaction: it compares the key with the bound the
// write must not pass ("token~" sorts after every "token NUL value" up to
// this token) and, for an ordered write, the seq key with "token:seq", and
// writes token and value (and the seq) together, with nothing in its failure
// branch (etcd 3.4 is 12-18% slower over a transaction with a range there,
// run or not). etcd fails every VALUE compare on a key that does not exist,
// so a refused write sends a second transaction that writes the key if it
// is still new (its create revision 0) and otherwise reads the record for the
// refusal. 1 round trip; 2 for a new key or a refusal; 3 for the first
// ordered write of an existing key.
// fence_read: one transaction reading the keys. fence_update: a
// compare-and-set on the keys' mod revisions (2 round trips; again on a
// conflict, up to 64 times).
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <string_view>

#include "coord/detail/backoff.hpp"
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

    template <class F>
    result<void, write_error> fence_update(std::string_view key, fence_token token, F&& fn) {
        const std::string fk = fence_key(key), sk = seq_key(key);
        using R = result<void, write_error>;
        auto decided = coord::detail::retry_conflicts(coord::detail::conflict_tries, [&](int) -> std::optional<R> {
            auto id = ctx_.identity();
            if (!id) return R(unexpected(write_error{id.error(), 0}));
            auto r = ctx_.txn({}, {detail::get(fk), detail::get(sk), detail::get(ctx_.key().identity())}, {}, false);
            if (!r) return R(unexpected(write_error{r.error(), 0}));
            if (r->ranges.size() != 3) return R(unexpected(write_error{detail::bad("fence update: three ranges expected"), 0}));
            if (auto bad = ctx_.identity_problem(r->ranges[2])) return R(unexpected(write_error{*bad, 0}));
            const auto& f = r->ranges[0];
            std::string value;
            if (f) {
                auto parsed = parse(f->value);
                if (!parsed) return R(unexpected(write_error{detail::bad("fence update: the record is malformed"), 0}));
                if (token < parsed->first)
                    return R(unexpected(write_error{coord::make_error_code(coord::errc::stale_fence), parsed->first}));
                value = std::move(parsed->second);
            } else if (token < id->floors.fence) {
                return R(unexpected(write_error{coord::make_error_code(coord::errc::stale_fence), id->floors.fence}));
            }
            fn(value);
            std::vector<std::string> puts{detail::put(fk, record(token, value))};
            if (!r->ranges[1]) puts.push_back(detail::put(sk, detail::padded(token) + ":"));
            auto w = ctx_.txn({detail::mod_is(fk, f ? f->mod_revision : 0), ctx_.identity_is(ctx_.key(), *id)}, puts, {}, true);
            if (!w) return R(unexpected(write_error{w.error(), 0}));
            if (w->succeeded) return R();
            return std::nullopt;
        });
        if (decided) return *decided;
        return unexpected(write_error{detail::contention("fence update"), 0});
    }

    result<fenced_value> fence_read(std::string_view key) {
        auto id = ctx_.identity();
        if (!id) return unexpected(id.error());
        auto r = ctx_.txn({}, {detail::get(fence_key(key)), detail::get(ctx_.key().identity())}, {}, false);
        if (!r) return unexpected(r.error());
        if (r->ranges.size() != 2) return unexpected(detail::bad("fence read: two ranges expected"));
        if (auto bad = ctx_.identity_problem(r->ranges[1])) return unexpected(*bad);
        // A missing record reads as the floor (the store's initialization).
        if (!r->ranges[0]) return fenced_value{id->floors.fence, {}, false};
        auto parsed = parse(r->ranges[0]->value);
        if (!parsed) return unexpected(detail::bad("fence read: the record is malformed"));
        return fenced_value{parsed->first, std::move(parsed->second), true};
    }

private:
    std::string fence_key(std::string_view key) const { return ctx_.key().of("fence", key); }
    std::string seq_key(std::string_view key) const { return ctx_.key().of("fence-seq", key); }

    static std::string record(fence_token token, std::string_view value) {
        std::string r = detail::padded(token);
        r += '\0';
        r += value;
        return r;
    }
    static std::optional<std::pair<fence_token, std::string>> parse(const std::string& r) {
        if (r.size() < 21 || r[20] != '\0') return std::nullopt;
        auto t = detail::unpadded(std::string_view(r).substr(0, 20));
        if (!t) return std::nullopt;
        return std::pair{*t, r.substr(21)};
    }

    result<void, write_error> write(std::string_view key, fence_token token, std::optional<std::uint64_t> seq,
                                    std::string_view value) {
        const std::string fk = fence_key(key), sk = seq_key(key);
        const std::string t = detail::padded(token);
        const std::string pair = seq ? t + ":" + detail::padded(*seq) : t + ":";
        std::vector<std::string> compare{detail::value_is(fk, t + "~", "LESS")};
        std::vector<std::string> puts{detail::put(fk, record(token, value))};
        if (seq) {
            compare.push_back(detail::value_is(sk, pair, "LESS"));
            puts.push_back(detail::put(sk, pair));
        }
        // The common path is one transaction with nothing in its failure
        // branch: etcd 3.4 takes 12-18% longer over a transaction that has a
        // range there, even when it is not run (measured on a one-put
        // transaction). A refusal reads the record in a second one. Fewer
        // tries than a read-modify-write: each try already sends up to three.
        constexpr int write_tries = 8;
        using R = result<void, write_error>;
        auto decided = coord::detail::retry_conflicts(write_tries, [&](int) -> std::optional<R> {
            auto r = ctx_.txn(compare, puts, {}, true);
            if (!r) return R(unexpected(write_error{r.error(), 0}));
            if (r->succeeded) return R();
            // Refused: a new key (every value compare fails on a missing
            // key), or the token or the sequence did not pass. A new key is
            // written only if it is still new and the store's identity is
            // the one this store object knows (a key missing from a store
            // whose keys were deleted is not made again), with a token at
            // least the store's fence floor; otherwise the same transaction
            // reads the record and the identity.
            auto id = ctx_.identity();
            if (!id) return R(unexpected(write_error{id.error(), 0}));
            std::vector<std::string> first{detail::put(fk, record(token, value)), detail::put(sk, pair)};
            const bool below_floor = token < id->floors.fence;
            auto c = below_floor ? ctx_.txn({}, {detail::get(fk), detail::get(ctx_.key().identity())}, {}, false)
                                 : ctx_.txn({detail::create_is(fk, 0), ctx_.identity_is(ctx_.key(), *id)}, first,
                                            {detail::get(fk), detail::get(ctx_.key().identity())}, true);
            if (!c) return R(unexpected(write_error{c.error(), 0}));
            if (c->succeeded && !below_floor) return R();
            if (c->ranges.size() != 2) return R(unexpected(write_error{detail::bad("fence write: two ranges expected"), 0}));
            if (auto bad = ctx_.identity_problem(c->ranges[1])) return R(unexpected(write_error{*bad, 0}));
            if (below_floor) {
                const auto parsed = c->ranges[0] ? parse(c->ranges[0]->value) : std::nullopt;
                return R(unexpected(write_error{coord::make_error_code(coord::errc::stale_fence),
                                                std::max(id->floors.fence, parsed ? parsed->first : 0)}));
            }
            if (!c->ranges[0]) return std::nullopt;
            auto parsed = parse(c->ranges[0]->value);
            if (!parsed) return R(unexpected(write_error{detail::bad("fence write: the record is malformed"), 0}));
            const fence_token highest = parsed->first;
            if (highest > token) return R(unexpected(write_error{coord::make_error_code(coord::errc::stale_fence), highest}));
            // The token passes now: the key was new and another write made it
            // meanwhile (again), or the sequence did not pass, or (the first
            // ordered write of this key) there is no seq key yet.
            if (!seq) return std::nullopt;
            auto d = ctx_.txn({detail::mod_is(fk, c->ranges[0]->mod_revision), detail::create_is(sk, 0)}, puts,
                              {detail::get(sk)}, true);
            if (!d) return R(unexpected(write_error{d.error(), 0}));
            if (d->succeeded) return R();
            if (!d->ranges.empty() && d->ranges[0])
                return R(unexpected(write_error{coord::make_error_code(coord::errc::stale_sequence), highest}));
            return std::nullopt;  // the key changed meanwhile: again
        });
        if (decided) return *decided;
        return unexpected(write_error{detail::contention("fence write", write_tries), 0});
    }

    detail::context<Clock>& ctx_;
};

}  // namespace coord::etcd
