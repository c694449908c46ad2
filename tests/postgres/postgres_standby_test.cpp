// SPDX-License-Identifier: Apache-2.0
// coord on a replicated PostgreSQL (tests/postgres/standby.sh, fixture
// PostgresStandby: a primary and a streaming standby, synchronous with
// remote_apply), the store opened from a multi-host conninfo
// (host=A,B port=P,Q target_session_attrs=read-write): the primary killed
// with SIGKILL and the standby promoted, the store's next calls reach the
// new primary on their own, and nothing acknowledged is lost: the fence
// refuses the old token, the lease is still held, tokens grow, no segment
// ID again.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "coord/postgres/store.hpp"
#include "support/failover_checks.hpp"

namespace {

using namespace std::chrono_literals;

std::string conninfo() {
    const char* c = std::getenv("COORD_PG_STANDBY_CONNINFO");
    if (!c || !*c) throw std::runtime_error("COORD_PG_STANDBY_CONNINFO is not set: run through ctest (fixture PostgresStandby.start)");
    return c;
}
std::string script(const std::string& what) {
    return std::string(COORD_STANDBY_SCRIPT) + " " + what + " '" + COORD_STANDBY_DIR + "' " + COORD_STANDBY_PORT_MODE;
}
void run(const std::string& what) { ASSERT_EQ(std::system(script(what).c_str()), 0) << script(what); }

TEST(PostgresStandby, AFailoverToASynchronousStandbyIsFollowedAndLosesNothingAcknowledged) {
    run("start");  // a fresh pair (the fixture's, or one a test before promoted)
    coord::postgres::store s{conninfo()};
    ASSERT_TRUE(s.initialize({}));
    auto a = s.lease_acquire("n", "A", 1h);
    ASSERT_TRUE(a) << a.error().code.message();
    ASSERT_TRUE(s.fence_write("f", a->token, "by A"));
    auto ids = s.segment_allocate("ids", 10);
    ASSERT_TRUE(ids) << ids.error().message();
    run("kill-primary");

    // The pooled connection's server is gone: the next call connects again
    // through the conninfo's hosts, to the one that takes writes now.
    coord::test::expect_every_promise_after_failover(s, *a, *ids);
    ASSERT_TRUE(s.fence_write("f", a->token + 1, "after"));
    // A store opened now reaches the new primary too.
    coord::postgres::store later{conninfo()};
    auto again = later.fence_read("f");
    ASSERT_TRUE(again) << again.error().message();
    EXPECT_EQ(again->value, "after");
}

}  // namespace
