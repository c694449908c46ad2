// SPDX-License-Identifier: Apache-2.0
// coord/postgres/session.hpp: session_store on PostgreSQL (server-side
// sessions keyed by the hash of their ID).
//
// Round trips: every operation 1. create, load, save and rotate are calls of
// one PL/pgSQL function each (coord_session_*) that locks the row, judges the
// idle and absolute timeouts on the server's clock and writes in the
// statement's one transaction; revoke and revoke_user are one DELETE.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "coord/postgres/context.hpp"
#include "coord/session.hpp"

namespace coord::postgres {

template <class Clock>
class session_adapter {
public:
    explicit session_adapter(detail::context<Clock>& ctx) noexcept : pool_(ctx.calls()), clock_(ctx.clock()) {}

    result<session_record> session_create(std::string_view hash, const session_request& req) {
        using namespace detail;
        pool::call c(pool_);
        auto r = c.exec("SELECT * FROM coord_session_create($1, $2, $3, $4, $5, $6)",
                        {param(hash), param(req.user), bytes_param(req.data), param(req.idle_timeout_ms),
                         param(req.absolute_timeout_ms), now_ms_param(clock_)},
                        true);
        if (!r) return unexpected(r.error());
        if (r->rows() != 1) return unexpected(make_error_code(errc::bad_answer));
        if (auto e = status(r->i64(0, 0))) return unexpected(e);
        session_record rec;
        rec.user.assign(req.user);
        rec.data.assign(req.data);
        rec.created_ms = rec.last_seen_ms = r->i64(0, 1);
        rec.absolute_expiry_ms = r->i64(0, 2);
        rec.idle_timeout_ms = req.idle_timeout_ms;
        rec.version = 1;
        return rec;
    }
    result<session_record> session_load(std::string_view hash) {
        using namespace detail;
        pool::call c(pool_);
        auto r = c.exec("SELECT * FROM coord_session_load($1, $2)", {param(hash), now_ms_param(clock_)}, true);
        if (!r) return unexpected(r.error());
        if (r->rows() != 1) return unexpected(make_error_code(errc::bad_answer));
        if (auto e = status(r->i64(0, 0))) return unexpected(e);
        session_record rec;
        rec.user = r->text(0, 1);
        rec.data = r->bytes(0, 2);
        rec.created_ms = r->i64(0, 3);
        rec.last_seen_ms = r->i64(0, 4);
        rec.absolute_expiry_ms = r->i64(0, 5);
        rec.idle_timeout_ms = r->i64(0, 6);
        rec.version = r->u64(0, 7);
        return rec;
    }
    result<std::uint64_t> session_save(std::string_view hash, std::uint64_t version, std::string_view data) {
        using namespace detail;
        return versioned("SELECT * FROM coord_session_save($1, $2, $3, $4)",
                         {param(hash), param_u64(version), bytes_param(data), now_ms_param(clock_)});
    }
    result<std::uint64_t> session_rotate(std::string_view old_hash, std::string_view new_hash, std::uint64_t version) {
        using namespace detail;
        return versioned("SELECT * FROM coord_session_rotate($1, $2, $3, $4)",
                         {param(old_hash), param(new_hash), param_u64(version), now_ms_param(clock_)});
    }
    result<bool> session_revoke(std::string_view hash) {
        using namespace detail;
        pool::call c(pool_);
        auto r = c.exec("DELETE FROM coord_session WHERE hash = $1", {param(hash)}, true);
        if (!r) return unexpected(r.error());
        return r->changed() > 0;
    }
    result<std::size_t> session_revoke_user(std::string_view user) {
        using namespace detail;
        pool::call c(pool_);
        auto r = c.exec("DELETE FROM coord_session WHERE user_name = $1", {param(user)}, true);
        if (!r) return unexpected(r.error());
        return static_cast<std::size_t>(r->changed());
    }

private:
    static std::error_code status(std::int64_t s) {
        if (s == 1) return coord::make_error_code(coord::errc::session_not_found);
        if (s == 2) return coord::make_error_code(coord::errc::session_expired);
        if (s == 3) return coord::make_error_code(coord::errc::session_conflict);
        return {};
    }

    result<std::uint64_t> versioned(const char* sql, std::vector<detail::param_value> params) {
        pool::call c(pool_);
        auto r = c.exec(sql, params, true);
        if (!r) return unexpected(r.error());
        if (r->rows() != 1) return unexpected(make_error_code(errc::bad_answer));
        if (auto e = status(r->i64(0, 0))) return unexpected(e);
        return r->u64(0, 1);
    }

    pool& pool_;
    const Clock& clock_;
};

}  // namespace coord::postgres
