// SPDX-License-Identifier: Apache-2.0
// bench/engine_bench.hpp: what the engines' benchmarks share: the server's
// address from the environment (the bench fails without it), the loops that
// time a fenced write, a lease acquire + release and a segment generator on
// any store, each beside a floor registered in the engine's own binary.
#pragma once

#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "coord/error.hpp"
#include "coord/fence.hpp"
#include "coord/segment.hpp"

namespace coord::bench {

/// The value of `name`, or exit 1 saying how to get a server.
inline std::string required_env(const char* name, const char* hint) {
    const char* v = std::getenv(name);
    if (!v || !*v) {
        std::fprintf(stderr, "set %s (%s)\n", name, hint);
        std::exit(1);
    }
    return v;
}

/// A failed call ends the run: a figure measured on errors is no figure.
[[noreturn]] inline void fail(const char* what, const coord::error& e) {
    std::fprintf(stderr, "bench: %s: %s\n", what, e.message().c_str());
    std::exit(1);
}

/// Tokens only grow, across repetitions and threads.
inline std::atomic<coord::fence_token>& next_token() {
    static std::atomic<coord::fence_token> t{0};
    return t;
}

/// One fenced write an iteration, to `key`.
template <class Store>
void fence_write_loop(benchmark::State& state, Store& s, const std::string& key) {
    for (auto _ : state) {
        auto r = s.fence_write(key, ++next_token(), "value");
        if (!r) fail("fence_write", r.error().code);
    }
    state.SetItemsProcessed(state.iterations());
}

/// An acquire and a release an iteration; items are operations (two an iteration).
template <class Store>
void lease_acquire_release_loop(benchmark::State& state, Store& s) {
    for (auto _ : state) {
        auto l = s.lease_acquire("bench-lease", "A", std::chrono::seconds{30});
        if (!l) fail("lease_acquire", l.error().code);
        auto r = s.lease_release("bench-lease", "A", l->token);
        if (!r) fail("lease_release", r.error().code);
    }
    state.SetItemsProcessed(state.iterations() * 2);
}

/// IDs from a segment generator on `s`, with steps large enough that the
/// allocator is off the hot path (the figure is the generator's, beside the
/// memory allocator's).
template <class Store>
void segment_next(benchmark::State& state, Store& s) {
    static coord::basic_segment_generator<Store> gen{s, [] {
        coord::segment_options o;
        o.initial_step = o.min_step = 1'000'000;
        o.max_step = 100'000'000;
        return o;
    }()};
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

}  // namespace coord::bench
