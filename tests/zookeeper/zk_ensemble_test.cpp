// SPDX-License-Identifier: Apache-2.0
// Experiments on a three-server ZooKeeper ensemble: the leader killed with
// SIGKILL while four processes take leases and update a fenced counter, the
// pause experiment across processes (a session-bound holder's client stopped
// past its session timeout: its node is gone, B holds with a larger zxid,
// A's late write refused by the fenced resource), segment IDs from four
// processes with a server killed mid-way, and tokens across a restart of
// every server and a leader election.
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
#include "support/child_process.hpp"
#include "support/engine_experiments.hpp"
#include "zookeeper/zk_support.hpp"

namespace {

using namespace std::chrono_literals;

const coord::test::cluster_script ensemble{COORD_ZK_SCRIPT, COORD_ZK_ENSEMBLE_DIR};
int leader() { return ensemble.leader(); }
void server(const char* what, int i) { ensemble.member(what, i); }

// Every test leaves the ensemble restarted (every server SIGKILLed and
// started again on its data). ZooKeeper 3.8.0 (Debian's) was seen here, on a
// loaded machine, wedged after these experiments: a leader and two
// followers answering `srvr`, but no request ever committed (mntr's
// zk_outstanding_requests never drained) and no client session established,
// so the next test failed to open its store for 60 s. That is the server's
// fault, not what the next test is about; a restart clears it.
class ZooKeeperEnsemble : public ::testing::Test {
protected:
    void TearDown() override { ensemble.all("restart-all"); }
};

coord::zookeeper::options quick_sessions() {
    coord::zookeeper::options o;
    o.session_timeout = 4s;  // the ensemble's minimum (2 ticks of 2 s)
    return o;
}

// As on etcd: four processes take one lease in turn and add one to a counter
// under their token; the leader is killed and restarted in the middle
// (coord::test::fenced_counter_loses_no_update says what is checked).
TEST_F(ZooKeeperEnsemble, ALeaderKilledWhileFourProcessesHoldLeasesAndWriteLosesNoUpdate) {
    const std::string url = coord::test::zk_fresh_root(coord::test::zk_ensemble_url());
    { auto setup = coord::test::zk_open_when_up(url); }
    coord::test::fenced_counter_loses_no_update(
        [&] { return coord::test::zk_open_when_up(url, coord::zookeeper::server_clock{}, quick_sessions()); },
        [] { ensemble.kill_leader_for(1500ms, 2s); }, 6s);
}

// The pause experiment with the session-bound lease: A's client is stopped
// past its session timeout; the ensemble expires the session and deletes
// A's node; B takes the lease (a larger zxid) and writes; A wakes, writes
// with its old token, and the fenced resource refuses it; A's lease is then
// reported lost.
TEST_F(ZooKeeperEnsemble, AHolderStoppedPastItsSessionIsFencedOutAndLearnsItLost) {
    const std::string url = coord::test::zk_fresh_root(coord::test::zk_ensemble_url());
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    coord::test::child_process a([&](int out) {
        ::close(go[1]);
        auto opened = coord::test::zk_open_when_up(url, coord::zookeeper::server_clock{}, quick_sessions());
        auto& store = *opened;
        auto l = store.session_bound().lease_acquire("primary", "A", 0s);
        // An ensemble still electing after the previous test's restarts is
        // unavailable for a while: not what this test is about.
        for (int i = 0; i < 150 && !l && l.error().code == coord::condition::unavailable; ++i) {
            std::this_thread::sleep_for(100ms);
            l = store.session_bound().lease_acquire("primary", "A", 0s);
        }
        if (!l) return 2;
        const std::uint64_t token = l->token;
        if (::write(out, &token, sizeof token) != sizeof token) return 3;
        char c;
        if (::read(go[0], &c, 1) != 1) return 4;
        coord::basic_keyed_fenced_resource res{store};
        auto w = res.write("config", token, "A's late value");
        for (int i = 0; i < 100 && !w && w.error().code.category() != coord::coord_category(); ++i) {
            std::this_thread::sleep_for(50ms);  // reconnecting with a new session
            w = res.write("config", token, "A's late value");
        }
        const std::int32_t code = w ? 0 : w.error().code.value();
        auto renew = store.session_bound().lease_renew("primary", "A", token, 0s);
        const std::int32_t lost = renew ? 0 : renew.error().code.value();
        return ::write(out, &code, sizeof code) == sizeof code && ::write(out, &lost, sizeof lost) == sizeof lost ? 0 : 5;
    });
    ::close(go[0]);
    std::uint64_t token_a = 0;
    ASSERT_TRUE(a.read(token_a)) << "A took no lease: exit status " << WEXITSTATUS(a.wait());
    a.kill(SIGSTOP);
    auto store_opened = coord::test::zk_open_when_up(url);
    auto& store = *store_opened;
    coord::result<coord::lease, coord::lease_error> b;
    for (int i = 0; i < 300; ++i) {  // until the ensemble expires A's session
        b = store.session_bound().lease_acquire("primary", "B", 0s);
        if (b || b.error() != coord::errc::lease_held) break;
        std::this_thread::sleep_for(50ms);
    }
    ASSERT_TRUE(b) << b.error().code.message();
    EXPECT_GT(b->token, token_a);
    coord::basic_keyed_fenced_resource res{store};
    ASSERT_TRUE(res.write("config", b->token, "B's value"));
    a.kill(SIGCONT);
    ASSERT_EQ(::write(go[1], "g", 1), 1);
    std::int32_t code = -1, lost = -1;
    ASSERT_TRUE(a.read(code));
    ASSERT_TRUE(a.read(lost));
    EXPECT_EQ(code, static_cast<std::int32_t>(coord::errc::stale_fence));
    EXPECT_TRUE(lost == static_cast<std::int32_t>(coord::errc::not_lease_holder) ||
                lost == static_cast<std::int32_t>(coord::errc::lease_expired))
        << lost;
    EXPECT_EQ(WEXITSTATUS(a.wait()), 0);
    ::close(go[1]);
    auto v = res.read("config");
    ASSERT_TRUE(v);
    EXPECT_EQ(v->value, "B's value");
}

TEST_F(ZooKeeperEnsemble, FourProcessesDrawSegmentIdsWithAServerKilledMidWayAndNoneTwice) {
    const std::string url = coord::test::zk_fresh_root(coord::test::zk_ensemble_url());
    { auto setup = coord::test::zk_open_when_up(url); }
    coord::test::segment_drawers_never_duplicate([&] { return coord::test::zk_open_when_up(url); },
                                                 [] { ensemble.kill_leader_for(300ms, 1500ms); });
}

// Connection loss is not session expiry, and never a success: with every
// server of the ensemble paused (SIGSTOP), each call that needs ownership ends
// at its deadline as unknown (a write) or unavailable (a read); once the
// servers resume, the same store object goes on with the same session and
// the record is one the rule allows.
TEST_F(ZooKeeperEnsemble, WhileDisconnectedNothingNeedingOwnershipSucceeds) {
    const std::string url = coord::test::zk_fresh_root(coord::test::zk_ensemble_url());
    { auto setup = coord::test::zk_open_when_up(url); }  // the root made with the default timeouts (a restarted server may be slow at first)
    coord::zookeeper::options o;
    o.operation_timeout = 2s;
    o.connect_timeout = 2s;
    o.session_timeout = 30s;  // longer than the pause (five calls of 2 s): the session survives it
    auto opened = coord::test::zk_open_when_up(url, coord::zookeeper::server_clock{}, o);
    auto& store = *opened;
    auto l = store.lease_acquire("n", "A", 1h);
    ASSERT_TRUE(l) << l.error().code.message();
    ASSERT_TRUE(store.fence_write("k", l->token, "before"));
    auto held = store.session_bound().lease_acquire("s", "A", 0s);
    ASSERT_TRUE(held);
    const auto session = store.session_timeout();
    for (int i = 0; i < 3; ++i) server("pause", i);
    auto w = store.fence_write("k", l->token, "during");
    auto r = store.lease_renew("n", "A", l->token, 0ns);
    auto b = store.lease_acquire("other", "B", 1h);
    auto s = store.session_bound().lease_renew("s", "A", held->token, 0ns);
    auto read = store.fence_read("k");
    for (int i = 0; i < 3; ++i) server("resume", i);
    ASSERT_FALSE(w);
    EXPECT_TRUE(w.error().code == coord::condition::outcome_unknown || w.error().code == coord::condition::unavailable)
        << w.error().code.message();
    ASSERT_FALSE(r);
    ASSERT_FALSE(b);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().code, coord::condition::unavailable) << s.error().code.message();
    ASSERT_FALSE(read);
    EXPECT_EQ(read.error(), coord::condition::unavailable);
    // Resumed: the same session (its term not over), the fence where the rule allows.
    coord::result<coord::fenced_value> v;
    for (int i = 0; i < 100; ++i) {
        v = store.fence_read("k");
        if (v) break;
        std::this_thread::sleep_for(50ms);
    }
    ASSERT_TRUE(v) << v.error().message();
    EXPECT_TRUE(v->value == "before" || v->value == "during") << v->value;
    EXPECT_EQ(store.session_timeout(), session);
    EXPECT_TRUE(store.session_bound().lease_renew("s", "A", held->token, 0ns));
}

// Tokens after every server was restarted (one at a time) and the leader was
// killed (an election): larger than every token before.
TEST_F(ZooKeeperEnsemble, TokensNeverGoBackAcrossServerRestartsAndAnElection) {
    const std::string url = coord::test::zk_fresh_root(coord::test::zk_ensemble_url());
    auto store_opened = coord::test::zk_open_when_up(url);
    auto& store = *store_opened;
    auto first = store.lease_acquire("n", "A", 1h);
    ASSERT_TRUE(first) << first.error().code.message();
    ASSERT_TRUE(store.lease_release("n", "A", first->token));
    coord::fence_token last = first->token;
    for (int i = 0; i < 3; ++i) {
        server("kill", i);
        server("restart", i);
        // Tried again while the ensemble settles. An acquire whose answer was
        // lost (outcome unknown) may have been applied: the next try then
        // finds the lease held by A itself, with that grant's token.
        coord::fence_token got = 0;
        for (int t = 0; t < 200 && got == 0; ++t) {
            auto l = store.lease_acquire("n", "A", 1h);
            if (l) got = l->token;
            else if (l.error() == coord::errc::lease_held && l.error().holder == "A") got = l.error().token;
            else if (l.error().code == coord::condition::refused) FAIL() << l.error().code.message() << " by " << l.error().holder;
            else std::this_thread::sleep_for(50ms);
        }
        ASSERT_NE(got, 0u) << "no grant after restarting server " << i;
        EXPECT_GT(got, last) << "after restarting server " << i;
        last = got;
        ASSERT_TRUE(store.lease_release("n", "A", got));
    }
    const int killed = leader();
    server("kill", killed);
    coord::fence_token got = 0;
    std::string refused;
    for (int t = 0; t < 200 && got == 0 && refused.empty(); ++t) {
        auto l = store.lease_acquire("n", "B", 1h);
        if (l) got = l->token;
        else if (l.error() == coord::errc::lease_held && l.error().holder == "B") got = l.error().token;  // as above
        else if (l.error().code == coord::condition::refused) refused = l.error().code.message() + " by " + l.error().holder;
        else std::this_thread::sleep_for(50ms);
    }
    server("restart", killed);
    ASSERT_TRUE(refused.empty()) << refused;
    ASSERT_NE(got, 0u) << "no grant after the election";
    EXPECT_GT(got, last) << "after an election";
    EXPECT_GT(got >> 32, first->token >> 32) << "a new epoch: the high half of the zxid";
}

}  // namespace
