// SPDX-License-Identifier: Apache-2.0
// PostgreSQL-only behaviour: leases judged on the server's clock, clear
// errors for a bad server, and recovery across a server restart.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>

#include "coord/fence.hpp"
#include "coord/job_ledger.hpp"
#include "coord/lease.hpp"
#include "coord/session.hpp"
#include "postgres/pg_support.hpp"
#include "support/failover_checks.hpp"
#include "support/lease_watch_check.hpp"

namespace {

using namespace std::chrono_literals;

// The everyday names on this engine (coord/detail/store_aliases.hpp).
static_assert(std::is_same_v<coord::postgres::lease_manager, coord::basic_lease_manager<coord::postgres::store>>);
static_assert(std::is_same_v<coord::postgres::fenced_resource, coord::basic_fenced_resource<coord::postgres::store>>);
static_assert(std::is_same_v<coord::postgres::snowflake,
                             coord::basic_snowflake<coord::default_layout, coord::system_clock, coord::postgres::store>>);
static_assert(std::is_same_v<coord::postgres::segment_generator, coord::basic_segment_generator<coord::postgres::store>>);
static_assert(std::is_same_v<coord::postgres::job_ledger, coord::basic_job_ledger<coord::postgres::store>>);
static_assert(std::is_same_v<coord::postgres::session_manager, coord::basic_session_manager<coord::postgres::store>>);

TEST(Postgres, LeaseExpiryIsOnTheServerClock) {
    coord::postgres::store store{coord::test::pg_fresh_schema()};
    const auto before = store.server_now_ns();
    ASSERT_TRUE(before) << before.error().message();
    auto l = store.lease_acquire("db-primary", "A", 1h);
    ASSERT_TRUE(l) << l.error().code.message();
    const auto after = store.server_now_ns();
    ASSERT_TRUE(after);
    // expires_at is the server's now + ttl, whatever this process's clock says.
    EXPECT_GE(l->expires_at.count(), *before + std::chrono::nanoseconds(1h).count());
    EXPECT_LE(l->expires_at.count(), *after + std::chrono::nanoseconds(1h).count());
    auto b = store.lease_acquire("db-primary", "B", 1h);
    ASSERT_FALSE(b);
    EXPECT_EQ(b.error(), coord::errc::lease_held);
    EXPECT_EQ(b.error().holder, "A");
}

// A database made by the schema main had on 2026-12-01 (before versions were
// recorded), with rows in every table it uses, is upgraded by the first
// store that opens it: nothing is lost and the new rules apply.
TEST(Postgres, ALeaseWatchWakesAtAGrantAndARelease) {
    const auto conninfo = coord::test::pg_fresh_schema();
    coord::postgres::store store{conninfo};
    coord::postgres::store other{conninfo};
    coord::test::expect_lease_watch_wakes(store, other, /*rearms=*/false);
}

// A lease token rests on the row's counter and on the server's clock: a
// grant's token is at least the clock's microseconds, so a schema restored
// from an older pg_dump never hands out a token again.
TEST(PostgresRestore, ASchemaRestoredFromAnOlderDumpNeverHandsOutALeaseTokenAgain) {
    const auto conninfo = coord::test::pg_fresh_schema();
    const auto at = conninfo.find("search_path=") + 12;
    const std::string schema = conninfo.substr(at, conninfo.find_first_of(" '", at) - at);
    const std::string base = coord::test::pg_conninfo();
    const char* bin_env = std::getenv("COORD_PG_BIN");
    const std::string bin = bin_env && *bin_env ? bin_env : "/usr/lib/postgresql/15/bin";
    const std::string dump = "/tmp/coord-pg-dump-" + schema + ".sql";
    {
        coord::postgres::store store{conninfo};
        auto a = store.lease_acquire("n", "A", 1h);
        ASSERT_TRUE(a);
        ASSERT_TRUE(store.lease_release("n", "A", a->token));
    }
    const std::string save = "'" + bin + "/pg_dump' -d '" + base + "' -n " + schema + " -f '" + dump + "'";
    ASSERT_EQ(std::system(save.c_str()), 0) << save;
    coord::fence_token highest = 0;
    {
        coord::postgres::store store{conninfo};
        for (int i = 0; i < 3; ++i) {
            auto b = store.lease_acquire("n", "B", 1h);
            ASSERT_TRUE(b);
            highest = b->token;
            ASSERT_TRUE(store.lease_release("n", "B", b->token));
        }
    }
    coord::test::pg_command(base, "SET client_min_messages = warning; DROP SCHEMA " + schema + " CASCADE");
    const std::string restore = "'" + bin + "/psql' -q -v ON_ERROR_STOP=1 -d '" + base + "' -f '" + dump + "' >/dev/null";
    ASSERT_EQ(std::system(restore.c_str()), 0) << restore;
    std::remove(dump.c_str());
    coord::postgres::store store{conninfo};
    auto c = store.lease_acquire("n", "C", 1h);
    ASSERT_TRUE(c);
    EXPECT_GT(c->token, highest);
}

namespace restore {

std::string bin() {
    const char* env = std::getenv("COORD_PG_BIN");
    return env && *env ? env : "/usr/lib/postgresql/15/bin";
}

// pg_dump of coord's schema into `file` (plain SQL), as an operator's backup.
void dump(const std::string& schema, const std::string& file) {
    const std::string cmd = "'" + bin() + "/pg_dump' -d '" + coord::test::pg_conninfo() + "' -n " + schema + " -f '" + file + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// The schema dropped and restored from the dump with psql (the test drops
// coord's schema, not the database the other tests share).
void drop_and_restore(const std::string& schema, const std::string& file) {
    coord::test::pg_command(coord::test::pg_conninfo(), "SET client_min_messages = warning; DROP SCHEMA " + schema + " CASCADE");
    const std::string cmd = "'" + bin() + "/psql' -q -v ON_ERROR_STOP=1 -d '" + coord::test::pg_conninfo() + "' -f '" + file +
                            "' >/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::remove(file.c_str());
}

}  // namespace restore

// A store object that saw a later state refuses every call but the lease's
// (whose tokens never go back) after the schema was restored from an older
// pg_dump (the guard: the identity row was
// written again); a process started after the restore cannot tell, and the
// recovery the README gives (store init --force with floors) hands out no
// lease token, fence acceptance, segment ID or done slot twice.
TEST(PostgresRestore, ASchemaRestoredFromADumpIsRefusedByAStoreThatSawLaterStateAndTheRecoveryHandsNothingOutTwice) {
    const auto conninfo = coord::test::pg_fresh_schema();
    const std::string schema = coord::test::pg_schema_of(conninfo);
    const std::string file = "/tmp/coord-pg-dump-" + schema + ".sql";
    coord::postgres::store store{conninfo};
    auto first = store.segment_allocate("ids", 100);
    ASSERT_TRUE(first) << first.error().message();
    ASSERT_TRUE(store.fence_write("g", 1, "in the dump"));
    restore::dump(schema, file);

    // After the backup: a lease, fenced writes (to a key the dump has and
    // to one it has not), IDs, a done slot.
    auto a = store.lease_acquire("n", "A", 1h);
    ASSERT_TRUE(a) << a.error().code.message();
    ASSERT_TRUE(store.fence_write("f", a->token, "by A"));
    ASSERT_TRUE(store.fence_write("g", a->token, "by A"));
    auto ids = store.segment_allocate("ids", 100);
    ASSERT_TRUE(ids) << ids.error().message();
    auto c = store.ledger_claim(coord::test::old_slot_claim("job@1"));
    ASSERT_TRUE(c && c->kind == coord::claim_outcome::granted);
    ASSERT_TRUE(store.ledger_complete("job@1", c->fence, "done", 24h));

    restore::drop_and_restore(schema, file);

    // The store object that saw the later state: every call refused.
    auto f = store.fence_write("f", 1, "late");
    ASSERT_FALSE(f) << "token 1 accepted after " << a->token;
    EXPECT_EQ(f.error(), coord::errc::state_went_back) << f.error().code.message();
    EXPECT_EQ(f.error().code, coord::condition::corrupt_state);
    auto g = store.fence_write("g", 2, "late");  // the dump's record says 1
    ASSERT_FALSE(g) << "token 2 accepted after " << a->token;
    EXPECT_EQ(g.error(), coord::errc::state_went_back) << g.error().code.message();
    auto s = store.segment_allocate("ids", 100);
    ASSERT_FALSE(s) << "handed out " << s->begin << " again";
    EXPECT_EQ(s.error(), coord::errc::state_went_back) << s.error().message();
    EXPECT_NE(s.error().message().find("store init --force"), std::string::npos) << s.error().message();
    auto replay = store.ledger_claim(coord::test::old_slot_claim("job@1"));
    ASSERT_FALSE(replay) << "the done slot was answered with kind " << static_cast<int>(replay->kind);
    EXPECT_EQ(replay.error(), coord::errc::state_went_back) << replay.error().message();
    // Leases carry no guard: a token rests on the server's clock, so the
    // grant on the older state is still larger than A's.
    auto l = store.lease_acquire("n", "B", 1h);
    ASSERT_TRUE(l) << l.error().code.message();
    EXPECT_GT(l->token, a->token);
    ASSERT_TRUE(store.lease_release("n", "B", l->token));

    // A process started after the restore cannot tell (its state is the
    // dump's): it would hand out IDs again, which is what the recovery is for.
    coord::postgres::store fresh{conninfo};
    auto blind = fresh.segment_allocate("ids", 1);
    ASSERT_TRUE(blind) << blind.error().message();
    EXPECT_LT(blind->begin, ids->end);  // the reason for the recovery below

    // The recovery: initialized again with floors above what it handed out.
    coord::initial_floors floors;
    floors.segment = ids->end - 1;
    floors.fence_now = true;
    floors.ledger_now = true;
    auto init = fresh.initialize(floors);
    ASSERT_FALSE(init);
    EXPECT_EQ(init.error(), coord::errc::store_already_initialized) << init.error().message();
    ASSERT_TRUE(fresh.initialize(floors, /*replace=*/true));
    auto stale = fresh.fence_write("f", a->token, "late");
    ASSERT_FALSE(stale) << "A's token " << a->token << " accepted after the recovery";
    EXPECT_EQ(stale.error(), coord::errc::stale_fence);
    coord::test::expect_ledger_fences_above_the_fence_floor(fresh, a->token);
    auto b = fresh.lease_acquire("n", "B", 1h);
    ASSERT_TRUE(b) << b.error().code.message();
    EXPECT_GT(b->token, a->token);
    ASSERT_TRUE(fresh.fence_write("f", b->token, "by B"));
    auto more = fresh.segment_allocate("ids", 100);
    ASSERT_TRUE(more) << more.error().message();
    EXPECT_GE(more->begin, ids->end);
    auto other = fresh.segment_allocate("a tag the dump never had", 1);
    ASSERT_TRUE(other);
    EXPECT_GE(other->begin, ids->end);
    auto done = fresh.ledger_claim(coord::test::old_slot_claim("job@1"));
    ASSERT_TRUE(done) << done.error().message();
    EXPECT_EQ(done->kind, coord::claim_outcome::expired);  // not run again
    // The object that saw the old store: the identity changed.
    auto old = store.segment_allocate("ids", 1);
    ASSERT_FALSE(old);
    EXPECT_EQ(old.error(), coord::errc::store_identity_changed) << old.error().message();
}

// Opening never makes a store: a schema never initialized, or dropped and
// made again by a process that opened it, answers nothing until store init;
// a store object that saw it initialized calls the loss a store that went
// back.
TEST(PostgresRestore, ASchemaNeverInitializedOrDroppedIsRefusedAndNeverMadeAgainByOpeningIt) {
    const auto conninfo = coord::test::pg_new_schema();
    {
        coord::postgres::store store{conninfo};
        auto f = store.fence_write("f", 5, "x");
        ASSERT_FALSE(f);
        EXPECT_EQ(f.error(), coord::errc::store_uninitialized) << f.error().code.message();
        EXPECT_NE(f.error().code.message().find("coordctl store init"), std::string::npos) << f.error().code.message();
        auto s = store.segment_allocate("ids", 1);
        ASSERT_FALSE(s) << "handed out " << s->begin << " from a store never initialized";
        EXPECT_EQ(s.error(), coord::errc::store_uninitialized) << s.error().message();
        // Leases need no store: their tokens rest on the server's clock.
        auto l = store.lease_acquire("n", "A", 1s);
        ASSERT_TRUE(l) << l.error().code.message();
        ASSERT_TRUE(store.lease_release("n", "A", l->token));
        EXPECT_EQ(*store.server_identity(), "");
        auto id = store.initialize({});
        ASSERT_TRUE(id) << id.error().message();
        EXPECT_EQ(*store.server_identity(), *id);
        ASSERT_TRUE(store.fence_write("f", 5, "x"));  // the store that initialized goes on
    }
    coord::postgres::store store{conninfo};
    ASSERT_TRUE(store.fence_write("f", 6, "y"));
    const std::string schema = coord::test::pg_schema_of(conninfo);
    coord::test::pg_command(coord::test::pg_conninfo(), "SET client_min_messages = warning; DROP SCHEMA " + schema +
                                                            " CASCADE; CREATE SCHEMA " + schema);
    auto gone = store.fence_write("f", 7, "z");
    ASSERT_FALSE(gone);
    EXPECT_EQ(gone.error(), coord::errc::state_went_back) << gone.error().code.message();
    coord::postgres::store reopened{conninfo};  // makes the tables, not the store
    auto again = reopened.fence_write("f", 1, "from nothing");
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error(), coord::errc::store_uninitialized) << again.error().code.message();
    auto late = store.fence_write("f", 7, "z");
    ASSERT_FALSE(late);
    EXPECT_EQ(late.error(), coord::errc::state_went_back) << late.error().code.message();
}

TEST(PostgresSchema, UpgradesADatabaseOfTheSchemaOf20261201WithoutLosingData) {
    const auto conninfo = coord::test::pg_new_schema();
    std::ifstream in(std::string(COORD_TEST_PG_DATA_DIR) + "/schema_main_2026-12-01.sql");
    ASSERT_TRUE(in) << "the frozen schema file is missing";
    std::stringstream old_schema;
    old_schema << in.rdbuf();
    coord::test::pg_command(conninfo, "SET client_min_messages = warning; " + old_schema.str());
    // Rows written through that schema's own functions and tables.
    EXPECT_EQ(coord::test::pg_query(conninfo, "SELECT o_token FROM coord_lease_acquire('job', 'A', 3600000000000, NULL)"), "1");
    coord::test::pg_command(conninfo, "INSERT INTO coord_fence VALUES ('orders', 7, true, false, 0, 'seven')");
    coord::test::pg_command(conninfo, "INSERT INTO coord_segment VALUES ('ids', 1001)");
    EXPECT_EQ(coord::test::pg_query(conninfo, "SELECT o_kind FROM coord_ledger_claim('billing@2026-10-13T09:00:00Z', "
                                              "1791882000000, 0, 'w', 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', coord_now_ns(), coord_now_ns() + 1000)"),
              "0");
    coord::test::pg_command(conninfo, "UPDATE coord_ledger SET state = 2, result = 'done once', retain_until_ns = "
                                      "9000000000000000000 WHERE key = 'billing@2026-10-13T09:00:00Z'");
    coord::postgres::store store{conninfo};
    EXPECT_EQ(*store.database_schema_version(), coord::postgres::schema_version());
    auto holder = store.lease_read("job");
    ASSERT_TRUE(holder && *holder);
    EXPECT_EQ((*holder)->owner, "A");
    EXPECT_EQ(store.lease_acquire("job", "B", 1s).error(), coord::errc::lease_held);
    auto fence = store.fence_read("orders");
    ASSERT_TRUE(fence);
    EXPECT_EQ(fence->fence, 7u);
    EXPECT_EQ(fence->value, "seven");
    EXPECT_EQ(store.fence_write("orders", 6, "six").error(), coord::errc::stale_fence);
    EXPECT_EQ(store.segment_allocate("ids", 10)->begin, 1001u);
    // The ledger row replays; the new claim (the server's now) works on it.
    coord::basic_job_ledger<coord::postgres::store> ledger{store, {.lease_ttl = std::chrono::minutes(1),
                                                                   .replay_window = std::chrono::hours(24 * 365 * 50),
                                                                   .retention = std::chrono::hours(24 * 365 * 50)}};
    auto replay = ledger.claim(*coord::slot::parse("billing@2026-10-13T09:00Z"), "w2");
    ASSERT_TRUE(replay) << replay.error().message();
    EXPECT_EQ(replay->kind, coord::claim_outcome::replayed);
    EXPECT_EQ(replay->result, "done once");
    coord::basic_session_manager<coord::postgres::store> sessions{store};
    auto s = sessions.create("alice");
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_TRUE(sessions.load(s->id));
    // A second store finds the schema current and changes nothing.
    coord::postgres::store again{conninfo};
    EXPECT_EQ(*again.database_schema_version(), coord::postgres::schema_version());
    EXPECT_EQ(again.fence_read("orders")->value, "seven");
}

// A database whose schema is newer than this library is refused with a
// clear error, and nothing is written to it.
TEST(PostgresSchema, ANewerSchemaIsRefused) {
    const auto conninfo = coord::test::pg_fresh_schema();
    { coord::postgres::store first{conninfo}; }
    coord::test::pg_command(conninfo, "UPDATE coord_schema SET version = 99");
    try {
        coord::postgres::store store{conninfo};
        ADD_FAILURE() << "opened a database with a newer schema";
    } catch (const coord::store_error& e) {
        EXPECT_EQ(e.code(), coord::postgres::make_error_code(coord::postgres::errc::schema_too_new));
        EXPECT_NE(std::string(e.what()).find("version 99"), std::string::npos) << e.what();
        EXPECT_EQ(e.code(), coord::condition::unavailable);
    }
    EXPECT_EQ(coord::test::pg_query(conninfo, "SELECT version FROM coord_schema"), "99");
}

// A pool of connections: a call holds one for its whole step, so a long
// ledger transaction does not stop another thread's call (one connection
// behind a mutex did), and a transaction stays on its own connection.
TEST(PostgresPool, ACallProceedsWhileAnotherThreadsTransactionIsOpen) {
    coord::postgres::store store{coord::test::pg_fresh_schema(), {}, {.pool_size = 2}};
    coord::basic_job_ledger<coord::postgres::store> ledger{
        store, {.replay_window = std::chrono::hours(24 * 365 * 50), .retention = std::chrono::hours(24 * 365 * 50)}};
    std::mutex m;
    std::condition_variable cv;
    bool written = false, timed_out = false;
    std::thread runner([&] {
        auto r = ledger.run(*coord::slot::parse("long@2026-10-13T09:00Z"), "A", "", [&](const coord::ledger_context&) {
            std::unique_lock lk(m);
            // Inside the open transaction: the other thread's write must get through.
            timed_out = !cv.wait_for(lk, std::chrono::seconds(60), [&] { return written; });
            auto rows = coord::postgres::store::effect_exec("SELECT 1");
            return std::string(rows ? "effect on the run's connection" : "no connection");
        });
        EXPECT_TRUE(r && r->kind == coord::run_outcome::applied);
        EXPECT_EQ(r->result, "effect on the run's connection");
    });
    ASSERT_TRUE(store.fence_write("k", 1, "while a transaction is open"));
    {
        std::lock_guard lk(m);
        written = true;
    }
    cv.notify_all();
    runner.join();
    EXPECT_FALSE(timed_out) << "a call waited for another thread's transaction";
}

TEST(PostgresPool, ManyThreadsOnAFewConnectionsKeepEveryPromise) {
    coord::postgres::store store{coord::test::pg_fresh_schema(), {}, {.pool_size = 3}};
    constexpr int threads = 8, per_thread = 25;
    std::vector<std::thread> pool;
    std::vector<std::vector<std::uint64_t>> ids(threads);
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            for (int i = 0; i < per_thread; ++i) {
                auto r = store.segment_allocate("ids", 1);
                if (r) ids[t].push_back(r->begin);
                (void)store.fence_update("counter", 1, [](std::string& v) { v = std::to_string(v.empty() ? 1 : std::stoi(v) + 1); });
            }
        });
    for (auto& th : pool) th.join();
    std::vector<std::uint64_t> all;
    for (auto& v : ids) all.insert(all.end(), v.begin(), v.end());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all.size(), static_cast<std::size_t>(threads * per_thread));
    EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
    EXPECT_EQ(store.fence_read("counter")->value, std::to_string(threads * per_thread));
    EXPECT_THROW((coord::postgres::store{coord::test::pg_fresh_schema(), {}, {.pool_size = 0}}), std::invalid_argument);
    EXPECT_THROW((coord::postgres::store{coord::test::pg_fresh_schema(), {}, {.pool_size = 65}}), std::invalid_argument);
}

TEST(Postgres, UnreachableServerIsAClearError) {
    try {
        coord::postgres::store store{"host=127.0.0.1 port=1 dbname=none connect_timeout=2"};
        FAIL() << "connected to a server that does not exist";
    } catch (const coord::store_error& e) {
        EXPECT_EQ(e.code(), coord::postgres::errc::connection_failed);
        EXPECT_NE(std::string(e.what()).find("PostgreSQL"), std::string::npos) << e.what();
    }
}

TEST(Postgres, ServerRestartGivesErrorsThenRecoversWithNothingLost) {
    const std::string conninfo = coord::test::pg_fresh_schema();
    coord::postgres::store store{conninfo};
    coord::basic_keyed_fenced_resource res{store};
    ASSERT_TRUE(res.write("k", 5, "before"));
    // The fixture's server, restarted on its own data (tests/postgres/postgres.sh restart).
    ASSERT_EQ(std::system(COORD_PG_RESTART_COMMAND), 0) << COORD_PG_RESTART_COMMAND;
    // The old connection is dead: the first call reports it (a write that may
    // have been sent is "outcome unknown", never success or failure) ...
    auto first = res.write("k", 6, "during");
    if (!first) {
        EXPECT_TRUE(first.error().code == coord::errc::outcome_unknown ||
                    first.error().code == coord::postgres::errc::connection_failed)
            << first.error().code.message();
    }
    // ... and the next call reconnects. The fence held: nothing went back.
    auto again = res.write("k", 7, "after");
    ASSERT_TRUE(again) << again.error().code.message();
    EXPECT_EQ(res.write("k", 4, "stale").error(), coord::errc::stale_fence);
    auto v = res.read("k");
    ASSERT_TRUE(v);
    EXPECT_EQ(v->fence, 7u);
    EXPECT_EQ(v->value, "after");
}

}  // namespace

namespace {

// The effect's writes and the done marker share the run's transaction: an
// effect that throws leaves no row behind, the attempt is recorded as failed,
// and the next run applies the effect once.
TEST(Postgres, LedgerEffectCommitsWithTheMarkerAndRollsBackWhenItThrows) {
    const std::string conninfo = coord::test::pg_fresh_schema();
    coord::postgres::store store{conninfo};
    coord::test::pg_command(conninfo, "CREATE TABLE effects (slot text NOT NULL)");
    coord::basic_job_ledger<coord::postgres::store> ledger{store};
    const coord::slot s("billing", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
    auto insert = [](const coord::ledger_context& ctx) {
        auto r = coord::postgres::store::effect_exec("INSERT INTO effects VALUES ($1)", {ctx.which.to_string()});
        if (!r) throw std::runtime_error("insert failed: " + r.error().message());
    };
    EXPECT_THROW((void)ledger.run(s, "w1", "", [&](const coord::ledger_context& ctx) -> std::string {
                     insert(ctx);
                     throw std::runtime_error("downstream failed after the insert");
                 }),
                 std::runtime_error);
    EXPECT_EQ(coord::test::pg_query(conninfo, "SELECT count(*) FROM effects"), "0");
    auto rec = store.ledger_read(s.to_string());
    ASSERT_TRUE(rec && *rec);
    EXPECT_EQ((*rec)->state, coord::ledger_record::state_t::idle);
    EXPECT_EQ((*rec)->attempt, 1u);
    EXPECT_EQ((*rec)->fail_reason, "downstream failed after the insert");
    auto ok = ledger.run(s, "w2", "", [&](const coord::ledger_context& ctx) {
        insert(ctx);
        return std::string("done");
    });
    ASSERT_TRUE(ok) << ok.error().message();
    EXPECT_EQ(ok->kind, coord::run_outcome::applied);
    auto again = ledger.run(s, "w3", "", [&](const coord::ledger_context& ctx) {
        insert(ctx);
        return std::string("twice?");
    });
    ASSERT_TRUE(again);
    EXPECT_EQ(again->kind, coord::run_outcome::replayed);
    EXPECT_EQ(again->result, "done");
    EXPECT_EQ(coord::test::pg_query(conninfo, "SELECT count(*) FROM effects"), "1");
    EXPECT_EQ(coord::postgres::store::effect_exec("SELECT 1").error(), coord::postgres::errc::server_refused);
}

}  // namespace

namespace {

// A statement_timeout from the conninfo: a statement past it is
// postgres::errc::statement_timeout with the server's message, and the run's
// transaction is rolled back to its savepoint and records the failure. (2 s:
// the claim's own statements must stay under it on a loaded CI machine.)
TEST(Postgres, StatementTimeoutIsAClearErrorAndTheRunFailsCleanly) {
    const std::string conninfo = coord::test::pg_fresh_schema("-c statement_timeout=2000");
    coord::postgres::store store{conninfo};
    coord::basic_job_ledger<coord::postgres::store> ledger{store};
    const coord::slot s("slow", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
    std::error_code seen;
    std::string message;
    EXPECT_THROW((void)ledger.run(s, "w", "", [&](const coord::ledger_context&) -> std::string {
                     auto r = coord::postgres::store::effect_exec("SELECT pg_sleep(60)");
                     if (r) return "slept";
                     seen = r.error();
                     message = r.error().message();
                     throw std::runtime_error("effect timed out");
                 }),
                 std::runtime_error);
    EXPECT_EQ(seen, coord::postgres::errc::statement_timeout);
    EXPECT_NE(message.find("statement timeout"), std::string::npos) << message;
    auto rec = store.ledger_read(s.to_string());
    ASSERT_TRUE(rec && *rec) << (rec ? std::string("no record") : rec.error().message());
    EXPECT_EQ((*rec)->state, coord::ledger_record::state_t::idle);
    EXPECT_EQ((*rec)->fail_reason, "effect timed out");
}

}  // namespace

namespace {

// A lock_timeout from the conninfo: a statement that waits past it for a
// lock another session holds is postgres::errc::lock_timeout (SQLSTATE
// 55P03), the name SQLite's busy timeout has too, condition unavailable (it
// was rolled back), and the run records the failure.
TEST(Postgres, ALockWaitPastLockTimeoutIsLockTimeoutOnItsOwnCode) {
    const std::string conninfo = coord::test::pg_fresh_schema("-c lock_timeout=200");
    coord::test::pg_command(conninfo, "CREATE TABLE held (x int)");
    PGconn* holder = PQconnectdb(conninfo.c_str());
    ASSERT_EQ(PQstatus(holder), CONNECTION_OK) << PQerrorMessage(holder);
    PQclear(PQexec(holder, "BEGIN"));
    PGresult* locked = PQexec(holder, "LOCK TABLE held IN ACCESS EXCLUSIVE MODE");
    ASSERT_EQ(PQresultStatus(locked), PGRES_COMMAND_OK) << PQerrorMessage(holder);
    PQclear(locked);

    coord::postgres::store store{conninfo};
    coord::basic_job_ledger<coord::postgres::store> ledger{store};
    const coord::slot s("locked", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
    std::error_code seen;
    EXPECT_THROW((void)ledger.run(s, "w", "", [&](const coord::ledger_context&) -> std::string {
                     auto r = coord::postgres::store::effect_exec("INSERT INTO held VALUES (1)");
                     if (r) return "inserted";
                     seen = r.error();
                     throw std::runtime_error("lock not free");
                 }),
                 std::runtime_error);
    PQclear(PQexec(holder, "ROLLBACK"));
    PQfinish(holder);
    EXPECT_EQ(seen, coord::postgres::errc::lock_timeout) << seen.message();
    EXPECT_EQ(seen, coord::condition::unavailable);
    EXPECT_EQ(coord::test::pg_query(conninfo, "SELECT count(*) FROM held"), "0");
    auto rec = store.ledger_read(s.to_string());
    ASSERT_TRUE(rec && *rec) << (rec ? std::string("no record") : rec.error().message());
    EXPECT_EQ((*rec)->fail_reason, "lock not free");
}

}  // namespace
