// SPDX-License-Identifier: Apache-2.0
// tests/support/failover_checks.hpp: what the replicated-store tests check
// once the store failed over to a replica that had every write: the store
// object's next calls reach the new primary at once, and everything it was
// told before still holds; and what every store's recovery test checks
// once the store was initialized again with floors.
#pragma once

#include <gtest/gtest.h>

#include <chrono>

#include "coord/error.hpp"
#include "coord/lease.hpp"
#include "coord/rules/ledger.hpp"
#include "coord/rules/segment.hpp"

namespace coord::test {

/// Before the failover, `s` granted `a` (lease "n" to A), wrote fence "f"
/// with a's token and value "by A", and allocated `ids` from tag "ids".
/// After it: the fence reads back and refuses an older token, the lease is
/// still held, a new grant's token is larger, and segment IDs continue
/// above every one handed out.
template <class Store>
void expect_every_promise_after_failover(Store& s, const lease& a, const segment_range& ids) {
    using namespace std::chrono_literals;
    auto r = s.fence_read("f");
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->fence, a.token);
    EXPECT_EQ(r->value, "by A");
    EXPECT_EQ(s.fence_write("f", a.token - 1, "stale").error(), errc::stale_fence);
    auto held = s.lease_acquire("n", "B", 1h);
    ASSERT_FALSE(held) << "a second holder after the failover";
    EXPECT_EQ(held.error().code, errc::lease_held) << held.error().code.message();
    auto c = s.lease_acquire("other", "C", 1h);
    ASSERT_TRUE(c) << c.error().code.message();
    EXPECT_GT(c->token, a.token);
    auto more = s.segment_allocate("ids", 10);
    ASSERT_TRUE(more) << more.error().message();
    EXPECT_GE(more->begin, ids.end) << "a segment ID handed out again";
}

/// After a recovery that stated a fence floor above `token` (--fence-floor
/// now, above every lease token): a slot claimed then (`scheduled`, Unix
/// ms, after the ledger floor) gets a fence above the floor, so that the
/// claim's fenced effect lands on a key with no record, which refuses
/// tokens below the floor (the fault suite found the claims' fences below
/// it, and every fenced effect after a recovery refused).
template <class Store>
void expect_ledger_fences_above_the_fence_floor(Store& s, fence_token token, std::chrono::milliseconds scheduled) {
    using namespace std::chrono_literals;
    ledger_claim_request q;
    q.key = "a slot after the recovery";
    q.scheduled = scheduled;
    q.worker = "w";
    q.lease_ttl = 1min;
    q.replay_window = 24h;
    auto c = s.ledger_claim(q);
    ASSERT_TRUE(c) << c.error().message();
    ASSERT_EQ(c->kind, claim_outcome::granted);
    EXPECT_GT(c->fence, token);
    auto effect = s.fence_write("the effect of a slot after the recovery", c->fence, "applied once");
    EXPECT_TRUE(effect) << "the claim's fenced effect (fence " << c->fence << ") refused: " << effect.error().code.message();
}
/// The same, the slot an hour after this machine's now.
template <class Store>
void expect_ledger_fences_above_the_fence_floor(Store& s, fence_token token) {
    namespace chr = std::chrono;
    expect_ledger_fences_above_the_fence_floor(
        s, token, chr::duration_cast<chr::milliseconds>((chr::system_clock::now() + chr::hours(1)).time_since_epoch()));
}

}  // namespace coord::test
