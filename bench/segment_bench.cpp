// SPDX-License-Identifier: Apache-2.0
// Segment IDs. BM_Segment_Next (a tag handle on the memory allocator) beside
// BM_Floor_AtomicFetchAdd: the ratio is the cost of the seqlock read around
// the one fetch_add a segment ID needs. BM_Segment_SlowAllocator serves
// 10,000,000 IDs from an allocator that answers after 2 ms and reports the
// worst and the 99.99th percentile latency of next(): no call should wait on
// the allocator.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "coord/segment.hpp"
#include "coord/aliases.hpp"
#include "coord/storage/memory.hpp"

namespace {

void BM_Floor_AtomicFetchAdd(benchmark::State& state) {
    static std::atomic<std::uint64_t> counter{0};
    for (auto _ : state) benchmark::DoNotOptimize(counter.fetch_add(1, std::memory_order_relaxed));
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Floor_AtomicFetchAdd)->Threads(1)->Threads(2)->UseRealTime();

void BM_Segment_Next(benchmark::State& state) {
    static coord::memory_store store;
    static coord::segment_generator gen{store, [] {
        coord::segment_options o;
        o.initial_step = o.min_step = 1'000'000;
        o.max_step = 100'000'000;
        return o;
    }()};
    auto h = gen.tag("bench");
    std::uint64_t refused = 0;
    for (auto _ : state) {
        auto id = h.next();
        if (!id) ++refused;
        benchmark::DoNotOptimize(id);
    }
    state.SetItemsProcessed(state.iterations());
    state.counters["refused"] = static_cast<double>(refused);
}
BENCHMARK(BM_Segment_Next)->Threads(1)->Threads(2)->UseRealTime();

/// The memory allocator, answering after 2 ms.
struct slow_allocator {
    coord::memory_store inner;
    coord::result<coord::segment_range> segment_allocate(std::string_view tag, std::uint64_t step) {
        std::this_thread::sleep_for(std::chrono::milliseconds{2});
        return inner.segment_allocate(tag, step);
    }
};

void BM_Segment_SlowAllocator(benchmark::State& state) {
    constexpr std::size_t ids = 10'000'000;
    for (auto _ : state) {
        slow_allocator alloc;
        // This loop draws tens of millions of IDs a second, so the first range
        // must outlast one 2 ms allocator call: 1,000,000 IDs.
        coord::segment_options o;
        o.initial_step = o.min_step = 1'000'000;
        coord::basic_segment_generator<slow_allocator> gen{alloc, o};
        auto h = gen.tag("slow");
        if (!gen.warm("slow")) state.SkipWithError("warm failed");
        std::vector<std::int64_t> ns(ids);
        std::uint64_t refused = 0;
        for (std::size_t i = 0; i < ids;) {
            const auto t0 = std::chrono::steady_clock::now();
            auto id = h.next();
            const auto t1 = std::chrono::steady_clock::now();
            if (!id) {
                ++refused;
                continue;
            }
            ns[i++] = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
        }
        std::sort(ns.begin(), ns.end());
        state.counters["max_ns"] = static_cast<double>(ns.back());
        state.counters["p9999_ns"] = static_cast<double>(ns[ids - ids / 10000]);
        state.counters["p50_ns"] = static_cast<double>(ns[ids / 2]);
        state.counters["refused"] = static_cast<double>(refused);
        state.counters["allocations"] = static_cast<double>(gen.stats("slow").allocations);
    }
}
BENCHMARK(BM_Segment_SlowAllocator)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
