// SPDX-License-Identifier: Apache-2.0
// The SQLite engine's own promises: one database however its path is
// spelled; bad files refused with an error naming them and left as they
// were; the effect of a ledger run in the application's own transaction; the
// schema versioned; the lock bounded by the busy timeout.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "coord/fence.hpp"
#include "coord/job_ledger.hpp"
#include "coord/lease.hpp"
#include "coord/sqlite/store.hpp"
#include "support/child_process.hpp"
#include "support/failover_checks.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using coord::test::scratch_dir;
namespace fs = std::filesystem;

std::string file_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs one statement on a connection of its own (the application, or an operator).
std::string query_one(const fs::path& db, const std::string& sql) {
    sqlite3* c = nullptr;
    sqlite3_open_v2(db.c_str(), &c, SQLITE_OPEN_READWRITE, nullptr);
    sqlite3_stmt* s = nullptr;
    std::string out = "error";
    if (sqlite3_prepare_v2(c, sql.c_str(), -1, &s, nullptr) == SQLITE_OK) {
        const int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
        else if (rc == SQLITE_DONE) out = "";
    }
    sqlite3_finalize(s);
    sqlite3_close(c);
    return out;
}

template <class F>
coord::store_error open_error(F&& open) {
    try {
        open();
    } catch (const coord::store_error& e) {
        return e;
    }
    return coord::store_error(std::error_code{}, "opened");
}

// The everyday names on this engine (coord/detail/store_aliases.hpp).
static_assert(std::is_same_v<coord::sqlite::lease_manager, coord::basic_lease_manager<coord::sqlite::store>>);
static_assert(std::is_same_v<coord::sqlite::fenced_resource, coord::basic_fenced_resource<coord::sqlite::store>>);
static_assert(std::is_same_v<coord::sqlite::snowflake,
                             coord::basic_snowflake<coord::default_layout, coord::system_clock, coord::sqlite::store>>);
static_assert(std::is_same_v<coord::sqlite::segment_generator, coord::basic_segment_generator<coord::sqlite::store>>);
static_assert(std::is_same_v<coord::sqlite::job_ledger, coord::basic_job_ledger<coord::sqlite::store>>);
static_assert(std::is_same_v<coord::sqlite::session_manager, coord::basic_session_manager<coord::sqlite::store>>);

TEST(Sqlite, EverySpellingAndLinkOfOneFileIsOneDatabase) {
    scratch_dir dir;
    const auto path = dir / "coord.db";
    coord::sqlite::store a{path};
    fs::create_symlink(path, dir / "link.db");
    coord::sqlite::store b{dir / "link.db"};
    coord::sqlite::store c{dir.path() / "." / "coord.db"};
    EXPECT_EQ(a.path(), b.path());
    EXPECT_EQ(a.path(), c.path());
    coord::basic_lease_manager la{a}, lb{b}, lc{c};
    auto held = la.acquire("primary", "A", 1h);
    ASSERT_TRUE(held) << held.error().code.message();
    EXPECT_EQ(lb.acquire("primary", "B", 1h).error(), coord::errc::lease_held);
    EXPECT_EQ(lc.acquire("primary", "C", 1h).error(), coord::errc::lease_held);
    // One WAL: no second journal appeared under the link's name.
    EXPECT_FALSE(fs::exists(dir / "link.db-wal"));
    // A hard link would give the same database two WALs: refused.
    fs::create_hard_link(path, dir / "hard.db");
    auto e = open_error([&] { coord::sqlite::store h{dir / "hard.db"}; });
    EXPECT_EQ(e.code(), coord::errc::state_hard_linked) << e.what();
}

TEST(Sqlite, AFileThatIsNotADatabaseIsRefusedNamingItAndLeftAsItWas) {
    scratch_dir dir;
    const auto path = dir / "notes.txt";
    const std::string text(8192, 'x');
    std::ofstream(path, std::ios::binary) << "not a database: " << text;
    const auto before = file_bytes(path);
    auto e = open_error([&] { coord::sqlite::store s{path}; });
    EXPECT_EQ(e.code(), coord::sqlite::errc::not_a_database) << e.what();
    EXPECT_EQ(e.code(), coord::condition::corrupt_state);
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    EXPECT_EQ(file_bytes(path), before);
}

TEST(Sqlite, ATruncatedDatabaseIsReportedCorruptNeverReadAsEmpty) {
    scratch_dir dir;
    const auto path = dir / "coord.db";
    const std::string value(3000, 'v');
    {
        coord::sqlite::store s{path};
        for (int i = 0; i < 400; ++i) ASSERT_TRUE(s.fence_write("key" + std::to_string(i), 7, value));
    }
    ASSERT_FALSE(fs::exists(dir / "coord.db-wal"));  // checkpointed at close
    const auto size = fs::file_size(path);
    fs::resize_file(path, size / 2);
    int corrupt = 0;
    try {
        coord::sqlite::store s{path};
        for (int i = 0; i < 400; ++i) {
            auto r = s.fence_read("key" + std::to_string(i));
            if (!r) {
                EXPECT_EQ(r.error(), coord::condition::corrupt_state) << r.error().message();
                EXPECT_NE(r.error().message().find(path.string()), std::string::npos) << r.error().message();
                ++corrupt;
                continue;
            }
            // What is still readable is what was written, never a reset key.
            EXPECT_EQ(r->fence, 7u) << "key" << i;
            EXPECT_EQ(r->value, value);
        }
    } catch (const coord::store_error& e) {
        EXPECT_EQ(e.code(), coord::condition::corrupt_state) << e.what();
        ++corrupt;
    }
    EXPECT_GT(corrupt, 0) << "half the file gone, and nothing noticed";
}

TEST(Sqlite, APathThatIsNotARegularFileIsRefusedWithoutHanging) {
    scratch_dir dir;
    fs::create_directory(dir / "adir");
    EXPECT_EQ(open_error([&] { coord::sqlite::store s{dir / "adir"}; }).code(), coord::errc::state_not_regular);
    ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
    EXPECT_EQ(open_error([&] { coord::sqlite::store s{dir / "fifo"}; }).code(), coord::errc::state_not_regular);
    auto missing = open_error([&] { coord::sqlite::store s{dir / "no" / "such" / "dir" / "coord.db"}; });
    EXPECT_TRUE(missing.code()) << missing.what();
}

// As a user who may not write the file (a child drops root's privileges).
TEST(Sqlite, AReadOnlyDatabaseIsAClearErrorAndKeepsItsData) {
    scratch_dir dir;
    const auto path = dir / "coord.db";
    {
        coord::sqlite::store s{path};
        ASSERT_TRUE(s.fence_write("k", 3, "kept"));
    }
    ::chmod(path.c_str(), 0444);
    ::chmod(dir.path().c_str(), 0755);
    coord::test::child_process child([&](int) {
        if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) return 10;
        try {
            coord::sqlite::store s{path};
            auto w = s.fence_write("k", 4, "changed");
            if (w) return 1;  // wrote a file it may not write
            return w.error().code == coord::condition::unavailable &&
                           w.error().code.message().find(path.string()) != std::string::npos
                       ? 0
                       : 2;
        } catch (const coord::store_error& e) {
            const bool named = std::string(e.what()).find(path.string()) != std::string::npos;
            return named && e.code() == coord::condition::unavailable ? 0 : 3;
        }
    });
    const int status = child.wait();
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    ::chmod(path.c_str(), 0644);
    coord::sqlite::store s{path};
    EXPECT_EQ(s.fence_read("k")->value, "kept");
}

// A full disk (a child whose file size limit is reached): writes fail with
// an error naming the file; every write acknowledged before is there after.
TEST(Sqlite, AFullDiskFailsWritesClearlyAndLosesNothingAcknowledged) {
    scratch_dir dir;
    const auto path = dir / "coord.db";
    { coord::sqlite::store s{path}; }
    coord::test::child_process child([&](int out) {
        ::signal(SIGXFSZ, SIG_IGN);
        const rlimit limit{2 << 20, 2 << 20};  // 2 MiB
        if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 10;
        coord::sqlite::store s{path};
        const std::string value(64 << 10, 'f');
        for (std::uint64_t token = 1; token < 1000; ++token) {
            std::string key = "k";  // (not "k" + to_string: g++ 12's -Wrestrict false positive, PR105329)
            key += std::to_string(token);
            auto w = s.fence_write(key, token, value);
            if (!w) {
                const bool clear = (w.error().code == coord::condition::unavailable ||
                                    w.error().code == coord::condition::outcome_unknown) &&
                                   w.error().code.message().find(path.string()) != std::string::npos;
                return clear ? 0 : 2;
            }
            if (::write(out, &token, sizeof token) != sizeof token) return 3;
        }
        return 4;  // never filled
    });
    std::uint64_t token = 0, last = 0;
    while (child.read(token)) last = token;
    const int status = child.wait();
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
    ASSERT_GT(last, 2u);
    coord::sqlite::store s{path};
    for (std::uint64_t t = 1; t <= last; ++t) {
        auto r = s.fence_read("k" + std::to_string(t));
        ASSERT_TRUE(r) << r.error().message();
        EXPECT_EQ(r->fence, t);
        EXPECT_EQ(r->value.size(), 64u << 10);
    }
}

TEST(Sqlite, TheEffectCommitsInTheApplicationsOwnTableWithTheMarker) {
    scratch_dir dir;
    const auto path = dir / "coord.db";
    coord::sqlite::store store{path};
    ASSERT_EQ(query_one(path, "CREATE TABLE orders (slot TEXT NOT NULL, amount INTEGER)"), "");
    coord::basic_job_ledger<coord::sqlite::store> ledger{store};
    const coord::slot s("billing", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
    auto insert = [&](const coord::ledger_context& ctx) {
        sqlite3* db = coord::sqlite::store::effect_handle();
        if (!db) throw std::runtime_error("no open transaction");
        const std::string sql = "INSERT INTO orders VALUES ('" + ctx.which.to_string() + "', 42)";
        if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) throw std::runtime_error(sqlite3_errmsg(db));
    };
    EXPECT_EQ(coord::sqlite::store::effect_handle(), nullptr);
    EXPECT_FALSE(coord::sqlite::store::effect_exec("SELECT 1"));
    EXPECT_THROW((void)ledger.run(s, "w1", "", [&](const coord::ledger_context& ctx) -> std::string {
                     insert(ctx);
                     throw std::runtime_error("payment service down");
                 }),
                 std::runtime_error);
    EXPECT_EQ(query_one(path, "SELECT count(*) FROM orders"), "0");
    auto rec = store.ledger_read(s.to_string());
    ASSERT_TRUE(rec && *rec);
    EXPECT_EQ((*rec)->state, coord::ledger_record::state_t::idle);
    EXPECT_EQ((*rec)->fail_reason, "payment service down");
    auto ok = ledger.run(s, "w2", "", [&](const coord::ledger_context& ctx) {
        insert(ctx);
        auto rows = coord::sqlite::store::effect_exec("SELECT count(*) FROM orders WHERE slot = ?1", {ctx.which.to_string()});
        if (!rows || rows->at(0).at(0) != "1") throw std::runtime_error("the effect does not see its own write");
        return std::string("charged");
    });
    ASSERT_TRUE(ok) << ok.error().message();
    EXPECT_EQ(ok->kind, coord::run_outcome::applied);
    auto again = ledger.run(s, "w3", "", [&](const coord::ledger_context& ctx) {
        insert(ctx);
        return std::string("twice?");
    });
    ASSERT_TRUE(again);
    EXPECT_EQ(again->kind, coord::run_outcome::replayed);
    EXPECT_EQ(query_one(path, "SELECT count(*) FROM orders"), "1");
}

// A database put back from an older copy, or deleted and made again, is
// refused when a store opens it (state_went_back): its count of write
// transactions is below the one recorded beside it (PATH-coord), or its
// identity is not the recorded one. Nothing from the older state is served:
// not the fence that accepted 100 and then 200, not the segment range, not
// the done slot.
// An older copy of the database put back (or the file deleted) is refused:
// the store opens, and every call on it, reads too, is state_went_back,
// until the recovery (initialize with floors, what `coordctl store init
// --force` runs), after which no fence acceptance, lease token, segment ID
// or done slot of before is handed out again.
TEST(Sqlite, ADatabaseReplacedByAnOlderCopyOrDeletedIsRefusedUntilTheRecoveryWhichHandsNothingOutTwice) {
    scratch_dir dir;
    const fs::path db = dir / "coord.db";
    const fs::path old = dir / "old.db";
    const auto q = coord::test::old_slot_claim("job@1");
    {
        coord::sqlite::store store{db.string()};
        ASSERT_TRUE(store.fence_write("f", 100, "at 100"));
    }
    fs::copy_file(db, old);  // the store is closed: no WAL left beside it
    coord::fence_token token = 0;
    coord::segment_range ids{};
    {
        coord::sqlite::store store{db.string()};
        auto a = store.lease_acquire("n", "A", 1h);
        ASSERT_TRUE(a);
        token = a->token;
        ASSERT_TRUE(store.fence_write("f", token, "by A"));
        auto r = store.segment_allocate("ids", 10);
        ASSERT_TRUE(r);
        ids = *r;
        auto c = store.ledger_claim(q);
        ASSERT_TRUE(c && c->kind == coord::claim_outcome::granted);
        ASSERT_TRUE(store.ledger_complete(q.key, c->fence, "done", 24h));
    }
    const auto put_back = [&](const fs::path& from) {
        fs::copy_file(from, db, fs::copy_options::overwrite_existing);
        for (const char* side : {"-wal", "-shm"}) fs::remove(dir / (std::string("coord.db") + side));
    };
    put_back(old);
    {
        coord::sqlite::store s{db};
        ASSERT_TRUE(s.went_back());
        auto w = s.fence_write("f", 150, "late");
        ASSERT_FALSE(w) << "token 150 accepted after " << token;
        EXPECT_EQ(w.error(), coord::errc::state_went_back) << w.error().code.message();
        EXPECT_NE(w.error().code.message().find("older copy"), std::string::npos) << w.error().code.message();
        EXPECT_NE(w.error().code.message().find("store init"), std::string::npos) << w.error().code.message();
        auto r = s.fence_read("f");
        ASSERT_FALSE(r) << "answered from the older copy: " << r->fence;
        EXPECT_EQ(r.error(), coord::errc::state_went_back);
        auto again = s.segment_allocate("ids", 10);
        ASSERT_FALSE(again) << "handed out " << again->begin << " again";
        auto replay = s.ledger_claim(q);
        ASSERT_FALSE(replay);
        EXPECT_EQ(replay.error(), coord::errc::state_went_back);
    }
    // Still refused the second time: opening changed nothing.
    EXPECT_EQ(coord::sqlite::store{db}.fence_read("f").error(), coord::errc::state_went_back);

    // The recovery: floors above what was handed out.
    {
        coord::sqlite::store s{db};
        coord::initial_floors floors;
        floors.segment = ids.end - 1;
        floors.fence_now = true;
        floors.ledger_now = true;
        auto plain = s.initialize(floors);
        ASSERT_FALSE(plain);
        EXPECT_EQ(plain.error(), coord::errc::store_already_initialized);
        coord::sqlite::store other{db};  // opened before the recovery
        auto id = s.initialize(floors, /*replace=*/true);
        ASSERT_TRUE(id) << id.error().message();
        EXPECT_FALSE(s.went_back());
        auto stale = s.fence_write("f", token, "late");
        ASSERT_FALSE(stale) << "A's token " << token << " accepted after the recovery";
        EXPECT_EQ(stale.error(), coord::errc::stale_fence);
        auto fresh_key = s.fence_write("a key the copy never had", token, "late");
        ASSERT_FALSE(fresh_key);
        EXPECT_EQ(fresh_key.error(), coord::errc::stale_fence);
        coord::test::expect_ledger_fences_above_the_fence_floor(s, token);
        auto b = s.lease_acquire("n", "B", 1h);
        ASSERT_TRUE(b);
        EXPECT_GT(b->token, token);
        ASSERT_TRUE(s.fence_write("f", b->token, "by B"));
        auto more = s.segment_allocate("ids", 10);
        ASSERT_TRUE(more);
        EXPECT_GE(more->begin, ids.end);
        auto other_tag = s.segment_allocate("a tag the copy never had", 1);
        ASSERT_TRUE(other_tag);
        EXPECT_GE(other_tag->begin, ids.end);
        auto done = s.ledger_claim(q);
        ASSERT_TRUE(done);
        EXPECT_EQ(done->kind, coord::claim_outcome::expired);  // not run again
        auto late = other.fence_write("f", b->token + 1, "from an object opened before");
        ASSERT_FALSE(late);
        EXPECT_TRUE(late.error() == coord::errc::state_went_back || late.error() == coord::errc::store_identity_changed)
            << late.error().code.message();
    }
    coord::sqlite::store reopened{db};  // the recovered database opens clean
    EXPECT_FALSE(reopened.went_back());
    EXPECT_TRUE(reopened.fence_read("f"));

    fs::remove(db);  // deleted: a new database would be made at the path
    coord::sqlite::store d{db};
    auto gone = d.segment_allocate("ids", 1);
    ASSERT_FALSE(gone) << "handed out " << gone->begin << " from a new file";
    EXPECT_EQ(gone.error(), coord::errc::state_went_back);
    EXPECT_NE(gone.error().message().find("identity"), std::string::npos) << gone.error().message();
}

// With durability::off a store object raises the count of write
// transactions at most once a millisecond, and once more when it closes:
// a copy taken between two writes of one object (a millisecond apart or
// not) and put back after the object closed is still refused.
TEST(Sqlite, WithoutSyncAnOlderCopyTakenBetweenTwoWritesIsRefusedAfterACleanClose) {
    scratch_dir dir;
    const fs::path db = dir / "coord.db";
    const coord::sqlite::options off{.sync = coord::sqlite::durability::off};
    coord::segment_range ids{};
    {
        coord::sqlite::store store{db, coord::system_clock{}, off};
        ASSERT_TRUE(store.fence_write("f", 100, "at 100"));
        for (const char* side : {"", "-wal"})  // no write in flight: a consistent copy
            fs::copy_file(dir / (std::string("coord.db") + side), dir / (std::string("old.db") + side));
        ASSERT_TRUE(store.fence_write("f", 200, "at 200"));
        auto r = store.segment_allocate("ids", 10);
        ASSERT_TRUE(r);
        ids = *r;
    }
    for (const char* side : {"", "-wal"})
        fs::copy_file(dir / (std::string("old.db") + side), dir / (std::string("coord.db") + side),
                      fs::copy_options::overwrite_existing);
    fs::remove(dir / "coord.db-shm");
    coord::sqlite::store s{db, coord::system_clock{}, off};
    ASSERT_TRUE(s.went_back());
    auto w = s.fence_write("f", 150, "late");
    ASSERT_FALSE(w) << "token 150 accepted after 200";
    EXPECT_EQ(w.error(), coord::errc::state_went_back) << w.error().code.message();
    auto again = s.segment_allocate("ids", 10);
    ASSERT_FALSE(again) << "handed out " << again->begin << " again (first range began at " << ids.begin << ")";
}

// What stays undetectable: the database and its record beside it restored
// together (the old store as it was). A lease token still never goes back:
// a grant's token is at least the clock's microseconds.
TEST(Sqlite, ADatabaseRestoredWithItsRecordStillNeverHandsOutALeaseTokenAgain) {
    scratch_dir dir;
    const fs::path db = dir / "coord.db";
    {
        coord::sqlite::store store{db.string()};
        auto a = store.lease_acquire("n", "A", 1h);
        ASSERT_TRUE(a);
        ASSERT_TRUE(store.lease_release("n", "A", a->token));
    }
    fs::copy_file(db, dir / "old.db");
    fs::copy_file(dir / "coord.db-coord", dir / "old.db-coord");
    coord::fence_token highest = 0;
    {
        coord::sqlite::store store{db.string()};
        for (int i = 0; i < 3; ++i) {
            auto b = store.lease_acquire("n", "B", 1h);
            ASSERT_TRUE(b);
            highest = b->token;
            ASSERT_TRUE(store.lease_release("n", "B", b->token));
        }
    }
    fs::copy_file(dir / "old.db", db, fs::copy_options::overwrite_existing);
    fs::copy_file(dir / "old.db-coord", dir / "coord.db-coord", fs::copy_options::overwrite_existing);
    for (const char* side : {"-wal", "-shm"}) fs::remove(dir / (std::string("coord.db") + side));
    coord::sqlite::store store{db.string()};
    auto c = store.lease_acquire("n", "C", 1h);
    ASSERT_TRUE(c);
    EXPECT_GT(c->token, highest);
}

TEST(Sqlite, TheSchemaIsVersionedAndANewerOneIsRefused) {
    scratch_dir dir;
    const auto path = dir / "coord.db";
    { coord::sqlite::store s{path}; }
    EXPECT_EQ(query_one(path, "SELECT version FROM coord_schema"), std::to_string(coord::sqlite::schema_version()));
    { coord::sqlite::store again{path}; }  // current: nothing to do
    ASSERT_EQ(query_one(path, "UPDATE coord_schema SET version = 99"), "");
    auto e = open_error([&] { coord::sqlite::store s{path}; });
    EXPECT_EQ(e.code(), coord::sqlite::errc::schema_too_new) << e.what();
    EXPECT_NE(std::string(e.what()).find("99"), std::string::npos) << e.what();
}

TEST(Sqlite, AHeldWriteLockIsBusyAtTheTimeoutAndOptionsAreChecked) {
    scratch_dir dir;
    const auto path = dir / "coord.db";
    coord::sqlite::store store{path, {}, {.busy_timeout = 100ms}};
    ASSERT_TRUE(store.fence_write("k", 1, "one"));
    sqlite3* other = nullptr;  // another process's connection, inside its write
    ASSERT_EQ(sqlite3_open(path.c_str(), &other), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
    auto w = store.fence_write("k", 2, "two");
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error().code, coord::sqlite::errc::lock_timeout) << w.error().code.message();
    EXPECT_EQ(w.error().code, coord::condition::unavailable);
    EXPECT_TRUE(store.fence_read("k"));  // a reader is not held up by the writer (WAL)
    ASSERT_EQ(sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(other);
    EXPECT_TRUE(store.fence_write("k", 2, "two"));
    EXPECT_THROW((coord::sqlite::store{path, {}, {.busy_timeout = 0ms}}), std::invalid_argument);
    EXPECT_THROW((coord::sqlite::store{path, {}, {.busy_timeout = 25h}}), std::invalid_argument);
    EXPECT_EQ(query_one(path, "PRAGMA journal_mode"), "wal");
    coord::sqlite::store relaxed{path, {}, {.sync = coord::sqlite::durability::normal}};
    EXPECT_TRUE(relaxed.fence_read("k"));
}

}  // namespace
