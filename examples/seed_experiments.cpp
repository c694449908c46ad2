// SPDX-License-Identifier: Apache-2.0
// seed_experiments: the failures coord exists for, reproduced on the embedded
// stores with a manual clock, one line each.
//
//   new owner: ok                          B, the lease's new holder, writes
//   expired owner: stale fence value: B    A wakes from a pause and is refused
//   same ms distinct: true ordered: true   4096 Snowflake IDs in one millisecond
//   rollback: clock rollback               the clock steps back 5 ms: no reissue
//   job first/replay: true false effects: 1  a slot run twice applies once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "coord/clock.hpp"
#include "coord/fence.hpp"
#include "coord/job_ledger.hpp"
#include "coord/lease.hpp"
#include "coord/snowflake.hpp"
#include "coord/aliases.hpp"
#include "coord/storage/memory.hpp"

namespace {

using namespace std::chrono_literals;

// A takes the lease and pauses past its term; B takes it and writes; A wakes
// and writes with its old token.
int pause_experiment() {
    coord::manual_clock clock{std::chrono::sys_days{std::chrono::year{2026} / 10 / 13} + 9h};
    coord::basic_memory_store<coord::manual_clock> store{clock};
    coord::basic_lease_manager leases{store};
    coord::basic_fenced_resource resource{store, "orders"};

    auto a = leases.acquire("orders-writer", "A", 10s);
    if (!a) return 1;
    clock.advance(30s);  // A is paused: a GC, a SIGSTOP, a slow disk
    auto b = leases.acquire("orders-writer", "B", 10s);
    if (!b) return 1;
    auto b_write = resource.write(b->token, "B");
    std::printf("new owner: %s\n", b_write ? "ok" : b_write.error().code.message().c_str());

    auto a_write = resource.write(a->token, "A");  // A wakes up
    auto now = resource.read();
    if (!now) return 1;
    std::printf("expired owner: %s value: %s\n", a_write ? "accepted" : a_write.error().code.message().c_str(),
                now->value.c_str());
    return 0;
}

// A whole millisecond of Snowflake IDs with the clock paused, then the clock
// steps back.
int snowflake_experiment() {
    coord::manual_clock clock{std::chrono::sys_days{std::chrono::year{2026} / 10 / 13} + 9h};
    coord::basic_memory_store<coord::manual_clock> store{clock};
    coord::snowflake_options options;
    options.node = 1;
    options.when_exhausted = coord::exhaustion_policy::reject;
    options.when_clock_goes_back = coord::rollback_policy::reject;
    coord::basic_snowflake<coord::default_layout, coord::manual_clock, decltype(store)> ids{store, options, clock};

    std::vector<std::uint64_t> got;
    for (int i = 0; i < 4096; ++i) {
        auto id = ids.next();
        if (!id) return 1;
        got.push_back(*id);
    }
    bool same_ms = true;
    for (auto id : got) same_ms = same_ms && coord::default_layout::decode(id).time == coord::default_layout::decode(got[0]).time;
    const bool distinct = same_ms && std::set<std::uint64_t>(got.begin(), got.end()).size() == got.size();
    const bool ordered = std::is_sorted(got.begin(), got.end());
    std::printf("same ms distinct: %s ordered: %s\n", distinct ? "true" : "false", ordered ? "true" : "false");

    clock.advance(1ms);
    if (!ids.next()) return 1;
    clock.advance(-5ms);
    auto after = ids.next();
    std::printf("rollback: %s\n", after ? "reissued" : after.error().message().c_str());
    return 0;
}

// The scheduler fires billing@2026-10-13T09:00Z twice (a double fire, or a
// retry after a lost receipt): the effect happens once.
int replay_experiment() {
    coord::manual_clock clock{std::chrono::sys_days{std::chrono::year{2026} / 10 / 13} + 9h + 5s};
    coord::basic_memory_store<coord::manual_clock> store{clock};
    coord::basic_job_ledger<decltype(store)> ledger{store, {}};
    auto slot = coord::slot::parse("billing@2026-10-13T09:00Z");
    if (!slot) return 1;
    int effects = 0;
    auto charge = [&](const coord::ledger_context&) {
        ++effects;
        return std::string("charged");
    };
    auto first = ledger.run(*slot, "scheduler-a", "", charge);
    auto replay = ledger.run(*slot, "scheduler-b", "", charge);
    if (!first || !replay) return 1;
    std::printf("job first/replay: %s %s effects: %d\n", first->kind == coord::run_outcome::applied ? "true" : "false",
                replay->kind == coord::run_outcome::applied ? "true" : "false", effects);
    return 0;
}

}  // namespace

int main() {
    if (pause_experiment() != 0) return 1;
    if (snowflake_experiment() != 0) return 1;
    if (replay_experiment() != 0) return 1;
    return 0;
}
