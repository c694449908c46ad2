// SPDX-License-Identifier: Apache-2.0
// capacity: what one store sustains with many clients, for the capacity page
// (docs/internals/capacity.md). Each client is a thread with a store object
// of its own (its own connections, as a service instance has), opened from
// the URL; the clients run one operation as fast as the store answers for
// the given time, and the tool prints the operations per second of all of
// them together, with the latency's median and 99th percentile.
//
//   capacity --store URL [--clients 1,4,16] [--held 10,1000] [--seconds 3]
//            [--ops renew,churn,fence,read,segment] [--step 1000]
//
// Before each --held figure the tool takes that many leases (names
// "capacity/held/I", one holder, a term of a day) and keeps them: the other
// operations then run beside that many names held. The operations:
//   renew    each client renews a lease of its own (a fleet's steady load)
//   churn    each client acquires and releases a lease of its own (2 ops)
//   fence    each client writes 16 fence keys of its own in turn, its token growing
//   read     each client reads a held lease's holder (the store's read path)
//   segment  each client draws a range of --step IDs from a tag of its own
// Any error ends the run with exit 1: a figure measured on errors is no
// figure. The store must be initialized where it needs it (coordctl store
// init). Not a test: figures depend on the machine; the page says which.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "coord/open.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "capacity: %s\n", what.c_str());
    std::exit(1);
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::size_t p = 0;
    while (p <= s.size()) {
        auto e = s.find(',', p);
        if (e == std::string::npos) e = s.size();
        if (e > p) out.push_back(s.substr(p, e - p));
        p = e + 1;
    }
    return out;
}

std::vector<long> numbers(const std::string& s, long lo, long hi, const char* what) {
    std::vector<long> out;
    for (const auto& t : split(s)) {
        char* end = nullptr;
        const long v = std::strtol(t.c_str(), &end, 10);
        if (*end || v < lo || v > hi) {
            std::fprintf(stderr, "capacity: %s must be %ld..%ld\n", what, lo, hi);
            std::exit(2);
        }
        out.push_back(v);
    }
    return out;
}

struct options {
    std::string url;
    std::vector<long> clients{1, 4, 16};
    std::vector<long> held{10};
    double seconds = 3;
    std::vector<std::string> ops{"renew", "churn", "fence", "read", "segment"};
    std::uint64_t step = 1000;
};

/// Fence tokens for every client and run: they start at the wall clock's
/// microseconds, so a later run on the same store starts above every token
/// of this one (fewer than a million writes a second), and only grow.
coord::fence_token next_token() {
    static std::atomic<coord::fence_token> t{static_cast<coord::fence_token>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count())};
    return t.fetch_add(1, std::memory_order_relaxed) + 1;
}

/// One client's loop of `op` on its own store object until `stop`; its
/// latencies (microseconds) go to `lat`, its count to `done`.
template <class Store>
void client(Store& store, const std::string& op, long id, const options& o, const std::atomic<bool>& stop,
            std::vector<double>& lat, std::atomic<long>& done) {
    using namespace std::chrono;
    const std::string me = "capacity-client-" + std::to_string(id);
    const std::string own = "capacity/own/" + std::to_string(id);
    coord::lease held;
    if (op == "renew") {
        auto l = store.lease_acquire(own, me, hours{24});
        if (!l) die("acquire " + own + ": " + l.error().code.message());
        held = *l;
    }
    long n = 0;
    auto one = [&] {
        if (op == "renew") {
            auto r = store.lease_renew(own, me, held.token, hours{24});
            if (!r) die("renew: " + r.error().code.message());
            return 1;
        }
        if (op == "churn") {
            auto l = store.lease_acquire(own, me, seconds{30});
            if (!l) die("acquire: " + l.error().code.message());
            auto r = store.lease_release(own, me, l->token);
            if (!r) die("release: " + r.error().code.message());
            return 2;
        }
        if (op == "fence") {
            const auto key = "capacity/fence/" + std::to_string(id) + "/" + std::to_string(n % 16);
            auto r = store.fence_write(key, next_token(), "value");
            if (!r) die("fence write: " + r.error().code.message());
            return 1;
        }
        if (op == "read") {
            auto r = store.lease_read("capacity/held/" + std::to_string(n % std::max<long>(1, o.held.front())));
            if (!r) die("read: " + r.error().message());
            return 1;
        }
        auto r = store.segment_allocate("capacity/segment/" + std::to_string(id), o.step);
        if (!r) die("segment: " + r.error().message());
        return 1;
    };
    while (!stop.load(std::memory_order_relaxed)) {
        const auto t0 = clock_type::now();
        const int ops = one();
        lat.push_back(duration<double, std::micro>(clock_type::now() - t0).count());
        done.fetch_add(ops, std::memory_order_relaxed);
        ++n;
    }
    if (op == "renew") (void)store.lease_release(own, me, held.token);
}

/// Takes `count` leases under one holder (in parallel, 16 store objects),
/// from `from` on; the names stay held for the rest of the run.
void hold(const options& o, long from, long count) {
    const long workers = std::min<long>(16, std::max<long>(1, count - from));
    std::vector<std::thread> ts;
    std::atomic<long> next{from};
    for (long w = 0; w < workers; ++w)
        ts.emplace_back([&] {
            coord::with_store(o.url, [&](auto& store) {
                for (long i; (i = next.fetch_add(1)) < count;) {
                    const auto name = "capacity/held/" + std::to_string(i);
                    auto l = store.lease_acquire(name, "capacity-holder", std::chrono::hours{24});
                    if (!l && l.error() != coord::errc::lease_held) die("hold " + name + ": " + l.error().code.message());
                }
                return 0;
            });
        });
    for (auto& t : ts) t.join();
}

void run(const options& o, long held, long clients, const std::string& op) {
    std::atomic<bool> stop{false};
    std::atomic<long> done{0};
    std::atomic<long> ready{0};
    std::vector<std::vector<double>> lat(static_cast<std::size_t>(clients));
    std::vector<std::thread> ts;
    for (long c = 0; c < clients; ++c)
        ts.emplace_back([&, c] {
            coord::with_store(o.url, [&](auto& store) {
                ready.fetch_add(1);
                while (ready.load() < clients) std::this_thread::yield();
                client(store, op, c, o, stop, lat[static_cast<std::size_t>(c)], done);
                return 0;
            });
        });
    while (ready.load() < clients) std::this_thread::sleep_for(std::chrono::milliseconds{1});
    const auto t0 = clock_type::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
    stop.store(true);
    for (auto& t : ts) t.join();
    const double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
    std::vector<double> all;
    for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
    std::sort(all.begin(), all.end());
    const auto pct = [&](double p) { return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<std::size_t>(p * all.size()))]; };
    std::printf("%-8s held=%-8ld clients=%-4ld ops/s=%-10.0f p50_us=%-8.1f p99_us=%.1f\n", op.c_str(), held, clients,
                static_cast<double>(done.load()) / secs, pct(0.5), pct(0.99));
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) {
            std::fprintf(stderr, "capacity: %s needs a value\n", a.c_str());
            return 2;
        }
        const std::string v = argv[++i];
        if (a == "--store") o.url = v;
        else if (a == "--clients") o.clients = numbers(v, 1, 1024, "--clients");
        else if (a == "--held") o.held = numbers(v, 1, 10'000'000, "--held");
        else if (a == "--seconds") o.seconds = std::atof(v.c_str());
        else if (a == "--ops") o.ops = split(v);
        else if (a == "--step") o.step = static_cast<std::uint64_t>(numbers(v, 1, 1'000'000'000, "--step").front());
        else {
            std::fprintf(stderr, "capacity: unknown option %s\n", a.c_str());
            return 2;
        }
    }
    if (o.url.empty() || o.clients.empty() || o.held.empty() || !(o.seconds > 0)) {
        std::fputs("usage: capacity --store URL [--clients 1,4,16] [--held 10,1000] [--seconds 3] "
                   "[--ops renew,churn,fence,read,segment] [--step 1000]\n", stderr);
        return 2;
    }
    for (const auto& op : o.ops)
        if (op != "renew" && op != "churn" && op != "fence" && op != "read" && op != "segment") {
            std::fprintf(stderr, "capacity: unknown operation %s\n", op.c_str());
            return 2;
        }
    std::sort(o.held.begin(), o.held.end());
    long have = 0;
    for (long held : o.held) {
        const auto t0 = clock_type::now();
        hold(o, have, held);
        have = held;
        std::printf("# %ld names held (took %.1f s)\n", held,
                    std::chrono::duration<double>(clock_type::now() - t0).count());
        auto oo = o;
        oo.held = {held};
        for (long clients : o.clients)
            for (const auto& op : o.ops) run(oo, held, clients, op);
    }
    return 0;
}
