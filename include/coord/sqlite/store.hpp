// SPDX-License-Identifier: Apache-2.0
// coord/sqlite/store.hpp: coord's stores on SQLite (libsqlite3), target
// coord::sqlite. The durable embedded store that scales: every promise for
// the processes of one machine, at a cost that does not grow with the keys.
//
// The engine in layers, one header each:
//   connection.hpp   errors, options, the connection, one transaction per operation
//   context.hpp      the database (its path checked) and the clock the adapters use
//   schema.hpp       numbered migrations, applied when the store opens
//   fence.hpp lease.hpp reservation.hpp segment.hpp ledger.hpp session.hpp
//   revocation.hpp   one adapter per capability; each applies the primitive's
//                    rule (coord/rules/) inside the transaction, the same
//                    rule the memory and file stores apply
// and this header, which resolves the path, opens the database, migrates and
// gathers the adapters.
//
//   coord::sqlite::store store{"/var/lib/app/coord.db"};
//   coord::basic_lease_manager leases{store};
//
// Durability: WAL and synchronous=FULL by default: an acknowledged write
// survives kill -9 and power loss. Every expiry is judged on the store's
// clock (Clock, the system clock by default: the one clock every process of
// the machine shares), read inside the transaction. Thread safety: one
// connection per store object behind a timed mutex; processes share the
// file through SQLite's locks.
#pragma once

#include <algorithm>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "coord/clock.hpp"
#include "coord/detail/engine_store.hpp"
#include "coord/detail/store_aliases.hpp"
#include "coord/initial_floors.hpp"
#include "coord/sqlite/connection.hpp"
#include "coord/sqlite/context.hpp"
#include "coord/sqlite/fence.hpp"
#include "coord/sqlite/lease.hpp"
#include "coord/sqlite/ledger.hpp"
#include "coord/sqlite/reservation.hpp"
#include "coord/sqlite/revocation.hpp"
#include "coord/sqlite/schema.hpp"
#include "coord/sqlite/segment.hpp"
#include "coord/sqlite/session.hpp"

namespace coord::sqlite {

/// SQLite as every store concept of coord.
template <unix_clock Clock = system_clock>
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
    /// Opens or creates the database at `path` (every spelling and symbolic
    /// link of one file gives the same database) and brings its schema to
    /// this library's version. Throws std::invalid_argument for an option
    /// out of range; store_error naming the file when it is not a regular
    /// file, has other hard links, is not a database, is corrupt, cannot be
    /// written, or its schema is newer. When it is not the database coord
    /// last wrote at this path, or an older copy of it (connection.hpp,
    /// "Going back"), the store opens and every call on it is refused with
    /// coord::errc::state_went_back (went_back() says why) until
    /// initialize(floors, true) recovers it. Nothing is ever reset.
    explicit basic_store(const std::filesystem::path& path, Clock clock = Clock{}, options opts = {})
        : base(path, std::move(clock), opts) {
        if (auto m = migrate(engine().db()); !m) throw store_error(m.error(), "coord SQLite store " + m.error().detail());
        if (auto w = engine().db().watch_generations(); !w) throw store_error(w.error(), w.error().detail());
    }

    /// Why every call is refused (the database went back), or nothing.
    const std::optional<coord::error>& went_back() const noexcept { return engine().db().went_back_error(); }

    /// The recovery after the database went back (or any time a new
    /// identity is wanted): a new identity and generation, with the floors
    /// `f` states: fence records below the fence floor are raised to it and
    /// a key without a record refuses tokens below it, a segment tag
    /// continues above the segment floor, a slot scheduled at or before the
    /// ledger floor is not run again (a done record still replays), and a
    /// time reservation starts at the reservation floor. Floors at or above
    /// everything handed out before the database went back hand nothing
    /// out twice (docs/concepts/went-back.md). "now" is the store's
    /// clock (fence: its microseconds, and above every lease token the
    /// database holds). A database is initialized when it is first opened:
    /// refused with errc::store_already_initialized unless `replace`; every
    /// other store object opened before is then refused
    /// (store_identity_changed) until it reopens. One write transaction.
    /// Returns the new identity. Throws std::invalid_argument for a segment
    /// or fence floor of 2^63 or more.
    result<std::string> initialize(const initial_floors& f, bool replace = false) {
        constexpr std::uint64_t limit = 0x7ffffffffffffffeull;
        if (f.segment > limit) throw std::invalid_argument("coord::sqlite: the segment floor must be below 2^63-1");
        if (f.fence > limit) throw std::invalid_argument("coord::sqlite: the fence floor must be below 2^63-1");
        const std::int64_t now_ns = since_epoch_ns(engine().clock().now());
        coord::detail::stated_floors stated{f.segment, f.fence, f.ledger_ms, f.reservation_ms};
        if (f.fence_now) stated.fence = static_cast<fence_token>(now_ns / 1000);
        if (f.ledger_now) stated.ledger_ms = now_ns / 1'000'000;
        if (f.reservation_now) stated.reservation_ms = now_ns / 1'000'000;
        return engine().db().reinitialize(stated, f.fence_now, replace);
    }

    /// The database file's path, resolved.
    const std::filesystem::path& path() const noexcept { return engine().db().path(); }
    /// The clock every expiry is judged on.
    const Clock& clock() const noexcept { return engine().clock(); }
};

/// The everyday SQLite store: every expiry judged on the system clock.
using store = basic_store<>;

static_assert(lease_queue_store<store>);
static_assert(ledger_run_store<store>);
static_assert(revocation_store<store>);

// What this store models, checked, and the everyday names on it:
// coord::sqlite::lease_manager and so on (coord/detail/store_aliases.hpp).
COORD_STORE_ALIASES(store);
COORD_STORE_LEDGER_ALIAS(store);
COORD_STORE_SESSION_ALIAS(store);

}  // namespace coord::sqlite
