// SPDX-License-Identifier: Apache-2.0
// The lease and the fenced resource together: the pause and fence experiments.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "coord/fence.hpp"
#include "coord/lease.hpp"
#include "coord/aliases.hpp"
#include "coord/storage/memory.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using store_t = coord::basic_memory_store<coord::manual_clock>;

// A acquires a lease (token t) and pauses past its term; B acquires (t+1) and
// writes; A wakes and writes with t: refused, B's value stays; A's late
// release leaves B's lease in place.
TEST(PauseExperiment, ExpiredOwnerIsFencedOffAndCannotReleaseTheNewOwner) {
    coord::manual_clock clock{coord::test::test_epoch()};
    store_t store{clock};
    coord::basic_lease_manager leases{store};
    coord::basic_fenced_resource resource{store, "orders"};

    auto a = leases.acquire("orders-writer", "A", 10s);
    ASSERT_TRUE(a);
    clock.advance(15s);  // A is paused (GC, SIGSTOP, a slow disk) past its term

    auto b = leases.acquire("orders-writer", "B", 10s);
    ASSERT_TRUE(b);
    EXPECT_GT(b->token, a->token);
    ASSERT_TRUE(resource.write(b->token, "B"));

    auto late = resource.write(a->token, "A");  // A wakes up and writes
    ASSERT_FALSE(late);
    EXPECT_EQ(late.error(), coord::errc::stale_fence);
    EXPECT_EQ(late.error().highest, b->token);
    EXPECT_EQ(resource.read()->value, "B");

    EXPECT_EQ(leases.release("orders-writer", "A").error(), coord::errc::not_lease_holder);
    EXPECT_EQ(leases.release(*a).error(), coord::errc::not_lease_holder);
    auto holder = leases.holder("orders-writer");
    ASSERT_TRUE(holder && holder->has_value());
    EXPECT_EQ((*holder)->owner, "B");
    EXPECT_TRUE(leases.renew(*b));
}

TEST(FenceExperiment, StaleTokenRefusedSameTokenWritesAgain) {
    coord::memory_store store;
    coord::fenced_resource res{store, "k"};
    EXPECT_TRUE(res.write(42, "B"));
    auto r = res.write(41, "A");
    EXPECT_EQ(r.error(), coord::errc::stale_fence);
    EXPECT_EQ(res.read()->value, "B");
    EXPECT_TRUE(res.write(42, "B2"));
    EXPECT_EQ(res.read()->value, "B2");
    EXPECT_EQ(res.read()->fence, 42u);
    EXPECT_EQ(res.key(), "k");
}

TEST(KeyedFencedResource, EachKeyHasItsOwnFence) {
    coord::memory_store store;
    coord::keyed_fenced_resource res{store};
    EXPECT_TRUE(res.write("a", 5, "a5"));
    EXPECT_TRUE(res.write("b", 1, "b1"));
    EXPECT_EQ(res.write("a", 4, "a4").error(), coord::errc::stale_fence);
    EXPECT_TRUE(res.write("b", 2, 1, "b2"));
    EXPECT_EQ(res.write("b", 2, 1, "b2 again").error(), coord::errc::stale_sequence);
    EXPECT_TRUE(res.update("a", 5, [](std::string& v) { v += "+"; }));
    EXPECT_EQ(res.read("a")->value, "a5+");
    EXPECT_EQ(res.read("b")->value, "b2");
}

TEST(LeaseManager, RefusesBadArguments) {
    coord::memory_store store;
    coord::lease_manager leases{store};
    EXPECT_THROW((void)leases.acquire("", "A", 1s), std::invalid_argument);
    EXPECT_THROW((void)leases.acquire("n", "", 1s), std::invalid_argument);
    EXPECT_THROW((void)leases.acquire("n", "A", 0s), std::invalid_argument);
    EXPECT_THROW((void)leases.acquire("n", "A", -1s), std::invalid_argument);
    EXPECT_THROW((void)leases.acquire("n", "A", std::chrono::hours::max()), std::invalid_argument);
}

TEST(LeaseManager, HeldLeaseSaysWhoAndUntilWhen) {
    coord::manual_clock clock{coord::test::test_epoch()};
    store_t store{clock};
    coord::basic_lease_manager leases{store};
    auto a = leases.acquire("n", "A", 30s);
    ASSERT_TRUE(a);
    auto b = leases.acquire("n", "B", 30s);
    ASSERT_FALSE(b);
    EXPECT_EQ(b.error(), coord::errc::lease_held);
    EXPECT_EQ(b.error().holder, "A");
    EXPECT_EQ(b.error().expires_at, clock.now().time_since_epoch() + 30s);
    clock.advance(20s);
    auto renewed = leases.renew("n", "A");
    ASSERT_TRUE(renewed);
    EXPECT_EQ(renewed->expires_at, clock.now().time_since_epoch() + 30s);
    ASSERT_TRUE(leases.release(*renewed));
    EXPECT_TRUE(leases.acquire("n", "B", 30s));
}

}  // namespace
