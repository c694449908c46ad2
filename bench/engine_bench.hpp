// SPDX-License-Identifier: Apache-2.0
// bench/engine_bench.hpp: what the engines' benchmarks share: the server's
// address from the environment (the bench fails without it), the loops that
// time a fenced write, a lease acquire + release and a segment generator on
// any store, each beside a floor registered in the engine's own binary, and
// the keeper's renewal work per held lease.
#pragma once

#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "coord/error.hpp"
#include "coord/fence.hpp"
#include "coord/election.hpp"
#include "coord/keeper.hpp"
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

/// Times one call of `f` (steady clock).
template <class F>
double seconds_of(F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// The floor beside an operation: each iteration of an engine's loop runs the
/// engine's floor call once per operation, timed apart and left out of the
/// reported time (the loops use manual time: the operations' own), and the
/// counter `x_floor` is the operations' time over the floor calls' in the
/// same iterations. Taken side by side, both see the same machine and
/// server at the same moment; the separate BM_Floor_* benchmark gives the
/// floor's own figure. The order alternates, so neither always runs on a
/// connection the other just warmed.
class beside_floor {
public:
    template <class Floor, class Op>
    void iteration(benchmark::State& state, Floor& floor, Op&& op, int ops) {
        double f = 0;
        double o = 0;
        if (flip_ ^= true) {
            for (int i = 0; i < ops; ++i) f += seconds_of(floor);
            o = seconds_of(op);
        } else {
            o = seconds_of(op);
            for (int i = 0; i < ops; ++i) f += seconds_of(floor);
        }
        state.SetIterationTime(o);
        floor_ += f;
        op_ += o;
    }
    void report(benchmark::State& state) const {
        if (floor_ > 0) state.counters["x_floor"] = op_ / floor_;
    }
    /// The operations' time so far, in seconds.
    double op_seconds() const noexcept { return op_; }

private:
    bool flip_ = false;
    double floor_ = 0;
    double op_ = 0;
};

/// One fenced write an iteration, to `key`, beside one floor call.
template <class Store, class Floor>
void fence_write_loop(benchmark::State& state, Store& s, const std::string& key, Floor&& floor) {
    beside_floor b;
    for (auto _ : state) {
        b.iteration(state, floor, [&] {
            auto r = s.fence_write(key, ++next_token(), "value");
            if (!r) fail("fence_write", r.error().code);
        }, 1);
    }
    b.report(state);
    state.SetItemsProcessed(state.iterations());
}

/// One fenced write an iteration, to `key` (threads sharing a store).
template <class Store>
void fence_write_loop(benchmark::State& state, Store& s, const std::string& key) {
    for (auto _ : state) {
        auto r = s.fence_write(key, ++next_token(), "value");
        if (!r) fail("fence_write", r.error().code);
    }
    state.SetItemsProcessed(state.iterations());
}

/// An acquire and a release an iteration, beside two floor calls; items are
/// operations (two an iteration).
template <class Store, class Floor>
void lease_acquire_release_loop(benchmark::State& state, Store& s, Floor&& floor) {
    beside_floor b;
    for (auto _ : state) {
        b.iteration(state, floor, [&] {
            auto l = s.lease_acquire("bench-lease", "A", std::chrono::seconds{30});
            if (!l) fail("lease_acquire", l.error().code);
            auto r = s.lease_release("bench-lease", "A", l->token);
            if (!r) fail("lease_release", r.error().code);
        }, 2);
    }
    b.report(state);
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

/// The keeper's renewal work: a keeper holds `n` leases (terms of 30 s) and
/// its renewals run through service() as the holder's clock (a manual
/// clock: no waiting) passes each third of the term, so one iteration is one
/// round of n renewals; beside it, n bare lease_renew calls on n other
/// leases (x_floor: the keeper's time over the bare calls'). Counters:
/// leases; calls_per_lease_s, store calls per held lease per second of
/// real time at this term (renewals counted over the term time simulated:
/// 3 / 30 s = 0.1 by design, measured); us_per_renewal, the keeper's time
/// per lease renewal (what holding a lease costs the holder's CPU, the
/// store call included).
template <class Store>
void keeper_renewals(benchmark::State& state, Store& s, const std::string& prefix) {
    using namespace std::chrono_literals;
    const int n = static_cast<int>(state.range(0));
    coord::manual_clock holder{std::chrono::hours{1}};
    coord::keeper_options o;
    o.own_thread = false;
    coord::basic_keeper<Store, coord::manual_clock> keeper{s, o, holder};
    std::vector<typename coord::basic_keeper<Store, coord::manual_clock>::held_lease> held;
    std::vector<coord::lease> bare;
    const std::string run = prefix + std::to_string(next_token().fetch_add(1)) + "-";
    for (int i = 0; i < n; ++i) {
        std::string name = run + "k" + std::to_string(i);
        auto h = keeper.hold(name, "bench", 30s);
        if (!h) fail("keeper hold", h.error().code);
        held.push_back(std::move(*h));
        name = run + "f" + std::to_string(i);
        auto b = s.lease_acquire(name, "bench", std::chrono::nanoseconds{30s});
        if (!b) fail("lease_acquire", b.error().code);
        bare.push_back(std::move(*b));
    }
    beside_floor b;
    std::size_t next = 0;
    auto floor = [&] {
        const auto& l = bare[next++ % bare.size()];
        auto r = s.lease_renew(l.name, l.owner, l.token, std::chrono::nanoseconds{30s});
        if (!r) fail("lease_renew", r.error().code);
    };
    std::int64_t rounds = 0;
    for (auto _ : state) {
        holder.advance(10s);  // a third of the term: every lease is due
        b.iteration(state, floor, [&] { keeper.service(); }, n);
        ++rounds;
    }
    b.report(state);
    std::uint64_t renewals = 0;
    for (const auto& h : held) {
        if (!h.valid()) fail("keeper", coord::error(coord::make_error_code(coord::errc::lease_lost)));
        renewals += h.renewals();
    }
    state.counters["leases"] = n;
    if (rounds > 0) {
        state.counters["calls_per_lease_s"] = static_cast<double>(renewals) / n / (static_cast<double>(rounds) * 10.0);
        if (renewals > 0) state.counters["us_per_renewal"] = b.op_seconds() * 1e6 / static_cast<double>(renewals);
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(renewals));
}

/// Election handover: a leader resigns while another candidate campaigns
/// (on its own thread, a keeper of its own: another process's view), and the
/// time from the resignation to the new leader's grant, beside the store's
/// bare acquire and release of another name, timed in the same iteration
/// (x_floor). A store with a queued acquire wakes the waiting candidate; one
/// without (etcd and ZooKeeper today) has it try again at the leader's term
/// end or within a second (coord/election.hpp), which the figure shows.
/// Counters: handover_us (mean), floor_us (the bare acquire and release).
template <class Store>
void election_handover(benchmark::State& state, Store& s, const std::string& prefix) {
    using namespace std::chrono_literals;
    coord::basic_keeper<Store> leader_keeper{s};
    coord::basic_keeper<Store> candidate_keeper{s};
    const std::string run = prefix + std::to_string(next_token().fetch_add(1));
    coord::basic_election<Store> leading{leader_keeper, run};
    coord::basic_election<Store> waiting{candidate_keeper, run};
    double handover = 0;
    double floor = 0;
    std::int64_t n = 0;
    for (auto _ : state) {
        auto lead = leading.campaign("a", 10s, std::chrono::steady_clock::now() + 10s);
        if (!lead) fail("campaign", lead.error().code);
        std::atomic<bool> asked{false};
        std::chrono::steady_clock::time_point won{};
        std::thread candidate([&] {
            asked = true;
            auto next = waiting.campaign("b", 10s, std::chrono::steady_clock::now() + 30s);
            won = std::chrono::steady_clock::now();
            if (!next) fail("campaign (the candidate)", next.error().code);
        });
        while (!asked) std::this_thread::yield();
        if constexpr (coord::lease_queue_store<Store>) {  // the candidate is in line
            coord::basic_lease_manager<Store> leases{s};
            for (;;) {
                auto w = leases.waiters(run);
                if (!w) fail("waiters", w.error());
                if (!w->empty()) break;
                std::this_thread::sleep_for(100us);
            }
            std::this_thread::sleep_for(1ms);  // and waiting
        } else {
            std::this_thread::sleep_for(20ms);  // between two tries
        }
        const auto resigned = std::chrono::steady_clock::now();
        if (auto r = lead->release(); !r) fail("resign", r.error().code);
        candidate.join();
        const double h = std::chrono::duration<double>(won - resigned).count();
        const double f = seconds_of([&] {
            auto l = s.lease_acquire(run + "-floor", "bench", std::chrono::nanoseconds{10s});
            if (!l) fail("lease_acquire", l.error().code);
            if (auto r = s.lease_release(l->name, l->owner, l->token); !r) fail("lease_release", r.error().code);
        });
        state.SetIterationTime(h);
        handover += h;
        floor += f;
        ++n;
    }
    if (n > 0) {
        state.counters["handover_us"] = handover / static_cast<double>(n) * 1e6;
        state.counters["floor_us"] = floor / static_cast<double>(n) * 1e6;
        if (floor > 0) state.counters["x_floor"] = handover / floor;
    }
}

/// An observer's wake-up: another thread observes the name
/// (election::observe with a poll of an hour, so that only the store's
/// notification wakes it), and the iteration grants the name; the figure is
/// the time from the grant's call to the observer's return, beside a bare
/// acquire and release of another name in the same iteration (x_floor).
/// Counters: wake_us (mean), floor_us.
template <coord::lease_watch_store Store>
void observe_wake(benchmark::State& state, Store& s, const std::string& prefix) {
    using namespace std::chrono_literals;
    coord::basic_keeper<Store> keeper{s};
    const std::string run = prefix + std::to_string(next_token().fetch_add(1));
    coord::basic_election<Store> watcher{keeper, run};
    double wake = 0;
    double floor = 0;
    std::int64_t n = 0;
    for (auto _ : state) {
        std::atomic<bool> asked{false};
        std::chrono::steady_clock::time_point seen{};
        coord::fence_token seen_term = 0;
        std::thread observer([&] {
            asked = true;
            auto r = watcher.observe(std::nullopt, std::chrono::steady_clock::now() + 30s, std::chrono::hours{1});
            seen = std::chrono::steady_clock::now();
            if (!r) fail("observe", r.error());
            if (*r) seen_term = (*r)->term;
        });
        while (!asked) std::this_thread::yield();
        std::this_thread::sleep_for(5ms);  // and observing
        const auto granting = std::chrono::steady_clock::now();
        auto l = s.lease_acquire(run, "a", std::chrono::nanoseconds{10s});
        if (!l) fail("lease_acquire", l.error().code);
        observer.join();
        if (seen_term != l->token) {
            std::fprintf(stderr, "observe returned without the grant (term %llu, granted %llu)\n",
                         static_cast<unsigned long long>(seen_term), static_cast<unsigned long long>(l->token));
            std::exit(1);
        }
        if (auto r = s.lease_release(run, "a", l->token); !r) fail("lease_release", r.error().code);
        const double w = std::chrono::duration<double>(seen - granting).count();
        const double f = seconds_of([&] {
            auto b = s.lease_acquire(run + "-floor", "bench", std::chrono::nanoseconds{10s});
            if (!b) fail("lease_acquire", b.error().code);
            if (auto r = s.lease_release(b->name, b->owner, b->token); !r) fail("lease_release", r.error().code);
        });
        state.SetIterationTime(w);
        wake += w;
        floor += f;
        ++n;
    }
    if (n > 0) {
        state.counters["wake_us"] = wake / static_cast<double>(n) * 1e6;
        state.counters["floor_us"] = floor / static_cast<double>(n) * 1e6;
        if (floor > 0) state.counters["x_floor"] = wake / floor;
    }
}

}  // namespace coord::bench
