// SPDX-License-Identifier: Apache-2.0
// coord/sqlite/fence.hpp: fence_store and fence_update_store on SQLite.
//
// Each operation is one transaction (a write: BEGIN IMMEDIATE, so the lock
// is held from the first read): the key's row is read, the fence rule
// (coord/rules/fence.hpp, the one memory and file apply) decides, the row is
// written, COMMIT. fence_update's fn runs once, inside the transaction; if
// it throws, the transaction rolls back and the exception propagates.
// Statements per call: a write 4 (BEGIN, SELECT, upsert, COMMIT); a refusal
// 3 (the upsert skipped); a read 3 (BEGIN, SELECT, COMMIT). A key without a
// record refuses tokens below the store's fence floor (store::initialize).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "coord/fence.hpp"
#include "coord/rules/fence.hpp"
#include "coord/sqlite/context.hpp"

namespace coord::sqlite {

template <class Clock>
class fence_adapter : public coord::detail::fence_writes<fence_adapter<Clock>> {
    friend class coord::detail::fence_writes<fence_adapter<Clock>>;

public:
    explicit fence_adapter(detail::context<Clock>& ctx) noexcept : db_(ctx.db()) {}

    // fence_write, fence_update: coord::detail::fence_writes, through fence_apply.
    result<fenced_value> fence_read(std::string_view key) {
        database::transaction t(db_, false);
        if (!t) return unexpected(*t.failed());
        auto rec = load(t, key);
        if (!rec) return unexpected(rec.error());
        auto c = t.commit();
        if (!c) return unexpected(c.error());
        return coord::detail::fence_rule::view(*rec ? &**rec : nullptr);
    }

private:
    using record = coord::detail::fence_rule::record;

    static result<std::optional<record>> load(database::transaction& t, std::string_view key) {
        auto st = t.prepare("SELECT highest, written, has_seq, seq, value FROM coord_fence WHERE key = ?1");
        if (!st) return unexpected(st.error());
        auto& s = **st;
        s.bind(1, key);
        auto row = t.next(s);
        if (!row) return unexpected(row.error());
        if (!*row) return std::optional<record>{};
        record r{s.u64(0), s.i64(1) != 0, s.i64(2) != 0, s.u64(3), s.blob(4)};
        s.reset();
        return std::optional<record>{std::move(r)};
    }

    template <class Assign>
    result<void, write_error> fence_apply(std::string_view key, fence_token token, std::optional<std::uint64_t> seq,
                                    Assign&& assign) {
        database::transaction t(db_, true);
        if (!t) return unexpected(write_error{*t.failed(), 0});
        auto loaded = load(t, key);
        if (!loaded) return unexpected(write_error{loaded.error(), 0});
        record rec = loaded->value_or(record{});
        if (!*loaded && t.floors().fence > 0) {  // a key without a record may have lost it: the floor
            rec.highest = t.floors().fence;
            rec.written = true;
        }
        auto ruled = coord::detail::fence_rule::apply(rec, token, seq, std::forward<Assign>(assign));
        if (!ruled) return ruled;  // refused: the transaction rolls back, nothing changed
        auto st = t.prepare("INSERT INTO coord_fence VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (key) DO UPDATE SET "
                            "highest = excluded.highest, written = excluded.written, has_seq = excluded.has_seq, "
                            "seq = excluded.seq, value = excluded.value");
        if (!st) return unexpected(write_error{st.error(), 0});
        (*st)->bind(1, key)
            .bind(2, detail::as_i64(rec.highest))
            .bind(3, std::int64_t{rec.written})
            .bind(4, std::int64_t{rec.has_seq})
            .bind(5, detail::as_i64(rec.seq))
            .bind_blob(6, rec.value);
        if (auto w = t.run(**st); !w) return unexpected(write_error{w.error(), 0});
        if (auto c = t.commit(); !c) return unexpected(write_error{c.error(), 0});
        return {};
    }

    database& db_;
};

}  // namespace coord::sqlite
