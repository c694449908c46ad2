// SPDX-License-Identifier: Apache-2.0
// coord/postgres/revocation.hpp: revocation_store on PostgreSQL (the JWT
// deny list and per-subject not-before times).
//
// Round trips: every operation 1. revoke_token and revoke_subject are one
// INSERT ... ON CONFLICT DO UPDATE keeping the later time (greatest());
// token_revoked is one SELECT reading both lists.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "coord/postgres/context.hpp"
#include "coord/session.hpp"

namespace coord::postgres {

template <class Clock>
class revocation_adapter {
public:
    explicit revocation_adapter(detail::context<Clock>& ctx) noexcept : pool_(ctx.calls()) {}

    result<void> revoke_token(std::string_view jti, std::int64_t until_s) {
        using namespace detail;
        return write("INSERT INTO coord_denied_token VALUES ($1, $2) ON CONFLICT (jti) DO UPDATE "
                     "SET until_s = greatest(coord_denied_token.until_s, EXCLUDED.until_s)",
                     {param(jti), param(until_s)});
    }
    result<void> revoke_subject(std::string_view sub, std::int64_t not_before_s) {
        using namespace detail;
        return write("INSERT INTO coord_subject_nbf VALUES ($1, $2) ON CONFLICT (sub) DO UPDATE "
                     "SET not_before_s = greatest(coord_subject_nbf.not_before_s, EXCLUDED.not_before_s)",
                     {param(sub), param(not_before_s)});
    }
    result<bool> token_revoked(std::string_view jti, std::string_view sub, std::optional<std::int64_t> iat,
                               std::int64_t now_s) {
        using namespace detail;
        pool::call c(pool_);
        auto r = c.exec("SELECT EXISTS (SELECT 1 FROM coord_denied_token WHERE $1 <> '' AND jti = $1 AND $4 <= until_s) "
                        "OR EXISTS (SELECT 1 FROM coord_subject_nbf WHERE $2 <> '' AND sub = $2 "
                        "AND ($3::bigint IS NULL OR $3::bigint < not_before_s))",
                        {param(jti), param(sub), iat ? param(*iat) : null_param(), param(now_s)}, false);
        if (!r) return unexpected(r.error());
        if (r->rows() != 1) return unexpected(make_error_code(errc::bad_answer));
        return r->boolean(0, 0);
    }

private:
    result<void> write(const char* sql, std::vector<detail::param_value> params) {
        pool::call c(pool_);
        auto r = c.exec(sql, params, true);
        if (!r) return unexpected(r.error());
        return {};
    }

    pool& pool_;
};

}  // namespace coord::postgres
