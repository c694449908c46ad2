// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <string>
#include <system_error>

#include "coord/error.hpp"
#include "coord/result.hpp"

namespace {

coord::result<int> half(int x) {
    if (x % 2) return coord::unexpected(make_error_code(coord::errc::stale_fence));
    return x / 2;
}

TEST(Result, HoldsValueOrError) {
    auto ok = half(8);
    ASSERT_TRUE(ok);
    EXPECT_TRUE(ok.has_value());
    EXPECT_EQ(*ok, 4);
    EXPECT_EQ(ok.value(), 4);
    auto bad = half(3);
    EXPECT_FALSE(bad);
    EXPECT_EQ(bad.error(), coord::errc::stale_fence);
    EXPECT_THROW((void)bad.value(), coord::bad_result_access);
    EXPECT_EQ(bad.value_or(-1), -1);
}

TEST(Result, VoidFormAndCustomErrorType) {
    coord::result<void> ok;
    EXPECT_TRUE(ok);
    EXPECT_NO_THROW(ok.value());
    coord::result<void, std::string> bad = coord::unexpected(std::string("why"));
    EXPECT_FALSE(bad);
    EXPECT_EQ(bad.error(), "why");
    EXPECT_THROW(bad.value(), coord::bad_result_access);
    coord::result<std::string> s = std::string("abc");
    EXPECT_EQ(s->size(), 3u);
}

TEST(Errc, HasItsOwnCategoryAndMessages) {
    std::error_code ec = coord::errc::stale_fence;
    EXPECT_EQ(std::string(ec.category().name()), "coord");
    EXPECT_EQ(ec.message(), "stale fence");
    EXPECT_EQ(static_cast<int>(coord::errc::stale_fence), 1);
    EXPECT_EQ(std::error_code(coord::errc::clock_rollback).message(), "clock rollback");
    EXPECT_NE(ec, std::error_code(coord::errc::lease_held));
    EXPECT_NE(ec, std::make_error_code(std::errc::io_error));
}

}  // namespace
