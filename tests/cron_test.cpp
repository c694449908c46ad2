// SPDX-License-Identifier: Apache-2.0
// The cron runner on a manual clock, through its public API: several
// instances on one store run each slot once; a paused instance loses its
// slot, stops its job and records nothing (its late fenced write refused);
// catch-up, missed, each overlap policy, retries, shutdown, a clock set back,
// and daylight-saving gaps and folds through the runner. Jobs are fakes the
// test ends by hand. (Runner processes on real stores:
// tests/examples/coordctl_cron_test.sh.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "coord/cron.hpp"
#ifdef COORD_STORE_HEADER_INCLUDED
#error "coord/cron.hpp includes a store: a primitive includes none (docs/internals/architecture.md)"
#endif
#include "coord/fence.hpp"
#include "coord/storage/file.hpp"
#include "coord/storage/memory.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using coord::manual_clock;
using store_t = coord::basic_memory_store<manual_clock>;

// A job the test ends: exit(code), or it ends by itself when signalled.
struct fake_job {
    std::string slot;
    coord::fence_token fence = 0;
    std::uint32_t attempt = 0;
    std::string worker;
    std::optional<int> exit;
    int terms = 0, kills = 0;
    bool dies_on_term = true;
};

// Starts fake jobs; every job any launcher started is listed in `jobs`.
struct fake_launcher {
    std::vector<std::shared_ptr<fake_job>>* jobs;
    bool fail_to_start = false;
    struct handle {
        std::shared_ptr<fake_job> j;
        std::optional<int> poll() { return j->exit; }
        void terminate() {
            ++j->terms;
            if (j->dies_on_term) j->exit = -15;
        }
        void kill() {
            ++j->kills;
            j->exit = -9;
        }
    };
    handle start(const coord::cron_context& c) {
        if (fail_to_start) throw std::runtime_error("no such command");
        auto j = std::make_shared<fake_job>();
        j->slot = c.which.to_string();
        j->fence = c.fence;
        j->attempt = c.attempt;
        j->worker = std::string(c.worker);
        jobs->push_back(j);
        return handle{j};
    }
};

using runner_t = coord::basic_cron_runner<store_t, fake_launcher, manual_clock, manual_clock>;

struct world {
    manual_clock clock{std::chrono::sys_seconds{std::chrono::seconds{1'780'000'000}}};  // 2026-05-28T20:26:40Z
    store_t store{clock};
    std::vector<std::shared_ptr<fake_job>> jobs;
    std::vector<coord::cron_event> events;
    std::vector<std::unique_ptr<fake_launcher>> launchers;

    coord::cron_options options(const std::string& worker) {
        coord::cron_options o;
        o.worker = worker;
        o.lease_ttl = 3s;
        o.heartbeat = 1s;
        o.start_grace = 5s;
        o.stop_grace = 2s;
        o.on_event = [this](const coord::cron_event& e) { events.push_back(e); };
        return o;
    }
    std::unique_ptr<runner_t> runner(const coord::schedule& s, coord::cron_options o) {
        launchers.push_back(std::make_unique<fake_launcher>(fake_launcher{&jobs}));
        return std::make_unique<runner_t>(store, s, *launchers.back(), std::move(o), clock, clock);
    }
    std::vector<std::shared_ptr<fake_job>> jobs_of(const std::string& slot) const {
        std::vector<std::shared_ptr<fake_job>> out;
        for (auto& j : jobs)
            if (j->slot == slot) out.push_back(j);
        return out;
    }
    std::shared_ptr<fake_job> running() const {
        for (auto& j : jobs)
            if (!j->exit) return j;
        return nullptr;
    }
    coord::cron_slot_status status(const coord::schedule& s, const std::string& slot_text) {
        auto h = coord::cron_history(store, s, std::chrono::floor<std::chrono::seconds>(now()), 200);
        EXPECT_TRUE(h);
        for (auto& x : *h)
            if (x.slot == slot_text) return x;
        return {};
    }
    std::chrono::sys_time<std::chrono::nanoseconds> now() const {
        return std::chrono::sys_time<std::chrono::nanoseconds>{clock.now().time_since_epoch()};
    }
    int count(coord::cron_event::kind_t k) const {
        int n = 0;
        for (auto& e : events) n += e.kind == k;
        return n;
    }
};

coord::schedule every_minute(const std::string& job = "report") {
    return *coord::schedule::make(job, "0 * * * * *", "UTC");
}

std::string slot_at(const std::string& job, std::chrono::sys_seconds t) {
    return coord::slot(job, coord::slot::time_point{t}).to_string();
}

std::chrono::sys_seconds next_minute(const world& w) {
    return std::chrono::ceil<std::chrono::minutes>(std::chrono::floor<std::chrono::seconds>(w.now()) + 1s);
}

// The job starts with `r`'s first tick; then the clock moves to the first
// slot and `r` ticks again (it claims and starts the slot). Returns its time.
std::chrono::sys_seconds to_first_slot(world& w, runner_t& r) {
    r.tick();
    const auto first = next_minute(w);
    w.clock.set(first);
    r.tick();
    return first;
}

// Three instances tick over ten minutes: each slot started once, recorded
// done with its worker; every instance saw it.
TEST(CronRunner, ThreeInstancesRunEachSlotOnce) {
    world w;
    auto s = every_minute();
    std::vector<std::unique_ptr<runner_t>> rs;
    for (const char* n : {"a", "b", "c"}) rs.push_back(w.runner(s, w.options(n)));
    for (auto& r : rs) r->tick();  // the job's first instance starts it: no slot before now
    const auto first = next_minute(w);
    for (int m = 0; m < 10; ++m) {
        w.clock.set(first + std::chrono::minutes{m} + 100ms);
        for (int round = 0; round < 2; ++round)
            for (std::size_t i = 0; i < rs.size(); ++i) rs[(i + static_cast<std::size_t>(m)) % rs.size()]->tick();
        ASSERT_EQ(w.jobs.size(), static_cast<std::size_t>(m + 1));
        auto& j = w.jobs.back();
        EXPECT_EQ(j->slot, slot_at("report", first + std::chrono::minutes{m}));
        EXPECT_EQ(j->attempt, 1u);
        for (int k = 0; k < 10; ++k) {  // the job runs 10 s, renewed
            w.clock.advance(1s);
            for (auto& r : rs) r->tick();
        }
        ASSERT_EQ(w.jobs.size(), static_cast<std::size_t>(m + 1));
        j->exit = 0;
        for (auto& r : rs) r->tick();
        const auto st = w.status(s, j->slot);
        EXPECT_EQ(st.state, coord::cron_slot_status::done);
        EXPECT_EQ(st.worker, j->worker);
        EXPECT_EQ(st.exit, "0");
    }
    EXPECT_EQ(w.count(coord::cron_event::finished), 10);
    // The slot before the first instance started is not the job's.
    EXPECT_EQ(w.status(s, slot_at("report", first - 1min)).state, coord::cron_slot_status::none);
}

// The pause experiment through the runner: A's instance stops ticking past
// its lease; B takes the slot over (a larger fence) and writes; A wakes, its
// job's late write is refused by the fenced resource, A learns it lost,
// stops its job and records nothing; the slot is B's.
TEST(CronRunner, AnInstancePausedPastItsLeaseLosesTheSlotAndItsLateWriteIsRefused) {
    world w;
    auto s = every_minute();
    auto a = w.runner(s, w.options("a"));
    auto b = w.runner(s, w.options("b"));
    to_first_slot(w, *a);
    ASSERT_EQ(w.jobs.size(), 1u);
    auto ja = w.jobs[0];
    b->tick();  // in progress: B waits
    ASSERT_EQ(w.jobs.size(), 1u);
    w.clock.advance(4s);  // A paused: no heartbeat for longer than the 3 s lease
    b->tick();
    ASSERT_EQ(w.jobs.size(), 2u);
    auto jb = w.jobs[1];
    EXPECT_EQ(jb->slot, ja->slot);
    EXPECT_GT(jb->fence, ja->fence);
    EXPECT_EQ(jb->attempt, 2u);
    coord::basic_keyed_fenced_resource res{w.store};
    ASSERT_TRUE(res.write(jb->slot, jb->fence, "B's effect"));
    auto late = res.write(ja->slot, ja->fence, "A's late effect");
    ASSERT_FALSE(late);
    EXPECT_EQ(late.error().code, coord::errc::stale_fence);
    a->tick();  // wakes: its heartbeat is refused
    EXPECT_EQ(ja->terms, 1);
    EXPECT_EQ(w.count(coord::cron_event::lost), 1);
    a->tick();
    EXPECT_EQ(a->running(), 0u);
    jb->exit = 0;
    b->tick();
    const auto st = w.status(s, jb->slot);
    EXPECT_EQ(st.state, coord::cron_slot_status::done);
    EXPECT_EQ(st.worker, "b");
    EXPECT_EQ(st.attempt, 2u);
    EXPECT_EQ(res.read(jb->slot)->value, "B's effect");
}

// A job that ignores SIGTERM is killed after the stop grace.
TEST(CronRunner, ALostJobThatIgnoresTerminateIsKilledAfterTheGrace) {
    world w;
    auto s = every_minute();
    auto a = w.runner(s, w.options("a"));
    auto b = w.runner(s, w.options("b"));
    to_first_slot(w, *a);
    auto ja = w.jobs.at(0);
    ja->dies_on_term = false;
    w.clock.advance(4s);
    b->tick();
    a->tick();
    EXPECT_EQ(ja->terms, 1);
    EXPECT_EQ(ja->kills, 0);
    w.clock.advance(1s);
    a->tick();
    EXPECT_EQ(ja->kills, 0);
    w.clock.advance(1s);  // the 2 s grace is over
    a->tick();
    EXPECT_EQ(ja->kills, 1);
    a->tick();
    EXPECT_EQ(a->running(), 0u);
}

// Downtime of ten minutes with a three-minute catch-up: the older slots are
// recorded missed, the three within the window run once each, oldest first,
// one at a time under forbid.
TEST(CronRunner, CatchUpRunsTheWindowOldestFirstAndRecordsOlderSlotsMissed) {
    world w;
    auto s = every_minute();
    auto o = w.options("a");
    o.catch_up = 150s;
    {
        auto r = w.runner(s, o);
        r->tick();  // the job starts here
    }
    const auto first = next_minute(w);
    w.clock.set(first + 9min + 30s);  // slots first .. first+9min were due while no instance ran
    auto r = w.runner(s, o);
    r->tick();
    for (int m = 0; m < 7; ++m)
        EXPECT_EQ(w.status(s, slot_at("report", first + std::chrono::minutes{m})).state, coord::cron_slot_status::missed)
            << m;
    EXPECT_EQ(w.count(coord::cron_event::missed), 7);
    std::vector<std::string> order;
    for (int k = 0; k < 3; ++k) {
        ASSERT_EQ(w.jobs.size(), static_cast<std::size_t>(k + 1)) << "one at a time";
        order.push_back(w.jobs.back()->slot);
        w.clock.advance(1s);
        w.jobs.back()->exit = 0;
        r->tick();
    }
    EXPECT_EQ(order, (std::vector<std::string>{slot_at("report", first + 7min), slot_at("report", first + 8min),
                                               slot_at("report", first + 9min)}));
    r->tick();
    EXPECT_EQ(w.jobs.size(), 3u);
}

// forbid: the slot due while the previous run goes on is recorded skipped.
TEST(CronRunner, ForbidSkipsASlotWhileThePreviousRunGoesOn) {
    world w;
    auto s = every_minute();
    auto r = w.runner(s, w.options("a"));
    const auto first = to_first_slot(w, *r);
    ASSERT_EQ(w.jobs.size(), 1u);
    for (int i = 0; i < 60; ++i) {  // a long job, renewed
        w.clock.advance(1s);
        r->tick();
    }
    EXPECT_EQ(w.jobs.size(), 1u);
    const auto st = w.status(s, slot_at("report", first + 1min));
    EXPECT_EQ(st.state, coord::cron_slot_status::skipped);
    EXPECT_EQ(w.count(coord::cron_event::skipped), 1);
    w.jobs[0]->exit = 0;
    r->tick();
    EXPECT_EQ(w.status(s, slot_at("report", first)).state, coord::cron_slot_status::done);
    w.clock.set(first + 2min);
    r->tick();
    EXPECT_EQ(w.jobs.size(), 2u);
}

// replace: the running slot is revoked (its fence goes stale, its job is
// stopped, it records nothing) and the new slot starts.
TEST(CronRunner, ReplaceRevokesTheRunningSlotAndStartsTheNewOne) {
    world w;
    auto s = every_minute();
    auto o = w.options("a");
    o.overlap = coord::overlap_policy::replace;
    auto a = w.runner(s, o);
    o.worker = "b";
    auto b = w.runner(s, o);
    const auto first = to_first_slot(w, *a);
    auto old_job = w.jobs.at(0);
    for (int i = 0; i < 60; ++i) {
        w.clock.advance(1s);
        if (i == 59) b->tick();  // B sees the new slot first and replaces A's
        a->tick();
    }
    ASSERT_EQ(w.jobs.size(), 2u);
    auto new_job = w.jobs[1];
    EXPECT_EQ(new_job->slot, slot_at("report", first + 1min));
    EXPECT_EQ(new_job->worker, "b");
    coord::basic_keyed_fenced_resource res{w.store};
    EXPECT_FALSE(a->running() == 0);
    a->tick();
    w.clock.advance(1s);
    a->tick();  // its heartbeat is refused: the job is stopped
    EXPECT_GE(old_job->terms, 1);
    a->tick();
    EXPECT_EQ(a->running(), 0u);
    EXPECT_EQ(w.status(s, old_job->slot).state, coord::cron_slot_status::replaced);
    EXPECT_EQ(w.count(coord::cron_event::replaced), 1);
    new_job->exit = 0;
    b->tick();
    EXPECT_EQ(w.status(s, new_job->slot).state, coord::cron_slot_status::done);
}

// allow: both runs go on side by side.
TEST(CronRunner, AllowRunsOverlappingSlotsSideBySide) {
    world w;
    auto s = every_minute();
    auto o = w.options("a");
    o.overlap = coord::overlap_policy::allow;
    auto r = w.runner(s, o);
    to_first_slot(w, *r);
    for (int i = 0; i < 61; ++i) {
        w.clock.advance(1s);
        r->tick();
    }
    ASSERT_EQ(w.jobs.size(), 2u);
    EXPECT_FALSE(w.jobs[0]->exit);
    EXPECT_FALSE(w.jobs[1]->exit);
    EXPECT_EQ(r->running(), 2u);
}

// A non-zero exit is a failed attempt, claimed again within the window up
// to max_attempts; the exit status is recorded.
TEST(CronRunner, AFailedJobIsRetriedUpToMaxAttemptsAndItsExitStatusRecorded) {
    world w;
    auto s = every_minute();
    auto o = w.options("a");
    o.max_attempts = 3;
    o.catch_up = 30s;
    auto r = w.runner(s, o);
    r->tick();
    const auto first = next_minute(w);
    w.clock.set(first);
    for (int k = 1; k <= 3; ++k) {
        r->tick();
        ASSERT_EQ(w.jobs.size(), static_cast<std::size_t>(k));
        EXPECT_EQ(w.jobs.back()->attempt, static_cast<std::uint32_t>(k));
        w.clock.advance(1s);
        w.jobs.back()->exit = 4;
        r->tick();
    }
    r->tick();
    EXPECT_EQ(w.jobs.size(), 3u);
    const auto st = w.status(s, slot_at("report", first));
    EXPECT_EQ(st.state, coord::cron_slot_status::failed);
    EXPECT_EQ(st.exit, "4");
    EXPECT_EQ(st.attempt, 3u);
}

// A failed slot past its window is not retried and stays failed.
TEST(CronRunner, AFailedSlotPastItsWindowStaysFailed) {
    world w;
    auto s = every_minute();
    auto r = w.runner(s, w.options("a"));  // window: the 5 s start grace
    const auto first = to_first_slot(w, *r);
    w.clock.advance(6s);
    w.jobs.at(0)->exit = 2;
    r->tick();
    r->tick();
    EXPECT_EQ(w.jobs.size(), 1u);
    const auto st = w.status(s, slot_at("report", first));
    EXPECT_EQ(st.state, coord::cron_slot_status::failed);
    EXPECT_EQ(st.exit, "2");
}

// A job that cannot start is a failed attempt, never a silent skip.
TEST(CronRunner, AJobThatCannotStartIsRecordedAsFailed) {
    world w;
    auto s = every_minute();
    auto o = w.options("a");
    o.max_attempts = 1;
    auto r = w.runner(s, o);
    w.launchers.back()->fail_to_start = true;
    const auto first = to_first_slot(w, *r);
    const auto st = w.status(s, slot_at("report", first));
    EXPECT_EQ(st.state, coord::cron_slot_status::failed);
    EXPECT_NE(st.detail.find("no such command"), std::string::npos) << st.detail;
}

// Shutdown: no new claims; running jobs are asked to stop, their attempt is
// recorded as failed, and another instance runs the slot within its window.
TEST(CronRunner, ShutdownStopsClaimingAndAnotherInstanceRerunsTheStoppedSlot) {
    world w;
    auto s = every_minute();
    auto o = w.options("a");
    o.catch_up = 30s;
    auto a = w.runner(s, o);
    auto ob = w.options("b");
    ob.catch_up = 30s;
    auto b = w.runner(s, ob);
    const auto first = to_first_slot(w, *a);
    auto ja = w.jobs.at(0);
    a->stop_claiming();
    a->stop_all();
    EXPECT_EQ(ja->terms, 1);
    a->tick();
    EXPECT_EQ(a->running(), 0u);
    EXPECT_EQ(w.count(coord::cron_event::stopping), 1);
    w.clock.set(first + 10s);
    a->tick();
    EXPECT_EQ(w.jobs.size(), 1u) << "a stopped instance claims nothing";
    b->tick();
    auto js = w.jobs_of(slot_at("report", first));
    ASSERT_EQ(js.size(), 2u);
    EXPECT_EQ(js[1]->worker, "b");
    EXPECT_EQ(js[1]->attempt, 2u);
}

// run_until with a stop flag already set: no claims, returns.
TEST(CronRunner, RunUntilReturnsWhenStopped) {
    world w;
    auto s = every_minute();
    auto r = w.runner(s, w.options("a"));
    std::atomic<bool> stop{true};
    r->run_until(stop);
    EXPECT_TRUE(w.jobs.empty());
    auto r2 = w.runner(s, w.options("b"));
    std::atomic<bool> never{false};
    w.clock.set(next_minute(w) - 1s);
    r2->run_until(never, w.clock.now() + 3min);  // the manual clock advances as it sleeps
    EXPECT_GE(w.jobs.size(), 1u);
    EXPECT_EQ(r2->running(), 0u);
}

// The wall clock set back an hour: no slot runs twice.
TEST(CronRunner, AClockSetBackRunsNoSlotAgain) {
    world w;
    auto s = every_minute();
    auto r = w.runner(s, w.options("a"));
    r->tick();
    const auto first = next_minute(w);
    for (int m = 0; m < 3; ++m) {
        w.clock.set(first + std::chrono::minutes{m});
        r->tick();
        w.jobs.back()->exit = 0;
        r->tick();
    }
    ASSERT_EQ(w.jobs.size(), 3u);
    w.clock.set(first - 1h);
    for (int m = 0; m < 64; ++m) {
        w.clock.advance(1min);
        r->tick();
        if (auto j = w.running()) j->exit = 0;
        r->tick();
    }
    std::map<std::string, int> runs;
    for (auto& j : w.jobs) ++runs[j->slot];
    for (auto& [slot, n] : runs) EXPECT_EQ(n, 1) << slot;
}

// Daylight saving through the runner, in America/New_York: 02:30 does not
// exist on 2026-03-08 (it runs at 03:00 EDT, once); 01:30 occurs twice on
// 2026-11-01 (fold both: each occurrence runs once, an hour apart).
TEST(CronRunner, DaylightSavingGapAndFoldThroughTheRunner) {
    using namespace std::chrono;
    for (const bool gap : {true, false}) {
        world w;
        coord::schedule_options so;
        so.fold = coord::fold_policy::both;
        auto s = *coord::schedule::make("dst", gap ? "0 30 2 * * *" : "0 30 1 * * *", "America/New_York", so);
        const sys_seconds night = gap ? sys_days{2026y / March / 8} + 4h : sys_days{2026y / November / 1} + 4h;
        w.clock.set(night);  // 23:00 or midnight local, the evening before
        auto r = w.runner(s, w.options("a"));
        r->tick();
        for (int i = 0; i < 6 * 60; ++i) {  // six hours, a minute at a time
            w.clock.advance(1min);
            r->tick();
            if (auto j = w.running()) j->exit = 0;
            r->tick();
        }
        std::vector<std::string> ran;
        for (auto& j : w.jobs) ran.push_back(j->slot);
        if (gap) {
            EXPECT_EQ(ran, (std::vector<std::string>{"dst@2026-03-08T07:00:00Z"}));
        } else {
            EXPECT_EQ(ran, (std::vector<std::string>{"dst@2026-11-01T05:30:00Z", "dst@2026-11-01T06:30:00Z"}));
        }
    }
}

// A runner whose clock is an hour ahead of the store's: the store refuses
// late starts, not early ones, so the slot starts early, and the runner says
// so in its log.
TEST(CronRunner, AClockAheadOfTheStoresIsLogged) {
    world w;
    auto s = every_minute();
    manual_clock ahead{std::chrono::sys_time<std::chrono::nanoseconds>{w.clock.now().time_since_epoch()} + 1h};
    fake_launcher l{&w.jobs};
    runner_t r{w.store, s, l, w.options("a"), ahead, ahead};
    r.tick();
    ahead.advance(61s);
    r.tick();
    ASSERT_EQ(w.jobs.size(), 1u);
    bool said = false;
    for (auto& e : w.events) said = said || (e.kind == coord::cron_event::error && e.detail.find("ahead of the store") != std::string::npos);
    EXPECT_TRUE(said);
}

// Records past the record window (8 days) are pruned by the runners.
TEST(CronRunner, RunnersPruneRecordsPastTheRecordWindow) {
    world w;
    auto s = *coord::schedule::make("daily", "0 0 0 * * *", "UTC");
    auto r = w.runner(s, w.options("a"));
    r->tick();
    const auto first = std::chrono::ceil<std::chrono::days>(std::chrono::floor<std::chrono::seconds>(w.now()) + 1s);
    w.clock.set(first);
    r->tick();
    ASSERT_EQ(w.jobs.size(), 1u);
    w.jobs[0]->exit = 0;
    r->tick();
    const auto text = slot_at("daily", first);
    ASSERT_EQ(w.status(s, text).state, coord::cron_slot_status::done);
    w.clock.set(first + std::chrono::hours{24 * 8} + 2h);  // past the retention; the next prune is due
    r->tick();
    EXPECT_EQ(w.status(s, text).state, coord::cron_slot_status::none);
    EXPECT_EQ(w.status(s, slot_at("daily", first + std::chrono::hours{24})).state, coord::cron_slot_status::missed);
}

// The history by job id reads the schedule its runners recorded.
TEST(CronRunner, HistoryByJobIdAndAnUnknownJob) {
    world w;
    auto s = every_minute("nightly");
    auto r = w.runner(s, w.options("a"));
    auto none = coord::cron_history(w.store, std::string("nightly"), floor<std::chrono::seconds>(w.now()), 5);
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error(), coord::errc::cron_job_unknown);
    to_first_slot(w, *r);
    auto h = coord::cron_history(w.store, std::string("nightly"), floor<std::chrono::seconds>(w.now()), 3);
    ASSERT_TRUE(h) << h.error().message();
    ASSERT_EQ(h->size(), 3u);
    EXPECT_EQ(h->back().state, coord::cron_slot_status::running);
    EXPECT_EQ(h->back().worker, "a");
    EXPECT_EQ(h->back().slot, slot_at("nightly", next_minute(w) - 1min));
}

// Several runners in one process on the file store (the store a machine's
// instances share), with a clock of their own each: one run per slot.
TEST(CronRunner, FileStoreInstancesRunEachSlotOnce) {
    const auto path = std::filesystem::temp_directory_path() / ("coord-cron-" + coord::test::unique_name());
    manual_clock clock{std::chrono::sys_seconds{std::chrono::seconds{1'780'000'000}}};
    std::vector<std::shared_ptr<fake_job>> jobs;
    fake_launcher launcher{&jobs};
    auto s = every_minute();
    using file_store = coord::basic_file_store<manual_clock>;  // the store judges on its clock: here the test's
    using file_runner = coord::basic_cron_runner<file_store, fake_launcher, manual_clock, manual_clock>;
    file_store s1{path, clock}, s2{path, clock};
    coord::cron_options o1, o2;
    o1.worker = "a";
    o2.worker = "b";
    file_runner a{s1, s, launcher, o1, clock, clock}, b{s2, s, launcher, o2, clock, clock};
    a.tick();
    b.tick();
    const auto first = std::chrono::ceil<std::chrono::minutes>(
        std::chrono::sys_seconds{std::chrono::floor<std::chrono::seconds>(clock.now().time_since_epoch())} + 1s);
    for (int m = 0; m < 5; ++m) {
        clock.set(first + std::chrono::minutes{m});
        b.tick();
        a.tick();
        ASSERT_EQ(jobs.size(), static_cast<std::size_t>(m + 1));
        jobs.back()->exit = 0;
        a.tick();
        b.tick();
    }
    auto h = coord::cron_history(s1, std::string("report"), first + 4min, 5);
    ASSERT_TRUE(h);
    for (auto& x : *h) EXPECT_EQ(x.state, coord::cron_slot_status::done) << x.slot;
    std::filesystem::remove(path);
    std::filesystem::remove(path.string() + ".lock");
}

// A store that loses the answer of the next claim it applies (the claim is
// made; the caller is told outcome_unknown), for the adoption rule.
struct lossy_store {
    store_t* s;
    bool lose_next_claim = false;
    coord::result<void, coord::write_error> fence_write(std::string_view k, coord::fence_token t, std::string_view v) {
        return s->fence_write(k, t, v);
    }
    coord::result<void, coord::write_error> fence_write(std::string_view k, coord::fence_token t, std::uint64_t q,
                                                        std::string_view v) {
        return s->fence_write(k, t, q, v);
    }
    template <class F>
    coord::result<void, coord::write_error> fence_update(std::string_view k, coord::fence_token t, F&& fn) {
        return s->fence_update(k, t, std::forward<F>(fn));
    }
    coord::result<coord::fenced_value> fence_read(std::string_view k) { return s->fence_read(k); }
    coord::result<coord::claim_outcome> ledger_claim(const coord::ledger_claim_request& q) {
        auto r = s->ledger_claim(q);
        if (lose_next_claim && r && r->kind == coord::claim_outcome::granted) {
            lose_next_claim = false;
            return coord::unexpected(coord::make_error_code(coord::errc::outcome_unknown));
        }
        return r;
    }
    coord::result<void> ledger_heartbeat(std::string_view k, coord::fence_token f, std::chrono::nanoseconds t) {
        return s->ledger_heartbeat(k, f, t);
    }
    coord::result<void> ledger_complete(std::string_view k, coord::fence_token f, std::string_view r,
                                       std::chrono::nanoseconds t) {
        return s->ledger_complete(k, f, r, t);
    }
    coord::result<void> ledger_fail(std::string_view k, coord::fence_token f, std::string_view r) {
        return s->ledger_fail(k, f, r);
    }
    coord::result<std::optional<coord::ledger_record>> ledger_read(std::string_view k) { return s->ledger_read(k); }
    coord::result<std::size_t> ledger_prune() { return s->ledger_prune(); }
    coord::result<coord::fence_token> ledger_revoke(std::string_view k, std::string_view r) {
        return s->ledger_revoke(k, r);
    }
};
static_assert(coord::ledger_store<lossy_store> && coord::fence_update_store<lossy_store>);

// Two instances given one worker name (a copied unit file): a claim whose
// answer was lost is adopted by the runner that sent it, never by the other
// one, and every run of a slot has its own fence token.
TEST(CronRunner, ASharedWorkerNameNeverAdoptsAnotherInstancesClaim) {
    world w;
    lossy_store lossy{&w.store};
    using lossy_runner = coord::basic_cron_runner<lossy_store, fake_launcher, manual_clock, manual_clock>;
    auto s = every_minute();
    fake_launcher la{&w.jobs}, lb{&w.jobs};
    lossy_runner a{lossy, s, la, w.options("same"), w.clock, w.clock};
    lossy_runner b{lossy, s, lb, w.options("same"), w.clock, w.clock};
    EXPECT_NE(a.holder(), b.holder());
    EXPECT_EQ(a.holder().rfind("same #", 0), 0u);
    a.tick();
    b.tick();
    const auto first = next_minute(w);
    w.clock.set(first);
    lossy.lose_next_claim = true;
    a.tick();  // A's claim is made, its answer lost
    EXPECT_TRUE(w.jobs.empty());
    EXPECT_GE(w.count(coord::cron_event::error), 1);
    b.tick();  // B sees a claim under "same": not its own
    EXPECT_TRUE(w.jobs.empty()) << "B ran A's claim";
    w.clock.advance(1s);  // A's next walk (its claim's lease runs 3 s)
    a.tick();  // A adopts its own claim
    ASSERT_EQ(w.jobs.size(), 1u);
    EXPECT_EQ(w.jobs[0]->fence, 1u);
    EXPECT_EQ(w.jobs[0]->worker, "same");
    b.tick();
    EXPECT_EQ(w.jobs.size(), 1u);
    // A stops ticking (paused past its lease): B takes the slot over under a
    // new fence, never A's.
    for (int i = 0; i < 5; ++i) {
        w.clock.advance(1s);
        b.tick();
    }
    ASSERT_EQ(w.jobs.size(), 2u);
    EXPECT_EQ(w.jobs[1]->slot, w.jobs[0]->slot);
    EXPECT_EQ(w.jobs[1]->fence, 2u);
    a.tick();  // A learns it lost the slot
    EXPECT_EQ(w.jobs[0]->terms, 1);
    w.jobs[1]->exit = 0;
    b.tick();
    const auto st = w.status(s, w.jobs[1]->slot);
    EXPECT_EQ(st.state, coord::cron_slot_status::done);
    EXPECT_EQ(st.worker, "same");
    EXPECT_EQ("same #" + st.instance, b.holder());
}

// A runner whose schedule differs from the one the store keeps for the job
// is refused (it claims nothing, and says why); taking the job over from an
// instant makes slots before it follow the old schedule and slots from it
// the new one, and refuses the old schedule's runners from then on. No slot
// of either schedule is dropped without a record, and the status says which
// schedule each slot belongs to.
TEST(CronRunner, AChangedScheduleIsRefusedUnlessItTakesTheJobOver) {
    world w;
    auto old_s = every_minute();                                      // every minute
    auto new_s = *coord::schedule::make("report", "30 */2 * * * *", "UTC");  // every two minutes, at :30
    auto a = w.runner(old_s, w.options("a"));
    const auto first = to_first_slot(w, *a);
    ASSERT_EQ(w.jobs.size(), 1u);
    w.jobs[0]->exit = 0;
    a->tick();
    // A runner of another schedule: refused, nothing claimed, the reason said.
    auto b = w.runner(new_s, w.options("b"));
    w.clock.set(first + 1min);
    b->tick();
    ASSERT_TRUE(b->refusal());
    EXPECT_EQ(*b->refusal(), coord::errc::cron_schedule_conflict);
    EXPECT_EQ(*b->refusal(), coord::condition::bad_input);
    EXPECT_NE(b->refusal()->detail().find("take the job over"), std::string::npos) << b->refusal()->detail();
    EXPECT_EQ(w.count(coord::cron_event::refused), 1);
    EXPECT_TRUE(w.jobs.size() == 1u);
    std::atomic<bool> never{false};
    b->run_until(never);  // returns: refused
    a->tick();
    ASSERT_EQ(w.jobs.size(), 2u);  // the old runner goes on
    w.jobs[1]->exit = 0;
    a->tick();
    // Taking over from first+4min (the old schedule still runs until then).
    auto o = w.options("c");
    const auto switch_at = first + 4min;
    o.take_over_from = switch_at;
    auto c = w.runner(new_s, o);
    c->tick();
    EXPECT_FALSE(c->refusal());
    EXPECT_EQ(w.count(coord::cron_event::took_over), 1);
    w.clock.advance(1s);
    a->tick();  // the old runner is refused from its next walk on
    ASSERT_TRUE(a->refusal());
    EXPECT_NE(a->refusal()->detail().find("was taken over"), std::string::npos) << a->refusal()->detail();
    // c walks both: the old schedule's slots before first+4min, the new one's after.
    std::vector<std::string> ran;
    for (auto t = first + 2min; t <= first + 9min; t += 10s) {
        w.clock.set(t);
        c->tick();
        for (auto& j : w.jobs)
            if (!j->exit) {
                ran.push_back(j->slot);
                j->exit = 0;
            }
        c->tick();
    }
    // first is an odd minute: the new schedule fires at first+5min30s and first+7min30s.
    const std::vector<std::string> want{slot_at("report", first + 2min), slot_at("report", first + 3min),
                                        slot_at("report", first + 5min + 30s), slot_at("report", first + 7min + 30s)};
    EXPECT_EQ(ran, want);
    auto h = coord::cron_history(w.store, std::string("report"), floor<std::chrono::seconds>(w.now()), 9);
    ASSERT_TRUE(h);
    ASSERT_EQ(h->size(), 9u);  // three before the job began, four of the old schedule, two of the new
    std::map<std::string, coord::cron_slot_status> by_slot;
    for (auto& x : *h) by_slot[x.slot] = x;
    const auto old_v = a->schedule_version(), new_v = c->schedule_version();
    EXPECT_NE(old_v, new_v);
    for (int m = 0; m < 4; ++m) {
        const auto& x = by_slot[slot_at("report", first + std::chrono::minutes{m})];
        EXPECT_EQ(x.state, coord::cron_slot_status::done) << x.slot;
        EXPECT_EQ(x.schedule_version, old_v) << x.slot;
        EXPECT_EQ(x.schedule, "0 * * * * * UTC") << x.slot;
    }
    const auto& n = by_slot[slot_at("report", first + 5min + 30s)];
    EXPECT_EQ(n.state, coord::cron_slot_status::done);
    EXPECT_EQ(n.schedule_version, new_v);
    EXPECT_EQ(n.schedule, "30 */2 * * * * UTC");
    EXPECT_EQ(by_slot.count(slot_at("report", first + 4min)), 0u) << "the old schedule ended at the switch";
    EXPECT_EQ(by_slot.count(slot_at("report", first + 3min + 30s)), 0u) << "the new one began at the switch";
    // A take-over from an instant the job has already settled is refused.
    auto o2 = w.options("d");
    o2.take_over_from = first + 1min;
    auto d = w.runner(old_s, o2);
    d->tick();
    ASSERT_TRUE(d->refusal());
    EXPECT_NE(d->refusal()->detail().find("settled"), std::string::npos) << d->refusal()->detail();
    // An explicit version is an identity too.
    coord::schedule_options v7;
    v7.version = 7;
    auto same_text = *coord::schedule::make("report", "30 */2 * * * *", "UTC", v7);
    auto e = w.runner(same_text, w.options("e"));
    e->tick();
    EXPECT_TRUE(e->refusal());
}

// The catch-up after an hour down with overlap allowed does not start every
// missed slot at once: at most max_running run here; the others wait within
// their window and are recorded missed past it, with that reason.
TEST(CronRunner, MaxRunningCapsCatchUpAndRecordsTheRestMissedWithTheReason) {
    world w;
    auto s = every_minute();
    auto o = w.options("a");
    o.overlap = coord::overlap_policy::allow;
    o.catch_up = 10min;
    o.max_running = 3;
    {
        auto r = w.runner(s, o);
        r->tick();
    }
    const auto first = next_minute(w);
    w.clock.set(first + 60min);
    auto r = w.runner(s, o);
    r->tick();
    EXPECT_EQ(r->running(), 3u);
    EXPECT_EQ(w.jobs.size(), 3u);
    // Nothing more starts while three run, tick after tick.
    for (int i = 0; i < 20; ++i) {
        w.clock.advance(1s);
        r->tick();
    }
    EXPECT_EQ(w.jobs.size(), 3u);
    // The three end one after another: the next waiting slots start, oldest first.
    for (auto& j : w.jobs) j->exit = 0;
    r->tick();
    r->tick();
    EXPECT_EQ(w.jobs.size(), 6u);
    EXPECT_EQ(r->running(), 3u);
    // The rest of the window passes with the three running: its slots are missed, saying why.
    w.clock.set(first + 72min);
    r->tick();
    r->tick();
    const auto st = w.status(s, slot_at("report", first + 58min));
    EXPECT_EQ(st.state, coord::cron_slot_status::missed);
    EXPECT_NE(st.detail.find("max running"), std::string::npos) << st.detail;
    int started_at_once = 0;
    for (auto& j : w.jobs) started_at_once += !j->exit;
    EXPECT_LE(started_at_once, 3);
}

TEST(CronRunner, RefusesBadOptions) {
    world w;
    auto s = every_minute();
    auto bad = [&](auto change) {
        auto o = w.options("a");
        change(o);
        fake_launcher l{&w.jobs};
        EXPECT_THROW((runner_t{w.store, s, l, o, w.clock, w.clock}), std::invalid_argument);
    };
    bad([](coord::cron_options& o) { o.worker.clear(); });
    bad([](coord::cron_options& o) { o.lease_ttl = 10ms; });
    bad([](coord::cron_options& o) { o.heartbeat = o.lease_ttl; });
    bad([](coord::cron_options& o) { o.catch_up = -1s; });
    bad([](coord::cron_options& o) { o.catch_up = std::chrono::hours{24 * 401}; });
    bad([](coord::cron_options& o) { o.overlap = coord::overlap_policy::queue_one; });
    bad([](coord::cron_options& o) { o.max_attempts = 0; });
    bad([](coord::cron_options& o) { o.record_window = 1h; });
    bad([](coord::cron_options& o) { o.steps_per_tick = 1; });
    bad([](coord::cron_options& o) { o.prune_every = 1s; });
    bad([](coord::cron_options& o) { o.max_running = 0; });
    bad([](coord::cron_options& o) {
        o.take_over_now = true;
        o.take_over_from = std::chrono::sys_seconds{std::chrono::seconds{1'780'000'000}};
    });
}

}  // namespace
