// SPDX-License-Identifier: Apache-2.0
// coord/election.hpp: leader election on a lease, held by a keeper.
//
// Leadership of `name` is the lease `name`: the leader is its holder, the
// term number is the lease's fence token (larger for every new leader, also
// across restarts of a durable store), and losing leadership is the held
// lease's lost(). As etcd's Campaign/Observe and Curator's LeaderLatch.
//
//   coord::basic_keeper keeper{store};
//   coord::basic_election election{keeper, "scheduler"};
//   auto lead = election.campaign(coord::unique_owner(), std::chrono::seconds{10},
//                                 std::chrono::steady_clock::now() + std::chrono::hours{1});
//   if (lead) while (lead->valid()) act_as_leader(lead->token());   // the term number travels with every write
//   // lead->release() resigns; so does destroying it
//
// What it promises: at most one candidate is leader at a time as the store
// judges it (one lease holder); term numbers only grow. What it does not:
// that a leader knows the instant it stops being one. A leader's keeper
// says so by its safe deadline (coord/keeper.hpp); a request it sent before
// may still land after the next leader took over, so the term number (the
// fence token) must travel with every effect and be checked where it lands
// (coord/fence.hpp).
//
// Waiting: campaign waits with the store's queued acquire where it has one
// (first come, first served; woken by the store), and otherwise tries again
// when the leader's term is due to end (at most every second, at least every
// 10 ms). observe() is woken by the store's notification where it has one
// (lease_watch_store: etcd's and ZooKeeper's watches, PostgreSQL's NOTIFY,
// Redis's PUBLISH) and reads again at least every `poll` (default 1 s there:
// a term that ends unrenewed is notified by no write on PostgreSQL and
// Redis); on the file store and SQLite it polls every `poll` (default
// 100 ms): a new leader is seen at most that long after it was granted.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "coord/detail/text.hpp"
#include "coord/keeper.hpp"
#include "coord/lease.hpp"
#include "coord/result.hpp"

namespace coord {

/// Who leads, as the store says now.
struct leader_info {
    std::string candidate;  ///< the leader's name, as it campaigned
    /// The term number: the leadership lease's fence token.
    fence_token term = 0;
    /// When the leader's term ends unless renewed, on the store's clock.
    std::chrono::nanoseconds expires_at{0};
    /// Equal when candidate, term and expiry are.
    friend bool operator==(const leader_info&, const leader_info&) = default;
};

/// Leader election for one name on a keeper's store. Holds references: the
/// keeper (and its store) must outlive it. Thread safety: any thread.
template <lease_store Store, monotonic_clock Steady = steady_clock>
class basic_election {
public:
    /// A held leadership: the keeper's held lease on the election's name.
    using leadership = basic_held_lease<Store, Steady>;

    /// Throws std::invalid_argument for a name no lease may have.
    basic_election(basic_keeper<Store, Steady>& keeper, std::string name)
        : keeper_(&keeper), store_(&keeper.store()), name_(std::move(name)) {
        detail::check_name("coord::election: name", name_);
    }

    /// The election's name (the lease's name).
    const std::string& name() const noexcept { return name_; }

    /// Becomes leader by `deadline`: the held leadership (its token() is the
    /// term number, lost() says when it ended), or lease_held at the deadline
    /// (error() says who leads), or the store's error. A deadline already
    /// passed is one try.
    template <class Rep, class Period>
    result<leadership, lease_error> campaign(std::string_view candidate, std::chrono::duration<Rep, Period> ttl,
                                             std::chrono::steady_clock::time_point deadline) {
        if constexpr (lease_queue_store<Store>) {
            return keeper_->hold(name_, candidate, ttl, deadline);
        } else {
            for (;;) {
                auto r = keeper_->hold(name_, candidate, ttl);
                if (r || r.error() != errc::lease_held) return r;
                const auto now = std::chrono::steady_clock::now();
                if (now >= deadline) return r;
                // Try again when the leader's term is due to end (the store's
                // clock: expires_at - now), 10 ms to 1 s from now.
                auto pause = std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::seconds{1});
                const auto& e = r.error();
                if (e.now.count() != 0 && e.expires_at > e.now)
                    pause = std::min(pause, std::chrono::duration_cast<std::chrono::steady_clock::duration>(e.expires_at - e.now));
                pause = std::max(pause, std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::milliseconds{10}));
                std::this_thread::sleep_until(std::min(deadline, now + pause));
            }
        }
    }

    /// Who leads now, or nullopt when nobody does (one store read).
    result<std::optional<leader_info>> leader() {
        auto r = store_->lease_read(name_);
        if (!r) return unexpected(r.error());
        if (!*r) return std::optional<leader_info>{};
        return std::optional<leader_info>{leader_info{(*r)->owner, (*r)->token, (*r)->expires_at}};
    }

    /// Waits until the leadership differs from `known` (another term, or
    /// nobody after someone, or someone after nobody: pass nullopt for
    /// "nobody") or `deadline`, and returns who leads then.
    /// `poll`: how often to read again without a notification (by default
    /// 1 s on a store that notifies, 100 ms on the others).
    result<std::optional<leader_info>> observe(std::optional<fence_token> known,
                                               std::chrono::steady_clock::time_point deadline,
                                               std::optional<std::chrono::milliseconds> poll = std::nullopt) {
        if constexpr (lease_watch_store<Store>) {
            auto watch = store_->lease_watching(name_);
            return observe_with(known, deadline, poll.value_or(std::chrono::seconds{1}),
                                [&](auto until) { (void)watch.wait(until); });
        } else {
            return observe_with(known, deadline, poll.value_or(std::chrono::milliseconds{100}),
                                [](auto until) { std::this_thread::sleep_until(until); });
        }
    }

private:
    template <class Wait>
    result<std::optional<leader_info>> observe_with(std::optional<fence_token> known,
                                                    std::chrono::steady_clock::time_point deadline,
                                                    std::chrono::milliseconds poll, Wait&& wait) {
        for (;;) {
            auto now = leader();
            if (!now) return now;
            const std::optional<fence_token> term = *now ? std::optional<fence_token>((*now)->term) : std::nullopt;
            if (term != known) return now;
            const auto t = std::chrono::steady_clock::now();
            if (t >= deadline) return now;
            wait(std::min(deadline, t + poll));
        }
    }

    basic_keeper<Store, Steady>* keeper_;
    Store* store_;
    std::string name_;
};

}  // namespace coord
