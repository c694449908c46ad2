// SPDX-License-Identifier: Apache-2.0
// coord/postgres/store.hpp: coord's stores on PostgreSQL (libpq), target
// coord::postgres. For fences, leases, IDs, the ledger and sessions that
// several machines trust.
//
// The engine in layers, one header each:
//   connection.hpp   errors, options, the pool, every call under a deadline
//   context.hpp      the pools and the clock every adapter works through
//   schema.hpp       numbered migrations, applied when the store opens
//   fence.hpp lease.hpp reservation.hpp segment.hpp ledger.hpp session.hpp
//   revocation.hpp   one adapter per capability; each header says how many
//                    round trips each operation takes
// and this header, which opens the pool, migrates, and gathers the adapters
// into one store that models every concept.
//
// Every operation is one atomic step PostgreSQL executes (a PL/pgSQL
// function that locks the row and applies the rule, one conditional UPDATE or
// INSERT ... ON CONFLICT, or one transaction); nothing is read in one call
// and written in another. Every expiry is judged on the server's clock
// (clock_timestamp(), read inside the statement): no call sends the client's
// time.
//
//   coord::postgres::store store{"host=db1 dbname=app user=svc"};
//   coord::basic_lease_manager leases{store};
//   coord::basic_keyed_fenced_resource orders{store};
//
// A store that went back: the store's identity lives in coord_store,
// written once by initialize() (coordctl store init). Every call but the
// lease's runs coord_guard first, in the same round trip and transaction, or
// compares the same inside its one statement (the common fence_write and
// segment_allocate), with what this store object saw ("identity.xmin": a
// restored dump writes the row again); a database whose store is not that
// one refuses the call before anything is applied (lease calls need no
// guard: their tokens rest on the server's clock, lease.hpp): errc::state_went_back (restored, or its schema dropped),
// store_identity_changed (initialized again), store_uninitialized (never
// initialized). The same step checks the call's writer (one per pooled
// connection, connection.hpp) and the store object's other writers: writes
// the database acknowledged to this store object, on any of its
// connections, and then lost (an asynchronous standby promoted without the
// last commits, a data directory put back) are errc::state_went_back too.
// A process that opens the store after a restore or such a loss cannot
// tell; initialize(floors, replace) is the recovery (docs/concepts/went-back.md).
//
// Errors: a refusal by the rule is the usual errc (stale_fence, lease_held,
// ...). A failure of the server or the connection is a postgres::errc
// (condition unavailable) whose detail() is the server's message; a writing
// call that was sent and got no answer (a broken connection, the operation
// timeout passed) is coord::errc::outcome_unknown. The next call reconnects.
// Thread safety: a pool of connections (options::pool_size); each call holds
// one for its whole step, so threads call in parallel up to the pool's size.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "coord/detail/engine_store.hpp"
#include "coord/detail/store_aliases.hpp"
#include "coord/initial_floors.hpp"
#include "coord/postgres/connection.hpp"
#include "coord/postgres/context.hpp"
#include "coord/postgres/fence.hpp"
#include "coord/postgres/lease.hpp"
#include "coord/postgres/ledger.hpp"
#include "coord/postgres/reservation.hpp"
#include "coord/postgres/revocation.hpp"
#include "coord/postgres/schema.hpp"
#include "coord/postgres/segment.hpp"
#include "coord/postgres/session.hpp"

namespace coord::postgres {

/// PostgreSQL as every store concept of coord. Clock: server_clock
/// (production: every expiry judged on the server's clock) or a unix_clock
/// whose readings are sent (tests).
template <class Clock = server_clock>
class basic_store : public coord::detail::engine_store<detail::context<Clock>,
                                                       fence_adapter<Clock>,
                                                       lease_adapter<Clock>,
                                                       reservation_adapter<Clock>,
                                                       segment_adapter<Clock>,
                                                       ledger_adapter<Clock>,
                                                       session_adapter<Clock>,
                                                       revocation_adapter<Clock>> {
    using base = typename basic_store::engine_store;
    using base::engine;

public:
    /// Connects and brings the schema to this library's version. Opening
    /// never initializes the store: until initialize() (coordctl store init)
    /// wrote its identity, every call is refused with
    /// errc::store_uninitialized, so a schema dropped and made again is never
    /// taken for a new store. Throws
    /// std::invalid_argument when `conninfo` is malformed (conninfo_error)
    /// or an option is out of range; store_error naming the server's words
    /// when connecting or the schema fails.
    explicit basic_store(std::string conninfo, Clock clock = Clock{}, options opts = {})
        : base(std::move(conninfo), std::move(clock), opts) {
        pool::call c(engine().calls(), pool::unguarded);
        if (auto m = migrate(c); !m) throw store_error(m.error(), "coord: PostgreSQL schema: " + m.error().detail());
    }

    /// Initializes the store: writes its identity (coord_store, a new random
    /// value), which every call's guard checks, with the floors `f` states:
    /// a fence record below the fence floor is raised to it and a fence
    /// without a record refuses tokens below it, a segment tag continues
    /// above the segment floor, a slot scheduled at or before the ledger
    /// floor is not run again (a done record still replays), and a time
    /// reservation starts at the reservation floor. Stating floors at or
    /// above everything the store handed out before a restore means nothing
    /// is handed out twice (docs/concepts/went-back.md); a store that
    /// never served coord takes zeros. "now" is the store's clock (fence:
    /// in microseconds, at least every lease token granted before). Refused
    /// with errc::store_already_initialized when the store has an identity,
    /// unless `replace`: then the new identity and floors replace it, and
    /// every other store object opened before is refused
    /// (store_identity_changed) until it reopens. One transaction, 2 round
    /// trips. Returns the new identity. Throws std::invalid_argument for a
    /// segment floor above 2^63-2.
    result<std::string> initialize(const initial_floors& f, bool replace = false) {
        using namespace detail;
        if (f.segment > 0x7ffffffffffffffeull) throw std::invalid_argument("coord::postgres: the segment floor must be below 2^63-1");
        pool::call c(engine().calls(), pool::unguarded);
        auto fail = [&](coord::error e) {
            (void)c.exec("ROLLBACK", {}, false);
            return result<std::string>(unexpected(std::move(e)));
        };
        // Initializers take turns (the table lock); calls go on meanwhile.
        auto seen = c.pipeline({{"BEGIN", {}},
                                {"LOCK TABLE coord_store IN SHARE ROW EXCLUSIVE MODE", {}},
                                {"SELECT count(*) FROM coord_store", {}},
                                {"SELECT coord_now_ns($1), coalesce(max(last_token), 0) FROM coord_lease",
                                 {now_ns_param(engine().clock())}}},
                               false);
        if (!seen) return fail(seen.error());
        if ((*seen)[2].i64(0, 0) != 0 && !replace)
            return fail(coord::error(coord::make_error_code(coord::errc::store_already_initialized),
                                     "coord's store in this PostgreSQL database is already initialized; replacing "
                                     "its identity (--force) makes every process that opened it reopen"));
        const std::int64_t now_ns = (*seen)[3].i64(0, 0);
        coord::detail::stated_floors stated;
        stated.segment = f.segment;
        stated.fence = f.fence_now ? std::max<fence_token>(static_cast<fence_token>(now_ns / 1000), (*seen)[3].u64(0, 1) + 1)
                                   : f.fence;
        stated.ledger_ms = f.ledger_now ? now_ns / 1'000'000 : f.ledger_ms;
        stated.reservation_ms = f.reservation_now ? now_ns / 1'000'000 : f.reservation_ms;
        const std::string id = coord::detail::new_store_identity();
        c.restart_deadline();
        auto done = c.pipeline(
            {{"INSERT INTO coord_store AS s VALUES (1, $1, $2::numeric, $3::numeric, $4, $5) ON CONFLICT (id) DO UPDATE "
              "SET identity = EXCLUDED.identity, segment_floor = EXCLUDED.segment_floor, fence_floor = "
              "EXCLUDED.fence_floor, ledger_floor_ms = EXCLUDED.ledger_floor_ms, reservation_floor_ms = "
              "EXCLUDED.reservation_floor_ms RETURNING s.identity || '.' || s.xmin::text",
              {param(id), param_u64(stated.segment), param_u64(stated.fence), param(stated.ledger_ms),
               param(stated.reservation_ms)}},
             {"UPDATE coord_fence SET highest = $1::numeric, has_seq = false, seq = 0 WHERE highest < $1::numeric",
              {param_u64(stated.fence)}},
             {"UPDATE coord_segment SET next = $1::numeric + 1 WHERE next < $1::numeric + 1", {param_u64(stated.segment)}},
             {"UPDATE coord_reservation SET until_ms = $1 WHERE until_ms < $1", {param(stated.reservation_ms)}},
             {"COMMIT", {}}},
            true);
        if (!done) {
            if (done.error() == coord::errc::outcome_unknown) return unexpected(done.error());
            return fail(done.error());
        }
        engine().seen().replace((*done)[0].text(0, 0));
        engine().calls().renew_writers();  // the loss they saw is what this recovers from
        return id;
    }

    /// The store's identity in the database now (empty: not initialized).
    result<std::string> server_identity() {
        pool::call c(engine().calls(), pool::unguarded);
        auto r = c.exec("SELECT identity FROM coord_store WHERE id = 1", {}, false);
        if (!r) return unexpected(r.error());
        return r->rows() == 1 ? r->text(0, 0) : std::string();
    }

    /// The schema version the database is at (after the constructor: schema_version()).
    result<int> database_schema_version() {
        pool::call c(engine().calls());
        auto r = c.exec("SELECT version FROM coord_schema WHERE id = 1", {}, false);
        if (!r) return unexpected(r.error());
        if (r->rows() != 1) return unexpected(make_error_code(errc::bad_answer));
        return static_cast<int>(r->i64(0, 0));
    }

    /// The server's clock now, in nanoseconds since the Unix epoch (for tests
    /// and diagnostics).
    result<std::int64_t> server_now_ns() {
        pool::call c(engine().calls());
        auto r = c.exec("SELECT coord_now_ns()", {}, false);
        if (!r) return unexpected(r.error());
        if (r->rows() != 1) return unexpected(make_error_code(errc::bad_answer));
        return r->i64(0, 0);
    }

    /// The conninfo the store was opened with.
    const std::string& conninfo() const noexcept { return engine().calls().conninfo(); }
    /// The options in force.
    const options& opts() const noexcept { return engine().calls().opts(); }
};

/// The everyday PostgreSQL store: every expiry judged on the server's clock.
using store = basic_store<>;

static_assert(lease_queue_store<store>);
static_assert(lease_watch_store<store>);  // election's observe() is woken by a NOTIFY on the name's channel
static_assert(ledger_run_store<store>);
static_assert(revocation_store<store>);

// What this store models, checked, and the everyday names on it:
// coord::postgres::lease_manager and so on (coord/detail/store_aliases.hpp).
COORD_STORE_ALIASES(store);
COORD_STORE_LEDGER_ALIAS(store);
COORD_STORE_SESSION_ALIAS(store);

}  // namespace coord::postgres
