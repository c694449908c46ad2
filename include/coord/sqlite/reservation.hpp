// SPDX-License-Identifier: Apache-2.0
// coord/sqlite/reservation.hpp: time_reservation_store on SQLite (the
// Snowflake generator's reserved time per node, fenced by the node lease).
//
// time_reserve is one transaction: the key's row read, the reservation rule
// (coord/rules/reservation.hpp) applied, the row written. Statements: 4.
#pragma once

#include <cstdint>
#include <string_view>

#include "coord/reservation.hpp"
#include "coord/rules/reservation.hpp"
#include "coord/sqlite/context.hpp"

namespace coord::sqlite {

template <class Clock>
class reservation_adapter {
public:
    explicit reservation_adapter(detail::context<Clock>& ctx) noexcept : db_(ctx.db()) {}

    result<std::int64_t, write_error> time_reserve(std::string_view key, std::int64_t until_ms, fence_token token) {
        auto infra = [](coord::error e) { return result<std::int64_t, write_error>(unexpected(write_error{std::move(e), 0})); };
        database::transaction t(db_, true);
        if (!t) return infra(*t.failed());
        auto st = t.prepare("SELECT highest, until_ms FROM coord_reservation WHERE key = ?1");
        if (!st) return infra(st.error());
        (*st)->bind(1, key);
        auto row = t.next(**st);
        if (!row) return infra(row.error());
        coord::detail::reservation_rule::record rec;
        rec.until_ms = t.floors().reservation_ms;  // a key without a record starts at the floor
        if (*row) {
            rec.highest = (*st)->u64(0);
            rec.until_ms = (*st)->i64(1);
            (*st)->reset();
        }
        auto ruled = coord::detail::reservation_rule::reserve(rec, until_ms, token);
        if (!ruled) return ruled;
        auto up = t.prepare("INSERT INTO coord_reservation VALUES (?1, ?2, ?3) ON CONFLICT (key) DO UPDATE SET "
                            "highest = excluded.highest, until_ms = excluded.until_ms");
        if (!up) return infra(up.error());
        (*up)->bind(1, key).bind(2, detail::as_i64(rec.highest)).bind(3, rec.until_ms);
        if (auto w = t.run(**up); !w) return infra(w.error());
        if (auto c = t.commit(); !c) return infra(c.error());
        return ruled;
    }

private:
    database& db_;
};

}  // namespace coord::sqlite
