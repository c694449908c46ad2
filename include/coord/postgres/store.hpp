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
// Errors: a refusal by the rule is the usual errc (stale_fence, lease_held,
// ...). A failure of the server or the connection is a postgres::errc
// (condition unavailable) whose detail() is the server's message; a writing
// call that was sent and got no answer (a broken connection, the operation
// timeout passed) is coord::errc::outcome_unknown. The next call reconnects.
// Thread safety: a pool of connections (options::pool_size); each call holds
// one for its whole step, so threads call in parallel up to the pool's size.
#pragma once

#include <string>
#include <utility>

#include "coord/detail/engine_store.hpp"
#include "coord/detail/store_aliases.hpp"
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
    /// Connects and brings the schema to this library's version. Throws
    /// std::invalid_argument when `conninfo` is malformed (conninfo_error)
    /// or an option is out of range; store_error naming the server's words
    /// when connecting or the schema fails.
    explicit basic_store(std::string conninfo, Clock clock = Clock{}, options opts = {})
        : base(std::move(conninfo), std::move(clock), opts) {
        pool::call c(engine().calls());
        if (auto m = migrate(c); !m) throw store_error(m.error(), "coord: PostgreSQL schema: " + m.error().detail());
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

    const std::string& conninfo() const noexcept { return engine().calls().conninfo(); }
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
