// SPDX-License-Identifier: Apache-2.0
// coord/sqlite/lease.hpp: lease_store on SQLite.
//
// Each operation is one transaction: the name's row read, the lease rule
// (coord/rules/lease.hpp) applied on the store's clock, read inside the
// transaction after the lock is held (the clock all processes of the machine
// share, as the file store: never a caller's), the row written, COMMIT.
// Statements per call: 4 (BEGIN IMMEDIATE, SELECT, upsert, COMMIT); a read 3.
// The queue (lease_queue_store): enqueue, a queued acquire and dequeue are
// one transaction each (the lease row, the queue's rows, the rule, the rows
// that changed).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "coord/clock.hpp"
#include "coord/detail/lease_poll.hpp"
#include "coord/lease.hpp"
#include "coord/rules/lease.hpp"
#include "coord/sqlite/context.hpp"

namespace coord::sqlite {

template <class Clock>
class lease_adapter {
public:
    explicit lease_adapter(detail::context<Clock>& ctx) noexcept : db_(ctx.db()), clock_(ctx.clock()) {}

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

    // lease_queue_store: the queue in coord_lease_queue / coord_lease_waiter,
    // the rule of lease_queue_rule applied in the transaction; only the
    // rows that changed are written. No notification crosses processes:
    // a wait polls (coord/detail/lease_poll.hpp says what it costs).

    result<std::uint64_t> lease_enqueue(std::string_view name, std::string_view who, std::chrono::nanoseconds place_ttl) {
        database::transaction t(db_, true);
        if (!t) return unexpected(*t.failed());
        auto q = load_queue(t, name);
        if (!q) return unexpected(q.error());
        const auto before = *q;
        const auto ticket = coord::detail::lease_queue_rule::enqueue(*q, who, place_ttl.count(), since_epoch_ns(clock_.now()));
        if (auto s = save_queue(t, name, before, *q); !s) return unexpected(s.error());
        if (auto c = t.commit(); !c) return unexpected(c.error());
        return ticket;
    }
    result<lease, lease_error> lease_acquire_queued(std::string_view name, std::string_view owner, std::chrono::nanoseconds ttl,
                                                    std::uint64_t ticket, std::chrono::nanoseconds place_ttl) {
        auto infra = [](coord::error e) { return result<lease, lease_error>(unexpected(lease_error{std::move(e), {}, 0, {}})); };
        database::transaction t(db_, true);
        if (!t) return infra(*t.failed());
        auto loaded = load(t, name);
        if (!loaded) return infra(loaded.error());
        auto q = load_queue(t, name);
        if (!q) return infra(q.error());
        const auto before = *q;
        record rec = loaded->value_or(record{});
        auto ruled = coord::detail::lease_queue_rule::acquire(name, rec, *q, ticket, owner, ttl.count(), place_ttl.count(),
                                                              since_epoch_ns(clock_.now()));
        if (ruled)
            if (auto w = save(t, name, rec); !w) return infra(w.error());
        if (auto s = save_queue(t, name, before, *q); !s) return infra(s.error());
        if (auto c = t.commit(); !c) return infra(c.error());
        return ruled;
    }
    result<void> lease_dequeue(std::string_view name, std::uint64_t ticket) {
        database::transaction t(db_, true);
        if (!t) return unexpected(*t.failed());
        auto q = load_queue(t, name);
        if (!q) return unexpected(q.error());
        const auto before = *q;
        if (!coord::detail::lease_queue_rule::leave(*q, ticket)) return {};
        if (auto s = save_queue(t, name, before, *q); !s) return unexpected(s.error());
        return t.commit();
    }
    result<std::vector<lease_waiter>> lease_queue_read(std::string_view name) {
        database::transaction t(db_, false);
        if (!t) return unexpected(*t.failed());
        auto q = load_queue(t, name);
        if (!q) return unexpected(q.error());
        if (auto c = t.commit(); !c) return unexpected(c.error());
        coord::detail::lease_queue_rule::purge(*q, since_epoch_ns(clock_.now()));
        return std::move(q->waiters);
    }
    /// Polls (coord/detail/lease_poll.hpp): no notification crosses processes.
    coord::detail::polled_waiting lease_waiting(std::string_view, std::uint64_t) const { return {}; }

private:
    using record = coord::detail::lease_rule::record;
    using queue = coord::detail::lease_queue_rule::record;

    static result<void> save(database::transaction& t, std::string_view name, const record& rec) {
        auto st = t.prepare("INSERT INTO coord_lease VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (name) DO UPDATE SET "
                            "last_token = excluded.last_token, held = excluded.held, holder = excluded.holder, "
                            "token = excluded.token, ttl_ns = excluded.ttl_ns, expires_ns = excluded.expires_ns");
        if (!st) return unexpected(st.error());
        (*st)->bind(1, name)
            .bind(2, detail::as_i64(rec.last_token))
            .bind(3, std::int64_t{rec.held})
            .bind(4, rec.holder)
            .bind(5, detail::as_i64(rec.token))
            .bind(6, rec.ttl_ns)
            .bind(7, rec.expires_ns);
        return t.run(**st);
    }

    static result<queue> load_queue(database::transaction& t, std::string_view name) {
        queue q;
        auto st = t.prepare("SELECT last_ticket FROM coord_lease_queue WHERE name = ?1");
        if (!st) return unexpected(st.error());
        (*st)->bind(1, name);
        auto row = t.next(**st);
        if (!row) return unexpected(row.error());
        if (*row) {
            q.last_ticket = (*st)->u64(0);
            (*st)->reset();
        }
        auto ws = t.prepare("SELECT ticket, who, until_ns FROM coord_lease_waiter WHERE name = ?1 ORDER BY ticket");
        if (!ws) return unexpected(ws.error());
        (*ws)->bind(1, name);
        for (;;) {
            auto w = t.next(**ws);
            if (!w) return unexpected(w.error());
            if (!*w) break;
            q.waiters.push_back(lease_waiter{(*ws)->u64(0), (*ws)->text(1), std::chrono::nanoseconds{(*ws)->i64(2)}});
        }
        return q;
    }

    // Writes what changed between `before` and `after` (both in ticket order).
    static result<void> save_queue(database::transaction& t, std::string_view name, const queue& before, const queue& after) {
        if (after.last_ticket != before.last_ticket) {
            auto st = t.prepare("INSERT INTO coord_lease_queue VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET "
                                "last_ticket = excluded.last_ticket");
            if (!st) return unexpected(st.error());
            (*st)->bind(1, name).bind(2, detail::as_i64(after.last_ticket));
            if (auto r = t.run(**st); !r) return r;
        }
        // (Binding a parameter a statement does not name is a no-op.)
        auto run = [&](const char* sql, const lease_waiter& w) -> result<void> {
            auto st = t.prepare(sql);
            if (!st) return unexpected(st.error());
            (*st)->bind(1, name).bind(2, detail::as_i64(w.ticket)).bind(3, w.who).bind(4, w.until.count());
            return t.run(**st);
        };
        std::size_t i = 0, j = 0;
        while (i < before.waiters.size() || j < after.waiters.size()) {
            const lease_waiter* b = i < before.waiters.size() ? &before.waiters[i] : nullptr;
            const lease_waiter* a = j < after.waiters.size() ? &after.waiters[j] : nullptr;
            result<void> r;
            if (b && (!a || b->ticket < a->ticket)) {
                r = run("DELETE FROM coord_lease_waiter WHERE name = ?1 AND ticket = ?2", *b);
                ++i;
            } else if (a && (!b || a->ticket < b->ticket)) {
                r = run("INSERT INTO coord_lease_waiter VALUES (?1, ?2, ?3, ?4)", *a);
                ++j;
            } else {
                if (a->until != b->until)
                    r = run("UPDATE coord_lease_waiter SET until_ns = ?4 WHERE name = ?1 AND ticket = ?2", *a);
                ++i;
                ++j;
            }
            if (!r) return r;
        }
        return {};
    }

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
        if (auto w = save(t, name, rec); !w) return infra(w.error());
        if (auto c = t.commit(); !c) return infra(c.error());
        return ruled;
    }

    database& db_;
    const Clock& clock_;
};

}  // namespace coord::sqlite
