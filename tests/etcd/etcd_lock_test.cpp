// SPDX-License-Identifier: Apache-2.0
// etcd's lock recipe, as coord speaks it: coord's lease NAME is the lock
// `etcdctl lock PREFIX/lock/NAME` takes (Debian's etcdctl, the concurrency
// package's Mutex), and the two exclude each other both ways; one release
// wakes one waiter whatever the number of waiters (counted on the server:
// etcd's events sent, from its /metrics).
#include <gtest/gtest.h>

#include <curl/curl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coord/lease.hpp"
#include "etcd/etcd_support.hpp"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using coord::test::etcd_fresh_prefix;
using coord::test::etcd_options;
using coord::test::etcd_url;
using steady = std::chrono::steady_clock;

std::string endpoint() {
    std::string e = "http://";
    e += etcd_url().substr(std::string("etcd://").size());
    return e;
}

// `etcdctl lock NAME` in a process of its own: it prints the key it holds
// once it holds the lock, and releases it on SIGTERM.
class etcdctl_lock {
public:
    explicit etcdctl_lock(const std::string& name) {
        int out[2];
        if (::pipe(out) != 0) throw std::runtime_error("pipe");
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_addclose(&fa, out[0]);
        const std::string ep = endpoint();
        std::vector<std::string> args{"etcdctl", "--endpoints", ep, "lock", name};
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        std::vector<std::string> env_text{"ETCDCTL_API=3", "PATH=/usr/local/bin:/usr/bin:/bin"};
        std::vector<char*> env;
        for (auto& e : env_text) env.push_back(e.data());
        env.push_back(nullptr);
        const int rc = posix_spawnp(&pid_, "etcdctl", &fa, nullptr, argv.data(), env.data());
        posix_spawn_file_actions_destroy(&fa);
        ::close(out[1]);
        fd_ = out[0];
        if (rc != 0) throw std::runtime_error("etcdctl could not be started (etcd-client: tests/etcd/etcd.sh install)");
    }
    ~etcdctl_lock() {
        release();
        ::close(fd_);
    }
    // The key etcdctl printed once it holds the lock ("" when it printed
    // nothing within `within`: it still waits).
    std::string held_key(std::chrono::milliseconds within) {
        const auto until = steady::now() + within;
        for (;;) {
            if (const auto nl = printed_.find('\n'); nl != std::string::npos) return printed_.substr(0, nl);
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - steady::now());
            pollfd p{fd_, POLLIN, 0};
            if (left.count() < 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
            char buf[256];
            const auto n = ::read(fd_, buf, sizeof buf);
            if (n <= 0) return "";
            printed_.append(buf, static_cast<std::size_t>(n));
        }
    }
    // SIGTERM: etcdctl unlocks (deletes its key) and exits.
    int release() {
        if (pid_ <= 0) return status_;
        ::kill(pid_, SIGTERM);
        ::waitpid(pid_, &status_, 0);
        pid_ = -1;
        return status_;
    }

private:
    pid_t pid_ = -1;
    int fd_ = -1;
    int status_ = 0;
    std::string printed_;
};

// Spins (no sleep) until `pred`, for at most 30 s.
template <class Pred>
bool eventually(Pred pred) {
    const auto give_up = steady::now() + 30s;
    while (!pred()) {
        if (steady::now() > give_up) return false;
        std::this_thread::yield();
    }
    return true;
}

// A number etcd's /metrics shows (a counter or gauge without labels).
std::int64_t metric(const std::string& name) {
    CURL* h = curl_easy_init();
    std::string body;
    const std::string url = endpoint() + "/metrics";
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, +[](char* p, std::size_t s, std::size_t n, void* out) {
        static_cast<std::string*>(out)->append(p, s * n);
        return s * n;
    });
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    const CURLcode rc = curl_easy_perform(h);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK) throw std::runtime_error("etcd /metrics: " + std::string(curl_easy_strerror(rc)));
    std::string needle = "\n";
    needle += name;
    needle += ' ';
    const auto at = body.find(needle);
    if (at == std::string::npos) throw std::runtime_error("etcd /metrics has no " + name);
    return std::stoll(body.substr(at + name.size() + 2));
}

// etcdctl holds first: coord's acquire is refused with etcdctl's key as the
// holder, coord's waiting acquire waits until etcdctl releases, then holds
// with a larger token.
TEST(EtcdLock, CoordWaitsForEtcdctlLock) {
    const auto opts = etcd_options(etcd_fresh_prefix());
    coord::etcd::store store{etcd_url(), coord::etcd::server_clock{}, opts};
    coord::test::etcd_init(store);
    coord::etcd::lease_manager leases{store};
    const std::string lock = opts.prefix + "/lock/shared";
    etcdctl_lock theirs(lock);
    const std::string key = theirs.held_key(30s);
    ASSERT_EQ(key.rfind(lock + "/", 0), 0u) << "etcdctl did not take " << lock << ": '" << key << "'";
    auto read = leases.holder("shared");
    ASSERT_TRUE(read && *read) << "coord does not see etcdctl's holder";
    EXPECT_EQ((*read)->owner, key);  // etcdctl writes no value: named by its key
    auto refused = leases.acquire("shared", "coord", 30s);
    ASSERT_FALSE(refused) << "coord took a lock etcdctl holds";
    EXPECT_EQ(refused.error(), coord::errc::lease_held);
    EXPECT_EQ(refused.error().holder, key);

    std::atomic<bool> granted{false};
    coord::result<coord::lease, coord::lease_error> mine = coord::unexpected(coord::lease_error{});
    std::thread waiter([&] {
        mine = leases.acquire("shared", "coord", 30s, steady::now() + 60s);
        granted = true;
    });
    ASSERT_TRUE(eventually([&] { return leases.waiters("shared")->size() == 1; }));
    EXPECT_FALSE(granted.load()) << "coord's waiting acquire did not wait for etcdctl";
    EXPECT_EQ(theirs.release(), 0);
    waiter.join();
    ASSERT_TRUE(mine) << mine.error().code.message();
    EXPECT_GT(mine->token, (*read)->token);
    EXPECT_TRUE(leases.release(*mine));
}

// coord holds first: `etcdctl lock` waits behind it, and takes the lock only
// once coord releases, with a key created after coord's.
TEST(EtcdLock, EtcdctlLockWaitsForCoord) {
    const auto opts = etcd_options(etcd_fresh_prefix());
    coord::etcd::store store{etcd_url(), coord::etcd::server_clock{}, opts};
    coord::test::etcd_init(store);
    coord::etcd::lease_manager leases{store};
    auto held = leases.acquire("shared", "coord", 30s);
    ASSERT_TRUE(held) << held.error().code.message();
    etcdctl_lock theirs(opts.prefix + "/lock/shared");
    ASSERT_TRUE(eventually([&] { return leases.waiters("shared")->size() == 1; })) << "etcdctl's key is not in line";
    EXPECT_EQ(theirs.held_key(300ms), "") << "etcdctl took a lock coord holds";
    auto read = leases.holder("shared");
    ASSERT_TRUE(read && *read);
    EXPECT_EQ((*read)->owner, "coord");
    ASSERT_TRUE(leases.release(*held));
    const std::string key = theirs.held_key(30s);
    ASSERT_FALSE(key.empty()) << "etcdctl never took the lock coord released";
    auto now = leases.holder("shared");
    ASSERT_TRUE(now && *now);
    EXPECT_EQ((*now)->owner, key);
    EXPECT_GT((*now)->token, held->token);
    EXPECT_EQ(theirs.release(), 0);
    auto after = leases.holder("shared");
    ASSERT_TRUE(after);
    EXPECT_FALSE(*after) << "etcdctl's release left its key";
}

// `waiters` waiting acquires queued behind a holder, each watching its
// predecessor; returns the events etcd sent between the holder's release and
// the first waiter's grant, after checking every waiter was served in
// arrival order with a larger token.
std::int64_t events_one_release_sends(std::size_t waiters) {
    const auto opts = etcd_options(etcd_fresh_prefix());
    coord::etcd::store store{etcd_url(), coord::etcd::server_clock{}, opts};
    coord::test::etcd_init(store);
    coord::etcd::lease_manager leases{store};
    auto held = leases.acquire("herd", "holder", 60s);
    if (!held) throw std::runtime_error(held.error().code.message());
    std::mutex m;
    std::condition_variable cv;
    bool go = false;
    std::vector<std::string> order;
    std::vector<coord::fence_token> tokens;
    std::vector<std::thread> threads;
    const auto watchers_before = metric("etcd_debugging_mvcc_watcher_total");
    for (std::size_t i = 0; i < waiters; ++i) {
        threads.emplace_back([&, i] {
            const std::string me = "w" + std::to_string(i);
            // Places of 30 s: no renewal falls inside the count.
            auto l = leases.acquire("herd", me, 60s, steady::now() + 120s, 30s);
            ASSERT_TRUE(l) << me << ": " << l.error().code.message();
            std::unique_lock lk(m);
            order.push_back(me);
            tokens.push_back(l->token);
            cv.notify_all();
            cv.wait(lk, [&] { return go; });
            lk.unlock();
            EXPECT_TRUE(leases.release(*l));
        });
        EXPECT_TRUE(eventually([&] { return leases.waiters("herd")->size() == i + 1; }));  // arrival order is start order
    }
    // Every waiter watches its predecessor.
    EXPECT_TRUE(eventually([&] { return metric("etcd_debugging_mvcc_watcher_total") >= watchers_before + static_cast<std::int64_t>(waiters); }));
    const auto before = metric("etcd_debugging_mvcc_events_total");
    EXPECT_TRUE(leases.release(*held));
    {
        std::unique_lock lk(m);
        EXPECT_TRUE(cv.wait_for(lk, 60s, [&] { return !order.empty(); }));
    }
    const auto after = metric("etcd_debugging_mvcc_events_total");
    {
        std::lock_guard lk(m);
        go = true;
    }
    cv.notify_all();
    for (auto& t : threads) t.join();
    EXPECT_EQ(order.size(), waiters);
    for (std::size_t i = 0; i < order.size(); ++i) {
        EXPECT_EQ(order[i], std::string(1, 'w') + std::to_string(i));
        EXPECT_GT(tokens[i], i == 0 ? held->token : tokens[i - 1]);
    }
    return after - before;
}

// Herd-free: one release costs etcd the same events with 20 waiters as with 2
// (the next waiter's watch on the released key, and nothing for the others).
TEST(EtcdLock, OneReleaseWakesOneWaiterWhetherTwoOrTwentyWait) {
    const auto two = events_one_release_sends(2);
    const auto twenty = events_one_release_sends(20);
    EXPECT_GE(two, 1);
    EXPECT_EQ(twenty, two) << "a release sent " << twenty << " events with 20 waiters, " << two << " with 2";
}

}  // namespace

// A reader of the holder while waiters take the lock in turn: each waiter's
// key moves from its place's lease to its term's when its turn comes, and a
// read between the two must still name it. Across the handovers the reader
// sees terms that only grow, and never nobody between two reads of one term.
TEST(EtcdLock, AReaderNeverSeesNobodyInsideATerm) {
    const auto opts = etcd_options(etcd_fresh_prefix());
    coord::etcd::store store{etcd_url(), coord::etcd::server_clock{}, opts};
    coord::test::etcd_init(store);
    coord::etcd::lease_manager leases{store};
    std::atomic<bool> done{false};
    std::vector<std::thread> takers;
    for (int i = 0; i < 3; ++i)
        takers.emplace_back([&, i] {
            const std::string me = "t" + std::to_string(i);
            for (int round = 0; round < 40; ++round) {
                auto l = leases.acquire("turns", me, 30s, steady::now() + 60s);
                ASSERT_TRUE(l) << me << ": " << l.error().code.message();
                EXPECT_TRUE(leases.release(*l));
            }
        });
    // Four readers: each read is two requests, the window one of them.
    std::vector<std::vector<coord::fence_token>> seen(4);  // 0: nobody
    std::vector<std::thread> readers;
    for (auto& mine : seen)
        readers.emplace_back([&] {
            while (!done.load()) {
                auto r = leases.holder("turns");
                ASSERT_TRUE(r) << r.error().message();
                const coord::fence_token t = *r ? (*r)->token : 0;
                if (mine.empty() || mine.back() != t) mine.push_back(t);
            }
        });
    for (auto& t : takers) t.join();
    done = true;
    for (auto& r : readers) r.join();
    std::size_t terms = 0;
    for (const auto& one : seen) {
        coord::fence_token last = 0;
        for (const auto t : one) {
            if (t == 0) continue;
            EXPECT_GT(t, last) << "term " << t << " seen again after nobody or after a later term";
            last = t;
            ++terms;
        }
    }
    EXPECT_GT(terms, 1u) << "the reader saw no handover";
}
