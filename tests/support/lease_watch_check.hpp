// SPDX-License-Identifier: Apache-2.0
// tests/support/lease_watch_check.hpp: a lease_watch_store model's watch
// wakes its watcher at another client's grant and release, and an
// election's observe() is woken by it. Called by the engines' own tests
// (ZooKeeper, etcd, PostgreSQL, Redis) with two store objects on one fresh
// namespace. `rearms`: a watch that fired is armed again by the next wait,
// which returns true at once (etcd's and ZooKeeper's one-shot watches); a
// subscription (PostgreSQL's LISTEN, Redis's SUBSCRIBE) stays armed.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>

#include "coord/election.hpp"
#include "coord/keeper.hpp"
#include "coord/lease.hpp"

namespace coord::test {

// The 60 s bounds are there only so that a missing notification fails the
// test rather than hanging it: every wait below returns at an event.
template <coord::lease_watch_store Store>
void expect_lease_watch_wakes(Store& store, Store& other, bool rearms) {
    using namespace std::chrono_literals;
    const auto far = [] { return std::chrono::steady_clock::now() + 60s; };
    auto watch = store.lease_watching("leader");
    EXPECT_TRUE(watch.wait(far()));  // armed (on a name never held)
    auto l = other.lease_acquire("leader", "A", 1h);
    ASSERT_TRUE(l) << l.error().code.message();
    EXPECT_TRUE(watch.wait(far()));  // the grant
    if (rearms) {
        EXPECT_TRUE(watch.wait(far()));  // armed again
    }
    ASSERT_TRUE(other.lease_release("leader", "A", l->token));
    EXPECT_TRUE(watch.wait(far()));  // the release
    // observe() with a poll of an hour: only the watch can wake it.
    coord::basic_keeper keeper{other};
    coord::basic_election election{keeper, "leader"};
    coord::basic_keeper watcher_keeper{store};
    coord::basic_election watcher{watcher_keeper, "leader"};
    std::optional<coord::result<std::optional<coord::leader_info>>> seen;
    std::thread observer([&] { seen = watcher.observe(std::nullopt, far(), std::chrono::hours{1}); });
    auto lead = election.campaign("B", 1h, far());
    observer.join();
    ASSERT_TRUE(lead) << lead.error().code.message();
    ASSERT_TRUE(seen && *seen) << (seen ? seen->error().message() : "no answer");
    ASSERT_TRUE(seen->value().has_value()) << "observe returned at its deadline: no watch woke it";
    EXPECT_EQ(seen->value()->candidate, "B");
    EXPECT_EQ(seen->value()->term, lead->token());
}

}  // namespace coord::test
