// SPDX-License-Identifier: Apache-2.0
// tests/conformance/fence_store_suite.hpp: the conformance suite every
// fence_store model runs. A model's test file instantiates it with a factory:
//
//   INSTANTIATE_TYPED_TEST_SUITE_P(Memory, FenceStoreConformance, coord::test::memory_factory);
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "coord/fence.hpp"
#include "support/test_support.hpp"

template <class Factory>
class FenceStoreConformance : public ::testing::Test {
protected:
    coord::manual_clock clock{coord::test::test_epoch()};
    Factory factory;
    std::unique_ptr<typename Factory::store_type> store = factory.make(clock);
};

TYPED_TEST_SUITE_P(FenceStoreConformance);

TYPED_TEST_P(FenceStoreConformance, UnwrittenKeyHasFenceZero) {
    auto r = this->store->fence_read("nothing");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->fence, 0u);
    EXPECT_FALSE(r->written);
    EXPECT_EQ(r->value, "");
}

TYPED_TEST_P(FenceStoreConformance, RefusesTokenBelowHighestAndKeepsValue) {
    auto& s = *this->store;
    ASSERT_TRUE(s.fence_write("k", 42, "B"));
    auto stale = s.fence_write("k", 41, "A");
    ASSERT_FALSE(stale);
    EXPECT_EQ(stale.error(), coord::errc::stale_fence);
    EXPECT_EQ(stale.error().highest, 42u);
    auto r = s.fence_read("k");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->value, "B");
    EXPECT_EQ(r->fence, 42u);
    EXPECT_TRUE(r->written);
    ASSERT_TRUE(s.fence_write("k", 42, "B2"));
    EXPECT_EQ(s.fence_read("k")->value, "B2");
    ASSERT_TRUE(s.fence_write("k", 43, "C"));
    EXPECT_EQ(s.fence_read("k")->fence, 43u);
}

TYPED_TEST_P(FenceStoreConformance, KeysHaveIndependentFences) {
    auto& s = *this->store;
    ASSERT_TRUE(s.fence_write("a", 10, "a10"));
    ASSERT_TRUE(s.fence_write("b", 3, "b3"));
    EXPECT_EQ(s.fence_write("a", 9, "x").error(), coord::errc::stale_fence);
    EXPECT_EQ(s.fence_read("a")->value, "a10");
    EXPECT_EQ(s.fence_read("b")->value, "b3");
}

TYPED_TEST_P(FenceStoreConformance, OrderedWritesRefuseReorderedRequestsOfOneHolder) {
    auto& s = *this->store;
    ASSERT_TRUE(s.fence_write("k", 5, 1, "a"));
    EXPECT_EQ(s.fence_write("k", 5, 1, "dup").error(), coord::errc::stale_sequence);
    EXPECT_EQ(s.fence_write("k", 5, 0, "late").error(), coord::errc::stale_sequence);
    EXPECT_EQ(s.fence_read("k")->value, "a");
    ASSERT_TRUE(s.fence_write("k", 5, 2, "b"));
    // A newer holder's sequence starts afresh.
    ASSERT_TRUE(s.fence_write("k", 6, 0, "c"));
    EXPECT_EQ(s.fence_write("k", 5, 3, "old").error(), coord::errc::stale_fence);
    EXPECT_EQ(s.fence_read("k")->value, "c");
    EXPECT_EQ(s.fence_read("k")->fence, 6u);
}

TYPED_TEST_P(FenceStoreConformance, UpdateRunsOnlyWhenTokenPasses) {
    auto& s = *this->store;
    ASSERT_TRUE(s.fence_update("n", 7, [](std::string& v) { v += "x"; }));
    ASSERT_TRUE(s.fence_update("n", 7, [](std::string& v) { v += "y"; }));
    bool ran = false;
    auto r = s.fence_update("n", 6, [&](std::string& v) {
        ran = true;
        v += "z";
    });
    EXPECT_EQ(r.error(), coord::errc::stale_fence);
    EXPECT_FALSE(ran);
    EXPECT_EQ(s.fence_read("n")->value, "xy");
}

TYPED_TEST_P(FenceStoreConformance, AnotherHandleSeesTheSameFence) {
    auto& s = *this->store;
    ASSERT_TRUE(s.fence_write("k", 9, "v9"));
    auto* other = this->factory.reopen(this->store.get(), this->clock);
    EXPECT_EQ(other->fence_write("k", 8, "v8").error(), coord::errc::stale_fence);
    ASSERT_TRUE(other->fence_write("k", 10, "v10"));
    EXPECT_EQ(s.fence_write("k", 9, "again").error(), coord::errc::stale_fence);
    EXPECT_EQ(s.fence_read("k")->value, "v10");
}

// Threads write random tokens. Each accepted write appends its token to the
// value inside the atomic step, so the value is the history of accepted
// tokens in the order the store accepted them: it must never go down, and
// the final fence must be the largest token tried.
TYPED_TEST_P(FenceStoreConformance, ConcurrentRandomTokensNeverGoBack) {
    auto& s = *this->store;
    constexpr int threads = 4;
    const int per_thread = std::string(TypeParam::name) == "memory" ? 2000 : 60;
    std::vector<std::thread> pool;
    std::mutex m;
    coord::fence_token max_tried = 0;
    std::vector<std::pair<coord::fence_token, coord::fence_token>> refusals;  // (token, highest)
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            std::mt19937_64 rng(static_cast<unsigned>(t) * 7919u + 1u);
            std::uniform_int_distribution<coord::fence_token> dist(1, 1000);
            for (int i = 0; i < per_thread; ++i) {
                const auto token = dist(rng);
                auto r = s.fence_update("hist", token, [&](std::string& v) { v += std::to_string(token) + ","; });
                std::lock_guard lk(m);
                max_tried = std::max(max_tried, token);
                if (!r) {
                    ASSERT_EQ(r.error(), coord::errc::stale_fence);
                    refusals.emplace_back(token, r.error().highest);
                }
            }
        });
    }
    for (auto& th : pool) th.join();
    auto final = s.fence_read("hist");
    ASSERT_TRUE(final);
    EXPECT_EQ(final->fence, max_tried);
    std::vector<coord::fence_token> history;
    std::size_t pos = 0;
    while (pos < final->value.size()) {
        const auto comma = final->value.find(',', pos);
        history.push_back(std::stoull(final->value.substr(pos, comma - pos)));
        pos = comma + 1;
    }
    EXPECT_EQ(history.size() + refusals.size(), static_cast<std::size_t>(threads * per_thread));
    for (std::size_t i = 1; i < history.size(); ++i)
        ASSERT_LE(history[i - 1], history[i]) << "accepted write " << i << " went below an earlier one";
    ASSERT_FALSE(history.empty());
    EXPECT_EQ(history.back(), max_tried);
    for (auto [token, highest] : refusals) EXPECT_LT(token, highest);
}

// One limit on names on every store: a key of max_name_size bytes works,
// one byte more is bad input, refused before the store is asked.
TYPED_TEST_P(FenceStoreConformance, TheLongestKeyWorksAndALongerOneIsBadInput) {
    coord::basic_keyed_fenced_resource res{*this->store};
    const std::string longest(coord::max_name_size, 'k');
    ASSERT_TRUE(res.write(longest, 7, "v"));
    EXPECT_EQ(res.read(longest)->value, "v");
    EXPECT_THROW((void)res.write(longest + "k", 8, "v"), std::invalid_argument);
}

REGISTER_TYPED_TEST_SUITE_P(FenceStoreConformance, TheLongestKeyWorksAndALongerOneIsBadInput, UnwrittenKeyHasFenceZero, RefusesTokenBelowHighestAndKeepsValue,
                            KeysHaveIndependentFences, OrderedWritesRefuseReorderedRequestsOfOneHolder,
                            UpdateRunsOnlyWhenTokenPasses, AnotherHandleSeesTheSameFence,
                            ConcurrentRandomTokensNeverGoBack);
