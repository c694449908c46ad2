// SPDX-License-Identifier: Apache-2.0
// coord/job_ledger.hpp: the job-slot ledger: a slot `job@scheduled_time` has
// its business effect applied once, even when schedulers double-fire,
// workers time out and receipts are lost.
//
// Scheduling, execution and effect are three separate books. A scheduler can
// fire a slot twice; a worker can finish but fail to report, so another
// retries; a worker declared dead can still be running. The ledger records,
// per slot, who may execute it (an execution lease with a fence token that
// grows with every claim) and whether its effect happened (the done marker
// and the stored result), so that any number of replays converge to one
// effect, and a timed-out worker's late completion is refused
// (errc::stale_fence) instead of overwriting its successor's.
//
// Every time the ledger judges is judged by the store, on the store's clock:
// when an execution lease ends, whether a slot is older than the replay
// window, when a done record may be pruned. A worker's own clock decides
// nothing, so two workers whose clocks are hours apart still cannot both
// hold one slot (memory: the process's steady clock; file: the machine's
// clock; PostgreSQL: the server's clock).
//
//   #include <coord/aliases.hpp>  // memory_store and the everyday aliases
//   coord::memory_store store;
//   coord::job_ledger ledger{store};   // judged on the store's clock
//   auto slot = *coord::slot::parse("billing@2026-10-13T09:00:00Z");
//   auto r = ledger.run(slot, "worker-1", "", [&](const coord::ledger_context& ctx) {
//       charge_customers(ctx.fence);       // hand the fence to downstream writes
//       return std::string("charged 42");  // stored; a replay gets it back
//   });
//   // r->outcome: applied, replayed, in_progress, payload_mismatch, expired
//
// What the application must still add: an effect that survives a crash
// between the effect and the done marker. The memory store runs claim, effect
// and done marker under one lock (a ledger_run_store); the file store, like
// any store that cannot make an outside effect atomic with its marker, runs
// claim, effect and complete as three atomic steps, so a worker killed after
// its effect and before `complete` gets the slot re-run once its lease
// expires: fence the effect's own writes with ctx.fence (coord/fence.hpp), or
// make the effect idempotent. Engines commit effect and marker in one
// transaction.
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "coord/clock.hpp"
#include "coord/detail/sha256.hpp"
#include "coord/detail/text.hpp"
#include "coord/error.hpp"
#include "coord/fence.hpp"
#include "coord/result.hpp"
#include "coord/rules/ledger.hpp"

namespace coord {

/// A slot: a job id and the UTC instant it was scheduled for (millisecond
/// precision), plus the version of the schedule that produced it (metadata,
/// not identity: the same job at the same instant is the same slot).
class slot {
public:
    /// A Unix time in milliseconds: a slot's instant.
    using time_point = std::chrono::sys_time<std::chrono::milliseconds>;

    /// The latest instant a slot can name: 9999-12-31T23:59:59.999Z, the
    /// last one its four-digit text can spell.
    static constexpr time_point max_time{std::chrono::milliseconds{253402300799999}};

    /// Throws std::invalid_argument when the job id is empty or holds
    /// characters outside [A-Za-z0-9._:/-], or the time is before 1970 or
    /// after max_time (so every slot's text parses back to the same slot).
    slot(std::string job, time_point scheduled, std::uint32_t schedule_version = 0)
        : job_(std::move(job)), scheduled_(scheduled), version_(schedule_version) {
        if (!valid_job(job_)) throw std::invalid_argument("slot: job id must be 1-200 characters of [A-Za-z0-9._:/-]");
        if (scheduled_.time_since_epoch().count() < 0) throw std::invalid_argument("slot: scheduled time before 1970");
        if (scheduled_ > max_time) throw std::invalid_argument("slot: scheduled time after 9999-12-31T23:59:59.999Z");
        text_ = format_utc(scheduled_);  // ...T09:00:00.000Z
        if (text_.compare(text_.size() - 5, 4, ".000") == 0) text_.erase(text_.size() - 5, 4);
        text_ = job_ + "@" + text_;
    }

    /// Parses `job@YYYY-MM-DDTHH:MM[:SS[.mmm]]Z`. Anything else (no '@', a
    /// bad job id, an impossible date, a time zone other than Z, leap
    /// seconds) is errc::invalid_text.
    static result<slot> parse(std::string_view text, std::uint32_t schedule_version = 0) {
        const auto at = text.rfind('@');
        if (at == std::string_view::npos) return unexpected(make_error_code(errc::invalid_text));
        const auto job = text.substr(0, at);
        auto t = text.substr(at + 1);
        if (!valid_job(job)) return unexpected(make_error_code(errc::invalid_text));
        int y, mo, d, h, mi, s = 0, ms = 0;
        auto num = [&](std::size_t pos, std::size_t len, int& out) {
            if (t.size() < pos + len) return false;
            out = 0;
            for (std::size_t i = pos; i < pos + len; ++i) {
                if (t[i] < '0' || t[i] > '9') return false;
                out = out * 10 + (t[i] - '0');
            }
            return true;
        };
        if (!num(0, 4, y) || t[4] != '-' || !num(5, 2, mo) || t[7] != '-' || !num(8, 2, d) || t.size() < 17 ||
            t[10] != 'T' || !num(11, 2, h) || t[13] != ':' || !num(14, 2, mi))
            return unexpected(make_error_code(errc::invalid_text));
        std::size_t pos = 16;
        if (t[pos] == ':') {
            if (!num(pos + 1, 2, s)) return unexpected(make_error_code(errc::invalid_text));
            pos += 3;
            if (pos < t.size() && t[pos] == '.') {
                if (!num(pos + 1, 3, ms)) return unexpected(make_error_code(errc::invalid_text));
                pos += 4;
            }
        }
        if (pos + 1 != t.size() || t[pos] != 'Z' || h > 23 || mi > 59 || s > 59)
            return unexpected(make_error_code(errc::invalid_text));
        using namespace std::chrono;
        const year_month_day ymd{year{y}, month{static_cast<unsigned>(mo)}, day{static_cast<unsigned>(d)}};
        if (!ymd.ok() || y < 1970) return unexpected(make_error_code(errc::invalid_text));
        const auto when = time_point{sys_days{ymd}} + hours{h} + minutes{mi} + seconds{s} + milliseconds{ms};
        return slot(std::string(job), when, schedule_version);
    }

    /// The canonical text: job@2026-10-13T09:00:00Z (".mmm" before the Z
    /// when the milliseconds are not zero).
    const std::string& to_string() const noexcept { return text_; }

    /// The job's name.
    const std::string& job() const noexcept { return job_; }
    /// The instant the slot is scheduled at.
    time_point scheduled() const noexcept { return scheduled_; }
    /// The version of the schedule that produced the slot (metadata, not identity).
    std::uint32_t schedule_version() const noexcept { return version_; }

    /// The same job at the same instant (the schedule version is not compared).
    friend bool operator==(const slot& a, const slot& b) noexcept {
        return a.job_ == b.job_ && a.scheduled_ == b.scheduled_;
    }

private:
    static bool valid_job(std::string_view job) noexcept {
        if (job.empty() || job.size() > 200) return false;
        for (char c : job)
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                  c == '_' || c == ':' || c == '/' || c == '-'))
                return false;
        return true;
    }
    std::string job_;
    time_point scheduled_;
    std::uint32_t version_;
    std::string text_;  // the canonical text, the slot's key in stores
};

/// A store of slot records.
///
/// Semantic requirements the compiler cannot check (each operation is ONE
/// atomic step; "now" is the store's own clock, in Unix time, read inside
/// that step: never a time the caller sends):
/// - ledger_claim: a slot whose scheduled time plus the request's replay
///   window is before now answers `expired` and changes nothing; a record
///   that is done answers `replayed` with its result
///   (or `payload_mismatch` when the payload hash differs); a running record
///   whose lease has not ended answers `in_progress` (or `payload_mismatch`);
///   otherwise (new, failed, or its holder's lease ended) it grants a claim:
///   fence = previous fence + 1 (fences of a slot only grow, also across
///   restarts and pruning of other records), attempt + 1, holder, lease end
///   (now + lease_ttl), started time (now).
/// - ledger_heartbeat(key, fence, ttl) / ledger_complete(key, fence,
///   result, retain_until) / ledger_fail(key, fence, reason) with a fence
///   that is not the record's current fence, or on a record not running, are
///   refused with errc::stale_fence and change nothing. heartbeat moves the
///   lease end to now + ttl; complete stores the result, marks done, sets
///   the completion time (now) and the retention end (retain_until: since
///   the Unix epoch on the store's clock, as ledger_record's times); fail records the reason
///   and makes the slot claimable again.
/// - ledger_prune() removes done records whose retention ended before now.
/// - ledger_revoke(key, reason) ends a running claim: the fence grows by
///   one (so the revoked holder's heartbeat and complete are refused), the
///   slot becomes claimable; errc::stale_fence when it is not running.
/// - A transport failure returns its error; an outcome that may have been
///   applied is errc::outcome_unknown. Every operation is safe to repeat
///   after an unknown outcome: a claim that did apply answers the repeat
///   with in_progress under the caller's own worker name (or, once its lease
///   ends, a new claim with a larger fence); a complete that did apply makes
///   the repeat stale_fence with the record done (read it to tell).
template <class S>
concept ledger_store = requires(S& s, const ledger_claim_request& req, std::string_view key, fence_token f,
                                std::chrono::nanoseconds t) {
    { s.ledger_claim(req) } -> std::same_as<result<claim_outcome>>;
    { s.ledger_heartbeat(key, f, t) } -> std::same_as<result<void>>;
    { s.ledger_complete(key, f, key, t) } -> std::same_as<result<void>>;
    { s.ledger_fail(key, f, key) } -> std::same_as<result<void>>;
    { s.ledger_read(key) } -> std::same_as<result<std::optional<ledger_record>>>;
    { s.ledger_prune() } -> std::same_as<result<std::size_t>>;
    { s.ledger_revoke(key, key) } -> std::same_as<result<fence_token>>;
};

/// A ledger store that can run a claim, the effect and the done marker as
/// one atomic step (under one lock or in one transaction).
/// ledger_run_atomic(req, retain_until, fn) claims as ledger_claim; when
/// granted it calls fn(granted outcome) -> std::string and marks the slot
/// done with that result before anyone else can claim it. If fn throws, the
/// attempt is recorded as failed and the exception propagates. The effect
/// runs under the store's lock: it must not call the same store.
template <class S>
concept ledger_run_store = ledger_store<S> && requires(S& s, const ledger_claim_request& req, std::chrono::nanoseconds t) {
    { s.ledger_run_atomic(req, t, [](const claim_outcome&) { return std::string(); }) }
        -> std::same_as<result<claim_outcome>>;
};

/// Handed to a run's effect.
struct ledger_context {
    const slot& which;  ///< the slot being run
    fence_token fence;  ///< pass to downstream fenced resources
    std::uint32_t attempt;  ///< 1 for the slot's first claim, one more for each later one
    std::string_view worker;  ///< the worker the claim was made for
};

/// The outcome of run().
struct run_outcome {
    /// What happened: the effect ran and was recorded; a done record answered; another holder runs it; the claim ended (its lease lapsed, or it was revoked) before the result was recorded; the slot was claimed with another payload; the slot is older than the replay window.
    enum kind_t { applied, replayed, in_progress, stale_fence, payload_mismatch, expired } kind = applied;  ///< what happened
    std::string result;  ///< the effect's result (applied) or the stored one (replayed)
    fence_token fence = 0;  ///< the claim's fence token (applied, stale_fence)
    std::uint32_t attempt = 0;  ///< the claim's attempt number
    std::string holder;  ///< in_progress: who runs it
};

/// Ledger settings; out-of-range values make the constructor throw
/// std::invalid_argument naming the field.
struct ledger_options {
    /// How long a claim's execution lease lasts (renew with heartbeat):
    /// 1 ms to 30 days.
    std::chrono::milliseconds lease_ttl = std::chrono::minutes{5};
    /// A slot scheduled longer ago than this is `expired`: never run late.
    /// 1 ms to 100 years.
    std::chrono::milliseconds replay_window = std::chrono::hours{24 * 7};
    /// How long a done record is kept after its scheduled time; never
    /// shorter than replay_window, so a replay inside the window always
    /// finds it; at most 100 years.
    std::chrono::milliseconds retention = std::chrono::hours{24 * 8};
};

/// The job-slot ledger on a Store. It reads no clock: every time is judged
/// by the store, on the store's clock. Thread safety: as safe as the store
/// (every model in coord is). The store must outlive it.
template <ledger_store Store>
class basic_job_ledger {
public:
    /// A ledger on `store`; throws std::invalid_argument naming an option out of range.
    explicit basic_job_ledger(Store& store, ledger_options options = {}) : store_(&store), opt_(options) {
        using std::chrono::milliseconds;
        constexpr auto century = std::chrono::duration_cast<milliseconds>(std::chrono::years{100});
        if (opt_.lease_ttl <= milliseconds::zero() || opt_.lease_ttl > std::chrono::hours{24 * 30})
            throw std::invalid_argument("ledger: lease_ttl must be 1 ms to 30 days");
        if (opt_.replay_window <= milliseconds::zero() || opt_.replay_window > century)
            throw std::invalid_argument("ledger: replay_window must be 1 ms to 100 years");
        if (opt_.retention < opt_.replay_window || opt_.retention > century)
            throw std::invalid_argument("ledger: retention must be >= replay_window and at most 100 years");
    }

    /// Claims `s` for `worker`: granted (with a fence larger than every
    /// earlier claim's and an attempt number), replayed (done, with the stored
    /// result), in_progress (another holder, until its lease ends),
    /// payload_mismatch, or expired (older than the replay window).
    /// Cost: one store operation.
    result<claim_outcome> claim(const slot& s, std::string_view worker, std::string_view payload = {}) {
        check_worker(worker);
        const auto hash = payload_hash(payload);
        return store_->ledger_claim(request(s, worker, hash));
    }

    /// Extends the execution lease of the claim with `fence`.
    /// Refusal: errc::stale_fence when a newer claim exists or it is not running.
    result<void> heartbeat(const slot& s, fence_token fence) {
        return store_->ledger_heartbeat(s.to_string(), fence, std::chrono::nanoseconds{opt_.lease_ttl});
    }

    /// Marks the slot done with `result`. Refusal: errc::stale_fence when a
    /// newer claim exists (a timed-out worker's late completion changes nothing).
    result<void> complete(const slot& s, fence_token fence, std::string_view result_text) {
        return store_->ledger_complete(s.to_string(), fence, result_text, retain_until(s));
    }

    /// Records a failed attempt; the slot can be claimed again.
    /// Refusal: errc::stale_fence as complete.
    result<void> fail(const slot& s, fence_token fence, std::string_view reason) {
        return store_->ledger_fail(s.to_string(), fence, reason);
    }

    /// Claims, runs effect(ledger_context) -> std::string, and records the
    /// result. When the store offers it (the memory store) claim, effect and
    /// done marker are one atomic step; otherwise three, with the fence handed
    /// to the effect. An effect that throws is recorded as a failed attempt
    /// and the exception propagates. Outcomes: applied, replayed,
    /// in_progress, stale_fence (the lease ended during the effect and a newer
    /// claim exists: the effect ran, its result was refused), payload_mismatch,
    /// expired.
    template <class Effect>
        requires std::is_convertible_v<std::invoke_result_t<Effect&, const ledger_context&>, std::string>
    result<run_outcome> run(const slot& s, std::string_view worker, std::string_view payload, Effect&& effect) {
        check_worker(worker);
        if constexpr (ledger_run_store<Store>) {
            const auto hash = payload_hash(payload);
            std::string produced;
            auto c = store_->ledger_run_atomic(request(s, worker, hash), retain_until(s), [&](const claim_outcome& g) {
                const ledger_context ctx{s, g.fence, g.attempt, worker};
                produced = effect(ctx);
                return produced;
            });
            if (!c) return unexpected(c.error());
            if (c->kind == claim_outcome::granted) return run_outcome{run_outcome::applied, std::move(produced), c->fence, c->attempt, {}};
            return from_claim(std::move(*c));
        }
        auto c = claim(s, worker, payload);
        if (!c) return unexpected(c.error());
        if (c->kind != claim_outcome::granted) return from_claim(std::move(*c));
        run_outcome out;
        out.fence = c->fence;
        out.attempt = c->attempt;
        const ledger_context ctx{s, c->fence, c->attempt, worker};
        std::string produced;
        try {
            produced = effect(ctx);
        } catch (const std::exception& e) {
            (void)fail(s, c->fence, e.what());
            throw;
        } catch (...) {
            (void)fail(s, c->fence, "unknown exception");
            throw;
        }
        auto done = complete(s, c->fence, produced);
        if (!done) {
            if (done.error() == errc::stale_fence) {
                out.kind = run_outcome::stale_fence;
                return out;
            }
            return unexpected(done.error());
        }
        out.kind = run_outcome::applied;
        out.result = std::move(produced);
        return out;
    }

    /// Revokes the running claim of `s` (an overlap policy replacing a run):
    /// its fence is bumped, so the replaced worker's heartbeat and complete
    /// are refused; the slot can be claimed again. Returns the new fence.
    /// Refusal: errc::stale_fence when the slot is not running.
    result<fence_token> revoke(const slot& s, std::string_view reason) {
        return store_->ledger_revoke(s.to_string(), reason);
    }

    /// The slot's record, or nullopt if the ledger has none.
    result<std::optional<ledger_record>> read(const slot& s) { return store_->ledger_read(s.to_string()); }

    /// Removes done records whose retention ended (on the store's clock);
    /// returns how many.
    result<std::size_t> prune() { return store_->ledger_prune(); }

    /// The options in force.
    const ledger_options& options() const noexcept { return opt_; }

private:
    static void check_worker(std::string_view worker) {
        detail::check_name("ledger: worker", worker);
    }
    // Durations are bounded by the constructor, so this cannot overflow.
    static std::int64_t ns(std::chrono::milliseconds d) { return d.count() * 1'000'000; }
    ledger_claim_request request(const slot& s, std::string_view worker, std::string_view hash) const {
        return ledger_claim_request{s.to_string(), s.scheduled().time_since_epoch(), s.schedule_version(),
                                    worker,        hash,
                                    opt_.lease_ttl, opt_.replay_window};
    }
    static std::string payload_hash(std::string_view payload) {
        static const std::string empty = detail::sha256_hex({});
        return payload.empty() ? empty : detail::sha256_hex(payload);
    }
    // The scheduled time plus the retention, saturated: a slot after 2262
    // is kept until the int64 nanosecond range ends.
    std::chrono::nanoseconds retain_until(const slot& s) const {
        return std::chrono::nanoseconds{detail::add_saturated(
            detail::ns_of_ms_saturated(s.scheduled().time_since_epoch().count()), ns(opt_.retention))};
    }
    static run_outcome from_claim(claim_outcome&& c) {
        run_outcome out;
        out.fence = c.fence;
        out.attempt = c.attempt;
        switch (c.kind) {
        case claim_outcome::replayed:
            out.kind = run_outcome::replayed;
            out.result = std::move(c.result);
            break;
        case claim_outcome::in_progress:
            out.kind = run_outcome::in_progress;
            out.holder = std::move(c.holder);
            break;
        case claim_outcome::payload_mismatch: out.kind = run_outcome::payload_mismatch; break;
        case claim_outcome::expired: out.kind = run_outcome::expired; break;
        case claim_outcome::granted: out.kind = run_outcome::applied; break;
        }
        return out;
    }

    Store* store_;
    ledger_options opt_;
};

}  // namespace coord
