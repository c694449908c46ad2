// SPDX-License-Identifier: Apache-2.0
// The ZooKeeper stores against the same standalone server in the same run:
//   BM_Floor_ZkSetData            one bare setData through the store's own session (the
//                                 clock node the store stamps its now on): the floor. The
//                                 engine's benchmarks also run it beside each operation and
//                                 report x_floor, their time over its in the same iterations
//   BM_Zk_FenceWrite              one fenced write: a conditional setData on the version this
//                                 store object last wrote (target <= 1.3x)
//   BM_Zk_LeaseAcquireRelease     an acquire and a release; items are operations (two an
//                                 iteration): each one conditional setData (<= 1.3x)
// The server comes from COORD_ZK_URL (zookeeper://HOST:PORT; .ci/run starts
// one with tests/zookeeper/zookeeper.sh); without it the binary fails.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "coord/open.hpp"
#include "coord/zookeeper/store.hpp"
#include "engine_bench.hpp"

namespace {

std::string url() {
    static const std::string u = coord::bench::required_env("COORD_ZK_URL", "zookeeper://HOST:PORT; tests/zookeeper/zookeeper.sh starts a server");
    return u;
}
using coord::bench::fail;
coord::zookeeper::store& store() {
    static coord::zookeeper::store s = coord::open_store<coord::zookeeper::store>(url() + "/bench-" + std::to_string(::getpid()));
    static const bool initialized = s.initialize(coord::initial_floors{}).has_value();
    if (!initialized) fail("initialize", coord::make_error_code(coord::errc::store_uninitialized));
    return s;
}

// The floor call: one bare setData through the store's own session.
void floor_set_data() {
    auto r = store().server_now_ns();  // one setData, nothing else
    if (!r) fail("setData", r.error());
    benchmark::DoNotOptimize(r);
}

void BM_Floor_ZkSetData(benchmark::State& state) {
    for (auto _ : state) floor_set_data();
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Floor_ZkSetData)->UseRealTime();

void BM_Zk_FenceWrite(benchmark::State& state) { coord::bench::fence_write_loop(state, store(), "bench-fence", floor_set_data); }
BENCHMARK(BM_Zk_FenceWrite)->UseManualTime();

void BM_Zk_LeaseAcquireRelease(benchmark::State& state) {
    coord::bench::lease_acquire_release_loop(state, store(), floor_set_data);
}
BENCHMARK(BM_Zk_LeaseAcquireRelease)->UseManualTime();

// Election handover: the leader resigns; ZooKeeper has no queued acquire yet,
// so the candidate tries again within a second (coord::bench::election_handover).
void BM_Zk_ElectionHandover(benchmark::State& state) { coord::bench::election_handover(state, store(), "bench-election-"); }
BENCHMARK(BM_Zk_ElectionHandover)->UseManualTime()->Iterations(3);

// An observer woken by a watch at a grant (coord::bench::observe_wake).
void BM_Zk_ObserveWake(benchmark::State& state) { coord::bench::observe_wake(state, store(), "bench-observe-"); }
BENCHMARK(BM_Zk_ObserveWake)->UseManualTime()->Iterations(30);

}  // namespace

int main(int argc, char** argv) {
    (void)url();  // fails without COORD_ZK_URL
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
