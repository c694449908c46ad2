// SPDX-License-Identifier: Apache-2.0
// Multi-process experiments on the real Redis: the pause experiment (a
// holder stopped past its term, the late write refused by the fenced
// resource on Redis, a SIGKILL of the server in the middle), four processes
// drawing segment IDs while they are killed again and again, twenty
// processes racing one ledger slot, and the waiting acquire across
// processes (waiters woken by PUBLISH). Leases are judged on the server's
// clock.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "coord/fence.hpp"
#include "coord/job_ledger.hpp"
#include "coord/lease.hpp"
#include "coord/segment.hpp"
#include "redis/redis_support.hpp"
#include "support/child_process.hpp"
#include "support/engine_experiments.hpp"
#include "support/lease_wait_process.hpp"

namespace {

using namespace std::chrono_literals;

// "w<i>" (built with +=: g++ 12 warns falsely on "w" + std::to_string(i)).
std::string worker_name(int i) {
    std::string w = "w";
    w += std::to_string(i);
    return w;
}

std::unique_ptr<coord::redis::store> open_store(const std::string& prefix) {
    return std::make_unique<coord::redis::store>(coord::test::redis_url(), coord::redis::server_clock{},
                                                 coord::test::redis_options(prefix));
}
std::string initialized_prefix() {
    const std::string prefix = coord::test::redis_fresh_prefix();
    if (!open_store(prefix)->initialize(coord::redis::initial_floors{})) ADD_FAILURE() << "cannot initialize";
    return prefix;
}

void wait_for_server_time(coord::redis::store& store, std::int64_t t) {
    for (;;) {
        auto now = store.server_now_ns();
        ASSERT_TRUE(now) << now.error().message();
        if (*now > t) return;
        std::this_thread::sleep_for(10ms);
    }
}

TEST(RedisProcess, PausedHolderIsFencedOutByTheResourceOnRedis) {
    const std::string prefix = initialized_prefix();
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    // Process A: takes the lease, reports its token and expiry, waits for
    // "go" (it is stopped meanwhile), then writes with its old token.
    coord::test::child_process a([&](int out) {
        ::close(go[1]);
        auto store = open_store(prefix);
        coord::basic_lease_manager leases{*store};
        auto l = leases.acquire("primary", "A", 300ms);
        if (!l) return 2;
        const std::uint64_t token = l->token;
        const std::int64_t expires = l->expires_at.count();
        if (::write(out, &token, sizeof token) != sizeof token || ::write(out, &expires, sizeof expires) != sizeof expires)
            return 3;
        char c;
        if (::read(go[0], &c, 1) != 1) return 4;
        coord::basic_keyed_fenced_resource res{*store};
        // The server was killed and restarted while A slept: its connection
        // is gone. A retries until the resource answers by the rule.
        auto w = res.write("config", token, "A's late value");
        for (int tries = 0; !w && w.error().code.category() != coord::coord_category() && tries < 200; ++tries) {
            ::usleep(20000);
            w = res.write("config", token, "A's late value");
        }
        if (!w && w.error().code == coord::errc::outcome_unknown) w = res.write("config", token, "A's late value");
        const std::int32_t code = w ? 0 : w.error().code.value();
        return ::write(out, &code, sizeof code) == sizeof code ? 0 : 5;
    });
    ::close(go[0]);
    std::uint64_t token_a = 0;
    std::int64_t expires_a = 0;
    ASSERT_TRUE(a.read(token_a));
    ASSERT_TRUE(a.read(expires_a));
    a.kill(SIGSTOP);  // the long GC pause

    auto store = open_store(prefix);
    wait_for_server_time(*store, expires_a);
    coord::basic_lease_manager leases{*store};
    auto b = leases.acquire("primary", "B", 30s);
    ASSERT_TRUE(b) << b.error().code.message();
    EXPECT_GT(b->token, token_a);
    coord::basic_keyed_fenced_resource res{*store};
    ASSERT_TRUE(res.write("config", b->token, "B's value"));
    // The server is killed in the middle of it all: with appendfsync always nothing is lost.
    ASSERT_EQ(std::system((std::string(COORD_REDIS_SCRIPT) + " kill '" + COORD_REDIS_DIR + "' " + COORD_REDIS_PORT).c_str()), 0);

    a.kill(SIGCONT);  // A wakes, unaware, and writes
    ASSERT_EQ(::write(go[1], "g", 1), 1);
    std::int32_t code = -1;
    ASSERT_TRUE(a.read(code));
    EXPECT_EQ(code, static_cast<std::int32_t>(coord::errc::stale_fence));
    EXPECT_EQ(WEXITSTATUS(a.wait()), 0);
    ::close(go[1]);
    auto v = res.read("config");
    if (!v) {  // this connection died with the server: the error is clear and the next call reconnects
        EXPECT_EQ(v.error(), coord::redis::errc::connection_failed) << v.error().message();
        v = res.read("config");
    }
    ASSERT_TRUE(v) << v.error().message();
    EXPECT_EQ(v->value, "B's value");
    EXPECT_EQ(v->fence, b->token);
}

TEST(RedisProcess, KilledAndRestartedDrawersNeverDuplicateASegmentId) {
    const std::string prefix = initialized_prefix();
    coord::test::killed_drawers_never_duplicate([&] { return open_store(prefix); });
}

// Twenty processes race for one slot, all released at once: the effect (a
// line appended to a file outside Redis) happens once; every other process
// is told it is in progress or replayed with the one result.
TEST(RedisProcess, TwentyProcessesRacingOneLedgerSlotApplyItsEffectOnce) {
    const std::string prefix = initialized_prefix();
    coord::test::scratch_dir dir;
    const std::string effects = (dir / "effects").string();
    const coord::slot s("nightly-report", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    std::vector<std::unique_ptr<coord::test::child_process>> children;
    for (int i = 0; i < 20; ++i)
        children.push_back(std::make_unique<coord::test::child_process>([&, i](int out) {
            ::close(go[1]);
            auto store = open_store(prefix);
            coord::basic_job_ledger<coord::redis::store> ledger{*store};
            char c;
            if (::read(go[0], &c, 1) != 0) return 4;  // released when the pipe closes
            auto r = ledger.run(s, worker_name(i), "", [&](const coord::ledger_context&) {
                const int fd = ::open(effects.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
                const std::string line = worker_name(i) + "\n";
                const bool ok = fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
                if (fd >= 0) ::close(fd);
                if (!ok) throw std::runtime_error("effect failed");
                std::string result = "done by ";
                result += worker_name(i);
                return result;
            });
            if (!r) return 2;
            const std::int32_t kind = r->kind;
            return ::write(out, &kind, sizeof kind) == sizeof kind ? 0 : 3;
        }));
    ::close(go[0]);
    ::close(go[1]);
    int applied = 0, others = 0;
    for (auto& c : children) {
        std::int32_t kind = -1;
        ASSERT_TRUE(c->read(kind));
        if (kind == coord::run_outcome::applied) ++applied;
        else if (kind == coord::run_outcome::in_progress || kind == coord::run_outcome::replayed) ++others;
        EXPECT_EQ(c->wait(), 0);
    }
    EXPECT_EQ(applied, 1);
    EXPECT_EQ(others, 19);
    std::ifstream in(effects);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    ASSERT_EQ(lines.size(), 1u);
    auto store = open_store(prefix);
    auto rec = store->ledger_read(s.to_string());
    ASSERT_TRUE(rec && *rec);
    EXPECT_EQ((*rec)->state, coord::ledger_record::state_t::done);
    EXPECT_EQ((*rec)->result, "done by " + lines[0]);
    EXPECT_EQ((*rec)->attempt, 1u);
}

// The waiting acquire across processes on Redis (waiters woken by PUBLISH).
TEST(RedisProcessWait, AKilledWaiterDelaysTheNextNoLongerThanItsPlace) {
    const std::string prefix = initialized_prefix();
    coord::test::killed_waiter_delays_the_next_no_longer_than_its_place([&] { return open_store(prefix); });
}

TEST(RedisProcessWait, AStoppedHolderLosesToTheFirstWaiterAndItsLateWriteIsRefused) {
    const std::string prefix = initialized_prefix();
    coord::test::stopped_holder_loses_to_the_first_waiter([&] { return open_store(prefix); });
}

}  // namespace
