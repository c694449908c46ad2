// SPDX-License-Identifier: Apache-2.0
// The etcd stores against the same member in the same run:
//   BM_Floor_EtcdTxn              a bare one-put transaction (POST /v3/kv/txn) through a
//                                 connection of its own (a pool of one): the floor. The
//                                 engine's benchmarks also run it beside each operation and
//                                 report x_floor, their time over its in the same iterations
//   BM_Etcd_FenceWrite            one fenced write: one transaction (target <= 1.2x)
//   BM_Etcd_LeaseAcquireRelease   an acquire and a release; items are operations (two an
//                                 iteration; target <= 1.2x). An acquire takes a spare lease
//                                 (the store object's released grant's; renewed by a keepalive
//                                 only once its term began more than the reuse margin ago) and
//                                 is one transaction, a release of one's own grant one
//   BM_Floor_EtcdKeepalive        one bare keepalive of a lease (POST /v3/lease/keepalive):
//                                 what an acquire adds when its spare must be renewed
//   BM_Segment_Next/<store>       IDs from a generator on the memory and the etcd allocator
// Over TLS, on a member that wants a client certificate and has its
// authentication on (every request carries the token):
//   BM_Floor_EtcdTxnTls           the bare transaction over https, signed in: the TLS floor
//   BM_Etcd_FenceWriteTls         one fenced write over https (x_floor against the TLS floor:
//                                 what coord adds; against BM_Floor_EtcdTxn: what TLS adds)
//   BM_Etcd_NewConnectionTls      the bare transaction on a new pool each time: the TCP and TLS
//                                 handshakes and the sign-in a pooled connection pays once
// The members come from COORD_ETCD_URL (etcd://HOST:PORT) and
// COORD_ETCD_TLS_URL (etcds://HOST:PORT) with COORD_ETCD_TLS_DIR (the secure
// member's directory: its CA, client certificate and coord's password);
// .ci/run starts both with tests/etcd/etcd.sh. Without them the binary fails.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "coord/open.hpp"
#include "coord/etcd/store.hpp"
#include "engine_bench.hpp"
#include "coord/segment.hpp"
#include "coord/storage/memory.hpp"

namespace {

std::string url() {
    static const std::string u = coord::bench::required_env("COORD_ETCD_URL", "etcd://HOST:PORT; tests/etcd/etcd.sh starts a member");
    return u;
}
using coord::bench::fail;

// The prefix of this run's own and one connection: every bench and its floor
// use the same one (the floor's pool is opened with the same options).
std::string prefix() { return "bench-" + std::to_string(::getpid()); }
coord::etcd::options opts() {
    coord::etcd::options o;
    o.pool_size = 1;
    o.prefix = prefix();
    return o;
}
coord::etcd::store& single() {
    static coord::etcd::store s =
        coord::open_store<coord::etcd::store>(url() + "?pool=1&prefix=" + prefix());
    static const bool initialized = s.initialize(coord::etcd::initial_floors{}, true).has_value();
    (void)initialized;
    return s;
}
coord::etcd::pool& floor_pool() {
    static coord::etcd::pool p{url(), opts()};
    return p;
}


// The floor call: a bare one-put transaction of `key` through `p`.
void floor_txn_on(coord::etcd::pool& p, const std::string& key) {
    static std::uint64_t i = 0;
    const std::string body = coord::etcd::detail::txn_body({}, {coord::etcd::detail::put(key, std::to_string(++i))}, {});
    auto r = p.request("/v3/kv/txn", body, true);
    if (!r) fail("txn", r.error());
    benchmark::DoNotOptimize(r);
}
void floor_txn() {
    static const std::string key = opts().prefix + "/floor";
    floor_txn_on(floor_pool(), key);
}

void BM_Floor_EtcdTxn(benchmark::State& state) {
    for (auto _ : state) floor_txn();
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Floor_EtcdTxn)->UseRealTime();

void BM_Floor_EtcdKeepalive(benchmark::State& state) {
    auto& p = floor_pool();
    auto g = p.request("/v3/lease/grant", R"({"TTL":60})", true);
    if (!g) fail("grant", g.error());
    auto id = coord::etcd::detail::int_member(*g, "ID");
    if (!id) fail("grant", coord::etcd::detail::bad("no lease ID: " + *g));
    const std::string body = R"({"ID":)" + std::to_string(*id) + "}";
    for (auto _ : state) {
        auto k = p.request("/v3/lease/keepalive", body, true);
        if (!k) fail("keepalive", k.error());
        benchmark::DoNotOptimize(k);
    }
    (void)p.request("/v3/lease/revoke", body, true);
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Floor_EtcdKeepalive)->UseRealTime();

void BM_Etcd_FenceWrite(benchmark::State& state) { coord::bench::fence_write_loop(state, single(), "bench-fence", floor_txn); }
BENCHMARK(BM_Etcd_FenceWrite)->UseManualTime();

void BM_Etcd_LeaseAcquireRelease(benchmark::State& state) { coord::bench::lease_acquire_release_loop(state, single(), floor_txn); }
BENCHMARK(BM_Etcd_LeaseAcquireRelease)->UseManualTime();

void BM_Segment_Next_Memory(benchmark::State& state) {
    static coord::memory_store s;
    coord::bench::segment_next(state, s);
}
BENCHMARK(BM_Segment_Next_Memory)->UseRealTime();
void BM_Segment_Next_Etcd(benchmark::State& state) { coord::bench::segment_next(state, single()); }
BENCHMARK(BM_Segment_Next_Etcd)->UseRealTime();

// Election handover: the leader resigns; etcd has no queued acquire yet, so
// the candidate tries again within a second (coord::bench::election_handover).
void BM_Etcd_ElectionHandover(benchmark::State& state) { coord::bench::election_handover(state, single(), "bench-election-"); }
BENCHMARK(BM_Etcd_ElectionHandover)->UseManualTime()->Iterations(3);

// An observer woken by a watch at a grant (coord::bench::observe_wake).
void BM_Etcd_ObserveWake(benchmark::State& state) { coord::bench::observe_wake(state, single(), "bench-observe-"); }
BENCHMARK(BM_Etcd_ObserveWake)->UseManualTime()->Iterations(30);

// --- over TLS -------------------------------------------------------------

std::string tls_url() {
    static const std::string u = coord::bench::required_env("COORD_ETCD_TLS_URL", "etcds://HOST:PORT; tests/etcd/etcd.sh start DIR PORT 1 secure");
    return u;
}
coord::etcd::options tls_opts() {
    static const std::string dir = coord::bench::required_env("COORD_ETCD_TLS_DIR", "the secure member's directory");
    coord::etcd::options o = opts();
    o.prefix = "coord/" + prefix();  // where the user coord may write
    o.ca_file = dir + "/tls/ca.crt";
    o.cert_file = dir + "/tls/client.crt";
    o.key_file = dir + "/tls/client.key";
    o.user = "coord";
    std::ifstream in(dir + "/coord.password");
    std::getline(in, o.password);
    return o;
}
coord::etcd::store& tls_single() {
    static coord::etcd::store s(tls_url(), {}, tls_opts());
    static const bool initialized = s.initialize(coord::etcd::initial_floors{}, true).has_value();
    (void)initialized;
    return s;
}
void tls_floor_txn() {
    static coord::etcd::pool p{tls_url(), tls_opts()};
    static const std::string key = tls_opts().prefix + "/floor";
    floor_txn_on(p, key);
}

void BM_Floor_EtcdTxnTls(benchmark::State& state) {
    for (auto _ : state) tls_floor_txn();
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Floor_EtcdTxnTls)->UseRealTime();

void BM_Etcd_FenceWriteTls(benchmark::State& state) {
    coord::bench::fence_write_loop(state, tls_single(), "bench-fence", tls_floor_txn);
}
BENCHMARK(BM_Etcd_FenceWriteTls)->UseManualTime();

void BM_Etcd_NewConnectionTls(benchmark::State& state) {
    const auto o = tls_opts();
    const std::string body = coord::etcd::detail::txn_body({}, {coord::etcd::detail::put(o.prefix + "/floor", "new")}, {});
    for (auto _ : state) {
        coord::etcd::pool p{tls_url(), o};
        auto r = p.request("/v3/kv/txn", body, true);
        if (!r) fail("txn on a new connection", r.error());
        benchmark::DoNotOptimize(r);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Etcd_NewConnectionTls)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
    (void)url();  // fails without COORD_ETCD_URL
    (void)tls_url();  // and without COORD_ETCD_TLS_URL
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
