// SPDX-License-Identifier: Apache-2.0
// Snowflake IDs: layouts, exhaustion and rollback policies, restarts through
// the file store, the node-id lease, threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "coord/snowflake.hpp"
#include "coord/storage/file.hpp"
#include "coord/storage/memory.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using coord::manual_clock;
using mem_store = coord::basic_memory_store<manual_clock>;
using file_store = coord::basic_file_store<manual_clock>;
template <class Layout = coord::default_layout, class Store = mem_store>
using gen_t = coord::basic_snowflake<Layout, manual_clock, Store>;

coord::snowflake_options opts(std::uint64_t node = 1) {
    coord::snowflake_options o;
    o.node = node;
    return o;
}

TEST(SnowflakeLayout, DefaultIsTwitters) {
    using L = coord::default_layout;
    static_assert(L::time_bits == 41 && L::node_bits == 10 && L::sequence_bits == 12);
    EXPECT_EQ(L::epoch.time_since_epoch().count(), 1288834974657);
    EXPECT_EQ(L::tick, 1ms);
    EXPECT_EQ(coord::format_utc(L::expires_at), "2080-07-10T17:30:30.209Z");
    const auto id = L::compose(123456789, 1023, 4095);
    const auto p = L::decode(id);
    EXPECT_EQ(p.tick, 123456789);
    EXPECT_EQ(p.node, 1023u);
    EXPECT_EQ(p.sequence, 4095u);
    EXPECT_EQ(p.time, L::epoch + 123456789ms);
    EXPECT_LT(L::max_id, std::uint64_t{1} << 63);
}

TEST(SnowflakeLayout, SonyflakeAndJavaScriptSafePresets) {
    using S = coord::sonyflake_layout;
    EXPECT_EQ(S::tick, 10ms);
    EXPECT_EQ(S::max_sequence, 65535u);
    EXPECT_EQ(S::max_node, 255u);
    EXPECT_EQ(coord::format_utc(S::expires_at), "2188-11-16T03:28:58.880Z");
    using J = coord::js_safe_layout;
    EXPECT_LT(J::max_id, std::uint64_t{1} << 53);
    EXPECT_EQ(coord::format_utc(J::expires_at), "2089-09-06T15:47:35.552Z");
}

TEST(SnowflakeLayout, GeneratorsFollowSonyflakeAndJavaScriptSafeLayouts) {
    manual_clock clock{coord::test::test_epoch()};
    mem_store store{clock};
    auto o = opts(200);
    o.when_exhausted = coord::exhaustion_policy::reject;
    gen_t<coord::sonyflake_layout> sony{store, o, clock};
    // A 10 ms tick holds 65,536 IDs: 9 ms later the tick is the same.
    const auto a = *sony.next();
    clock.advance(9ms);
    const auto b = *sony.next();
    EXPECT_EQ(coord::sonyflake_layout::decode(a).tick, coord::sonyflake_layout::decode(b).tick);
    EXPECT_EQ(coord::sonyflake_layout::decode(b).node, 200u);
    EXPECT_EQ(coord::sonyflake_layout::decode(a).time, coord::sonyflake_layout::epoch +
                                                            10ms * coord::sonyflake_layout::decode(a).tick);
    std::vector<std::uint64_t> rest(65534);
    ASSERT_TRUE(sony.next(std::span<std::uint64_t>(rest)));
    EXPECT_EQ(sony.next().error(), coord::errc::sequence_exhausted);
    clock.advance(1ms);  // the next 10 ms tick
    EXPECT_EQ(coord::sonyflake_layout::decode(*sony.next()).tick, coord::sonyflake_layout::decode(a).tick + 1);

    gen_t<coord::js_safe_layout> js{store, opts(15), clock};
    for (int i = 0; i < 1000; ++i) {
        const auto id = *js.next();
        ASSERT_LT(id, std::uint64_t{1} << 53);
        ASSERT_EQ(static_cast<std::uint64_t>(static_cast<double>(id)), id);  // exact as a JavaScript number
    }
}

TEST(SnowflakeLayout, TickEdgesAreExactToTheNanosecond) {
    // A 10 ms tick: its last nanosecond still belongs to it, the next
    // nanosecond starts the next tick, and a step back of one nanosecond
    // across the edge is a rollback.
    using S = coord::sonyflake_layout;
    manual_clock clock{coord::test::test_epoch()};
    mem_store store{clock};
    auto o = opts(3);
    o.when_clock_goes_back = coord::rollback_policy::reject;
    gen_t<S> gen{store, o, clock};
    const auto first = S::decode(*gen.next());
    clock.set(std::chrono::sys_time<std::chrono::nanoseconds>{S::epoch + 10ms * (first.tick + 1)} - 1ns);
    const auto last_ns = S::decode(*gen.next());
    EXPECT_EQ(last_ns.tick, first.tick);
    EXPECT_EQ(last_ns.sequence, first.sequence + 1);
    clock.advance(1ns);
    const auto next_tick = S::decode(*gen.next());
    EXPECT_EQ(next_tick.tick, first.tick + 1);
    EXPECT_EQ(next_tick.sequence, 0u);
    clock.advance(-1ns);
    EXPECT_EQ(gen.next().error(), coord::errc::clock_rollback);
    clock.advance(1ns);
    EXPECT_EQ(S::decode(*gen.next()).sequence, 1u);
}

TEST(SnowflakeLayout, ParsesDecimalStrictly) {
    using L = coord::default_layout;
    EXPECT_EQ(*L::parse("1234567890123"), 1234567890123u);
    EXPECT_EQ(*L::parse(std::to_string(L::max_id)), L::max_id);
    for (auto bad : {"", "-1", "+1", "12a", " 1", "1 ", "0x10", "99999999999999999999", "9223372036854775808"})
        EXPECT_EQ(L::parse(bad).error(), coord::errc::invalid_text) << bad;
    EXPECT_EQ(coord::js_safe_layout::parse(std::to_string(std::uint64_t{1} << 53)).error(), coord::errc::invalid_text);
}

class Snowflake : public ::testing::Test {
protected:
    manual_clock clock{coord::test::test_epoch()};
    mem_store store{clock};
};

TEST_F(Snowflake, FillsOneMillisecondThenRejectsUnderRejectPolicy) {
    auto o = opts(5);
    o.when_exhausted = coord::exhaustion_policy::reject;
    o.when_clock_goes_back = coord::rollback_policy::reject;
    gen_t<> gen{store, o, clock};
    std::vector<std::uint64_t> ids;
    for (int i = 0; i < 4096; ++i) {
        auto id = gen.next();
        ASSERT_TRUE(id) << i << ": " << id.error().message();
        ids.push_back(*id);
    }
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    EXPECT_EQ(std::set<std::uint64_t>(ids.begin(), ids.end()).size(), 4096u);
    const auto t = coord::default_layout::decode(ids.front()).time;
    EXPECT_EQ(t.time_since_epoch().count(), coord::unix_millis(clock.now()));
    for (auto id : ids) {
        EXPECT_EQ(coord::default_layout::decode(id).time, t);
        EXPECT_EQ(coord::default_layout::decode(id).node, 5u);
    }
    EXPECT_EQ(gen.next().error(), coord::errc::sequence_exhausted);
    EXPECT_EQ(gen.stats().sequence_exhausted, 1u);

    clock.advance(-3ms);  // the clock steps back
    EXPECT_EQ(gen.next().error(), coord::errc::clock_rollback);
    EXPECT_EQ(gen.stats().rollbacks_seen, 1u);

    clock.advance(4ms);  // one millisecond past the full one
    auto after = gen.next();
    ASSERT_TRUE(after);
    EXPECT_GT(*after, ids.back());
    EXPECT_EQ(coord::default_layout::decode(*after).time, t + 1ms);
}

TEST_F(Snowflake, WaitPolicyMovesToTheNextTickWhenTheTestClockDoes) {
    manual_clock blocking{coord::test::test_epoch(), manual_clock::sleep_mode::block};
    mem_store s{blocking};
    gen_t<> gen{s, opts(), blocking};
    std::uint64_t last = 0;
    for (int i = 0; i < 4096; ++i) last = *gen.next();
    std::atomic<std::uint64_t> waited{0};
    std::thread t([&] { waited = *gen.next(); });
    blocking.wait_for_sleepers(1);
    EXPECT_EQ(waited.load(), 0u);  // still waiting for the clock
    blocking.advance(1ms);
    t.join();
    EXPECT_GT(waited.load(), last);
    EXPECT_EQ(coord::default_layout::decode(waited.load()).time,
              coord::default_layout::decode(last).time + 1ms);
}

TEST_F(Snowflake, WaitRollbackPolicyWaitsWithinTheBoundAndRejectsPastIt) {
    auto o = opts();
    o.when_clock_goes_back = coord::rollback_policy::wait;
    o.rollback_bound = 10ms;
    gen_t<> gen{store, o, clock};
    const auto first = *gen.next();
    clock.advance(-8ms);
    auto waited = gen.next();  // the manual clock's sleep moves time to the last tick
    ASSERT_TRUE(waited);
    EXPECT_GT(*waited, first);
    EXPECT_EQ(coord::default_layout::decode(*waited).tick, coord::default_layout::decode(first).tick);
    clock.advance(-11ms);
    EXPECT_EQ(gen.next().error(), coord::errc::clock_rollback);
    EXPECT_EQ(gen.stats().rollbacks_seen, 2u);
}

TEST_F(Snowflake, BorrowPolicyIssuesAheadUpToTheBoundAndSaysHowMuch) {
    auto o = opts();
    o.when_clock_goes_back = coord::rollback_policy::borrow;
    o.rollback_bound = 5ms;
    std::vector<coord::snowflake_event> events;
    o.on_event = [&](const coord::snowflake_event& e) { events.push_back(e); };
    o.when_exhausted = coord::exhaustion_policy::reject;
    gen_t<> gen{store, o, clock};
    auto prev = *gen.next();
    clock.advance(-2ms);
    // 4095 more on the last tick, then 4096 on each of the following ticks
    // while they stay within 5 ms of the clock.
    std::uint64_t issued = 0;
    for (;;) {
        auto id = gen.next();
        if (!id) {
            EXPECT_EQ(id.error(), coord::errc::clock_rollback);
            break;
        }
        ASSERT_GT(*id, prev);
        prev = *id;
        ++issued;
    }
    EXPECT_EQ(issued, 4095u + 3u * 4096u);  // last tick (2 ms ahead) plus ticks 3, 4 and 5 ms ahead
    EXPECT_EQ(gen.borrowed(), 5ms);
    EXPECT_EQ(gen.stats().borrowed_ids, issued);
    EXPECT_TRUE(std::any_of(events.begin(), events.end(), [](auto& e) {
        return e.kind == coord::snowflake_event::time_borrowed && e.amount == 5ms;
    }));
    clock.advance(10ms);
    EXPECT_TRUE(gen.next());
    EXPECT_EQ(gen.borrowed(), 0ms);
}

TEST_F(Snowflake, ThreadsDrawDistinctIdsEachIncreasing) {
    for (int threads : {2, 4, 8}) {
        mem_store s{clock};
        gen_t<> gen{s, opts(static_cast<std::uint64_t>(threads)), clock};
        const int per_thread = 1'000'000 / threads;
        std::vector<std::vector<std::uint64_t>> got(static_cast<std::size_t>(threads));
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t)
            pool.emplace_back([&, t] {
                auto& mine = got[static_cast<std::size_t>(t)];
                mine.reserve(static_cast<std::size_t>(per_thread));
                for (int i = 0; i < per_thread; ++i) {
                    auto id = gen.next();
                    ASSERT_TRUE(id);
                    mine.push_back(*id);
                }
            });
        for (auto& th : pool) th.join();
        std::vector<std::uint64_t> all;
        for (auto& mine : got) {
            EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()) &&
                        std::adjacent_find(mine.begin(), mine.end()) == mine.end())
                << threads << " threads: a thread's IDs did not increase";
            all.insert(all.end(), mine.begin(), mine.end());
        }
        std::sort(all.begin(), all.end());
        EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << threads << " threads: duplicate";
        EXPECT_EQ(all.size(), static_cast<std::size_t>(per_thread * threads));
    }
}

TEST_F(Snowflake, BatchFillsIncreasingIdsAcrossTicks) {
    gen_t<> gen{store, opts(), clock};
    std::vector<std::uint64_t> ids(10000);
    ASSERT_TRUE(gen.next(std::span<std::uint64_t>(ids)));
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
    EXPECT_EQ(coord::default_layout::decode(ids.back()).tick - coord::default_layout::decode(ids.front()).tick, 2);
    EXPECT_GT(*gen.next(), ids.back());
}

TEST_F(Snowflake, RandomSequenceStartSpreadsTheFirstSequence) {
    auto o = opts();
    o.random_sequence_start = true;
    gen_t<> gen{store, o, clock};
    std::set<std::uint64_t> firsts;
    for (int i = 0; i < 20; ++i) {
        const auto seq = coord::default_layout::decode(*gen.next()).sequence;
        EXPECT_LT(seq, 2048u);
        firsts.insert(seq);
        clock.advance(1ms);
    }
    EXPECT_GT(firsts.size(), 1u);
}

TEST_F(Snowflake, RefusesBadConfiguration) {
    auto bad_node = opts(1024);
    EXPECT_THROW((gen_t<>{store, bad_node, clock}), std::invalid_argument);
    auto bad_window = opts();
    bad_window.reserve_ahead = 0ms;
    EXPECT_THROW((gen_t<>{store, bad_window, clock}), std::invalid_argument);
    auto bad_bound = opts();
    bad_bound.rollback_bound = -1ms;
    EXPECT_THROW((gen_t<>{store, bad_bound, clock}), std::invalid_argument);
    auto bad_name = opts();
    bad_name.name = "";
    EXPECT_THROW((gen_t<>{store, bad_name, clock}), std::invalid_argument);
}

// A layout with a 2-bit timestamp: 4 ticks from its epoch, then it ends.
using tiny_layout = coord::snowflake_layout<2, 1, 2, 1, 1791882000000>;  // epoch 2026-10-13T09:00:00Z

TEST(SnowflakeExpiry, TimestampOverflowIsAnErrorNeverAWrap) {
    manual_clock clock{std::chrono::milliseconds{1791882000000}};
    mem_store store{clock};
    gen_t<tiny_layout> gen{store, opts(), clock};
    std::vector<std::uint64_t> ids;
    for (;;) {
        auto id = gen.next();
        if (!id) {
            EXPECT_EQ(id.error(), coord::errc::time_exhausted);
            break;
        }
        ids.push_back(*id);
        ASSERT_LT(ids.size(), 100u);
    }
    EXPECT_EQ(ids.size(), 4u * 4u);  // 4 ticks x 4 sequence values
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    // A generator whose layout has run out refuses to start.
    EXPECT_THROW((gen_t<tiny_layout>{store, opts(), clock}), std::invalid_argument);
}

TEST_F(Snowflake, NodeLeaseRefusesASecondLiveGeneratorWithTheSameNode) {
    auto a = std::make_unique<gen_t<>>(store, opts(3), clock);
    ASSERT_TRUE(a->next());
    gen_t<> b{store, opts(3), clock};
    EXPECT_EQ(b.next().error(), coord::errc::lease_held);
    gen_t<> other_node{store, opts(4), clock};
    EXPECT_TRUE(other_node.next());
    const auto last_a = *a->next();
    a.reset();  // releases the node lease
    auto from_b = b.next();
    ASSERT_TRUE(from_b) << from_b.error().message();
    EXPECT_GT(*from_b, last_a);
}

TEST_F(Snowflake, RenewsTheNodeLeaseAsTimePasses) {
    auto o = opts();
    o.node_lease_ttl = 3s;
    gen_t<> gen{store, o, clock};
    std::uint64_t prev = 0;
    for (int i = 0; i < 30; ++i) {
        auto id = gen.next();
        ASSERT_TRUE(id) << i << ": " << id.error().message();
        ASSERT_GT(*id, prev);
        prev = *id;
        clock.advance(1100ms);
    }
    EXPECT_GE(gen.stats().lease_renewals, 10u);
    EXPECT_FALSE(gen.stats().lease_lost);
}

// A generator paused past its node lease must not issue when it wakes,
// whoever took the node id meanwhile: it stops with lease_lost.
TEST_F(Snowflake, PausedPastItsLeaseStopsInsteadOfRiskingDuplicates) {
    auto o = opts(9);
    o.node_lease_ttl = 10s;
    gen_t<> a{store, o, clock};
    std::set<std::uint64_t> seen;
    for (int i = 0; i < 100; ++i) seen.insert(*a.next());
    clock.advance(11s);  // A is paused past its term
    gen_t<> b{store, o, clock};
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(seen.insert(*b.next()).second);
    EXPECT_EQ(a.next().error(), coord::errc::lease_lost);
    EXPECT_TRUE(a.stats().lease_lost);
    clock.advance(-11s);  // even if its clock is set back
    EXPECT_EQ(a.next().error(), coord::errc::lease_lost);
}

// A generator that issued nothing for longer than its node lease's term
// keeps working: the next call takes the node id again (nobody else holds
// it) and issues above everything before.
TEST_F(Snowflake, IdleForAnHourThenIssuesAgain) {
    auto o = opts(5);
    o.node_lease_ttl = 10s;
    gen_t<> a{store, o, clock};
    std::uint64_t last = 0;
    for (int i = 0; i < 50; ++i) last = *a.next();
    clock.advance(1h);
    auto id = a.next();
    ASSERT_TRUE(id) << id.error().message();
    EXPECT_GT(*id, last);
    EXPECT_FALSE(a.stats().lease_lost);
    EXPECT_EQ(a.stats().lease_reacquisitions, 1u);
    // It holds the node id again: a second generator with it is refused.
    gen_t<> b{store, o, clock};
    EXPECT_EQ(b.next().error(), coord::errc::lease_held);
    // And it keeps renewing from there on.
    for (int i = 0; i < 20; ++i) {
        clock.advance(2s);
        ASSERT_TRUE(a.next());
    }
    EXPECT_EQ(a.stats().lease_reacquisitions, 1u);
}

// Idle while another generator takes the node id, issues and lets it go:
// while the other holds it the idle one is refused (lease_lost); once it is
// free the idle one takes it again and issues above every ID of the other,
// even with its clock set back.
TEST_F(Snowflake, IdleWhileAnotherTakesAndReleasesTheNodeId) {
    auto o = opts(6);
    o.node_lease_ttl = 10s;
    o.reserve_ahead = 2s;
    gen_t<> a{store, o, clock};
    std::set<std::uint64_t> seen;
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(seen.insert(*a.next()).second);
    clock.advance(11s);
    std::uint64_t b_max = 0;
    {
        gen_t<> b{store, o, clock};
        for (int i = 0; i < 100; ++i) {
            const auto id = *b.next();
            ASSERT_TRUE(seen.insert(id).second);
            b_max = std::max(b_max, id);
        }
        EXPECT_EQ(a.next().error(), coord::errc::lease_lost);
        EXPECT_TRUE(a.stats().lease_lost);
    }  // b releases the node id; its reservation runs 2 s ahead of the clock
    clock.advance(1s);  // past a's retry interval (1/20 of the term)
    clock.advance(-500ms);
    auto id = a.next();
    ASSERT_TRUE(id) << id.error().message();
    EXPECT_GT(*id, b_max);
    EXPECT_TRUE(seen.insert(*id).second);
    EXPECT_FALSE(a.stats().lease_lost);
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(seen.insert(*a.next()).second);
}

// Opting out of the node lease is explicit: the wrapped store keeps the
// reservation (a restart starts above it) but holds no node id.
TEST_F(Snowflake, WithoutNodeLeaseIsAnExplicitOptOut) {
    coord::without_node_lease<mem_store> unleased{store};
    gen_t<coord::default_layout, coord::without_node_lease<mem_store>> a{unleased, opts(8), clock};
    gen_t<coord::default_layout, coord::without_node_lease<mem_store>> b{unleased, opts(8), clock};
    ASSERT_TRUE(a.next());
    ASSERT_TRUE(b.next());  // nothing refuses the second generator: that is what opting out means
    gen_t<> leased{store, opts(8), clock};
    EXPECT_TRUE(leased.next());  // the leased one is not blocked by the unleased ones either
}

// Even when the stale generator's lease check passes (its own clock says it
// still holds the lease), the store refuses its reservation extension
// because a newer lease token fenced the reservation.
TEST_F(Snowflake, StaleGeneratorCannotExtendIntoTheNewHoldersRange) {
    manual_clock a_clock{coord::test::test_epoch()};  // A's clock, separate from the store's
    auto o = opts(2);
    o.node_lease_ttl = 10s;
    o.reserve_ahead = 1s;
    gen_t<> a{store, o, a_clock};
    ASSERT_TRUE(a.next());
    clock.advance(10s);  // the store's clock: A's lease has expired there
    gen_t<> b{store, o, clock};
    const auto from_b = b.next();
    ASSERT_TRUE(from_b);
    a_clock.advance(2s);  // A thinks its lease is fine; its window needs extending
    EXPECT_EQ(a.next().error(), coord::errc::lease_lost);
}

// 1,000 restarts through the file store, each with the clock stepped back by
// up to 10 s: every ID of every run is above every ID of the runs before it.
TEST(SnowflakeRestart, ThousandRestartsWithClockStepsBackNeverReissue) {
    coord::test::scratch_dir dir;
    manual_clock clock{coord::test::test_epoch()};
    std::mt19937 rng(2024);
    std::uint64_t last = 0;
    std::size_t total = 0;
    for (int run = 0; run < 1000; ++run) {
        file_store store{dir / "state", clock};
        auto o = opts(17);
        o.when_clock_goes_back = coord::rollback_policy::wait;
        o.rollback_bound = 20s;  // the manual clock's sleep moves it forward
        o.node_lease_ttl = 60s;  // longer than those waits
        gen_t<coord::default_layout, file_store> gen{store, o, clock};
        const int n = std::uniform_int_distribution<int>(1, 30)(rng);
        for (int i = 0; i < n; ++i) {
            auto id = gen.next();
            ASSERT_TRUE(id) << "run " << run << ": " << id.error().message();
            ASSERT_GT(*id, last) << "run " << run << " reissued at or below an earlier ID";
            last = *id;
            ++total;
            clock.advance(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 3000)(rng)));
        }
        clock.advance(-std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 10'000)(rng)));
    }
    EXPECT_GT(total, 10'000u);
}

}  // namespace
