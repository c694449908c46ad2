// SPDX-License-Identifier: Apache-2.0
// tests/conformance/lease_store_suite.hpp: the conformance suite every
// lease_store model runs, instantiated per model with a factory:
//
//   INSTANTIATE_TYPED_TEST_SUITE_P(Memory, LeaseStoreConformance, coord::test::memory_factory);
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "coord/lease.hpp"
#include "support/test_support.hpp"

template <class Factory>
class LeaseStoreConformance : public ::testing::Test {
protected:
    using ns = std::chrono::nanoseconds;
    static constexpr ns ttl = std::chrono::seconds{10};
    coord::manual_clock clock{coord::test::test_epoch()};
    Factory factory;
    std::unique_ptr<typename Factory::store_type> store = factory.make(clock);
};

TYPED_TEST_SUITE_P(LeaseStoreConformance);

TYPED_TEST_P(LeaseStoreConformance, GrantsThenRefusesWhileHeldWithHolderAndExpiry) {
    auto& s = *this->store;
    auto a = s.lease_acquire("n", "A", this->ttl);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->owner, "A");
    EXPECT_EQ(a->name, "n");
    EXPECT_GT(a->token, 0u);
    EXPECT_EQ(a->expires_at, this->clock.now().time_since_epoch() + this->ttl);
    auto b = s.lease_acquire("n", "B", this->ttl);
    ASSERT_FALSE(b);
    EXPECT_EQ(b.error(), coord::errc::lease_held);
    EXPECT_EQ(b.error().holder, "A");
    EXPECT_EQ(b.error().token, a->token);
    EXPECT_EQ(b.error().expires_at, a->expires_at);
    // Even the holder itself cannot acquire twice.
    EXPECT_EQ(s.lease_acquire("n", "A", this->ttl).error(), coord::errc::lease_held);
}

TYPED_TEST_P(LeaseStoreConformance, ExpiredHolderLosesToNewHolderWithLargerToken) {
    auto& s = *this->store;
    auto a = s.lease_acquire("n", "A", this->ttl);
    ASSERT_TRUE(a);
    this->clock.advance(this->ttl - std::chrono::nanoseconds{1});
    EXPECT_EQ(s.lease_acquire("n", "B", this->ttl).error(), coord::errc::lease_held);
    this->clock.advance(std::chrono::nanoseconds{1});  // now == expires_at: the term has ended
    auto b = s.lease_acquire("n", "B", this->ttl);
    ASSERT_TRUE(b);
    EXPECT_GT(b->token, a->token);
    // The old holder can neither renew nor release the new holder's lease.
    auto renew = s.lease_renew("n", "A", a->token, this->ttl);
    EXPECT_EQ(renew.error(), coord::errc::not_lease_holder);
    EXPECT_EQ(renew.error().holder, "B");
    EXPECT_EQ(s.lease_release("n", "A", 0).error(), coord::errc::not_lease_holder);
    auto now = s.lease_read("n");
    ASSERT_TRUE(now);
    ASSERT_TRUE(now->has_value());
    EXPECT_EQ((*now)->owner, "B");
    EXPECT_EQ((*now)->token, b->token);
}

TYPED_TEST_P(LeaseStoreConformance, TokensIncreaseAcrossEveryGrant) {
    auto& s = *this->store;
    coord::fence_token last = 0;
    for (int i = 0; i < 20; ++i) {
        auto l = s.lease_acquire("n", "owner" + std::to_string(i % 3), this->ttl);
        ASSERT_TRUE(l);
        EXPECT_GT(l->token, last);
        last = l->token;
        if (i % 2) ASSERT_TRUE(s.lease_release("n", l->owner, l->token));
        else this->clock.advance(this->ttl);
    }
    // Names are independent: a new name's first token does not continue n's.
    auto other = s.lease_acquire("other", "X", this->ttl);
    ASSERT_TRUE(other);
    if constexpr (coord::test::tokens_floored_by_time<TypeParam>()) {
        // A store that floors tokens by its time (so that they never go back
        // even when it loses its records) starts a name at its now in us.
        EXPECT_EQ(other->token, static_cast<coord::fence_token>(coord::since_epoch_ns(this->clock.now()) / 1000));
        EXPECT_LE(other->token, last);
    } else {
        // A store-wide counter (etcd's revision, ZooKeeper's zxid): larger than every earlier grant.
        EXPECT_GT(other->token, last);
    }
}

TYPED_TEST_P(LeaseStoreConformance, RenewExtendsTheTermOnTheStoreClock) {
    auto& s = *this->store;
    auto a = s.lease_acquire("n", "A", this->ttl);
    ASSERT_TRUE(a);
    this->clock.advance(std::chrono::seconds{8});
    auto r = s.lease_renew("n", "A", 0, std::chrono::nanoseconds{0});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->token, a->token);
    EXPECT_EQ(r->expires_at, this->clock.now().time_since_epoch() + this->ttl);
    this->clock.advance(std::chrono::seconds{8});
    EXPECT_EQ(s.lease_acquire("n", "B", this->ttl).error(), coord::errc::lease_held);
    // A renewal with a new term.
    auto r2 = s.lease_renew("n", "A", a->token, std::chrono::seconds{1});
    ASSERT_TRUE(r2);
    EXPECT_EQ(r2->ttl, std::chrono::seconds{1});
    this->clock.advance(std::chrono::seconds{1});
    EXPECT_TRUE(s.lease_acquire("n", "B", this->ttl));
}

TYPED_TEST_P(LeaseStoreConformance, RenewAfterExpiryIsRefusedEvenIfNobodyTookIt) {
    auto& s = *this->store;
    auto a = s.lease_acquire("n", "A", this->ttl);
    ASSERT_TRUE(a);
    this->clock.advance(this->ttl);
    EXPECT_EQ(s.lease_renew("n", "A", a->token, this->ttl).error(), coord::errc::lease_expired);
    auto read = s.lease_read("n");
    ASSERT_TRUE(read);
    EXPECT_FALSE(read->has_value());
}

TYPED_TEST_P(LeaseStoreConformance, TokenFormsCheckTheToken) {
    auto& s = *this->store;
    auto a = s.lease_acquire("n", "A", this->ttl);
    ASSERT_TRUE(a);
    ASSERT_TRUE(s.lease_release("n", "A", a->token));
    auto a2 = s.lease_acquire("n", "A", this->ttl);  // same owner name, new grant
    ASSERT_TRUE(a2);
    // The first grant's late release must not end the second grant.
    EXPECT_EQ(s.lease_release("n", "A", a->token).error(), coord::errc::not_lease_holder);
    EXPECT_EQ(s.lease_renew("n", "A", a->token, this->ttl).error(), coord::errc::not_lease_holder);
    EXPECT_TRUE(s.lease_read("n")->has_value());
    EXPECT_TRUE(s.lease_release("n", "A", a2->token));
    EXPECT_FALSE(s.lease_read("n")->has_value());
}

TYPED_TEST_P(LeaseStoreConformance, UnknownNamesAreNotHeld) {
    auto& s = *this->store;
    EXPECT_EQ(s.lease_renew("ghost", "A", 0, this->ttl).error(), coord::errc::not_lease_holder);
    EXPECT_EQ(s.lease_release("ghost", "A", 0).error(), coord::errc::not_lease_holder);
    EXPECT_FALSE(s.lease_read("ghost")->has_value());
}

TYPED_TEST_P(LeaseStoreConformance, AnotherHandleSeesTheHolder) {
    auto& s = *this->store;
    auto a = s.lease_acquire("n", "A", this->ttl);
    ASSERT_TRUE(a);
    auto* other = this->factory.reopen(this->store.get(), this->clock);
    auto b = other->lease_acquire("n", "B", this->ttl);
    EXPECT_EQ(b.error(), coord::errc::lease_held);
    EXPECT_EQ(b.error().holder, "A");
    this->clock.advance(this->ttl);
    auto b2 = other->lease_acquire("n", "B", this->ttl);
    ASSERT_TRUE(b2);
    EXPECT_GT(b2->token, a->token);
}

TYPED_TEST_P(LeaseStoreConformance, ConcurrentAcquireHasOneWinner) {
    auto& s = *this->store;
    for (int round = 0; round < 5; ++round) {
        std::atomic<int> winners{0};
        std::vector<std::thread> pool;
        for (int t = 0; t < 4; ++t)
            pool.emplace_back([&, t] {
                auto r = s.lease_acquire("race", "T" + std::to_string(t), std::chrono::seconds{1});
                if (r) ++winners;
                else EXPECT_EQ(r.error(), coord::errc::lease_held);
            });
        for (auto& th : pool) th.join();
        EXPECT_EQ(winners.load(), 1);
        this->clock.advance(std::chrono::seconds{1});
    }
}

// One limit on names on every store: max_name_size bytes (here of two-byte
// characters) work for name and owner; one byte more is bad input, refused
// before the store is asked.
TYPED_TEST_P(LeaseStoreConformance, TheLongestNameWorksAndALongerOneIsBadInput) {
    coord::basic_lease_manager leases{*this->store};
    std::string longest;
    while (longest.size() < coord::max_name_size) longest += "\xc3\xa9";  // é
    ASSERT_EQ(longest.size(), coord::max_name_size);
    auto l = leases.acquire(longest, longest, this->ttl);
    ASSERT_TRUE(l) << l.error().code.message();
    auto held = leases.holder(longest);
    ASSERT_TRUE(held && *held);
    EXPECT_EQ((*held)->owner, longest);
    EXPECT_TRUE(leases.release(*l));
    EXPECT_THROW((void)leases.acquire(longest + "n", "A", this->ttl), std::invalid_argument);
    EXPECT_THROW((void)leases.acquire("n", longest + "A", this->ttl), std::invalid_argument);
}

REGISTER_TYPED_TEST_SUITE_P(LeaseStoreConformance, TheLongestNameWorksAndALongerOneIsBadInput,
                            GrantsThenRefusesWhileHeldWithHolderAndExpiry,
                            ExpiredHolderLosesToNewHolderWithLargerToken, TokensIncreaseAcrossEveryGrant,
                            RenewExtendsTheTermOnTheStoreClock, RenewAfterExpiryIsRefusedEvenIfNobodyTookIt,
                            TokenFormsCheckTheToken, UnknownNamesAreNotHeld, AnotherHandleSeesTheHolder,
                            ConcurrentAcquireHasOneWinner);
