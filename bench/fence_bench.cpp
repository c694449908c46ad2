// SPDX-License-Identifier: Apache-2.0
// Fence writes and lease grants on the memory store, beside a bare mutex
// lock/unlock measured in the same run: the ratio is coord's overhead.
#include <benchmark/benchmark.h>

#include "floors.hpp"

#include <chrono>
#include <mutex>
#include <string>

#include "coord/fence.hpp"
#include "coord/lease.hpp"
#include "coord/aliases.hpp"
#include "coord/storage/memory.hpp"

namespace {

using namespace std::chrono_literals;

void BM_Floor_MutexLockUnlock(benchmark::State& state) { coord::bench::floor_mutex_lock_unlock(state); }
BENCHMARK(BM_Floor_MutexLockUnlock)->Threads(1)->Threads(2)->UseRealTime();

// One fenced write (token check, value stored) per iteration; every thread
// writes its own key of one shared store, tokens increasing.
void BM_Fence_Write(benchmark::State& state) {
    static coord::memory_store store;
    coord::keyed_fenced_resource res{store};
    const std::string key = "key" + std::to_string(state.thread_index());
    const std::string value = "value-of-a-typical-size-0123456789";
    coord::fence_token token = 1;
    for (auto _ : state) {
        auto r = res.write(key, token++, value);
        benchmark::DoNotOptimize(r);
    }
}
BENCHMARK(BM_Fence_Write)->Threads(1)->Threads(2)->UseRealTime();

// acquire + release of a lease: two store operations per iteration.
void BM_Lease_AcquireRelease(benchmark::State& state) {
    static coord::memory_store store;
    coord::lease_manager leases{store};
    const std::string name = "lease" + std::to_string(state.thread_index());
    for (auto _ : state) {
        auto l = leases.acquire(name, "owner", 10s);
        if (!l) state.SkipWithError("acquire refused");
        auto r = leases.release(*l);
        benchmark::DoNotOptimize(r);
    }
}
BENCHMARK(BM_Lease_AcquireRelease)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
