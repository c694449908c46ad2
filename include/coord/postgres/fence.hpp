// SPDX-License-Identifier: Apache-2.0
// coord/postgres/fence.hpp: fence_store and fence_update_store on PostgreSQL.
//
// Round trips:
// - fence_write to a key that exists and passes the rule: 1 (an UPDATE whose
//   WHERE is the rule and the store's guard, compared inside the statement);
//   to a new key: 2 (then an INSERT ... ON CONFLICT under the same rule, which
//   also settles a race with another writer); refused: 3 (the last reads the
//   highest token for the report, after the decision). The first call of a
//   store object: 1 more (the guard alone, learning what it checks); a
//   connection's first write, and its first after a day without one, go
//   straight to the INSERT (the writer's row made or touched by the guard).
// - fence_update: 2, pipelined: BEGIN, the row made and locked (INSERT ... ON
//   CONFLICT DO NOTHING, SELECT ... FOR UPDATE); the rule and fn here; the
//   UPDATE and COMMIT. A refusal or a throwing fn: 1 more (ROLLBACK).
// - fence_read: 1.
// Each statement applies the whole rule atomically (the row is locked);
// none acts on what an earlier call read. A key without a record refuses
// tokens below the store's fence floor (store::initialize). Every round trip
// also runs the store's guard (connection.hpp, pool::call), the common
// fence_write's inside its one statement.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coord/fence.hpp"
#include "coord/postgres/context.hpp"

namespace coord::postgres {

template <class Clock>
class fence_adapter {
public:
    explicit fence_adapter(detail::context<Clock>& ctx) noexcept : pool_(ctx.calls()) {}

    /// Refusals: stale_fence, stale_sequence (with the highest token);
    /// errc::outcome_unknown when no answer came after sending.
    result<void, write_error> fence_write(std::string_view key, fence_token token, std::string_view value) {
        return write(key, token, std::nullopt, value);
    }
    result<void, write_error> fence_write(std::string_view key, fence_token token, std::uint64_t seq,
                                          std::string_view value) {
        return write(key, token, seq, value);
    }

    /// fn runs once, only when the token passes; if it throws, the
    /// transaction rolls back and the exception propagates.
    template <class F>
    result<void, write_error> fence_update(std::string_view key, fence_token token, F&& fn) {
        using namespace detail;
        pool::call c(pool_);
        auto fail = [&](coord::error e, fence_token highest = 0) {
            (void)c.exec("ROLLBACK", {}, false);
            return result<void, write_error>(unexpected(write_error{std::move(e), highest}));
        };
        auto opened = c.pipeline({{"BEGIN", {}},
                                  {"INSERT INTO coord_fence(key) VALUES ($1) ON CONFLICT DO NOTHING", {param(key)}},
                                  {"SELECT f.highest, f.written, f.value, f.has_seq, f.seq, s.fence_floor FROM coord_fence f, "
                                   "coord_store s WHERE f.key = $1 AND s.id = 1 FOR UPDATE OF f",
                                   {param(key)}}},
                                 false);
        if (!opened) return fail(opened.error());
        const answer& r = (*opened)[2];
        if (r.rows() != 1) return fail(make_error_code(errc::bad_answer));
        const bool written = r.boolean(0, 1);
        // A key without a record (never written, or lost) starts at the fence floor.
        const fence_token highest = written ? r.u64(0, 0) : r.u64(0, 5);
        if (token < highest) return fail(coord::make_error_code(coord::errc::stale_fence), highest);
        const bool same = written && token == highest;
        std::string value = r.bytes(0, 2);
        try {
            fn(value);
        } catch (...) {
            (void)c.exec("ROLLBACK", {}, false);
            throw;
        }
        c.restart_deadline();
        const bool has_seq = same && r.boolean(0, 3);
        auto done = c.pipeline({{"UPDATE coord_fence SET highest = $2, written = true, value = $3, has_seq = $4, "
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
        using namespace detail;
        pool::call c(pool_);
        auto r = c.exec("SELECT highest, value, written FROM coord_fence WHERE key = $1", {param(key)}, false);
        if (!r) return unexpected(r.error());
        if (r->rows() == 0) return fenced_value{};
        return fenced_value{r->u64(0, 0), r->bytes(0, 1), r->boolean(0, 2)};
    }

private:
    result<void, write_error> write(std::string_view key, fence_token token, std::optional<std::uint64_t> seq,
                                    std::string_view value) {
        using namespace detail;
        pool::call c(pool_);
        auto seen = c.seen();
        if (!seen) return unexpected(write_error{seen.error(), 0});
        std::vector<param_value> ps{param(key), param_u64(token), seq ? param_u64(*seq) : null_param(),
                                    bytes_param(value)};
        // The common case, an existing key whose rule passes, is one plain
        // UPDATE ... WHERE <the rule> and the store is the one seen, with the
        // writer's step (the guard's comparison and step inside the
        // statement: pool::call::exec_checking, writer_step).
        if (auto w = c.writer_step()) {
            auto u = c.exec_checking(
                "WITH w AS (UPDATE coord_writer SET n = $6 "
                "WHERE id = $7 AND n BETWEEN $8 AND $9 AND (cardinality($10::text[]) = 0 OR coord_writers_kept($10, $11, $12)) RETURNING 1) "
                "UPDATE coord_fence AS f SET highest = $2::numeric, written = true, value = $4, "
                "has_seq = $3::numeric IS NOT NULL OR (f.written AND f.highest = $2::numeric AND f.has_seq), "
                "seq = CASE WHEN $3::numeric IS NOT NULL THEN $3::numeric "
                "WHEN f.written AND f.highest = $2::numeric THEN f.seq ELSE 0 END FROM w "
                "WHERE f.key = $1 AND NOT (f.written AND $2::numeric < f.highest) AND NOT ($3::numeric IS NOT NULL "
                "AND f.written AND f.highest = $2::numeric AND f.has_seq AND $3::numeric <= f.seq) "
                "AND " COORD_PG_STORE_SEEN " = $5",
                joined(ps, {param(*seen)}, *w), true);
            if (!u) return unexpected(write_error{u.error(), 0});
            if (u->changed() == 1) return {};
        }
        // Otherwise (a new key, or a refusal) an atomic upsert under the same
        // rule decides: it inserts (a token at least the fence floor: a key
        // without a record may have lost it), or updates a row another writer
        // created meanwhile if the rule passes, or changes nothing.
        auto r = c.exec(
            "INSERT INTO coord_fence AS f (key, highest, written, has_seq, seq, value) "
            "SELECT $1, $2::numeric, true, $3::numeric IS NOT NULL, coalesce($3::numeric, 0), $4 FROM coord_store "
            "WHERE id = 1 AND $2::numeric >= fence_floor ON CONFLICT (key) DO UPDATE SET highest = EXCLUDED.highest, written = true, value = EXCLUDED.value, "
            "has_seq = EXCLUDED.has_seq OR (f.written AND f.highest = EXCLUDED.highest AND f.has_seq), "
            "seq = CASE WHEN $3::numeric IS NOT NULL THEN $3::numeric "
            "WHEN f.written AND f.highest = EXCLUDED.highest THEN f.seq ELSE 0 END "
            "WHERE NOT (f.written AND EXCLUDED.highest < f.highest) AND NOT ($3::numeric IS NOT NULL AND f.written "
            "AND f.highest = EXCLUDED.highest AND f.has_seq AND $3::numeric <= f.seq) RETURNING 1",
            ps, true);
        if (!r) return unexpected(write_error{r.error(), 0});
        if (r->rows() == 1) return {};
        auto h = c.exec("SELECT coalesce((SELECT highest FROM coord_fence WHERE key = $1), "
                        "(SELECT fence_floor FROM coord_store WHERE id = 1))",
                        {param(key)}, false);
        const fence_token highest = h && h->rows() == 1 ? h->u64(0, 0) : 0;
        const bool sequence = seq && highest == token;
        return unexpected(write_error{
            coord::make_error_code(sequence ? coord::errc::stale_sequence : coord::errc::stale_fence), highest});
    }

    pool& pool_;
};

}  // namespace coord::postgres
