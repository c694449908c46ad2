// SPDX-License-Identifier: Apache-2.0
// file_store: durability across kill -9 and restarts, sharing between
// processes, and refusing damaged state files.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "coord/detail/binary.hpp"
#include "coord/fence.hpp"
#include "coord/lease.hpp"
#include "coord/storage/file.hpp"
#include "support/child_process.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using coord::test::scratch_dir;
using store_t = coord::basic_file_store<coord::manual_clock>;

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void spit(const std::filesystem::path& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << bytes;
}

TEST(FileStore, FenceAndLeaseTokensSurviveRestart) {
    scratch_dir dir;
    coord::manual_clock clock{coord::test::test_epoch()};
    coord::fence_token first = 0;
    {
        store_t s{dir / "state", clock};
        coord::basic_lease_manager leases{s};
        auto l = leases.acquire("n", "A", 10s);
        ASSERT_TRUE(l);
        first = l->token;
        ASSERT_TRUE(leases.release(*l));
        ASSERT_TRUE(s.fence_write("k", 77, "v77"));
    }
    store_t s{dir / "state", clock};
    coord::basic_lease_manager leases{s};
    auto l = leases.acquire("n", "B", 10s);
    ASSERT_TRUE(l);
    EXPECT_GT(l->token, first);
    EXPECT_EQ(s.fence_write("k", 76, "old").error(), coord::errc::stale_fence);
    EXPECT_EQ(s.fence_read("k")->value, "v77");
}

TEST(FileStore, LeaseHeldAcrossRestartUntilItExpires) {
    scratch_dir dir;
    coord::manual_clock clock{coord::test::test_epoch()};
    { ASSERT_TRUE(store_t(dir / "state", clock).lease_acquire("n", "A", 10s)); }
    store_t s{dir / "state", clock};
    EXPECT_EQ(s.lease_acquire("n", "B", 10s).error(), coord::errc::lease_held);
    clock.advance(10s);
    EXPECT_TRUE(s.lease_acquire("n", "B", 10s));
}

// A forked child writes increasing tokens and reports each acknowledged one
// through a pipe; the parent kills it with SIGKILL at a random moment. After
// every kill the store must open cleanly and its fence must be at least every
// token the child had acknowledged.
TEST(FileStore, AcknowledgedWritesSurviveSigkill) {
    scratch_dir dir;
    const auto path = dir / "state";
    std::mt19937 rng(12345);
    coord::fence_token max_acked = 0;
    for (int round = 0; round < 100; ++round) {
        coord::test::child_process child([&](int out) {
            coord::file_store s{path};
            auto token = s.fence_read("k")->fence;
            for (int i = 0; i < 100000; ++i) {
                ++token;
                if (!s.fence_write("k", token, "v" + std::to_string(token))) return 2;
                if (::write(out, &token, sizeof token) != sizeof token) return 3;
            }
            return 0;
        });
        const int acks_before_kill = std::uniform_int_distribution<int>(1, 6)(rng);
        coord::fence_token t;
        for (int acks = 0; acks < acks_before_kill && child.read(t); ++acks) max_acked = std::max(max_acked, t);
        // Land the kill at a random point of the next write.
        std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 400)(rng)));
        child.kill(SIGKILL);
        const int status = child.wait();
        ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status) << " in round " << round;
        while (child.read(t)) max_acked = std::max(max_acked, t);

        coord::file_store s{path};  // throws if the kill left a damaged file
        auto r = s.fence_read("k");
        ASSERT_TRUE(r) << r.error().message();
        ASSERT_GE(r->fence, max_acked) << "round " << round;
        ASSERT_EQ(r->value, "v" + std::to_string(r->fence));
    }
    EXPECT_GE(max_acked, 100u);
}

// Several processes share one file store: increments under the fence from
// four processes at once all land, and exactly one process wins each lease race.
TEST(FileStore, ProcessesShareOneStore) {
    scratch_dir dir;
    const auto path = dir / "state";
    constexpr int procs = 4, increments = 40;
    { coord::file_store init{path}; }
    std::vector<std::unique_ptr<coord::test::child_process>> children;
    for (int p = 0; p < procs; ++p)
        children.push_back(std::make_unique<coord::test::child_process>([&, p](int) {
            coord::file_store s{path};
            int wins = 0;
            for (int i = 0; i < increments; ++i) {
                auto r = s.fence_update("counter", 1, [](std::string& v) {
                    v = std::to_string((v.empty() ? 0 : std::stoi(v)) + 1);
                });
                if (!r) {
                    std::fprintf(stderr, "child %d: %s\n", p, r.error().code.message().c_str());
                    return 200;
                }
                if (s.lease_acquire("race" + std::to_string(i), "P" + std::to_string(p), 1h)) ++wins;
            }
            return wins;
        }));
    int total_wins = 0;
    for (auto& child : children) {
        const int status = child->wait();
        ASSERT_TRUE(WIFEXITED(status));
        ASSERT_NE(WEXITSTATUS(status), 200) << "a child's update failed";
        total_wins += WEXITSTATUS(status);
    }
    coord::file_store s{path};
    EXPECT_EQ(s.fence_read("counter")->value, std::to_string(procs * increments));
    EXPECT_EQ(total_wins, increments);
}

class DamagedStateFile : public ::testing::Test {
protected:
    void SetUp() override {
        store_t s{path, clock};
        ASSERT_TRUE(s.fence_write("k", 5, "five"));
        ASSERT_TRUE(s.lease_acquire("n", "A", 10s));
        good = slurp(path);
        ASSERT_GT(good.size(), 40u);
    }
    // Opening the damaged file throws a store_error naming the file and the
    // reason; the file is left exactly as it was.
    void expect_refused(const std::string& damaged, coord::errc why) {
        spit(path, damaged);
        try {
            store_t s{path, clock};
            ADD_FAILURE() << "a damaged state file was opened";
        } catch (const coord::store_error& e) {
            EXPECT_EQ(e.code(), why);
            EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
        }
        EXPECT_EQ(slurp(path), damaged);
    }
    scratch_dir dir;
    std::filesystem::path path = dir / "state";
    coord::manual_clock clock{coord::test::test_epoch()};
    std::string good;
};

TEST_F(DamagedStateFile, TruncatedAnywhereIsRefused) {
    for (std::size_t len : {std::size_t{0}, std::size_t{3}, std::size_t{39}, std::size_t{40}, good.size() / 2,
                            good.size() - 1})
        expect_refused(good.substr(0, len), coord::errc::state_truncated);
}

TEST_F(DamagedStateFile, EveryFlippedBitIsRefused) {
    for (std::size_t byte = 0; byte < good.size(); ++byte) {
        auto bad = good;
        bad[byte] = static_cast<char>(bad[byte] ^ (1 << (byte % 8)));
        spit(path, bad);
        EXPECT_THROW(store_t(path, clock), coord::store_error) << "flipped byte " << byte;
        EXPECT_EQ(slurp(path), bad);
    }
    expect_refused(good + "x", coord::errc::state_corrupt);
    expect_refused("not a coord state file at all, just some text that is long enough",
                   coord::errc::state_corrupt);
}

TEST_F(DamagedStateFile, NewerFormatVersionIsRefused) {
    auto bad = good;
    bad[8] = 2;  // version field (u32 at offset 8); re-seal the header checksum
    const auto crc = coord::detail::crc32c(bad.data(), 36);
    for (int i = 0; i < 4; ++i) bad[36 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
    expect_refused(bad, coord::errc::state_unsupported);
}

TEST_F(DamagedStateFile, DamageFoundByAnOpenStoreIsReportedAndNothingIsWritten) {
    store_t s{path, clock};
    auto bad = good;
    bad[bad.size() - 3] ^= 0x10;
    spit(path, bad);
    auto w = s.fence_write("k", 6, "six");
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error(), coord::errc::state_corrupt);
    EXPECT_EQ(s.lease_acquire("m", "B", 1s).error(), coord::errc::state_corrupt);
    EXPECT_EQ(s.fence_read("k").error(), coord::errc::state_corrupt);
    EXPECT_EQ(slurp(path), bad);
    spit(path, good);  // repaired by the operator
    EXPECT_TRUE(s.fence_write("k", 6, "six"));
}

TEST_F(DamagedStateFile, AFileThatGoesBackOrVanishesIsRefused) {
    store_t s{path, clock};
    ASSERT_TRUE(s.fence_write("k", 6, "six"));
    spit(path, good);  // an older copy put back
    EXPECT_EQ(s.fence_write("k", 7, "seven").error(), coord::errc::state_went_back);
    EXPECT_EQ(slurp(path), good);
    std::filesystem::remove(path);
    EXPECT_EQ(s.fence_read("k").error(), coord::errc::state_went_back);
    EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(FileStore, MissingDirectoryIsAClearError) {
    scratch_dir dir;
    try {
        coord::file_store s{dir / "no" / "such" / "dir" / "state"};
        ADD_FAILURE() << "opened a store in a missing directory";
    } catch (const coord::store_error& e) {
        EXPECT_NE(std::string(e.what()).find("no/such/dir"), std::string::npos) << e.what();
    }
}

}  // namespace
