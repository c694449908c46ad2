// SPDX-License-Identifier: Apache-2.0
// coord/postgres/store.hpp: coord's stores on PostgreSQL (libpq), target
// coord::postgres. For fences, leases and IDs that several machines trust.
//
// Every operation is one round trip that PostgreSQL executes atomically (but
// fence_update and a ledger run: two, pipelined, the caller's function or
// effect between them, inside one transaction): a
// call of one of the adapter's PL/pgSQL functions, which locks the row
// (SELECT ... FOR UPDATE), applies the same rule as the memory store and
// writes, all in the one statement's transaction; or one INSERT ... ON
// CONFLICT ... RETURNING. Nothing is read in one call and written in another.
// Every expiry (leases, the ledger's execution leases, replay window and
// retention, sessions' idle and absolute timeouts) is judged on the server's
// clock (clock_timestamp()), read inside the statement, never on the
// client's: no call sends the client's time. The schema (tables coord_*, functions coord_*) is created by
// the constructor from numbered migrations (coord/postgres/schema.hpp) under
// an advisory lock; a database with a newer schema is refused.
//
//   coord::postgres::store store{"host=db1 dbname=app user=svc"};
//   coord::basic_lease_manager leases{store};
//   coord::basic_keyed_fenced_resource orders{store};
//
// Errors: a refusal by the rule is the usual errc (stale_fence, lease_held,
// ...). A failure of the server or the connection is a postgres::errc in the
// "coord.postgres" category with the server's message in last_error(); when
// the connection broke after a writing call was sent, the call may have
// committed and the code is coord::errc::outcome_unknown. The next call
// reconnects. Thread safety: a pool of connections (options::pool_size); each
// call holds one for its whole step, so threads call in parallel up to the
// pool's size.
#pragma once

#ifndef COORD_STORE_HEADER_INCLUDED
#define COORD_STORE_HEADER_INCLUDED 1
#endif

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "coord/clock.hpp"
#include "coord/error.hpp"
#include "coord/fence.hpp"
#include "coord/job_ledger.hpp"
#include "coord/lease.hpp"
#include "coord/reservation.hpp"
#include "coord/result.hpp"
#include "coord/segment.hpp"
#include "coord/session.hpp"
#include "coord/detail/engine_outcome.hpp"
#include "coord/postgres/schema.hpp"

namespace coord::postgres {

/// Infrastructure failures of the PostgreSQL adapter.
enum class errc {
    /// No connection could be made (server down, refused, bad conninfo).
    connection_failed = 1,
    /// The server refused or failed the statement (it was rolled back).
    statement_failed,
    /// The statement was cancelled (statement_timeout) and rolled back.
    timeout,
    /// The server's answer was not what the adapter expects (schema drift?).
    bad_answer,
    /// The database's coord schema is newer than this library knows:
    /// upgrade coord before writing with it.
    schema_too_new,
};

namespace detail {
class category_impl final : public std::error_category {
public:
    const char* name() const noexcept override { return "coord.postgres"; }
    // A failed connection, or a statement that failed or was cancelled (and
    // rolled back): the call certainly did not apply. A call that may have
    // committed is coord::errc::outcome_unknown instead.
    std::error_condition default_error_condition(int ev) const noexcept override {
        // An answer of the wrong shape says nothing about what the server did.
        if (static_cast<errc>(ev) == errc::bad_answer) return coord::make_error_condition(coord::condition::outcome_unknown);
        return coord::make_error_condition(coord::condition::unavailable);
    }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::connection_failed: return "PostgreSQL connection failed";
        case errc::statement_failed: return "PostgreSQL statement failed";
        case errc::timeout: return "PostgreSQL statement timed out";
        case errc::bad_answer: return "unexpected answer from PostgreSQL";
        case errc::schema_too_new: return "PostgreSQL schema newer than this coord";
        }
        return "unknown PostgreSQL error";
    }
};
}  // namespace detail

inline const std::error_category& category() noexcept {
    static const detail::category_impl instance;
    return instance;
}
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), category()}; }

/// The server's message for the last failure on this thread (empty if none).
inline std::string& last_error() {
    thread_local std::string message;
    return message;
}

/// Why `conninfo` is not a connection string libpq accepts (a malformed
/// key=value list or URI), or nullopt when it is one. Says nothing of
/// whether the server can be reached.
inline std::optional<std::string> conninfo_error(const std::string& conninfo) {
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), &err);
    if (opts) {
        PQconninfoFree(opts);
        return std::nullopt;
    }
    std::string why = err ? err : "out of memory";
    if (err) PQfreemem(err);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    return why;
}

/// Store settings; out-of-range values make the constructor throw
/// std::invalid_argument naming the field.
struct options {
    /// Connections kept open at most (1 to 64). Each call takes one for its
    /// whole step (a transaction stays on its connection); calls from more
    /// threads than this wait for one to come back. Connections are opened
    /// on first use and reopened on the next call after they break.
    std::size_t pool_size = 4;
};

/// The clock policy that means "the server's clock": leases are judged on
/// clock_timestamp() of the server. Tests may give a manual_clock instead,
/// whose readings are sent with each call.
struct server_clock {};


/// PostgreSQL as a fence_store, lease_store, time_reservation_store and
/// segment_allocator. Clock: server_clock (production: leases judged on the
/// server's clock) or a unix_clock whose readings are sent (tests).
template <class Clock = server_clock>
class basic_store {
public:
    /// Connects and creates the schema. Throws std::invalid_argument when
    /// `conninfo` is malformed (conninfo_error), store_error naming the
    /// server when connecting or the schema fails.
    explicit basic_store(std::string conninfo, Clock clock = Clock{}, options opts = {})
        : conninfo_(std::move(conninfo)), clock_(std::move(clock)), opts_(opts) {
        if (auto why = conninfo_error(conninfo_))
            throw std::invalid_argument("coord: PostgreSQL conninfo is malformed: " + *why);
        if (opts_.pool_size < 1 || opts_.pool_size > 64)
            throw std::invalid_argument("coord::postgres::options::pool_size must be 1 to 64");
        leased lk(*this);
        // A constructor that throws runs no destructor; the pool's members
        // still close every connection (each closes itself).
        auto refuse = [](std::error_code ec, const std::string& what) {
            throw store_error(ec, "coord: PostgreSQL" + what + ": " + last_error());
        };
        if (!connect()) refuse(make_error_code(errc::connection_failed), "");
        auto r = exec("SELECT pg_advisory_lock(7370426)", {}, false);
        if (!r) refuse(r.error(), " schema lock");
        auto m = migrate();
        (void)exec("SELECT pg_advisory_unlock(7370426)", {}, false);
        if (!m) refuse(m.error(), " schema");
    }

    /// The schema version the database is at (after the constructor: schema_version()).
    result<int> database_schema_version() {
        leased lk(*this);
        auto r = exec("SELECT version FROM coord_schema WHERE id = 1", {}, false);
        if (!r) return unexpected(r.error());
        if (PQntuples(r->get()) != 1) return unexpected(make_error_code(errc::bad_answer));
        return static_cast<int>(to_i64(r->text(0, 0)));
    }
    basic_store(const basic_store&) = delete;
    basic_store& operator=(const basic_store&) = delete;
    ~basic_store() = default;  // every connection is back in the pool and closes itself

    // fence_store -----------------------------------------------------------

    /// One call of coord_fence_write. Refusals: stale_fence, stale_sequence
    /// (with the highest token); errc::outcome_unknown if the connection broke
    /// after sending.
    result<void, write_error> fence_write(std::string_view key, fence_token token, std::string_view value) {
        return fence_call(key, token, std::nullopt, value);
    }
    result<void, write_error> fence_write(std::string_view key, fence_token token, std::uint64_t seq,
                                          std::string_view value) {
        return fence_call(key, token, seq, value);
    }
    /// fence_update_store: one transaction in two round trips: BEGIN, the
    /// row made and locked (INSERT ... ON CONFLICT DO NOTHING, SELECT ... FOR
    /// UPDATE) pipelined; the rule and fn on the value here; the UPDATE and
    /// COMMIT pipelined. fn runs once, only when the token passes; if it
    /// throws, the transaction rolls back and the exception propagates. A
    /// refusal rolls back (one more round trip).
    template <class F>
    result<void, write_error> fence_update(std::string_view key, fence_token token, F&& fn) {
        leased lk(*this);
        auto fail = [&](std::error_code ec, fence_token highest = 0) {
            (void)exec("ROLLBACK", {}, false);
            return result<void, write_error>(unexpected(write_error{ec, highest}));
        };
        auto opened = pipeline({{"BEGIN", {}},
                                {"INSERT INTO coord_fence(key) VALUES ($1) ON CONFLICT DO NOTHING", {param(key)}},
                                {"SELECT highest, written, value, has_seq, seq FROM coord_fence WHERE key = $1 FOR UPDATE",
                                 {param(key)}}},
                               false);
        if (!opened) return fail(opened.error());
        const answer& r = (*opened)[2];
        if (PQntuples(r.get()) != 1) return fail(make_error_code(errc::bad_answer));
        const fence_token highest = to_u64(r.text(0, 0));
        const bool written = r.text(0, 1) == "t";
        if (written && token < highest) return fail(coord::make_error_code(coord::errc::stale_fence), highest);
        const bool same = written && token == highest;
        std::string value = r.bytes(0, 2);
        try {
            fn(value);
        } catch (...) {
            (void)exec("ROLLBACK", {}, false);
            throw;
        }
        const bool has_seq = same && r.text(0, 3) == "t";
        auto done = pipeline({{"UPDATE coord_fence SET highest = $2, written = true, value = $3, has_seq = $4, "
                               "seq = CASE WHEN $4 THEN seq ELSE 0 END WHERE key = $1",
                               {param(key), param_u64(token), bytes_param(value), param(has_seq ? "true" : "false")}},
                              {"COMMIT", {}}},
                             true);
        if (!done) {
            if (done.error() == coord::errc::outcome_unknown) return unexpected(write_error{done.error(), 0});
            return fail(done.error());
        }
        return {};
    }

    result<fenced_value> fence_read(std::string_view key) {
        leased lk(*this);
        auto r = exec("SELECT highest, value, written FROM coord_fence WHERE key = $1", {param(key)}, false);
        if (!r) return unexpected(r.error());
        if (PQntuples(r->get()) == 0) return fenced_value{};
        return fenced_value{to_u64(r->text(0, 0)), r->bytes(0, 1), r->text(0, 2) == "t"};
    }

    // lease_store -----------------------------------------------------------

    result<lease, lease_error> lease_acquire(std::string_view name, std::string_view owner,
                                             std::chrono::nanoseconds ttl) {
        return lease_call("SELECT * FROM coord_lease_acquire($1, $2, $3, $4)", name,
                          {param(name), param(owner), param(ttl.count()), now_param()}, coord::errc::lease_held);
    }
    result<lease, lease_error> lease_renew(std::string_view name, std::string_view owner, fence_token token,
                                           std::chrono::nanoseconds ttl) {
        return lease_call("SELECT * FROM coord_lease_renew($1, $2, $3, $4, $5)", name,
                          {param(name), param(owner), param(static_cast<std::int64_t>(token)), param(ttl.count()),
                           now_param()},
                          coord::errc::not_lease_holder);
    }
    result<void, lease_error> lease_release(std::string_view name, std::string_view owner, fence_token token) {
        auto r = lease_call("SELECT * FROM coord_lease_release($1, $2, $3, $4)", name,
                            {param(name), param(owner), param(static_cast<std::int64_t>(token)), now_param()},
                            coord::errc::not_lease_holder);
        if (!r) return unexpected(r.error());
        return {};
    }
    result<std::optional<lease>> lease_read(std::string_view name) {
        leased lk(*this);
        auto r = exec("SELECT * FROM coord_lease_read($1, $2)", {param(name), now_param()}, false);
        if (!r) return unexpected(r.error());
        if (PQntuples(r->get()) == 0) return std::optional<lease>{};
        return std::optional<lease>{lease{std::string(name), r->text(0, 0), to_u64(r->text(0, 1)),
                                          std::chrono::nanoseconds{to_i64(r->text(0, 2))},
                                          std::chrono::nanoseconds{to_i64(r->text(0, 3))}}};
    }

    // time_reservation_store ---------------------------------------------------

    result<std::int64_t, write_error> time_reserve(std::string_view key, std::int64_t until_ms, fence_token token) {
        leased lk(*this);
        auto r = exec("SELECT * FROM coord_time_reserve($1, $2, $3)", {param(key), param(until_ms), param_u64(token)},
                      true);
        if (!r) return unexpected(write_error{r.error(), 0});
        if (PQntuples(r->get()) != 1) return unexpected(write_error{make_error_code(errc::bad_answer), 0});
        if (r->text(0, 0) == "1") return unexpected(write_error{coord::make_error_code(coord::errc::stale_fence), to_u64(r->text(0, 1))});
        return to_i64(r->text(0, 1));
    }

    // segment_allocator ---------------------------------------------------------

    /// One INSERT ... ON CONFLICT ... RETURNING: ranges never overlap, also
    /// across processes and machines.
    result<segment_range> segment_allocate(std::string_view tag, std::uint64_t step) {
        if (step == 0 || step > segment_id_limit - 1) return unexpected(coord::make_error_code(coord::errc::range_exhausted));
        leased lk(*this);
        auto r = exec(
            "INSERT INTO coord_segment AS s (tag, next) VALUES ($1, 1 + $2::numeric) "
            "ON CONFLICT (tag) DO UPDATE SET next = s.next + $2::numeric "
            "WHERE s.next + $2::numeric <= 9223372036854775808 RETURNING next - $2::numeric, next",
            {param(tag), param(static_cast<std::int64_t>(step))}, true);
        if (!r) return unexpected(r.error());
        if (PQntuples(r->get()) == 0) return unexpected(coord::make_error_code(coord::errc::range_exhausted));
        return segment_range{to_u64(r->text(0, 0)), to_u64(r->text(0, 1))};
    }

    // ledger_store / ledger_run_store -----------------------------------------

    result<claim_outcome> ledger_claim(const ledger_claim_request& q) {
        leased lk(*this);
        return claim_locked(q, true);
    }
    result<void> ledger_heartbeat(std::string_view key, fence_token fence, std::int64_t ttl_ns) {
        return ledger_update("UPDATE coord_ledger SET lease_until_ns = coord_now_ns($4) + $3 "
                             "WHERE key = $1 AND state = 1 AND fence = $2",
                             {param(key), param_u64(fence), param(ttl_ns), now_param()});
    }
    result<void> ledger_complete(std::string_view key, fence_token fence, std::string_view result_text,
                                 std::int64_t retain_until) {
        return ledger_update(done_sql, {param(key), param_u64(fence), bytes_param(result_text), now_param(),
                                        param(retain_until)});
    }
    result<void> ledger_fail(std::string_view key, fence_token fence, std::string_view reason) {
        return ledger_update("UPDATE coord_ledger SET state = 0, fail_reason = $3, lease_until_ns = 0 "
                             "WHERE key = $1 AND state = 1 AND fence = $2",
                             {param(key), param_u64(fence), param(reason)});
    }
    result<fence_token> ledger_revoke(std::string_view key, std::string_view reason) {
        leased lk(*this);
        auto r = exec("UPDATE coord_ledger SET fence = fence + 1, state = 0, fail_reason = $2, lease_until_ns = 0 "
                      "WHERE key = $1 AND state = 1 RETURNING fence",
                      {param(key), param(reason)}, true);
        if (!r) return unexpected(r.error());
        if (PQntuples(r->get()) == 0) return unexpected(coord::make_error_code(coord::errc::stale_fence));
        return to_u64(r->text(0, 0));
    }
    result<std::optional<ledger_record>> ledger_read(std::string_view key) {
        leased lk(*this);
        auto r = exec("SELECT key, scheduled_ms, schedule_version, state, fence, attempt, holder, lease_until_ns, "
                      "started_ns, completed_ns, retain_until_ns, payload_hash, result, fail_reason "
                      "FROM coord_ledger WHERE key = $1",
                      {param(key)}, false);
        if (!r) return unexpected(r.error());
        if (PQntuples(r->get()) == 0) return std::optional<ledger_record>{};
        ledger_record rec;
        rec.key = r->text(0, 0);
        rec.scheduled_ms = to_i64(r->text(0, 1));
        rec.schedule_version = static_cast<std::uint32_t>(to_u64(r->text(0, 2)));
        const auto state = r->text(0, 3);
        rec.state = state == "2" ? ledger_record::state_t::done
                    : state == "1" ? ledger_record::state_t::running
                                   : ledger_record::state_t::idle;
        rec.fence = to_u64(r->text(0, 4));
        rec.attempt = static_cast<std::uint32_t>(to_u64(r->text(0, 5)));
        rec.holder = r->text(0, 6);
        rec.lease_until_ns = to_i64(r->text(0, 7));
        rec.started_ns = to_i64(r->text(0, 8));
        rec.completed_ns = to_i64(r->text(0, 9));
        rec.retain_until_ns = to_i64(r->text(0, 10));
        rec.payload_hash = r->text(0, 11);
        rec.result = r->bytes(0, 12);
        rec.fail_reason = r->text(0, 13);
        return std::optional<ledger_record>{std::move(rec)};
    }
    result<std::size_t> ledger_prune() {
        leased lk(*this);
        // A saturated retention end (a slot after 2262) is never reached.
        auto r = exec("DELETE FROM coord_ledger WHERE state = 2 AND retain_until_ns <= coord_now_ns($1) "
                      "AND retain_until_ns < 9223372036854775807",
                      {now_param()}, true);
        if (!r) return unexpected(r.error());
        return static_cast<std::size_t>(to_u64(PQcmdTuples(r->get())));
    }

    /// The claim, the effect and the done marker in ONE transaction: fn runs
    /// inside it, and an effect that writes through effect_transaction()
    /// commits or rolls back together with the marker. If fn throws, its
    /// writes roll back (to a savepoint), the attempt is recorded as failed,
    /// the transaction commits that, and the exception propagates. A
    /// connection lost at COMMIT is errc::outcome_unknown. fn must not call
    /// this store (its connection is in use): it uses effect_transaction().
    template <class F>
    result<claim_outcome> ledger_run_atomic(const ledger_claim_request& q, std::int64_t retain_until, F&& fn) {
        leased lk(*this);
        auto rollback = [&](std::error_code ec) {
            (void)exec("ROLLBACK", {}, false);
            return result<claim_outcome>(unexpected(ec));
        };
        // BEGIN, the claim and the savepoint in one round trip (a pipeline).
        auto opened = pipeline({{"BEGIN", {}}, {claim_sql, claim_params(q)}, {"SAVEPOINT coord_effect", {}}}, false);
        if (!opened) return rollback(opened.error());
        auto c = claim_answer((*opened)[1]);
        if (!c) return rollback(c.error());
        if (c->kind != claim_outcome::granted) {
            if (auto e = exec("COMMIT", {}, false); !e) return unexpected(e.error());
            return c;
        }
        std::string produced;
        {
            transaction_scope scope(*this);
            try {
                produced = fn(*c);
            } catch (const std::exception& e) {
                fail_in_transaction(q.key, c->fence, e.what());
                throw;
            } catch (...) {
                fail_in_transaction(q.key, c->fence, "unknown exception");
                throw;
            }
        }
        // The done marker and COMMIT in one round trip.
        auto done = pipeline({{done_sql,
                               {param(q.key), param_u64(c->fence), bytes_param(produced), now_param(),
                                param(retain_until)}},
                              {"COMMIT", {}}},
                             true);
        if (!done) {
            if (done.error() == coord::errc::outcome_unknown) return unexpected(done.error());
            return rollback(done.error());
        }
        c->result = std::move(produced);
        return c;
    }

    /// Inside an effect that ledger_run_atomic runs: runs one statement in the
    /// run's open transaction (text parameters; NULL for nullopt). Rows come
    /// back as text. Outside an effect: errc::statement_failed.
    static result<std::vector<std::vector<std::string>>> effect_exec(const std::string& sql,
                                                                     const std::vector<std::optional<std::string>>& params = {}) {
        basic_store* self = current_effect_store();
        if (!self) {
            last_error() = "effect_exec outside a ledger run";
            return unexpected(make_error_code(errc::statement_failed));
        }
        std::vector<param_value> ps;
        for (const auto& p : params) ps.push_back(param_value{p, false});
        auto r = self->exec(sql.c_str(), ps, false, false);
        if (!r) return unexpected(r.error());
        std::vector<std::vector<std::string>> rows;
        for (int i = 0; i < PQntuples(r->get()); ++i) {
            std::vector<std::string> row;
            for (int j = 0; j < PQnfields(r->get()); ++j) row.push_back(r->text(i, j));
            rows.push_back(std::move(row));
        }
        return rows;
    }

    // session_store ------------------------------------------------------------

    result<session_record> session_create(std::string_view hash, const session_request& req) {
        leased lk(*this);
        auto r = exec("SELECT * FROM coord_session_create($1, $2, $3, $4, $5, $6)",
                      {param(hash), param(req.user), bytes_param(req.data), param(req.idle_timeout_ms),
                       param(req.absolute_timeout_ms), now_ms_param()},
                      true);
        if (!r) return unexpected(r.error());
        if (PQntuples(r->get()) != 1) return unexpected(make_error_code(errc::bad_answer));
        if (auto e = session_status(r->text(0, 0))) return unexpected(e);
        session_record rec;
        rec.user.assign(req.user);
        rec.data.assign(req.data);
        rec.created_ms = rec.last_seen_ms = to_i64(r->text(0, 1));
        rec.absolute_expiry_ms = to_i64(r->text(0, 2));
        rec.idle_timeout_ms = req.idle_timeout_ms;
        rec.version = 1;
        return rec;
    }
    result<session_record> session_load(std::string_view hash) {
        leased lk(*this);
        auto r = exec("SELECT * FROM coord_session_load($1, $2)", {param(hash), now_ms_param()}, true);
        if (!r) return unexpected(r.error());
        if (PQntuples(r->get()) != 1) return unexpected(make_error_code(errc::bad_answer));
        if (auto e = session_status(r->text(0, 0))) return unexpected(e);
        session_record rec;
        rec.user = r->text(0, 1);
        rec.data = r->bytes(0, 2);
        rec.created_ms = to_i64(r->text(0, 3));
        rec.last_seen_ms = to_i64(r->text(0, 4));
        rec.absolute_expiry_ms = to_i64(r->text(0, 5));
        rec.idle_timeout_ms = to_i64(r->text(0, 6));
        rec.version = to_u64(r->text(0, 7));
        return rec;
    }
    result<std::uint64_t> session_save(std::string_view hash, std::uint64_t version, std::string_view data) {
        return session_versioned("SELECT * FROM coord_session_save($1, $2, $3, $4)",
                                 {param(hash), param_u64(version), bytes_param(data), now_ms_param()});
    }
    result<std::uint64_t> session_rotate(std::string_view old_hash, std::string_view new_hash, std::uint64_t version) {
        return session_versioned("SELECT * FROM coord_session_rotate($1, $2, $3, $4)",
                                 {param(old_hash), param(new_hash), param_u64(version), now_ms_param()});
    }
    result<bool> session_revoke(std::string_view hash) {
        leased lk(*this);
        auto r = exec("DELETE FROM coord_session WHERE hash = $1", {param(hash)}, true);
        if (!r) return unexpected(r.error());
        return to_u64(PQcmdTuples(r->get())) > 0;
    }
    result<std::size_t> session_revoke_user(std::string_view user) {
        leased lk(*this);
        auto r = exec("DELETE FROM coord_session WHERE user_name = $1", {param(user)}, true);
        if (!r) return unexpected(r.error());
        return static_cast<std::size_t>(to_u64(PQcmdTuples(r->get())));
    }

    // revocation_store -----------------------------------------------------------

    result<void> revoke_token(std::string_view jti, std::int64_t until_s) {
        return plain_write("INSERT INTO coord_denied_token VALUES ($1, $2) ON CONFLICT (jti) DO UPDATE "
                           "SET until_s = greatest(coord_denied_token.until_s, EXCLUDED.until_s)",
                           {param(jti), param(until_s)});
    }
    result<void> revoke_subject(std::string_view sub, std::int64_t not_before_s) {
        return plain_write("INSERT INTO coord_subject_nbf VALUES ($1, $2) ON CONFLICT (sub) DO UPDATE "
                           "SET not_before_s = greatest(coord_subject_nbf.not_before_s, EXCLUDED.not_before_s)",
                           {param(sub), param(not_before_s)});
    }
    /// One SELECT reads both lists.
    result<bool> token_revoked(std::string_view jti, std::string_view sub, std::optional<std::int64_t> iat,
                               std::int64_t now_s) {
        leased lk(*this);
        auto r = exec("SELECT EXISTS (SELECT 1 FROM coord_denied_token WHERE $1 <> '' AND jti = $1 AND $4 <= until_s) "
                      "OR EXISTS (SELECT 1 FROM coord_subject_nbf WHERE $2 <> '' AND sub = $2 "
                      "AND ($3::bigint IS NULL OR $3::bigint < not_before_s))",
                      {param(jti), param(sub), iat ? param(*iat) : param_value{std::nullopt, false}, param(now_s)}, false);
        if (!r) return unexpected(r.error());
        return r->text(0, 0) == "t";
    }

    /// The server's clock now, in nanoseconds since the Unix epoch (for tests
    /// and diagnostics).
    result<std::int64_t> server_now_ns() {
        leased lk(*this);
        auto r = exec("SELECT coord_now_ns()", {}, false);
        if (!r) return unexpected(r.error());
        return to_i64(r->text(0, 0));
    }

    const std::string& conninfo() const noexcept { return conninfo_; }

private:
    // A query result, freed with the object.
    class answer {
    public:
        explicit answer(PGresult* r) : r_(r) {}
        answer(answer&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
        answer& operator=(answer&&) = delete;
        ~answer() {
            if (r_) PQclear(r_);
        }
        PGresult* get() const noexcept { return r_; }
        std::string text(int row, int col) const {
            return std::string(PQgetvalue(r_, row, col), static_cast<std::size_t>(PQgetlength(r_, row, col)));
        }
        // A bytea column in text format ("\x" and hex).
        std::string bytes(int row, int col) const {
            std::size_t n = 0;
            unsigned char* raw = PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(r_, row, col)), &n);
            std::string out(reinterpret_cast<const char*>(raw), n);
            PQfreemem(raw);
            return out;
        }

    private:
        PGresult* r_;
    };

    struct param_value {
        std::optional<std::string> text;
        bool binary = false;
    };

    static param_value param(std::string_view s) { return {std::string(s), false}; }
    static param_value param(std::int64_t v) { return {std::to_string(v), false}; }
    static param_value param_u64(std::uint64_t v) { return {std::to_string(v), false}; }
    static param_value bytes_param(std::string_view s) { return {std::string(s), true}; }
    // The time a test clock sends (NULL for server_clock: the server reads its own).
    param_value now_param() const {
        if constexpr (std::is_same_v<Clock, server_clock>) return {std::nullopt, false};
        else return {std::to_string(since_epoch_ns(clock_.now())), false};
    }
    param_value now_ms_param() const {
        if constexpr (std::is_same_v<Clock, server_clock>) return {std::nullopt, false};
        else return {std::to_string(unix_millis(clock_.now())), false};
    }

    // Brings the database to schema_version() (under the caller's advisory
    // lock): each migration above the recorded version in a transaction of
    // its own, with the new version; refuses a newer database.
    result<void> migrate() {
        if (auto t = exec("CREATE TABLE IF NOT EXISTS coord_schema (id int PRIMARY KEY CHECK (id = 1), "
                          "version int NOT NULL)",
                          {}, true);
            !t)
            return unexpected(t.error());
        auto v = exec("SELECT coalesce((SELECT version FROM coord_schema WHERE id = 1), "
                      "CASE WHEN to_regclass('coord_fence') IS NULL THEN 0 ELSE 1 END)",
                      {}, false);
        if (!v) return unexpected(v.error());
        const int at = static_cast<int>(to_i64(v->text(0, 0)));
        if (at > schema_version()) {
            last_error() = "the database's coord schema is version " + std::to_string(at) +
                           ", newer than this library's " + std::to_string(schema_version()) + ": upgrade coord";
            return unexpected(make_error_code(errc::schema_too_new));
        }
        for (const auto& m : migrations()) {
            if (m.version <= at) continue;
            if (auto b = exec("BEGIN", {}, false); !b) return unexpected(b.error());
            std::error_code failed;
            if (auto applied = exec(m.sql, {}, true); !applied) {
                failed = applied.error();
            } else if (auto recorded = exec("INSERT INTO coord_schema VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET "
                                            "version = EXCLUDED.version",
                                            {param(static_cast<std::int64_t>(m.version))}, true);
                       !recorded) {
                failed = recorded.error();
            }
            if (failed) {
                const auto message = last_error();
                (void)exec("ROLLBACK", {}, false);
                last_error() = "migration " + std::to_string(m.version) + " (" + m.what + "): " + message;
                return unexpected(failed);
            }
            if (auto c = exec("COMMIT", {}, true); !c) return unexpected(c.error());
        }
        return {};
    }

    static std::uint64_t to_u64(const std::string& s) { return std::strtoull(s.c_str(), nullptr, 10); }
    static std::int64_t to_i64(const std::string& s) { return std::strtoll(s.c_str(), nullptr, 10); }

    bool connect() {
        pooled& c = cur();
        PGconn*& conn = c.conn;
        auto& prepared_names = c.prepared;
        if (conn && PQstatus(conn) == CONNECTION_OK) return true;
        prepared_names.clear();  // a new session has no prepared statements
        if (conn) {
            PQreset(conn);
        } else {
            conn = PQconnectdb(conninfo_.c_str());
            // A library writes nothing to the application's stderr: the
            // server's notices (CREATE ... IF NOT EXISTS on an existing
            // table) are dropped; errors come back as error codes.
            if (conn) PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
        }
        if (conn && PQstatus(conn) == CONNECTION_OK) return true;
        last_error() = conn ? PQerrorMessage(conn) : "out of memory";
        return false;
    }

    // The name of `sql` prepared on this connection (prepared on first use):
    // every later call is one round trip without parsing or planning.
    result<std::string> prepared(const char* sql, int nparams) {
        pooled& c = cur();
        PGconn*& conn = c.conn;
        auto& prepared_names = c.prepared;
        auto it = prepared_names.find(sql);
        if (it != prepared_names.end()) return it->second;
        std::string name = "coord_" + std::to_string(prepared_names.size());
        answer r(PQprepare(conn, name.c_str(), sql, nparams, nullptr));
        if (!r.get() || PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
            last_error() = PQerrorMessage(conn);
            return unexpected(make_error_code(PQstatus(conn) == CONNECTION_OK ? errc::statement_failed
                                                                               : errc::connection_failed));
        }
        prepared_names.emplace(sql, name);
        return name;
    }

    // One statement. `writes`: a broken connection after sending means the
    // outcome is unknown rather than failed. Statements with parameters are
    // prepared once per connection unless `prepare` is false.
    result<answer> exec(const char* sql, const std::vector<param_value>& params, bool writes, bool prepare = true) {
        PGconn*& conn = cur().conn;  // connect() may open it
        if (!connect()) return unexpected(make_error_code(errc::connection_failed));
        std::vector<const char*> values;
        std::vector<int> lengths, formats;
        for (const auto& p : params) {
            values.push_back(p.text ? p.text->data() : nullptr);
            lengths.push_back(p.text ? static_cast<int>(p.text->size()) : 0);
            formats.push_back(p.binary ? 1 : 0);
        }
        PGresult* raw = nullptr;
        if (params.empty()) {
            raw = PQexec(conn, sql);
        } else if (prepare) {
            auto name = prepared(sql, static_cast<int>(params.size()));
            if (!name) return unexpected(name.error());
            raw = PQexecPrepared(conn, name->c_str(), static_cast<int>(params.size()), values.data(), lengths.data(),
                                 formats.data(), 0);
        } else {
            raw = PQexecParams(conn, sql, static_cast<int>(params.size()), nullptr, values.data(), lengths.data(),
                               formats.data(), 0);
        }
        answer r(raw);
        const auto status = r.get() ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
        if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) return r;
        last_error() = PQerrorMessage(conn);
        using coord::detail::call_fate;
        if (PQstatus(conn) != CONNECTION_OK)
            return unexpected(coord::detail::engine_failure(call_fate::lost_after_send, writes,
                                                            make_error_code(errc::connection_failed)));
        const char* state = r.get() ? PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) : nullptr;
        const bool cancelled = state && std::string_view(state) == "57014";
        return unexpected(coord::detail::engine_failure(call_fate::failed_on_server, writes,
                                                        make_error_code(cancelled ? errc::timeout : errc::statement_failed)));
    }

    // Each statement below is atomic on its own and applies the whole rule
    // (PostgreSQL locks the row); none acts on what an earlier one read. A
    // write to an existing key is one round trip; a new key two; a refusal
    // three (the last reads the highest token for the error report, after
    // the decision is final).
    result<void, write_error> fence_call(std::string_view key, fence_token token, std::optional<std::uint64_t> seq,
                                         std::string_view value) {
        leased lk(*this);
        const std::vector<param_value> ps{param(key), param_u64(token),
                                          seq ? param_u64(*seq) : param_value{std::nullopt, false}, bytes_param(value)};
        // The common case, an existing key whose rule passes, is one plain
        // UPDATE ... WHERE <the rule>.
        auto u = exec(
            "UPDATE coord_fence AS f SET highest = $2::numeric, written = true, value = $4, "
            "has_seq = $3::numeric IS NOT NULL OR (f.written AND f.highest = $2::numeric AND f.has_seq), "
            "seq = CASE WHEN $3::numeric IS NOT NULL THEN $3::numeric "
            "WHEN f.written AND f.highest = $2::numeric THEN f.seq ELSE 0 END "
            "WHERE f.key = $1 AND NOT (f.written AND $2::numeric < f.highest) AND NOT ($3::numeric IS NOT NULL "
            "AND f.written AND f.highest = $2::numeric AND f.has_seq AND $3::numeric <= f.seq)",
            ps, true);
        if (!u) return unexpected(write_error{u.error(), 0});
        if (to_u64(PQcmdTuples(u->get())) == 1) return {};
        // Otherwise (a new key, or a refusal) an atomic upsert under the same
        // rule decides: it inserts, or updates a row another writer created
        // meanwhile if the rule passes, or changes nothing.
        auto r = exec(
            "INSERT INTO coord_fence AS f (key, highest, written, has_seq, seq, value) "
            "VALUES ($1, $2::numeric, true, $3::numeric IS NOT NULL, coalesce($3::numeric, 0), $4) "
            "ON CONFLICT (key) DO UPDATE SET highest = EXCLUDED.highest, written = true, value = EXCLUDED.value, "
            "has_seq = EXCLUDED.has_seq OR (f.written AND f.highest = EXCLUDED.highest AND f.has_seq), "
            "seq = CASE WHEN $3::numeric IS NOT NULL THEN $3::numeric "
            "WHEN f.written AND f.highest = EXCLUDED.highest THEN f.seq ELSE 0 END "
            "WHERE NOT (f.written AND EXCLUDED.highest < f.highest) AND NOT ($3::numeric IS NOT NULL AND f.written "
            "AND f.highest = EXCLUDED.highest AND f.has_seq AND $3::numeric <= f.seq) RETURNING 1",
            ps, true);
        if (!r) return unexpected(write_error{r.error(), 0});
        if (PQntuples(r->get()) == 1) return {};
        auto h = exec("SELECT highest FROM coord_fence WHERE key = $1", {param(key)}, false);
        const fence_token highest = h && PQntuples(h->get()) == 1 ? to_u64(h->text(0, 0)) : 0;
        const bool sequence = seq && highest == token;
        return unexpected(write_error{
            coord::make_error_code(sequence ? coord::errc::stale_sequence : coord::errc::stale_fence), highest});
    }

    // status 0: the lease; 1: `refused` (held, or not the holder); 2: expired.
    result<lease, lease_error> lease_call(const char* sql, std::string_view name, std::vector<param_value> params,
                                          coord::errc refused) {
        leased lk(*this);
        auto r = exec(sql, params, true);
        if (!r) return unexpected(lease_error{r.error(), {}, 0, {}});
        if (PQntuples(r->get()) != 1) return unexpected(lease_error{make_error_code(errc::bad_answer), {}, 0, {}});
        const std::string status = r->text(0, 0);
        lease l{std::string(name), r->text(0, 1), to_u64(r->text(0, 2)), std::chrono::nanoseconds{to_i64(r->text(0, 3))},
                std::chrono::nanoseconds{to_i64(r->text(0, 4))}};
        if (status == "0") return l;
        const coord::errc code = status == "2" ? coord::errc::lease_expired : refused;
        return unexpected(lease_error{coord::make_error_code(code), l.owner, l.token, l.expires_at});
    }

    static std::error_code session_status(const std::string& status) {
        if (status == "1") return coord::make_error_code(coord::errc::session_not_found);
        if (status == "2") return coord::make_error_code(coord::errc::session_expired);
        if (status == "3") return coord::make_error_code(coord::errc::session_conflict);
        return {};
    }

    result<std::uint64_t> session_versioned(const char* sql, std::vector<param_value> params) {
        leased lk(*this);
        auto r = exec(sql, params, true);
        if (!r) return unexpected(r.error());
        if (PQntuples(r->get()) != 1) return unexpected(make_error_code(errc::bad_answer));
        if (auto e = session_status(r->text(0, 0))) return unexpected(e);
        return to_u64(r->text(0, 1));
    }

    result<void> plain_write(const char* sql, std::vector<param_value> params) {
        leased lk(*this);
        auto r = exec(sql, params, true);
        if (!r) return unexpected(r.error());
        return {};
    }

    static constexpr const char* claim_sql = "SELECT * FROM coord_ledger_claim($1, $2, $3, $4, $5, $6, $7, $8)";
    static constexpr const char* done_sql =
        "UPDATE coord_ledger SET state = 2, result = $3, completed_ns = coord_now_ns($4), retain_until_ns = $5 "
        "WHERE key = $1 AND state = 1 AND fence = $2";
    std::vector<param_value> claim_params(const ledger_claim_request& q) const {
        return {param(q.key),          param(q.scheduled_ms), param(static_cast<std::int64_t>(q.schedule_version)),
                param(q.worker),       param(q.payload_hash), param(q.lease_ttl_ns),
                param(q.replay_window_ms), now_param()};
    }

    result<claim_outcome> claim_locked(const ledger_claim_request& q, bool writes) {
        auto r = exec(claim_sql, claim_params(q), writes);
        if (!r) return unexpected(r.error());
        return claim_answer(*r);
    }

    // One step of a pipeline: statements with parameters are prepared first.
    struct step {
        const char* sql;
        std::vector<param_value> params;
    };

    // Sends every step, then one sync, and reads every answer: one round trip
    // for the lot (libpq pipeline mode). The first failure is reported; a
    // broken connection in a writing pipeline is outcome_unknown.
    result<std::vector<answer>> pipeline(const std::vector<step>& steps, bool writes) {
        PGconn*& conn = cur().conn;  // connect() may open it
        if (!connect()) return unexpected(make_error_code(errc::connection_failed));
        std::vector<std::string> names;
        for (const auto& st : steps) {
            if (st.params.empty()) {
                names.emplace_back();
                continue;
            }
            auto name = prepared(st.sql, static_cast<int>(st.params.size()));
            if (!name) return unexpected(name.error());
            names.push_back(*name);
        }
        auto broken = [&] {
            last_error() = PQerrorMessage(conn);
            return result<std::vector<answer>>(unexpected(coord::detail::engine_failure(
                coord::detail::call_fate::lost_after_send, writes, make_error_code(errc::connection_failed))));
        };
        if (PQenterPipelineMode(conn) != 1) return broken();
        bool sent = true;
        for (std::size_t i = 0; i < steps.size() && sent; ++i) {
            const auto& st = steps[i];
            std::vector<const char*> values;
            std::vector<int> lengths, formats;
            for (const auto& p : st.params) {
                values.push_back(p.text ? p.text->data() : nullptr);
                lengths.push_back(p.text ? static_cast<int>(p.text->size()) : 0);
                formats.push_back(p.binary ? 1 : 0);
            }
            sent = st.params.empty()
                       ? PQsendQueryParams(conn, st.sql, 0, nullptr, nullptr, nullptr, nullptr, 0) == 1
                       : PQsendQueryPrepared(conn, names[i].c_str(), static_cast<int>(st.params.size()), values.data(),
                                             lengths.data(), formats.data(), 0) == 1;
        }
        if (!sent || PQpipelineSync(conn) != 1) {
            PQexitPipelineMode(conn);
            return broken();
        }
        std::vector<answer> out;
        std::error_code first;
        for (std::size_t i = 0; i < steps.size(); ++i) {
            answer r(PQgetResult(conn));
            if (!r.get()) return broken();
            const auto status = PQresultStatus(r.get());
            if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK && !first) {
                last_error() = PQresultErrorMessage(r.get());
                const char* state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
                first = make_error_code(state && std::string_view(state) == "57014" ? errc::timeout
                                                                                    : errc::statement_failed);
            }
            while (PGresult* extra = PQgetResult(conn)) PQclear(extra);  // the NULL that ends this step
            out.push_back(std::move(r));
        }
        answer sync(PQgetResult(conn));
        if (!sync.get() || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC) return broken();
        PQexitPipelineMode(conn);
        if (first) return unexpected(first);
        return out;
    }

    result<claim_outcome> claim_answer(const answer& a) {
        const answer* r = &a;
        if (PQntuples(r->get()) != 1) return unexpected(make_error_code(errc::bad_answer));
        claim_outcome out;
        const auto kind = to_i64(r->text(0, 0));
        out.kind = kind == 0   ? claim_outcome::granted
                   : kind == 1 ? claim_outcome::replayed
                   : kind == 2 ? claim_outcome::in_progress
                   : kind == 3 ? claim_outcome::payload_mismatch
                               : claim_outcome::expired;
        out.fence = to_u64(r->text(0, 1));
        out.attempt = static_cast<std::uint32_t>(to_u64(r->text(0, 2)));
        out.holder = r->text(0, 3);
        out.lease_until_ns = to_i64(r->text(0, 4));
        out.result = r->bytes(0, 5);
        return out;
    }

    result<void> ledger_update(const char* sql, std::vector<param_value> params) {
        leased lk(*this);
        auto r = exec(sql, params, true);
        if (!r) return unexpected(r.error());
        if (to_u64(PQcmdTuples(r->get())) == 0) return unexpected(coord::make_error_code(coord::errc::stale_fence));
        return {};
    }

    // The effect threw: undo its writes, record the failed attempt, commit that.
    void fail_in_transaction(std::string_view key, fence_token fence, std::string_view reason) {
        if (exec("ROLLBACK TO SAVEPOINT coord_effect", {}, false) &&
            exec("UPDATE coord_ledger SET state = 0, fail_reason = $3, lease_until_ns = 0 "
                 "WHERE key = $1 AND state = 1 AND fence = $2",
                 {param(key), param_u64(fence), param(reason)}, false) &&
            exec("COMMIT", {}, true))
            return;
        (void)exec("ROLLBACK", {}, false);
    }

    static basic_store*& current_effect_store() {
        thread_local basic_store* current = nullptr;
        return current;
    }
    // Marks this thread as inside an effect of this store.
    struct transaction_scope {
        explicit transaction_scope(basic_store& s) : previous(current_effect_store()) { current_effect_store() = &s; }
        ~transaction_scope() { current_effect_store() = previous; }
        basic_store* previous;
    };

    // The pool. A call leases one connection for its whole step; the lease
    // is this thread's current connection of this store while it lasts (a
    // thread-local chain, so that an effect run inside a ledger transaction
    // uses the transaction's connection, and a store used inside another
    // store's call finds its own).
    struct pooled {
        PGconn* conn = nullptr;
        std::unordered_map<std::string, std::string> prepared;  // SQL text -> statement name, this connection
        pooled() = default;
        pooled(const pooled&) = delete;
        pooled& operator=(const pooled&) = delete;
        ~pooled() {
            if (conn) PQfinish(conn);
        }
    };
    class leased {
    public:
        explicit leased(basic_store& s) : store_(s), previous_(head()) {
            std::unique_lock lk(s.pool_mutex_);
            s.pool_cv_.wait(lk, [&] { return !s.idle_.empty() || s.created_ < s.opts_.pool_size; });
            if (!s.idle_.empty()) {
                c_ = std::move(s.idle_.back());
                s.idle_.pop_back();
            } else {
                c_ = std::make_unique<pooled>();
                ++s.created_;
            }
            head() = this;
        }
        leased(const leased&) = delete;
        leased& operator=(const leased&) = delete;
        ~leased() {
            head() = previous_;
            {
                std::lock_guard lk(store_.pool_mutex_);
                store_.idle_.push_back(std::move(c_));
            }
            store_.pool_cv_.notify_one();
        }
        static leased*& head() {
            thread_local leased* h = nullptr;
            return h;
        }
        basic_store& store_;
        leased* previous_;
        std::unique_ptr<pooled> c_;
    };
    // This thread's leased connection of this store (a call holds one).
    pooled& cur() {
        for (leased* l = leased::head(); l; l = l->previous_)
            if (&l->store_ == this) return *l->c_;
        std::abort();  // a member that talks to the server was called outside a lease: a bug in this file
    }

    std::string conninfo_;
    Clock clock_;
    options opts_;
    std::mutex pool_mutex_;
    std::condition_variable pool_cv_;
    std::vector<std::unique_ptr<pooled>> idle_;
    std::size_t created_ = 0;
};

/// The everyday PostgreSQL store: leases judged on the server's clock.
using store = basic_store<>;

static_assert(fence_store<store>);
static_assert(fence_update_store<store>);
static_assert(lease_store<store>);
static_assert(time_reservation_store<store>);
static_assert(segment_allocator<store>);
static_assert(ledger_store<store>);
static_assert(ledger_run_store<store>);
static_assert(session_store<store>);
static_assert(revocation_store<store>);

}  // namespace coord::postgres

template <>
struct std::is_error_code_enum<coord::postgres::errc> : std::true_type {};
