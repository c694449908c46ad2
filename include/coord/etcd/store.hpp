// SPDX-License-Identifier: Apache-2.0
// coord/etcd/store.hpp: coord's stores on etcd (v3, through its JSON gateway
// with libcurl), target coord::etcd. Leases whose terms etcd's leader ends,
// tokens that are etcd revisions, fenced writes as one etcd transaction.
//
// The engine in layers, one header each:
//   connection.hpp   errors, options, the endpoints, the pool, every call under a deadline
//   context.hpp      key names, transactions in etcd's JSON, the clock driver
//   lease.hpp fence.hpp segment.hpp reservation.hpp revocation.hpp
//                    one adapter per capability; each header says how many
//                    round trips each operation takes
// and this header, which gathers them into one store.
//
// Not modeled: sessions (every load moves last_seen: a Raft write per request,
// which is not what etcd is for; keep sessions in Redis, PostgreSQL or
// SQLite), the ledger (its replay window and retention are instants a
// store's clock must judge, and etcd shows no clock) and the waiting acquire.
//
//   coord::etcd::store store{"etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379"};
//   coord::basic_lease_manager leases{store};
#pragma once

#include <string>
#include <utility>

#include "coord/detail/engine_store.hpp"
#include "coord/detail/store_aliases.hpp"
#include "coord/etcd/connection.hpp"
#include "coord/etcd/context.hpp"
#include "coord/etcd/fence.hpp"
#include "coord/etcd/lease.hpp"
#include "coord/etcd/reservation.hpp"
#include "coord/etcd/revocation.hpp"
#include "coord/etcd/segment.hpp"

namespace coord::etcd {

/// etcd as the store concepts it serves. Clock: server_clock (production:
/// etcd's leader ends every term) or a test clock that drives expiry.
template <class Clock = server_clock>
class basic_store : public coord::detail::engine_store<detail::context<Clock>,
                                                       fence_adapter<Clock>,
                                                       lease_adapter<Clock>,
                                                       reservation_adapter<Clock>,
                                                       segment_adapter<Clock>,
                                                       revocation_adapter<Clock>> {
    using base = typename basic_store::engine_store;
    using base::engine;

public:
    /// Checks that an endpoint answers. Throws std::invalid_argument when
    /// `url` is malformed (parse_url) or an option is out of range;
    /// store_error with the words of the last endpoint tried when none answers.
    explicit basic_store(std::string url, Clock clock = Clock{}, options opts = {})
        : base(std::move(url), std::move(clock), std::move(opts)) {
        auto s = engine().calls().request("/v3/maintenance/status", "{}", false);
        if (!s) throw store_error(s.error(), "coord: etcd at " + engine().calls().url() + ": " + s.error().detail());
    }

    /// The cluster's revision now (for tests and diagnostics).
    result<std::int64_t> revision() {
        auto r = engine().txn({}, {}, {}, false);
        if (!r) return unexpected(r.error());
        return r->revision;
    }
    const std::string& url() const noexcept { return engine().calls().url(); }
    const std::vector<std::string>& endpoints() const noexcept { return engine().calls().endpoints(); }

};

using store = basic_store<>;

static_assert(revocation_store<store>);
static_assert(lease_watch_store<store>);  // election's observe() is woken by a watch on the holder key

// What this store models, checked, and the everyday names on it:
// coord::etcd::lease_manager and so on (coord/detail/store_aliases.hpp).
COORD_STORE_ALIASES(store);

}  // namespace coord::etcd
