// SPDX-License-Identifier: Apache-2.0
// coord/redis/store.hpp: coord's stores on Redis 7 (hiredis), target
// coord::redis. For leases with fence tokens, fenced resources, IDs, the
// ledger and sessions, on the Redis a service already runs.
//
// The engine in layers, one header each:
//   connection.hpp   errors, options, the URL, the pool, every call under a deadline
//   scripts.hpp      the rules in Lua, one script per operation (EVALSHA)
//   context.hpp      key names (one hash tag), the clock, the store's identity
//   fence.hpp lease.hpp reservation.hpp segment.hpp ledger.hpp session.hpp
//   revocation.hpp   one adapter per capability; each header says how many
//                    round trips each operation takes
// and this header, which opens the pools and gathers the adapters into one
// store that models every concept Redis can serve atomically (all but
// ledger_run_store: a job's effect is not in Redis).
//
// Every operation is one script the server runs atomically; every expiry is
// judged on the server's TIME inside it; no call sends the client's time.
//
//   coord::redis::store store{"redis://10.0.0.5:6379/0"};
//   // once, when the store is new (coordctl store init --store redis://...
//   // --segment-floor 0 --fence-floor 0 --ledger-floor none):
//   store.initialize(coord::redis::initial_floors{});
//   coord::basic_lease_manager leases{store};
//
// What Redis can lose, and what the store does about it (docs/stores/redis.md,
// "What Redis can lose"): with appendonly yes and appendfsync always nothing
// acknowledged is lost to a crash. Without, or after a failover to a replica
// that lacked the last writes, data goes back: lease tokens still never go
// back (floored by the server's time), and every capability whose promise
// needs the lost data (fences, reservations, segments, the ledger,
// revocations) checks the store's identity key in the same script and
// refuses (errc::store_uninitialized) once it is gone, and counts the
// store's generation, refusing (errc::state_went_back) a state older than
// one the store object saw (an older append-only file or RDB that kept the
// identity key), until an operator initializes the store again stating
// floors above what it handed out (initial_floors), so that nothing is
// handed out twice.
//
// Errors: a refusal by the rule is the usual errc. A failure of the server or
// the connection is a redis::errc (condition unavailable) whose detail() is
// the server's or the connection's words; a writing call that was sent and
// got no reply is coord::errc::outcome_unknown. The next call reconnects.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "coord/random.hpp"
#include "coord/detail/engine_store.hpp"
#include "coord/detail/store_aliases.hpp"
#include "coord/initial_floors.hpp"
#include "coord/redis/connection.hpp"
#include "coord/redis/context.hpp"
#include "coord/redis/fence.hpp"
#include "coord/redis/lease.hpp"
#include "coord/redis/ledger.hpp"
#include "coord/redis/reservation.hpp"
#include "coord/redis/revocation.hpp"
#include "coord/redis/scripts.hpp"
#include "coord/redis/segment.hpp"
#include "coord/redis/session.hpp"

namespace coord::redis {

/// What an operator states when initializing a store (store::initialize;
/// coord/initial_floors.hpp).
using initial_floors = coord::initial_floors;

/// Redis as every store concept it can serve atomically. Clock:
/// server_clock (production: every expiry judged on the server's TIME) or a
/// unix_clock whose readings are sent (tests).
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
    /// Connects, checks that the server is Redis 7 or later, and reads the
    /// store's identity (none yet: initialize() makes it). Throws
    /// std::invalid_argument when `url` is malformed (parse_url) or an option
    /// is out of range; store_error with the server's words when the server
    /// cannot be reached or is too old.
    explicit basic_store(std::string url, Clock clock = Clock{}, options opts = {})
        : base(std::move(url), std::move(clock), std::move(opts)) {
        pool::call c(engine().calls());
        auto info = c.command({"INFO", "server"}, false);
        if (!info) throw store_error(info.error(), "coord: Redis at " + engine().calls().url() + ": " + info.error().detail());
        const std::string_view text = detail::text(info->get());
        const auto at = text.find("redis_version:");
        const auto major = at == std::string_view::npos ? std::nullopt
                                                        : detail::i64_of(text.substr(at + 14, text.find('.', at) - at - 14));
        if (!major || *major < 7)
            throw store_error(make_error_code(errc::server_too_old),
                              "coord: the server at " + engine().calls().url() + " is not Redis 7.0 or later");
        auto r = c.command({"MGET", engine().key().identity(), engine().key().generation()}, false);
        if (!r) throw store_error(r.error(), "coord: Redis at " + engine().calls().url() + ": " + r.error().detail());
        // An identity key of another shape is left to known_identity, which refuses it.
        const auto id = detail::element(r->get(), 0);
        if (engine().well_formed_identity(id)) engine().set_identity(std::string(id.substr(0, 32)));
        // The generation now: a store that goes back below it is refused
        // from the first call on.
        if (const auto g = detail::i64_of(detail::element(r->get(), 1))) engine().saw_generation(*g);
    }

    /// Initializes the store: writes its identity key (a new random value),
    /// which every script that needs the store's data checks, with the
    /// floors `f` states: where a record is missing (never written, or lost
    /// with the data) a segment tag continues above the segment floor, a
    /// fence refuses tokens below the fence floor, a slot scheduled at or
    /// before the ledger floor is not run again, and a time reservation
    /// starts at the reservation floor. Stating floors at or above everything the
    /// store handed out before a loss means nothing is handed out twice
    /// (docs/stores/redis.md, "When a store lost its data"); a store that never served
    /// coord takes zeros. Refused with errc::store_already_initialized when
    /// the store has an identity, unless `replace`: then the new identity
    /// and floors replace it, and every process that opened the store before
    /// is refused (store_identity_changed) until it reopens. The store's
    /// generation is raised to at least the server's microseconds, above
    /// every generation a client saw before, and every segment counter below
    /// the segment floor is raised to it first (a counter kept by an older
    /// state). Cost: two round trips (TIME, one script), and with a segment
    /// floor a SCAN of the counters and one script each. Returns the new
    /// identity. Throws
    /// std::invalid_argument for a segment floor above 2^63-2.
    result<std::string> initialize(const initial_floors& f, bool replace = false) {
        if (f.segment > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) - 1)
            throw std::invalid_argument("coord::redis: the segment floor must be below 2^63-1");
        const std::string id = coord::detail::new_store_identity();
        auto now = server_now_ns();
        if (!now) return unexpected(now.error());
        coord::detail::stated_floors stated;
        stated.segment = f.segment;
        stated.fence = f.fence_now ? static_cast<fence_token>(*now / 1000) : f.fence;
        stated.ledger_ms = f.ledger_now ? *now / 1'000'000 : f.ledger_ms;
        stated.reservation_ms = f.reservation_now ? *now / 1'000'000 : f.reservation_ms;
        std::string value = coord::detail::identity_text(id, stated);
        pool::call c(engine().calls());
        if (stated.segment > 0)
            if (auto raised = raise_segment_counters(c, stated.segment); !raised) return unexpected(raised.error());
        auto r = c.eval(scripts::store_init, {engine().key().identity(), engine().key().generation()},
                        {std::move(value), replace ? "1" : "0", std::to_string(*now / 1000)}, true);
        if (!r) return unexpected(r.error());
        if (detail::text(r->get()) != "OK" && detail::text(r->get()) != "A") return unexpected(detail::bad_reply("store init"));
        if (detail::text(r->get()) == "A")
            return unexpected(coord::error(coord::make_error_code(coord::errc::store_already_initialized),
                                           "the Redis store at " + engine().calls().url() + " (" + engine().key().tag() +
                                               ") is already initialized; replacing its identity (--force) makes "
                                               "every process that opened it reopen"));
        engine().initialized(id);
        return id;
    }

private:
    // Every segment counter below the floor raised to it (SCAN over the
    // store's counters, one script per counter), before the new identity is
    // written: a counter that survived in an older state (an older
    // append-only file) continues above the floor like a missing one.
    // Ranges drawn from a counter before its raise come from the older state
    // (the operator stops the drawers first: docs/concepts/went-back.md);
    // every range drawn after it is above the floor.
    result<void> raise_segment_counters(pool::call& c, std::uint64_t floor) {
        std::string pattern;
        for (const char ch : engine().key().of("segment", "")) {
            if (ch == '*' || ch == '?' || ch == '[' || ch == ']' || ch == '\\') pattern += '\\';
            pattern += ch;
        }
        pattern += '*';
        const std::string f = std::to_string(floor);
        std::string cursor = "0";
        do {
            auto r = c.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}, false);
            if (!r) return unexpected(r.error());
            if (detail::elements(r->get()) != 2 || (*r)->element[1]->type != REDIS_REPLY_ARRAY)
                return unexpected(detail::bad_reply("SCAN"));
            cursor = std::string(detail::element(r->get(), 0));
            const redisReply* page = (*r)->element[1];
            for (std::size_t i = 0; i < page->elements; ++i) {
                auto raised = c.eval(scripts::segment_raise, {std::string(detail::text(page->element[i]))}, {f}, true);
                if (!raised) return unexpected(raised.error());
            }
        } while (cursor != "0");
        return {};
    }

public:
    /// The store's identity on the server now (empty: not initialized).
    result<std::string> server_identity() {
        pool::call c(engine().calls());
        auto r = c.command({"GET", engine().key().identity()}, false);
        if (!r) return unexpected(r.error());
        if ((*r)->type != REDIS_REPLY_STRING) return std::string();
        return std::string(detail::text(r->get()).substr(0, 32));
    }

    /// The server's clock now, in nanoseconds since the Unix epoch
    /// (microsecond resolution; for tests and diagnostics).
    result<std::int64_t> server_now_ns() {
        pool::call c(engine().calls());
        auto r = c.command({"TIME"}, false);
        if (!r) return unexpected(r.error());
        const auto s = detail::i64_of(detail::element(r->get(), 0));
        const auto us = detail::i64_of(detail::element(r->get(), 1));
        if (!s || !us) return unexpected(detail::bad_reply("TIME"));
        return *s * 1'000'000'000 + *us * 1'000;
    }

    /// One bare script call through the store's pool: EVALSHA of a script
    /// that returns its argument (the bench's floor).
    result<std::string> echo(std::string_view value) {
        pool::call c(engine().calls());
        auto r = c.eval(scripts::echo, {}, {std::string(value)}, false);
        if (!r) return unexpected(r.error());
        return std::string(detail::text(r->get()));
    }

    /// The URL the store was opened from, without credentials.
    const std::string& url() const noexcept { return engine().calls().url(); }
    /// The options in force.
    const options& opts() const noexcept { return engine().calls().opts(); }
    /// The key every name of this store starts with: "{prefix}:".
    const std::string& key_tag() const noexcept { return engine().key().tag(); }
};

/// The everyday Redis store: every expiry judged on the server's clock.
using store = basic_store<>;

static_assert(lease_queue_store<store>);
static_assert(lease_watch_store<store>);  // election's observe() is woken by a PUBLISH on the lease's key
static_assert(revocation_store<store>);

// What this store models, checked, and the everyday names on it:
// coord::redis::lease_manager and so on (coord/detail/store_aliases.hpp).
COORD_STORE_ALIASES(store);
COORD_STORE_LEDGER_ALIAS(store);
COORD_STORE_SESSION_ALIAS(store);

}  // namespace coord::redis
