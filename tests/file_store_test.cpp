// SPDX-License-Identifier: Apache-2.0
// file_store: durability across kill -9 and restarts, sharing between
// processes, and refusing damaged state files.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "coord/detail/binary.hpp"
#include "coord/fence.hpp"
#include "coord/lease.hpp"
#include "coord/storage/file.hpp"
#include "support/child_process.hpp"
#include "support/lease_wait_process.hpp"
#include "support/failover_checks.hpp"
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
                std::string value = "v";  // (not "v" + to_string: g++ 12's -Wrestrict false positive)
                value += std::to_string(token);
                if (!s.fence_write("k", token, value)) return 2;
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
                // Names built with append (g++ 12 warns falsely on "x" + std::to_string(i)).
                std::string name = "race", owner = "P";
                name.append(std::to_string(i));
                owner.append(std::to_string(p));
                if (s.lease_acquire(name, owner, 1h)) ++wins;
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

// Every spelling and link of one state file is one store: one state, one
// lock. Two holders never get one token; a stale write is refused whichever
// spelling it comes through.
TEST(FileStoreIdentity, EverySpellingAndLinkIsOneStore) {
    namespace fs = std::filesystem;
    scratch_dir dir;
    coord::manual_clock clock{coord::test::test_epoch()};
    fs::create_directories(dir / "sub");
    fs::create_symlink(dir / "state", dir / "link");          // dangling until the store exists
    fs::create_symlink("../link", dir / "sub" / "chain");      // relative, through another link
    fs::create_symlink(dir.path(), dir / "dirlink");             // a link to the directory
    const std::vector<fs::path> spellings{
        dir / "state", dir / "link", dir / "sub" / "chain", dir / "dirlink" / "state",
        fs::path(dir.path().string() + "/./state"), fs::path(dir.path().string() + "//state"),
        dir / "sub" / ".." / "state", dir / "dirlink" / "sub" / ".." / "link"};
    std::vector<std::unique_ptr<store_t>> stores;
    for (const auto& p : spellings) stores.push_back(std::make_unique<store_t>(p, clock));
    for (const auto& s : stores) EXPECT_EQ(s->path(), stores[0]->path());
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir / "state")) ||
                !fs::exists(fs::symlink_status(dir / "state")));
    coord::fence_token last = 0;
    for (std::size_t i = 0; i < stores.size(); ++i) {
        coord::basic_lease_manager leases{*stores[i]};
        auto l = leases.acquire("job", "owner" + std::to_string(i), 10s);
        ASSERT_TRUE(l) << spellings[i];
        EXPECT_GT(l->token, last) << spellings[i];
        last = l->token;
        for (std::size_t j = 0; j < stores.size(); ++j) {
            coord::basic_lease_manager other{*stores[j]};
            EXPECT_EQ(other.acquire("job", "intruder", 10s).error(), coord::errc::lease_held)
                << spellings[i] << " then " << spellings[j];
        }
        ASSERT_TRUE(leases.release(*l));
        ASSERT_TRUE(stores[i]->fence_write("k", 10 + i, "v"));
        for (const auto& s : stores) EXPECT_EQ(s->fence_write("k", 9 + i, "stale").error(), coord::errc::stale_fence);
    }
    // The symbolic link is still a link: writes replaced the file it names.
    EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir / "link")));
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir / "state")));
    EXPECT_FALSE(fs::exists(dir / "link.lock"));
}

// A hard-linked state file cannot be shared safely (a write replaces one
// name; the other keeps the old state): refused through either name, and by
// an open store at its next call, which writes nothing.
TEST(FileStoreIdentity, HardLinkedStateFileIsRefused) {
    scratch_dir dir;
    coord::manual_clock clock{coord::test::test_epoch()};
    store_t open_store{dir / "state", clock};
    ASSERT_TRUE(open_store.fence_write("k", 1, "one"));
    std::filesystem::create_hard_link(dir / "state", dir / "twin");
    const auto before = slurp(dir / "state");
    for (const char* name : {"state", "twin"}) {
        try {
            store_t s{dir / name, clock};
            ADD_FAILURE() << "opened a hard-linked state file through " << name;
        } catch (const coord::store_error& e) {
            EXPECT_EQ(e.code(), coord::errc::state_hard_linked) << e.what();
        }
    }
    EXPECT_EQ(open_store.fence_write("k", 2, "two").error(), coord::errc::state_hard_linked);
    EXPECT_EQ(slurp(dir / "state"), before);
    std::filesystem::remove(dir / "twin");
    EXPECT_TRUE(open_store.fence_write("k", 2, "two"));
}

// A path that is a FIFO, a device, a directory or a socket is refused at
// open with a clear error, at once (a FIFO does not block, /dev/zero is not
// read); so is a FIFO where the lock file belongs.
TEST(FileStoreIdentity, NotARegularFileIsRefusedWithoutBlocking) {
    scratch_dir dir;
    coord::manual_clock clock{coord::test::test_epoch()};
    ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
    std::filesystem::create_directories(dir / "adir");
    const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(sock, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const auto sock_path = (dir / "sock").string();
    ASSERT_LT(sock_path.size(), sizeof addr.sun_path);
    std::memcpy(addr.sun_path, sock_path.c_str(), sock_path.size() + 1);
    ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    for (const auto& p : {dir / "fifo", std::filesystem::path("/dev/zero"), std::filesystem::path("/dev/null"),
                          dir / "adir", dir / "sock", dir / "adir" / "..", dir / "adir" / ""}) {
        try {
            store_t s{p, clock};
            ADD_FAILURE() << "opened " << p;
        } catch (const coord::store_error& e) {
            EXPECT_EQ(e.code(), coord::errc::state_not_regular) << p << ": " << e.what();
        }
    }
    ::close(sock);
    ASSERT_EQ(::mkfifo((dir / "s2.lock").c_str(), 0600), 0);
    EXPECT_THROW(store_t(dir / "s2", clock), coord::store_error);
    // A FIFO planted where the next write's temporary file goes: an error, no hang.
    store_t s3{dir / "s3", clock};
    ASSERT_EQ(::mkfifo((dir / "s3.tmp").c_str(), 0600), 0);
    EXPECT_EQ(s3.fence_write("k", 1, "v").error(), coord::errc::state_not_regular);
}

// A state file deleted, or replaced by an older copy, between two processes
// is caught by the next one to open it (the lock file records the newest
// generation), as by a process that has it open. Deleting both files is a
// new store: that cannot be told apart, and the README says so.
TEST(FileStoreIdentity, StateThatWentBackBetweenProcessesIsRefused) {
    scratch_dir dir;
    coord::manual_clock clock{coord::test::test_epoch()};
    const auto path = dir / "state";
    std::string old_copy;
    coord::fence_token first = 0;
    coord::fence_token second = 0;
    {
        store_t s{path, clock};
        coord::basic_lease_manager leases{s};
        auto l = leases.acquire("n", "A", 1s);
        ASSERT_TRUE(l && leases.release(*l));
        first = l->token;
        old_copy = slurp(path);
        l = leases.acquire("n", "A", 1s);
        ASSERT_TRUE(l && leases.release(*l));
        second = l->token;
        EXPECT_EQ(second, first + 1);  // the clock stood still: the counter
    }
    const auto newest = slurp(path);
    // It opens (so that it can be recovered), and refuses every operation.
    auto refused = [&](const char* what) {
        store_t s{path, clock};
        coord::basic_lease_manager leases{s};
        auto l = leases.acquire("n", "B", 1s);
        ASSERT_FALSE(l) << what << ": granted token " << l->token << " after " << second;
        EXPECT_EQ(l.error(), coord::errc::state_went_back) << what;
        EXPECT_EQ(s.fence_read("k").error(), coord::errc::state_went_back) << what;
        const auto why = s.segment_allocate("ids", 1).error().message();
        EXPECT_NE(why.find("store init --store file:"), std::string::npos) << what << ": " << why;
    };
    spit(path, old_copy);
    refused("an older copy put back");
    EXPECT_EQ(slurp(path), old_copy);
    std::filesystem::remove(path);
    refused("the state file deleted");
    EXPECT_FALSE(std::filesystem::exists(path));
    spit(path, newest);
    {
        store_t s{path, clock};
        coord::basic_lease_manager leases{s};
        EXPECT_EQ(leases.acquire("n", "B", 1s)->token, second + 1);
    }
    // Both files gone: a new store (not detectable). Its tokens still do not
    // go back: a grant's token is at least the clock's microseconds, and the
    // clock went on.
    std::filesystem::remove(path);
    std::filesystem::remove(dir / "state.lock");
    clock.advance(1s);
    store_t fresh{path, clock};
    coord::basic_lease_manager leases{fresh};
    EXPECT_GT(leases.acquire("n", "C", 1s)->token, second + 1);
}

// The recovery of a state file put back from an older copy, or deleted:
// initialize(floors, true), which the refusal names, hands out no lease
// token, fence acceptance, segment ID or done slot twice, and the store
// opens again for every process.
TEST(FileStoreIdentity, TheRecoveryOfAStoreThatWentBackHandsNothingOutTwice) {
    scratch_dir dir;
    coord::manual_clock clock{coord::test::test_epoch()};
    const auto path = dir / "state";
    std::string old_copy;
    coord::fence_token token = 0;
    coord::segment_range ids{};
    {
        store_t s{path, clock};
        ASSERT_TRUE(s.fence_write("old", 1, "in the copy"));
        ASSERT_TRUE(s.segment_allocate("ids", 100));
        old_copy = slurp(path);
        // After the copy: a lease, fenced writes (a key the copy has, one it
        // has not), IDs, a done slot.
        auto a = s.lease_acquire("n", "A", 1h);
        ASSERT_TRUE(a);
        token = a->token;
        ASSERT_TRUE(s.fence_write("old", token, "by A"));
        ASSERT_TRUE(s.fence_write("new", token, "by A"));
        ids = *s.segment_allocate("ids", 100);
        auto c = s.ledger_claim(coord::test::old_slot_claim("job@1"));
        ASSERT_TRUE(c && c->kind == coord::claim_outcome::granted);
        ASSERT_TRUE(s.ledger_complete("job@1", c->fence, "done", 24h));
    }
    for (const bool deleted : {false, true}) {
        SCOPED_TRACE(deleted ? "the state file deleted" : "an older copy put back");
        if (deleted) std::filesystem::remove(path);
        else spit(path, old_copy);
        clock.advance(1s);  // the recovery comes after the grants it covers
        store_t s{path, clock};
        EXPECT_EQ(s.fence_write("old", 2, "late").error(), coord::errc::state_went_back);
        coord::initial_floors floors;
        floors.segment = ids.end - 1;
        floors.fence_now = true;
        floors.ledger_now = true;
        auto init = s.initialize(floors);
        ASSERT_FALSE(init);
        EXPECT_EQ(init.error(), coord::errc::store_already_initialized) << init.error().message();
        auto g = s.initialize(floors, /*replace=*/true);
        ASSERT_TRUE(g) << g.error().message();
        for (const char* key : {"old", "new"}) {
            auto stale = s.fence_write(key, token, "late");
            ASSERT_FALSE(stale) << key << ": A's token " << token << " accepted after the recovery";
            EXPECT_EQ(stale.error(), coord::errc::stale_fence);
        }
        coord::test::expect_ledger_fences_above_the_fence_floor(
            s, token, std::chrono::duration_cast<std::chrono::milliseconds>((clock.now() + 1h).time_since_epoch()));
        auto b = s.lease_acquire("n", "B", 1h);
        ASSERT_TRUE(b);
        EXPECT_GT(b->token, token);
        ASSERT_TRUE(s.fence_write("new", b->token, "by B"));
        auto more = s.segment_allocate("ids", 100);
        ASSERT_TRUE(more);
        EXPECT_GE(more->begin, ids.end);
        auto other = s.segment_allocate("a tag the copy never had", 1);
        ASSERT_TRUE(other);
        EXPECT_GE(other->begin, ids.end);
        auto done = s.ledger_claim(coord::test::old_slot_claim("job@1"));
        ASSERT_TRUE(done);
        EXPECT_EQ(done->kind, coord::claim_outcome::expired);  // not run again
        ASSERT_TRUE(s.lease_release("n", "B", b->token));
        token = b->token;
        // Another process opens the recovered store, floors and all.
        store_t again{path, clock};
        EXPECT_EQ(again.fence_write("never written", 5, "x").error(), coord::errc::stale_fence);
        EXPECT_GE(again.segment_allocate("another tag", 1)->begin, ids.end);
        ids = *again.segment_allocate("ids", 1);  // the largest ID handed out: ids.end - 1
    }
}

// A lock file removed while a process waited on it never yields an
// exclusive step: the waiter must lock the file now at the path, which
// another process holds, and wait for it.
TEST(FileStoreIdentity, RemovedLockFileNeverYieldsAnExclusiveStep) {
    scratch_dir dir;
    coord::manual_clock clock{coord::test::test_epoch()};
    const auto path = dir / "state";
    store_t a{path, clock, {.lock_timeout = std::chrono::milliseconds{300}}};
    ASSERT_TRUE(a.fence_write("k", 1, "first"));
    const auto lock = path.string() + ".lock";
    ASSERT_EQ(::unlink(lock.c_str()), 0);  // removed by an operator
    const int other = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);  // another process made a new one
    ASSERT_GE(other, 0);
    ASSERT_EQ(::flock(other, LOCK_EX), 0);  // and is inside its step
    // The store notices that its lock file is no longer the one at the path
    // and waits on the new one: it never writes while the other holds it,
    // and gives up at its lock timeout with nothing done.
    auto during = a.fence_write("k", 2, "second");
    ASSERT_FALSE(during) << "wrote while another process held the lock file at the path";
    EXPECT_EQ(during.error(), coord::errc::lock_timeout) << during.error().code.message();
    EXPECT_EQ(during.error().code, coord::condition::unavailable);
    ::flock(other, LOCK_UN);
    ::close(other);
    EXPECT_EQ(a.fence_read("k")->value, "first");
    ASSERT_TRUE(a.fence_write("k", 2, "second"));
    EXPECT_EQ(a.fence_read("k")->value, "second");
}

// A clock that runs a hook (once) the next time it is read: a file store
// reads its clock between taking its lock and committing, so the hook runs
// inside the operation, where a slow process can be paused.
struct hook_clock {
    using duration = coord::manual_clock::duration;
    using rep = duration::rep;
    using period = duration::period;
    using time_point = std::chrono::time_point<hook_clock, duration>;
    static constexpr bool is_unix_epoch = true;
    coord::manual_clock base{coord::test::test_epoch()};
    std::shared_ptr<std::function<void()>> hook = std::make_shared<std::function<void()>>();
    time_point now() const {
        if (*hook) std::exchange(*hook, nullptr)();
        return time_point{base.now().time_since_epoch()};
    }
    void sleep_until(time_point) const {}
};

// A lock file removed while a process holds it (between its lock and its
// commit: a temp-file cleaner) never lets two processes both be told they
// hold one name: a second process locks a new lock file and grants the
// name; the first one's commit finds the state changed under it, writes
// nothing, and runs again on the new state.
TEST(FileStoreIdentity, ALockFileRemovedBeforeTheCommitNeverGivesTwoGrants) {
    scratch_dir dir;
    const auto path = dir / "state";
    hook_clock clock;
    coord::basic_file_store<hook_clock> a{path, clock};
    ASSERT_TRUE(a.fence_write("warm", 1, "x"));
    std::optional<coord::basic_file_store<hook_clock>> b;
    std::optional<coord::result<coord::lease, coord::lease_error>> second;
    *clock.hook = [&] {
        ASSERT_EQ(::unlink((path.string() + ".lock").c_str()), 0);  // a cleaner, while `a` holds it
        b.emplace(path, clock);                                      // another process starts meanwhile
        second = b->lease_acquire("n", "B", 10s);
    };
    auto first = a.lease_acquire("n", "A", 10s);
    ASSERT_TRUE(second.has_value()) << "the hook did not run inside the operation";
    ASSERT_TRUE(*second) << second->error().code.message();
    EXPECT_EQ((*second)->owner, "B");
    ASSERT_FALSE(first) << "both processes were told they hold the name, tokens " << first->token << " and "
                        << (*second)->token;
    EXPECT_EQ(first.error(), coord::errc::lease_held) << first.error().code.message();
    EXPECT_EQ(first.error().holder, "B");
    auto held = b->lease_read("n");
    ASSERT_TRUE(held && *held);
    EXPECT_EQ((*held)->owner, "B");
}

// A lock held by a paused process bounds every operation by the lock
// timeout; the store serves again once it is free.
TEST(FileStoreIdentity, AHeldLockGivesUpAtTheLockTimeoutAndOutOfRangeTimeoutsAreRefused) {
    scratch_dir dir;
    coord::manual_clock clock{coord::test::test_epoch()};
    const auto path = dir / "state";
    store_t a{path, clock, {.lock_timeout = std::chrono::milliseconds{100}}};
    ASSERT_TRUE(a.fence_write("k", 1, "first"));
    const int other = ::open((path.string() + ".lock").c_str(), O_RDWR);
    ASSERT_GE(other, 0);
    ASSERT_EQ(::flock(other, LOCK_EX), 0);
    auto r = a.fence_read("k");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), coord::errc::lock_timeout);
    auto l = a.lease_acquire("n", "A", std::chrono::seconds{5});
    ASSERT_FALSE(l);
    EXPECT_EQ(l.error().code, coord::errc::lock_timeout);
    ::flock(other, LOCK_UN);
    ::close(other);
    EXPECT_TRUE(a.fence_read("k"));
    EXPECT_THROW((store_t{path, clock, {.lock_timeout = std::chrono::milliseconds{0}}}), std::invalid_argument);
    EXPECT_THROW((store_t{path, clock, {.lock_timeout = std::chrono::hours{25}}}), std::invalid_argument);
}

// The state file keeps its mode (and, as root, its owner) across rewrites.
TEST(FileStoreIdentity, RewritesKeepModeAndOwner) {
    scratch_dir dir;
    coord::manual_clock clock{coord::test::test_epoch()};
    const auto path = dir / "state";
    store_t s{path, clock};
    ASSERT_TRUE(s.fence_write("k", 1, "v"));
    ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
    const bool root = ::geteuid() == 0;
    if (root) {
        ASSERT_EQ(::chown(path.c_str(), 12345, 23456), 0);
    }
    ASSERT_TRUE(s.fence_write("k", 2, "w"));
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0640u);
    if (root) {
        EXPECT_EQ(st.st_uid, 12345u);
        EXPECT_EQ(st.st_gid, 23456u);
    }
}

// A state over the format's limits is refused before anything is written.
TEST(FileStoreIdentity, OverTheFormatsLimitsIsRefusedBeforeWriting) {
    scratch_dir dir;
    coord::manual_clock clock{coord::test::test_epoch()};
    const auto path = dir / "state";
    store_t s{path, clock};
    ASSERT_TRUE(s.fence_write("k", 1, "small"));
    const auto before = slurp(path);
    const std::string huge(coord::detail::file_format::max_string + 1, 'x');
    EXPECT_EQ(s.fence_write("k", 2, huge).error(), coord::errc::state_too_large);
    EXPECT_EQ(s.fence_write("big", 2, huge).error(), coord::errc::state_too_large);
    EXPECT_EQ(slurp(path), before);
    EXPECT_FALSE(std::filesystem::exists(dir / "state.tmp") && std::filesystem::file_size(dir / "state.tmp") > 0);
    EXPECT_EQ(s.fence_read("k")->value, "small");
    EXPECT_TRUE(s.fence_write("k", 2, std::string(1 << 20, 'y')));
    // A header that claims more than the limit is refused without reading on.
    auto bad = slurp(path);
    const std::uint64_t len = coord::detail::file_format::max_file;
    for (int i = 0; i < 8; ++i) bad[24 + i] = static_cast<char>((len >> (8 * i)) & 0xFF);
    const auto crc = coord::detail::crc32c(bad.data(), 36);
    for (int i = 0; i < 4; ++i) bad[36 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
    spit(path, bad);
    try {
        store_t t{path, clock};
        ADD_FAILURE() << "opened a state that claims over 1 GiB";
    } catch (const coord::store_error& e) {
        EXPECT_EQ(e.code(), coord::errc::state_too_large) << e.what();
    }
}

}  // namespace

namespace {

// The waiting acquire across processes on the file store (polled).
TEST(FileStoreWait, AKilledWaiterDelaysTheNextNoLongerThanItsPlace) {
    coord::test::scratch_dir dir;
    coord::test::killed_waiter_delays_the_next_no_longer_than_its_place(
        [&] { return std::make_unique<coord::file_store>(dir / "state"); });
}

TEST(FileStoreWait, AStoppedHolderLosesToTheFirstWaiterAndItsLateWriteIsRefused) {
    coord::test::scratch_dir dir;
    coord::test::stopped_holder_loses_to_the_first_waiter([&] { return std::make_unique<coord::file_store>(dir / "state"); });
}

}  // namespace
