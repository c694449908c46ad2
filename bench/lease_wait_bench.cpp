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
//   BM_IdleCost_<store>/N        N waiters in line while the holder just holds: the server's work
//                                per second (Redis: commands, from INFO commandstats, those run
//                                inside scripts included; PostgreSQL: statements, each a
//                                transaction, from pg_stat_statements), counters per_s and per_waiter_s; target: at
//                                most linear in N (per_waiter_s flat)
//   BM_Floor_PollingLock_<store>/N  the same N waiters as a polling lock (redis-py's Lock and
//                                a pg_try_advisory_lock loop: one try every 100 ms, the
//                                default sleep of redis-py), measured the same way beside it;
//                                IdleCost's x_floor = its per_s / this per_s (target: below 1)
#include <benchmark/benchmark.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <map>
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
#include <libpq-fe.h>

#include "coord/postgres/store.hpp"
#endif
#if defined(COORD_BENCH_REDIS)
#include <hiredis/hiredis.h>

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
    for (const char* suffix : {"", "-wal", "-shm", "-coord"}) std::filesystem::remove(p.string() + suffix);
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
        // Initialized as a new store unless it is one already.
        if (auto r = s->initialize({}); !r && r.error() != coord::errc::store_already_initialized)
            throw std::runtime_error("store init: " + r.error().message());
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

// ---------------------------------------------------------------- idle cost
// N waiters wait for a name whose holder just holds; what the server does per
// second meanwhile. The waiters are spread over stores of 25 each (as
// separate processes would be), so that none lacks a listener connection.
// The window: 4 s, after 2 s for the waiters to settle.

constexpr int waiters_per_store = 25;

// The per-N result of the floor, read by the idle-cost run of the same N.
std::map<std::pair<std::string, long>, double>& floor_rates() {
    static std::map<std::pair<std::string, long>, double> m;
    return m;
}

void report(benchmark::State& state, double per_s, int waiters) {
    state.counters["per_s"] = per_s;
    state.counters["per_waiter_s"] = per_s / waiters;
}

// What the counter counts per second over `window`, after 2 s to settle.
template <class Counter>
double rate_after_settling(Counter& counter, std::chrono::seconds window) {
    std::this_thread::sleep_for(2s);
    const double before = counter.read();
    const auto t0 = steady::now();
    std::this_thread::sleep_for(window);
    const double after = counter.read();
    return (after - before) / std::chrono::duration<double>(steady::now() - t0).count();
}

template <class Maker, class Counter>
void idle_cost(benchmark::State& state, const char* engine, std::chrono::seconds window) {
    const auto n = static_cast<int>(state.range(0));
    Counter counter;
    double per_s = 0;
    for (auto _ : state) {
        Maker maker;
        std::vector<std::unique_ptr<typename Maker::store>> stores;
        for (int i = 0; i < (n + waiters_per_store - 1) / waiters_per_store; ++i) stores.push_back(maker.make());
        coord::basic_lease_manager holder{*stores[0]};
        const std::string name = "idle-" + std::to_string(::getpid()) + "-" + std::to_string(n);
        auto held = holder.acquire(name, "holder", 600s);
        if (!held) throw std::runtime_error("idle cost: the holder's acquire failed");
        std::vector<std::thread> ts;
        for (int i = 0; i < n; ++i)
            ts.emplace_back([&, i] {
                coord::basic_lease_manager leases{*stores[static_cast<std::size_t>(i / waiters_per_store)]};
                std::string me = "w";
                me += std::to_string(i);
                auto l = leases.acquire(name, me, 10s, steady::now() + 600s);
                if (l) (void)leases.release(*l);
            });
        while (holder.waiters(name).value_or(std::vector<coord::lease_waiter>{}).size() < static_cast<std::size_t>(n))
            std::this_thread::sleep_for(10ms);
        per_s = rate_after_settling(counter, window);
        (void)holder.release(*held);  // the line is served in order; each releases at once
        for (auto& t : ts) t.join();
    }
    report(state, per_s, n);
    const auto f = floor_rates().find({engine, static_cast<long>(n)});
    if (f != floor_rates().end() && f->second > 0) state.counters["x_floor"] = per_s / f->second;
}

// N threads each trying a non-blocking lock every 100 ms (redis-py's Lock,
// blocking with its default sleep), while one holder holds it.
template <class Counter, class Try>
void polling_floor(benchmark::State& state, const char* engine, std::chrono::seconds window, Try try_once) {
    const auto n = static_cast<int>(state.range(0));
    Counter counter;
    double per_s = 0;
    for (auto _ : state) {
        std::atomic<bool> stop{false};
        std::vector<std::thread> ts;
        for (int i = 0; i < n; ++i)
            ts.emplace_back([&, i] {
                auto conn = try_once(i, nullptr);
                while (!stop.load()) {
                    conn = try_once(i, std::move(conn));
                    std::this_thread::sleep_for(100ms);
                }
            });
        per_s = rate_after_settling(counter, window);
        stop = true;
        for (auto& t : ts) t.join();
    }
    report(state, per_s, n);
    floor_rates()[{engine, static_cast<long>(n)}] = per_s;
}

#if defined(COORD_BENCH_REDIS)
// The Redis server of COORD_REDIS_URL (redis://HOST:PORT[/DB]), by hiredis.
std::shared_ptr<redisContext> redis_connect() {
    const char* u = std::getenv("COORD_REDIS_URL");
    if (!u || !*u) throw std::runtime_error("COORD_REDIS_URL is not set");
    std::string rest = u;
    rest = rest.substr(rest.find("://") + 3);
    rest = rest.substr(0, rest.find('/'));
    const auto colon = rest.rfind(':');
    auto* c = redisConnect(rest.substr(0, colon).c_str(), std::stoi(rest.substr(colon + 1)));
    if (!c || c->err) throw std::runtime_error("idle cost: cannot connect to Redis");
    return std::shared_ptr<redisContext>(c, redisFree);
}
// Every command the server ran (INFO commandstats: the sum of calls=).
struct redis_commands {
    std::shared_ptr<redisContext> c = redis_connect();
    double read() {
        auto* r = static_cast<redisReply*>(redisCommand(c.get(), "INFO commandstats"));
        if (!r || r->type != REDIS_REPLY_STRING) throw std::runtime_error("idle cost: INFO commandstats failed");
        double total = 0;
        const std::string text(r->str, r->len);
        freeReplyObject(r);
        for (std::size_t p = text.find("calls="); p != std::string::npos; p = text.find("calls=", p + 6)) {
            std::uint64_t calls = 0;
            std::from_chars(text.data() + p + 6, text.data() + text.size(), calls);
            total += static_cast<double>(calls);
        }
        return total;
    }
};
void BM_Floor_PollingLock_Redis(benchmark::State& state) {
    const std::string key = "idle-poll-" + std::to_string(::getpid());
    polling_floor<redis_commands>(state, "redis", 4s, [&](int i, std::shared_ptr<redisContext> c) {
        if (!c) {
            c = redis_connect();
            if (i == 0) freeReplyObject(redisCommand(c.get(), "SET %s holder PX 600000", key.c_str()));
            return c;
        }
        freeReplyObject(redisCommand(c.get(), "SET %s w%d NX PX 10000", key.c_str(), i));
        return c;
    });
}
void BM_IdleCost_Redis(benchmark::State& state) { idle_cost<redis_maker, redis_commands>(state, "redis", 4s); }
BENCHMARK(BM_Floor_PollingLock_Redis)->Arg(50)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
BENCHMARK(BM_IdleCost_Redis)->Arg(10)->Arg(50)->Arg(100)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
#endif

#if defined(COORD_BENCH_POSTGRES)
std::shared_ptr<PGconn> pg_connect() {
    const char* c = std::getenv("COORD_PG_CONNINFO");
    if (!c || !*c) throw std::runtime_error("COORD_PG_CONNINFO is not set");
    std::shared_ptr<PGconn> conn(PQconnectdb(c), PQfinish);
    if (PQstatus(conn.get()) != CONNECTION_OK) throw std::runtime_error("idle cost: cannot connect to PostgreSQL");
    return conn;
}
// Every statement clients sent to the database (pg_stat_statements, which
// tests/postgres/postgres.sh loads; counted as each ends). Each is a transaction of
// its own: neither coord's waiters nor the polling lock open one around them.
struct postgres_transactions {
    std::shared_ptr<PGconn> c = pg_connect();
    postgres_transactions() {
        PQclear(PQexec(c.get(), "SET client_min_messages = warning"));
        PQclear(PQexec(c.get(), "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"));
    }
    double read() {
        std::unique_ptr<PGresult, decltype(&PQclear)> r(
            PQexec(c.get(), "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
                            "WHERE d.datname = current_database()"),
            PQclear);
        if (PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1)
            throw std::runtime_error(std::string("idle cost: pg_stat_statements read failed (is it in shared_preload_libraries?): ") +
                                     PQresultErrorMessage(r.get()));
        return std::stod(PQgetvalue(r.get(), 0, 0));
    }
};
void BM_Floor_PollingLock_Postgres(benchmark::State& state) {
    polling_floor<postgres_transactions>(state, "postgres", 4s, [&](int i, std::shared_ptr<PGconn> c) {
        if (!c) {
            c = pg_connect();
            if (i == 0) PQclear(PQexec(c.get(), "SELECT pg_advisory_lock(7370427)"));  // the holder, for the run
            return c;
        }
        if (i != 0) PQclear(PQexec(c.get(), "SELECT pg_try_advisory_lock(7370427)"));
        return c;
    });
}
void BM_IdleCost_Postgres(benchmark::State& state) { idle_cost<postgres_maker, postgres_transactions>(state, "postgres", 4s); }
BENCHMARK(BM_Floor_PollingLock_Postgres)->Arg(50)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
BENCHMARK(BM_IdleCost_Postgres)->Arg(10)->Arg(50)->Arg(100)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
#endif

}  // namespace

BENCHMARK_MAIN();
