// SPDX-License-Identifier: Apache-2.0
// Segment IDs: disjoint ranges across generators and processes, prefetch
// that never makes next() wait, allocator failure and recovery, adaptive step.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <atomic>
#include <climits>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "coord/segment.hpp"
#include "coord/storage/file.hpp"
#include "coord/aliases.hpp"
#include "coord/storage/memory.hpp"
#include "support/child_process.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;

/// An allocator in front of a memory store that the test can make fail or
/// hold: calls numbered `hold_from` and later wait until the gate opens.
class test_allocator {
public:
    coord::result<coord::segment_range> segment_allocate(std::string_view tag, std::uint64_t step) {
        std::unique_lock lk(m_);
        const int me = ++calls_;
        cv_.notify_all();
        cv_.wait(lk, [&] { return open_ || me < hold_from_; });
        if (fail_) return coord::unexpected(std::make_error_code(std::errc::connection_refused));
        lk.unlock();
        return inner_.segment_allocate(tag, step);
    }
    void hold_from(int call) {
        std::lock_guard lk(m_);
        hold_from_ = call;
        open_ = false;
    }
    void open() {
        std::lock_guard lk(m_);
        open_ = true;
        cv_.notify_all();
    }
    void fail(bool f) {
        std::lock_guard lk(m_);
        fail_ = f;
    }
    void wait_for_calls(int n) {
        std::unique_lock lk(m_);
        cv_.wait(lk, [&] { return calls_ >= n; });
    }
    int calls() {
        std::lock_guard lk(m_);
        return calls_;
    }

private:
    coord::memory_store inner_;
    std::mutex m_;
    std::condition_variable cv_;
    int calls_ = 0;
    int hold_from_ = INT_MAX;
    bool open_ = true;
    bool fail_ = false;
};
static_assert(coord::segment_allocator<test_allocator>);

coord::segment_options fixed_step(std::uint64_t step) {
    coord::segment_options o;
    o.initial_step = o.min_step = o.max_step = step;
    return o;
}

TEST(Segment, ServesIncreasingUniqueIdsAcrossRanges) {
    coord::memory_store store;
    coord::segment_generator gen{store, fixed_step(100)};
    auto orders = gen.tag("orders");
    std::vector<std::uint64_t> ids;
    while (ids.size() < 1000) {
        auto id = orders.next();
        if (!id) {
            // This loop can drain 90 IDs before the background fetch returns:
            // the generator says so at once rather than wait.
            ASSERT_EQ(id.error(), coord::errc::allocator_unavailable);
            gen.quiesce();
            continue;
        }
        ids.push_back(*id);
    }
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
    EXPECT_EQ(ids.front(), 1u);
    EXPECT_EQ(ids.back(), 1000u);  // one generator, ranges back to back: no holes here
    auto users = gen.next("users");  // tags are independent
    ASSERT_TRUE(users);
    EXPECT_EQ(*users, 1u);
    EXPECT_THROW((void)gen.next(""), std::invalid_argument);
}

TEST(Segment, RefusesBadOptions) {
    coord::memory_store store;
    auto o = fixed_step(10);
    o.prefetch_at = 1.0;
    EXPECT_THROW((coord::segment_generator{store, o}), std::invalid_argument);
    o = fixed_step(10);
    o.max_step = 5;
    EXPECT_THROW((coord::segment_generator{store, o}), std::invalid_argument);
    o = fixed_step(10);
    o.min_step = 0;
    EXPECT_THROW((coord::segment_generator{store, o}), std::invalid_argument);
}

TEST(Segment, TwoGeneratorsInThreadsShareOneAllocatorWithoutDuplicates) {
    coord::memory_store store;
    coord::segment_generator a{store, fixed_step(50)}, b{store, fixed_step(70)};
    std::vector<std::uint64_t> from_a, from_b;
    auto draw = [](coord::segment_generator& g, std::vector<std::uint64_t>& out) {
        auto h = g.tag("t");
        for (int i = 0; i < 20000; ++i) {
            auto id = h.next();
            if (!id) {  // the other generator raced us to the allocator: wait for our prefetch
                ASSERT_EQ(id.error(), coord::errc::allocator_unavailable);
                g.quiesce();
                --i;
                continue;
            }
            out.push_back(*id);
        }
    };
    std::thread ta([&] { draw(a, from_a); }), tb([&] { draw(b, from_b); });
    ta.join();
    tb.join();
    std::vector<std::uint64_t> all(from_a);
    all.insert(all.end(), from_b.begin(), from_b.end());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
    EXPECT_EQ(all.size(), 40000u);
}

TEST(Segment, ManyThreadsOnOneGeneratorGetUniqueIds) {
    coord::memory_store store;
    coord::segment_generator gen{store, fixed_step(1000)};
    auto h = gen.tag("t");
    std::vector<std::vector<std::uint64_t>> got(4);
    std::vector<std::thread> pool;
    for (int t = 0; t < 4; ++t)
        pool.emplace_back([&, t] {
            while (got[static_cast<std::size_t>(t)].size() < 50000) {
                auto id = h.next();
                if (id) got[static_cast<std::size_t>(t)].push_back(*id);
                else gen.quiesce();  // caught up with the prefetch
            }
        });
    for (auto& th : pool) th.join();
    std::vector<std::uint64_t> all;
    for (auto& g : got) all.insert(all.end(), g.begin(), g.end());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
}

TEST(Segment, TwoProcessesShareOneFileAllocatorWithoutDuplicates) {
    coord::test::scratch_dir dir;
    const auto path = dir / "state";
    { coord::file_store init{path}; }
    std::vector<std::unique_ptr<coord::test::child_process>> kids;
    for (int p = 0; p < 2; ++p)
        kids.push_back(std::make_unique<coord::test::child_process>([&](int out) {
            coord::file_store store{path};
            coord::basic_segment_generator<coord::file_store> gen{store, fixed_step(64)};
            auto h = gen.tag("t");
            for (int i = 0; i < 5000;) {
                auto id = h.next();
                if (!id) {
                    gen.quiesce();
                    continue;
                }
                if (::write(out, &*id, sizeof(std::uint64_t)) != sizeof(std::uint64_t)) return 2;
                ++i;
            }
            return 0;
        }));
    std::vector<std::uint64_t> all;
    for (auto& kid : kids) {
        std::uint64_t v;
        while (kid->read(v)) all.push_back(v);
        const int status = kid->wait();
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    EXPECT_EQ(all.size(), 10000u);
    std::sort(all.begin(), all.end());
    EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
}

// The next range is requested when 10% of the current one is used; while the
// allocator sits on that request, next() keeps serving the current range and
// never waits. Only when both are used up does it say so, at once.
TEST(Segment, ThreadsArrivingAtAFreshTagWaitForItsFirstRange) {
    test_allocator alloc;
    coord::basic_segment_generator<test_allocator> gen{alloc, fixed_step(1000)};
    auto h = gen.tag("t");
    alloc.hold_from(1);  // the first range is slow to come
    std::vector<std::thread> pool;
    std::atomic<int> ok{0};
    for (int t = 0; t < 4; ++t)
        pool.emplace_back([&] {
            if (h.next()) ++ok;  // nothing buffered yet: every caller waits for the first fetch
        });
    alloc.wait_for_calls(1);
    alloc.open();
    for (auto& th : pool) th.join();
    EXPECT_EQ(ok.load(), 4);
    EXPECT_EQ(alloc.calls(), 1);  // one first fetch, not four
}

TEST(Segment, SlowAllocatorIsAskedEarlyAndNeverWaitedOn) {
    test_allocator alloc;
    coord::basic_segment_generator<test_allocator> gen{alloc, fixed_step(100)};
    auto h = gen.tag("t");
    alloc.hold_from(2);  // the first range comes at once, the prefetch hangs
    for (int i = 0; i < 10; ++i) ASSERT_EQ(*h.next(), static_cast<std::uint64_t>(i + 1));
    alloc.wait_for_calls(2);  // the prefetch went out after 10% of the range
    for (int i = 10; i < 100; ++i) ASSERT_EQ(*h.next(), static_cast<std::uint64_t>(i + 1));  // no wait
    EXPECT_EQ(h.next().error(), coord::errc::allocator_unavailable);  // both used up: prompt refusal
    EXPECT_EQ(alloc.calls(), 2);
    alloc.open();
    gen.quiesce();
    auto id = h.next();
    ASSERT_TRUE(id);
    EXPECT_EQ(*id, 101u);
}

TEST(Segment, AllocatorFailureMidStreamThenRecovery) {
    test_allocator alloc;
    coord::basic_segment_generator<test_allocator> gen{alloc, fixed_step(20)};
    auto h = gen.tag("t");
    ASSERT_EQ(*h.next(), 1u);
    alloc.fail(true);
    std::uint64_t last = 1;
    for (int i = 1; i < 20; ++i) last = *h.next();  // the current range is still served
    EXPECT_EQ(h.next().error(), coord::errc::allocator_unavailable);
    gen.quiesce();
    EXPECT_EQ(h.next().error(), coord::errc::allocator_unavailable);  // retried, still down
    gen.quiesce();
    const auto st = gen.stats("t");
    EXPECT_GE(st.failures, 2u);
    EXPECT_EQ(st.last_error, std::errc::connection_refused);
    alloc.fail(false);  // the allocator is back
    auto r = h.next();
    if (!r) {
        EXPECT_EQ(r.error(), coord::errc::allocator_unavailable);
        gen.quiesce();
        r = h.next();
    }
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_GT(*r, last);
}

TEST(Segment, AdaptiveStepGrowsUnderABurstAndShrinksWhenIdle) {
    coord::manual_clock clock{coord::test::test_epoch()};
    coord::memory_store store;
    coord::segment_options o;
    o.initial_step = 1000;
    o.min_step = 100;
    o.max_step = 10000;
    o.target_duration = 15min;
    coord::basic_segment_generator<coord::memory_store, coord::manual_clock> gen{store, o, clock};
    auto h = gen.tag("t");
    // A burst: 100 IDs (10% of the first range) with no time passing.
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(h.next());
    gen.quiesce();
    auto st = gen.stats("t");
    EXPECT_EQ(st.step, 10000u);
    ASSERT_TRUE(st.next);
    EXPECT_EQ(st.next->size(), 10000u);
    // Use up the first range; the 10,000-ID range becomes current.
    for (int i = 100; i < 1000; ++i) ASSERT_TRUE(h.next());
    ASSERT_TRUE(h.next());
    EXPECT_EQ(gen.stats("t").current.size(), 10000u);
    // Idle: 10% of it over an hour is 1,000 IDs an hour; a 15-minute range is 250.
    clock.advance(1h);
    for (int i = 1; i < 1000; ++i) ASSERT_TRUE(h.next());
    gen.quiesce();
    st = gen.stats("t");
    EXPECT_EQ(st.step, 250u);
    ASSERT_TRUE(st.next);
    EXPECT_EQ(st.next->size(), 250u);
}

TEST(Segment, RestartLeavesAHoleNeverADuplicate) {
    coord::memory_store store;
    std::uint64_t last = 0;
    for (int run = 0; run < 5; ++run) {
        coord::segment_generator gen{store, fixed_step(100)};
        auto id = gen.next("t");
        ASSERT_TRUE(id);
        EXPECT_GT(*id, last);
        last = *id;
    }
    EXPECT_GE(last, 401u);  // each run's unused rest (and its prefetch) is a hole
}

// A process allocating from the file allocator is killed with SIGKILL, 100
// times; every range it was handed (and reported) is disjoint from all others.
TEST(SegmentFile, SigkillWhileAllocatingNeverHandsARangeOutTwice) {
    coord::test::scratch_dir dir;
    const auto path = dir / "state";
    std::mt19937 rng(99);
    std::vector<coord::segment_range> acked;
    for (int round = 0; round < 100; ++round) {
        coord::test::child_process child([&](int out) {
            coord::file_store store{path};
            for (std::uint64_t i = 0; i < 100000; ++i) {
                auto r = store.segment_allocate("t", 1 + i % 13);
                if (!r) return 2;
                if (::write(out, &*r, sizeof *r) != sizeof *r) return 3;
            }
            return 0;
        });
        coord::segment_range r;
        const int before_kill = std::uniform_int_distribution<int>(1, 5)(rng);
        for (int i = 0; i < before_kill && child.read(r); ++i) acked.push_back(r);
        std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 400)(rng)));
        child.kill(SIGKILL);
        ASSERT_TRUE(WIFSIGNALED(child.wait())) << "round " << round;
        while (child.read(r)) acked.push_back(r);
    }
    std::sort(acked.begin(), acked.end(), [](auto& a, auto& b) { return a.begin < b.begin; });
    for (std::size_t i = 1; i < acked.size(); ++i) ASSERT_LE(acked[i - 1].end, acked[i].begin) << "overlap";
    coord::file_store store{path};
    auto after = store.segment_allocate("t", 1);
    ASSERT_TRUE(after);
    EXPECT_GE(after->begin, acked.back().end);
}

}  // namespace
