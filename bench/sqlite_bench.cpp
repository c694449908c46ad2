// SPDX-License-Identifier: Apache-2.0
// The SQLite engine beside its floors, in one run:
//   BM_Sqlite_FenceWrite/KEYS      one fenced write with KEYS keys already stored, to ten
//                                  keys spread over them (target: 1,000,000 keys at most
//                                  1.5x 10 keys: the cost does not grow with what is stored)
//   BM_Sqlite_FenceWriteAnyKey/KEYS  the same, each write to a random one of the KEYS keys
//                                  (what a cold working set costs: cache misses, not the store)
//   BM_File_FenceWrite/KEYS        the file store with 10 and 1,000 keys (it rewrites its
//                                  whole state per write, so filling it is quadratic: 10,000
//                                  keys took a minute and a half of CI), BM_Memory_FenceWrite/KEYS
//                                  at the SQLite sizes
//   BM_Sqlite_FenceWriteDurable    the default durability (synchronous=FULL, an fsync per commit)
//   BM_Sqlite_LedgerRunOnce        claim + effect row + done marker in one transaction, beside
//   BM_Floor_SqliteTransaction     the same statements as a bare SQLite transaction, run in the
//                                  same iterations (x_floor; target <= 1.3)
// The key-count runs turn fsync off on both durable stores (synchronous=OFF,
// file fsync=false): they measure what grows with the keys, not the disk.
#include <benchmark/benchmark.h>
#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "coord/open.hpp"
#include "coord/fence.hpp"
#include "coord/job_ledger.hpp"
#include "coord/sqlite/store.hpp"
#include "coord/storage/file.hpp"
#include "coord/storage/memory.hpp"
#include "engine_bench.hpp"

namespace {

namespace fs = std::filesystem;
const std::string value = "value-of-a-typical-size-0123456789";

fs::path scratch(const std::string& name) {
    const auto dir = fs::temp_directory_path() / ("coord-sqlite-bench-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    return dir / name;
}

void must(int rc, sqlite3* db) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        std::fprintf(stderr, "sqlite_bench: %s\n", sqlite3_errmsg(db));
        std::exit(1);
    }
}

// KEYS keys stored in one transaction, straight into the engine's table.
void prefill_sqlite(const fs::path& path, std::int64_t keys) {
    sqlite3* db = nullptr;
    must(sqlite3_open(path.c_str(), &db), db);
    must(sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr), db);
    sqlite3_stmt* s = nullptr;
    must(sqlite3_prepare_v2(db, "INSERT INTO coord_fence VALUES (?1, 1, 1, 0, 0, ?2)", -1, &s, nullptr), db);
    for (std::int64_t i = 0; i < keys; ++i) {
        const std::string k = "filler" + std::to_string(i);
        sqlite3_bind_text(s, 1, k.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_blob(s, 2, value.data(), static_cast<int>(value.size()), SQLITE_STATIC);
        must(sqlite3_step(s), db);
        sqlite3_reset(s);
    }
    sqlite3_finalize(s);
    must(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), db);
    sqlite3_close(db);
}

// The key the i-th write goes to: one of ten spread over the stored keys
// (hot), or any of them (cold).
std::string key_of(std::int64_t i, std::int64_t keys, bool any) {
    const std::int64_t k = any ? (i * 7919) % keys : (i % 10) * (keys / 10);
    return "filler" + std::to_string(k);
}

void sqlite_fence_write(benchmark::State& state, bool any) {
    const auto path = scratch("fence" + std::to_string(state.range(0)) + ".db");
    fs::remove(path);
    fs::remove(path.string() + "-coord");  // a fresh database: its generation record too
    { coord::sqlite::store create{path}; }
    prefill_sqlite(path, state.range(0));
    auto store = coord::open_store<coord::sqlite::store>("sqlite:" + path.string() + "?sync=off");
    coord::basic_keyed_fenced_resource res{store};
    coord::fence_token token = 1;
    std::int64_t i = 0;
    for (auto _ : state) {
        auto r = res.write(key_of(i++, state.range(0), any), ++token, value);
        if (!r) state.SkipWithError(r.error().code.message().c_str());
    }
    state.counters["keys"] = static_cast<double>(state.range(0));
}
void BM_Sqlite_FenceWrite(benchmark::State& state) { sqlite_fence_write(state, false); }
BENCHMARK(BM_Sqlite_FenceWrite)->Arg(10)->Arg(10'000)->Arg(1'000'000)->UseRealTime();
void BM_Sqlite_FenceWriteAnyKey(benchmark::State& state) { sqlite_fence_write(state, true); }
BENCHMARK(BM_Sqlite_FenceWriteAnyKey)->Arg(1'000'000)->UseRealTime();

void BM_File_FenceWrite(benchmark::State& state) {
    const auto path = scratch("file" + std::to_string(state.range(0)));
    fs::remove(path);
    fs::remove(path.string() + ".lock");  // a fresh store: its generation record too
    auto store = coord::open_store<coord::file_store>("file:" + path.string() + "?fsync=off");
    for (std::int64_t i = 0; i < state.range(0); ++i) (void)store.fence_write("filler" + std::to_string(i), 1, value);
    coord::basic_keyed_fenced_resource res{store};
    coord::fence_token token = 1;
    std::int64_t i = 0;
    for (auto _ : state) {
        auto r = res.write(key_of(i++, state.range(0), false), ++token, value);
        if (!r) state.SkipWithError(r.error().code.message().c_str());
    }
    state.counters["keys"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_File_FenceWrite)->Arg(10)->Arg(1'000)->UseRealTime();

void BM_Memory_FenceWrite(benchmark::State& state) {
    coord::memory_store store;
    for (std::int64_t i = 0; i < state.range(0); ++i) (void)store.fence_write("filler" + std::to_string(i), 1, value);
    coord::basic_keyed_fenced_resource res{store};
    coord::fence_token token = 1;
    std::int64_t i = 0;
    for (auto _ : state) {
        auto r = res.write(key_of(i++, state.range(0), false), ++token, value);
        benchmark::DoNotOptimize(r);
    }
    state.counters["keys"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_Memory_FenceWrite)->Arg(10)->Arg(10'000)->Arg(1'000'000)->UseRealTime();

void BM_Sqlite_FenceWriteDurable(benchmark::State& state) {
    const auto path = scratch("durable.db");
    fs::remove(path);
    fs::remove(path.string() + "-coord");  // a fresh database: its generation record too
    auto store = coord::open_store<coord::sqlite::store>("sqlite:" + path.string());
    coord::basic_keyed_fenced_resource res{store};
    coord::fence_token token = 1;
    for (auto _ : state) {
        auto r = res.write("k", ++token, value);
        if (!r) state.SkipWithError(r.error().code.message().c_str());
    }
}
BENCHMARK(BM_Sqlite_FenceWriteDurable)->UseRealTime();

// Election handover: the leader resigns, the waiting candidate's queued
// acquire sees it (coord::bench::election_handover).
void BM_Sqlite_ElectionHandover(benchmark::State& state) {
    const auto path = scratch("election.db");
    fs::remove(path);
    fs::remove(path.string() + "-coord");  // a fresh database: its generation record too
    auto store = coord::open_store<coord::sqlite::store>("sqlite:" + path.string() + "?sync=off");
    coord::bench::election_handover(state, store, "election-");
}
BENCHMARK(BM_Sqlite_ElectionHandover)->UseManualTime()->Iterations(200);

// The same statements as a ledger run, as a bare transaction on the same
// tables, prepared once, through one raw connection of its own: what SQLite
// itself costs. One call a floor.
class transaction_floor {
public:
    transaction_floor() {
        const auto path = scratch("floor.db");
        fs::remove(path);
        fs::remove(path.string() + "-coord");  // a fresh database: its generation record too
        { coord::sqlite::store create{path}; }
        must(sqlite3_open(path.c_str(), &db_), db_);
        must(sqlite3_exec(db_, "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; CREATE TABLE app_effects (slot TEXT NOT NULL)",
                          nullptr, nullptr, nullptr),
             db_);
        sel_ = prep("SELECT scheduled_ms, schedule_version, state, fence, attempt, holder, lease_until_ns, "
                    "started_ns, completed_ns, retain_until_ns, payload_hash, result, fail_reason "
                    "FROM coord_ledger WHERE key = ?1");
        up_ = prep("INSERT INTO coord_ledger VALUES (?1, 0, 0, ?2, 1, 1, 'w', 0, 0, 0, 0, '', ?3, x'') "
                   "ON CONFLICT (key) DO UPDATE SET state = excluded.state, result = excluded.result");
        eff_ = prep("INSERT INTO app_effects VALUES (?1)");
    }
    transaction_floor(const transaction_floor&) = delete;
    transaction_floor& operator=(const transaction_floor&) = delete;
    ~transaction_floor() {
        for (auto* st : {sel_, up_, eff_}) sqlite3_finalize(st);
        sqlite3_close(db_);
    }
    void operator()() {
        const std::string key = "job" + std::to_string(i_++);
        must(sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), db_);
        sqlite3_bind_text(sel_, 1, key.c_str(), -1, SQLITE_TRANSIENT);
        must(sqlite3_step(sel_), db_);
        sqlite3_reset(sel_);
        for (int pass = 0; pass < 2; ++pass) {
            if (pass == 1) {
                must(sqlite3_exec(db_, "SAVEPOINT e", nullptr, nullptr, nullptr), db_);
                sqlite3_bind_text(eff_, 1, key.c_str(), -1, SQLITE_TRANSIENT);
                must(sqlite3_step(eff_), db_);
                sqlite3_reset(eff_);
                must(sqlite3_exec(db_, "RELEASE e", nullptr, nullptr, nullptr), db_);
            }
            sqlite3_bind_text(up_, 1, key.c_str(), -1, SQLITE_TRANSIENT);
            sqlite3_bind_int64(up_, 2, pass == 0 ? 1 : 2);
            sqlite3_bind_blob(up_, 3, "ok", 2, SQLITE_STATIC);
            must(sqlite3_step(up_), db_);
            sqlite3_reset(up_);
        }
        must(sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr), db_);
    }

private:
    sqlite3_stmt* prep(const char* sql) {
        sqlite3_stmt* st = nullptr;
        must(sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr), db_);
        return st;
    }
    sqlite3* db_ = nullptr;
    sqlite3_stmt* sel_ = nullptr;
    sqlite3_stmt* up_ = nullptr;
    sqlite3_stmt* eff_ = nullptr;
    std::int64_t i_ = 0;
};

// The ledger run: BEGIN IMMEDIATE, the slot read, the claim written, a
// savepoint, the effect's row, release, the done marker written, COMMIT;
// beside the bare transaction in the same iterations (x_floor).
void BM_Sqlite_LedgerRunOnce(benchmark::State& state) {
    const auto path = scratch("ledger.db");
    fs::remove(path);
    fs::remove(path.string() + "-coord");  // a fresh database: its generation record too
    auto store = coord::open_store<coord::sqlite::store>("sqlite:" + path.string() + "?sync=off");
    {
        sqlite3* db = nullptr;
        must(sqlite3_open(path.c_str(), &db), db);
        must(sqlite3_exec(db, "CREATE TABLE app_effects (slot TEXT NOT NULL)", nullptr, nullptr, nullptr), db);
        sqlite3_close(db);
    }
    coord::basic_job_ledger<coord::sqlite::store> ledger{store};
    const auto base = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
    std::int64_t i = 0;
    sqlite3_stmt* st = nullptr;  // the application's statement, prepared once on the store's connection
    transaction_floor floor;
    coord::bench::beside_floor b;
    for (auto _ : state) {
        b.iteration(state, floor, [&] {
            const coord::slot s("job" + std::to_string(i++), base);
            auto r = ledger.run(s, "w", "", [&](const coord::ledger_context& ctx) {
                if (!st) sqlite3_prepare_v3(coord::sqlite::store::effect_handle(), "INSERT INTO app_effects VALUES (?1)", -1,
                                            SQLITE_PREPARE_PERSISTENT, &st, nullptr);
                const auto key = ctx.which.to_string();
                sqlite3_bind_text(st, 1, key.c_str(), -1, SQLITE_TRANSIENT);
                sqlite3_step(st);
                sqlite3_reset(st);
                return std::string("ok");
            });
            if (!r) coord::bench::fail("ledger run", r.error());
        }, 1);
    }
    b.report(state);
    sqlite3_finalize(st);
}
BENCHMARK(BM_Sqlite_LedgerRunOnce)->UseManualTime();

void BM_Floor_SqliteTransaction(benchmark::State& state) {
    transaction_floor floor;
    for (auto _ : state) floor();
}
BENCHMARK(BM_Floor_SqliteTransaction)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    std::error_code ec;
    fs::remove_all(scratch("").parent_path(), ec);
    return 0;
}
