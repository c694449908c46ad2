// SPDX-License-Identifier: Apache-2.0
// tests/conformance/ledger_store_suite.hpp: the conformance suite every
// ledger_store model runs (through basic_job_ledger), instantiated per model.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "coord/job_ledger.hpp"
#include "support/test_support.hpp"

template <class Factory>
class LedgerStoreConformance : public ::testing::Test {
protected:
    using store_type = typename Factory::store_type;
    using ledger_type = coord::basic_job_ledger<store_type>;
    static coord::ledger_options options() {
        coord::ledger_options o;
        o.lease_ttl = std::chrono::minutes{1};
        o.replay_window = std::chrono::hours{24};
        o.retention = std::chrono::hours{48};
        return o;
    }
    coord::manual_clock clock{coord::test::test_epoch()};  // 2026-10-13T09:00:00Z
    Factory factory;
    std::unique_ptr<store_type> store = factory.make(clock);
    ledger_type ledger{*store, options()};
    coord::slot billing = *coord::slot::parse("billing@2026-10-13T09:00Z");
};

TYPED_TEST_SUITE_P(LedgerStoreConformance);

TYPED_TEST_P(LedgerStoreConformance, ReplayOfADoneSlotDoesNotApplyAgain) {
    int effects = 0;
    auto effect = [&](const coord::ledger_context& ctx) {
        ++effects;
        return "charged by fence " + std::to_string(ctx.fence);
    };
    auto first = this->ledger.run(this->billing, "w1", "req", effect);
    ASSERT_TRUE(first);
    EXPECT_EQ(first->kind, coord::run_outcome::applied);
    EXPECT_EQ(first->result, "charged by fence 1");
    auto replay = this->ledger.run(this->billing, "w2", "req", effect);
    ASSERT_TRUE(replay);
    EXPECT_EQ(replay->kind, coord::run_outcome::replayed);
    EXPECT_EQ(replay->result, "charged by fence 1");
    EXPECT_EQ(effects, 1);
}

TYPED_TEST_P(LedgerStoreConformance, TimedOutWorkersLateCompletionIsRefused) {
    auto& l = this->ledger;
    auto a = l.claim(this->billing, "A");
    ASSERT_TRUE(a);
    ASSERT_EQ(a->kind, coord::claim_outcome::granted);
    this->clock.advance(std::chrono::seconds{61});  // A's execution lease ends
    auto b = l.claim(this->billing, "B");
    ASSERT_TRUE(b);
    ASSERT_EQ(b->kind, coord::claim_outcome::granted);
    EXPECT_GT(b->fence, a->fence);
    EXPECT_EQ(b->attempt, 2u);
    ASSERT_TRUE(l.complete(this->billing, b->fence, "B's result"));
    EXPECT_EQ(l.complete(this->billing, a->fence, "A's late result").error(), coord::errc::stale_fence);
    EXPECT_EQ(l.heartbeat(this->billing, a->fence).error(), coord::errc::stale_fence);
    EXPECT_EQ(l.fail(this->billing, a->fence, "A gives up").error(), coord::errc::stale_fence);
    auto rec = l.read(this->billing);
    ASSERT_TRUE(rec && rec->has_value());
    EXPECT_EQ((*rec)->result, "B's result");
    EXPECT_EQ((*rec)->state, coord::ledger_record::state_t::done);
    EXPECT_EQ((*rec)->holder, "B");
}

TYPED_TEST_P(LedgerStoreConformance, InProgressUntilTheLeaseEndsAndHeartbeatExtendsIt) {
    auto& l = this->ledger;
    auto a = l.claim(this->billing, "A");
    ASSERT_TRUE(a);
    auto b = l.claim(this->billing, "B");
    ASSERT_TRUE(b);
    EXPECT_EQ(b->kind, coord::claim_outcome::in_progress);
    EXPECT_EQ(b->holder, "A");
    EXPECT_EQ(b->lease_until.count(), a->lease_until.count());
    this->clock.advance(std::chrono::seconds{50});
    ASSERT_TRUE(l.heartbeat(this->billing, a->fence));
    this->clock.advance(std::chrono::seconds{50});  // 100 s after the claim, 50 s after the heartbeat
    EXPECT_EQ(l.claim(this->billing, "B")->kind, coord::claim_outcome::in_progress);
    ASSERT_TRUE(l.complete(this->billing, a->fence, "done"));
}

TYPED_TEST_P(LedgerStoreConformance, SameSlotWithADifferentPayloadIsAConflict) {
    auto& l = this->ledger;
    ASSERT_EQ(l.claim(this->billing, "A", "amount=10")->kind, coord::claim_outcome::granted);
    EXPECT_EQ(l.claim(this->billing, "B", "amount=99")->kind, coord::claim_outcome::payload_mismatch);
    EXPECT_EQ(l.claim(this->billing, "B", "amount=10")->kind, coord::claim_outcome::in_progress);
    int effects = 0;
    auto r = l.run(this->billing, "C", "amount=99", [&](const coord::ledger_context&) {
        ++effects;
        return std::string();
    });
    EXPECT_EQ(r->kind, coord::run_outcome::payload_mismatch);
    EXPECT_EQ(effects, 0);
}

TYPED_TEST_P(LedgerStoreConformance, FailedAttemptCanBeClaimedAgain) {
    auto& l = this->ledger;
    auto a = l.claim(this->billing, "A");
    ASSERT_TRUE(l.fail(this->billing, a->fence, "disk full"));
    auto rec = *l.read(this->billing);
    EXPECT_EQ(rec->fail_reason, "disk full");
    auto b = l.claim(this->billing, "B");
    EXPECT_EQ(b->kind, coord::claim_outcome::granted);
    EXPECT_EQ(b->fence, a->fence + 1);
    EXPECT_EQ(b->attempt, 2u);
}

TYPED_TEST_P(LedgerStoreConformance, ScheduledAndStartedTimesAreKeptApart) {
    this->clock.advance(std::chrono::minutes{5});  // the worker starts 5 minutes late
    auto a = this->ledger.claim(this->billing, "A");
    ASSERT_TRUE(a);
    auto rec = *this->ledger.read(this->billing);
    ASSERT_TRUE(rec);
    EXPECT_EQ(rec->key, "billing@2026-10-13T09:00:00Z");
    EXPECT_EQ(rec->scheduled.count(), coord::unix_millis(coord::manual_clock::time_point{coord::test::test_epoch()}));
    EXPECT_EQ(rec->started.count(), coord::since_epoch_ns(this->clock.now()));
}

TYPED_TEST_P(LedgerStoreConformance, OldSlotsExpireAndDoneRecordsArePrunedAfterRetention) {
    auto& l = this->ledger;
    ASSERT_EQ(l.run(this->billing, "A", "", [](const coord::ledger_context&) { return std::string("ok"); })->kind,
              coord::run_outcome::applied);
    this->clock.advance(std::chrono::hours{23});  // inside the replay window: replayed
    EXPECT_EQ(l.claim(this->billing, "B")->kind, coord::claim_outcome::replayed);
    EXPECT_EQ(*l.prune(), 0u);
    this->clock.advance(std::chrono::hours{2});  // past the window: never run late
    EXPECT_EQ(l.claim(this->billing, "B")->kind, coord::claim_outcome::expired);
    this->clock.advance(std::chrono::hours{24});  // past retention
    EXPECT_EQ(*l.prune(), 1u);
    EXPECT_FALSE(l.read(this->billing)->has_value());
}

// Every time the ledger judges is the store's: the lease end is the store's
// now plus the TTL, a heartbeat moves it from the store's now, the replay
// window is measured to the store's now (an expired slot leaves no record),
// and the completion time is the store's. No call carries a worker's time,
// so a second worker with any clock at all is refused while the first's
// term runs on the store's clock.
TYPED_TEST_P(LedgerStoreConformance, EveryTimeIsTheStoresClock) {
    using namespace std::chrono_literals;
    auto& l = this->ledger;
    const auto minute = std::chrono::nanoseconds(1min).count();
    auto a = l.claim(this->billing, "A");
    ASSERT_TRUE(a);
    ASSERT_EQ(a->kind, coord::claim_outcome::granted);
    EXPECT_EQ(a->lease_until.count(), coord::since_epoch_ns(this->clock.now()) + minute);
    this->clock.advance(40s);
    ASSERT_TRUE(l.heartbeat(this->billing, a->fence));
    EXPECT_EQ((*l.read(this->billing))->lease_until.count(), coord::since_epoch_ns(this->clock.now()) + minute);
    // A second ledger object (another worker) with a far shorter lease: the
    // stored term still decides.
    auto o = TestFixture::options();
    o.lease_ttl = 1ms;
    typename TestFixture::ledger_type hasty{*this->store, o};
    this->clock.advance(59s);
    EXPECT_EQ(hasty.claim(this->billing, "B")->kind, coord::claim_outcome::in_progress);
    this->clock.advance(1s);
    EXPECT_EQ(hasty.claim(this->billing, "B")->kind, coord::claim_outcome::granted);
    // The replay window: 24 h before the store's now is the last slot that runs.
    const auto day_old = coord::slot("billing", std::chrono::floor<std::chrono::milliseconds>(
                                                    coord::slot::time_point(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                        this->clock.now().time_since_epoch())) - 24h));
    EXPECT_EQ(l.claim(day_old, "C")->kind, coord::claim_outcome::granted);
    const auto older = coord::slot("billing", day_old.scheduled() - 1ms);
    EXPECT_EQ(l.claim(older, "C")->kind, coord::claim_outcome::expired);
    EXPECT_FALSE(l.read(older)->has_value());
    auto c = *l.read(day_old);
    ASSERT_TRUE(c);
    ASSERT_TRUE(l.complete(day_old, c->fence, "late but inside the window"));
    EXPECT_EQ((*l.read(day_old))->completed.count(), coord::since_epoch_ns(this->clock.now()));
}

TYPED_TEST_P(LedgerStoreConformance, AnotherHandleSeesTheSameRecords) {
    ASSERT_TRUE(this->ledger.claim(this->billing, "A"));
    auto* other = this->factory.reopen(this->store.get(), this->clock);
    typename TestFixture::ledger_type second{*other, TestFixture::options()};
    EXPECT_EQ(second.claim(this->billing, "B")->kind, coord::claim_outcome::in_progress);
}

REGISTER_TYPED_TEST_SUITE_P(LedgerStoreConformance, ReplayOfADoneSlotDoesNotApplyAgain,
                            TimedOutWorkersLateCompletionIsRefused, InProgressUntilTheLeaseEndsAndHeartbeatExtendsIt,
                            SameSlotWithADifferentPayloadIsAConflict, FailedAttemptCanBeClaimedAgain,
                            ScheduledAndStartedTimesAreKeptApart, OldSlotsExpireAndDoneRecordsArePrunedAfterRetention,
                            AnotherHandleSeesTheSameRecords, EveryTimeIsTheStoresClock);
