// SPDX-License-Identifier: Apache-2.0
// Multi-process experiments on the real server, each with a server restart
// in the middle: the pause experiment (SIGSTOP past the lease's term,
// SIGCONT, the late write refused by the database) and processes drawing segment IDs while one is killed with
// SIGKILL again and again. Leases here are judged on the server's clock.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "coord/fence.hpp"
#include "coord/job_ledger.hpp"
#include "coord/lease.hpp"
#include "coord/segment.hpp"
#include "coord/snowflake.hpp"
#include "postgres/pg_support.hpp"
#include "support/child_process.hpp"
#include "support/engine_experiments.hpp"
#include "support/lease_wait_process.hpp"

namespace {

using namespace std::chrono_literals;

void restart_server() { ASSERT_EQ(std::system(COORD_PG_RESTART_COMMAND), 0) << COORD_PG_RESTART_COMMAND; }

// Waits until the server's clock passes `t` (ns since the epoch): the term is
// measured there, so that is the clock to wait on.
void wait_for_server_time(coord::postgres::store& store, std::int64_t t) {
    for (;;) {
        auto now = store.server_now_ns();
        ASSERT_TRUE(now) << now.error().message();
        if (*now > t) return;
        std::this_thread::sleep_for(10ms);
    }
}

TEST(PostgresProcess, PausedHolderIsFencedOutByTheDatabase) {
    const std::string conninfo = coord::test::pg_fresh_schema();
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    // Process A: takes the lease, reports its token and expiry, waits for
    // "go" (it is stopped meanwhile), then writes with its old token.
    coord::test::child_process a([&](int out) {
        ::close(go[1]);
        coord::postgres::store store{conninfo};
        coord::basic_lease_manager leases{store};
        auto l = leases.acquire("primary", "A", 300ms);
        if (!l) return 2;
        const std::uint64_t token = l->token;
        const std::int64_t expires = l->expires_at.count();
        if (::write(out, &token, sizeof token) != sizeof token || ::write(out, &expires, sizeof expires) != sizeof expires)
            return 3;
        char c;
        if (::read(go[0], &c, 1) != 1) return 4;
        coord::basic_keyed_fenced_resource res{store};
        // The server restarted while A slept: its connection is gone. A retries
        // until the database answers by the rule.
        auto w = res.write("config", token, "A's late value");
        for (int tries = 0; !w && w.error().code.category() != coord::coord_category() && tries < 200; ++tries) {
            ::usleep(20000);
            w = res.write("config", token, "A's late value");
        }
        if (!w && w.error().code == coord::errc::outcome_unknown)
            w = res.write("config", token, "A's late value");  // unknown is not an answer: ask again
        const std::int32_t code = w ? 0 : w.error().code.value();
        return ::write(out, &code, sizeof code) == sizeof code ? 0 : 5;
    });
    ::close(go[0]);
    std::uint64_t token_a = 0;
    std::int64_t expires_a = 0;
    ASSERT_TRUE(a.read(token_a));
    ASSERT_TRUE(a.read(expires_a));
    a.kill(SIGSTOP);  // the long GC pause

    coord::postgres::store store{conninfo};
    wait_for_server_time(store, expires_a);
    // Process B (here, the test) takes over and writes.
    coord::basic_lease_manager leases{store};
    auto b = leases.acquire("primary", "B", 30s);
    ASSERT_TRUE(b) << b.error().code.message();
    EXPECT_GT(b->token, token_a);
    coord::basic_keyed_fenced_resource res{store};
    ASSERT_TRUE(res.write("config", b->token, "B's value"));
    restart_server();  // in the middle of it all: nothing may be lost

    a.kill(SIGCONT);  // A wakes, unaware, and writes
    ASSERT_EQ(::write(go[1], "g", 1), 1);
    std::int32_t code = -1;
    ASSERT_TRUE(a.read(code));
    EXPECT_EQ(code, static_cast<std::int32_t>(coord::errc::stale_fence));
    EXPECT_EQ(WEXITSTATUS(a.wait()), 0);
    ::close(go[1]);
    auto v = res.read("config");
    if (!v) {  // this connection died with the restart: the error is clear and the next call reconnects
        EXPECT_EQ(v.error(), coord::postgres::errc::connection_failed);
        v = res.read("config");
    }
    ASSERT_TRUE(v) << v.error().message();
    EXPECT_EQ(v->value, "B's value");
    EXPECT_EQ(v->fence, b->token);
}

TEST(PostgresProcess, KilledAndRestartedDrawersNeverDuplicateASegmentId) {
    const std::string conninfo = coord::test::pg_fresh_schema();
    coord::test::killed_drawers_never_duplicate([&] { return std::make_unique<coord::postgres::store>(conninfo); });
}

}  // namespace

namespace {

// Four processes race over the same slots; the effect inserts a row in the
// ledger's own transaction; processes die by SIGKILL at random and are
// replaced. Afterwards every slot marked done has exactly one effect row and
// every other slot has none.
TEST(PostgresProcess, KilledWorkersLeaveOneEffectPerDoneSlotAndNoneElsewhere) {
    const std::string conninfo = coord::test::pg_fresh_schema();
    {
        coord::postgres::store setup{conninfo};  // creates the schema once
        coord::test::pg_command(conninfo, "CREATE TABLE effects (slot text NOT NULL, worker int NOT NULL)");
    }
    constexpr int slots = 1000, processes = 4;
    const auto base = std::chrono::floor<std::chrono::minutes>(std::chrono::system_clock::now());
    auto worker = [&](int id) {
        return [&, id](int out) {
            coord::postgres::store store{conninfo};
            coord::basic_job_ledger<coord::postgres::store> ledger{store};
            std::mt19937 order(static_cast<unsigned>(id * 7919 + ::getpid()));
            std::vector<int> todo(slots);
            for (int i = 0; i < slots; ++i) todo[static_cast<std::size_t>(i)] = i;
            std::shuffle(todo.begin(), todo.end(), order);
            const std::string who = "w" + std::to_string(id);
            for (const int i : todo) {
                const coord::slot s("job" + std::to_string(i), base);
                auto r = ledger.run(s, who, "", [&](const coord::ledger_context& ctx) {
                    auto ins = coord::postgres::store::effect_exec(
                        "INSERT INTO effects(slot, worker) VALUES ($1, $2)", {ctx.which.to_string(), std::to_string(id)});
                    if (!ins) throw std::runtime_error("effect insert failed");
                    return std::string("ok");
                });
                if (!r) return 2;
                const char c = 'x';
                if (::write(out, &c, 1) != 1) return 3;
            }
            return 0;
        };
    };
    std::vector<std::unique_ptr<coord::test::child_process>> pool;
    int next_id = 0;
    for (int p = 0; p < processes; ++p) pool.push_back(std::make_unique<coord::test::child_process>(worker(next_id++)));
    std::mt19937 rng(11);
    int kills = 0;
    // Read progress round-robin; now and then kill one and start a replacement.
    for (bool running = true; running;) {
        running = false;
        for (auto& child : pool) {
            char c;
            int got = 0;
            while (got < 25 && child->read(c)) ++got;
            if (got == 25) running = true;
            if (got == 25 && kills < 6 && rng() % 4 == 0) {
                child->kill(SIGKILL);
                child->wait();
                child = std::make_unique<coord::test::child_process>(worker(next_id++));
                ++kills;
                running = true;
            }
        }
    }
    for (auto& child : pool) child->wait();
    EXPECT_EQ(kills, 6);
    auto done = coord::test::pg_query(conninfo,
        "SELECT count(*) FROM coord_ledger l WHERE l.state = 2 AND "
        "(SELECT count(*) FROM effects e WHERE e.slot = l.key) <> 1");
    EXPECT_EQ(done, "0") << "done slots without exactly one effect";
    auto orphans = coord::test::pg_query(conninfo,
        "SELECT count(*) FROM effects e WHERE NOT EXISTS "
        "(SELECT 1 FROM coord_ledger l WHERE l.key = e.slot AND l.state = 2)");
    EXPECT_EQ(orphans, "0") << "effects of slots not marked done";
    auto completed = coord::test::pg_query(conninfo, "SELECT count(*) FROM coord_ledger WHERE state = 2");
    EXPECT_GT(std::stoi(completed), slots / 2);
}

}  // namespace

namespace {

// Two processes and one node id: while A issues, B cannot start; after A is
// killed, B starts once A's node lease has ended on the server's clock, with
// its own clock set 5 s back, and every ID it issues is above all of A's,
// also across a server restart in the middle of B's run.
TEST(PostgresProcess, SnowflakeNodeLeaseAcrossAKillAndAClockSetBack) {
    const std::string conninfo = coord::test::pg_fresh_schema();
    coord::snowflake_options opt;
    opt.node = 5;
    // A term the keeper renews at a third of: a loaded CI machine (ASan, -O0,
    // beside other builds) once let 400 ms pass between two renewals, and B
    // then rightly started while A was still writing.
    opt.node_lease_ttl = 3s;
    coord::test::child_process a([&](int out) {
        coord::postgres::store store{conninfo};
        coord::basic_snowflake<coord::default_layout, coord::system_clock, coord::postgres::store> gen{store, opt};
        for (;;) {
            auto id = gen.next();
            if (!id) return 2;
            const std::uint64_t v = *id;
            if (::write(out, &v, sizeof v) != sizeof v) return 3;
        }
    });
    std::set<std::uint64_t> ids;
    std::uint64_t v = 0, max_a = 0;
    for (int i = 0; i < 2000 && a.read(v); ++i) {
        ids.insert(v);
        max_a = std::max(max_a, v);
    }
    ASSERT_EQ(ids.size(), 2000u);

    coord::postgres::store store{conninfo};
    coord::manual_clock clock{std::chrono::system_clock::now().time_since_epoch() - 5s};
    using gen_t = coord::basic_snowflake<coord::default_layout, coord::manual_clock, coord::postgres::store>;
    {
        gen_t b{store, opt, clock};
        auto started = b.start();
        ASSERT_FALSE(started);
        EXPECT_EQ(started.error(), coord::errc::lease_held);  // A is alive and issuing
    }
    a.kill(SIGKILL);
    while (a.read(v)) {
        EXPECT_TRUE(ids.insert(v).second) << "duplicate within A";
        max_a = std::max(max_a, v);
    }
    a.wait();

    // B waits out its clock's 5 s lag (a manual clock's sleep advances it)
    // rather than refusing with clock_rollback, the default bound's answer.
    auto opt_b = opt;
    opt_b.rollback_bound = 10s;
    gen_t b{store, opt_b, clock};
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    for (;;) {  // A's lease ends on the server's clock; wait for that
        auto started = b.start();
        if (started) break;
        ASSERT_EQ(started.error(), coord::errc::lease_held);
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "A's node lease never ended";
        std::this_thread::sleep_for(20ms);
    }
    std::uint64_t min_b = UINT64_MAX;
    int refused = 0;
    for (int i = 0; i < 20000; ++i) {
        if (i == 10000) restart_server();
        auto id = b.next();
        if (!id && id.error() != coord::errc::lease_lost && refused < 500) {
            ++refused;  // a reservation or renewal that met the restart: ask again
            --i;
            std::this_thread::sleep_for(10ms);
            continue;
        }
        ASSERT_TRUE(id) << id.error().message();
        EXPECT_TRUE(ids.insert(*id).second) << "B reissued " << *id;
        min_b = std::min<std::uint64_t>(min_b, *id);
    }
    EXPECT_GT(min_b, max_a);
}

}  // namespace

namespace {

// Segment drawers while the server restarts: the drawers see errors, retry,
// and finish; no ID is handed out twice.
TEST(PostgresProcess, SegmentDrawersSurviveAServerRestartWithoutDuplicates) {
    const std::string conninfo = coord::test::pg_fresh_schema();
    { coord::postgres::store setup{conninfo}; }
    constexpr int processes = 4, per_process = 4000;
    std::vector<std::unique_ptr<coord::test::child_process>> children;
    for (int p = 0; p < processes; ++p)
        children.push_back(std::make_unique<coord::test::child_process>([&](int out) {
            coord::postgres::store store{conninfo};
            coord::segment_options opt;
            opt.min_step = opt.initial_step = 20;
            opt.max_step = 40;
            coord::basic_segment_generator<coord::postgres::store> gen{store, opt};
            auto h = gen.tag("orders");
            const auto give_up = std::chrono::steady_clock::now() + 30s;
            std::uint64_t refusals = 0;
            for (int i = 0; i < per_process;) {
                auto id = h.next();
                if (!id) {  // the server is away: wait for the fetcher and retry
                    if (std::chrono::steady_clock::now() > give_up) return 2;
                    ++refusals;
                    gen.quiesce();
                    std::this_thread::sleep_for(10ms);
                    continue;
                }
                const std::uint64_t v = *id;
                if (::write(out, &v, sizeof v) != sizeof v) return 3;
                if (++i % 20 == 0) std::this_thread::sleep_for(2ms);  // keep drawing while the server restarts
            }
            // Last, a marker and how many calls the restart refused.
            const std::uint64_t end = UINT64_MAX;
            return ::write(out, &end, sizeof end) == sizeof end && ::write(out, &refusals, sizeof refusals) == sizeof refusals
                       ? 0
                       : 4;
        }));
    std::set<std::uint64_t> seen;
    std::uint64_t v = 0;
    // Every child has opened its store (the constructor needs the server:
    // on a loaded machine a child can start late) and drawn an ID.
    for (auto& child : children) {
        if (child->read(v)) {
            EXPECT_TRUE(seen.insert(v).second);
        }
    }
    for (int i = 0; i < 200 && children[0]->read(v); ++i) EXPECT_TRUE(seen.insert(v).second);
    restart_server();
    std::uint64_t refusals = 0;
    for (auto& child : children) {
        while (child->read(v)) {
            if (v == UINT64_MAX) {
                std::uint64_t n = 0;
                ASSERT_TRUE(child->read(n));
                refusals += n;
                break;
            }
            EXPECT_TRUE(seen.insert(v).second) << "duplicate ID " << v;
        }
        EXPECT_EQ(WEXITSTATUS(child->wait()), 0);
    }
    EXPECT_EQ(seen.size(), static_cast<std::size_t>(processes * per_process));
    EXPECT_GT(refusals, 0u) << "the restart did not fall in the middle of the drawing";
}

// Ledger workers while the server restarts: a run that fails (or whose
// outcome is unknown) is run again, which the ledger makes safe. Every done
// slot has exactly one effect row, and no other slot has any.
TEST(PostgresProcess, LedgerWorkersSurviveAServerRestartWithOneEffectPerSlot) {
    const std::string conninfo = coord::test::pg_fresh_schema();
    {
        coord::postgres::store setup{conninfo};
        coord::test::pg_command(conninfo, "CREATE TABLE effects (slot text NOT NULL)");
    }
    constexpr int slots = 300, processes = 3;
    const auto base = std::chrono::floor<std::chrono::minutes>(std::chrono::system_clock::now());
    std::vector<std::unique_ptr<coord::test::child_process>> children;
    for (int p = 0; p < processes; ++p)
        children.push_back(std::make_unique<coord::test::child_process>([&, p](int out) {
            coord::postgres::store store{conninfo};
            coord::ledger_options lo;
            lo.lease_ttl = 2s;  // a slot whose run was cut off is free again soon
            coord::basic_job_ledger<coord::postgres::store> ledger{store, lo};
            const auto give_up = std::chrono::steady_clock::now() + 60s;
            std::string who = "w";
            who += std::to_string(p);
            int failures = 0;
            for (int i = 0; i < slots; ++i) {
                std::string job = "job";
                job += std::to_string((i * 7 + p * 101) % slots);
                const coord::slot s(job, base);
                for (;;) {
                    // An effect cut off by the restart throws out of run(): the
                    // attempt is recorded as failed (or its lease runs out).
                    std::optional<coord::result<coord::run_outcome>> r;
                    try {
                        r = ledger.run(s, who, "", [&](const coord::ledger_context& ctx) {
                            auto ins = coord::postgres::store::effect_exec("INSERT INTO effects VALUES ($1)",
                                                                           {ctx.which.to_string()});
                            if (!ins) throw std::runtime_error("insert failed");
                            return std::string("ok");
                        });
                    } catch (const std::runtime_error&) {
                    }
                    if (r && *r && (*r)->kind != coord::run_outcome::in_progress) break;
                    if (!r || !*r) failures += 1;
                    if (std::chrono::steady_clock::now() > give_up) return 2;
                    std::this_thread::sleep_for(20ms);
                }
                const char c = 'x';
                if (::write(out, &c, 1) != 1) return 3;
                // Paced: the 270 slots after the restart begins (at child 0's
                // 30th) take 2.7 s at least, so the restart falls inside the
                // runs (unpaced, CI once saw every slot done before it).
                std::this_thread::sleep_for(10ms);
            }
            const char f = failures > 0 ? 'F' : 'x';  // last: did the restart refuse a run here?
            return ::write(out, &f, 1) == 1 ? 0 : 4;
        }));
    char c;
    // Every child has opened its store (the constructor needs the server:
    // on a loaded machine a child can start late) and finished a slot.
    for (std::size_t k = 1; k < children.size(); ++k) (void)children[k]->read(c);
    for (int i = 0; i < 30 && children[0]->read(c); ++i) {
    }
    restart_server();
    bool refused_somewhere = false;
    for (auto& child : children) {
        char last = 0;
        while (child->read(c)) last = c;
        refused_somewhere = refused_somewhere || last == 'F';
        EXPECT_EQ(WEXITSTATUS(child->wait()), 0);
    }
    EXPECT_TRUE(refused_somewhere) << "the restart did not fall in the middle of the runs";
    EXPECT_EQ(coord::test::pg_query(conninfo, "SELECT count(*) FROM coord_ledger WHERE state = 2"), std::to_string(slots));
    EXPECT_EQ(coord::test::pg_query(conninfo,
                                    "SELECT count(*) FROM coord_ledger l WHERE (SELECT count(*) FROM effects e "
                                    "WHERE e.slot = l.key) <> 1"),
              "0");
    EXPECT_EQ(coord::test::pg_query(conninfo, "SELECT count(*) FROM effects"), std::to_string(slots));
}

}  // namespace

namespace {

// The waiting acquire across processes on PostgreSQL (waiters woken by NOTIFY).
TEST(PostgresProcessWait, AKilledWaiterDelaysTheNextNoLongerThanItsPlace) {
    const std::string conninfo = coord::test::pg_fresh_schema();
    coord::test::killed_waiter_delays_the_next_no_longer_than_its_place(
        [&] { return std::make_unique<coord::postgres::store>(conninfo); });
}

TEST(PostgresProcessWait, AStoppedHolderLosesToTheFirstWaiterAndItsLateWriteIsRefused) {
    const std::string conninfo = coord::test::pg_fresh_schema();
    coord::test::stopped_holder_loses_to_the_first_waiter([&] { return std::make_unique<coord::postgres::store>(conninfo); });
}

}  // namespace
