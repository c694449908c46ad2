// SPDX-License-Identifier: Apache-2.0
// The Redis stores against the same server in the same run:
//   BM_Floor_RedisScript          EVALSHA of a script that returns its argument, through the
//                                 store's own connection (pool of one): the floor. The
//                                 engine's benchmarks also run it beside each operation and
//                                 report x_floor, their time over its in the same iterations
//   BM_Redis_FenceWrite           one fenced write (target <= 1.2x the floor)
//   BM_Redis_LeaseAcquireRelease  an acquire and a release; items are operations (two an
//                                 iteration), so its time per item is per operation (<= 1.2x)
//   BM_Redis_SegmentAllocate      one range from the allocator (<= 1.2x the floor)
//   BM_Redis_ObserveWake          a grant to an observer's wake by PUBLISH, beside a bare
//                                 acquire and release (x_floor)
//   BM_Segment_Next/<store>       IDs from a generator on the memory and the Redis allocator
//                                 (target: within 1.1x; the allocator is off the hot path)
//   BM_Redis_FenceWriteShared     one store object (a pool of 8) shared by 1 and by 8 threads,
//                                 each on its own key: items/s at 8 threads over 1 is the
//                                 pool's scaling
// Over TLS, on a server that wants a client certificate and an ACL user:
//   BM_Floor_RedisScriptTls       the floor's script over TLS: the TLS floor
//   BM_Redis_FenceWriteTls        one fenced write over TLS (x_floor against the TLS floor:
//                                 what coord adds; against BM_Floor_RedisScript: what TLS adds)
//   BM_Redis_NewConnectionTls     the floor's script on a new store each time: TCP, the TLS
//                                 handshake, AUTH (what a pooled connection saves)
// The server comes from COORD_REDIS_URL (redis://HOST:PORT; .ci/run starts
// one with tests/redis/redis.sh), the TLS one from COORD_REDIS_TLS_URL
// (rediss://HOST:PORT) with COORD_REDIS_TLS_DIR (the secure server's
// directory: its tls/ certificates and coord.password); without them the
// binary fails.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "coord/open.hpp"
#include "coord/redis/store.hpp"
#include "engine_bench.hpp"
#include "coord/segment.hpp"
#include "coord/storage/memory.hpp"

namespace {

std::string url() {
    static const std::string u = coord::bench::required_env("COORD_REDIS_URL", "redis://HOST:PORT; tests/redis/redis.sh starts a server");
    return u;
}
using coord::bench::fail;

// The store through coord/open.hpp, with a prefix of this run's own: keys
// of earlier runs do not matter.
coord::redis::store opened(std::size_t pool, const char* prefix) {
    return coord::open_store<coord::redis::store>(url() + "?pool=" + std::to_string(pool) + "&prefix=" + prefix + "-" +
                                                  std::to_string(::getpid()));
}

// One connection: every single-threaded bench and its floor use the same one.
coord::redis::store& single() {
    static coord::redis::store s = opened(1, "bench");
    static const bool initialized = s.initialize(coord::redis::initial_floors{}, true).has_value();
    (void)initialized;
    return s;
}
coord::redis::store& shared() {
    static coord::redis::store s = opened(8, "bench-shared");
    static const bool initialized = s.initialize(coord::redis::initial_floors{}, true).has_value();
    (void)initialized;
    return s;
}


// The floor call: EVALSHA of a script that returns its argument, through the store's connection.
void floor_script() {
    static std::uint64_t i = 0;
    auto r = single().echo(std::to_string(++i));
    if (!r) fail("echo", r.error());
    benchmark::DoNotOptimize(r);
}

void BM_Floor_RedisScript(benchmark::State& state) {
    for (auto _ : state) floor_script();
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Floor_RedisScript)->UseRealTime();

void BM_Redis_FenceWrite(benchmark::State& state) { coord::bench::fence_write_loop(state, single(), "bench-fence", floor_script); }
BENCHMARK(BM_Redis_FenceWrite)->UseManualTime();

void BM_Redis_LeaseAcquireRelease(benchmark::State& state) {
    coord::bench::lease_acquire_release_loop(state, single(), floor_script);
}
BENCHMARK(BM_Redis_LeaseAcquireRelease)->UseManualTime();

void BM_Redis_SegmentAllocate(benchmark::State& state) {
    auto& s = single();
    coord::bench::beside_floor b;
    for (auto _ : state) {
        b.iteration(state, floor_script, [&] {
            auto r = s.segment_allocate("bench-segment", 1000);
            if (!r) fail("segment_allocate", r.error());
            benchmark::DoNotOptimize(r);
        }, 1);
    }
    b.report(state);
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Redis_SegmentAllocate)->UseManualTime();

// The keeper holding 1, 100 and 1,000 leases: renewal work per held lease
// beside bare lease_renew calls (coord::bench::keeper_renewals).
void BM_Redis_KeeperRenewals(benchmark::State& state) { coord::bench::keeper_renewals(state, single(), "bench-keeper-"); }
BENCHMARK(BM_Redis_KeeperRenewals)->Arg(1)->Arg(100)->Arg(1000)->UseManualTime();

// Election handover: the leader resigns, the waiting candidate is woken by
// pub/sub (coord::bench::election_handover).
void BM_Redis_ElectionHandover(benchmark::State& state) { coord::bench::election_handover(state, single(), "bench-election-"); }
BENCHMARK(BM_Redis_ElectionHandover)->UseManualTime()->Iterations(200);

// An observer woken by PUBLISH at a grant (coord::bench::observe_wake).
void BM_Redis_ObserveWake(benchmark::State& state) { coord::bench::observe_wake(state, single(), "bench-observe-"); }
BENCHMARK(BM_Redis_ObserveWake)->UseManualTime()->Iterations(100);

void BM_Segment_Next_Memory(benchmark::State& state) {
    static coord::memory_store s;
    coord::bench::segment_next(state, s);
}
BENCHMARK(BM_Segment_Next_Memory)->UseRealTime();
void BM_Segment_Next_Redis(benchmark::State& state) { coord::bench::segment_next(state, single()); }
BENCHMARK(BM_Segment_Next_Redis)->UseRealTime();

void BM_Redis_FenceWriteShared(benchmark::State& state) {
    coord::bench::fence_write_loop(state, shared(), "bench-shared-" + std::to_string(state.thread_index()));
}
BENCHMARK(BM_Redis_FenceWriteShared)->Threads(1)->Threads(8)->UseRealTime();

// --- over TLS -------------------------------------------------------------

std::string tls_url() {
    static const std::string u = coord::bench::required_env("COORD_REDIS_TLS_URL", "rediss://HOST:PORT; tests/redis/redis.sh start DIR PORT secure");
    return u;
}
coord::redis::options tls_opts(std::size_t pool) {
    static const std::string dir = coord::bench::required_env("COORD_REDIS_TLS_DIR", "the secure server's directory");
    coord::redis::options o;
    o.pool_size = pool;
    o.prefix = "bench-tls-" + std::to_string(::getpid());
    o.ca_file = dir + "/tls/ca.crt";
    o.cert_file = dir + "/tls/client.crt";
    o.key_file = dir + "/tls/client.key";
    o.user = "coord";
    std::ifstream in(dir + "/coord.password");
    std::getline(in, o.password);
    return o;
}
coord::redis::store& tls_single() {
    static coord::redis::store s(tls_url(), {}, tls_opts(1));
    static const bool initialized = s.initialize(coord::redis::initial_floors{}, true).has_value();
    (void)initialized;
    return s;
}
void tls_floor_script() {
    static std::uint64_t i = 0;
    auto r = tls_single().echo(std::to_string(++i));
    if (!r) fail("echo over TLS", r.error());
    benchmark::DoNotOptimize(r);
}

void BM_Floor_RedisScriptTls(benchmark::State& state) {
    for (auto _ : state) tls_floor_script();
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Floor_RedisScriptTls)->UseRealTime();

void BM_Redis_FenceWriteTls(benchmark::State& state) {
    coord::bench::fence_write_loop(state, tls_single(), "bench-fence", tls_floor_script);
}
BENCHMARK(BM_Redis_FenceWriteTls)->UseManualTime();

void BM_Redis_NewConnectionTls(benchmark::State& state) {
    const auto o = tls_opts(1);
    for (auto _ : state) {
        coord::redis::store s(tls_url(), {}, o);
        auto r = s.echo("new");
        if (!r) fail("echo on a new connection", r.error());
        benchmark::DoNotOptimize(r);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Redis_NewConnectionTls)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
    (void)url();      // fails without COORD_REDIS_URL
    (void)tls_url();  // and without COORD_REDIS_TLS_URL
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
