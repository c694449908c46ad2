// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL stores against the same server in the same run:
//   BM_Floor_PgRoundTrip     one bare prepared statement (SELECT $1) through libpq
//   BM_Floor_PgUpdate        one bare single-row UPDATE by primary key (prepared, autocommit):
//                            the same kind of work a fenced write does, without the rule
//   BM_Pg_FenceWrite         one fenced write, beside the bare UPDATE in the same iterations
//                            (x_floor; target <= 1.2)
//   BM_Pg_FenceWriteFourWriters the same on a store object whose four pooled connections
//                            all wrote: each write checks the other three's rows (x_floor)
//   BM_Pg_FenceUpdate        one fenced read-modify-write (two round trips: a transaction)
//   BM_Floor_PgTransaction   a bare two-statement transaction (BEGIN, UPDATE, INSERT, COMMIT)
//   BM_Pg_SegmentAllocate    one range from the allocator, beside the bare transaction in the
//                            same iterations (x_floor; target <= 1.2)
//   BM_Pg_LedgerRunOnce      claim, effect (one INSERT in the same transaction), done
//   BM_Pg_LeaseAcquireRelease an acquire and a release beside two bare UPDATEs (x_floor)
//   BM_Pg_ObserveWake        a grant to an observer's wake by NOTIFY, beside a bare acquire
//                            and release (x_floor)
//   BM_Segment_Next/<store>  IDs from a generator on the memory and the PostgreSQL
//                            allocator (target: within 1.1x; the allocator is off the hot path)
// The server comes from COORD_PG_CONNINFO (.ci/run starts one with
// tests/postgres/postgres.sh); without it the binary fails.
#include <benchmark/benchmark.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "coord/open.hpp"
#include "coord/job_ledger.hpp"
#include "coord/postgres/store.hpp"
#include "coord/segment.hpp"
#include "coord/storage/memory.hpp"
#include "engine_bench.hpp"

namespace {

std::string conninfo() {
    const char* c = std::getenv("COORD_PG_CONNINFO");
    return c ? c : "";
}

PGconn* raw_connection() {
    PGconn* c = PQconnectdb(conninfo().c_str());
    if (PQstatus(c) != CONNECTION_OK) {
        std::fprintf(stderr, "postgres_bench: %s", PQerrorMessage(c));
        std::exit(1);
    }
    return c;
}

void must(PGconn* c, PGresult* r) {
    const auto s = PQresultStatus(r);
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
        std::fprintf(stderr, "postgres_bench: %s", PQerrorMessage(c));
        std::exit(1);
    }
    PQclear(r);
}

// Initialized as a new store (store init, zero floors) unless it is one already.
void initialized(coord::postgres::store& s) {
    auto r = s.initialize({});
    if (!r && r.error() != coord::errc::store_already_initialized) {
        std::fprintf(stderr, "postgres_bench: store init: %s\n", r.error().message().c_str());
        std::exit(1);
    }
}

coord::postgres::store& store() {
    static coord::postgres::store s = coord::open_store<coord::postgres::store>("postgres:" + conninfo());
    static const bool init = (initialized(s), true);
    (void)init;
    return s;
}

std::string coninfo_with_schema(const std::string& schema) {
    return conninfo() + " options='-c search_path=" + schema + "'";
}

void BM_Floor_PgRoundTrip(benchmark::State& state) {
    PGconn* c = raw_connection();
    must(c, PQprepare(c, "floor", "SELECT $1::bigint", 1, nullptr));
    std::int64_t i = 0;
    for (auto _ : state) {
        const std::string v = std::to_string(++i);
        const char* values[] = {v.c_str()};
        must(c, PQexecPrepared(c, "floor", 1, values, nullptr, nullptr, 0));
    }
    PQfinish(c);
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Floor_PgRoundTrip)->UseRealTime();

// A bare single-row UPDATE by primary key through a connection of its own:
// what a fenced write of an existing key costs the server without coord's
// rule (bytea value, numeric token, one row, autocommit). One call a floor.
class update_floor {
public:
    update_floor() : c_(raw_connection()), table_("bench_floor_update_" + std::to_string(::getpid())) {
        must(c_, PQexec(c_, ("CREATE TABLE IF NOT EXISTS " + table_ +
                             " (key text PRIMARY KEY, highest numeric(20,0) NOT NULL, value bytea NOT NULL)")
                                .c_str()));
        must(c_, PQexec(c_, ("INSERT INTO " + table_ + " VALUES ('k', 0, '') ON CONFLICT DO NOTHING").c_str()));
        must(c_, PQprepare(c_, "floor_update",
                           ("UPDATE " + table_ + " SET highest = $2::numeric, value = $3 WHERE key = $1").c_str(), 3, nullptr));
    }
    update_floor(const update_floor&) = delete;
    update_floor& operator=(const update_floor&) = delete;
    ~update_floor() {
        must(c_, PQexec(c_, ("DROP TABLE " + table_).c_str()));
        PQfinish(c_);
    }
    void operator()() {
        const std::string v = std::to_string(++i_);
        const char* values[] = {"k", v.c_str(), "value"};
        must(c_, PQexecPrepared(c_, "floor_update", 3, values, nullptr, nullptr, 0));
    }

private:
    PGconn* c_;
    std::string table_;
    std::int64_t i_ = 0;
};

// A bare two-statement transaction (BEGIN, UPDATE, INSERT, COMMIT): what a
// segment allocation or a ledger step costs without coord's rule.
class transaction_floor {
public:
    transaction_floor() : c_(raw_connection()) {
        must(c_, PQexec(c_, "CREATE TABLE IF NOT EXISTS bench_counter (k int PRIMARY KEY, v bigint);"
                            "CREATE TABLE IF NOT EXISTS bench_log (v bigint);"
                            "INSERT INTO bench_counter VALUES (1, 0) ON CONFLICT DO NOTHING"));
        must(c_, PQprepare(c_, "up", "UPDATE bench_counter SET v = v + 1 WHERE k = $1", 1, nullptr));
        must(c_, PQprepare(c_, "ins", "INSERT INTO bench_log VALUES ($1)", 1, nullptr));
    }
    transaction_floor(const transaction_floor&) = delete;
    transaction_floor& operator=(const transaction_floor&) = delete;
    ~transaction_floor() {
        must(c_, PQexec(c_, "TRUNCATE bench_log"));
        PQfinish(c_);
    }
    void operator()() {
        const char* one[] = {"1"};
        must(c_, PQexec(c_, "BEGIN"));
        must(c_, PQexecPrepared(c_, "up", 1, one, nullptr, nullptr, 0));
        must(c_, PQexecPrepared(c_, "ins", 1, one, nullptr, nullptr, 0));
        must(c_, PQexec(c_, "COMMIT"));
    }

private:
    PGconn* c_;
};

void BM_Floor_PgUpdate(benchmark::State& state) {
    update_floor floor;
    for (auto _ : state) floor();
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Floor_PgUpdate)->UseRealTime();

// Beside the UPDATE floor in the same iterations (x_floor).
void BM_Pg_FenceWrite(benchmark::State& state) {
    update_floor floor;
    coord::bench::fence_write_loop(state, store(), "bench-fence-" + std::to_string(::getpid()), floor);
}
BENCHMARK(BM_Pg_FenceWrite)->UseManualTime();

// The same, on a store object whose four pooled connections have all
// written (each call also checks the other three writers' rows: schema
// migration 9), beside the same floor (x_floor). fence_update holds its
// connection while its function runs, so the calls nested in it take the
// others.
void BM_Pg_FenceWriteFourWriters(benchmark::State& state) {
    update_floor floor;
    coord::postgres::options four;
    four.pool_size = 4;
    coord::postgres::store s{conninfo(), {}, four};
    initialized(s);
    const std::string key = "bench-fence-4w-" + std::to_string(::getpid());
    auto wrote = [&](auto&& r) {
        if (!r) coord::bench::fail("a nested fenced write", r.error().code);
    };
    wrote(s.fence_update(key + "-1", ++coord::bench::next_token(), [&](std::string&) {
        wrote(s.fence_update(key + "-2", ++coord::bench::next_token(), [&](std::string&) {
            wrote(s.fence_update(key + "-3", ++coord::bench::next_token(), [&](std::string&) {
                wrote(s.fence_write(key + "-4", ++coord::bench::next_token(), "fourth"));
            }));
        }));
    }));
    coord::bench::fence_write_loop(state, s, key, floor);
}
BENCHMARK(BM_Pg_FenceWriteFourWriters)->UseManualTime();

// A fenced write with KEYS keys already stored (one fresh schema each),
// to ten keys spread over them: the figure beside memory, file and SQLite
// (bench/plot_fence_keys.py).
void BM_Pg_FenceWriteKeys(benchmark::State& state) {
    const std::string schema = "bench_keys_" + std::to_string(state.range(0)) + "_" + std::to_string(::getpid());
    PGconn* c = raw_connection();
    PQsetNoticeProcessor(c, [](void*, const char*) {}, nullptr);  // DROP ... CASCADE lists what it drops
    must(c, PQexec(c, ("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema).c_str()));
    const std::string conninfo = coninfo_with_schema(schema);
    auto s = coord::open_store<coord::postgres::store>("postgres:" + conninfo);
    initialized(s);
    must(c, PQexec(c, ("INSERT INTO " + schema + ".coord_fence (key, highest, written, value) SELECT 'filler' || g, 1, true, "
                       "'value-of-a-typical-size-0123456789' FROM generate_series(0, " + std::to_string(state.range(0) - 1) + ") g").c_str()));
    must(c, PQexec(c, ("ANALYZE " + schema + ".coord_fence").c_str()));
    std::uint64_t token = 1;
    std::int64_t i = 0;
    for (auto _ : state) {
        const std::string key = "filler" + std::to_string((i++ % 10) * (state.range(0) / 10));
        auto r = s.fence_write(key, ++token, "value-of-a-typical-size-0123456789");
        if (!r) state.SkipWithError("fence write refused");
    }
    state.counters["keys"] = static_cast<double>(state.range(0));
    must(c, PQexec(c, ("DROP SCHEMA " + schema + " CASCADE").c_str()));
    PQfinish(c);
}
BENCHMARK(BM_Pg_FenceWriteKeys)->Arg(10)->Arg(10'000)->Arg(1'000'000)->UseRealTime();

void BM_Pg_FenceUpdate(benchmark::State& state) {
    auto& s = store();
    static std::uint64_t token = 0;
    static const std::string key = "bench-fence-update-" + std::to_string(::getpid());
    for (auto _ : state) {
        auto r = s.fence_update(key, ++token, [](std::string& v) { v = "n" + std::to_string(v.size() % 7); });
        if (!r) state.SkipWithError("fence update refused");
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Pg_FenceUpdate)->UseRealTime();

void BM_Floor_PgTransaction(benchmark::State& state) {
    transaction_floor floor;
    for (auto _ : state) floor();
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Floor_PgTransaction)->UseRealTime();

// Election handover: the leader resigns, the waiting candidate is woken by
// NOTIFY (coord::bench::election_handover).
void BM_Pg_ElectionHandover(benchmark::State& state) { coord::bench::election_handover(state, store(), "bench-election-"); }
BENCHMARK(BM_Pg_ElectionHandover)->UseManualTime()->Iterations(200);

// An observer woken by NOTIFY at a grant (coord::bench::observe_wake).
void BM_Pg_ObserveWake(benchmark::State& state) { coord::bench::observe_wake(state, store(), "bench-observe-"); }
BENCHMARK(BM_Pg_ObserveWake)->UseManualTime()->Iterations(100);

// An acquire and a release, beside two bare UPDATEs in the same iterations
// (x_floor): the lease functions' rule and the observer trigger's test.
void BM_Pg_LeaseAcquireRelease(benchmark::State& state) {
    update_floor floor;
    coord::bench::lease_acquire_release_loop(state, store(), floor);
}
BENCHMARK(BM_Pg_LeaseAcquireRelease)->UseManualTime();

// Beside the transaction floor in the same iterations (x_floor).
void BM_Pg_SegmentAllocate(benchmark::State& state) {
    auto& s = store();
    transaction_floor floor;
    coord::bench::beside_floor b;
    for (auto _ : state) {
        b.iteration(state, floor, [&] {
            auto r = s.segment_allocate("bench-segment", 1000);
            if (!r) coord::bench::fail("segment_allocate", r.error());
        }, 1);
    }
    b.report(state);
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Pg_SegmentAllocate)->UseManualTime();

void BM_Pg_LedgerRunOnce(benchmark::State& state) {
    auto& s = store();
    {
        PGconn* c = raw_connection();
        must(c, PQexec(c, "CREATE TABLE IF NOT EXISTS bench_effect (slot text)"));
        PQfinish(c);
    }
    coord::basic_job_ledger<coord::postgres::store> ledger{s};
    const auto base = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
    static std::int64_t n = 0;
    for (auto _ : state) {
        const coord::slot slot("bench" + std::to_string(::getpid()), base + std::chrono::milliseconds(++n));
        auto r = ledger.run(slot, "w", "", [&](const coord::ledger_context& ctx) {
            auto ins = coord::postgres::store::effect_exec("INSERT INTO bench_effect VALUES ($1)", {ctx.which.to_string()});
            return ins ? std::string("ok") : std::string("failed");
        });
        if (!r || r->kind != coord::run_outcome::applied) state.SkipWithError("run not applied");
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Pg_LedgerRunOnce)->UseRealTime();


void BM_Segment_Next_Memory(benchmark::State& state) {
    static coord::memory_store s;
    coord::bench::segment_next(state, s);
}
BENCHMARK(BM_Segment_Next_Memory)->Threads(1)->Threads(2)->UseRealTime();

void BM_Segment_Next_Postgres(benchmark::State& state) { coord::bench::segment_next(state, store()); }
BENCHMARK(BM_Segment_Next_Postgres)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
    if (conninfo().empty()) {
        std::fprintf(stderr, "postgres_bench: set COORD_PG_CONNINFO (tests/postgres/postgres.sh starts a server)\n");
        return 1;
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
