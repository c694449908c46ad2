// SPDX-License-Identifier: Apache-2.0
// coord on a replicated PostgreSQL (tests/postgres/standby.sh, fixture
// PostgresStandby: a primary and a streaming standby), the store opened
// from a multi-host conninfo (host=A,B port=P,Q
// target_session_attrs=read-write): the primary killed with SIGKILL and the
// standby promoted, the store's next calls reach the new primary on their
// own. Synchronous (remote_apply): nothing acknowledged is lost: the fence
// refuses the old token, the lease is still held, tokens grow, no segment
// ID again. Asynchronous, the standby cut off before the last commits: the
// store object that saw them refuses (state_went_back) instead of answering
// from the older state, and the recovery hands nothing out twice.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "coord/postgres/store.hpp"
#include "postgres/pg_support.hpp"
#include "support/failover_checks.hpp"

namespace {

using namespace std::chrono_literals;

std::string conninfo() {
    const char* c = std::getenv("COORD_PG_STANDBY_CONNINFO");
    if (!c || !*c) throw std::runtime_error("COORD_PG_STANDBY_CONNINFO is not set: run through ctest (fixture PostgresStandby.start)");
    return c;
}
std::string script(const std::string& what, const std::string& mode) {
    return std::string(COORD_STANDBY_SCRIPT) + " " + what + " '" + COORD_STANDBY_DIR + "' " + COORD_STANDBY_PORT + " " + mode;
}
void run(const std::string& what, const std::string& mode = "sync") {
    ASSERT_EQ(std::system(script(what, mode).c_str()), 0) << script(what, mode);
}

TEST(PostgresStandby, AFailoverToASynchronousStandbyIsFollowedAndLosesNothingAcknowledged) {
    run("start");  // a fresh pair (the fixture's, or one a test before promoted)
    coord::postgres::store s{conninfo()};
    ASSERT_TRUE(s.initialize({}));
    auto a = s.lease_acquire("n", "A", 1h);
    ASSERT_TRUE(a) << a.error().code.message();
    ASSERT_TRUE(s.fence_write("f", a->token, "by A"));
    auto ids = s.segment_allocate("ids", 10);
    ASSERT_TRUE(ids) << ids.error().message();
    run("kill-primary");

    // The pooled connection's server is gone: the next call connects again
    // through the conninfo's hosts, to the one that takes writes now.
    coord::test::expect_every_promise_after_failover(s, *a, *ids);
    ASSERT_TRUE(s.fence_write("f", a->token + 1, "after"));
    // A store opened now reaches the new primary too.
    coord::postgres::store later{conninfo()};
    auto again = later.fence_read("f");
    ASSERT_TRUE(again) << again.error().message();
    EXPECT_EQ(again->value, "after");
}

TEST(PostgresStandby, AFailoverToAnAsynchronousStandbyThatLackedTheLastCommitsIsRefusedNotAbsorbed) {
    run("start", "async");
    coord::postgres::store s{conninfo()};
    ASSERT_TRUE(s.initialize({}));
    auto a = s.lease_acquire("n", "A", 1h);
    ASSERT_TRUE(a) << a.error().code.message();
    ASSERT_TRUE(s.fence_write("f", a->token, "by A"));
    auto kept = s.segment_allocate("ids", 10);
    ASSERT_TRUE(kept) << kept.error().message();
    run("caught-up");
    // The standby stops and its link is cut; the primary acknowledges what
    // follows, which the standby never gets: then the primary dies and the
    // standby is promoted (as a failover manager would).
    run("cut-standby");
    ASSERT_TRUE(s.fence_write("f", a->token + 10, "lost"));
    auto lost = s.segment_allocate("ids", 10);
    ASSERT_TRUE(lost) << lost.error().message();
    run("kill-primary");

    // This store object saw the lost commits: it refuses what the older
    // state would answer, each call, instead of absorbing the loss. (Token
    // a + 5 is below the lost write's: the older record would take it.)
    auto w = s.fence_write("f", a->token + 5, "between");
    ASSERT_FALSE(w) << "token " << a->token + 5 << " accepted after " << a->token + 10;
    EXPECT_EQ(w.error(), coord::errc::state_went_back) << w.error().code.message();
    auto seg = s.segment_allocate("ids", 10);
    ASSERT_FALSE(seg) << "handed out " << seg->begin << " again (the lost range began at " << lost->begin << ")";
    EXPECT_EQ(seg.error(), coord::errc::state_went_back) << seg.error().message();
    EXPECT_NE(seg.error().message().find("store init --force"), std::string::npos) << seg.error().message();
    EXPECT_EQ(s.fence_read("f").error(), coord::errc::state_went_back);
    // Lease tokens rest on the server's clock: they still grow.
    auto b = s.lease_acquire("m", "B", 1h);
    ASSERT_TRUE(b) << b.error().code.message();
    EXPECT_GT(b->token, a->token);

    // A process that opens the store now cannot tell (the promoted standby
    // is a consistent older state); the recovery states floors above what
    // was handed out, and nothing is handed out twice.
    coord::postgres::store fresh{conninfo()};
    coord::initial_floors floors;
    floors.segment = lost->end - 1;
    floors.fence_now = true;
    floors.ledger_now = true;
    ASSERT_TRUE(fresh.initialize(floors, /*replace=*/true));
    EXPECT_EQ(fresh.fence_write("f", a->token + 5, "late").error(), coord::errc::stale_fence);
    auto next = fresh.segment_allocate("ids", 10);
    ASSERT_TRUE(next) << next.error().message();
    EXPECT_GE(next->begin, lost->end) << "a segment ID handed out again";
}

// A store object with several pooled connections: a commit lost on one of
// them is refused on the others too (each call checks the other writers'
// rows against what they saw acknowledged, schema migration 9), also by the
// statements that check the store themselves (the fenced write, the segment
// allocation); and the recovery run by that same store object lets its
// calls through again. fence_update runs its function while holding a
// connection, so a call inside it takes another one.
TEST(PostgresStandby, ACommitLostOnOneConnectionIsRefusedOnTheStoreObjectsOtherConnections) {
    run("start", "async");
    coord::postgres::options two;
    two.pool_size = 2;
    coord::postgres::store s{conninfo(), {}, two};
    ASSERT_TRUE(s.initialize({}));
    // Both connections write: the outer call's (C1) and the one inside it (C2).
    ASSERT_TRUE(s.fence_update("k", 1, [&](std::string& v) {
        v = "outer";
        ASSERT_TRUE(s.fence_write("f", 1, "by C2")) << "a second connection";
    }));
    auto kept = s.segment_allocate("ids", 10);
    ASSERT_TRUE(kept) << kept.error().message();
    run("caught-up");
    run("cut-standby");
    // Lost: a commit on C2 only (C1's transaction, around it, rolls back).
    struct rolled_back {};
    EXPECT_THROW((void)s.fence_update("k", 2, [&](std::string&) {
        ASSERT_TRUE(s.fence_write("f", 10, "lost, on C2"));
        throw rolled_back{};
    }), rolled_back);
    run("kill-primary");

    // The next calls take C1, whose own writes all survived: refused all the
    // same, on the guarded path and on the hot statements' own check.
    auto w = s.fence_write("f", 5, "between");
    ASSERT_FALSE(w) << "token 5 accepted after 10 (the older record would take it)";
    EXPECT_EQ(w.error(), coord::errc::state_went_back) << w.error().code.message();
    auto r = s.fence_read("f");
    ASSERT_FALSE(r) << "answered " << r->value << " from the older state";
    EXPECT_EQ(r.error(), coord::errc::state_went_back) << r.error().message();
    auto seg = s.segment_allocate("ids", 10);
    ASSERT_FALSE(seg) << "handed out " << seg->begin << " after a loss";
    EXPECT_EQ(seg.error(), coord::errc::state_went_back) << seg.error().message();

    // The recovery, by this store object: its calls go through again, above the floors.
    coord::initial_floors floors;
    floors.segment = kept->end + 100;
    floors.fence_now = true;
    floors.ledger_now = true;
    ASSERT_TRUE(s.initialize(floors, /*replace=*/true));
    EXPECT_EQ(s.fence_write("f", 11, "late").error(), coord::errc::stale_fence);
    auto next = s.segment_allocate("ids", 10);
    ASSERT_TRUE(next) << next.error().message();
    EXPECT_GT(next->begin, floors.segment);
    ASSERT_TRUE(s.fence_update("k", coord::fence_token{1} << 62, [&](std::string&) {
        ASSERT_TRUE(s.fence_write("g", coord::fence_token{1} << 62, "both connections again"));
    }));
}

// A store object's writes are counted per pooled connection (schema
// migration 7): a row untouched for 30 days is swept, and a writer that finds
// its row swept after its last touch is not refused; one that finds it gone
// without a sweep is (the database lost its writes).
TEST(PostgresStandby, AWriterWhoseRowWasSweptIsNotRefusedOneWhoseRowWasLostIs) {
    run("start");
    const std::string ci = conninfo();
    coord::postgres::store s{ci};
    ASSERT_TRUE(s.initialize({}));
    ASSERT_TRUE(s.fence_write("f", 1, "one"));
    ASSERT_TRUE(s.fence_write("f", 2, "two"));
    auto admin = [&](const std::string& sql) { coord::test::pg_command(ci, sql); };
    // Swept after its last touch: the row gone, the sweep's cutoff above it.
    admin("DELETE FROM coord_writer; INSERT INTO coord_writer_swept VALUES (1, coord_now_ns() / 1000000 + 1) "
          "ON CONFLICT (id) DO UPDATE SET before_ms = EXCLUDED.before_ms");
    ASSERT_TRUE(s.fence_write("f", 3, "three")) << "a swept writer refused";
    ASSERT_TRUE(s.segment_allocate("ids", 10));
    // Gone with no sweep after its last touch: lost.
    admin("DELETE FROM coord_writer; UPDATE coord_writer_swept SET before_ms = 0");
    auto w = s.fence_write("f", 4, "four");
    ASSERT_FALSE(w) << "a writer whose acknowledged writes are gone was not refused";
    EXPECT_EQ(w.error(), coord::errc::state_went_back) << w.error().code.message();
    // A count below what the writer saw acknowledged: lost too.
    coord::postgres::store t{ci};
    ASSERT_TRUE(t.fence_write("g", 1, "one"));
    ASSERT_TRUE(t.fence_write("g", 2, "two"));
    admin("UPDATE coord_writer SET n = n - 1");
    auto v = t.fence_write("g", 3, "three");
    ASSERT_FALSE(v) << "a writer whose last write is gone was not refused";
    EXPECT_EQ(v.error(), coord::errc::state_went_back) << v.error().code.message();
}

}  // namespace
