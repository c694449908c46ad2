// SPDX-License-Identifier: Apache-2.0
// tests/support/engine_experiments.hpp: the multi-process experiments every
// engine runs, written once: processes drawing segment IDs while something is
// done to the servers (or to the drawers), processes taking one lease in turn
// and adding one to a counter under their token, and the script that starts,
// kills and pauses the members of a test cluster. make() opens a store; it is
// called in each child process too.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "coord/fence.hpp"
#include "coord/lease.hpp"
#include "coord/segment.hpp"
#include "support/child_process.hpp"

namespace coord::test {

using namespace std::chrono_literals;

/// The members of a test cluster, through its script (tests/etcd/etcd.sh,
/// tests/zookeeper/zookeeper.sh): `leader` prints the leader's index; kill, restart,
/// pause and resume take one.
class cluster_script {
public:
    /// `script`: the command that runs it ("bash '.../etcd.sh'"); `dir`: the cluster's state.
    cluster_script(std::string script, std::string dir) : script_(std::move(script)), dir_(std::move(dir)) {}
    int leader() const {
        FILE* p = ::popen(command("leader").c_str(), "r");
        int i = -1;
        if (p) {
            if (std::fscanf(p, "%d", &i) != 1) i = -1;
            ::pclose(p);
        }
        return i;
    }
    void member(const char* what, int i) const {
        const std::string cmd = command(what) + " " + std::to_string(i);
        ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
    /// A command on the whole cluster ("restart-all").
    void all(const char* what) const {
        const std::string cmd = command(what);
        ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
    /// Kills the leader with SIGKILL after `before`, restarts it after `down`.
    void kill_leader_for(std::chrono::milliseconds before, std::chrono::milliseconds down) const {
        std::this_thread::sleep_for(before);
        const int killed = leader();
        ASSERT_GE(killed, 0);
        member("kill", killed);
        std::this_thread::sleep_for(down);
        member("restart", killed);
    }

private:
    std::string command(const char* what) const { return script_ + " " + what + " '" + dir_ + "'"; }
    std::string script_, dir_;
};

/// Four processes draw 3,000 segment IDs each (small steps, so that many
/// ranges are taken) while `disturb()` runs here; no ID is handed out twice
/// and every process gets all of its IDs.
template <class Make, class Disturb>
void segment_drawers_never_duplicate(Make make, Disturb disturb) {
    constexpr int processes = 4, per_process = 3000;
    std::vector<std::unique_ptr<child_process>> children;
    for (int p = 0; p < processes; ++p)
        children.push_back(std::make_unique<child_process>([&](int out) {
            auto store = make();
            coord::segment_options opt;
            opt.min_step = opt.initial_step = 20;
            opt.max_step = 40;
            coord::basic_segment_generator<std::remove_reference_t<decltype(*store)>> gen{*store, opt};
            auto h = gen.tag("orders");
            for (int i = 0; i < per_process;) {
                auto id = h.next();
                if (!id) {
                    if (id.error() == coord::errc::allocator_unavailable) {
                        gen.quiesce();
                        continue;
                    }
                    return 2;
                }
                const std::uint64_t v = *id;
                if (::write(out, &v, sizeof v) != sizeof v) return 3;
                ++i;
                if (i % 200 == 0) std::this_thread::sleep_for(10ms);  // spread the draws over the disturbance
            }
            return 0;
        }));
    disturb();
    std::set<std::uint64_t> seen;
    for (auto& c : children) {
        std::uint64_t v;
        while (c->read(v)) EXPECT_TRUE(seen.insert(v).second) << "duplicate ID " << v;
        EXPECT_EQ(c->wait(), 0);
    }
    EXPECT_EQ(seen.size(), static_cast<std::size_t>(processes * per_process));
}

/// Eight rounds of four drawers, one of them SIGKILLed at a random point each
/// round (a killed drawer's buffered range is lost, never reissued): no ID
/// twice.
template <class Make>
void killed_drawers_never_duplicate(Make make) {
    std::set<std::uint64_t> seen;
    std::size_t total = 0;
    std::mt19937 rng(7);
    constexpr int rounds = 8, processes = 4, per_process = 3000;
    int kills = 0;
    for (int round = 0; round < rounds; ++round) {
        std::vector<std::unique_ptr<child_process>> children;
        for (int p = 0; p < processes; ++p)
            children.push_back(std::make_unique<child_process>([&](int out) {
                auto store = make();
                coord::segment_options opt;
                opt.min_step = 50;
                opt.initial_step = 50;
                opt.max_step = 200;
                coord::basic_segment_generator<std::remove_reference_t<decltype(*store)>> gen{*store, opt};
                auto h = gen.tag("orders");
                for (int i = 0; i < per_process;) {
                    auto id = h.next();
                    if (!id) {
                        if (id.error() == coord::errc::allocator_unavailable) {
                            gen.quiesce();
                            continue;
                        }
                        return 2;
                    }
                    const std::uint64_t v = *id;
                    if (::write(out, &v, sizeof v) != sizeof v) return 3;
                    ++i;
                }
                return 0;
            }));
        const int victim = static_cast<int>(rng() % processes);
        const int kill_after = static_cast<int>(rng() % per_process);
        for (int p = 0; p < processes; ++p) {
            std::uint64_t v;
            int got = 0;
            while (children[static_cast<std::size_t>(p)]->read(v)) {
                EXPECT_TRUE(seen.insert(v).second) << "duplicate ID " << v << " in round " << round;
                ++total;
                if (p == victim && ++got == kill_after) {
                    children[static_cast<std::size_t>(p)]->kill(SIGKILL);
                    ++kills;
                }
            }
            children[static_cast<std::size_t>(p)]->wait();
        }
    }
    EXPECT_EQ(kills, rounds);
    EXPECT_GT(total, static_cast<std::size_t>(rounds * (processes - 1) * per_process));
}

/// Four processes take one lease in turn for `work` and, holding it, add one
/// to a counter under their token (a fenced update), while `disturb()` runs
/// here. A holder whose term ended while its call waited (an election, a
/// paused server) is refused once the next holder has written, so no two
/// holders' updates interleave and none is lost: the counter ends at least
/// at the number of accepted updates and at most that plus the updates whose
/// answer was lost (outcome unknown: they may have applied); every token is
/// granted once, and each process's tokens increase.
template <class Make, class Disturb>
void fenced_counter_loses_no_update(Make make, Disturb disturb, std::chrono::seconds work) {
    constexpr int processes = 4;
    std::vector<std::unique_ptr<child_process>> children;
    for (int p = 0; p < processes; ++p)
        children.push_back(std::make_unique<child_process>([&, p](int out) {
            auto store = make();
            std::string me = "p";
            me += std::to_string(p);
            const auto end = std::chrono::steady_clock::now() + work;
            while (std::chrono::steady_clock::now() < end) {
                auto l = store->lease_acquire("counter", me, 2s);
                if (!l) {
                    std::this_thread::sleep_for(20ms);
                    continue;
                }
                auto w = store->fence_update("counter", l->token, [](std::string& v) {
                    v = std::to_string((v.empty() ? 0 : std::stoull(v)) + 1);
                });
                // 1 accepted, 0 refused, 2 unknown (the answer was lost: it may have applied).
                const std::uint64_t status = w ? 1u : w.error().code == coord::condition::refused ? 0u
                                                 : w.error().code == coord::condition::outcome_unknown ? 2u : 3u;
                if (status != 3) {
                    const std::uint64_t report[2] = {l->token, status};
                    if (::write(out, report, sizeof report) != sizeof report) return 3;
                }
                (void)store->lease_release("counter", me, l->token);
            }
            return 0;
        }));
    disturb();
    std::set<std::uint64_t> tokens;
    std::uint64_t accepted = 0, unknown = 0, last_accepted = 0;
    for (auto& c : children) {
        std::uint64_t report[2], last = 0;
        while (c->read(report)) {
            EXPECT_TRUE(tokens.insert(report[0]).second) << "token " << report[0] << " granted twice";
            EXPECT_GT(report[0], last) << "a later grant with a smaller token";
            last = report[0];
            accepted += report[1] == 1 ? 1 : 0;
            if (report[1] == 1) last_accepted = std::max(last_accepted, report[0]);
            unknown += report[1] == 2 ? 1 : 0;
        }
        EXPECT_EQ(c->wait(), 0);
    }
    ASSERT_FALSE(tokens.empty());
    auto store = make();
    coord::basic_keyed_fenced_resource res{*store};
    auto v = res.read("counter");
    ASSERT_TRUE(v) << v.error().message();
    // Every accepted update is there (none lost to an interleaving holder);
    // an update whose answer was lost may be there too.
    const std::uint64_t counter = std::stoull(v->value);
    EXPECT_GE(counter, accepted) << "an update was lost: two holders' updates interleaved";
    EXPECT_LE(counter, accepted + unknown) << "an update counted that no holder made";
    EXPECT_GE(v->fence, last_accepted);
    EXPECT_LE(v->fence, *tokens.rbegin());
    EXPECT_GT(accepted, 20u);
}

}  // namespace coord::test
