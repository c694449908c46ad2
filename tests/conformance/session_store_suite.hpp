// SPDX-License-Identifier: Apache-2.0
// tests/conformance/session_store_suite.hpp: the conformance suite every
// session_store and revocation_store model runs (through the session manager
// and the store calls), instantiated per model with a factory:
//
//   INSTANTIATE_TYPED_TEST_SUITE_P(Memory, SessionStoreConformance, coord::test::memory_factory);
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "coord/session.hpp"
#include "support/test_support.hpp"

template <class Factory>
class SessionStoreConformance : public ::testing::Test {
protected:
    coord::manual_clock clock{coord::test::test_epoch()};
    Factory factory;
    std::unique_ptr<typename Factory::store_type> store = factory.make(clock);
    coord::basic_session_manager<typename Factory::store_type> sessions{
        *store, {.idle_timeout = std::chrono::minutes(30), .absolute_timeout = std::chrono::hours(8)}};
};

TYPED_TEST_SUITE_P(SessionStoreConformance);

TYPED_TEST_P(SessionStoreConformance, CreateLoadAndOnlyTheHashIsAKey) {
    auto s = this->sessions.create("alice", std::string("cart\0=1", 7));
    ASSERT_TRUE(s);
    auto l = this->sessions.load(s->id);
    ASSERT_TRUE(l) << l.error().message();
    EXPECT_EQ(l->user, "alice");
    EXPECT_EQ(l->data, std::string("cart\0=1", 7));
    EXPECT_EQ(this->store->session_load(s->id).error(), coord::errc::session_not_found);
}

TYPED_TEST_P(SessionStoreConformance, IdleAndAbsoluteTimeouts) {
    using namespace std::chrono_literals;
    auto s = this->sessions.create("alice");
    ASSERT_TRUE(s);
    for (int i = 0; i < 31; ++i) {
        this->clock.advance(15min);
        ASSERT_TRUE(this->sessions.load(s->id)) << i;
    }
    this->clock.advance(15min);
    EXPECT_EQ(this->sessions.load(s->id).error(), coord::errc::session_expired);
    EXPECT_EQ(this->sessions.load(s->id).error(), coord::errc::session_not_found);
    auto idle = this->sessions.create("bob");
    ASSERT_TRUE(idle);
    this->clock.advance(30min);
    EXPECT_EQ(this->sessions.load(idle->id).error(), coord::errc::session_expired);
}

TYPED_TEST_P(SessionStoreConformance, VersionsRotationAndLogout) {
    auto s = this->sessions.create("alice", "0");
    ASSERT_TRUE(s);
    auto a = this->sessions.load(s->id), b = this->sessions.load(s->id);
    ASSERT_TRUE(a && b);
    a->data = "a";
    b->data = "b";
    ASSERT_TRUE(this->sessions.save(*a));
    EXPECT_EQ(this->sessions.save(*b).error(), coord::errc::session_conflict);
    EXPECT_EQ(this->sessions.rotate(*b).error(), coord::errc::session_conflict);
    auto fresh = this->sessions.rotate(*a);
    ASSERT_TRUE(fresh);
    EXPECT_EQ(this->sessions.load(s->id).error(), coord::errc::session_not_found);
    auto loaded = this->sessions.load(fresh->id);
    ASSERT_TRUE(loaded);
    EXPECT_EQ(loaded->data, "a");
    EXPECT_EQ(this->sessions.revoke(fresh->id), true);
    loaded->data = "late";
    EXPECT_EQ(this->sessions.save(*loaded).error(), coord::errc::session_not_found);
    EXPECT_EQ(this->sessions.load(fresh->id).error(), coord::errc::session_not_found);
}

TYPED_TEST_P(SessionStoreConformance, RevokeAllOfAUser) {
    std::vector<std::string> ids;
    for (int i = 0; i < 3; ++i) ids.push_back(this->sessions.create("alice")->id);
    const auto bob = this->sessions.create("bob")->id;
    EXPECT_EQ(this->sessions.revoke_user("alice"), 3u);
    for (const auto& id : ids) EXPECT_EQ(this->sessions.load(id).error(), coord::errc::session_not_found);
    EXPECT_TRUE(this->sessions.load(bob));
}

TYPED_TEST_P(SessionStoreConformance, TokenRevocation) {
    auto& st = *this->store;
    EXPECT_EQ(st.token_revoked("t1", "alice", 100, 150), false);
    ASSERT_TRUE(st.revoke_token("t1", 200));
    EXPECT_EQ(st.token_revoked("t1", "alice", 100, 150), true);
    EXPECT_EQ(st.token_revoked("t1", "alice", 100, 201), false);  // past the token's exp
    ASSERT_TRUE(st.revoke_subject("alice", 120));
    EXPECT_EQ(st.token_revoked("t2", "alice", 100, 150), true);
    EXPECT_EQ(st.token_revoked("t2", "alice", 130, 150), false);
    EXPECT_EQ(st.token_revoked("t2", "alice", std::nullopt, 150), true);
    ASSERT_TRUE(st.revoke_subject("alice", 5));  // never moves back
    EXPECT_EQ(st.token_revoked("t2", "alice", 100, 150), true);
    EXPECT_EQ(st.token_revoked("", "", std::nullopt, 150), false);
}

REGISTER_TYPED_TEST_SUITE_P(SessionStoreConformance, CreateLoadAndOnlyTheHashIsAKey, IdleAndAbsoluteTimeouts,
                            VersionsRotationAndLogout, RevokeAllOfAUser, TokenRevocation);
