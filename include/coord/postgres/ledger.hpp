// SPDX-License-Identifier: Apache-2.0
// coord/postgres/ledger.hpp: ledger_store and ledger_run_store on PostgreSQL.
//
// Round trips:
// - ledger_claim 1: a call of coord_ledger_claim, which locks the slot's row,
//   judges the execution lease and the replay window on the server's clock
//   and grants, replays or refuses in the statement's one transaction.
// - heartbeat, complete, fail, revoke, prune 1 each: one UPDATE or DELETE
//   whose WHERE is the rule (state, fence, the server's now); read 1.
// - ledger_run_atomic 2, pipelined: BEGIN, the claim and a savepoint; the
//   effect here (its own statements through effect_exec, in the same
//   transaction); the done marker and COMMIT. An effect that throws: 3 more
//   (to the savepoint, the failed attempt recorded, COMMIT).
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coord/detail/text.hpp"
#include "coord/job_ledger.hpp"
#include "coord/postgres/context.hpp"

namespace coord::postgres {

template <class Clock>
class ledger_adapter {
public:
    explicit ledger_adapter(detail::context<Clock>& ctx) noexcept : pool_(ctx.calls()), clock_(ctx.clock()) {}

    result<claim_outcome> ledger_claim(const ledger_claim_request& q) {
        pool::call c(pool_);
        auto r = c.exec(claim_sql, claim_params(q), true);
        if (!r) return unexpected(r.error());
        return claim_answer(*r);
    }
    result<void> ledger_heartbeat(std::string_view key, fence_token fence, std::chrono::nanoseconds ttl) {
        using namespace detail;
        return update("UPDATE coord_ledger SET lease_until_ns = coord_now_ns($4) + $3 "
                      "WHERE key = $1 AND state = 1 AND fence = $2",
                      {param(key), param_u64(fence), param(ttl.count()), now_ns_param(clock_)});
    }
    result<void> ledger_complete(std::string_view key, fence_token fence, std::string_view result_text,
                                 std::chrono::nanoseconds retain_until) {
        using namespace detail;
        return update(done_sql,
                      {param(key), param_u64(fence), bytes_param(result_text), now_ns_param(clock_), param(retain_until.count())});
    }
    result<void> ledger_fail(std::string_view key, fence_token fence, std::string_view reason) {
        using namespace detail;
        return update(fail_sql, {param(key), param_u64(fence), param(coord::detail::text_or_replaced(reason))});
    }
    result<fence_token> ledger_revoke(std::string_view key, std::string_view reason) {
        using namespace detail;
        pool::call c(pool_);
        auto r = c.exec("UPDATE coord_ledger SET fence = fence + 1, state = 0, fail_reason = $2, lease_until_ns = 0 "
                        "WHERE key = $1 AND state = 1 RETURNING fence",
                        {param(key), param(coord::detail::text_or_replaced(reason))}, true);
        if (!r) return unexpected(r.error());
        if (r->rows() == 0) return unexpected(coord::make_error_code(coord::errc::stale_fence));
        return r->u64(0, 0);
    }
    result<std::optional<ledger_record>> ledger_read(std::string_view key) {
        using namespace detail;
        pool::call c(pool_);
        auto r = c.exec("SELECT key, scheduled_ms, schedule_version, state, fence, attempt, holder, lease_until_ns, "
                        "started_ns, completed_ns, retain_until_ns, payload_hash, result, fail_reason "
                        "FROM coord_ledger WHERE key = $1",
                        {param(key)}, false);
        if (!r) return unexpected(r.error());
        if (r->rows() == 0) return std::optional<ledger_record>{};
        ledger_record rec;
        rec.key = r->text(0, 0);
        rec.scheduled = std::chrono::milliseconds(r->i64(0, 1));
        rec.schedule_version = static_cast<std::uint32_t>(r->u64(0, 2));
        const auto state = r->i64(0, 3);
        rec.state = state == 2   ? ledger_record::state_t::done
                    : state == 1 ? ledger_record::state_t::running
                                 : ledger_record::state_t::idle;
        rec.fence = r->u64(0, 4);
        rec.attempt = static_cast<std::uint32_t>(r->u64(0, 5));
        rec.holder = r->text(0, 6);
        rec.lease_until = std::chrono::nanoseconds(r->i64(0, 7));
        rec.started = std::chrono::nanoseconds(r->i64(0, 8));
        rec.completed = std::chrono::nanoseconds(r->i64(0, 9));
        rec.retain_until = std::chrono::nanoseconds(r->i64(0, 10));
        rec.payload_hash = r->text(0, 11);
        rec.result = r->bytes(0, 12);
        rec.fail_reason = r->text(0, 13);
        return std::optional<ledger_record>{std::move(rec)};
    }
    result<std::size_t> ledger_prune() {
        pool::call c(pool_);
        // A saturated retention end (a slot after 2262) is never reached.
        auto r = c.exec("DELETE FROM coord_ledger WHERE state = 2 AND retain_until_ns <= coord_now_ns($1) "
                        "AND retain_until_ns < 9223372036854775807",
                        {detail::now_ns_param(clock_)}, true);
        if (!r) return unexpected(r.error());
        return static_cast<std::size_t>(r->changed());
    }

    /// The claim, the effect and the done marker in ONE transaction: fn runs
    /// inside it, and an effect that writes through effect_exec() commits or
    /// rolls back together with the marker. If fn throws, its writes roll
    /// back (to a savepoint), the attempt is recorded as failed, the
    /// transaction commits that, and the exception propagates. No answer to
    /// the COMMIT (a lost connection, the deadline) is errc::outcome_unknown:
    /// the effect and the marker applied together or not at all; claim again
    /// to learn which (replayed, or granted once the execution lease ends).
    /// fn must not call this store (its connection is in use).
    template <class F>
    result<claim_outcome> ledger_run_atomic(const ledger_claim_request& q, std::chrono::nanoseconds retain_until, F&& fn) {
        using namespace detail;
        pool::call c(pool_);
        auto rollback = [&](coord::error e) {
            (void)c.exec("ROLLBACK", {}, false);
            return result<claim_outcome>(unexpected(std::move(e)));
        };
        // BEGIN, the claim and the savepoint in one round trip (a pipeline).
        auto opened = c.pipeline({{"BEGIN", {}}, {claim_sql, claim_params(q)}, {"SAVEPOINT coord_effect", {}}}, false);
        if (!opened) return rollback(opened.error());
        auto granted = claim_answer((*opened)[1]);
        if (!granted) return rollback(granted.error());
        if (granted->kind != claim_outcome::granted) {
            if (auto e = c.exec("COMMIT", {}, false); !e) return unexpected(e.error());
            return granted;
        }
        std::string produced;
        {
            effect_scope scope(c);
            try {
                produced = fn(*granted);
            } catch (const std::exception& e) {
                c.restart_deadline();
                fail_in_transaction(c, q.key, granted->fence, e.what());
                throw;
            } catch (...) {
                c.restart_deadline();
                fail_in_transaction(c, q.key, granted->fence, "unknown exception");
                throw;
            }
        }
        c.restart_deadline();
        // The done marker and COMMIT in one round trip.
        auto done = c.pipeline({{done_sql,
                                 {param(q.key), param_u64(granted->fence), bytes_param(produced), now_ns_param(clock_),
                                  param(retain_until.count())}},
                                {"COMMIT", {}}},
                               true);
        if (!done) {
            if (done.error() == coord::errc::outcome_unknown) return unexpected(done.error());
            return rollback(done.error());
        }
        granted->result = std::move(produced);
        return granted;
    }

    /// Inside an effect that ledger_run_atomic runs: one statement in the
    /// run's open transaction (text parameters; NULL for nullopt), under its
    /// own operation timeout. Rows come back as text. Outside an effect:
    /// errc::server_refused.
    static result<std::vector<std::vector<std::string>>> effect_exec(
        const std::string& sql, const std::vector<std::optional<std::string>>& params = {}) {
        pool::call* c = current_effect();
        if (!c) return unexpected(coord::error(make_error_code(errc::server_refused), "effect_exec outside a ledger run"));
        std::vector<detail::param_value> ps;
        for (const auto& p : params) ps.push_back(detail::param_value{p, false});
        c->restart_deadline();
        auto r = c->exec(sql.c_str(), ps, false, false);
        if (!r) return unexpected(r.error());
        std::vector<std::vector<std::string>> rows;
        for (int i = 0; i < r->rows(); ++i) {
            std::vector<std::string> row;
            for (int j = 0; j < PQnfields(r->get()); ++j) row.push_back(r->text(i, j));
            rows.push_back(std::move(row));
        }
        return rows;
    }

private:
    static constexpr const char* claim_sql = "SELECT * FROM coord_ledger_claim($1, $2, $3, $4, $5, $6, $7, $8)";
    static constexpr const char* done_sql =
        "UPDATE coord_ledger SET state = 2, result = $3, completed_ns = coord_now_ns($4), retain_until_ns = $5 "
        "WHERE key = $1 AND state = 1 AND fence = $2";
    static constexpr const char* fail_sql =
        "UPDATE coord_ledger SET state = 0, fail_reason = $3, lease_until_ns = 0 "
        "WHERE key = $1 AND state = 1 AND fence = $2";

    std::vector<detail::param_value> claim_params(const ledger_claim_request& q) const {
        using namespace detail;
        return {param(q.key),          param(q.scheduled.count()), param(static_cast<std::int64_t>(q.schedule_version)),
                param(q.worker),       param(q.payload_hash), param(q.lease_ttl.count()),
                param(q.replay_window.count()), now_ns_param(clock_)};
    }

    static result<claim_outcome> claim_answer(const detail::answer& r) {
        if (r.rows() != 1) return unexpected(make_error_code(errc::bad_answer));
        claim_outcome out;
        const auto kind = r.i64(0, 0);
        out.kind = kind == 0   ? claim_outcome::granted
                   : kind == 1 ? claim_outcome::replayed
                   : kind == 2 ? claim_outcome::in_progress
                   : kind == 3 ? claim_outcome::payload_mismatch
                               : claim_outcome::expired;
        out.fence = r.u64(0, 1);
        out.attempt = static_cast<std::uint32_t>(r.u64(0, 2));
        out.holder = r.text(0, 3);
        out.lease_until = std::chrono::nanoseconds(r.i64(0, 4));
        out.result = r.bytes(0, 5);
        return out;
    }

    result<void> update(const char* sql, std::vector<detail::param_value> params) {
        pool::call c(pool_);
        auto r = c.exec(sql, params, true);
        if (!r) return unexpected(r.error());
        if (r->changed() == 0) return unexpected(coord::make_error_code(coord::errc::stale_fence));
        return {};
    }

    // The effect threw: undo its writes, record the failed attempt, commit that.
    static void fail_in_transaction(pool::call& c, std::string_view key, fence_token fence, std::string_view reason) {
        using namespace detail;
        if (c.exec("ROLLBACK TO SAVEPOINT coord_effect", {}, false) &&
            c.exec(fail_sql, {param(key), param_u64(fence), param(coord::detail::text_or_replaced(reason))}, false) &&
            c.exec("COMMIT", {}, true))
            return;
        (void)c.exec("ROLLBACK", {}, false);
    }

    // The call whose effect this thread is running (effect_exec's connection).
    static pool::call*& current_effect() {
        thread_local pool::call* current = nullptr;
        return current;
    }
    struct effect_scope {
        explicit effect_scope(pool::call& c) : previous(current_effect()) { current_effect() = &c; }
        ~effect_scope() { current_effect() = previous; }
        effect_scope(const effect_scope&) = delete;
        effect_scope& operator=(const effect_scope&) = delete;
        pool::call* previous;
    };

    pool& pool_;
    const Clock& clock_;
};

}  // namespace coord::postgres
