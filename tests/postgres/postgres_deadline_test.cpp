// SPDX-License-Identifier: Apache-2.0
// Every call to a paused, silent or unreachable PostgreSQL returns within the
// store's operation timeout, with the condition that says what the caller
// may assume: unavailable (it certainly did not apply) or outcome_unknown (it
// may have). After the server resumes, the next call succeeds and nothing was
// applied twice. The server is the fixture's own, paused with SIGSTOP
// (tests/postgres/postgres.sh pause: the postmaster and every backend).
//
// The elapsed times checked here are hang guards (timeout plus a margin of
// seconds, against a wait that otherwise has no end), not speed claims.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "coord/fence.hpp"
#include "coord/job_ledger.hpp"
#include "coord/lease.hpp"
#include "coord/postgres/store.hpp"
#include "coord/segment.hpp"
#include "postgres/pg_support.hpp"

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

constexpr auto timeout = 700ms;
constexpr auto margin = 3s;  // a hang guard, generous for sanitizer builds

coord::postgres::options short_timeouts(std::size_t pool = 2) {
    return {.pool_size = pool, .operation_timeout = timeout, .connect_timeout = timeout};
}

// Pauses the fixture's server for as long as it lives (resumed even when the
// test fails half-way).
class paused_server {
public:
    explicit paused_server(bool now = true) {
        if (now) pause();
    }
    ~paused_server() { resume(); }
    paused_server(const paused_server&) = delete;
    paused_server& operator=(const paused_server&) = delete;
    void pause() {
        if (!paused_) {
            EXPECT_EQ(std::system(COORD_PG_PAUSE_COMMAND), 0) << COORD_PG_PAUSE_COMMAND;
        }
        paused_ = true;
    }
    void resume() {
        if (paused_) {
            EXPECT_EQ(std::system(COORD_PG_RESUME_COMMAND), 0) << COORD_PG_RESUME_COMMAND;
        }
        paused_ = false;
    }

private:
    bool paused_ = false;
};

// Runs f and returns how long it took.
template <class F>
steady::duration timed(F&& f) {
    const auto start = steady::now();
    f();
    return steady::now() - start;
}

TEST(PostgresDeadline, AFencedWriteToAPausedServerIsOutcomeUnknownInBoundedTimeAndTheFenceHolds) {
    coord::postgres::store store{coord::test::pg_fresh_schema(), {}, short_timeouts()};
    coord::basic_keyed_fenced_resource res{store};
    // Two writes: the second takes the common statement, prepared now, so
    // that the write during the pause is sent (a statement still to be
    // prepared would find no answer before anything was sent: not unknown).
    ASSERT_TRUE(res.write("k", 4, "before"));
    ASSERT_TRUE(res.write("k", 5, "before"));
    {
        paused_server paused;
        coord::result<void, coord::write_error> w;
        const auto took = timed([&] { w = res.write("k", 6, "during the pause"); });
        ASSERT_FALSE(w);
        EXPECT_EQ(w.error().code, coord::condition::outcome_unknown) << w.error().code.message();
        EXPECT_LT(took, timeout + margin);
        // A read certainly changes nothing: unavailable, with the engine's words.
        coord::result<coord::fenced_value> r;
        const auto took_read = timed([&] { r = res.read("k"); });
        ASSERT_FALSE(r);
        // (The write's timeout dropped the connection: the read's reconnect
        // is what finds no answer.)
        EXPECT_EQ(r.error(), coord::condition::unavailable) << r.error().message();
        EXPECT_NE(r.error().message().find("within"), std::string::npos) << r.error().message();
        EXPECT_LT(took_read, timeout + margin);
    }
    // Resumed: the write sent during the pause may have applied (the server
    // read it after SIGCONT) or not; either way the fence never goes back.
    auto after = res.write("k", 7, "after");
    ASSERT_TRUE(after) << after.error().code.message();
    EXPECT_EQ(res.write("k", 6, "late").error(), coord::errc::stale_fence);
    auto v = res.read("k");
    ASSERT_TRUE(v) << v.error().message();
    EXPECT_EQ(v->fence, 7u);
    EXPECT_EQ(v->value, "after");
}

TEST(PostgresDeadline, ALeaseAcquireOnAPausedServerIsOutcomeUnknownAndResolvesToOneHolder) {
    coord::postgres::store store{coord::test::pg_fresh_schema(), {}, short_timeouts()};
    coord::basic_lease_manager leases{store};
    // A connection is open and the statement prepared before the pause, so
    // that the acquire itself is what the paused server never answers.
    auto warm = leases.acquire("warm-up", "A", 30s);
    ASSERT_TRUE(warm) << warm.error().code.message();
    {
        paused_server paused;
        coord::result<coord::lease, coord::lease_error> l;
        const auto took = timed([&] { l = leases.acquire("primary", "A", 30s); });
        ASSERT_FALSE(l);
        EXPECT_EQ(l.error().code, coord::condition::outcome_unknown) << l.error().code.message();
        EXPECT_LT(took, timeout + margin);
    }
    // The acquire may still be granted after SIGCONT: the paused backend
    // reads it once it runs again, maybe after this test's next calls. So
    // no read-back decides here; whatever the order, there is one holder:
    // B gets the lease (token 1: A's grant never landed before it, and a
    // late one is refused), or B is refused because A holds it.
    auto b = leases.acquire("primary", "B", 30s);
    if (b) {
        EXPECT_EQ(b->token, 1u);
    } else {
        EXPECT_EQ(b.error().code, coord::errc::lease_held) << b.error().code.message();
        EXPECT_EQ(b.error().holder, "A");
    }
    auto a_again = leases.acquire("primary", "A", 30s);
    EXPECT_FALSE(a_again) << "two holders";
}

TEST(PostgresDeadline, ALedgerRunPausedAfterItsEffectWasSentHasExactlyOneEffectOnceResolved) {
    const std::string conninfo = coord::test::pg_fresh_schema();
    coord::test::pg_command(conninfo, "CREATE TABLE effects (slot text NOT NULL)");
    coord::postgres::store store{conninfo, {}, short_timeouts()};
    coord::basic_job_ledger<coord::postgres::store> ledger{store, {.lease_ttl = 2s}};
    const coord::slot s("billing", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
    int runs = 0;
    auto effect = [&](const coord::ledger_context& ctx) {
        ++runs;
        auto r = coord::postgres::store::effect_exec("INSERT INTO effects VALUES ($1)", {ctx.which.to_string()});
        if (!r) throw std::runtime_error(r.error().message());
        return std::string("charged");
    };
    coord::result<coord::run_outcome> first;
    {
        paused_server paused(false);  // the effect pauses it
        const auto took = timed([&] {
            first = ledger.run(s, "w1", "", [&](const coord::ledger_context& ctx) {
                auto out = effect(ctx);
                paused.pause();  // the done marker and COMMIT go to a paused server
                return out;
            });
        });
        ASSERT_FALSE(first);
        EXPECT_EQ(first.error(), coord::condition::outcome_unknown) << first.error().message();
        EXPECT_LT(took, timeout + margin);
    }
    // Resolved by running again: replayed if the COMMIT applied; granted
    // again (and applied once) if it did not, after the execution lease.
    coord::result<coord::run_outcome> again;
    for (int i = 0; i < 100; ++i) {
        again = ledger.run(s, "w2", "", effect);
        if (again && again->kind != coord::run_outcome::in_progress) break;
        std::this_thread::sleep_for(100ms);  // the server's clock ends the execution lease
    }
    ASSERT_TRUE(again) << again.error().message();
    EXPECT_TRUE(again->kind == coord::run_outcome::replayed || again->kind == coord::run_outcome::applied);
    EXPECT_EQ(again->result, "charged");
    EXPECT_EQ(coord::test::pg_query(conninfo, "SELECT count(*) FROM effects"), "1");
}

TEST(PostgresDeadline, ASegmentAllocationOnAPausedServerIsBoundedAndNoRangeIsServedTwice) {
    coord::postgres::store store{coord::test::pg_fresh_schema(), {}, short_timeouts()};
    ASSERT_TRUE(store.segment_allocate("orders", 100));  // the common statement prepared (see above)
    auto before = store.segment_allocate("orders", 100);
    ASSERT_TRUE(before) << before.error().message();
    {
        paused_server paused;
        coord::result<coord::segment_range> r;
        const auto took = timed([&] { r = store.segment_allocate("orders", 100); });
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error(), coord::condition::outcome_unknown) << r.error().message();
        EXPECT_LT(took, timeout + margin);
        // A generator waiting for its first range waits no longer than the store.
        coord::basic_segment_generator<coord::postgres::store> gen{store, {.initial_step = 10, .min_step = 10}};
        auto id = gen.tag("invoices").next();
        ASSERT_FALSE(id);
        EXPECT_EQ(id.error(), coord::errc::allocator_unavailable) << id.error().message();
        gen.quiesce();
    }
    // The range lost in the pause is skipped, never handed out again.
    auto after = store.segment_allocate("orders", 100);
    ASSERT_TRUE(after) << after.error().message();
    EXPECT_GE(after->begin, before->end);
}

TEST(PostgresDeadline, APortThatNeverAnswersTimesOutAtConnect) {
    // A listening socket that never accepts: the kernel completes the TCP
    // handshake, and no server ever speaks.
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::listen(fd, 16), 0);
    socklen_t len = sizeof addr;
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    const std::string conninfo = "host=127.0.0.1 port=" + std::to_string(ntohs(addr.sin_port)) + " dbname=none";
    const auto took = timed([&] {
        try {
            coord::postgres::store store{conninfo, {}, short_timeouts()};
            ADD_FAILURE() << "connected to a port that never answers";
        } catch (const coord::store_error& e) {
            EXPECT_EQ(e.code(), coord::postgres::errc::connection_failed) << e.what();
            EXPECT_NE(std::string(e.what()).find("connecting"), std::string::npos) << e.what();
        }
    });
    EXPECT_LT(took, timeout + margin);
    ::close(fd);
}

TEST(PostgresDeadline, ACallThatFindsNoFreeConnectionGivesUpAtItsDeadline) {
    const std::string conninfo = coord::test::pg_fresh_schema();
    coord::postgres::store store{conninfo, {}, short_timeouts(1)};
    coord::basic_job_ledger<coord::postgres::store> ledger{store};
    const coord::slot s("report", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
    coord::result<coord::fenced_value> starved;
    auto r = ledger.run(s, "w1", "", [&](const coord::ledger_context&) {
        // The only connection is this run's: another call waits, then gives up.
        std::thread other([&] { starved = store.fence_read("k"); });
        other.join();
        return std::string("ok");
    });
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_FALSE(starved);
    EXPECT_EQ(starved.error(), coord::postgres::errc::deadline_passed) << starved.error().message();
    EXPECT_EQ(starved.error(), coord::condition::unavailable);
    EXPECT_TRUE(store.fence_read("k"));  // and the pool serves again
}

TEST(PostgresDeadline, OutOfRangeTimeoutsAreRefused) {
    const auto conninfo = coord::test::pg_fresh_schema();
    EXPECT_THROW((coord::postgres::store{conninfo, {}, {.operation_timeout = 0ms}}), std::invalid_argument);
    EXPECT_THROW((coord::postgres::store{conninfo, {}, {.operation_timeout = 25h}}), std::invalid_argument);
    EXPECT_THROW((coord::postgres::store{conninfo, {}, {.connect_timeout = 0ms}}), std::invalid_argument);
    EXPECT_THROW((coord::postgres::store{conninfo, {}, {.keepalive_idle = 0s}}), std::invalid_argument);
}

}  // namespace
