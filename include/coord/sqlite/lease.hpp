// SPDX-License-Identifier: Apache-2.0
// coord/sqlite/lease.hpp: lease_store on SQLite.
//
// Each operation is one transaction: the name's row read, the lease rule
// (coord/rules/lease.hpp) applied on the store's clock, read inside the
// transaction after the lock is held (the clock all processes of the machine
// share, as the file store: never a caller's), the row written, COMMIT.
// Statements per call: 4 (BEGIN IMMEDIATE, SELECT, upsert, COMMIT); a read 3.
#pragma once

#ifndef COORD_STORE_HEADER_INCLUDED
#define COORD_STORE_HEADER_INCLUDED 1
#endif

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "coord/clock.hpp"
#include "coord/lease.hpp"
#include "coord/rules/lease.hpp"
#include "coord/sqlite/connection.hpp"

namespace coord::sqlite {

template <class Clock>
class lease_adapter {
public:
    lease_adapter(database& db, const Clock& clock) noexcept : db_(db), clock_(clock) {}

    result<lease, lease_error> lease_acquire(std::string_view name, std::string_view owner,
                                             std::chrono::nanoseconds ttl) {
        return apply<lease>(name, true, [&](record& r, std::int64_t now) {
            return coord::detail::lease_rule::acquire(name, r, owner, ttl.count(), now);
        });
    }
    result<lease, lease_error> lease_renew(std::string_view name, std::string_view owner, fence_token token,
                                           std::chrono::nanoseconds ttl) {
        return apply<lease>(name, false, [&](record& r, std::int64_t now) {
            return coord::detail::lease_rule::renew(name, r, owner, token, ttl.count(), now);
        });
    }
    result<void, lease_error> lease_release(std::string_view name, std::string_view owner, fence_token token) {
        return apply<void>(name, false, [&](record& r, std::int64_t now) {
            return coord::detail::lease_rule::release(r, owner, token, now);
        });
    }
    result<std::optional<lease>> lease_read(std::string_view name) {
        database::transaction t(db_, false);
        if (!t) return unexpected(*t.failed());
        auto rec = load(t, name);
        if (!rec) return unexpected(rec.error());
        const auto now = since_epoch_ns(clock_.now());
        if (auto c = t.commit(); !c) return unexpected(c.error());
        return coord::detail::lease_rule::read(name, *rec ? &**rec : nullptr, now);
    }

private:
    using record = coord::detail::lease_rule::record;

    static result<std::optional<record>> load(database::transaction& t, std::string_view name) {
        auto st = t.prepare("SELECT last_token, held, holder, token, ttl_ns, expires_ns FROM coord_lease WHERE name = ?1");
        if (!st) return unexpected(st.error());
        auto& s = **st;
        s.bind(1, name);
        auto row = t.next(s);
        if (!row) return unexpected(row.error());
        if (!*row) return std::optional<record>{};
        record r{s.u64(0), s.i64(1) != 0, s.text(2), s.u64(3), s.i64(4), s.i64(5)};
        s.reset();
        return std::optional<record>{std::move(r)};
    }

    // `create`: an unknown name gets a row (acquire); otherwise a refusal
    // for an unknown name leaves the table as it was.
    template <class T, class Rule>
    result<T, lease_error> apply(std::string_view name, bool create, Rule&& rule) {
        auto infra = [](coord::error e) { return result<T, lease_error>(unexpected(lease_error{std::move(e), {}, 0, {}})); };
        database::transaction t(db_, true);
        if (!t) return infra(*t.failed());
        auto loaded = load(t, name);
        if (!loaded) return infra(loaded.error());
        const bool existed = loaded->has_value();
        record rec = loaded->value_or(record{});
        auto ruled = rule(rec, since_epoch_ns(clock_.now()));
        if (!existed && (!create || !ruled)) return ruled;
        auto st = t.prepare("INSERT INTO coord_lease VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (name) DO UPDATE SET "
                            "last_token = excluded.last_token, held = excluded.held, holder = excluded.holder, "
                            "token = excluded.token, ttl_ns = excluded.ttl_ns, expires_ns = excluded.expires_ns");
        if (!st) return infra(st.error());
        (*st)->bind(1, name)
            .bind(2, detail::as_i64(rec.last_token))
            .bind(3, std::int64_t{rec.held})
            .bind(4, rec.holder)
            .bind(5, detail::as_i64(rec.token))
            .bind(6, rec.ttl_ns)
            .bind(7, rec.expires_ns);
        if (auto w = t.run(**st); !w) return infra(w.error());
        if (auto c = t.commit(); !c) return infra(c.error());
        return ruled;
    }

    database& db_;
    const Clock& clock_;
};

}  // namespace coord::sqlite
