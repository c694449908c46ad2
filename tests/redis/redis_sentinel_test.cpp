// SPDX-License-Identifier: Apache-2.0
// coord on a replicated Redis behind Sentinel (tests/redis/sentinel.sh,
// fixture RedisSentinel: a master, its replica, three Sentinels), the store
// opened from redis+sentinel://: the Sentinels name the master, coord checks
// it is one (ROLE) and follows a failover. Each test starts a fresh
// topology, kills the master with SIGKILL and lets the Sentinels promote the
// replica:
// - the replica had every write (WAIT): the next calls go to the new master
//   at once, and every promise holds (the fence refuses old tokens, lease
//   tokens grow, no segment ID again, the lease still held);
// - the replica missed the last writes (stopped while the master took them:
//   asynchronous replication, the seed's warning): the store object that saw
//   them refuses (state_went_back) instead of answering from the older
//   state; lease tokens still grow (they rest on the server's clock); a
//   process that remembers nothing cannot tell, and the recovery the README
//   gives (store init --force with floors) hands nothing out twice.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "coord/redis/store.hpp"
#include "redis/redis_support.hpp"
#include "support/failover_checks.hpp"

namespace {

using namespace std::chrono_literals;

std::string url() {
    const char* u = std::getenv("COORD_REDIS_SENTINEL_URL");
    if (!u || !*u) throw std::runtime_error("COORD_REDIS_SENTINEL_URL is not set: run through ctest (fixture RedisSentinel.start)");
    return u;
}
std::string script(const std::string& what) {
    return std::string(COORD_SENTINEL_SCRIPT) + " " + what + " '" + COORD_SENTINEL_DIR + "' " + COORD_SENTINEL_PORT;
}
void run(const std::string& what) { ASSERT_EQ(std::system(script(what).c_str()), 0) << script(what); }

coord::redis::options opts(const std::string& prefix) {
    auto o = coord::test::redis_options(prefix);
    o.operation_timeout = 5s;
    return o;
}

TEST(RedisSentinel, AFailoverToAReplicaThatHadEveryWriteIsFollowedAndEveryPromiseHolds) {
    run("start");
    const std::string prefix = coord::test::redis_fresh_prefix();
    coord::redis::store s(url(), {}, opts(prefix));
    ASSERT_TRUE(s.initialize(coord::redis::initial_floors{}));
    auto a = s.lease_acquire("n", "A", 1h);
    ASSERT_TRUE(a) << a.error().code.message();
    ASSERT_TRUE(s.fence_write("f", a->token, "by A"));
    auto ids = s.segment_allocate("ids", 10);
    ASSERT_TRUE(ids) << ids.error().message();
    run("replicated");
    run("kill-master");

    // The pooled connection's server is gone: the next call asks the
    // Sentinels again and goes to the promoted master, first time.
    coord::test::expect_every_promise_after_failover(s, *a, *ids);
    // A store opened now finds the new master too.
    coord::redis::store later(url(), {}, opts(prefix));
    auto again = later.fence_read("f");
    ASSERT_TRUE(again) << again.error().message();
    EXPECT_EQ(again->fence, a->token);
}

TEST(RedisSentinel, AFailoverToAReplicaThatMissedWritesIsRefusedNeverAbsorbed) {
    run("start");
    const std::string prefix = coord::test::redis_fresh_prefix();
    coord::redis::store s(url(), {}, opts(prefix));
    ASSERT_TRUE(s.initialize(coord::redis::initial_floors{}));
    ASSERT_TRUE(s.fence_write("f", 5, "five"));
    auto first = s.segment_allocate("ids", 10);
    ASSERT_TRUE(first);
    run("replicated");
    // The replica stops; the master acknowledges what follows, which the
    // replica never gets: the master dies before it can send it.
    run("pause-replica");
    ASSERT_TRUE(s.fence_write("f", 6, "six"));
    auto lost = s.segment_allocate("ids", 10);
    ASSERT_TRUE(lost);
    auto a = s.lease_acquire("n", "A", 1h);
    ASSERT_TRUE(a) << a.error().code.message();
    run("kill-master");  // resumes the replica, waits for its promotion

    // This store object saw the lost writes: it refuses what the older state
    // would hand out, each call, instead of absorbing the loss.
    auto w = s.fence_write("f", 6, "six again");
    ASSERT_FALSE(w) << "token 6 accepted twice";
    EXPECT_EQ(w.error(), coord::errc::state_went_back) << w.error().code.message();
    auto seg = s.segment_allocate("ids", 10);
    ASSERT_FALSE(seg) << "handed out " << seg->begin << " again (the lost range began at " << lost->begin << ")";
    EXPECT_EQ(seg.error(), coord::errc::state_went_back) << seg.error().message();
    EXPECT_EQ(s.fence_read("f").error(), coord::errc::state_went_back);
    // Lease tokens rest on the server's clock: they still grow.
    auto b = s.lease_acquire("n", "B", 1h);
    ASSERT_TRUE(b) << b.error().code.message();  // the lost grant is gone with the writes
    EXPECT_GT(b->token, a->token);

    // A process that remembers nothing cannot tell (the promoted replica is
    // a consistent older state); the README's recovery states floors above
    // what was handed out, and nothing is handed out twice.
    coord::redis::store fresh(url(), {}, opts(prefix));
    coord::redis::initial_floors floors;
    floors.segment = lost->end - 1;
    floors.fence_now = true;
    floors.ledger_now = true;
    ASSERT_TRUE(fresh.initialize(floors, /*replace=*/true));
    EXPECT_EQ(fresh.fence_write("f", 6, "late").error(), coord::errc::stale_fence);
    auto next = fresh.segment_allocate("ids", 10);
    ASSERT_TRUE(next) << next.error().message();
    EXPECT_GE(next->begin, lost->end) << "a segment ID handed out again";
    auto c = fresh.lease_acquire("m", "C", 1h);
    ASSERT_TRUE(c) << c.error().code.message();
    EXPECT_GT(c->token, a->token);
    ASSERT_TRUE(fresh.fence_write("f", c->token, "by C"));
}

// The loss of one process's last writes, covered by another's writes on
// the promoted replica before that process calls again: the store's
// generation is above what the first saw again, and only the first store
// object's own count of its writes tells that its acknowledged writes are
// gone.
TEST(RedisSentinel, ALossOtherClientsWroteOverIsStillRefusedToTheProcessThatSawIt) {
    run("start");
    const std::string prefix = coord::test::redis_fresh_prefix();
    coord::redis::store a(url(), {}, opts(prefix));
    coord::redis::store b(url(), {}, opts(prefix));
    ASSERT_TRUE(a.initialize(coord::redis::initial_floors{}));
    ASSERT_TRUE(a.fence_write("f", 5, "five"));
    ASSERT_TRUE(b.segment_allocate("ids", 10));
    run("replicated");
    run("pause-replica");
    ASSERT_TRUE(a.fence_write("f", 6, "six"));
    auto lost = a.segment_allocate("ids", 10);
    ASSERT_TRUE(lost);
    run("kill-master");

    // b never saw the lost writes: it cannot tell, and its calls raise the
    // generation past everything a saw (the lost range handed out again,
    // to b: what asynchronous replication loses, the README's Redis section).
    for (int i = 0; i < 5; ++i) {
        auto r = b.segment_allocate("ids", 10);
        ASSERT_TRUE(r) << r.error().message();
    }
    // a is refused, each call, instead of building on a state without its
    // acknowledged writes.
    auto w = a.fence_write("f", 6, "six again");
    ASSERT_FALSE(w) << "token 6 accepted twice";
    EXPECT_EQ(w.error(), coord::errc::state_went_back) << w.error().code.message();
    EXPECT_EQ(a.segment_allocate("ids", 10).error(), coord::errc::state_went_back);
    EXPECT_EQ(a.fence_read("f").error(), coord::errc::state_went_back);
}

// A failover asked for (the master alive, made a replica of the promoted
// one): the store's next write goes to the new master, never to the
// demoted one (which would refuse it: READONLY), and every later call too.
TEST(RedisSentinel, AManualFailoverSendsTheNextWriteToTheNewMaster) {
    run("start");
    const std::string prefix = coord::test::redis_fresh_prefix();
    coord::redis::store s(url(), {}, opts(prefix));
    ASSERT_TRUE(s.initialize(coord::redis::initial_floors{}));
    ASSERT_TRUE(s.fence_write("f", 5, "five"));
    run("failover");
    auto w = s.fence_write("f", 6, "six");
    ASSERT_TRUE(w) << w.error().code.message();
    for (int i = 7; i < 12; ++i) ASSERT_TRUE(s.fence_write("f", i, "more"));
    auto r = s.fence_read("f");
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->fence, 11u);
}

TEST(RedisSentinel, AMasterNameNoSentinelMonitorsIsRefused) {
    // A Sentinel URL whose master name no Sentinel monitors: refused when
    // the store is made, nothing written.
    const std::string bad = url().substr(0, url().rfind('/')) + "/not-monitored";
    try {
        coord::redis::store s(bad, {}, opts("x"));
        ADD_FAILURE() << "a master nobody monitors was found";
    } catch (const coord::store_error& e) {
        EXPECT_EQ(e.code(), coord::redis::errc::connection_failed) << e.what();
        EXPECT_NE(std::string(e.what()).find("not-monitored"), std::string::npos) << e.what();
    }
}

TEST(RedisSentinel, SentinelUrlsAreReadAndMalformedOnesRefused) {
    auto a = coord::redis::parse_url("redis+sentinel://127.0.0.1:26379,[::1],localhost:26380/mymaster/3");
    ASSERT_TRUE(a) << a.error();
    ASSERT_EQ(a->sentinels.size(), 3u);
    EXPECT_EQ(a->sentinels[1].host, "::1");
    EXPECT_EQ(a->sentinels[1].port, 26379);
    EXPECT_EQ(a->sentinels[2].port, 26380);
    EXPECT_EQ(a->master, "mymaster");
    EXPECT_EQ(a->db, 3);
    EXPECT_FALSE(a->tls);
    auto t = coord::redis::parse_url("rediss+sentinel://h:1/m");
    ASSERT_TRUE(t) << t.error();
    EXPECT_TRUE(t->tls);
    EXPECT_EQ(t->db, 0);
    for (const char* bad : {"redis+sentinel://h:1", "redis+sentinel://h:1/", "redis+sentinel://h:1/m/16",
                            "redis+sentinel://h:1/m a", "redis+sentinel://u:p@h:1/m", "redis+sentinel:///m",
                            "redis+sentinel://h:1,/m"})
        EXPECT_FALSE(coord::redis::parse_url(bad)) << bad;
}

}  // namespace
