// SPDX-License-Identifier: Apache-2.0
// coord/zookeeper/ledger.hpp: ledger_store on ZooKeeper.
//
// A slot's record is the persistent node ROOT/ledger/SLOT holding every
// field of coord/rules/ledger.hpp's record. Each operation reads the record
// and its version, takes the ensemble's now (the modification time it stamps
// on ROOT/clock when written: its clock, never a client's), applies the
// ledger rule to the record, and writes the result with a conditional
// setData on the version it read (a create for a new slot): the ensemble
// refuses the write if anyone wrote in between, and the operation reads,
// asks the time and rules again (up to 64 times, then errc::contention). So
// each operation is one atomic step on the record, judged at a time the
// ensemble gave just before it; a claim judged "lease ended" at that time is
// ended at the later time its write lands too.
//
// Round trips: claim 3 (read, the ensemble's now, write; 2 when the answer
// needs no write: replayed, in progress, expired), heartbeat, complete, fail
// and revoke 3 (2 when refused); each again on a conflict (up to 64 times);
// read 1; prune 2 + 1 per record + 2 per pruned record (the list and the
// ensemble's now; each record read, and deleted on its version when due,
// with the count of slots in ROOT/ledger lowered in the same multi-operation).
// A claim of a slot with no record checks the store's identity and that
// count first (context::absent, 2 round trips more): a slot record deleted
// by another client is detected (errc::state_went_back), never run again,
// and a slot scheduled at or before the ledger floor is expired.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "coord/detail/backoff.hpp"
#include "coord/job_ledger.hpp"
#include "coord/rules/ledger.hpp"
#include "coord/zookeeper/context.hpp"

namespace coord::zookeeper {

template <class Clock>
class ledger_adapter {
public:
    explicit ledger_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    result<claim_outcome> ledger_claim(const ledger_claim_request& q) {
        using rule = coord::detail::ledger_rule;
        auto floor = ctx_.lease_floor();  // the store's fence floor
        if (!floor) return unexpected(floor.error());
        return cas<claim_outcome>(q.key, &q, [&](ledger_record& r, bool, std::int64_t now) -> step<claim_outcome> {
            if (rule::too_old(q, now)) return {rule::expired(), false};
            auto c = rule::claim(r, q, now, *floor);
            if (!c) return {unexpected(c.error()), false};
            const bool write = c->kind == claim_outcome::granted;
            return {std::move(c), write};
        });
    }

    result<void> ledger_heartbeat(std::string_view key, fence_token fence, std::chrono::nanoseconds ttl) {
        return cas<void>(key, nullptr, [&](ledger_record& r, bool exists, std::int64_t now) -> step<void> {
            auto h = coord::detail::ledger_rule::heartbeat(exists ? &r : nullptr, fence, ttl.count(), now);
            const bool ok = h.has_value();
            return {std::move(h), ok};
        });
    }

    result<void> ledger_complete(std::string_view key, fence_token fence, std::string_view result_text,
                                 std::chrono::nanoseconds retain_until) {
        return cas<void>(key, nullptr, [&](ledger_record& r, bool exists, std::int64_t now) -> step<void> {
            auto c = coord::detail::ledger_rule::complete(exists ? &r : nullptr, fence, result_text, now, retain_until.count());
            const bool ok = c.has_value();
            return {std::move(c), ok};
        });
    }

    result<void> ledger_fail(std::string_view key, fence_token fence, std::string_view reason) {
        return cas<void>(key, nullptr, [&](ledger_record& r, bool exists, std::int64_t) -> step<void> {
            auto f = coord::detail::ledger_rule::fail(exists ? &r : nullptr, fence, reason);
            const bool ok = f.has_value();
            return {std::move(f), ok};
        });
    }

    result<fence_token> ledger_revoke(std::string_view key, std::string_view reason) {
        return cas<fence_token>(key, nullptr, [&](ledger_record& r, bool exists, std::int64_t) -> step<fence_token> {
            auto v = coord::detail::ledger_rule::revoke(exists ? &r : nullptr, reason);
            const bool ok = v.has_value();
            return {std::move(v), ok};
        });
    }

    result<std::optional<ledger_record>> ledger_read(std::string_view key) {
        auto k = read(ctx_.path("ledger", key));
        if (!k) return unexpected(k.error());
        if (k->version < 0) return std::optional<ledger_record>{};
        return std::optional<ledger_record>{std::move(k->rec)};
    }

    result<std::size_t> ledger_prune() {
        auto names = ctx_.children(ctx_.path("ledger"));
        if (!names) return unexpected(names.error());
        auto now = ctx_.now_ns();
        if (!now) return unexpected(now.error());
        std::size_t removed = 0;
        for (const auto& name : *names) {
            const std::string p = ctx_.path("ledger") + "/" + name;
            auto k = read(p);
            if (!k) return unexpected(k.error());
            if (k->version < 0 || !coord::detail::ledger_rule::prunable(k->rec, *now)) continue;
            auto d = ctx_.delete_counted("ledger", p, k->version);  // refused if it changed since the read
            if (!d) return unexpected(d.error());
            if (d->rc == ZOK) ++removed;
        }
        return removed;
    }

private:
    struct known {
        ledger_record rec;
        int version = -1;  // -1: no node
    };
    template <class T>
    struct step {
        result<T> answer;
        bool write = false;
    };

    // Read, the ensemble's now, rule, conditional write; again on a conflict.
    // A missing record may be one that was lost: a write that creates it
    // checks the store's identity and the count of slots first, and a claim
    // of a slot scheduled at or before the ledger floor is expired.
    template <class T, class Rule>
    result<T> cas(std::string_view key, const ledger_claim_request* claim, Rule&& rule) {
        const std::string p = ctx_.path("ledger", key);
        using R = result<T>;
        auto decided = coord::detail::retry_conflicts(coord::detail::conflict_tries, [&](int) -> std::optional<R> {
            auto k = read(p);
            if (!k) return R(unexpected(k.error()));
            auto now = ctx_.now_ns();
            if (!now) return R(unexpected(now.error()));
            const bool exists = k->version >= 0;
            std::optional<typename detail::context<Clock>::absence> gap;
            if (!exists) {
                k->rec.key = std::string(key);
                if (claim) {
                    auto a = ctx_.absent("ledger");
                    if (!a) return R(unexpected(a.error()));
                    if constexpr (std::is_same_v<T, claim_outcome>)
                        if (claim->scheduled.count() <= a->floors.ledger_ms) return R(coord::detail::ledger_rule::expired());
                    gap = std::move(*a);
                }
            }
            auto s = rule(k->rec, exists, *now);
            if (!s.write) return R(std::move(s.answer));
            if (!exists && !gap) {
                auto a = ctx_.absent("ledger");
                if (!a) return R(unexpected(a.error()));
                gap = std::move(*a);
            }
            const std::string data = encode(k->rec);
            auto w = exists ? ctx_.set(p, data, k->version) : ctx_.create_counted(*gap, p, data);
            if (!w) return R(unexpected(w.error()));
            if (w->rc == ZOK) return R(std::move(s.answer));
            // ZBADVERSION, ZNODEEXISTS, ZNONODE: someone wrote in between.
            return std::nullopt;
        });
        if (decided) return *decided;
        return unexpected(detail::contention("ledger"));
    }

    static std::string encode(const ledger_record& r) {
        return detail::encode({r.key, std::to_string(r.scheduled.count()), std::to_string(r.schedule_version),
                               std::to_string(static_cast<int>(r.state)), std::to_string(r.fence),
                               std::to_string(r.attempt), r.holder, std::to_string(r.lease_until.count()),
                               std::to_string(r.started.count()), std::to_string(r.completed.count()),
                               std::to_string(r.retain_until.count()), r.payload_hash, r.result, r.fail_reason});
    }

    result<known> read(const std::string& p) {
        auto n = ctx_.get(p);
        if (!n) return unexpected(n.error());
        if (!*n) return known{};
        auto f = detail::decode((*n)->data, 14);
        if (!f) return unexpected(detail::corrupt(p, "a ledger record is malformed"));
        auto& v = *f;
        auto sched = detail::i64(v[1]);
        auto ver = detail::u64(v[2]);
        auto state = detail::i64(v[3]);
        auto fence = detail::u64(v[4]);
        auto attempt = detail::u64(v[5]);
        auto lease = detail::i64(v[7]), started = detail::i64(v[8]), completed = detail::i64(v[9]),
             retain = detail::i64(v[10]);
        if (!sched || !ver || !state || *state < 0 || *state > 2 || !fence || !attempt || !lease || !started ||
            !completed || !retain || *ver > 0xFFFFFFFFu || *attempt > 0xFFFFFFFFu)
            return unexpected(detail::corrupt(p, "a ledger record is malformed"));
        known k;
        k.version = (*n)->stat.version;
        k.rec.key = v[0];
        k.rec.scheduled = std::chrono::milliseconds(*sched);
        k.rec.schedule_version = static_cast<std::uint32_t>(*ver);
        k.rec.state = static_cast<ledger_record::state_t>(*state);
        k.rec.fence = *fence;
        k.rec.attempt = static_cast<std::uint32_t>(*attempt);
        k.rec.holder = v[6];
        k.rec.lease_until = std::chrono::nanoseconds(*lease);
        k.rec.started = std::chrono::nanoseconds(*started);
        k.rec.completed = std::chrono::nanoseconds(*completed);
        k.rec.retain_until = std::chrono::nanoseconds(*retain);
        k.rec.payload_hash = v[11];
        k.rec.result = v[12];
        k.rec.fail_reason = v[13];
        return k;
    }

    detail::context<Clock>& ctx_;
};

}  // namespace coord::zookeeper
