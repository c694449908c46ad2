// SPDX-License-Identifier: Apache-2.0
// Experiments on a three-member etcd cluster: the leader killed with SIGKILL
// while four processes take leases and update a fenced counter, a member
// paused with SIGSTOP while clients call, the pause experiment across
// processes (a holder's client stopped past its TTL, its late write refused),
// and segment IDs from four processes with the leader killed mid-way.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "coord/fence.hpp"
#include "coord/lease.hpp"
#include "coord/segment.hpp"
#include "etcd/etcd_support.hpp"
#include "support/child_process.hpp"
#include "support/engine_experiments.hpp"

namespace {

using namespace std::chrono_literals;

const coord::test::cluster_script cluster{COORD_ETCD_SCRIPT, COORD_ETCD_CLUSTER_DIR};
void member(const char* what, int i) { cluster.member(what, i); }

std::unique_ptr<coord::etcd::store> open_store(const std::string& prefix) {
    auto s = std::make_unique<coord::etcd::store>(coord::test::etcd_cluster_url(), coord::etcd::server_clock{},
                                                  coord::test::etcd_options(prefix));
    coord::test::etcd_init(*s);
    return s;
}

// Four processes take one lease in turn and, holding it, add one to a counter
// under their token (a fenced update); the leader is killed in the middle and
// restarted (coord::test::fenced_counter_loses_no_update says what is checked).
TEST(EtcdCluster, ALeaderKilledWhileFourProcessesHoldLeasesAndWriteLosesNoUpdate) {
    const std::string prefix = coord::test::etcd_fresh_prefix();
    coord::test::fenced_counter_loses_no_update([&] { return open_store(prefix); },
                                                [] { cluster.kill_leader_for(1s, 1500ms); }, 4s);
}

// A member paused with SIGSTOP, the first one the client tries: it accepts
// connections and never answers. Calls sent to it end at their deadline as
// unknown (never a false success), and the client moves on to the others.
TEST(EtcdCluster, AMemberPausedWithSigstopNeverGivesAFalseSuccess) {
    const std::string prefix = coord::test::etcd_fresh_prefix();
    coord::etcd::options o = coord::test::etcd_options(prefix);
    o.operation_timeout = 1s;
    coord::etcd::store store{coord::test::etcd_cluster_url(), {}, o};
    coord::test::etcd_init(store);
    ASSERT_TRUE(store.fence_write("k", 1, "one"));
    member("pause", 0);
    int ok = 0, failed = 0;
    coord::fence_token acknowledged = 1, tried = 1;
    for (int i = 0; i < 20; ++i) {
        auto w = store.fence_write("k", ++tried, "v");
        if (w) {
            ++ok;
            acknowledged = tried;
        } else {
            ++failed;
            EXPECT_TRUE(w.error().code == coord::condition::outcome_unknown || w.error().code == coord::condition::unavailable)
                << w.error().code.message();
        }
    }
    member("resume", 0);
    EXPECT_GT(failed, 0);  // the calls that went to the paused member
    EXPECT_GT(ok, 10);     // and the others answered
    auto v = store.fence_read("k");
    ASSERT_TRUE(v) << v.error().message();
    EXPECT_GE(v->fence, acknowledged);  // every acknowledged write is there (an unknown one may be too)
    EXPECT_LE(v->fence, tried);
}

// The pause experiment: A's client is stopped past its lease's term; etcd
// ends the term; B takes the lease and writes; A wakes and writes with its
// old token, and the fenced resource on etcd refuses it.
TEST(EtcdCluster, APausedHolderIsFencedOutAfterEtcdEndsItsTerm) {
    const std::string prefix = coord::test::etcd_fresh_prefix();
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    coord::test::child_process a([&](int out) {
        ::close(go[1]);
        auto store = open_store(prefix);
        auto l = store->lease_acquire("primary", "A", 2s);
        if (!l) return 2;
        const std::uint64_t token = l->token;
        if (::write(out, &token, sizeof token) != sizeof token) return 3;
        char c;
        if (::read(go[0], &c, 1) != 1) return 4;
        coord::basic_keyed_fenced_resource res{*store};
        auto w = res.write("config", token, "A's late value");
        const std::int32_t code = w ? 0 : w.error().code.value();
        return ::write(out, &code, sizeof code) == sizeof code ? 0 : 5;
    });
    ::close(go[0]);
    std::uint64_t token_a = 0;
    ASSERT_TRUE(a.read(token_a));
    a.kill(SIGSTOP);
    auto store = open_store(prefix);
    // Wait for etcd to end A's term (its leader's timer, not this clock).
    for (int i = 0; i < 200; ++i) {
        auto h = store->lease_read("primary");
        ASSERT_TRUE(h) << h.error().message();
        if (!*h) break;
        std::this_thread::sleep_for(50ms);
    }
    auto b = store->lease_acquire("primary", "B", 30s);
    ASSERT_TRUE(b) << b.error().code.message();
    EXPECT_GT(b->token, token_a);
    coord::basic_keyed_fenced_resource res{*store};
    ASSERT_TRUE(res.write("config", b->token, "B's value"));
    a.kill(SIGCONT);
    ASSERT_EQ(::write(go[1], "g", 1), 1);
    std::int32_t code = -1;
    ASSERT_TRUE(a.read(code));
    EXPECT_EQ(code, static_cast<std::int32_t>(coord::errc::stale_fence));
    EXPECT_EQ(WEXITSTATUS(a.wait()), 0);
    ::close(go[1]);
    auto v = res.read("config");
    ASSERT_TRUE(v);
    EXPECT_EQ(v->value, "B's value");
}

TEST(EtcdCluster, FourProcessesDrawSegmentIdsWithTheLeaderKilledMidWayAndNoneTwice) {
    const std::string prefix = coord::test::etcd_fresh_prefix();
    coord::test::segment_drawers_never_duplicate([&] { return open_store(prefix); },
                                                 [] { cluster.kill_leader_for(300ms, 1500ms); });
}

}  // namespace
