// SPDX-License-Identifier: Apache-2.0
// The layers: every primitive header compiles without any store header and
// pulls none in, and a primitive works on a store of the user's own.
#include "coord/fence.hpp"
#include "coord/job_ledger.hpp"
#include "coord/lease.hpp"
#include "coord/reservation.hpp"
#include "coord/rules/fence.hpp"
#include "coord/rules/lease.hpp"
#include "coord/rules/ledger.hpp"
#include "coord/rules/reservation.hpp"
#include "coord/rules/revocation.hpp"
#include "coord/rules/segment.hpp"
#include "coord/rules/session.hpp"
#include "coord/segment.hpp"
#include "coord/session.hpp"
#include "coord/snowflake.hpp"
#include "coord/uuid7.hpp"

#ifdef COORD_STORE_HEADER_INCLUDED
#error "a primitive or rule header pulled in a store header"
#endif

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace {

// A user's own fence store, built on the published rule.
class my_fence_store {
public:
    coord::result<void, coord::write_error> fence_write(std::string_view key, coord::fence_token token,
                                                        std::string_view value) {
        return coord::detail::fence_rule::apply(records_[std::string(key)], token, std::nullopt,
                                                [&](std::string& v) { v.assign(value); });
    }
    coord::result<void, coord::write_error> fence_write(std::string_view key, coord::fence_token token,
                                                        std::uint64_t seq, std::string_view value) {
        return coord::detail::fence_rule::apply(records_[std::string(key)], token, seq,
                                                [&](std::string& v) { v.assign(value); });
    }
    coord::result<coord::fenced_value> fence_read(std::string_view key) {
        auto it = records_.find(std::string(key));
        return coord::detail::fence_rule::view(it == records_.end() ? nullptr : &it->second);
    }

private:
    std::map<std::string, coord::detail::fence_rule::record> records_;
};
static_assert(coord::fence_store<my_fence_store>);

TEST(Layering, APrimitiveRunsOnAStoreOfYourOwnWithoutAnyCoordStore) {
    my_fence_store store;
    coord::basic_keyed_fenced_resource res{store};
    ASSERT_TRUE(res.write("k", 5, "five"));
    EXPECT_EQ(res.write("k", 4, "four").error(), coord::errc::stale_fence);
    EXPECT_EQ(res.read("k")->value, "five");
}

}  // namespace
