// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "coord/clock.hpp"

namespace {

using namespace std::chrono_literals;

TEST(ManualClock, StartsWhereToldAndMovesOnlyWhenTold) {
    coord::manual_clock c{std::chrono::sys_days{std::chrono::year{2026} / 10 / 13}};
    const auto t0 = c.now();
    EXPECT_EQ(coord::unix_millis(t0), 1791849600000);
    EXPECT_EQ(c.now(), t0);
    c.advance(1500ms);
    EXPECT_EQ(c.now() - t0, 1500ms);
    c.set(t0 - 5s);  // backwards
    EXPECT_EQ(c.now(), t0 - 5s);
    c.advance(-1s);
    EXPECT_EQ(c.now(), t0 - 6s);
}

TEST(ManualClock, CopiesShareOneTime) {
    coord::manual_clock a{10s};
    coord::manual_clock b = a;
    a.advance(1s);
    EXPECT_EQ(b.now().time_since_epoch(), 11s);
}

TEST(ManualClock, SleepUntilAdvancesInAdvanceMode) {
    coord::manual_clock c{100ms};
    c.sleep_until(coord::manual_clock::time_point{250ms});
    EXPECT_EQ(c.now().time_since_epoch(), 250ms);
    c.sleep_until(coord::manual_clock::time_point{200ms});  // already past: no change
    EXPECT_EQ(c.now().time_since_epoch(), 250ms);
}

TEST(ManualClock, SleepUntilBlocksUntilTheTestMovesTheClockInBlockMode) {
    coord::manual_clock c{0ms, coord::manual_clock::sleep_mode::block};
    std::atomic<bool> woke{false};
    std::thread sleeper([&] {
        c.sleep_until(coord::manual_clock::time_point{10ms});
        woke = true;
    });
    c.wait_for_sleepers(1);
    EXPECT_FALSE(woke.load());
    c.advance(5ms);
    EXPECT_EQ(c.sleepers(), 1);  // still short of 10 ms
    EXPECT_FALSE(woke.load());
    c.advance(5ms);
    sleeper.join();
    EXPECT_TRUE(woke.load());
    EXPECT_EQ(c.sleepers(), 0);
}

TEST(Clocks, AdaptersModelTheirConcepts) {
    coord::system_clock s;
    coord::steady_clock m;
    EXPECT_GT(coord::unix_millis(s.now()), 1600000000000);  // after 2020
    const auto a = m.now();
    EXPECT_LE(a, m.now());
}

}  // namespace
