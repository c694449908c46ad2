// SPDX-License-Identifier: Apache-2.0
// tests/conformance/segment_allocator_suite.hpp: the conformance suite every
// segment_allocator model runs, instantiated per model with a factory.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <thread>
#include <vector>

#include "coord/segment.hpp"
#include "support/test_support.hpp"

template <class Factory>
class SegmentAllocatorConformance : public ::testing::Test {
protected:
    coord::manual_clock clock{coord::test::test_epoch()};
    Factory factory;
    std::unique_ptr<typename Factory::store_type> store = factory.make(clock);
};

TYPED_TEST_SUITE_P(SegmentAllocatorConformance);

TYPED_TEST_P(SegmentAllocatorConformance, HandsOutConsecutiveDisjointRangesFromOne) {
    auto& a = *this->store;
    auto r1 = a.segment_allocate("orders", 10);
    ASSERT_TRUE(r1);
    EXPECT_EQ(*r1, (coord::segment_range{1, 11}));
    auto r2 = a.segment_allocate("orders", 5);
    ASSERT_TRUE(r2);
    EXPECT_EQ(*r2, (coord::segment_range{11, 16}));
    auto other = a.segment_allocate("users", 3);
    ASSERT_TRUE(other);
    EXPECT_EQ(*other, (coord::segment_range{1, 4}));
}

TYPED_TEST_P(SegmentAllocatorConformance, RefusesToPassTheLimitAndChangesNothing) {
    auto& a = *this->store;
    EXPECT_EQ(a.segment_allocate("t", coord::segment_id_limit).error(), coord::errc::range_exhausted);
    auto all = a.segment_allocate("t", coord::segment_id_limit - 2);
    ASSERT_TRUE(all);
    EXPECT_EQ(all->end, coord::segment_id_limit - 1);
    EXPECT_EQ(a.segment_allocate("t", 2).error(), coord::errc::range_exhausted);
    auto last = a.segment_allocate("t", 1);
    ASSERT_TRUE(last);
    EXPECT_EQ(last->end, coord::segment_id_limit);
}

TYPED_TEST_P(SegmentAllocatorConformance, AnotherHandleContinuesAboveEverything) {
    auto& a = *this->store;
    ASSERT_TRUE(a.segment_allocate("t", 100));
    auto* other = this->factory.reopen(this->store.get(), this->clock);
    auto r = other->segment_allocate("t", 1);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->begin, 101u);
}

TYPED_TEST_P(SegmentAllocatorConformance, ConcurrentCallsGetDisjointRanges) {
    auto& a = *this->store;
    std::mutex m;
    std::vector<coord::segment_range> got;
    std::vector<std::thread> pool;
    const int per_thread = std::string(TypeParam::name) == "memory" ? 500 : 40;
    for (int t = 0; t < 4; ++t)
        pool.emplace_back([&, t] {
            for (int i = 0; i < per_thread; ++i) {
                auto r = a.segment_allocate("t", static_cast<std::uint64_t>(1 + (i + t) % 7));
                ASSERT_TRUE(r) << r.error().message();
                std::lock_guard lk(m);
                got.push_back(*r);
            }
        });
    for (auto& th : pool) th.join();
    std::sort(got.begin(), got.end(), [](auto& x, auto& y) { return x.begin < y.begin; });
    for (std::size_t i = 1; i < got.size(); ++i) ASSERT_EQ(got[i - 1].end, got[i].begin) << "gap or overlap";
    EXPECT_EQ(got.front().begin, 1u);
}

REGISTER_TYPED_TEST_SUITE_P(SegmentAllocatorConformance, HandsOutConsecutiveDisjointRangesFromOne,
                            RefusesToPassTheLimitAndChangesNothing, AnotherHandleContinuesAboveEverything,
                            ConcurrentCallsGetDisjointRanges);
