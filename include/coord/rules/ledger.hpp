// SPDX-License-Identifier: Apache-2.0
// coord/rules/ledger.hpp: the job-slot ledger rule, and the records, claims and outcomes it speaks of.
//
// A pure transition on records: no store, no clock, no I/O. The memory and
// file stores apply it; every engine's SQL or script is held to it by the
// conformance suites (tests/conformance/). Include the primitive's header
// (coord/job_ledger.hpp) for its store concept and class template.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "coord/clock.hpp"
#include "coord/error.hpp"
#include "coord/result.hpp"
#include "coord/rules/fence.hpp"

namespace coord {

/// Where a slot stands in the ledger.
struct ledger_record {
    /// No claim running; a claim running; done, with its result.
    enum class state_t { idle, running, done };
    std::string key;  ///< the slot's canonical text
    std::chrono::milliseconds scheduled{0};  ///< the slot's time, Unix milliseconds
    std::uint32_t schedule_version = 0;  ///< the version of the schedule of the last claim
    state_t state = state_t::idle;       ///< where the slot stands
    fence_token fence = 0;       ///< the last claim's fence token
    std::uint32_t attempt = 0;   ///< how many claims were granted
    std::string holder;          ///< the worker of the last claim
    // Times below are since the Unix epoch on the store's clock.
    std::chrono::nanoseconds lease_until{0};   ///< the running claim's lease ends here
    std::chrono::nanoseconds started{0};       ///< when the last attempt actually started (not the scheduled time)
    std::chrono::nanoseconds completed{0};     ///< when the done attempt completed
    std::chrono::nanoseconds retain_until{0};  ///< scheduled time + retention (saturated at the int64 range)
    std::string payload_hash;    ///< the hash of the payload the slot was claimed with
    std::string result;          ///< the done attempt's result
    std::string fail_reason;     ///< the last failed attempt's reason
};

/// The answer to a claim.
struct claim_outcome {
    /// What the claim found.
    enum kind_t {
        granted,           ///< you may execute: fence and attempt are yours
        replayed,          ///< already done: result holds the stored result
        in_progress,       ///< another holder runs it until lease_until
        payload_mismatch,  ///< the slot was claimed with a different payload
        expired,           ///< the slot is older than the replay window
    } kind = granted;             ///< what the claim found
    fence_token fence = 0;        ///< granted: the claim's fence token
    std::uint32_t attempt = 0;    ///< granted: the attempt's number
    std::string holder;           ///< in_progress: who runs it
    std::chrono::nanoseconds lease_until{0};  ///< since the Unix epoch on the store's clock
    std::string result;           ///< replayed: the stored result
};

/// What a claim asks the store for.
struct ledger_claim_request {
    std::string_view key;  ///< the slot's canonical text
    std::chrono::milliseconds scheduled{0};  ///< the slot's time, Unix milliseconds
    std::uint32_t schedule_version = 0;  ///< the version of the schedule that made the slot
    std::string_view worker;             ///< who claims
    std::string_view payload_hash;       ///< a hash of the payload (a repeat must bring the same)
    std::chrono::nanoseconds lease_ttl{0};       ///< the execution lease's length if granted, from the store's now
    std::chrono::milliseconds replay_window{0};  ///< a slot scheduled longer ago than this (store's now) is expired
};

namespace detail {

/// The ledger rule on one slot's record, shared by the embedded stores (the
/// reference model).
struct ledger_rule {
    /// True when the slot is older than the request's replay window at `now_ns`
    /// (computed in milliseconds, saturated: no accepted input overflows).
    static bool too_old(const ledger_claim_request& q, std::int64_t now_ns) noexcept {
        const std::int64_t now_ms = now_ns / 1'000'000 - (now_ns % 1'000'000 < 0 ? 1 : 0);  // floor
        return add_saturated(q.scheduled.count(), q.replay_window.count()) < now_ms;
    }
    static claim_outcome expired() noexcept {
        claim_outcome out;
        out.kind = claim_outcome::expired;
        return out;
    }

    /// The claim at the store's `now_ns`; the caller checked too_old first.
    /// A granted claim's fence is above the store's fence floor (a
    /// recovery's), so that its fenced effect passes the floor on a key
    /// without a record, which refuses tokens below it.
    static result<claim_outcome> claim(ledger_record& r, const ledger_claim_request& q, std::int64_t now_ns,
                                       fence_token fence_floor = 0) {
        claim_outcome out;
        const bool known = r.attempt > 0 || r.state != ledger_record::state_t::idle;
        if (known && r.payload_hash != q.payload_hash) {
            out.kind = claim_outcome::payload_mismatch;
            return out;
        }
        if (r.state == ledger_record::state_t::done) {
            out.kind = claim_outcome::replayed;
            out.result = r.result;
            out.fence = r.fence;
            out.attempt = r.attempt;
            return out;
        }
        if (r.state == ledger_record::state_t::running && now_ns < r.lease_until.count()) {
            out.kind = claim_outcome::in_progress;
            out.holder = r.holder;
            out.lease_until = r.lease_until;
            out.fence = r.fence;
            out.attempt = r.attempt;
            return out;
        }
        r.key = std::string(q.key);
        r.scheduled = q.scheduled;
        r.schedule_version = q.schedule_version;
        r.payload_hash = std::string(q.payload_hash);
        r.state = ledger_record::state_t::running;
        r.fence = std::max(r.fence, fence_floor) + 1;
        r.attempt += 1;
        r.holder = std::string(q.worker);
        r.lease_until = std::chrono::nanoseconds(add_saturated(now_ns, q.lease_ttl.count()));
        r.started = std::chrono::nanoseconds(now_ns);
        out.kind = claim_outcome::granted;
        out.fence = r.fence;
        out.attempt = r.attempt;
        out.holder = r.holder;
        out.lease_until = r.lease_until;
        return out;
    }

    static bool current(const ledger_record* r, fence_token fence) {
        return r && r->state == ledger_record::state_t::running && r->fence == fence;
    }

    static result<void> heartbeat(ledger_record* r, fence_token fence, std::int64_t ttl_ns, std::int64_t now_ns) {
        if (!current(r, fence)) return unexpected(make_error_code(errc::stale_fence));
        r->lease_until = std::chrono::nanoseconds(add_saturated(now_ns, ttl_ns));
        return {};
    }
    static result<void> complete(ledger_record* r, fence_token fence, std::string_view result_text,
                                 std::int64_t now, std::int64_t retain_until) {
        if (!current(r, fence)) return unexpected(make_error_code(errc::stale_fence));
        r->state = ledger_record::state_t::done;
        r->result = std::string(result_text);
        r->completed = std::chrono::nanoseconds(now);
        r->retain_until = std::chrono::nanoseconds(retain_until);
        return {};
    }
    static result<void> fail(ledger_record* r, fence_token fence, std::string_view reason) {
        if (!current(r, fence)) return unexpected(make_error_code(errc::stale_fence));
        r->state = ledger_record::state_t::idle;
        r->fail_reason = std::string(reason);
        r->lease_until = std::chrono::nanoseconds{0};
        return {};
    }
    static result<fence_token> revoke(ledger_record* r, std::string_view reason) {
        if (!r || r->state != ledger_record::state_t::running) return unexpected(make_error_code(errc::stale_fence));
        r->fence += 1;
        r->state = ledger_record::state_t::idle;
        r->fail_reason = std::string(reason);
        r->lease_until = std::chrono::nanoseconds{0};
        return r->fence;
    }
    /// Done and past retention at `now`; a saturated retention end (a slot
    /// after 2262) is never reached.
    static bool prunable(const ledger_record& r, std::int64_t now) {
        return r.state == ledger_record::state_t::done && r.retain_until.count() <= now &&
               r.retain_until.count() != std::numeric_limits<std::int64_t>::max();
    }
};

}  // namespace detail

}  // namespace coord
