// SPDX-License-Identifier: Apache-2.0
// The job-slot ledger on the memory store beside a bare mutex lock/unlock:
// BM_Ledger_RunOnce claims a new slot, runs an empty effect and marks it done;
// BM_Ledger_Replay runs a slot that is already done.
#include <benchmark/benchmark.h>

#include "floors.hpp"

#include <chrono>
#include <mutex>
#include <string>

#include "coord/job_ledger.hpp"
#include "coord/storage/memory.hpp"

namespace {

void BM_Floor_MutexLockUnlock(benchmark::State& state) { coord::bench::floor_mutex_lock_unlock(state); }
BENCHMARK(BM_Floor_MutexLockUnlock);

void BM_Ledger_RunOnce(benchmark::State& state) {
    coord::manual_clock clock{std::chrono::sys_days{std::chrono::year{2026} / 10 / 13}};
    coord::basic_memory_store<coord::manual_clock> store{clock};
    coord::basic_job_ledger<decltype(store)> ledger{store, {}};
    const auto base = std::chrono::sys_days{std::chrono::year{2026} / 10 / 13};
    std::int64_t n = 0;
    for (auto _ : state) {
        const coord::slot s("billing", coord::slot::time_point{base} + std::chrono::milliseconds{n++});
        auto r = ledger.run(s, "worker", "", [](const coord::ledger_context&) { return std::string("ok"); });
        benchmark::DoNotOptimize(r);
    }
}
BENCHMARK(BM_Ledger_RunOnce);

void BM_Ledger_Replay(benchmark::State& state) {
    coord::manual_clock clock{std::chrono::sys_days{std::chrono::year{2026} / 10 / 13}};
    coord::basic_memory_store<coord::manual_clock> store{clock};
    coord::basic_job_ledger<decltype(store)> ledger{store, {}};
    const auto s = *coord::slot::parse("billing@2026-10-13T00:00Z");
    auto effect = [](const coord::ledger_context&) { return std::string("ok"); };
    (void)ledger.run(s, "worker", "", effect);
    for (auto _ : state) {
        auto r = ledger.run(s, "worker", "", effect);
        benchmark::DoNotOptimize(r);
    }
}
BENCHMARK(BM_Ledger_Replay);

}  // namespace
