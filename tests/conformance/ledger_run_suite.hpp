// SPDX-License-Identifier: Apache-2.0
// tests/conformance/ledger_run_suite.hpp: the conformance suite every
// ledger_run_store model runs (claim, effect and done marker as one atomic
// step), instantiated per model with a factory.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "coord/job_ledger.hpp"
#include "support/test_support.hpp"

template <class Factory>
class LedgerRunConformance : public ::testing::Test {
protected:
    using store_type = typename Factory::store_type;
    static_assert(coord::ledger_run_store<store_type>);
    coord::manual_clock clock{coord::test::test_epoch()};
    Factory factory;
    std::unique_ptr<store_type> store = factory.make(clock);
    coord::basic_job_ledger<store_type> ledger{*store, {}};
    coord::slot billing = *coord::slot::parse("billing@2026-10-13T09:00Z");
};

TYPED_TEST_SUITE_P(LedgerRunConformance);

// Through ledger_run_atomic the done marker lands in the same step as the
// effect: a run never leaves a slot running after its effect returned.
TYPED_TEST_P(LedgerRunConformance, EffectAndDoneMarkerAreOneStep) {
    int effects = 0;
    auto r = this->ledger.run(this->billing, "A", "p", [&](const coord::ledger_context& ctx) {
        ++effects;
        return "fence " + std::to_string(ctx.fence);
    });
    ASSERT_TRUE(r);
    EXPECT_EQ(r->kind, coord::run_outcome::applied);
    auto rec = *this->ledger.read(this->billing);
    ASSERT_TRUE(rec);
    EXPECT_EQ(rec->state, coord::ledger_record::state_t::done);
    EXPECT_EQ(rec->result, "fence 1");
    EXPECT_EQ(rec->completed.count(), coord::since_epoch_ns(this->clock.now()));
    auto again = this->ledger.run(this->billing, "B", "p", [&](const coord::ledger_context&) {
        ++effects;
        return std::string("again");
    });
    EXPECT_EQ(again->kind, coord::run_outcome::replayed);
    EXPECT_EQ(again->result, "fence 1");
    EXPECT_EQ(effects, 1);
}

TYPED_TEST_P(LedgerRunConformance, AThrowingEffectIsAFailedAttemptAndChangesNothingElse) {
    EXPECT_THROW((void)this->ledger.run(this->billing, "A", "",
                                        [](const coord::ledger_context&) -> std::string {
                                            throw std::runtime_error("disk full");
                                        }),
                 std::runtime_error);
    auto rec = *this->ledger.read(this->billing);
    ASSERT_TRUE(rec);
    EXPECT_EQ(rec->state, coord::ledger_record::state_t::idle);
    EXPECT_EQ(rec->fail_reason, "disk full");
    auto r = this->ledger.run(this->billing, "B", "", [](const coord::ledger_context& ctx) {
        return std::to_string(ctx.attempt);
    });
    ASSERT_TRUE(r);
    EXPECT_EQ(r->kind, coord::run_outcome::applied);
    EXPECT_EQ(r->result, "2");
}

TYPED_TEST_P(LedgerRunConformance, RefusedRunsNeverCallTheEffect) {
    int effects = 0;
    auto effect = [&](const coord::ledger_context&) {
        ++effects;
        return std::string();
    };
    const auto old = *coord::slot::parse("billing@2026-10-01T09:00Z");  // 12 days before the store's now
    EXPECT_EQ(this->ledger.run(old, "A", "", effect)->kind, coord::run_outcome::expired);
    EXPECT_FALSE(this->ledger.read(old)->has_value());
    ASSERT_EQ(this->ledger.claim(this->billing, "A", "x")->kind, coord::claim_outcome::granted);
    EXPECT_EQ(this->ledger.run(this->billing, "B", "y", effect)->kind, coord::run_outcome::payload_mismatch);
    EXPECT_EQ(this->ledger.run(this->billing, "B", "x", effect)->kind, coord::run_outcome::in_progress);
    EXPECT_EQ(effects, 0);
}

TYPED_TEST_P(LedgerRunConformance, ConcurrentRunsOfOneSlotApplyOnce) {
    std::atomic<int> effects{0}, applied{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < 4; ++t)
        pool.emplace_back([&, t] {
            auto r = this->ledger.run(this->billing, "w" + std::to_string(t), "", [&](const coord::ledger_context&) {
                ++effects;
                return std::string("ok");
            });
            if (r && r->kind == coord::run_outcome::applied) ++applied;
        });
    for (auto& th : pool) th.join();
    EXPECT_EQ(effects.load(), 1);
    EXPECT_EQ(applied.load(), 1);
}

REGISTER_TYPED_TEST_SUITE_P(LedgerRunConformance, EffectAndDoneMarkerAreOneStep,
                            AThrowingEffectIsAFailedAttemptAndChangesNothingElse, RefusedRunsNeverCallTheEffect,
                            ConcurrentRunsOfOneSlotApplyOnce);
