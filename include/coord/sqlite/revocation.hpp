// SPDX-License-Identifier: Apache-2.0
// coord/sqlite/revocation.hpp: revocation_store on SQLite (the JWT deny list
// and per-subject not-before times).
//
// revoke_token and revoke_subject are one transaction of one upsert keeping
// the later time (the revocation rule's max); token_revoked is one read
// transaction over both lists.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "coord/rules/revocation.hpp"
#include "coord/session.hpp"
#include "coord/sqlite/context.hpp"

namespace coord::sqlite {

template <class Clock>
class revocation_adapter {
public:
    explicit revocation_adapter(detail::context<Clock>& ctx) noexcept : db_(ctx.db()) {}

    result<void> revoke_token(std::string_view jti, std::int64_t until_s) {
        return upsert("INSERT INTO coord_denied_token VALUES (?1, ?2) ON CONFLICT (jti) DO UPDATE "
                      "SET until_s = max(until_s, excluded.until_s)",
                      jti, until_s);
    }
    result<void> revoke_subject(std::string_view sub, std::int64_t not_before_s) {
        return upsert("INSERT INTO coord_subject_nbf VALUES (?1, ?2) ON CONFLICT (sub) DO UPDATE "
                      "SET not_before_s = max(not_before_s, excluded.not_before_s)",
                      sub, not_before_s);
    }
    result<bool> token_revoked(std::string_view jti, std::string_view sub, std::optional<std::int64_t> iat,
                               std::int64_t now_s) {
        database::transaction t(db_, false);
        if (!t) return unexpected(*t.failed());
        bool revoked = false;
        if (!jti.empty()) {
            auto until = value(t, "SELECT until_s FROM coord_denied_token WHERE jti = ?1", jti);
            if (!until) return unexpected(until.error());
            revoked = *until && coord::detail::revocation_rule::denied(**until, now_s);
        }
        if (!revoked && !sub.empty()) {
            auto nb = value(t, "SELECT not_before_s FROM coord_subject_nbf WHERE sub = ?1", sub);
            if (!nb) return unexpected(nb.error());
            revoked = *nb && coord::detail::revocation_rule::before_not_before(iat, **nb);
        }
        if (auto c = t.commit(); !c) return unexpected(c.error());
        return revoked;
    }

private:
    static result<std::optional<std::int64_t>> value(database::transaction& t, const char* sql, std::string_view key) {
        auto st = t.prepare(sql);
        if (!st) return unexpected(st.error());
        (*st)->bind(1, key);
        auto row = t.next(**st);
        if (!row) return unexpected(row.error());
        if (!*row) return std::optional<std::int64_t>{};
        const auto v = (*st)->i64(0);
        (*st)->reset();
        return std::optional<std::int64_t>{v};
    }
    result<void> upsert(const char* sql, std::string_view key, std::int64_t v) {
        database::transaction t(db_, true);
        if (!t) return unexpected(*t.failed());
        auto st = t.prepare(sql);
        if (!st) return unexpected(st.error());
        (*st)->bind(1, key).bind(2, v);
        if (auto r = t.run(**st); !r) return unexpected(r.error());
        return t.commit();
    }

    database& db_;
};

}  // namespace coord::sqlite
