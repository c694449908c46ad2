// SPDX-License-Identifier: Apache-2.0
// tests/support/failover_checks.hpp: what the replicated-store tests check
// once the store failed over to a replica that had every write: the store
// object's next calls reach the new primary at once, and everything it was
// told before still holds.
#pragma once

#include <gtest/gtest.h>

#include <chrono>

#include "coord/error.hpp"
#include "coord/lease.hpp"
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

}  // namespace coord::test
