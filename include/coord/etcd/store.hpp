// SPDX-License-Identifier: Apache-2.0
// coord/etcd/store.hpp: coord's stores on etcd (v3, through its JSON gateway
// with libcurl), target coord::etcd. Leases in the layout of etcd's own lock
// (etcdctl lock, concurrency.Mutex) with a waiting acquire, terms etcd's leader ends,
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
// store's clock must judge, and etcd shows no clock).
//
//   coord::etcd::store store{"etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379"};
//   // once, when the store is new (coordctl store init --store etcd://...
//   // --segment-floor 0 --fence-floor 0 --ledger-floor none):
//   store.initialize(coord::etcd::initial_floors{});
//   coord::basic_lease_manager leases{store};
#pragma once

#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "coord/initial_floors.hpp"

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

/// What an operator states when initializing a store (store::initialize;
/// coord/initial_floors.hpp).
using initial_floors = coord::initial_floors;

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
        auto r = engine().txn({}, {detail::get(engine().key().identity())}, {}, false);
        if (!r) throw store_error(r.error(), "coord: etcd at " + engine().calls().url() + ": " + r.error().detail());
        // An identity key of another shape is left to the calls, which refuse it.
        if (!r->ranges.empty() && r->ranges[0]) (void)engine().learn_identity(r->ranges[0]->value);
    }

    /// Initializes the store: writes its identity key (a new random value
    /// and the floors `f` states), which every call that needs the store's
    /// data compares in its transaction. Where a record is missing (never
    /// written, or deleted with the store's keys) a segment tag continues
    /// above the segment floor, a fence refuses tokens below the fence floor
    /// and a time reservation starts at the reservation floor; records kept
    /// below a floor (a snapshot restored) are raised to it first. New lease
    /// tokens are the holder key's create revision plus the fence floor, so
    /// a floor at or above every token granted before (fence_now: this
    /// machine's time in nanoseconds, far above etcd's revisions and above
    /// every token of an earlier initialization's floor) puts every later
    /// token above them. A store that never served coord takes zeros.
    /// Refused with errc::store_already_initialized when the store has an
    /// identity, unless `replace`: then every process that opened it before
    /// is refused (store_identity_changed) until it reopens. etcd shows no
    /// clock: "now" floors are this machine's. Without `replace` the
    /// identity is read first, so that a refused call raises no record.
    /// Returns the new identity.
    result<std::string> initialize(const initial_floors& f, bool replace = false) {
        const std::string id = coord::detail::new_store_identity();
        const std::int64_t now = since_epoch_ns(std::chrono::system_clock::now());
        coord::detail::stated_floors stated;
        stated.segment = f.segment;
        // "now" in nanoseconds: every token of a store initialized at T
        // is T + a revision, so a later recovery's floor is above all of
        // them unless etcd made more than 10^9 revisions a second between
        // the two (or this machine's clock went back).
        stated.fence = f.fence_now ? static_cast<fence_token>(now) : f.fence;
        stated.ledger_ms = f.ledger_now ? now / 1'000'000 : f.ledger_ms;
        stated.reservation_ms = f.reservation_now ? now / 1'000'000 : f.reservation_ms;
        const std::string k = engine().key().identity();
        const auto already = [&] {
            return unexpected(coord::error(coord::make_error_code(coord::errc::store_already_initialized),
                                           "the etcd store at " + engine().calls().url() + " (" + engine().key().prefix() +
                                               ") is already initialized; replacing its identity (--force) makes every "
                                               "process that opened it reopen"));
        };
        if (!replace) {  // refused before any record is raised
            auto now_there = engine().txn({}, {detail::get(k)}, {}, false);
            if (!now_there) return unexpected(now_there.error());
            if (!now_there->ranges.empty() && now_there->ranges[0]) return already();
        }
        if (auto raised = raise_to(stated); !raised) return unexpected(raised.error());
        const std::string text = coord::detail::identity_text(id, stated);
        auto r = engine().txn(replace ? std::vector<std::string>{} : std::vector<std::string>{detail::create_is(k, 0)},
                              {detail::put(k, text)}, {}, true);
        if (!r) return unexpected(r.error());
        if (!r->succeeded) return already();
        if (auto learned = engine().learn_identity(text); !learned) return unexpected(learned.error());
        return id;
    }

    /// The cluster's revision now (for tests and diagnostics).
    result<std::int64_t> revision() {
        auto r = engine().txn({}, {}, {}, false);
        if (!r) return unexpected(r.error());
        return r->revision;
    }
    /// The URL the store was opened from, without credentials.
    const std::string& url() const noexcept { return engine().calls().url(); }
    /// The prefix every key of this store starts with.
    const std::string& key_prefix() const noexcept { return engine().key().prefix(); }
    /// The members' base URLs, in the order they are tried.
    const std::vector<std::string>& endpoints() const noexcept { return engine().calls().endpoints(); }

private:
    // Every record a floor covers raised to it, before the new identity is
    // written (the recovery of a store that went back: a restored snapshot
    // keeps records below what was handed out since): fence records below
    // the fence floor (their value kept), segment counters below the
    // segment floor, time reservations below the reservation floor. Each by
    // a transaction on the record's mod revision (again when another writer
    // got in between). Records written from the older state before this
    // runs were handed out from it: the operator stops every process first.
    result<void> raise_to(const coord::detail::stated_floors& f) {
        if (f.fence > 0)
            if (auto r = raise_each("fence", [&](const std::string& v) -> std::optional<std::string> {
                    if (v.size() < 21 || v[20] != '\0') return std::nullopt;
                    const auto t = detail::unpadded(std::string_view(v).substr(0, 20));
                    if (!t || *t >= f.fence) return std::nullopt;
                    return detail::padded(f.fence) + v.substr(20);
                });
                !r)
                return r;
        if (f.segment > 0)
            if (auto r = raise_each("segment", [&](const std::string& v) -> std::optional<std::string> {
                    const auto used = detail::unpadded(v);
                    if (!used || *used >= f.segment) return std::nullopt;
                    return std::to_string(f.segment);
                });
                !r)
                return r;
        if (f.reservation_ms > 0)
            if (auto r = raise_each("reservation", [&](const std::string& v) -> std::optional<std::string> {
                    const auto space = v.find(' ');
                    if (space == std::string::npos) return std::nullopt;
                    std::int64_t u = 0;
                    auto [p, ec] = std::from_chars(v.data() + space + 1, v.data() + v.size(), u);
                    if (ec != std::errc{} || p != v.data() + v.size() || u >= f.reservation_ms) return std::nullopt;
                    return v.substr(0, space + 1) + std::to_string(f.reservation_ms);
                });
                !r)
                return r;
        return {};
    }

    // Every key of `kind` (PREFIX/kind/...), a page of 1000 at a time: the
    // value `raised(value)` returns, written when the key is unchanged.
    template <class Raise>
    result<void> raise_each(std::string_view kind, Raise&& raised) {
        const std::string from = engine().key().of(kind, "");
        std::string end = from;
        end.back() = static_cast<char>(end.back() + 1);  // the first key after the kind's ('/' + 1)
        std::string next = from;
        for (;;) {
            auto page = engine().calls().request(
                "/v3/kv/range",
                R"({"key":")" + detail::b64(next) + R"(","range_end":")" + detail::b64(end) + R"(","limit":1000})", false);
            if (!page) return unexpected(page.error());
            const auto kvs = detail::array_member(*page, "kvs");
            for (auto object : kvs) {
                auto one = detail::kv_of(object);
                if (!one) return unexpected(detail::bad("a key-value etcd sent is malformed"));
                next = one->key + '\0';  // the next page starts after it
                for (auto kv = std::move(*one);;) {
                    auto v = raised(kv.value);
                    if (!v) break;
                    auto w = engine().txn({detail::mod_is(kv.key, kv.mod_revision)}, {detail::put(kv.key, *v)},
                                          {detail::get(kv.key)}, true);
                    if (!w) return unexpected(w.error());
                    if (w->succeeded || w->ranges.empty() || !w->ranges[0]) break;
                    kv = std::move(*w->ranges[0]);  // changed meanwhile: raise what is there now
                }
            }
            if (kvs.size() < 1000) return {};
        }
    }
};

using store = basic_store<>;

static_assert(revocation_store<store>);
static_assert(lease_watch_store<store>);  // election's observe() is woken by a watch on the name's line
static_assert(lease_queue_store<store>);  // the waiting acquire: etcd's lock recipe

// What this store models, checked, and the everyday names on it:
// coord::etcd::lease_manager and so on (coord/detail/store_aliases.hpp).
COORD_STORE_ALIASES(store);

}  // namespace coord::etcd
