// SPDX-License-Identifier: Apache-2.0
// bench/floors.hpp: the floors coord's benchmarks are read against, each
// registered in the binary that measures beside it (same run, same machine).
#pragma once

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
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

/// One clock read and one fetch_add on a word that every thread shares (on
/// its own cache line): the least that a generator whose IDs are strictly
/// increasing across threads in the order it hands them out must do per ID.
/// Each ID needs a read-modify-write of one shared word (the linearization
/// point), so with two threads the word's cache line moves between cores
/// for nearly every ID; that transfer, not the generator, is what this
/// floor measures beside the bare clock read.
inline void floor_clock_and_shared_fetch_add(benchmark::State& state) {
    struct alignas(64) shared_word {
        std::atomic<std::uint64_t> v{0};
    };
    static shared_word word;
    coord::system_clock clock;
    for (auto _ : state) {
        benchmark::DoNotOptimize(clock.now());
        benchmark::DoNotOptimize(word.v.fetch_add(1, std::memory_order_acq_rel));
    }
    state.SetItemsProcessed(state.iterations());
}

}  // namespace coord::bench
