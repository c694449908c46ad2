// SPDX-License-Identifier: Apache-2.0
// coord/sqlite/session.hpp: session_store on SQLite (server-side sessions
// keyed by the hash of their ID).
//
// Each operation is one transaction: the session's row read, the session
// rule (coord/rules/session.hpp: idle and absolute timeouts on the store's
// clock, read inside the transaction) applied, the row written or deleted.
// Statements per call: 4 (BEGIN IMMEDIATE, SELECT, write, COMMIT); rotate 5
// (the new hash checked free); revoke and revoke_user 3 (one DELETE).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "coord/clock.hpp"
#include "coord/rules/session.hpp"
#include "coord/session.hpp"
#include "coord/sqlite/context.hpp"

namespace coord::sqlite {

template <class Clock>
class session_adapter {
public:
    explicit session_adapter(detail::context<Clock>& ctx) noexcept : db_(ctx.db()), clock_(ctx.clock()) {}

    result<session_record> session_create(std::string_view hash, const session_request& req) {
        database::transaction t(db_, true);
        if (!t) return unexpected(*t.failed());
        auto found = load(t, hash);
        if (!found) return unexpected(found.error());
        if (*found) return unexpected(coord::make_error_code(coord::errc::session_conflict));
        auto rec = coord::detail::session_rule::create(req, now_ms());
        if (auto s = save(t, hash, rec); !s) return unexpected(s.error());
        if (auto c = t.commit(); !c) return unexpected(c.error());
        return rec;
    }
    result<session_record> session_load(std::string_view hash) {
        return live(hash, [&](database::transaction&, session_record& rec, std::int64_t now) -> result<session_record> {
            coord::detail::session_rule::touch(rec, now);
            return rec;
        });
    }
    result<std::uint64_t> session_save(std::string_view hash, std::uint64_t version, std::string_view data) {
        return live(hash, [&](database::transaction&, session_record& rec, std::int64_t now) -> result<std::uint64_t> {
            if (rec.version != version) return unexpected(coord::make_error_code(coord::errc::session_conflict));
            rec.data.assign(data);
            coord::detail::session_rule::touch(rec, now);
            return ++rec.version;
        });
    }
    result<std::uint64_t> session_rotate(std::string_view old_hash, std::string_view new_hash, std::uint64_t version) {
        database::transaction t(db_, true);
        if (!t) return unexpected(*t.failed());
        const auto now = now_ms();
        auto rec = live_in(t, old_hash, now);
        if (!rec) return unexpected(rec.error());
        if (rec->version != version) return unexpected(coord::make_error_code(coord::errc::session_conflict));
        auto taken = load(t, new_hash);
        if (!taken) return unexpected(taken.error());
        if (*taken) return unexpected(coord::make_error_code(coord::errc::session_conflict));
        if (auto d = erase(t, old_hash); !d) return unexpected(d.error());
        coord::detail::session_rule::touch(*rec, now);
        const std::uint64_t v = ++rec->version;
        if (auto s = save(t, new_hash, *rec); !s) return unexpected(s.error());
        if (auto c = t.commit(); !c) return unexpected(c.error());
        return v;
    }
    result<bool> session_revoke(std::string_view hash) {
        database::transaction t(db_, true);
        if (!t) return unexpected(*t.failed());
        auto d = erase(t, hash);
        if (!d) return unexpected(d.error());
        const bool gone = sqlite3_changes64(t.handle()) > 0;
        if (auto c = t.commit(); !c) return unexpected(c.error());
        return gone;
    }
    result<std::size_t> session_revoke_user(std::string_view user) {
        database::transaction t(db_, true);
        if (!t) return unexpected(*t.failed());
        auto st = t.prepare("DELETE FROM coord_session WHERE user_name = ?1");
        if (!st) return unexpected(st.error());
        (*st)->bind(1, user);
        if (auto r = t.run(**st); !r) return unexpected(r.error());
        const auto n = static_cast<std::size_t>(sqlite3_changes64(t.handle()));
        if (auto c = t.commit(); !c) return unexpected(c.error());
        return n;
    }

private:
    std::int64_t now_ms() const {
        const auto ns = since_epoch_ns(clock_.now());
        return ns / 1'000'000 - (ns % 1'000'000 < 0 ? 1 : 0);
    }

    static result<std::optional<session_record>> load(database::transaction& t, std::string_view hash) {
        auto st = t.prepare("SELECT user_name, data, created_ms, last_seen_ms, absolute_expiry_ms, idle_timeout_ms, version "
                            "FROM coord_session WHERE hash = ?1");
        if (!st) return unexpected(st.error());
        auto& s = **st;
        s.bind(1, hash);
        auto row = t.next(s);
        if (!row) return unexpected(row.error());
        if (!*row) return std::optional<session_record>{};
        session_record r{s.text(0), s.blob(1), s.i64(2), s.i64(3), s.i64(4), s.i64(5), s.u64(6)};
        s.reset();
        return std::optional<session_record>{std::move(r)};
    }
    static result<void> save(database::transaction& t, std::string_view hash, const session_record& r) {
        auto st = t.prepare("INSERT INTO coord_session VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (hash) DO UPDATE "
                            "SET user_name = excluded.user_name, data = excluded.data, created_ms = excluded.created_ms, "
                            "last_seen_ms = excluded.last_seen_ms, absolute_expiry_ms = excluded.absolute_expiry_ms, "
                            "idle_timeout_ms = excluded.idle_timeout_ms, version = excluded.version");
        if (!st) return unexpected(st.error());
        (*st)->bind(1, hash)
            .bind(2, r.user)
            .bind_blob(3, r.data)
            .bind(4, r.created_ms)
            .bind(5, r.last_seen_ms)
            .bind(6, r.absolute_expiry_ms)
            .bind(7, r.idle_timeout_ms)
            .bind(8, detail::as_i64(r.version));
        return t.run(**st);
    }
    static result<void> erase(database::transaction& t, std::string_view hash) {
        auto st = t.prepare("DELETE FROM coord_session WHERE hash = ?1");
        if (!st) return unexpected(st.error());
        (*st)->bind(1, hash);
        return t.run(**st);
    }

    // The live session of `hash` in `t`; an expired one is deleted (and that
    // committed) and reported as session_expired, once.
    result<session_record> live_in(database::transaction& t, std::string_view hash, std::int64_t now) {
        auto found = load(t, hash);
        if (!found) return unexpected(found.error());
        if (!*found) return unexpected(coord::make_error_code(coord::errc::session_not_found));
        if (coord::detail::session_rule::expired(**found, now)) {
            if (auto d = erase(t, hash); !d) return unexpected(d.error());
            if (auto c = t.commit(); !c) return unexpected(c.error());
            return unexpected(coord::make_error_code(coord::errc::session_expired));
        }
        return std::move(**found);
    }

    template <class F>
    auto live(std::string_view hash, F&& f) -> decltype(f(std::declval<database::transaction&>(),
                                                           std::declval<session_record&>(), std::int64_t{})) {
        using R = decltype(f(std::declval<database::transaction&>(), std::declval<session_record&>(), std::int64_t{}));
        database::transaction t(db_, true);
        if (!t) return R(unexpected(*t.failed()));
        const auto now = now_ms();
        auto rec = live_in(t, hash, now);
        if (!rec) return R(unexpected(rec.error()));
        auto out = f(t, *rec, now);
        if (!out) return out;
        if (auto s = save(t, hash, *rec); !s) return R(unexpected(s.error()));
        if (auto c = t.commit(); !c) return R(unexpected(c.error()));
        return out;
    }

    database& db_;
    const Clock& clock_;
};

}  // namespace coord::sqlite
