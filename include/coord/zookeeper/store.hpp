// SPDX-License-Identifier: Apache-2.0
// coord/zookeeper/store.hpp: coord's stores on ZooKeeper (the C client,
// libzookeeper_mt), target coord::zookeeper. Leases whose terms the
// ensemble's clock judges, zxids as fence tokens, fenced writes, segment
// ranges and the job ledger as versioned compare-and-sets, and leases bound
// to a session.
//
// The engine in layers, one header each:
//   connection.hpp   errors, options, the URL, the session, every call under a deadline
//   context.hpp      node paths, the requests, records, the ensemble's clock
//   fence.hpp lease.hpp session_lease.hpp segment.hpp reservation.hpp ledger.hpp
//                    one adapter per capability; each header says how many
//                    round trips each operation takes
// and this header, which gathers them into one store.
//
// Not modeled: sessions and revocations (they are per-request writes of
// growing data, and ZooKeeper keeps its whole tree in memory on every
// server). Both lease forms wait: the lease that outlives its process in a
// line of places under its record, the session-bound one on ZooKeeper's
// lock recipe, in Curator's node names.
//
//   coord::zookeeper::store store{"zookeeper://zk1:2181,zk2:2181,zk3:2181/coord"};
//   store.initialize({});  // once, for a root that never served coord (coordctl store init)
//   coord::basic_lease_manager leases{store};                  // outlives the process, for its TTL
//   coord::basic_lease_manager mine{store.session_bound()};    // lasts as long as this session
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include "coord/detail/options.hpp"
#include "coord/detail/engine_store.hpp"
#include "coord/detail/store_aliases.hpp"
#include "coord/initial_floors.hpp"
#include "coord/zookeeper/connection.hpp"
#include "coord/zookeeper/context.hpp"
#include "coord/zookeeper/fence.hpp"
#include "coord/zookeeper/lease.hpp"
#include "coord/zookeeper/ledger.hpp"
#include "coord/zookeeper/reservation.hpp"
#include "coord/zookeeper/segment.hpp"
#include "coord/zookeeper/session_lease.hpp"

namespace coord::zookeeper {

/// ZooKeeper as the store concepts it serves. Clock: server_clock
/// (production: terms judged on the ensemble's stamps) or a test clock whose
/// readings are written with each lease record.
template <class Clock = server_clock>
class basic_store : public coord::detail::engine_store<detail::context<Clock>,
                                                       fence_adapter<Clock>,
                                                       lease_adapter<Clock>,
                                                       ledger_adapter<Clock>,
                                                       reservation_adapter<Clock>,
                                                       segment_adapter<Clock>> {
    using base = typename basic_store::engine_store;
    using base::engine;

public:
    /// Opens a session and reads the store's identity (none yet: initialize()
    /// makes it; until then what needs the store's data is refused with
    /// errc::store_uninitialized). Creates nothing: a root deleted by another
    /// client is never silently made again. Throws std::invalid_argument when
    /// `url` is malformed (parse_url) or an option is out of range;
    /// store_error when no session could be established.
    explicit basic_store(const std::string& url, Clock clock = Clock{}, options opts = {})
        : base(url, std::move(clock), std::move(opts)), session_leases_(engine()), url_(url) {
        if (auto id = engine().checked_identity(); !id && id.error() != coord::errc::store_uninitialized)
            throw store_error(id.error(), "coord: ZooKeeper at " + url + ": " + id.error().detail());
    }

    /// Initializes the store: creates its root and nodes where missing and
    /// writes its identity node with the floors `f` states (a new one when
    /// `replace`), all in one multi-operation. Where a record is missing
    /// (never written, or deleted by another client) a segment tag
    /// continues above the segment floor, a fence refuses tokens below the
    /// fence floor (fence_now: the ensemble's time in nanoseconds, and at
    /// least the floor before plus this initialization's zxid; every lease
    /// token is the fence floor plus a zxid, so a recovery's floor puts
    /// later tokens above every earlier one, also after the whole ensemble
    /// was restored from an older snapshot), a slot scheduled at or before the
    /// ledger floor is not run again, and a time reservation starts at the
    /// reservation floor; a root that never served coord takes zeros.
    /// Refused with errc::store_already_initialized when the store has an
    /// identity, unless `replace`: then every process that opened the store
    /// before is refused (store_identity_changed) until it reopens. Cost:
    /// one create per missing node, then 7 round trips. Returns the new
    /// identity. Throws std::invalid_argument for a segment floor above 2^63-2.
    result<std::string> initialize(const initial_floors& f, bool replace = false) {
        if (f.segment > 0x7ffffffffffffffeull) throw std::invalid_argument("coord::zookeeper: the segment floor must be below 2^63-1");
        return engine().initialize(f, replace);
    }

    /// The store's identity on the ensemble now (empty: not initialized).
    result<std::string> server_identity() {
        auto n = engine().get(engine().identity_path());
        if (!n) return unexpected(n.error());
        if (!*n) return std::string();
        return (*n)->data.substr(0, 32);
    }

    /// Leases bound to this store object's session (a lease_store).
    session_lease_adapter<Clock>& session_bound() noexcept { return session_leases_; }

    /// The ensemble's clock now, in ns (its stamp on ROOT/clock).
    result<std::int64_t> server_now_ns() { return engine().now_ns(); }
    /// How many watch notifications of a node the ensemble delivered to this
    /// store object (what waiting costs, counted).
    std::uint64_t watch_notifications() { return engine().zk().node_notifications(); }
    /// The session timeout the ensemble negotiated (the term of session-bound leases).
    std::chrono::milliseconds session_timeout() { return engine().zk().negotiated_timeout(); }

    /// The URL the store was opened from, without credentials.
    const std::string& url() const noexcept { return url_; }

private:
    session_lease_adapter<Clock> session_leases_;
    std::string url_;
};

using store = basic_store<>;

static_assert(lease_queue_store<store>);  // the TTL lease's line of places
static_assert(lease_queue_store<session_lease_adapter<server_clock>>);  // the lock recipe, waiting included
static_assert(lease_watch_store<store>);  // election's observe() is woken by a watch on the lease's node

// What this store models, checked, and the everyday names on it:
// coord::zookeeper::lease_manager and so on (coord/detail/store_aliases.hpp).
COORD_STORE_ALIASES(store);
COORD_STORE_LEDGER_ALIAS(store);

}  // namespace coord::zookeeper
