// SPDX-License-Identifier: Apache-2.0
// coord/redis/ledger.hpp: ledger_store on Redis (the job-slot ledger).
//
// Round trips: every operation 1, one script: the store's identity checked,
// the rule of coord/rules/ledger.hpp on the slot's hash, the execution lease
// and the replay window judged on the server's TIME. A store that lost its
// data refuses (errc::store_uninitialized) instead of granting a done slot
// again.
//
// Not a ledger_run_store: the effect of a job lives outside Redis, so the
// claim, the effect and the done marker cannot be one atomic step here; the
// job ledger runs claim, effect, complete, and the effect is fenced by the
// claim's token where it lands.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "coord/job_ledger.hpp"
#include "coord/redis/context.hpp"
#include "coord/redis/scripts.hpp"

namespace coord::redis {

template <class Clock>
class ledger_adapter {
public:
    explicit ledger_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    result<claim_outcome> ledger_claim(const ledger_claim_request& q) {
        pool::call c(ctx_.calls());
        auto r = ctx_.checked(c, scripts::ledger_claim, {slot_key(q.key)},
                              {ctx_.now(), std::string(q.key), std::to_string(q.scheduled.count()),
                               std::to_string(q.schedule_version), std::string(q.worker), std::string(q.payload_hash),
                               detail::ns_arg(q.lease_ttl.count()),
                               std::to_string(coord::detail::add_saturated(q.scheduled.count(), q.replay_window.count()))},
                              true, true);
        if (!r) return unexpected(r.error());
        const redisReply* a = r->get();
        const auto kind = detail::u64_of(detail::element(a, 0));
        const auto fence = detail::u64_of(detail::element(a, 1));
        const auto attempt = detail::u64_of(detail::element(a, 2));
        const auto until = detail::i64_of(detail::element(a, 4));
        if (detail::elements(a) != 6 || !kind || *kind > 4 || !fence || !attempt || !until)
            return unexpected(detail::bad_reply("ledger claim"));
        claim_outcome out;
        out.kind = static_cast<claim_outcome::kind_t>(*kind);
        out.fence = *fence;
        out.attempt = static_cast<std::uint32_t>(*attempt);
        out.holder = std::string(detail::element(a, 3));
        out.lease_until = std::chrono::nanoseconds(*until);
        out.result = std::string(detail::element(a, 5));
        return out;
    }
    result<void> ledger_heartbeat(std::string_view key, fence_token fence, std::chrono::nanoseconds ttl) {
        return update(scripts::ledger_heartbeat, {slot_key(key)}, {ctx_.now(), std::to_string(fence), detail::ns_arg(ttl.count())},
                      true);
    }
    result<void> ledger_complete(std::string_view key, fence_token fence, std::string_view result_text,
                                 std::chrono::nanoseconds retain_until) {
        const std::int64_t score_ms = retain_until.count() / 1'000'000 - (retain_until.count() % 1'000'000 < 0 ? 1 : 0);
        return update(scripts::ledger_complete, {slot_key(key), done_key()},
                      {ctx_.now(), std::to_string(fence), std::string(result_text), std::to_string(retain_until.count()),
                       std::to_string(score_ms), std::string(key)},
                      true);
    }
    result<void> ledger_fail(std::string_view key, fence_token fence, std::string_view reason) {
        return update(scripts::ledger_fail, {slot_key(key)}, {std::to_string(fence), std::string(reason)}, false);
    }
    result<fence_token> ledger_revoke(std::string_view key, std::string_view reason) {
        pool::call c(ctx_.calls());
        auto r = ctx_.checked(c, scripts::ledger_revoke, {slot_key(key)}, {std::string(reason)}, true);
        if (!r) return unexpected(r.error());
        if (detail::element(r->get(), 0) == "S") return unexpected(coord::make_error_code(coord::errc::stale_fence));
        const auto f = detail::u64_of(detail::element(r->get(), 1));
        if (!f) return unexpected(detail::bad_reply("ledger revoke"));
        return *f;
    }
    result<std::optional<ledger_record>> ledger_read(std::string_view key) {
        pool::call c(ctx_.calls());
        auto r = ctx_.checked(c, scripts::ledger_read, {slot_key(key)}, {}, false);
        if (!r) return unexpected(r.error());
        const redisReply* a = r->get();
        if (detail::element(a, 0) == "NONE") return std::optional<ledger_record>{};
        if (detail::elements(a) != 15) return unexpected(detail::bad_reply("ledger read"));
        auto num = [&](std::size_t i) { return detail::i64_of(detail::element(a, i)).value_or(0); };
        ledger_record rec;
        rec.key = std::string(detail::element(a, 1));
        rec.scheduled = std::chrono::milliseconds(num(2));
        rec.schedule_version = static_cast<std::uint32_t>(num(3));
        const auto state = num(4);
        rec.state = state == 2   ? ledger_record::state_t::done
                    : state == 1 ? ledger_record::state_t::running
                                 : ledger_record::state_t::idle;
        rec.fence = detail::u64_of(detail::element(a, 5)).value_or(0);
        rec.attempt = static_cast<std::uint32_t>(num(6));
        rec.holder = std::string(detail::element(a, 7));
        rec.lease_until = std::chrono::nanoseconds(num(8));
        rec.started = std::chrono::nanoseconds(num(9));
        rec.completed = std::chrono::nanoseconds(num(10));
        rec.retain_until = std::chrono::nanoseconds(num(11));
        rec.payload_hash = std::string(detail::element(a, 12));
        rec.result = std::string(detail::element(a, 13));
        rec.fail_reason = std::string(detail::element(a, 14));
        return std::optional<ledger_record>{std::move(rec)};
    }
    result<std::size_t> ledger_prune() {
        pool::call c(ctx_.calls());
        auto r = ctx_.checked(c, scripts::ledger_prune, {done_key()}, {ctx_.now(), ctx_.key().of("slot", "")}, true, true);
        if (!r) return unexpected(r.error());
        const auto n = detail::u64_of(detail::element(r->get(), 1));
        if (!n) return unexpected(detail::bad_reply("ledger prune"));
        return static_cast<std::size_t>(*n);
    }

private:
    std::string slot_key(std::string_view key) const { return ctx_.key().of("slot", key); }
    std::string done_key() const { return ctx_.key().of("slots-done", ""); }

    result<void> update(const detail::script& s, std::vector<std::string> keys, std::vector<std::string> args, bool clocked) {
        pool::call c(ctx_.calls());
        auto r = ctx_.checked(c, s, std::move(keys), std::move(args), true, clocked);
        if (!r) return unexpected(r.error());
        const auto status = detail::element(r->get(), 0);
        if (status == "S") return unexpected(coord::make_error_code(coord::errc::stale_fence));
        if (status != "OK") return unexpected(detail::bad_reply("a ledger script"));
        return {};
    }

    detail::context<Clock>& ctx_;
};

}  // namespace coord::redis
