// SPDX-License-Identifier: Apache-2.0
// tests/conformance/lease_queue_suite.hpp: the conformance suite every
// lease_queue_store model runs (the waiting acquire): waiters served in
// arrival order with ever larger tokens, woken by a release and by the end
// of the holder's term, and a waiter that gave up or died leaving the line.
// The store's clock is the suites' manual clock (terms end when the test
// says); the waiting itself is real time, bounded by each waiter's deadline.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coord/lease.hpp"
#include "support/test_support.hpp"

template <class Factory>
class LeaseQueueConformance : public ::testing::Test {
protected:
    using steady = std::chrono::steady_clock;
    static constexpr auto ttl = std::chrono::seconds{10};
    coord::manual_clock clock{coord::test::test_epoch()};
    Factory factory;
    std::unique_ptr<typename Factory::store_type> store = factory.make(clock);
    coord::basic_lease_manager<typename Factory::store_type> leases{*store};

    static steady::time_point in(std::chrono::milliseconds d) { return steady::now() + d; }
    // Waits (a bounded spin, no sleep) until `n` waiters are in line.
    void wait_for_waiters(std::size_t n) {
        const auto give_up = in(std::chrono::seconds{20});
        for (;;) {
            auto w = leases.waiters("job");
            ASSERT_TRUE(w) << w.error().message();
            if (w->size() >= n) return;
            ASSERT_LT(steady::now(), give_up) << "only " << w->size() << " of " << n << " waiters queued";
            std::this_thread::yield();
        }
    }
};

TYPED_TEST_SUITE_P(LeaseQueueConformance);

TYPED_TEST_P(LeaseQueueConformance, TenWaitersAreServedInArrivalOrderWithLargerTokens) {
    auto held = this->leases.acquire("job", "holder", this->ttl);
    ASSERT_TRUE(held);
    std::mutex m;
    std::vector<std::string> order;
    std::vector<coord::fence_token> tokens;
    std::vector<std::thread> waiters;
    for (int i = 0; i < 10; ++i) {
        waiters.emplace_back([&, i] {
            const std::string me = "w" + std::to_string(i);
            auto l = this->leases.acquire("job", me, this->ttl, this->in(std::chrono::seconds{60}));
            ASSERT_TRUE(l) << me << ": " << l.error().code.message();
            {
                std::lock_guard lk(m);
                order.push_back(me);
                tokens.push_back(l->token);
            }
            EXPECT_TRUE(this->leases.release(*l));  // hand over to the next in line
        });
        this->wait_for_waiters(static_cast<std::size_t>(i) + 1);  // arrival order is start order
    }
    auto line = this->leases.waiters("job");
    ASSERT_TRUE(line);
    ASSERT_EQ(line->size(), 10u);
    for (std::size_t i = 0; i < 10; ++i) EXPECT_EQ((*line)[i].who, "w" + std::to_string(i));
    ASSERT_TRUE(this->leases.release(*held));
    for (auto& t : waiters) t.join();
    ASSERT_EQ(order.size(), 10u);
    for (std::size_t i = 0; i < 10; ++i) {
        EXPECT_EQ(order[i], "w" + std::to_string(i));
        EXPECT_GT(tokens[i], i == 0 ? held->token : tokens[i - 1]);
    }
    EXPECT_TRUE(this->leases.waiters("job")->empty());
}

TYPED_TEST_P(LeaseQueueConformance, AReleaseReachesTheFirstWaiterWellWithinTheTerm) {
    auto held = this->leases.acquire("job", "holder", this->ttl);
    ASSERT_TRUE(held);
    std::atomic<bool> granted{false};
    typename LeaseQueueConformance<TypeParam>::steady::time_point got{};
    std::thread w([&] {
        auto l = this->leases.acquire("job", "next", this->ttl, this->in(std::chrono::seconds{60}));
        got = std::chrono::steady_clock::now();
        granted = l.has_value();
    });
    this->wait_for_waiters(1);
    const auto released = std::chrono::steady_clock::now();
    ASSERT_TRUE(this->leases.release(*held));
    w.join();
    EXPECT_TRUE(granted.load());
    // The store's clock stands still here: real time from the release to the
    // grant, against a term of 10 s (a hang guard with a meaning: the waiter
    // was woken, not left to its next renewal).
    EXPECT_LT(got - released, std::chrono::milliseconds{500});
}

TYPED_TEST_P(LeaseQueueConformance, AnEndedTermHandsTheLeaseToTheFirstWaiter) {
    auto held = this->leases.acquire("job", "paused-holder", this->ttl);
    ASSERT_TRUE(held);
    coord::result<coord::lease, coord::lease_error> l;
    std::thread w([&] { l = this->leases.acquire("job", "next", this->ttl, this->in(std::chrono::seconds{60})); });
    this->wait_for_waiters(1);
    this->clock.advance(this->ttl);  // the holder never released: its term ends on the store's clock
    w.join();
    ASSERT_TRUE(l) << l.error().code.message();
    EXPECT_EQ(l->owner, "next");
    EXPECT_GT(l->token, held->token);
    // The paused holder's renewal is refused: the term ended and another holds it.
    EXPECT_FALSE(this->leases.renew(*held));
}

TYPED_TEST_P(LeaseQueueConformance, AWaiterThatGivesUpLeavesTheLine) {
    auto held = this->leases.acquire("job", "holder", this->ttl);
    ASSERT_TRUE(held);
    auto gave_up = this->leases.acquire("job", "impatient", this->ttl, this->in(std::chrono::milliseconds{50}));
    ASSERT_FALSE(gave_up);
    EXPECT_EQ(gave_up.error(), coord::errc::lease_held);
    EXPECT_EQ(gave_up.error().holder, "holder");
    EXPECT_TRUE(this->leases.waiters("job")->empty());
    // A deadline already passed is one try: refused while held, granted when free.
    EXPECT_EQ(this->leases.acquire("job", "now", this->ttl, std::chrono::steady_clock::now()).error(), coord::errc::lease_held);
    ASSERT_TRUE(this->leases.release(*held));
    auto now = this->leases.acquire("job", "now", this->ttl, std::chrono::steady_clock::now());
    ASSERT_TRUE(now) << now.error().code.message();
    EXPECT_GT(now->token, held->token);
}

TYPED_TEST_P(LeaseQueueConformance, ADeadWaitersPlaceLapsesAndTheNextIsServed) {
    auto held = this->leases.acquire("job", "holder", this->ttl);
    ASSERT_TRUE(held);
    // A waiter that died in line: its place, never renewed, lapses after 500 ms.
    auto ghost = this->store->lease_enqueue("job", "ghost", std::chrono::milliseconds{500});
    ASSERT_TRUE(ghost);
    coord::result<coord::lease, coord::lease_error> l;
    std::thread w([&] { l = this->leases.acquire("job", "alive", this->ttl, this->in(std::chrono::seconds{60})); });
    this->wait_for_waiters(2);
    ASSERT_TRUE(this->leases.release(*held));
    this->clock.advance(std::chrono::milliseconds{600});  // the ghost's place lapses, alive's (2 s) does not
    w.join();
    ASSERT_TRUE(l) << l.error().code.message();
    EXPECT_EQ(l->owner, "alive");
    // The ghost coming back finds its place gone.
    auto back = this->store->lease_acquire_queued("job", "ghost", this->ttl, *ghost, std::chrono::seconds{2});
    EXPECT_EQ(back.error(), coord::errc::wait_place_lost);
    // Another's ticket is not a place for this owner.
    auto t = this->store->lease_enqueue("job", "owner-a", std::chrono::seconds{2});
    ASSERT_TRUE(t);
    EXPECT_EQ(this->store->lease_acquire_queued("job", "owner-b", this->ttl, *t, std::chrono::seconds{2}).error(),
              coord::errc::wait_place_lost);
}

REGISTER_TYPED_TEST_SUITE_P(LeaseQueueConformance, TenWaitersAreServedInArrivalOrderWithLargerTokens,
                            AReleaseReachesTheFirstWaiterWellWithinTheTerm, AnEndedTermHandsTheLeaseToTheFirstWaiter,
                            AWaiterThatGivesUpLeavesTheLine, ADeadWaitersPlaceLapsesAndTheNextIsServed);
