// SPDX-License-Identifier: Apache-2.0
// The Redis stores against the same server in the same run:
//   BM_Floor_RedisScript          EVALSHA of a script that returns its argument, through the
//                                 store's own connection (pool of one): the floor
//   BM_Redis_FenceWrite           one fenced write (target <= 1.2x the floor)
//   BM_Redis_LeaseAcquireRelease  an acquire and a release; items are operations (two an
//                                 iteration), so its time per item is per operation (<= 1.2x)
//   BM_Redis_SegmentAllocate      one range from the allocator (<= 1.2x the floor)
//   BM_Segment_Next/<store>       IDs from a generator on the memory and the Redis allocator
//                                 (target: within 1.1x; the allocator is off the hot path)
//   BM_Redis_FenceWriteShared     one store object (a pool of 8) shared by 1 and by 8 threads,
//                                 each on its own key: items/s at 8 threads over 1 is the
//                                 pool's scaling
// The server comes from COORD_REDIS_URL (redis://HOST:PORT; .ci/run starts
// one with tests/redis.sh); without it the binary fails.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "coord/redis/store.hpp"
#include "coord/segment.hpp"
#include "coord/storage/memory.hpp"

namespace {

std::string url() {
    const char* u = std::getenv("COORD_REDIS_URL");
    return u ? u : "";
}

// A prefix of this run's own: keys of earlier runs do not matter.
coord::redis::options opts(std::size_t pool, const char* prefix) {
    coord::redis::options o;
    o.pool_size = pool;
    o.prefix = prefix;
    o.prefix += '-';
    o.prefix += std::to_string(::getpid());
    return o;
}

// One connection: every single-threaded bench and its floor use the same one.
coord::redis::store& single() {
    static coord::redis::store s{url(), {}, opts(1, "bench")};
    static const bool initialized = s.initialize(true).has_value();
    (void)initialized;
    return s;
}
coord::redis::store& shared() {
    static coord::redis::store s{url(), {}, opts(8, "bench-shared")};
    static const bool initialized = s.initialize(true).has_value();
    (void)initialized;
    return s;
}

// Tokens only grow, across repetitions and threads.
std::atomic<coord::fence_token> next_token{0};

void fail(const char* what, const coord::error& e) {
    std::fprintf(stderr, "redis_bench: %s: %s\n", what, e.message().c_str());
    std::exit(1);
}

void BM_Floor_RedisScript(benchmark::State& state) {
    auto& s = single();
    std::uint64_t i = 0;
    for (auto _ : state) {
        auto r = s.echo(std::to_string(++i));
        if (!r) fail("echo", r.error());
        benchmark::DoNotOptimize(r);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Floor_RedisScript)->UseRealTime();

void BM_Redis_FenceWrite(benchmark::State& state) {
    auto& s = single();
    for (auto _ : state) {
        auto r = s.fence_write("bench-fence", ++next_token, "value");
        if (!r) fail("fence_write", r.error().code);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Redis_FenceWrite)->UseRealTime();

void BM_Redis_LeaseAcquireRelease(benchmark::State& state) {
    auto& s = single();
    for (auto _ : state) {
        auto l = s.lease_acquire("bench-lease", "A", std::chrono::seconds{30});
        if (!l) fail("lease_acquire", l.error().code);
        auto r = s.lease_release("bench-lease", "A", l->token);
        if (!r) fail("lease_release", r.error().code);
    }
    state.SetItemsProcessed(state.iterations() * 2);  // per operation
}
BENCHMARK(BM_Redis_LeaseAcquireRelease)->UseRealTime();

void BM_Redis_SegmentAllocate(benchmark::State& state) {
    auto& s = single();
    for (auto _ : state) {
        auto r = s.segment_allocate("bench-segment", 1000);
        if (!r) fail("segment_allocate", r.error());
        benchmark::DoNotOptimize(r);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Redis_SegmentAllocate)->UseRealTime();

coord::segment_options big_steps() {
    coord::segment_options o;
    o.initial_step = o.min_step = 1'000'000;
    o.max_step = 100'000'000;
    return o;
}

template <class Store>
void segment_next(benchmark::State& state, Store& s) {
    static coord::basic_segment_generator<Store> gen{s, big_steps()};
    auto h = gen.tag("bench-next");
    std::uint64_t refused = 0;
    for (auto _ : state) {
        auto id = h.next();
        if (!id) ++refused;
        benchmark::DoNotOptimize(id);
    }
    state.SetItemsProcessed(state.iterations());
    state.counters["refused"] = static_cast<double>(refused);
}
void BM_Segment_Next_Memory(benchmark::State& state) {
    static coord::memory_store s;
    segment_next(state, s);
}
BENCHMARK(BM_Segment_Next_Memory)->UseRealTime();
void BM_Segment_Next_Redis(benchmark::State& state) { segment_next(state, single()); }
BENCHMARK(BM_Segment_Next_Redis)->UseRealTime();

void BM_Redis_FenceWriteShared(benchmark::State& state) {
    auto& s = shared();
    const std::string key = "bench-shared-" + std::to_string(state.thread_index());
    for (auto _ : state) {
        auto r = s.fence_write(key, ++next_token, "value");
        if (!r) fail("fence_write", r.error().code);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Redis_FenceWriteShared)->Threads(1)->Threads(8)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
    if (url().empty()) {
        std::fprintf(stderr, "redis_bench: set COORD_REDIS_URL=redis://HOST:PORT (tests/redis.sh starts a server)\n");
        return 1;
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
