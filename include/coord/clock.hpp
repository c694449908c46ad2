// SPDX-License-Identifier: Apache-2.0
// coord/clock.hpp: clock policies (concepts called on an instance), the
// adapters for std::chrono's clocks, and manual_clock for tests.
//
// Nothing in coord reads the time except through a Clock policy object, so a
// test can pause time, move it forward, and set it back, and see what a
// primitive does when the wall clock steps. A clock also knows how to wait:
// code that must wait for a later instant (a Snowflake generator whose
// sequence ran out) calls clock.sleep_until(t), which manual_clock serves
// without real time passing.
//
//   coord::manual_clock clock{std::chrono::sys_days{std::chrono::year{2026}/10/13}};
//   coord::basic_memory_store<coord::manual_clock> store{clock};
//   clock.advance(std::chrono::seconds{30});   // every copy of `clock` moves
//   clock.set(clock.now() - std::chrono::seconds{5});   // a step back
#pragma once

#include <time.h>

#include <atomic>
#include <chrono>
#include <concepts>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace coord {

/// A clock policy: an object whose now() gives the current time_point and
/// whose sleep_until(t) returns once now() >= t (or spuriously earlier: callers
/// re-check). Copies of a clock read the same time.
template <class C>
concept clock = std::copy_constructible<C> &&
                requires(const C& c, typename C::time_point t) {
                    typename C::duration;
                    typename C::time_point;
                    { c.now() } -> std::same_as<typename C::time_point>;
                    c.sleep_until(t);
                };

/// A clock whose epoch is the Unix epoch (1970-01-01T00:00:00Z, leap seconds
/// not counted): its readings can be stored, compared across machines, and
/// turned into calendar dates. It may step backwards (NTP, an operator).
template <class C>
concept unix_clock = clock<C> && C::is_unix_epoch;

/// A clock that never goes back while the process runs (std::chrono's
/// is_steady). Its epoch is arbitrary: never persist its readings.
template <class C>
concept monotonic_clock = clock<C> && C::is_steady;

namespace detail {
template <class C, class TimePoint>
void precise_sleep_until(const C& c, TimePoint t) {
    constexpr auto spin = std::chrono::microseconds{200};
    if (t - c.now() > spin) std::this_thread::sleep_until(t - spin);
    while (c.now() < t) std::this_thread::yield();
}
}  // namespace detail

/// std::chrono::system_clock as a policy: the machine's wall clock, on the
/// Unix epoch, which can step backwards.
struct system_clock {
    /// the clock's tick: std::chrono::system_clock's
    using duration = std::chrono::system_clock::duration;
    /// a Unix time, std::chrono::system_clock's type
    using time_point = std::chrono::system_clock::time_point;
    static constexpr bool is_unix_epoch = true;  ///< readings count from the Unix epoch
    static constexpr bool is_steady = false;  ///< the wall clock can step backwards

    /// One clock_gettime(CLOCK_REALTIME) (a vDSO call, no system call):
    /// what std::chrono::system_clock::now() does, without its out-of-line call.
    time_point now() const noexcept {
        timespec ts;
        ::clock_gettime(CLOCK_REALTIME, &ts);
        return time_point{std::chrono::duration_cast<duration>(std::chrono::seconds{ts.tv_sec} +
                                                               std::chrono::nanoseconds{ts.tv_nsec})};
    }
    /// Sleeps for the bulk of the wait and yields for the last 200 us, so a
    /// wait for the next millisecond does not overshoot by a timer slack.
    void sleep_until(time_point t) const { detail::precise_sleep_until(*this, t); }
};

/// std::chrono::steady_clock as a policy: never goes back, arbitrary epoch.
struct steady_clock {
    /// the clock's tick: std::chrono::steady_clock's
    using duration = std::chrono::steady_clock::duration;
    /// a reading of the monotonic clock
    using time_point = std::chrono::steady_clock::time_point;
    static constexpr bool is_unix_epoch = false;  ///< readings count from boot, not the Unix epoch
    static constexpr bool is_steady = true;  ///< never goes back

    /// One clock_gettime(CLOCK_MONOTONIC), as std::chrono::steady_clock::now().
    time_point now() const noexcept {
        timespec ts;
        ::clock_gettime(CLOCK_MONOTONIC, &ts);
        return time_point{std::chrono::duration_cast<duration>(std::chrono::seconds{ts.tv_sec} +
                                                               std::chrono::nanoseconds{ts.tv_nsec})};
    }
    /// As system_clock::sleep_until.
    void sleep_until(time_point t) const { detail::precise_sleep_until(*this, t); }
};

/// The clock policy of a store on a server (PostgreSQL, Redis, etcd,
/// ZooKeeper) that means "the server's clock": every expiry is judged on the
/// clock of the server, read inside the operation, never on this machine's.
/// A tag, not a clock: it has no now(). Tests give such a store a
/// manual_clock instead, whose readings are sent with each call. Each engine
/// names it too (coord::postgres::server_clock is this type).
struct server_clock {};

/// A clock that moves only when told: advance(d), set(t), including
/// backwards. Copies share one time (it is a handle), so a test keeps one copy
/// and hands others to the code under test. Safe from any thread.
///
/// It models both unix_clock (its readings are Unix time) and monotonic_clock
/// (so it can stand in for a steady clock); setting it back is how a test
/// simulates a wall-clock step.
///
/// Waiting: sleep_until(t) either advances the clock to t at once
/// (sleep_mode::advance, the default: a single-threaded test never blocks), or
/// blocks until another thread moves the clock to t or later
/// (sleep_mode::block; wait_for_sleepers(n) lets the test see that n threads
/// are waiting before it moves the clock).
class manual_clock {
public:
    /// nanoseconds
    using duration = std::chrono::nanoseconds;
    /// the tick count's type, for std::chrono
    using rep = duration::rep;
    /// the tick's length, for std::chrono
    using period = duration::period;
    /// a reading, nanoseconds since the Unix epoch
    using time_point = std::chrono::time_point<manual_clock, duration>;
    static constexpr bool is_unix_epoch = true;  ///< readings count from the Unix epoch
    static constexpr bool is_steady = true;  ///< counts as steady: a test moves it backwards only on purpose

    /// What sleep_until does: advance the clock at once, or block until another thread moves it.
    enum class sleep_mode { advance, block };

    /// Starts at the Unix epoch plus `since_epoch`.
    explicit manual_clock(duration since_epoch = duration::zero(), sleep_mode mode = sleep_mode::advance)
        : s_(std::make_shared<shared>(since_epoch.count(), mode)) {}
    /// Starts at the given Unix time.
    template <class D>
    explicit manual_clock(std::chrono::sys_time<D> start, sleep_mode mode = sleep_mode::advance)
        : manual_clock(std::chrono::duration_cast<duration>(start.time_since_epoch()), mode) {}

    /// The current reading; copies of a clock share it.
    time_point now() const noexcept { return time_point{duration{s_->ns.load(std::memory_order_acquire)}}; }

    /// Moves the time forward by d (backward when d is negative).
    void advance(duration d) {
        std::lock_guard lk(s_->m);
        s_->ns.fetch_add(d.count(), std::memory_order_acq_rel);
        s_->cv.notify_all();
    }
    /// Sets the time, forward or backward.
    void set(time_point t) {
        std::lock_guard lk(s_->m);
        s_->ns.store(t.time_since_epoch().count(), std::memory_order_release);
        s_->cv.notify_all();
    }
    /// Sets the time to a std::chrono Unix time, forward or backward.
    template <class D>
    void set(std::chrono::sys_time<D> t) {
        set(time_point{std::chrono::duration_cast<duration>(t.time_since_epoch())});
    }

    /// Returns once now() >= t: at once in sleep_mode::advance (moving the
    /// clock to t if it is behind), else when another thread moves the clock.
    void sleep_until(time_point t) const {
        std::unique_lock lk(s_->m);
        if (s_->mode == sleep_mode::advance) {
            if (s_->ns.load(std::memory_order_acquire) < t.time_since_epoch().count())
                s_->ns.store(t.time_since_epoch().count(), std::memory_order_release);
            s_->cv.notify_all();
            return;
        }
        ++s_->sleepers;
        s_->cv.notify_all();
        s_->cv.wait(lk, [&] { return s_->ns.load(std::memory_order_acquire) >= t.time_since_epoch().count(); });
        --s_->sleepers;
    }

    /// Blocks until at least n threads are inside sleep_until (sleep_mode::block).
    void wait_for_sleepers(int n) const {
        std::unique_lock lk(s_->m);
        s_->cv.wait(lk, [&] { return s_->sleepers >= n; });
    }

    /// How many threads are inside sleep_until now.
    int sleepers() const {
        std::lock_guard lk(s_->m);
        return s_->sleepers;
    }

private:
    struct shared {
        shared(rep start, sleep_mode m) : ns(start), mode(m) {}
        std::atomic<rep> ns;
        const sleep_mode mode;
        mutable std::mutex m;
        std::condition_variable cv;
        int sleepers = 0;
    };
    std::shared_ptr<shared> s_;
};

static_assert(unix_clock<system_clock>);
static_assert(monotonic_clock<steady_clock>);
static_assert(unix_clock<manual_clock> && monotonic_clock<manual_clock>);

/// Milliseconds since the Unix epoch of a unix_clock reading (floor).
template <class TimePoint>
constexpr std::int64_t unix_millis(TimePoint t) noexcept {
    return std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

/// A Unix time as ISO 8601 UTC with milliseconds: 2026-10-13T09:00:00.000Z.
inline std::string format_utc(std::chrono::sys_time<std::chrono::milliseconds> t) {
    using namespace std::chrono;
    const auto day = floor<days>(t);
    const year_month_day ymd{day};
    const hh_mm_ss<milliseconds> hms{t - day};
    char buf[40];
    std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", static_cast<int>(ymd.year()),
                  static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                  static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                  static_cast<int>(hms.seconds().count()), static_cast<int>(hms.subseconds().count()));
    return buf;
}

namespace detail {
/// a + b, saturated to the int64 range.
constexpr std::int64_t add_saturated(std::int64_t a, std::int64_t b) noexcept {
    std::int64_t r;
    if (__builtin_add_overflow(a, b, &r)) return b > 0 ? std::numeric_limits<std::int64_t>::max()
                                                       : std::numeric_limits<std::int64_t>::min();
    return r;
}

/// Millisecond `ms` in nanoseconds, saturated to the int64 range: the tick
/// and millisecond bounds the ID generators compare clock readings with (a
/// saturated bound only sends them down their exact path).
constexpr std::int64_t ns_of_ms_saturated(std::int64_t ms) noexcept {
    constexpr auto hi = std::numeric_limits<std::int64_t>::max(), lo = std::numeric_limits<std::int64_t>::min();
    return ms > hi / 1'000'000 ? hi : ms < lo / 1'000'000 ? lo : ms * 1'000'000;
}
}  // namespace detail

/// Nanoseconds since the clock's epoch: how stores persist a time point.
template <class TimePoint>
constexpr std::int64_t since_epoch_ns(TimePoint t) noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace coord
