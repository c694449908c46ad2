// SPDX-License-Identifier: Apache-2.0
// Several processes share one SQLite database file and are killed with
// SIGKILL at random moments (120 kills in all), replaced by new ones:
// racing fence writes (the largest token wins), lease exclusivity, segment
// ranges, the ledger (one effect row per done slot, in the application's own
// table, and a reader that never sees a half-applied run), and Snowflake
// node ids (never two live issuers of one node id).
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
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
#include "coord/sqlite/store.hpp"
#include "support/child_process.hpp"
#include "support/lease_wait_process.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using coord::test::child_process;
using coord::test::scratch_dir;

// Runs `processes` children (make(id) gives child number id), reading what
// each reports (on_item for every value, including those a killed child
// wrote before it died). After a random number of values, now and then, one
// child is killed with SIGKILL and a new one takes its place, until `kills`
// kills; then the children finish their work. `between` runs after every
// batch (a reader's check). Returns the kills made.
template <class T>
int run_with_kills(int processes, int kills, unsigned seed, const std::function<std::unique_ptr<child_process>(int)>& make,
                   const std::function<void(const T&)>& on_item, const std::function<void()>& between = {}) {
    std::mt19937 rng(seed);
    std::vector<std::unique_ptr<child_process>> pool;
    int next_id = 0, killed = 0;
    for (int p = 0; p < processes; ++p) pool.push_back(make(next_id++));
    for (bool running = true; running;) {
        running = false;
        for (auto& c : pool) {
            if (!c) continue;
            running = true;
            const int batch = 1 + static_cast<int>(rng() % 40);
            T v;
            bool alive = true;
            for (int got = 0; got < batch && (alive = c->read(v)); ++got) on_item(v);
            if (between) between();
            if (!alive) {
                c->wait();
                c.reset();
                if (killed < kills) c = make(next_id++);  // finished early: more work to kill
                continue;
            }
            if (killed < kills && rng() % 3 == 0) {
                c->kill(SIGKILL);
                while (c->read(v)) on_item(v);  // acknowledged before it died
                c->wait();
                c = make(next_id++);
                ++killed;
            }
        }
    }
    return killed;
}

std::string query_one(const std::filesystem::path& db, const std::string& sql) {
    sqlite3* c = nullptr;
    sqlite3_open_v2(db.c_str(), &c, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_busy_timeout(c, 10000);
    sqlite3_stmt* s = nullptr;
    std::string out = "error";
    if (sqlite3_prepare_v2(c, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    else
        out = std::string("error: ") + sqlite3_errmsg(c);
    sqlite3_finalize(s);
    sqlite3_close(c);
    return out;
}

// Several processes opening one new file at the same moment (two web
// instances started together): every one opens it and writes.
TEST(SqliteProcess, ProcessesOpeningANewFileAtOnceAllOpenIt) {
    for (int round = 0; round < 20; ++round) {
        scratch_dir dir;
        const auto path = dir / "coord.db";
        // All four open at one instant: a start time fixed before the forks.
        const auto go = std::chrono::steady_clock::now() + std::chrono::milliseconds{50};
        std::vector<std::unique_ptr<child_process>> kids;
        for (int id = 0; id < 4; ++id)
            kids.push_back(std::make_unique<child_process>([&, id](int) {
                while (std::chrono::steady_clock::now() < go) {
                }
                coord::sqlite::options o;
                o.busy_timeout = std::chrono::milliseconds{5000};
                coord::sqlite::store store{path, {}, o};
                coord::basic_keyed_fenced_resource res{store};
                return res.write("k" + std::to_string(id), 1, "v") ? 0 : 2;
            }));
        for (auto& k : kids) EXPECT_EQ(k->wait(), 0) << "round " << round;
        coord::sqlite::store store{path};
        for (int id = 0; id < 4; ++id) {
            auto v = store.fence_read("k" + std::to_string(id));
            ASSERT_TRUE(v) << v.error().message();
            EXPECT_EQ(v->value, "v");
        }
    }
}

TEST(SqliteProcess, RacingFenceWritesKeepTheLargestTokenAcrossKills) {
    scratch_dir dir;
    const auto path = dir / "coord.db";
    { coord::sqlite::store setup{path}; }
    std::uint64_t max_acked = 0;
    const int kills = run_with_kills<std::uint64_t>(
        4, 30, 1,
        [&](int id) {
            return std::make_unique<child_process>([&, id](int out) {
                coord::sqlite::store store{path};
                coord::basic_keyed_fenced_resource res{store};
                // Tokens from the steady clock (one for all processes) with
                // the process's id below: the writers race (a token taken
                // earlier may land later and be refused), and a replacement's
                // tokens are above its predecessors', so it has writes of its
                // own to be killed in (with tokens k * 1000 + id, every
                // replacement after the first round was refused at once, and
                // thousands of them were started before 30 kills).
                for (int k = 1; k <= 25; ++k) {
                    const auto now = std::chrono::steady_clock::now().time_since_epoch();
                    const std::uint64_t token = static_cast<std::uint64_t>(now.count()) / 64 * 64 + static_cast<std::uint64_t>(id % 64);
                    auto w = res.write("config", token, "v" + std::to_string(token));
                    if (w) {
                        if (::write(out, &token, sizeof token) != sizeof token) return 3;
                    } else if (w.error() != coord::errc::stale_fence) {
                        return 2;
                    }
                }
                return 0;
            });
        },
        [&](const std::uint64_t& t) { max_acked = std::max(max_acked, t); });
    EXPECT_EQ(kills, 30);
    coord::sqlite::store store{path};
    auto v = store.fence_read("config");
    ASSERT_TRUE(v) << v.error().message();
    EXPECT_GE(v->fence, max_acked);  // a write a killed process sent may also have landed
    EXPECT_EQ(v->value, "v" + std::to_string(v->fence));
}

// Each holder runs a critical section that loses an update if two holders
// ever overlap: it reads a counter and writes it back plus one under its
// token. Overlapping holders would both read n and both write n + 1. The
// term (1 s) outlasts a section even when a commit's fsync waits on a loaded
// disk (CI's ASan run once saw a section pass 300 ms: the term ended, the
// next holder took the lease and the fence rightly refused the old one).
TEST(SqliteProcess, LeaseHoldersAreExclusiveWithEverLargerTokensAcrossKills) {
    scratch_dir dir;
    const auto path = dir / "coord.db";
    { coord::sqlite::store setup{path}; }
    std::set<std::uint64_t> tokens;
    bool duplicate = false;
    std::uint64_t sections = 0, refused = 0;
    const int kills = run_with_kills<std::uint64_t>(
        3, 30, 2,
        [&](int id) {
            return std::make_unique<child_process>([&, id](int out) {
                coord::sqlite::store store{path};
                coord::basic_lease_manager leases{store};
                coord::basic_keyed_fenced_resource counter{store};
                const std::string me = "p" + std::to_string(id);
                for (int i = 0; i < 60; ++i) {
                    auto l = leases.acquire("primary", me, 1s);
                    if (!l) {
                        if (l.error() != coord::errc::lease_held) return 2;
                        std::this_thread::sleep_for(1ms);
                        continue;
                    }
                    auto n = counter.read("count");
                    if (!n) return 4;
                    const std::uint64_t next = (n->value.empty() ? 0 : std::stoull(n->value)) + 1;
                    std::uint64_t report = l->token;
                    if (!counter.write("count", l->token, std::to_string(next))) report = 0;  // 0: fenced out
                    if (::write(out, &report, sizeof report) != sizeof report) return 3;
                    (void)leases.release(*l);
                }
                return 0;
            });
        },
        [&](const std::uint64_t& t) {
            if (t == 0) {
                ++refused;
                return;
            }
            ++sections;
            duplicate |= !tokens.insert(t).second;
        });
    EXPECT_EQ(kills, 30);
    EXPECT_FALSE(duplicate) << "two holders got one token";
    EXPECT_EQ(refused, 0u) << "a holder was fenced out: another held the lease during its section";
    coord::sqlite::store store{path};
    auto count = store.fence_read("count");
    ASSERT_TRUE(count);
    const auto n = std::stoull(count->value);
    // No section lost an update (no overlap); a killed holder may have
    // written without reporting.
    EXPECT_GE(n, sections);
    EXPECT_LE(n, sections + static_cast<std::uint64_t>(kills));
    EXPECT_GT(sections, 100u);
}

TEST(SqliteProcess, SegmentRangesAreNeverHandedOutTwiceAcrossKills) {
    scratch_dir dir;
    const auto path = dir / "coord.db";
    { coord::sqlite::store setup{path}; }
    std::set<std::uint64_t> seen;
    bool duplicate = false;
    const int kills = run_with_kills<std::uint64_t>(
        4, 30, 3,
        [&](int) {
            return std::make_unique<child_process>([&](int out) {
                coord::sqlite::store store{path};
                coord::basic_segment_generator<coord::sqlite::store> gen{store, {.initial_step = 20, .min_step = 20, .max_step = 100}};
                auto h = gen.tag("orders");
                for (int i = 0; i < 1500;) {
                    auto id = h.next();
                    if (!id) {
                        if (id.error() != coord::errc::allocator_unavailable) return 2;
                        gen.quiesce();
                        continue;
                    }
                    const std::uint64_t v = *id;
                    if (::write(out, &v, sizeof v) != sizeof v) return 3;
                    ++i;
                }
                return 0;
            });
        },
        [&](const std::uint64_t& v) { duplicate |= !seen.insert(v).second; });
    EXPECT_EQ(kills, 30);
    EXPECT_FALSE(duplicate) << "an ID was handed out twice";
    EXPECT_GT(seen.size(), 4u * 1500u);
}

TEST(SqliteProcess, KilledWorkersLeaveOneEffectRowPerDoneSlotAndAReaderNeverSeesHalfARun) {
    scratch_dir dir;
    const auto path = dir / "coord.db";
    {
        coord::sqlite::store setup{path};
        sqlite3* c = nullptr;
        ASSERT_EQ(sqlite3_open(path.c_str(), &c), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(c, "CREATE TABLE app_effects (slot TEXT NOT NULL, worker INTEGER NOT NULL)", nullptr, nullptr,
                               nullptr),
                  SQLITE_OK);
        sqlite3_close(c);
    }
    constexpr int slots = 300;
    const auto base = std::chrono::floor<std::chrono::minutes>(std::chrono::system_clock::now());
    // One read transaction (one statement) sees both tables at one moment.
    const std::string half_done =
        "SELECT (SELECT count(*) FROM coord_ledger l WHERE l.state = 2 AND "
        "(SELECT count(*) FROM app_effects e WHERE e.slot = l.key) <> 1) + "
        "(SELECT count(*) FROM app_effects e WHERE NOT EXISTS "
        "(SELECT 1 FROM coord_ledger l WHERE l.key = e.slot AND l.state = 2))";
    int checks = 0, torn = 0;
    const int kills = run_with_kills<char>(
        4, 20, 4,
        [&](int id) {
            return std::make_unique<child_process>([&, id](int out) {
                coord::sqlite::store store{path};
                coord::basic_job_ledger<coord::sqlite::store> ledger{store, {.lease_ttl = 200ms}};
                std::mt19937 order(static_cast<unsigned>(id * 7919 + ::getpid()));
                std::vector<int> todo(slots);
                for (int i = 0; i < slots; ++i) todo[static_cast<std::size_t>(i)] = i;
                std::shuffle(todo.begin(), todo.end(), order);
                for (int pass = 0; pass < 3; ++pass)
                    for (const int i : todo) {
                        const coord::slot s("job" + std::to_string(i), base);
                        auto r = ledger.run(s, "w" + std::to_string(id), "", [&](const coord::ledger_context& ctx) {
                            auto ins = coord::sqlite::store::effect_exec("INSERT INTO app_effects VALUES (?1, ?2)",
                                                                         {ctx.which.to_string(), std::to_string(id)});
                            if (!ins) throw std::runtime_error(ins.error().message());
                            return std::string("ok");
                        });
                        if (!r) return 2;
                        const char c = r->kind == coord::run_outcome::applied ? 'a' : 'o';
                        if (::write(out, &c, 1) != 1) return 3;
                    }
                return 0;
            });
        },
        [](const char&) {},
        [&] {
            ++checks;
            const auto n = query_one(path, half_done);
            if (n != "0") ++torn;
            EXPECT_EQ(n, "0") << "a reader saw a half-applied run";
        });
    EXPECT_EQ(kills, 20);
    EXPECT_EQ(torn, 0);
    EXPECT_GT(checks, 20);
    EXPECT_EQ(query_one(path, half_done), "0");
    // Every slot got done (three passes; a slot killed mid-run is claimed
    // again once its 200 ms execution lease ends).
    EXPECT_EQ(query_one(path, "SELECT count(*) FROM coord_ledger WHERE state = 2"), std::to_string(slots));
    EXPECT_EQ(query_one(path, "SELECT count(*) FROM app_effects"), std::to_string(slots));
}

TEST(SqliteProcess, ANodeIdIsNeverSharedByTwoLiveGeneratorsAcrossKills) {
    scratch_dir dir;
    const auto path = dir / "coord.db";
    { coord::sqlite::store setup{path}; }
    std::set<std::uint64_t> ids;
    bool duplicate = false;
    coord::snowflake_options opt;
    opt.node = 3;
    opt.node_lease_ttl = 100ms;
    const int kills = run_with_kills<std::uint64_t>(
        2, 10, 5,
        [&](int) {
            return std::make_unique<child_process>([&](int out) {
                coord::sqlite::store store{path};
                coord::basic_snowflake<coord::default_layout, coord::system_clock, coord::sqlite::store> gen{store, opt};
                for (int i = 0; i < 3000;) {
                    auto id = gen.next();
                    if (!id) {
                        if (id.error() != coord::errc::lease_held && id.error() != coord::errc::lease_lost) return 2;
                        std::this_thread::sleep_for(5ms);  // the other process holds node 3
                        continue;
                    }
                    const std::uint64_t v = *id;
                    if (::write(out, &v, sizeof v) != sizeof v) return 3;
                    ++i;
                }
                return 0;
            });
        },
        [&](const std::uint64_t& v) { duplicate |= !ids.insert(v).second; });
    EXPECT_EQ(kills, 10);
    EXPECT_FALSE(duplicate) << "two generators issued one ID";
    EXPECT_GT(ids.size(), 3000u);
}

}  // namespace

namespace {

TEST(SqliteProcessWait, AKilledWaiterDelaysTheNextNoLongerThanItsPlace) {
    scratch_dir dir;
    coord::test::killed_waiter_delays_the_next_no_longer_than_its_place(
        [&] { return std::make_unique<coord::sqlite::store>(dir / "coord.db"); });
}

TEST(SqliteProcessWait, AStoppedHolderLosesToTheFirstWaiterAndItsLateWriteIsRefused) {
    scratch_dir dir;
    coord::test::stopped_holder_loses_to_the_first_waiter([&] { return std::make_unique<coord::sqlite::store>(dir / "coord.db"); });
}

}  // namespace
