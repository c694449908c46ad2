// SPDX-License-Identifier: Apache-2.0
// bench/floors.hpp: the floors coord's benchmarks are read against, each
// registered in the binary that measures beside it (same run, same machine).
#pragma once

#include <benchmark/benchmark.h>

#include <mutex>

#include "coord/clock.hpp"

namespace coord::bench {

/// One uncontended (1 thread) or shared (2 threads) mutex lock and unlock.
inline void floor_mutex_lock_unlock(benchmark::State& state) {
    static std::mutex m;
    static long counter = 0;
    for (auto _ : state) {
        std::lock_guard lk(m);
        benchmark::DoNotOptimize(++counter);
    }
}

/// One bare read of coord::system_clock, the clock the ID generators read.
inline void floor_clock_read(benchmark::State& state) {
    coord::system_clock clock;
    for (auto _ : state) benchmark::DoNotOptimize(clock.now());
    state.SetItemsProcessed(state.iterations());
}

}  // namespace coord::bench
