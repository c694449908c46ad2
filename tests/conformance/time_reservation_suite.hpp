// SPDX-License-Identifier: Apache-2.0
// tests/conformance/time_reservation_suite.hpp: the conformance suite every
// time_reservation_store model runs, instantiated per model with a factory.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "coord/reservation.hpp"
#include "support/test_support.hpp"

template <class Factory>
class TimeReservationConformance : public ::testing::Test {
protected:
    coord::manual_clock clock{coord::test::test_epoch()};
    Factory factory;
    std::unique_ptr<typename Factory::store_type> store = factory.make(clock);
};

TYPED_TEST_SUITE_P(TimeReservationConformance);

TYPED_TEST_P(TimeReservationConformance, ReservedUntilOnlyMovesAhead) {
    auto& s = *this->store;
    EXPECT_EQ(*s.time_reserve("gen/1", 0, 0), 0);  // never reserved: reads 0
    EXPECT_EQ(*s.time_reserve("gen/1", 1'800'000'000'000, 0), 1'800'000'000'000);
    EXPECT_EQ(*s.time_reserve("gen/1", 1'700'000'000'000, 0), 1'800'000'000'000);  // never goes back
    EXPECT_EQ(*s.time_reserve("gen/1", 0, 0), 1'800'000'000'000);
    EXPECT_EQ(*s.time_reserve("gen/2", 0, 0), 0);  // keys are independent
    EXPECT_EQ(*s.time_reserve("gen/1", 253402300799999, 0), 253402300799999);
}

TYPED_TEST_P(TimeReservationConformance, AStaleTokenIsRefusedAndChangesNothing) {
    auto& s = *this->store;
    ASSERT_EQ(*s.time_reserve("gen/7", 1000, 5), 1000);
    auto stale = s.time_reserve("gen/7", 5000, 4);
    ASSERT_FALSE(stale);
    EXPECT_EQ(stale.error(), coord::errc::stale_fence);
    EXPECT_EQ(stale.error().highest, 5u);
    EXPECT_EQ(*s.time_reserve("gen/7", 0, 5), 1000);  // unchanged; the same token reads again
    EXPECT_EQ(*s.time_reserve("gen/7", 2000, 9), 2000);  // a newer holder
    EXPECT_EQ(s.time_reserve("gen/7", 3000, 5).error(), coord::errc::stale_fence);  // the old one is fenced out
    EXPECT_EQ(*s.time_reserve("gen/7", 0, 9), 2000);
}

TYPED_TEST_P(TimeReservationConformance, AnotherHandleSeesTheSameReservation) {
    ASSERT_EQ(*this->store->time_reserve("gen/3", 4242, 2), 4242);
    auto* other = this->factory.reopen(this->store.get(), this->clock);
    EXPECT_EQ(*other->time_reserve("gen/3", 0, 2), 4242);
    EXPECT_EQ(other->time_reserve("gen/3", 0, 1).error(), coord::errc::stale_fence);
}

TYPED_TEST_P(TimeReservationConformance, ConcurrentReservationsKeepTheMaximum) {
    auto& s = *this->store;
    constexpr int threads = 4, per_thread = 50;
    std::atomic<int> below{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            for (int i = 0; i < per_thread; ++i) {
                const std::int64_t want = 1000 + i * threads + t;
                auto r = s.time_reserve("gen/c", want, 1);
                if (!r || *r < want) ++below;
            }
        });
    for (auto& th : pool) th.join();
    EXPECT_EQ(below.load(), 0);
    EXPECT_EQ(*s.time_reserve("gen/c", 0, 1), 1000 + (per_thread - 1) * threads + threads - 1);
}

REGISTER_TYPED_TEST_SUITE_P(TimeReservationConformance, ReservedUntilOnlyMovesAhead,
                            AStaleTokenIsRefusedAndChangesNothing, AnotherHandleSeesTheSameReservation,
                            ConcurrentReservationsKeepTheMaximum);
