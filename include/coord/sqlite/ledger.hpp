// SPDX-License-Identifier: Apache-2.0
// coord/sqlite/ledger.hpp: ledger_store and ledger_run_store on SQLite.
//
// Each operation is one transaction: the slot's row read, the ledger rule
// (coord/rules/ledger.hpp) applied on the store's clock, read inside the
// transaction (every execution lease, replay window and retention is judged
// there, never on a worker's clock), the row written. Statements per call:
// 4 (BEGIN IMMEDIATE, SELECT, upsert, COMMIT); prune 3 (one DELETE whose
// WHERE is the rule's prunable()); read 3.
//
// ledger_run_atomic: the claim, the effect and the done marker in ONE
// transaction. The effect gets the open transaction: effect_handle() is the
// connection (sqlite3*), and effect_exec() runs a statement on it, so the
// application's own tables commit or roll back together with the marker. An
// effect that throws is rolled back to a savepoint, the failed attempt is
// recorded and committed, and the exception propagates.
#pragma once

#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coord/clock.hpp"
#include "coord/job_ledger.hpp"
#include "coord/rules/ledger.hpp"
#include "coord/sqlite/context.hpp"

namespace coord::sqlite {

template <class Clock>
class ledger_adapter {
public:
    explicit ledger_adapter(detail::context<Clock>& ctx) noexcept : db_(ctx.db()), clock_(ctx.clock()) {}

    result<claim_outcome> ledger_claim(const ledger_claim_request& q) {
        database::transaction t(db_, true);
        if (!t) return unexpected(*t.failed());
        ledger_record rec;
        auto c = claim_in(t, q, rec);
        if (!c || c->kind == claim_outcome::expired) return c;
        if (auto s = save(t, rec); !s) return unexpected(s.error());
        if (auto d = t.commit(); !d) return unexpected(d.error());
        return c;
    }
    result<void> ledger_heartbeat(std::string_view key, fence_token fence, std::chrono::nanoseconds ttl) {
        return update(key, [&](ledger_record* r, std::int64_t now) {
            return coord::detail::ledger_rule::heartbeat(r, fence, ttl.count(), now);
        });
    }
    result<void> ledger_complete(std::string_view key, fence_token fence, std::string_view result_text,
                                 std::chrono::nanoseconds retain_until) {
        return update(key, [&](ledger_record* r, std::int64_t now) {
            return coord::detail::ledger_rule::complete(r, fence, result_text, now, retain_until.count());
        });
    }
    result<void> ledger_fail(std::string_view key, fence_token fence, std::string_view reason) {
        return update(key, [&](ledger_record* r, std::int64_t) { return coord::detail::ledger_rule::fail(r, fence, reason); });
    }
    result<fence_token> ledger_revoke(std::string_view key, std::string_view reason) {
        return update(key, [&](ledger_record* r, std::int64_t) { return coord::detail::ledger_rule::revoke(r, reason); });
    }
    result<std::optional<ledger_record>> ledger_read(std::string_view key) {
        database::transaction t(db_, false);
        if (!t) return unexpected(*t.failed());
        auto rec = load(t, key);
        if (!rec) return unexpected(rec.error());
        if (auto c = t.commit(); !c) return unexpected(c.error());
        return std::move(*rec);
    }
    result<std::size_t> ledger_prune() {
        database::transaction t(db_, true);
        if (!t) return unexpected(*t.failed());
        // The rule's prunable(): done, retention over, not saturated.
        auto st = t.prepare("DELETE FROM coord_ledger WHERE state = 2 AND retain_until_ns <= ?1 AND retain_until_ns < ?2");
        if (!st) return unexpected(st.error());
        (*st)->bind(1, now_ns()).bind(2, std::numeric_limits<std::int64_t>::max());
        if (auto r = t.run(**st); !r) return unexpected(r.error());
        const auto n = static_cast<std::size_t>(sqlite3_changes64(t.handle()));
        if (auto c = t.commit(); !c) return unexpected(c.error());
        return n;
    }

    template <class F>
    result<claim_outcome> ledger_run_atomic(const ledger_claim_request& q, std::chrono::nanoseconds retain_until, F&& fn) {
        database::transaction t(db_, true);
        if (!t) return unexpected(*t.failed());
        ledger_record rec;
        auto c = claim_in(t, q, rec);
        if (!c || c->kind == claim_outcome::expired) return c;
        if (c->kind != claim_outcome::granted) {
            if (auto d = t.commit(); !d) return unexpected(d.error());
            return c;
        }
        if (auto s = save(t, rec); !s) return unexpected(s.error());
        if (int rc = db_.exec_raw("SAVEPOINT coord_effect"); rc != SQLITE_OK) return unexpected(t.error(rc));
        std::string produced;
        {
            effect_scope scope(t);
            try {
                produced = fn(*c);
            } catch (const std::exception& e) {
                fail_in_transaction(t, rec, c->fence, e.what());
                throw;
            } catch (...) {
                fail_in_transaction(t, rec, c->fence, "unknown exception");
                throw;
            }
        }
        if (int rc = db_.exec_raw("RELEASE coord_effect"); rc != SQLITE_OK) return unexpected(t.error(rc));
        (void)coord::detail::ledger_rule::complete(&rec, c->fence, produced, now_ns(), retain_until.count());
        if (auto s = save(t, rec); !s) return unexpected(s.error());
        if (auto d = t.commit(); !d) return unexpected(d.error());
        c->result = std::move(produced);
        return c;
    }

    /// Inside an effect that ledger_run_atomic runs: the connection whose
    /// transaction is open (the application's statements on it commit or
    /// roll back with the done marker); nullptr outside an effect. Do not
    /// COMMIT, ROLLBACK or close it.
    static sqlite3* effect_handle() noexcept {
        auto* t = current_effect();
        return t ? t->handle() : nullptr;
    }
    /// Inside an effect: one statement on the run's open transaction (text
    /// parameters ?1, ?2, ...; NULL for nullopt). Rows come back as text.
    /// Outside an effect: errc::server_refused.
    static result<std::vector<std::vector<std::string>>> effect_exec(
        const std::string& sql, const std::vector<std::optional<std::string>>& params = {}) {
        sqlite3* db = effect_handle();
        if (!db) return unexpected(coord::error(make_error_code(errc::server_refused), "effect_exec outside a ledger run"));
        sqlite3_stmt* s = nullptr;
        if (int rc = sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &s, nullptr); rc != SQLITE_OK)
            return unexpected(current_effect()->error(rc));
        std::vector<std::vector<std::string>> rows;
        for (std::size_t i = 0; i < params.size(); ++i) {
            if (params[i]) sqlite3_bind_text64(s, static_cast<int>(i + 1), params[i]->data(), params[i]->size(), SQLITE_TRANSIENT, SQLITE_UTF8);
            else sqlite3_bind_null(s, static_cast<int>(i + 1));
        }
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            std::vector<std::string> row;
            for (int j = 0; j < sqlite3_column_count(s); ++j) {
                const auto* p = sqlite3_column_text(s, j);
                row.emplace_back(p ? reinterpret_cast<const char*>(p) : "", static_cast<std::size_t>(sqlite3_column_bytes(s, j)));
            }
            rows.push_back(std::move(row));
        }
        sqlite3_finalize(s);
        if (rc != SQLITE_DONE) return unexpected(current_effect()->error(rc));
        return rows;
    }

private:
    std::int64_t now_ns() const { return since_epoch_ns(clock_.now()); }

    // The claim rule on the slot's row, read in `t` into `rec` (an expired
    // slot is answered without reading it).
    result<claim_outcome> claim_in(database::transaction& t, const ledger_claim_request& q, ledger_record& rec) {
        const auto now = now_ns();
        if (coord::detail::ledger_rule::too_old(q, now)) return coord::detail::ledger_rule::expired();
        auto loaded = load(t, q.key);
        if (!loaded) return unexpected(loaded.error());
        rec = loaded->value_or(ledger_record{});
        if (!*loaded) rec.key = q.key;
        // A slot scheduled at or before the ledger floor is not run again
        // (its done record may have been lost); a done record still replays.
        if (q.scheduled.count() <= t.floors().ledger_ms && rec.state != ledger_record::state_t::done)
            return coord::detail::ledger_rule::expired();
        return coord::detail::ledger_rule::claim(rec, q, now, t.floors().fence);
    }

    static result<std::optional<ledger_record>> load(database::transaction& t, std::string_view key) {
        auto st = t.prepare("SELECT scheduled_ms, schedule_version, state, fence, attempt, holder, lease_until_ns, "
                            "started_ns, completed_ns, retain_until_ns, payload_hash, result, fail_reason "
                            "FROM coord_ledger WHERE key = ?1");
        if (!st) return unexpected(st.error());
        auto& s = **st;
        s.bind(1, key);
        auto row = t.next(s);
        if (!row) return unexpected(row.error());
        if (!*row) return std::optional<ledger_record>{};
        ledger_record r;
        r.key.assign(key);
        r.scheduled = std::chrono::milliseconds(s.i64(0));
        r.schedule_version = static_cast<std::uint32_t>(s.i64(1));
        const auto state = s.i64(2);
        r.state = state == 2 ? ledger_record::state_t::done : state == 1 ? ledger_record::state_t::running : ledger_record::state_t::idle;
        r.fence = s.u64(3);
        r.attempt = static_cast<std::uint32_t>(s.i64(4));
        r.holder = s.text(5);
        r.lease_until = std::chrono::nanoseconds(s.i64(6));
        r.started = std::chrono::nanoseconds(s.i64(7));
        r.completed = std::chrono::nanoseconds(s.i64(8));
        r.retain_until = std::chrono::nanoseconds(s.i64(9));
        r.payload_hash = s.text(10);
        r.result = s.blob(11);
        r.fail_reason = s.blob(12);
        s.reset();
        return std::optional<ledger_record>{std::move(r)};
    }

    static result<void> save(database::transaction& t, const ledger_record& r) {
        auto st = t.prepare(
            "INSERT INTO coord_ledger VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) "
            "ON CONFLICT (key) DO UPDATE SET scheduled_ms = excluded.scheduled_ms, schedule_version = "
            "excluded.schedule_version, state = excluded.state, fence = excluded.fence, attempt = excluded.attempt, "
            "holder = excluded.holder, lease_until_ns = excluded.lease_until_ns, started_ns = excluded.started_ns, "
            "completed_ns = excluded.completed_ns, retain_until_ns = excluded.retain_until_ns, payload_hash = "
            "excluded.payload_hash, result = excluded.result, fail_reason = excluded.fail_reason");
        if (!st) return unexpected(st.error());
        const std::int64_t state = r.state == ledger_record::state_t::done ? 2 : r.state == ledger_record::state_t::running ? 1 : 0;
        (*st)->bind(1, r.key)
            .bind(2, r.scheduled.count())
            .bind(3, std::int64_t{r.schedule_version})
            .bind(4, state)
            .bind(5, detail::as_i64(r.fence))
            .bind(6, std::int64_t{r.attempt})
            .bind(7, r.holder)
            .bind(8, r.lease_until.count())
            .bind(9, r.started.count())
            .bind(10, r.completed.count())
            .bind(11, r.retain_until.count())
            .bind(12, r.payload_hash)
            .bind_blob(13, r.result)
            .bind_blob(14, r.fail_reason);
        return t.run(**st);
    }

    template <class Rule>
    auto update(std::string_view key, Rule&& rule) -> decltype(rule(nullptr, std::int64_t{})) {
        using R = decltype(rule(nullptr, std::int64_t{}));
        database::transaction t(db_, true);
        if (!t) return R(unexpected(*t.failed()));
        auto loaded = load(t, key);
        if (!loaded) return R(unexpected(loaded.error()));
        ledger_record* rec = *loaded ? &**loaded : nullptr;
        auto ruled = rule(rec, now_ns());
        if (!ruled || !rec) return ruled;
        if (auto s = save(t, *rec); !s) return R(unexpected(s.error()));
        if (auto c = t.commit(); !c) return R(unexpected(c.error()));
        return ruled;
    }

    // The effect threw: undo its writes, record the failed attempt, commit that.
    void fail_in_transaction(database::transaction& t, ledger_record& rec, fence_token fence, std::string_view reason) {
        if (db_.exec_raw("ROLLBACK TO coord_effect") != SQLITE_OK) return;  // the destructor rolls back
        (void)db_.exec_raw("RELEASE coord_effect");
        (void)coord::detail::ledger_rule::fail(&rec, fence, reason);
        if (save(t, rec)) (void)t.commit();
    }

    static database::transaction*& current_effect() {
        thread_local database::transaction* current = nullptr;
        return current;
    }
    struct effect_scope {
        explicit effect_scope(database::transaction& t) : previous(current_effect()) { current_effect() = &t; }
        ~effect_scope() { current_effect() = previous; }
        effect_scope(const effect_scope&) = delete;
        effect_scope& operator=(const effect_scope&) = delete;
        database::transaction* previous;
    };

    database& db_;
    const Clock& clock_;
};

}  // namespace coord::sqlite
