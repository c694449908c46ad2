// SPDX-License-Identifier: Apache-2.0
// ZooKeeper's lock recipe, as coord's session-bound lease speaks it: waiters
// served in arrival order, a waiter whose process was SIGKILLed leaving the
// line when the ensemble expires its session, kazoo's Lock on ROOT/lock/NAME
// (Debian's python3-kazoo, reading Curator's node names) and coord excluding
// each other both ways, and one release waking one waiter whatever the
// number of waiters (the watch notifications the waiters' sessions got).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "coord/lease.hpp"
#include "support/child_process.hpp"
#include "zookeeper/zk_support.hpp"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using session_leases = coord::basic_lease_manager<coord::zookeeper::session_lease_adapter<coord::zookeeper::server_clock>>;

// Spins (no sleep) until `pred`, for at most 60 s.
template <class Pred>
bool eventually(Pred pred) {
    const auto give_up = steady::now() + 60s;
    while (!pred()) {
        if (steady::now() > give_up) return false;
        std::this_thread::yield();
    }
    return true;
}

// "127.0.0.1:PORT" and "/ROOT" of a zookeeper:// URL.
std::string hosts_of(const std::string& url) {
    const auto rest = url.substr(std::string("zookeeper://").size());
    return rest.substr(0, rest.find('/'));
}
std::string root_of(const std::string& url) {
    const auto rest = url.substr(std::string("zookeeper://").size());
    return rest.substr(rest.find('/'));
}

// The server's count of armed watches (the four-letter word mntr).
std::int64_t server_watches(const std::string& hosts) {
    const auto colon = hosts.find(':');
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(hosts.substr(colon + 1))));
    ::inet_pton(AF_INET, hosts.substr(0, colon).c_str(), &addr.sin_addr);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        throw std::runtime_error("mntr: no server at " + hosts);
    }
    (void)::write(fd, "mntr", 4);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
    const auto at = out.find("zk_watch_count\t");
    if (at == std::string::npos) throw std::runtime_error("mntr has no zk_watch_count: " + out);
    return std::stoll(out.substr(at + 15));
}

// A foreign client's lock in a process of its own: it prints "held ..."
// once it holds, releases when its standard input ends, then prints
// "released".
class foreign_lock {
public:
    explicit foreign_lock(std::vector<std::string> args) {
        int in[2], out[2];
        if (::pipe(in) != 0 || ::pipe(out) != 0) throw std::runtime_error("pipe");
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, in[0], 0);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_addclose(&fa, in[1]);
        posix_spawn_file_actions_addclose(&fa, out[0]);
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        const int rc = posix_spawnp(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        ::close(in[0]);
        ::close(out[1]);
        in_ = in[1];
        out_ = out[0];
        if (rc != 0) throw std::runtime_error(args[0] + " could not be started (tests/zookeeper/zookeeper.sh install)");
    }
    foreign_lock(const foreign_lock&) = delete;
    foreign_lock& operator=(const foreign_lock&) = delete;
    ~foreign_lock() {
        finish();
        ::close(out_);
    }
    // The next line kazoo printed ("" when none came within `within`).
    std::string line(std::chrono::milliseconds within) {
        const auto until = steady::now() + within;
        for (;;) {
            if (const auto nl = printed_.find('\n'); nl != std::string::npos) {
                std::string l = printed_.substr(0, nl);
                printed_.erase(0, nl + 1);
                return l;
            }
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - steady::now());
            pollfd p{out_, POLLIN, 0};
            if (left.count() < 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
            char buf[256];
            const auto n = ::read(out_, buf, sizeof buf);
            if (n <= 0) return "";
            printed_.append(buf, static_cast<std::size_t>(n));
        }
    }
    // Ends its standard input: it releases and exits. Its exit status.
    int finish() {
        if (in_ >= 0) ::close(std::exchange(in_, -1));
        if (pid_ > 0) {
            ::waitpid(pid_, &status_, 0);
            pid_ = -1;
        }
        return status_;
    }

private:
    pid_t pid_ = -1;
    int in_ = -1, out_ = -1, status_ = 0;
    std::string printed_;
};

// kazoo's Lock(client, PATH, identifier=WHO, extra_lock_patterns=["-lock-"])
// (Debian's /usr/bin/python3 with python3-kazoo): prints "held".
foreign_lock kazoo_lock(const std::string& hosts, const std::string& path, const std::string& who) {
    const std::string script =
        "import sys\n"
        "from kazoo.client import KazooClient\n"
        "c = KazooClient(hosts=sys.argv[1]); c.start()\n"
        "lock = c.Lock(sys.argv[2], sys.argv[3], extra_lock_patterns=['-lock-'])\n"
        "lock.acquire()\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
        "lock.release(); print('released', flush=True); c.stop()\n";
    return foreign_lock({"/usr/bin/python3", "-c", script, hosts, path, who});
}

// Curator's InterProcessMutex(client, PATH) (Debian's Curator 5.4, run by
// the JDK from tests/zookeeper/CuratorLock.java): prints "held NODE DATA".
foreign_lock curator_lock(const std::string& hosts, const std::string& path) {
    std::string cp;
    for (const char* jar : {"curator-client", "curator-framework", "curator-recipes", "guava", "zookeeper", "zookeeper-jute",
                            "slf4j-api", "slf4j-nop"}) {
        if (!cp.empty()) cp += ':';
        cp += "/usr/share/java/";
        cp += jar;
        cp += ".jar";
    }
    return foreign_lock({"java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", cp, COORD_CURATOR_LOCK, hosts, path});
}

TEST(ZooKeeperLock, WaitersAreServedInArrivalOrderAndAGiveUpLeavesTheLine) {
    const std::string url = coord::test::zk_fresh_root(coord::test::zk_url());
    coord::zookeeper::store holder_store{url};
    session_leases holder{holder_store.session_bound()};
    auto held = holder.acquire("job", "holder", 1s);
    ASSERT_TRUE(held) << held.error().code.message();
    std::vector<std::unique_ptr<coord::zookeeper::store>> stores;
    for (int i = 0; i < 5; ++i) stores.push_back(std::make_unique<coord::zookeeper::store>(url));
    // A waiter that gives up leaves the line, refused with the holder.
    auto gave_up = session_leases{stores[0]->session_bound()}.acquire("job", "impatient", 1s, steady::now() + 50ms);
    ASSERT_FALSE(gave_up);
    EXPECT_EQ(gave_up.error(), coord::errc::lease_held);
    EXPECT_EQ(gave_up.error().holder, "holder");
    EXPECT_TRUE(holder.waiters("job")->empty());
    std::mutex m;
    std::vector<std::string> order;
    std::vector<coord::fence_token> tokens;
    std::vector<std::thread> waiters;
    for (int i = 0; i < 5; ++i) {
        waiters.emplace_back([&, i] {
            session_leases mine{stores[static_cast<std::size_t>(i)]->session_bound()};
            const std::string me = "w" + std::to_string(i);
            auto l = mine.acquire("job", me, 1s, steady::now() + 60s);
            ASSERT_TRUE(l) << me << ": " << l.error().code.message();
            {
                std::lock_guard lk(m);
                order.push_back(me);
                tokens.push_back(l->token);
            }
            EXPECT_TRUE(mine.release(*l));
        });
        ASSERT_TRUE(eventually([&] { return holder.waiters("job")->size() == static_cast<std::size_t>(i) + 1; }));
    }
    auto line = holder.waiters("job");
    ASSERT_TRUE(line);
    for (std::size_t i = 0; i < line->size(); ++i) EXPECT_EQ((*line)[i].who, "w" + std::to_string(i));
    ASSERT_TRUE(holder.release(*held));
    for (auto& t : waiters) t.join();
    ASSERT_EQ(order.size(), 5u);
    for (std::size_t i = 0; i < 5; ++i) {
        EXPECT_EQ(order[i], "w" + std::to_string(i));
        EXPECT_GT(tokens[i], i == 0 ? held->token : tokens[i - 1]);
    }
    auto free = holder.holder("job");
    ASSERT_TRUE(free);
    EXPECT_FALSE(*free);
}

// A waiter SIGKILLed while queued: its child lasts until the ensemble
// expires its session, then the waiter behind it is served.
TEST(ZooKeeperLock, AWaiterKilledInLineStopsBlockingWhenItsSessionEnds) {
    const std::string url = coord::test::zk_fresh_root(coord::test::zk_url());
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    // Forked before this process opens a store (and with it the client's
    // threads): it waits for "go" to take its place behind the holder.
    coord::test::child_process ghost([&](int out) {
        ::close(go[1]);
        char c;
        if (::read(go[0], &c, 1) != 1) return 1;
        coord::zookeeper::options o;
        o.session_timeout = 4s;  // the server's least (2 ticks of 2 s)
        coord::zookeeper::store s{url, coord::zookeeper::server_clock{}, o};
        auto t = s.session_bound().lease_enqueue("job", "ghost", 2s);
        const std::uint64_t ticket = t ? *t : 0;
        if (::write(out, &ticket, sizeof ticket) != sizeof ticket) return 1;
        for (;;) ::pause();
    });
    ::close(go[0]);
    coord::zookeeper::store store{url};
    session_leases leases{store.session_bound()};
    auto held = leases.acquire("job", "holder", 1s);
    ASSERT_TRUE(held);
    ASSERT_EQ(::write(go[1], "g", 1), 1);
    ::close(go[1]);
    std::uint64_t ticket = 0;
    ASSERT_TRUE(ghost.read(ticket));
    ASSERT_NE(ticket, 0u);
    coord::zookeeper::store behind_store{url};
    coord::result<coord::lease, coord::lease_error> l;
    std::thread w([&] { l = session_leases{behind_store.session_bound()}.acquire("job", "alive", 1s, steady::now() + 60s); });
    ASSERT_TRUE(eventually([&] { return leases.waiters("job")->size() == 2; }));
    ghost.kill(SIGKILL);
    ASSERT_TRUE(leases.release(*held));
    w.join();
    ASSERT_TRUE(l) << l.error().code.message();
    EXPECT_EQ(l->owner, "alive");
    EXPECT_GT(l->token, held->token);
}

// kazoo holds first: coord's acquire is refused naming kazoo's identifier,
// coord's waiting acquire waits until kazoo releases.
TEST(ZooKeeperLock, CoordWaitsForKazooLock) {
    const std::string url = coord::test::zk_fresh_root(coord::test::zk_url());
    coord::zookeeper::store store{url};
    session_leases leases{store.session_bound()};
    ASSERT_TRUE(leases.acquire("seed", "coord", 1s).has_value());  // the lock node exists (kazoo would make it too)
    ASSERT_TRUE(leases.release("seed", "coord"));
    auto theirs = kazoo_lock(hosts_of(url), root_of(url) + "/lock/shared", "kazoo-1");
    ASSERT_EQ(theirs.line(60s), "held") << "kazoo did not take the lock";
    auto read = leases.holder("shared");
    ASSERT_TRUE(read && *read) << "coord does not see kazoo's holder";
    EXPECT_EQ((*read)->owner, "kazoo-1");
    auto refused = leases.acquire("shared", "coord", 1s);
    ASSERT_FALSE(refused) << "coord took a lock kazoo holds";
    EXPECT_EQ(refused.error(), coord::errc::lease_held);
    EXPECT_EQ(refused.error().holder, "kazoo-1");
    std::atomic<bool> granted{false};
    coord::result<coord::lease, coord::lease_error> mine = coord::unexpected(coord::lease_error{});
    std::thread waiter([&] {
        mine = leases.acquire("shared", "coord", 1s, steady::now() + 60s);
        granted = true;
    });
    ASSERT_TRUE(eventually([&] { return leases.waiters("shared")->size() == 1; }));
    EXPECT_FALSE(granted.load()) << "coord's waiting acquire did not wait for kazoo";
    EXPECT_EQ(theirs.finish(), 0);
    waiter.join();
    ASSERT_TRUE(mine) << mine.error().code.message();
    EXPECT_GT(mine->token, (*read)->token);
    EXPECT_TRUE(leases.release(*mine));
}

// coord holds first: kazoo's Lock waits behind it, and holds once coord releases.
TEST(ZooKeeperLock, KazooLockWaitsForCoord) {
    const std::string url = coord::test::zk_fresh_root(coord::test::zk_url());
    coord::zookeeper::store store{url};
    session_leases leases{store.session_bound()};
    auto held = leases.acquire("shared", "coord", 1s);
    ASSERT_TRUE(held) << held.error().code.message();
    auto theirs = kazoo_lock(hosts_of(url), root_of(url) + "/lock/shared", "kazoo-2");
    ASSERT_TRUE(eventually([&] { return leases.waiters("shared")->size() == 1; })) << "kazoo's node is not in line";
    EXPECT_EQ(theirs.line(300ms), "") << "kazoo took a lock coord holds";
    ASSERT_TRUE(leases.release(*held));
    ASSERT_EQ(theirs.line(60s), "held") << "kazoo never took the lock coord released";
    auto now = leases.holder("shared");
    ASSERT_TRUE(now && *now);
    EXPECT_EQ((*now)->owner, "kazoo-2");
    EXPECT_GT((*now)->token, held->token);
    EXPECT_EQ(theirs.finish(), 0);
    auto after = leases.holder("shared");
    ASSERT_TRUE(after);
    EXPECT_FALSE(*after) << "kazoo's release left its node";
}

// Curator holds first: coord's acquire is refused naming the data Curator
// wrote in its node (its client's address), coord's waiting acquire waits
// until Curator releases.
TEST(ZooKeeperLock, CoordWaitsForCuratorInterProcessMutex) {
    const std::string url = coord::test::zk_fresh_root(coord::test::zk_url());
    coord::zookeeper::store store{url};
    session_leases leases{store.session_bound()};
    auto theirs = curator_lock(hosts_of(url), root_of(url) + "/lock/shared");
    const std::string line = theirs.line(120s);
    ASSERT_EQ(line.rfind("held ", 0), 0u) << "Curator did not take the lock: '" << line << "'";
    const std::string node = line.substr(5, line.find(' ', 5) - 5);
    const std::string data = line.substr(line.find(' ', 5) + 1);
    EXPECT_EQ(node.rfind(root_of(url) + "/lock/shared/_c_", 0), 0u) << node;
    auto read = leases.holder("shared");
    ASSERT_TRUE(read && *read) << "coord does not see Curator's holder";
    EXPECT_EQ((*read)->owner, data.empty() ? node.substr(node.rfind('/') + 1) : data);
    auto refused = leases.acquire("shared", "coord", 1s);
    ASSERT_FALSE(refused) << "coord took a lock Curator holds";
    EXPECT_EQ(refused.error(), coord::errc::lease_held);
    std::atomic<bool> granted{false};
    coord::result<coord::lease, coord::lease_error> mine = coord::unexpected(coord::lease_error{});
    std::thread waiter([&] {
        mine = leases.acquire("shared", "coord", 1s, steady::now() + 120s);
        granted = true;
    });
    ASSERT_TRUE(eventually([&] { return leases.waiters("shared")->size() == 1; }));
    EXPECT_FALSE(granted.load()) << "coord's waiting acquire did not wait for Curator";
    EXPECT_EQ(theirs.finish(), 0);
    waiter.join();
    ASSERT_TRUE(mine) << mine.error().code.message();
    EXPECT_GT(mine->token, (*read)->token);
    EXPECT_TRUE(leases.release(*mine));
}

// coord holds first: Curator's InterProcessMutex waits behind it (it reads
// coord's node as a contender of its own kind), and holds once coord releases.
TEST(ZooKeeperLock, CuratorInterProcessMutexWaitsForCoord) {
    const std::string url = coord::test::zk_fresh_root(coord::test::zk_url());
    coord::zookeeper::store store{url};
    session_leases leases{store.session_bound()};
    auto held = leases.acquire("shared", "coord", 1s);
    ASSERT_TRUE(held) << held.error().code.message();
    auto theirs = curator_lock(hosts_of(url), root_of(url) + "/lock/shared");
    ASSERT_TRUE(eventually([&] { return leases.waiters("shared")->size() == 1; })) << "Curator's node is not in line";
    EXPECT_EQ(theirs.line(300ms), "") << "Curator took a lock coord holds";
    ASSERT_TRUE(leases.release(*held));
    const std::string line = theirs.line(60s);
    ASSERT_EQ(line.rfind("held ", 0), 0u) << "Curator never took the lock coord released: '" << line << "'";
    auto now = leases.holder("shared");
    ASSERT_TRUE(now && *now);
    EXPECT_NE((*now)->owner, "coord");
    EXPECT_GT((*now)->token, held->token);
    EXPECT_EQ(theirs.finish(), 0);
    auto after = leases.holder("shared");
    ASSERT_TRUE(after);
    EXPECT_FALSE(*after) << "Curator's release left its node";
}

// The two lease forms a herd test runs on. The session-bound lock: a grant
// leaves the next waiter's watch on the new holder's child alone. The TTL
// lease: a grant deletes the first waiter's place, which notifies the next
// waiter (once: it then watches the record).
struct session_form {
    static auto& of(coord::zookeeper::store& s) { return s.session_bound(); }
    static constexpr bool grant_wakes_the_next = false;
};
struct ttl_form {
    static auto& of(coord::zookeeper::store& s) { return s; }
    static constexpr bool grant_wakes_the_next = true;
};

// `waiters` waiting acquires (a session each) queued behind a holder; the
// watch notifications the waiters' sessions got between the holder's
// release and the first waiter's grant (and, where the grant wakes the next
// waiter, that waiter's notification).
template <class Form>
std::uint64_t notifications_one_release_causes(std::size_t waiters) {
    using manager = coord::basic_lease_manager<std::remove_reference_t<decltype(Form::of(std::declval<coord::zookeeper::store&>()))>>;
    const std::string url = coord::test::zk_fresh_root(coord::test::zk_url());
    coord::zookeeper::store holder_store{url};
    manager holder{Form::of(holder_store)};
    auto held = holder.acquire("herd", "holder", 60s);
    if (!held) throw std::runtime_error(held.error().code.message());
    std::vector<std::unique_ptr<coord::zookeeper::store>> stores;
    for (std::size_t i = 0; i < waiters; ++i) stores.push_back(std::make_unique<coord::zookeeper::store>(url));
    auto delivered = [&] {
        std::uint64_t n = 0;
        for (auto& s : stores) n += s->watch_notifications();
        return n;
    };
    std::mutex m;
    std::condition_variable cv;
    bool go = false;
    std::vector<std::string> order;
    std::vector<std::thread> threads;
    const auto watches_before = server_watches(hosts_of(url));
    for (std::size_t i = 0; i < waiters; ++i) {
        threads.emplace_back([&, i] {
            manager mine{Form::of(*stores[i])};
            const std::string me = "w" + std::to_string(i);
            // Places renewed every 30 s: no renewal falls inside the count.
            auto l = mine.acquire("herd", me, 60s, steady::now() + 120s, 60s);
            ASSERT_TRUE(l) << me << ": " << l.error().code.message();
            std::unique_lock lk(m);
            order.push_back(me);
            cv.notify_all();
            cv.wait(lk, [&] { return go; });
            lk.unlock();
            EXPECT_TRUE(mine.release(*l));
        });
        EXPECT_TRUE(eventually([&] { return holder.waiters("herd")->size() == i + 1; }));
    }
    // Every waiter watches its predecessor (the first: the holder's child, or the record).
    EXPECT_TRUE(eventually([&] { return server_watches(hosts_of(url)) >= watches_before + static_cast<std::int64_t>(waiters); }));
    const auto next_before = stores[1]->watch_notifications();
    const auto before = delivered();
    EXPECT_TRUE(holder.release(*held));
    {
        std::unique_lock lk(m);
        EXPECT_TRUE(cv.wait_for(lk, 60s, [&] { return !order.empty(); }));
    }
    if constexpr (Form::grant_wakes_the_next) {
        EXPECT_TRUE(eventually([&] { return stores[1]->watch_notifications() > next_before; })) << "the grant did not wake the next waiter";
    }
    const auto after = delivered();
    {
        std::lock_guard lk(m);
        go = true;
    }
    cv.notify_all();
    for (auto& t : threads) t.join();
    EXPECT_EQ(order.size(), waiters);
    for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], std::string(1, 'w') + std::to_string(i));
    return after - before;
}

// Herd-free: one release notifies the waiters' sessions as often with 20
// waiters as with 2 (the next waiter's watch, and nobody else's).
TEST(ZooKeeperLock, OneReleaseWakesOneWaiterWhetherTwoOrTwentyWait) {
    const auto two = notifications_one_release_causes<session_form>(2);
    const auto twenty = notifications_one_release_causes<session_form>(20);
    EXPECT_GE(two, 1u);
    EXPECT_EQ(twenty, two) << "a release notified " << twenty << " times with 20 waiters, " << two << " with 2";
}

// The same for the lease that outlives its process (its line of places):
// the release wakes the first waiter (its watch on the record), its grant
// the next (its watch on the first's place), and nobody else.
TEST(ZooKeeperLeaseQueue, OneReleaseWakesOneWaiterWhetherTwoOrTwentyWait) {
    const auto two = notifications_one_release_causes<ttl_form>(2);
    const auto twenty = notifications_one_release_causes<ttl_form>(20);
    EXPECT_EQ(two, 2u);
    EXPECT_EQ(twenty, two) << "a release notified " << twenty << " times with 20 waiters, " << two << " with 2";
}

}  // namespace
