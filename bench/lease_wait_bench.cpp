// SPDX-License-Identifier: Apache-2.0
// The waiting acquire: how long a release takes to reach the next waiter,
// and how many store operations one release causes with many waiters.
//   BM_Handover_<store>          a holder releases, the one waiter is granted: real time from the
//                                release to the grant, per handover
//   BM_Floor_Acquire_<store>     a bare acquire + release on the same store (no waiting)
// Stores: memory, file (fsync off), SQLite (synchronous=OFF), PostgreSQL
// (COORD_PG_CONNINFO).
//   BM_ReleaseOps_<store>/100    100 waiters in line; each handover (release, the next grant):
//                                the queued acquires every waiter made meanwhile
//                                (counter ops_per_release; target: a constant where the store notifies)
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "coord/lease.hpp"
#if defined(COORD_BENCH_POSTGRES)
#include "coord/postgres/store.hpp"
#endif
#if defined(COORD_BENCH_REDIS)
#include "coord/redis/store.hpp"
#endif
#include "coord/sqlite/store.hpp"
#include "coord/storage/file.hpp"
#include "coord/storage/memory.hpp"

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// Counts the queued acquires the store sees.
template <class Store>
struct counting : Store {
    using Store::Store;
    std::atomic<std::uint64_t> queued{0};
    coord::result<coord::lease, coord::lease_error> lease_acquire_queued(std::string_view name, std::string_view owner,
                                                                         std::chrono::nanoseconds ttl, std::uint64_t ticket,
                                                                         std::chrono::nanoseconds place) {
        queued.fetch_add(1, std::memory_order_relaxed);
        return Store::lease_acquire_queued(name, owner, ttl, ticket, place);
    }
};

std::filesystem::path db_path(const char* name) {
    std::string file = "coord-wait-bench-";
    file += std::to_string(::getpid());
    file += '-';
    file += name;
    return std::filesystem::temp_directory_path() / file;
}
void remove_db(const std::filesystem::path& p) {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(p.string() + suffix);
}

struct memory_maker {
    using store = counting<coord::memory_store>;
    std::unique_ptr<store> make() { return std::make_unique<store>(); }
};
struct sqlite_maker {
    using store = counting<coord::sqlite::store>;
    std::filesystem::path path = db_path("handover.db");
    std::unique_ptr<store> make() {
        remove_db(path);
        return std::make_unique<store>(path, coord::system_clock{},
                                       coord::sqlite::options{.sync = coord::sqlite::durability::off});
    }
    ~sqlite_maker() { remove_db(path); }
};

struct file_maker {
    using store = counting<coord::file_store>;
    std::filesystem::path path = db_path("handover.state");
    std::unique_ptr<store> make() {
        std::filesystem::remove(path);
        std::filesystem::remove(path.string() + ".lock");
        return std::make_unique<store>(path, coord::system_clock{}, coord::file_store_options{.fsync = false});
    }
    ~file_maker() {
        std::filesystem::remove(path);
        std::filesystem::remove(path.string() + ".lock");
    }
};

#if defined(COORD_BENCH_POSTGRES)
// PostgreSQL from COORD_PG_CONNINFO (the benches fail visibly without it).
struct postgres_maker {
    using store = counting<coord::postgres::store>;
    std::unique_ptr<store> make() {
        const char* c = std::getenv("COORD_PG_CONNINFO");
        if (!c || !*c) throw std::runtime_error("COORD_PG_CONNINFO is not set");
        auto s = std::make_unique<store>(c);
        // A fresh name each run: no waiters left from an earlier one.
        return s;
    }
};
#endif

#if defined(COORD_BENCH_REDIS)
// Redis from COORD_REDIS_URL (the benches fail visibly without it).
struct redis_maker {
    using store = counting<coord::redis::store>;
    std::unique_ptr<store> make() {
        const char* u = std::getenv("COORD_REDIS_URL");
        if (!u || !*u) throw std::runtime_error("COORD_REDIS_URL is not set");
        coord::redis::options o;
        o.prefix = "lease-wait-";
        o.prefix += std::to_string(::getpid());
        return std::make_unique<store>(u, coord::redis::server_clock{}, o);
    }
};
#endif

// Two threads pass the lease back and forth through the queue: each
// iteration is one release and the other's grant.
template <class Maker>
void handover(benchmark::State& state) {
    Maker maker;
    auto store = maker.make();
    coord::basic_lease_manager leases{*store};
    std::atomic<bool> stop{false};
    std::atomic<std::int64_t> total_ns{0}, count{0};
    std::atomic<std::int64_t> released_at{0};
    auto holder_turn = [&](const std::string& me) {
        while (!stop.load()) {
            auto l = leases.acquire("job", me, 10s, steady::now() + 1s);
            if (!l) continue;
            const auto at = released_at.load();
            if (at != 0) {
                total_ns += steady::now().time_since_epoch().count() - at;
                ++count;
            }
            released_at = steady::now().time_since_epoch().count();
            (void)leases.release(*l);
        }
    };
    std::thread other(holder_turn, "b");
    for (auto _ : state) {
        auto l = leases.acquire("job", "a", 10s, steady::now() + 1s);
        if (!l) continue;
        const auto at = released_at.load();
        if (at != 0) {
            total_ns += steady::now().time_since_epoch().count() - at;
            ++count;
        }
        released_at = steady::now().time_since_epoch().count();
        (void)leases.release(*l);
    }
    stop = true;
    other.join();
    state.counters["handover_us"] = count ? static_cast<double>(total_ns) / static_cast<double>(count) / 1000.0 : 0.0;
}
void BM_Handover_Memory(benchmark::State& state) { handover<memory_maker>(state); }
void BM_Handover_Sqlite(benchmark::State& state) { handover<sqlite_maker>(state); }
BENCHMARK(BM_Handover_Memory)->UseRealTime()->Iterations(2000);
BENCHMARK(BM_Handover_Sqlite)->UseRealTime()->Iterations(300);

template <class Maker>
void floor_acquire(benchmark::State& state) {
    Maker maker;
    auto store = maker.make();
    coord::basic_lease_manager leases{*store};
    for (auto _ : state) {
        auto l = leases.acquire("job", "a", 10s);
        if (l) (void)leases.release(*l);
    }
}
void BM_Floor_Acquire_Memory(benchmark::State& state) { floor_acquire<memory_maker>(state); }
void BM_Floor_Acquire_Sqlite(benchmark::State& state) { floor_acquire<sqlite_maker>(state); }
BENCHMARK(BM_Floor_Acquire_Memory)->UseRealTime();
BENCHMARK(BM_Floor_Acquire_Sqlite)->UseRealTime();

// N waiters queued; the lease goes round them once. Each grant releases at
// once; the queued acquires made during the round, divided by the grants.
template <class Maker>
void release_ops(benchmark::State& state) {
    const auto waiters = static_cast<int>(state.range(0));
    double per_release = 0;
    for (auto _ : state) {
        state.PauseTiming();
        Maker maker;
        auto store = maker.make();
        coord::basic_lease_manager leases{*store};
        auto held = leases.acquire("job", "holder", 10s);
        std::vector<std::thread> ts;
        for (int i = 0; i < waiters; ++i)
            ts.emplace_back([&, i] {
                std::string me = "w";  // (not "w" + to_string: g++ 12's -Wrestrict false positive)
                me += std::to_string(i);
                // A long place: no renewals during the round, so what is
                // counted is what the releases cause.
                auto l = leases.acquire("job", me, 10s, steady::now() + 120s, std::chrono::milliseconds{60000});
                if (l) (void)leases.release(*l);
            });
        while (leases.waiters("job").value_or(std::vector<coord::lease_waiter>{}).size() < static_cast<std::size_t>(waiters))
            std::this_thread::yield();
        const auto before = store->queued.load();
        state.ResumeTiming();
        (void)leases.release(*held);
        for (auto& t : ts) t.join();
        // Every waiter's first try came before the round; what is left is
        // what the releases caused (and renewals of places during the round).
        per_release = static_cast<double>(store->queued.load() - before) / waiters;
    }
    state.counters["ops_per_release"] = per_release;
}
void BM_ReleaseOps_Memory(benchmark::State& state) { release_ops<memory_maker>(state); }
void BM_ReleaseOps_Sqlite(benchmark::State& state) { release_ops<sqlite_maker>(state); }
BENCHMARK(BM_ReleaseOps_Memory)->Arg(100)->Iterations(3)->UseRealTime();
BENCHMARK(BM_ReleaseOps_Sqlite)->Arg(100)->Iterations(1)->UseRealTime();
void BM_Handover_File(benchmark::State& state) { handover<file_maker>(state); }
void BM_Floor_Acquire_File(benchmark::State& state) { floor_acquire<file_maker>(state); }
void BM_ReleaseOps_File(benchmark::State& state) { release_ops<file_maker>(state); }
BENCHMARK(BM_Handover_File)->UseRealTime()->Iterations(300);
BENCHMARK(BM_Floor_Acquire_File)->UseRealTime();
BENCHMARK(BM_ReleaseOps_File)->Arg(100)->Iterations(1)->UseRealTime();
#if defined(COORD_BENCH_POSTGRES)
void BM_Handover_Postgres(benchmark::State& state) { handover<postgres_maker>(state); }
void BM_Floor_Acquire_Postgres(benchmark::State& state) { floor_acquire<postgres_maker>(state); }
void BM_ReleaseOps_Postgres(benchmark::State& state) { release_ops<postgres_maker>(state); }
BENCHMARK(BM_Handover_Postgres)->UseRealTime()->Iterations(300);
BENCHMARK(BM_Floor_Acquire_Postgres)->UseRealTime();
BENCHMARK(BM_ReleaseOps_Postgres)->Arg(100)->Iterations(1)->UseRealTime();
#endif
#if defined(COORD_BENCH_REDIS)
void BM_Handover_Redis(benchmark::State& state) { handover<redis_maker>(state); }
void BM_Floor_Acquire_Redis(benchmark::State& state) { floor_acquire<redis_maker>(state); }
void BM_ReleaseOps_Redis(benchmark::State& state) { release_ops<redis_maker>(state); }
BENCHMARK(BM_Handover_Redis)->UseRealTime()->Iterations(300);
BENCHMARK(BM_Floor_Acquire_Redis)->UseRealTime();
BENCHMARK(BM_ReleaseOps_Redis)->Arg(100)->Iterations(1)->UseRealTime();
#endif

}  // namespace

BENCHMARK_MAIN();
