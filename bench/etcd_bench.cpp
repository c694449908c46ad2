// SPDX-License-Identifier: Apache-2.0
// The etcd stores against the same member in the same run:
//   BM_Floor_EtcdTxn              a bare one-put transaction (POST /v3/kv/txn) through the
//                                 store's own connection (a pool of one): the floor
//   BM_Etcd_FenceWrite            one fenced write: one transaction (target <= 1.2x)
//   BM_Etcd_LeaseAcquireRelease   an acquire and a release; items are operations (two an
//                                 iteration). An acquire is 2 requests (etcd grants a lease
//                                 on its own, before a key can carry it), a release of one's
//                                 own grant 1 (a revoke): 1.5 requests an operation
//   BM_Segment_Next/<store>       IDs from a generator on the memory and the etcd allocator
// The member comes from COORD_ETCD_URL (etcd://HOST:PORT; .ci/run starts one
// with tests/etcd.sh); without it the binary fails.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "coord/etcd/store.hpp"
#include "coord/segment.hpp"
#include "coord/storage/memory.hpp"

namespace {

std::string url() {
    const char* u = std::getenv("COORD_ETCD_URL");
    return u ? u : "";
}

coord::etcd::options opts() {
    coord::etcd::options o;
    o.pool_size = 1;  // one connection: every bench and its floor use the same one
    o.prefix = "bench-";
    o.prefix += std::to_string(::getpid());
    return o;
}
coord::etcd::store& single() {
    static coord::etcd::store s{url(), {}, opts()};
    return s;
}
coord::etcd::pool& floor_pool() {
    static coord::etcd::pool p{url(), opts()};
    return p;
}

std::atomic<coord::fence_token> next_token{0};

void fail(const char* what, const coord::error& e) {
    std::fprintf(stderr, "etcd_bench: %s: %s\n", what, e.message().c_str());
    std::exit(1);
}

void BM_Floor_EtcdTxn(benchmark::State& state) {
    auto& p = floor_pool();
    const std::string key = opts().prefix + "/floor";
    std::uint64_t i = 0;
    for (auto _ : state) {
        const std::string body = coord::etcd::detail::txn_body({}, {coord::etcd::detail::put(key, std::to_string(++i))}, {});
        auto r = p.request("/v3/kv/txn", body, true);
        if (!r) fail("txn", r.error());
        benchmark::DoNotOptimize(r);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Floor_EtcdTxn)->UseRealTime();

void BM_Etcd_FenceWrite(benchmark::State& state) {
    auto& s = single();
    for (auto _ : state) {
        auto r = s.fence_write("bench-fence", ++next_token, "value");
        if (!r) fail("fence_write", r.error().code);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Etcd_FenceWrite)->UseRealTime();

void BM_Etcd_LeaseAcquireRelease(benchmark::State& state) {
    auto& s = single();
    for (auto _ : state) {
        auto l = s.lease_acquire("bench-lease", "A", std::chrono::seconds{30});
        if (!l) fail("lease_acquire", l.error().code);
        auto r = s.lease_release("bench-lease", "A", l->token);
        if (!r) fail("lease_release", r.error().code);
    }
    state.SetItemsProcessed(state.iterations() * 2);  // per operation
}
BENCHMARK(BM_Etcd_LeaseAcquireRelease)->UseRealTime();

coord::segment_options big_steps() {
    coord::segment_options o;
    o.initial_step = o.min_step = 1'000'000;
    o.max_step = 100'000'000;
    return o;
}
template <class Store>
void segment_next(benchmark::State& state, Store& s) {
    static coord::basic_segment_generator<Store> gen{s, big_steps()};
    auto h = gen.tag("bench-next");
    std::uint64_t refused = 0;
    for (auto _ : state) {
        auto id = h.next();
        if (!id) ++refused;
        benchmark::DoNotOptimize(id);
    }
    state.SetItemsProcessed(state.iterations());
    state.counters["refused"] = static_cast<double>(refused);
}
void BM_Segment_Next_Memory(benchmark::State& state) {
    static coord::memory_store s;
    segment_next(state, s);
}
BENCHMARK(BM_Segment_Next_Memory)->UseRealTime();
void BM_Segment_Next_Etcd(benchmark::State& state) { segment_next(state, single()); }
BENCHMARK(BM_Segment_Next_Etcd)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
    if (url().empty()) {
        std::fprintf(stderr, "etcd_bench: set COORD_ETCD_URL=etcd://HOST:PORT (tests/etcd.sh starts a member)\n");
        return 1;
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
