// SPDX-License-Identifier: Apache-2.0
// coord/zookeeper/fence.hpp: fence_store and fence_update_store on ZooKeeper.
//
// A key's record is the node ROOT/fence/KEY: highest token, written flag,
// ordered-write flag, sequence, value. A write applies the fence rule of
// coord/rules/fence.hpp to the record it read and writes the result with a
// conditional setData on the version it read (or a create, for a new key):
// the ensemble refuses it if anyone wrote in between, and the write is read
// and ruled again (the fence compared inside the retry; up to 64 times, then
// errc::contention). A store object remembers the last record and version
// it read or wrote per key, so a write to a key it knows is 1 round trip
// (a stale memory costs one more: the refused setData, then the read).
// A key's first write creates its node in one multi-operation with the
// count of fence records in ROOT/fence raised, after checking the store's
// identity and that count (context::absent: 2 round trips more): a record
// deleted by another client is detected (errc::state_went_back), never
// started over, and a missing record refuses tokens below the fence floor
// the store was initialized with.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "coord/detail/backoff.hpp"
#include "coord/fence.hpp"
#include "coord/rules/fence.hpp"
#include "coord/zookeeper/context.hpp"

namespace coord::zookeeper {

template <class Clock>
class fence_adapter {
public:
    explicit fence_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    result<void, write_error> fence_write(std::string_view key, fence_token token, std::string_view value) {
        return apply(key, token, std::nullopt, [&](std::string& v) { v.assign(value); });
    }
    result<void, write_error> fence_write(std::string_view key, fence_token token, std::uint64_t seq, std::string_view value) {
        return apply(key, token, seq, [&](std::string& v) { v.assign(value); });
    }
    /// fn runs only when the token passes, possibly more than once (a
    /// conflicting writer: read, rule and run again).
    template <class F>
    result<void, write_error> fence_update(std::string_view key, fence_token token, F&& fn) {
        return apply(key, token, std::nullopt, fn);
    }

    result<fenced_value> fence_read(std::string_view key) {
        const auto p = ctx_.path("fence", key);
        auto n = ctx_.get(p);
        if (!n) return unexpected(n.error());
        if (!*n) return fenced_value{};
        auto rec = parse((*n)->data);
        if (!rec) return unexpected(detail::corrupt(p, "a fence record is malformed"));
        remember(key, *rec, (*n)->stat.version);
        return coord::detail::fence_rule::view(&*rec);
    }

private:
    using record = coord::detail::fence_rule::record;

    static std::string encoded(const record& r) {
        return detail::encode({std::to_string(r.highest), r.written ? "1" : "0", r.has_seq ? "1" : "0", std::to_string(r.seq), r.value});
    }
    static std::optional<record> parse(const std::string& data) {
        auto f = detail::decode(data, 5);
        if (!f) return std::nullopt;
        auto h = detail::u64((*f)[0]);
        auto q = detail::u64((*f)[3]);
        if (!h || !q) return std::nullopt;
        record r;
        r.highest = *h;
        r.written = (*f)[1] == "1";
        r.has_seq = (*f)[2] == "1";
        r.seq = *q;
        r.value = std::move((*f)[4]);
        return r;
    }

    struct known {
        record rec;
        int version = -1;  // -1: no node
    };
    void remember(std::string_view key, const record& r, int version) {
        std::lock_guard lk(mutex_);
        if (cache_.size() > 4096) cache_.clear();  // a bounded memory: a stale or missing entry costs a read
        cache_[std::string(key)] = known{r, version};
    }
    std::optional<known> recall(std::string_view key) {
        std::lock_guard lk(mutex_);
        auto it = cache_.find(key);
        if (it == cache_.end()) return std::nullopt;
        return it->second;
    }

    template <class Assign>
    result<void, write_error> apply(std::string_view key, fence_token token, std::optional<std::uint64_t> seq, Assign&& assign) {
        const std::string p = ctx_.path("fence", key);
        std::optional<known> k = recall(key);
        using R = result<void, write_error>;
        auto decided = coord::detail::retry_conflicts(coord::detail::conflict_tries, [&](int attempt) -> std::optional<R> {
            if (!k) {
                auto n = ctx_.get(p);
                if (!n) return R(unexpected(write_error{n.error(), 0}));
                k = known{};
                if (*n) {
                    auto rec = parse((*n)->data);
                    if (!rec) return R(unexpected(write_error{detail::corrupt(p, "a fence record is malformed"), 0}));
                    k->rec = std::move(*rec);
                    k->version = (*n)->stat.version;
                }
            }
            // A missing record may be one that was lost: the store's identity
            // and the count of fence records checked, and the fence floor kept.
            std::optional<typename detail::context<Clock>::absence> gap;
            if (k->version < 0) {
                auto a = ctx_.absent("fence");
                if (!a) return R(unexpected(write_error{a.error(), 0}));
                if (token < a->floors.fence)
                    return R(unexpected(write_error{coord::make_error_code(coord::errc::stale_fence), a->floors.fence}));
                gap = std::move(*a);
            }
            record next = k->rec;
            auto ruled = coord::detail::fence_rule::apply(next, token, seq, assign);
            if (!ruled) {
                // Refused on what we knew: true only if that is still the record.
                if (attempt == 0 && recall(key)) {
                    k.reset();
                    forget(key);
                    return std::nullopt;
                }
                return R(unexpected(ruled.error()));
            }
            const std::string data = encoded(next);
            auto w = gap ? ctx_.create_counted(*gap, p, data) : ctx_.set(p, data, k->version);
            if (!w) return R(unexpected(write_error{w.error(), 0}));
            if (w->rc == ZOK) {
                remember(key, next, w->stat.version);
                return R();
            }
            k.reset();  // someone else wrote (or created) it: read and rule again
            return std::nullopt;
        });
        if (decided) return *decided;
        return unexpected(write_error{detail::contention("fence write"), 0});
    }
    void forget(std::string_view key) {
        std::lock_guard lk(mutex_);
        if (auto it = cache_.find(key); it != cache_.end()) cache_.erase(it);
    }

    detail::context<Clock>& ctx_;
    std::mutex mutex_;
    std::map<std::string, known, std::less<>> cache_;
};

}  // namespace coord::zookeeper
