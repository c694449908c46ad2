// SPDX-License-Identifier: Apache-2.0
// Leader election (coord/election.hpp) on the memory store: one leader at a
// time, term numbers that only grow, a campaign that waits for the leader to
// resign, observe() returning at the next change. Waits end on events (a
// resignation), never on a timing; the keepers' renewals cannot come due
// (terms of an hour).
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <thread>

#include "coord/election.hpp"
#include "coord/storage/memory.hpp"

namespace {

using namespace std::chrono_literals;
using store_t = coord::basic_memory_store<coord::steady_clock>;
using keeper_t = coord::basic_keeper<store_t>;
using election_t = coord::basic_election<store_t>;

std::chrono::steady_clock::time_point in(std::chrono::seconds s) { return std::chrono::steady_clock::now() + s; }

TEST(Election, OneLeaderAtATimeAndTermsOnlyGrow) {
    store_t store;
    keeper_t keeper{store};
    election_t a{keeper, "scheduler"}, b{keeper, "scheduler"};
    auto none = a.leader();
    ASSERT_TRUE(none);
    EXPECT_FALSE(*none);

    auto lead = a.campaign("A", 1h, std::chrono::steady_clock::now());
    ASSERT_TRUE(lead) << lead.error().code.message();
    const auto first = lead->token();
    auto refused = b.campaign("B", 1h, std::chrono::steady_clock::now());  // a deadline passed: one try
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error(), coord::errc::lease_held);
    EXPECT_EQ(refused.error().holder, "A");
    auto who = b.leader();
    ASSERT_TRUE(who && *who);
    EXPECT_EQ((*who)->candidate, "A");
    EXPECT_EQ((*who)->term, first);

    ASSERT_TRUE(lead->release());  // resign
    for (int round = 0; round < 5; ++round) {
        auto next = (round % 2 ? a : b).campaign(round % 2 ? "A" : "B", 1h, in(10s));
        ASSERT_TRUE(next) << next.error().code.message();
        EXPECT_GT(next->token(), first);
        auto now = a.leader();
        ASSERT_TRUE(now && *now);
        EXPECT_EQ((*now)->candidate, round % 2 ? "A" : "B");
        EXPECT_EQ((*now)->term, next->token());
    }  // each leadership resigns as it goes out of scope
}

TEST(Election, ACampaignWaitsUntilTheLeaderResignsAndObserveSeesEachChange) {
    store_t store;
    keeper_t keeper{store};
    election_t election{keeper, "scheduler"};
    auto lead = election.campaign("A", 1h, in(10s));
    ASSERT_TRUE(lead);
    const auto first = lead->token();

    std::optional<coord::result<std::optional<coord::leader_info>>> seen;
    std::thread observer([&] { seen = election.observe(first, in(60s), 1ms); });
    std::optional<coord::result<election_t::leadership, coord::lease_error>> won;
    std::thread candidate([&] { won = election.campaign("B", 1h, in(60s)); });
    // B is in line (the store's queue) before A resigns.
    coord::basic_lease_manager<store_t> leases{store};
    for (;;) {
        auto w = leases.waiters("scheduler");
        ASSERT_TRUE(w);
        if (!w->empty()) break;
        std::this_thread::yield();
    }
    ASSERT_TRUE(lead->release());
    candidate.join();
    observer.join();
    ASSERT_TRUE(won && *won) << (*won).error().code.message();
    EXPECT_GT((**won).token(), first);
    ASSERT_TRUE(seen && *seen);
    // observe returned at the first change it saw: nobody, or B already.
    if (**seen) {
        EXPECT_EQ((**seen)->candidate, "B");
        EXPECT_EQ((**seen)->term, (**won).token());
    }
    auto after = election.observe(std::nullopt, in(60s), 1ms);  // "nobody" is not the case now
    ASSERT_TRUE(after && *after);
    EXPECT_EQ((*after)->candidate, "B");
}

TEST(Election, ObserveAtItsDeadlineSaysWhoLeadsUnchanged) {
    store_t store;
    keeper_t keeper{store};
    election_t election{keeper, "scheduler"};
    auto none = election.observe(std::nullopt, std::chrono::steady_clock::now());
    ASSERT_TRUE(none);
    EXPECT_FALSE(*none);
    auto lead = election.campaign("A", 1h, std::chrono::steady_clock::now());
    ASSERT_TRUE(lead);
    auto same = election.observe(lead->token(), std::chrono::steady_clock::now());
    ASSERT_TRUE(same && *same);
    EXPECT_EQ((*same)->term, lead->token());
}

TEST(Election, ANameNoLeaseMayHaveIsRefused) {
    store_t store;
    keeper_t keeper{store};
    EXPECT_THROW(election_t(keeper, ""), std::invalid_argument);
    EXPECT_THROW(election_t(keeper, std::string("a\0b", 3)), std::invalid_argument);
}

}  // namespace
