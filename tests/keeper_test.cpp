// SPDX-License-Identifier: Apache-2.0
// The keeper (coord/keeper.hpp) on the memory store, with the store's clock
// and the holder's steady clock two manual clocks driven apart: renewals over
// many terms, the safe deadline after a pause, a refused renewal, a holder
// clock that runs slow within and beyond the allowance, release on
// destruction, and the waiting hold. Renewals run when the test calls
// service() (keeper_options::own_thread = false), so no test sleeps.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <vector>

#include "coord/keeper.hpp"
#include "coord/storage/memory.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using store_t = coord::basic_memory_store<coord::manual_clock>;
using keeper_t = coord::basic_keeper<store_t, coord::manual_clock>;

// What the callback was told, in order.
struct events {
    std::mutex m;
    std::vector<coord::keeper_event> seen;
    coord::keeper_options options(coord::keeper_options o = {}) {
        o.own_thread = false;
        o.on_event = [this](const coord::keeper_event& e) {
            std::lock_guard lk(m);
            seen.push_back(e);
        };
        return o;
    }
    std::size_t size() {
        std::lock_guard lk(m);
        return seen.size();
    }
};

struct Keeper : ::testing::Test {
    coord::manual_clock store_clock{coord::test::test_epoch()};
    coord::manual_clock holder_clock{std::chrono::hours{1}};  // another epoch: the clocks share nothing
    store_t store{store_clock};
    coord::basic_lease_manager<store_t> leases{store};
    events told;

    // Both clocks move by d (a holder whose clock runs at the store's rate).
    void both(std::chrono::nanoseconds d) {
        store_clock.advance(d);
        holder_clock.advance(d);
    }
    // Would another process be granted the lease now?
    bool rival_granted() {
        auto r = leases.acquire("job", "rival", 10s);
        if (r) (void)leases.release(*r);
        return r.has_value();
    }
};

TEST_F(Keeper, RenewsAHeldLeaseOverManyTermsWhileItIsServiced) {
    keeper_t keeper{store, told.options(), holder_clock};
    auto held = keeper.hold("job", "me", 10s);
    ASSERT_TRUE(held) << held.error().code.message();
    const auto token = held->token();
    for (int i = 0; i < 30; ++i) {  // 30 steps of 4 s: 12 terms of 10 s
        both(4s);
        keeper.service();
        ASSERT_TRUE(held->valid()) << "step " << i;
        ASSERT_FALSE(held->lost().stop_requested());
        EXPECT_FALSE(rival_granted()) << "step " << i;
    }
    EXPECT_EQ(held->renewals(), 30u);
    EXPECT_EQ(held->token(), token);  // renewals keep the grant's token
    auto now = leases.holder("job");
    ASSERT_TRUE(now && *now);
    EXPECT_EQ((*now)->token, token);
    EXPECT_EQ(held->expires_at(), (*now)->expires_at);
    EXPECT_EQ(told.size(), 0u);
}

TEST_F(Keeper, ServiceSaysWhenTheNextRenewalIsDue) {
    keeper_t keeper{store, told.options(), holder_clock};
    EXPECT_EQ(keeper.service(), coord::manual_clock::time_point::max());  // nothing held
    auto held = keeper.hold("job", "me", 9s);
    ASSERT_TRUE(held);
    EXPECT_EQ(keeper.service(), holder_clock.now() + 3s);  // a third of the term
    holder_clock.advance(3s);
    store_clock.advance(3s);
    EXPECT_EQ(keeper.service(), holder_clock.now() + 3s);  // renewed at once, the next a third later
    EXPECT_EQ(held->renewals(), 1u);
}

TEST_F(Keeper, APausedHolderIsNotValidOnWakingBeforeAnyStoreCallAndLostAtTheFirstService) {
    keeper_t keeper{store, told.options(), holder_clock};
    auto held = keeper.hold("job", "me", 10s);
    ASSERT_TRUE(held);
    const auto allowance = keeper.allowance(10s);
    EXPECT_EQ(allowance, 100ms + 2ms);  // 1% of the term plus the 2 ms floor
    EXPECT_EQ(held->safe_until(), holder_clock.now() + 10s - allowance);

    // The whole process stops for a minute: nothing ran, both clocks moved.
    both(60s);
    EXPECT_FALSE(held->valid());                    // no store call needed
    EXPECT_FALSE(held->lost().stop_requested());    // the keeper has not run yet
    std::stop_callback cb(held->lost(), [] {});     // registering is fine either way
    keeper.service();                               // the first check after waking
    EXPECT_TRUE(held->lost().stop_requested());
    ASSERT_TRUE(held->why_lost());
    EXPECT_EQ(*held->why_lost(), coord::errc::lease_lost);
    ASSERT_EQ(told.size(), 1u);
    EXPECT_EQ(told.seen[0].what, coord::keeper_event::kind::lost);
    EXPECT_EQ(told.seen[0].name, "job");
    EXPECT_EQ(told.seen[0].token, held->token());
    // The keeper did not try to renew a lease it can no longer vouch for.
    EXPECT_EQ(held->renewals(), 0u);
}

TEST_F(Keeper, ARenewalRefusedBecauseAnotherHolderTookTheNameIsLostAtOnce) {
    keeper_t keeper{store, told.options(), holder_clock};
    auto held = keeper.hold("job", "me", 10s);
    ASSERT_TRUE(held);
    // The store's term ends while the holder's clock barely moved (a holder
    // clock far slower than any allowance), and another process takes it.
    store_clock.advance(11s);
    auto rival = leases.acquire("job", "rival", 10s);
    ASSERT_TRUE(rival);
    holder_clock.advance(4s);  // a renewal is due; the safe deadline is not passed
    EXPECT_TRUE(held->valid());
    keeper.service();
    EXPECT_TRUE(held->lost().stop_requested());
    EXPECT_FALSE(held->valid());
    ASSERT_TRUE(held->why_lost());
    EXPECT_TRUE(*held->why_lost() == coord::errc::not_lease_holder || *held->why_lost() == coord::errc::lease_expired)
        << held->why_lost()->message();
    EXPECT_EQ(*held->why_lost(), coord::condition::refused);
    // Destroying the lost lease does not touch the rival's.
    held = coord::unexpected(coord::lease_error{});
    auto now = leases.holder("job");
    ASSERT_TRUE(now && *now);
    EXPECT_EQ((*now)->owner, "rival");
    ASSERT_EQ(told.size(), 2u);  // lost, then the release refused
    EXPECT_EQ(told.seen[1].what, coord::keeper_event::kind::release_failed);
    EXPECT_EQ(told.seen[1].why, coord::errc::not_lease_holder);
}

// The holder's clock runs slow against the store's by `slowness` (0.005: it
// counts 0.995 s while the store counts 1 s). The process pauses right after
// a renewal was sent; returns whether, at any instant of the pause, the
// holder still believed itself valid while another process could take the
// lease (two holders).
bool overlap_during_a_pause(double slowness) {
    coord::manual_clock store_clock{coord::test::test_epoch()};
    coord::manual_clock holder_clock{std::chrono::hours{1}};
    store_t store{store_clock};
    coord::basic_lease_manager<store_t> leases{store};
    coord::keeper_options o;
    o.own_thread = false;
    keeper_t keeper{store, o, holder_clock};
    auto held = keeper.hold("job", "me", 10s);
    if (!held) throw std::runtime_error("not granted");
    for (int step = 0; step < 1200; ++step) {  // 12 s of store time in 10 ms steps
        store_clock.advance(10ms);
        holder_clock.advance(std::chrono::nanoseconds{static_cast<std::int64_t>(10e6 * (1.0 - slowness))});
        if (!held->valid()) return false;
        auto rival = leases.acquire("job", "rival", 10s);
        if (rival) return true;
    }
    return false;
}

TEST_F(Keeper, AHolderClockSlowWithinTheAllowanceNeverOverlapsTheNextHolder) {
    EXPECT_FALSE(overlap_during_a_pause(0.0));
    EXPECT_FALSE(overlap_during_a_pause(0.005));
    EXPECT_FALSE(overlap_during_a_pause(0.0099));
}

TEST_F(Keeper, AHolderClockSlowBeyondTheAllowanceCanOverlapWhichIsWhyWritesCarryTheToken) {
    // 5% slow: the store's term ends while the holder's bound still runs.
    EXPECT_TRUE(overlap_during_a_pause(0.05));
}

TEST_F(Keeper, AHolderClockThatRunsFastLosesEarlyNeverLate) {
    keeper_t keeper{store, told.options(), holder_clock};
    auto held = keeper.hold("job", "me", 10s);
    ASSERT_TRUE(held);
    // A paused holder whose clock runs twice as fast: its bound passes at
    // about 5 s of store time, while the store's term still runs.
    for (int i = 0; i < 100 && held->valid(); ++i) {
        store_clock.advance(100ms);
        holder_clock.advance(200ms);
    }
    EXPECT_FALSE(held->valid());
    EXPECT_FALSE(rival_granted());  // the store still counts the term: early, never late
}

TEST_F(Keeper, DestroyingOrReleasingTheHeldLeaseReleasesItOnce) {
    keeper_t keeper{store, told.options(), holder_clock};
    {
        auto held = keeper.hold("job", "me", 10s);
        ASSERT_TRUE(held);
        EXPECT_EQ(keeper.size(), 1u);
        EXPECT_FALSE(rival_granted());
        auto moved = std::move(*held);  // moving hands the lease over; the source releases nothing
        EXPECT_FALSE(rival_granted());
    }
    EXPECT_EQ(keeper.size(), 0u);
    EXPECT_TRUE(rival_granted());

    auto held = keeper.hold("job", "me", 10s);
    ASSERT_TRUE(held);
    auto stop = held->lost();
    auto r = held->release();
    EXPECT_TRUE(r) << r.error().code.message();
    EXPECT_TRUE(stop.stop_requested());  // nobody may act as the holder after a release
    EXPECT_TRUE(rival_granted());
    EXPECT_EQ(told.size(), 0u);  // a release is not a loss
}

TEST_F(Keeper, AHeldLeaseThatOutlivesItsKeeperIsLostAndStillReleases) {
    std::optional<keeper_t::held_lease> kept;
    {
        keeper_t keeper{store, told.options(), holder_clock};
        auto held = keeper.hold("job", "me", 10s);
        ASSERT_TRUE(held);
        kept.emplace(std::move(*held));
    }
    EXPECT_TRUE(kept->lost().stop_requested());
    EXPECT_FALSE(kept->valid());
    EXPECT_FALSE(rival_granted());  // the term still runs on the store
    kept.reset();
    EXPECT_TRUE(rival_granted());
}

TEST_F(Keeper, AHoldRefusedSaysWhoHoldsItAndKeepsNothing) {
    auto rival = leases.acquire("job", "rival", 10s);
    ASSERT_TRUE(rival);
    keeper_t keeper{store, told.options(), holder_clock};
    auto held = keeper.hold("job", "me", 10s);
    ASSERT_FALSE(held);
    EXPECT_EQ(held.error(), coord::errc::lease_held);
    EXPECT_EQ(held.error().holder, "rival");
    EXPECT_EQ(keeper.size(), 0u);
}

TEST_F(Keeper, TheWaitingHoldQueuesAndTakesTheLeaseOnceItIsFree) {
    auto rival = leases.acquire("job", "rival", 10s);
    ASSERT_TRUE(rival);
    keeper_t keeper{store, told.options(), holder_clock};
    // A deadline already passed is one queued try: refused, nothing kept.
    auto refused = keeper.hold("job", "me", 10s, std::chrono::steady_clock::now());
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error(), coord::errc::lease_held);
    ASSERT_TRUE(leases.release(*rival));
    auto held = keeper.hold("job", "me", 10s, std::chrono::steady_clock::now() + 10s);
    ASSERT_TRUE(held) << held.error().code.message();
    EXPECT_GT(held->token(), rival->token);
    EXPECT_TRUE(held->valid());
    EXPECT_EQ(held->safe_until(), holder_clock.now() + 10s - keeper.allowance(10s));
}

TEST_F(Keeper, RefusesOptionsOutOfRangeAndATermNoLongerThanTheAllowance) {
    auto with = [](auto change) {
        coord::keeper_options o;
        o.own_thread = false;
        change(o);
        return o;
    };
    EXPECT_THROW(keeper_t(store, with([](auto& o) { o.renewals_per_term = 1; }), holder_clock), std::invalid_argument);
    EXPECT_THROW(keeper_t(store, with([](auto& o) { o.renewals_per_term = 101; }), holder_clock), std::invalid_argument);
    EXPECT_THROW(keeper_t(store, with([](auto& o) { o.max_clock_drift = 0.6; }), holder_clock), std::invalid_argument);
    EXPECT_THROW(keeper_t(store, with([](auto& o) { o.max_clock_drift = -0.1; }), holder_clock), std::invalid_argument);
    EXPECT_THROW(keeper_t(store, with([](auto& o) { o.allowance_floor = -1ms; }), holder_clock), std::invalid_argument);
    keeper_t keeper{store, told.options(), holder_clock};
    EXPECT_THROW((void)keeper.hold("job", "me", 2ms), std::invalid_argument);  // the floor alone is 2 ms
    EXPECT_THROW((void)keeper.hold("job", "me", 0s), std::invalid_argument);
    EXPECT_THROW((void)keeper.hold("", "me", 10s), std::invalid_argument);
    EXPECT_TRUE(rival_granted());  // nothing was taken by a refused call
}

TEST(KeeperThread, AKeeperOnItsOwnThreadHoldsAndReleasesManyLeases) {
    // The real steady clock and the keeper's thread: what holds here is
    // ownership while held (terms of an hour: no renewal comes due) and a
    // clean start and stop under the sanitizers, never a timing.
    coord::basic_memory_store<coord::steady_clock> store;
    coord::basic_keeper keeper{store};
    std::vector<coord::basic_keeper<coord::basic_memory_store<coord::steady_clock>>::held_lease> held;
    for (int i = 0; i < 50; ++i) {
        auto h = keeper.hold("job-" + std::to_string(i), "me", std::chrono::hours{1});
        ASSERT_TRUE(h);
        held.push_back(std::move(*h));
    }
    EXPECT_EQ(keeper.size(), 50u);
    for (const auto& h : held) EXPECT_TRUE(h.valid());
    held.clear();
    EXPECT_EQ(keeper.size(), 0u);
    coord::basic_lease_manager leases{store};
    EXPECT_TRUE(leases.acquire("job-7", "other", 1s));
}

}  // namespace
