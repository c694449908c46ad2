// SPDX-License-Identifier: Apache-2.0
// tests/conformance/keeper_suite.hpp: the keeper (coord/keeper.hpp) and the
// election (coord/election.hpp) on every lease_store model, instantiated per
// model with a factory:
//
//   INSTANTIATE_TYPED_TEST_SUITE_P(Memory, KeeperConformance, coord::test::memory_factory);
//
// The store's clock and the holder's steady clock are two manual clocks, and
// renewals run when the test calls service() (keeper_options::own_thread =
// false): no test sleeps. Terms are the store's answer (held->ttl()): etcd
// grants whole seconds.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "coord/election.hpp"
#include "coord/keeper.hpp"
#include "coord/lease.hpp"
#include "support/test_support.hpp"

template <class Factory>
class KeeperConformance : public ::testing::Test {
protected:
    using store_type = typename Factory::store_type;
    using keeper_type = coord::basic_keeper<store_type, coord::manual_clock>;
    static constexpr std::chrono::seconds ttl{10};

    coord::manual_clock clock{coord::test::test_epoch()};         // the store's
    coord::manual_clock holder_clock{std::chrono::hours{1}};     // the holder's: another epoch
    Factory factory;
    std::unique_ptr<store_type> store = factory.make(clock);

    static coord::keeper_options serviced() {
        coord::keeper_options o;
        o.own_thread = false;
        return o;
    }
    void both(std::chrono::nanoseconds d) {
        clock.advance(d);
        holder_clock.advance(d);
    }
    // Another process's acquire: the lease it got, or nullopt when refused.
    std::optional<coord::lease> rival(const std::string& name, const std::string& owner = "rival") {
        auto r = coord::basic_lease_manager<store_type>(*store).acquire(name, owner, ttl);
        if (!r) {
            EXPECT_EQ(r.error(), coord::errc::lease_held) << r.error().code.message();
            return std::nullopt;
        }
        return *r;
    }
};

TYPED_TEST_SUITE_P(KeeperConformance);

TYPED_TEST_P(KeeperConformance, HoldsOverManyTermsWhileServicedAndReleasesOnDestruction) {
    typename TestFixture::keeper_type keeper{*this->store, this->serviced(), this->holder_clock};
    coord::fence_token token = 0;
    {
        auto held = keeper.hold("job", "me", this->ttl);
        ASSERT_TRUE(held) << held.error().code.message();
        token = held->token();
        const auto step = held->ttl() / 3;  // a renewal is due at every step
        for (int i = 0; i < 12; ++i) {      // four terms
            this->both(step);
            keeper.service();
            ASSERT_TRUE(held->valid()) << "step " << i;
            ASSERT_FALSE(held->lost().stop_requested()) << "step " << i;
            ASSERT_FALSE(this->rival("job")) << "step " << i;
        }
        EXPECT_EQ(held->renewals(), 12u);
        EXPECT_EQ(held->token(), token);  // renewals keep the grant's token
        auto now = coord::basic_lease_manager<typename TestFixture::store_type>(*this->store).holder("job");
        ASSERT_TRUE(now && *now);
        EXPECT_EQ((*now)->owner, "me");
        EXPECT_EQ((*now)->token, token);
    }
    EXPECT_EQ(keeper.size(), 0u);
    auto next = this->rival("job");  // released at once, not at the term's end
    ASSERT_TRUE(next);
    EXPECT_GT(next->token, token);
}

TYPED_TEST_P(KeeperConformance, ARenewalRefusedAfterAnotherProcessTookTheNameIsLostAtOnce) {
    typename TestFixture::keeper_type keeper{*this->store, this->serviced(), this->holder_clock};
    auto held = keeper.hold("job", "me", this->ttl);
    ASSERT_TRUE(held) << held.error().code.message();
    // The store's term ends while the holder's clock barely moved, and
    // another process takes the name.
    this->clock.advance(held->ttl() + std::chrono::seconds{1});
    auto taker = this->rival("job", "taker");
    ASSERT_TRUE(taker);
    EXPECT_GT(taker->token, held->token());
    this->holder_clock.advance(held->ttl() / 3);  // a renewal is due; the safe deadline is not passed
    EXPECT_TRUE(held->valid());
    keeper.service();
    EXPECT_TRUE(held->lost().stop_requested());
    EXPECT_FALSE(held->valid());
    ASSERT_TRUE(held->why_lost());
    EXPECT_EQ(*held->why_lost(), coord::condition::refused) << held->why_lost()->message();
    // Destroying the lost lease leaves the taker's alone.
    held = coord::unexpected(coord::lease_error{});
    auto now = coord::basic_lease_manager<typename TestFixture::store_type>(*this->store).holder("job");
    ASSERT_TRUE(now && *now);
    EXPECT_EQ((*now)->owner, "taker");
    EXPECT_EQ((*now)->token, taker->token);
}

TYPED_TEST_P(KeeperConformance, APausedHolderIsInvalidOnWakingAndLostAtTheFirstCheck) {
    typename TestFixture::keeper_type keeper{*this->store, this->serviced(), this->holder_clock};
    auto held = keeper.hold("job", "me", this->ttl);
    ASSERT_TRUE(held) << held.error().code.message();
    EXPECT_EQ(held->safe_until(), this->holder_clock.now() + held->ttl() - keeper.allowance(held->ttl()));
    this->both(held->ttl() * 3);  // the whole process stopped for three terms
    EXPECT_FALSE(held->valid());  // no store call needed
    auto taker = this->rival("job", "taker");
    ASSERT_TRUE(taker);
    keeper.service();
    EXPECT_TRUE(held->lost().stop_requested());
    ASSERT_TRUE(held->why_lost());
    EXPECT_EQ(held->renewals(), 0u);  // never renewed what it could not vouch for
    EXPECT_EQ(held->release().error(), coord::errc::not_lease_holder);
    EXPECT_FALSE(this->rival("job"));  // the taker still holds it
}

TYPED_TEST_P(KeeperConformance, AnElectionHasOneLeaderAtATimeAndItsTermsOnlyGrow) {
    typename TestFixture::keeper_type keeper{*this->store, this->serviced(), this->holder_clock};
    coord::basic_election election{keeper, "leader"};
    const auto now = std::chrono::steady_clock::now();  // deadlines already passed: one try each
    auto nobody = election.leader();
    ASSERT_TRUE(nobody);
    EXPECT_FALSE(*nobody);

    auto a = election.campaign("a", this->ttl, now);
    ASSERT_TRUE(a) << a.error().code.message();
    auto b = election.campaign("b", this->ttl, now);
    ASSERT_FALSE(b);
    EXPECT_EQ(b.error(), coord::errc::lease_held);
    EXPECT_EQ(b.error().holder, "a");
    auto who = election.leader();
    ASSERT_TRUE(who && *who);
    EXPECT_EQ((*who)->candidate, "a");
    EXPECT_EQ((*who)->term, a->token());
    const auto a_term = a->token();

    ASSERT_TRUE(a->release());  // resigns
    auto after = election.observe(a_term, now);
    ASSERT_TRUE(after);
    EXPECT_FALSE(*after);  // nobody leads

    auto b2 = election.campaign("b", this->ttl, now);
    ASSERT_TRUE(b2) << b2.error().code.message();
    EXPECT_GT(b2->token(), a_term);
    auto changed = election.observe(std::nullopt, now);
    ASSERT_TRUE(changed && *changed);
    EXPECT_EQ((*changed)->candidate, "b");
    EXPECT_EQ((*changed)->term, b2->token());

    // The leader's process stops past its term: the next candidate takes
    // over with a larger term, and the old leader knows it on waking.
    this->both(b2->ttl() * 2);
    EXPECT_FALSE(b2->valid());
    auto c = election.campaign("c", this->ttl, now);
    ASSERT_TRUE(c) << c.error().code.message();
    EXPECT_GT(c->token(), b2->token());
    keeper.service();
    EXPECT_TRUE(b2->lost().stop_requested());
    EXPECT_FALSE(c->lost().stop_requested());
}

REGISTER_TYPED_TEST_SUITE_P(KeeperConformance, HoldsOverManyTermsWhileServicedAndReleasesOnDestruction,
                            ARenewalRefusedAfterAnotherProcessTookTheNameIsLostAtOnce,
                            APausedHolderIsInvalidOnWakingAndLostAtTheFirstCheck,
                            AnElectionHasOneLeaderAtATimeAndItsTermsOnlyGrow);
