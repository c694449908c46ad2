// SPDX-License-Identifier: Apache-2.0
// The job-slot ledger: slot identity, one effect under concurrency, a worker
// killed between claim and complete, effects that throw.
#include <gtest/gtest.h>

#include <limits>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "coord/detail/sha256.hpp"
#include "coord/job_ledger.hpp"
#include "coord/storage/file.hpp"
#include "coord/aliases.hpp"
#include "coord/storage/memory.hpp"
#include "support/child_process.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using coord::slot;

TEST(Slot, CanonicalTextAndParsing) {
    auto s = slot::parse("billing@2026-10-13T09:00Z");
    ASSERT_TRUE(s);
    EXPECT_EQ(s->to_string(), "billing@2026-10-13T09:00:00Z");
    EXPECT_EQ(s->job(), "billing");
    EXPECT_EQ(coord::format_utc(s->scheduled()), "2026-10-13T09:00:00.000Z");
    EXPECT_EQ(*slot::parse("billing@2026-10-13T09:00:00Z"), *s);
    EXPECT_EQ(slot::parse("reports/daily@2024-02-29T23:59:59.250Z")->to_string(),
              "reports/daily@2024-02-29T23:59:59.250Z");
    EXPECT_EQ(slot::parse("a@b@2026-10-13T09:00Z").error(), coord::errc::invalid_text);  // '@' in the job id
    EXPECT_EQ(slot::parse("billing@2026-10-13T09:00Z", 3)->schedule_version(), 3u);
}

TEST(Slot, RefusesBadText) {
    for (const char* bad : {"", "billing", "@2026-10-13T09:00Z", "bill ing@2026-10-13T09:00Z",
                            "billing@2026-10-13", "billing@2026-10-13T09:00", "billing@2026-10-13T09:00+01:00",
                            "billing@2026-02-30T09:00Z", "billing@2025-02-29T09:00Z", "billing@2026-10-13T24:00Z",
                            "billing@2026-10-13T09:60Z", "billing@2026-10-13T09:00:60Z", "billing@2026-10-13T09:00:00.5Z",
                            "billing@2026-10-13 09:00Z", "billing@2026-10-13T09:00Zjunk", "billing@1969-12-31T23:59Z",
                            "billing@2026-1-13T09:00Z"})
        EXPECT_EQ(slot::parse(bad).error(), coord::errc::invalid_text) << bad;
    EXPECT_THROW(slot("", slot::time_point{}), std::invalid_argument);
    EXPECT_THROW(slot("a b", slot::time_point{}), std::invalid_argument);
}

TEST(Sha256, Fips180Vectors) {
    EXPECT_EQ(coord::detail::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(coord::detail::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(coord::detail::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(coord::detail::sha256_hex(std::string(1000000, 'a')),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

template <class Store>
void twenty_threads_one_effect(Store& store) {
    coord::basic_job_ledger<Store> ledger{store, {}};
    const auto s = *slot::parse("billing@2026-10-13T09:00Z");
    std::atomic<int> effects{0}, applied{0}, replayed{0}, in_progress{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < 20; ++t)
        pool.emplace_back([&, t] {
            auto r = ledger.run(s, "worker" + std::to_string(t), "", [&](const coord::ledger_context&) {
                ++effects;
                return std::string("ok");
            });
            ASSERT_TRUE(r);
            if (r->kind == coord::run_outcome::applied) ++applied;
            if (r->kind == coord::run_outcome::replayed) ++replayed;
            if (r->kind == coord::run_outcome::in_progress) ++in_progress;
        });
    for (auto& th : pool) th.join();
    EXPECT_EQ(effects.load(), 1);
    EXPECT_EQ(applied.load(), 1);
    EXPECT_EQ(applied + replayed + in_progress, 20);
}

TEST(JobLedger, TwentyThreadsOnOneSlotGiveOneEffectMemory) {
    coord::manual_clock clock{coord::test::test_epoch()};
    coord::basic_memory_store<coord::manual_clock> store{clock};
    twenty_threads_one_effect(store);
}

TEST(JobLedger, TwentyThreadsOnOneSlotGiveOneEffectFile) {
    coord::test::scratch_dir dir;
    coord::manual_clock clock{coord::test::test_epoch()};
    coord::basic_file_store<coord::manual_clock> store{dir / "state", clock};
    twenty_threads_one_effect(store);
}

TEST(JobLedger, ThrowingEffectIsAFailedAttemptAndTheSlotRunsAgain) {
    coord::manual_clock clock{coord::test::test_epoch()};
    coord::basic_memory_store<coord::manual_clock> store{clock};
    coord::basic_job_ledger<decltype(store)> ledger{store, {}};
    const auto s = *slot::parse("billing@2026-10-13T09:00Z");
    EXPECT_THROW((void)ledger.run(s, "A", "",
                                  [](const coord::ledger_context&) -> std::string { throw std::runtime_error("boom"); }),
                 std::runtime_error);
    auto rec = *ledger.read(s);
    EXPECT_EQ(rec->fail_reason, "boom");
    auto again = ledger.run(s, "B", "", [](const coord::ledger_context& ctx) { return std::to_string(ctx.attempt); });
    EXPECT_EQ(again->kind, coord::run_outcome::applied);
    EXPECT_EQ(again->result, "2");
}

// A worker killed with SIGKILL between claim and complete: after its lease
// expires another worker takes over, and the slot ends with one completion.
TEST(JobLedger, WorkerKilledBetweenClaimAndCompleteIsTakenOver) {
    coord::test::scratch_dir dir;
    const auto path = dir / "state";
    coord::manual_clock clock{coord::test::test_epoch()};
    const auto s = *slot::parse("billing@2026-10-13T09:00Z");
    coord::ledger_options o;
    o.lease_ttl = 30s;
    coord::test::child_process child([&](int out) {
        coord::basic_file_store<coord::manual_clock> store{path, clock};
        coord::basic_job_ledger<decltype(store)> ledger{store, o};
        auto c = ledger.claim(s, "doomed");
        const char ok = (c && c->kind == coord::claim_outcome::granted) ? 'y' : 'n';
        if (::write(out, &ok, 1) != 1) return 2;
        for (;;) ::pause();  // "running the effect" until killed
    });
    char claimed = 0;
    ASSERT_TRUE(child.read(claimed));
    ASSERT_EQ(claimed, 'y');
    child.kill(SIGKILL);
    child.wait();

    coord::basic_file_store<coord::manual_clock> store{path, clock};
    coord::basic_job_ledger<decltype(store)> ledger{store, o};
    int effects = 0;
    auto effect = [&](const coord::ledger_context&) {
        ++effects;
        return std::string("done by rescuer");
    };
    auto early = ledger.run(s, "rescuer", "", effect);
    EXPECT_EQ(early->kind, coord::run_outcome::in_progress);
    EXPECT_EQ(early->holder, "doomed");
    clock.advance(31s);  // the dead worker's lease ends
    auto taken = ledger.run(s, "rescuer", "", effect);
    ASSERT_TRUE(taken);
    EXPECT_EQ(taken->kind, coord::run_outcome::applied);
    EXPECT_EQ(taken->fence, 2u);
    EXPECT_EQ(ledger.run(s, "third", "", effect)->kind, coord::run_outcome::replayed);
    EXPECT_EQ(effects, 1);
    auto rec = *ledger.read(s);
    EXPECT_EQ(rec->attempt, 2u);
    EXPECT_EQ(rec->result, "done by rescuer");
}

TEST(JobLedger, FileStoreWritesOnlyWhenAClaimIsGranted) {
    coord::test::scratch_dir dir;
    coord::manual_clock clock{coord::test::test_epoch()};
    coord::basic_file_store<coord::manual_clock> store{dir / "state", clock};
    coord::basic_job_ledger<decltype(store)> ledger{store, {}};
    const auto s = *slot::parse("billing@2026-10-13T09:00Z");
    ASSERT_EQ(ledger.run(s, "A", "", [](const coord::ledger_context&) { return std::string("ok"); })->kind,
              coord::run_outcome::applied);
    const auto before = std::filesystem::last_write_time(dir / "state");
    const auto size = std::filesystem::file_size(dir / "state");
    auto inode = [&] {
        struct stat st{};
        ::stat((dir / "state").c_str(), &st);
        return st.st_ino;
    };
    const auto ino = inode();
    for (int i = 0; i < 5; ++i) EXPECT_EQ(ledger.claim(s, "B")->kind, coord::claim_outcome::replayed);
    // Every write replaces the file (a new inode); a replay replaced nothing.
    EXPECT_EQ(inode(), ino);
    EXPECT_EQ(std::filesystem::last_write_time(dir / "state"), before);
    EXPECT_EQ(std::filesystem::file_size(dir / "state"), size);
}

// Every time value the slot parser accepts is computed without overflow
// (the UBSan build aborts on a signed overflow): 1970, the end of the int64
// nanosecond range (2262-04-11T23:47:16.854Z), and 9999-12-31. A future slot
// is never `expired`, however far ahead.
TEST(JobLedger, EdgesOfTimeComputeWithoutOverflow) {
    for (const char* text : {"edge@1970-01-01T00:00Z", "edge@2262-04-11T23:47:16.854Z", "edge@2262-04-11T23:47:16.855Z",
                             "edge@2262-04-12T00:00Z", "edge@9999-12-31T23:59:59.999Z"}) {
        auto s = slot::parse(text);
        ASSERT_TRUE(s) << text;
        EXPECT_EQ(slot::parse(s->to_string())->scheduled(), s->scheduled()) << text;
    }
    EXPECT_FALSE(slot::parse("edge@1969-12-31T23:59:59.999Z"));
    EXPECT_FALSE(slot::parse("edge@10000-01-01T00:00Z"));
    EXPECT_THROW(slot("edge", slot::max_time + 1ms), std::invalid_argument);
    EXPECT_EQ(slot("edge", slot::max_time).to_string(), "edge@9999-12-31T23:59:59.999Z");

    coord::ledger_options o;
    o.replay_window = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::years{100});
    o.retention = o.replay_window;
    for (const auto store_time : {coord::manual_clock::duration{0}, coord::test::test_epoch(),
                                  coord::manual_clock::duration{std::numeric_limits<std::int64_t>::max()}}) {
        coord::manual_clock clock{store_time};
        coord::basic_memory_store<coord::manual_clock> store{clock};
        coord::basic_job_ledger<decltype(store)> ledger{store, o};
        for (const char* text : {"edge@2262-04-11T23:47:16.854Z", "edge@2262-04-11T23:47:16.855Z", "edge@5000-01-01T00:00Z",
                                 "edge@9999-12-31T23:59:59.999Z"}) {
            const auto s = *slot::parse(text);
            auto r = ledger.run(s, "w", "", [](const coord::ledger_context&) { return std::string("ok"); });
            ASSERT_TRUE(r) << text;
            ASSERT_EQ(r->kind, coord::run_outcome::applied) << text;  // not in the past at any store time here
            auto rec = *ledger.read(s);
            ASSERT_TRUE(rec);
            EXPECT_GE(rec->retain_until.count(), rec->completed.count()) << text;
            EXPECT_GE(rec->lease_until.count(), rec->started.count()) << text;
            EXPECT_EQ(*ledger.prune(), 0u) << text;  // retention runs to the year 2262 at least
        }
        // 1970: older than the window unless the store's clock is near 1970 too.
        const auto epoch = *slot::parse("edge@1970-01-01T00:00Z");
        auto c = ledger.claim(epoch, "w");
        ASSERT_TRUE(c);
        EXPECT_EQ(c->kind, store_time > std::chrono::duration_cast<coord::manual_clock::duration>(o.replay_window)
                               ? coord::claim_outcome::expired
                               : coord::claim_outcome::granted);
    }
}

TEST(JobLedger, RefusesBadOptions) {
    coord::memory_store store;
    coord::ledger_options o;
    o.retention = o.replay_window - 1ms;
    EXPECT_THROW((coord::job_ledger{store, o}), std::invalid_argument);
    o = {};
    o.lease_ttl = 0ms;
    EXPECT_THROW((coord::job_ledger{store, o}), std::invalid_argument);
}

}  // namespace
