// SPDX-License-Identifier: Apache-2.0
// Snowflake IDs on the real clock. BM_Snowflake_Next runs at the default
// layout's limit (4,096 IDs per millisecond per node): its items/s against
// 4,096,000 is the figure. BM_Snowflake_NextWide uses a layout whose sequence
// cannot run out, beside BM_Floor_ClockRead (one bare read of the same clock):
// the ratio is the generator's cost per ID over the clock read it needs.
#include <benchmark/benchmark.h>

#include "floors.hpp"

#include <chrono>

#include "coord/clock.hpp"
#include "coord/snowflake.hpp"
#include "coord/storage/memory.hpp"

namespace {

void BM_Floor_ClockRead(benchmark::State& state) { coord::bench::floor_clock_read(state); }
BENCHMARK(BM_Floor_ClockRead)->Threads(1)->Threads(2)->UseRealTime();
void BM_Floor_ClockAndSharedFetchAdd(benchmark::State& state) { coord::bench::floor_clock_and_shared_fetch_add(state); }
BENCHMARK(BM_Floor_ClockAndSharedFetchAdd)->Threads(1)->Threads(2)->UseRealTime();

template <class Layout>
coord::basic_snowflake<Layout, coord::system_clock, coord::memory_store>& generator() {
    static coord::memory_store store;
    static coord::basic_snowflake<Layout, coord::system_clock, coord::memory_store> gen{store, [] {
        coord::snowflake_options o;
        o.node = Layout::max_node;
        return o;
    }()};
    return gen;
}

void BM_Snowflake_Next(benchmark::State& state) {
    auto& gen = generator<coord::default_layout>();
    for (auto _ : state) {
        auto id = gen.next();
        if (!id) state.SkipWithError("next() refused");
        benchmark::DoNotOptimize(id);
    }
    state.SetItemsProcessed(state.iterations());
    state.counters["limit_fraction"] =
        benchmark::Counter(static_cast<double>(state.iterations()) / 4'096'000.0, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Snowflake_Next)->Threads(1)->Threads(2)->UseRealTime()->MinTime(1.0);

// 41 timestamp bits, no node bits, 22 sequence bits: 4M IDs per millisecond.
using wide_layout = coord::snowflake_layout<41, 0, 22>;

void BM_Snowflake_NextWide(benchmark::State& state) {
    auto& gen = generator<wide_layout>();
    for (auto _ : state) {
        auto id = gen.next();
        if (!id) state.SkipWithError("next() refused");
        benchmark::DoNotOptimize(id);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Snowflake_NextWide)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
