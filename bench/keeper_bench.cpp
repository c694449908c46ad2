// SPDX-License-Identifier: Apache-2.0
// The keeper's renewal work per held lease on the memory store: a keeper
// holding 1, 100 and 1,000 leases, each round of renewals beside as many
// bare lease_renew calls (x_floor), with store calls per lease per second
// and the keeper's time per renewal (bench/engine_bench.hpp). The engines'
// figures: BM_Redis_KeeperRenewals in redis_bench.
#include <benchmark/benchmark.h>

#include "engine_bench.hpp"

#include "coord/storage/memory.hpp"

namespace {

void BM_Memory_KeeperRenewals(benchmark::State& state) {
    static coord::memory_store store;
    coord::bench::keeper_renewals(state, store, "keeper-");
}
BENCHMARK(BM_Memory_KeeperRenewals)->Arg(1)->Arg(100)->Arg(1000)->UseManualTime();

// Election handover on the memory store: a leader resigns while another
// candidate waits in the queue (coord::bench::election_handover).
void BM_Memory_ElectionHandover(benchmark::State& state) {
    static coord::memory_store store;
    coord::bench::election_handover(state, store, "election-");
}
BENCHMARK(BM_Memory_ElectionHandover)->UseManualTime()->Iterations(200);

}  // namespace
