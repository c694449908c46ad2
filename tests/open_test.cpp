// SPDX-License-Identifier: Apache-2.0
// coord/open.hpp with no engine linked: file: URLs open a file store, every
// other URL is bad_store_url, with its message escaped and secrets left out.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <type_traits>
#include <unistd.h>

#include "coord/aliases.hpp"
#include "coord/open.hpp"

namespace {

using namespace std::chrono_literals;

std::filesystem::path temp_state(const char* name) {
    return std::filesystem::temp_directory_path() / ("coord-open-test-" + std::to_string(::getpid()) + "-" + name);
}

// The message bad_store_url carries for `url` ("" when it opened).
std::string refusal(const std::string& url) {
    try {
        coord::with_store(url, [](auto&) { return 0; });
    } catch (const coord::bad_store_url& e) {
        return e.what();
    }
    return "";
}

// The embedded stores' everyday names (coord/aliases.hpp); the short names
// are the memory store's.
static_assert(std::is_same_v<coord::memory::lease_manager, coord::basic_lease_manager<coord::memory_store>>);
static_assert(std::is_same_v<coord::lease_manager, coord::memory::lease_manager>);
static_assert(std::is_same_v<coord::snowflake, coord::memory::snowflake>);
static_assert(std::is_same_v<coord::file::job_ledger, coord::basic_job_ledger<coord::file_store>>);
static_assert(std::is_same_v<coord::file::snowflake,
                             coord::basic_snowflake<coord::default_layout, coord::system_clock, coord::file_store>>);

TEST(OpenStore, AFileUrlOpensAFileStoreAndItsLeasesWork) {
    const auto path = temp_state("lease.state");
    const auto token = coord::with_store("file:" + path.string(), [](auto& store) {
        static_assert(std::is_same_v<std::remove_cvref_t<decltype(store)>, coord::file_store>);
        coord::file::lease_manager leases{store};
        auto l = leases.acquire("job", "a", 10s);
        return l ? l->token : 0;
    });
    EXPECT_GT(token, 0u);
    // The same URL again: the same state (the next grant's token is larger).
    const auto again = coord::with_store(
        "file:" + path.string(),
        [](auto& store) {
            coord::basic_lease_manager leases{store};
            auto l = leases.acquire("other", "b", 10s);
            return l ? l->token : 0;
        },
        coord::open_options{.timeout = 500ms});
    EXPECT_GT(again, 0u);
    std::filesystem::remove(path);
    std::filesystem::remove(path.string() + ".lock");
}

TEST(OpenStore, AUrlNamingNoEngineIsBadInputNamingTheFormsKnown) {
    for (const char* url : {"", "file:", "memory", "mysql://h:1/db", "FILE:/tmp/x", "sqlite:"}) {
        const auto why = refusal(url);
        EXPECT_NE(why.find("a store URL is one of file:PATH"), std::string::npos) << url << ": " << why;
    }
    // A bad_store_url is a std::invalid_argument (bad input, exit 2 in the tools).
    EXPECT_THROW(coord::with_store("nope:", [](auto&) { return 0; }), std::invalid_argument);
}

TEST(OpenStore, TheMessageShowsTheUrlEscapedAndNoSecret) {
    EXPECT_NE(refusal("x\ntoken=999").find("x\\ntoken=999"), std::string::npos);
    const auto with_user = refusal("mysql://admin:hunter2@db:1/x");
    EXPECT_EQ(with_user.find("hunter2"), std::string::npos) << with_user;
    EXPECT_NE(with_user.find("mysql://(not shown)@db:1/x"), std::string::npos) << with_user;
    const auto conninfo = refusal("pg:host=db password=hunter2");
    EXPECT_EQ(conninfo.find("hunter2"), std::string::npos) << conninfo;
}

}  // namespace

namespace {

// Options ride in the URL after '?': taken before anything is opened, so a
// refused one leaves no file behind.
TEST(OpenStore, UrlOptionsAreTakenAndABadOneIsBadInputThatOpensNothing) {
    const auto path = temp_state("options.state");
    auto store = coord::open_store<coord::file_store>("file:" + path.string() + "?fsync=off");
    coord::file::lease_manager leases{store};
    EXPECT_TRUE(leases.acquire("job", "a", 10s));

    const auto other = temp_state("refused.state");
    const auto url = "file:" + other.string();
    EXPECT_NE(refusal(url + "?fsync=maybe").find("fsync is on or off"), std::string::npos);
    EXPECT_NE(refusal(url + "?colour=red").find("unknown option 'colour' (known: fsync)"), std::string::npos);
    EXPECT_NE(refusal(url + "?fsync").find("option 'fsync' is not NAME=VALUE"), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(other));
    // open_store takes only its own engine's form.
    try {
        (void)coord::open_store<coord::file_store>("redis://127.0.0.1:1");
        ADD_FAILURE() << "a redis:// URL opened a file store";
    } catch (const coord::bad_store_url& e) {
        EXPECT_NE(std::string(e.what()).find("this store's URL is file:PATH"), std::string::npos) << e.what();
    }
    std::filesystem::remove(path);
    std::filesystem::remove(path.string() + ".lock");
}

}  // namespace
