// SPDX-License-Identifier: Apache-2.0
// The ZooKeeper stores against the same standalone server in the same run:
//   BM_Floor_ZkSetData            one bare setData through the store's own session (the
//                                 clock node the store stamps its now on): the floor
//   BM_Zk_FenceWrite              one fenced write: a conditional setData on the version this
//                                 store object last wrote (target <= 1.3x)
//   BM_Zk_LeaseAcquireRelease     an acquire and a release; items are operations (two an
//                                 iteration): each one conditional setData (<= 1.3x)
// The server comes from COORD_ZK_URL (zookeeper://HOST:PORT; .ci/run starts
// one with tests/zookeeper.sh); without it the binary fails.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "coord/zookeeper/store.hpp"

namespace {

std::string url() {
    const char* u = std::getenv("COORD_ZK_URL");
    return u ? u : "";
}
coord::zookeeper::store& store() {
    static coord::zookeeper::store s{url() + "/bench-" + std::to_string(::getpid())};
    return s;
}
std::atomic<coord::fence_token> next_token{0};

void fail(const char* what, const coord::error& e) {
    std::fprintf(stderr, "zookeeper_bench: %s: %s\n", what, e.message().c_str());
    std::exit(1);
}

void BM_Floor_ZkSetData(benchmark::State& state) {
    auto& s = store();
    for (auto _ : state) {
        auto r = s.server_now_ns();  // one setData, nothing else
        if (!r) fail("setData", r.error());
        benchmark::DoNotOptimize(r);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Floor_ZkSetData)->UseRealTime();

void BM_Zk_FenceWrite(benchmark::State& state) {
    auto& s = store();
    for (auto _ : state) {
        auto r = s.fence_write("bench-fence", ++next_token, "value");
        if (!r) fail("fence_write", r.error().code);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Zk_FenceWrite)->UseRealTime();

void BM_Zk_LeaseAcquireRelease(benchmark::State& state) {
    auto& s = store();
    for (auto _ : state) {
        auto l = s.lease_acquire("bench-lease", "A", std::chrono::seconds{30});
        if (!l) fail("lease_acquire", l.error().code);
        auto r = s.lease_release("bench-lease", "A", l->token);
        if (!r) fail("lease_release", r.error().code);
    }
    state.SetItemsProcessed(state.iterations() * 2);  // per operation
}
BENCHMARK(BM_Zk_LeaseAcquireRelease)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
    if (url().empty()) {
        std::fprintf(stderr, "zookeeper_bench: set COORD_ZK_URL=zookeeper://HOST:PORT (tests/zookeeper.sh starts a server)\n");
        return 1;
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
