// SPDX-License-Identifier: Apache-2.0
// UUIDv7 generation beside one bare read of the same clock, and text
// conversions beside a 16-byte copy for scale.
#include <benchmark/benchmark.h>

#include "floors.hpp"

#include <cstring>
#include <string>

#include "coord/clock.hpp"
#include "coord/uuid7.hpp"

namespace {

void BM_Floor_ClockRead(benchmark::State& state) { coord::bench::floor_clock_read(state); }
BENCHMARK(BM_Floor_ClockRead)->Threads(1)->Threads(2)->UseRealTime();
void BM_Floor_ClockAndSharedFetchAdd(benchmark::State& state) { coord::bench::floor_clock_and_shared_fetch_add(state); }
BENCHMARK(BM_Floor_ClockAndSharedFetchAdd)->Threads(1)->Threads(2)->UseRealTime();

// One generator shared by the threads (method 1, os_random).
void BM_Uuid7_Next(benchmark::State& state) {
    static coord::uuid7_generator gen;
    for (auto _ : state) {
        auto u = gen.next();
        benchmark::DoNotOptimize(u);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Uuid7_Next)->Threads(1)->Threads(2)->UseRealTime();

// The per-thread form: coord::uuid7().
void BM_Uuid7_NextPerThread(benchmark::State& state) {
    for (auto _ : state) {
        auto u = coord::uuid7();
        benchmark::DoNotOptimize(u);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Uuid7_NextPerThread)->Threads(1)->Threads(2)->UseRealTime();

void BM_Floor_Memcpy16(benchmark::State& state) {
    unsigned char src[16] = {1, 2, 3}, dst[16];
    for (auto _ : state) {
        benchmark::DoNotOptimize(src);
        std::memcpy(dst, src, 16);
        benchmark::DoNotOptimize(dst);
    }
}
BENCHMARK(BM_Floor_Memcpy16);

void BM_Uuid_ToString(benchmark::State& state) {
    const auto u = *coord::uuid::parse("017f22e2-79b0-7cc3-98c4-dc0c0c07398f");
    char out[36];
    for (auto _ : state) {
        benchmark::DoNotOptimize(u);
        u.to_chars(out);
        benchmark::DoNotOptimize(out);
    }
}
BENCHMARK(BM_Uuid_ToString);

void BM_Uuid_Parse(benchmark::State& state) {
    const std::string text = "017f22e2-79b0-7cc3-98c4-dc0c0c07398f";
    for (auto _ : state) {
        benchmark::DoNotOptimize(text.data());
        auto u = coord::uuid::parse(text);
        benchmark::DoNotOptimize(u);
    }
}
BENCHMARK(BM_Uuid_Parse);

}  // namespace
