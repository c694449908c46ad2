// SPDX-License-Identifier: Apache-2.0
// coord/keeper.hpp: holding a lease. A keeper takes leases, renews them in
// the background (one thread per keeper renews every lease it holds, a
// second only watches their safe deadlines), and says the moment it can no
// longer vouch that its holder still owns one.
//
//   coord::memory_store store;
//   coord::basic_keeper keeper{store};
//   auto held = keeper.hold("db-primary", coord::unique_owner(), std::chrono::seconds{10});
//   if (!held) return;                              // lease_held, or the store's error
//   while (held->valid()) write_with_fence(held->token());
//   // or: std::stop_callback stop{held->lost(), [&] { worker.request_stop(); }};
//
// The safe deadline. The holder cannot read the store's clock, on which its
// term ends, so the keeper bounds ownership on the holder's own steady
// clock: the instant the last successful renewal (or the grant) was SENT,
// plus the term, less an allowance for the two clocks' rates differing
// (keeper_options::max_clock_drift of the term, plus allowance_floor). The
// store measures the term from when it applied the call, which is after it
// was sent, so the term on the store ends after the safe deadline as long as
// the holder's clock runs no slower than the allowance says.
//
// lost() is requested at the first of: a renewal refused (another holder
// took the name after the term ended, or the store went back), a renewal
// whose outcome is unknown or whose store is unavailable once the safe
// deadline has passed, or the safe deadline passing with no renewal answered
// (also after the whole process was paused: the first check after waking
// sees it). valid() answers from the safe deadline alone, without a store
// call, so a check right after a pause says false even before the keeper's
// thread has run.
//
// What the keeper cannot do: recall a request its holder already sent. A
// write that left before lost() and lands after another holder took the
// name is refused only by a resource that checks the fence token
// (coord/fence.hpp): send held->token() with every write.
//
// Thread safety: a keeper may be used from any thread. A held lease's const
// members (token, valid, lost, ...) may be called from any thread; moving,
// release() and destroying it are one thread's at a time, as for any object.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "coord/clock.hpp"
#include "coord/detail/term.hpp"
#include "coord/error.hpp"
#include "coord/lease.hpp"
#include "coord/result.hpp"

namespace coord {

/// What a keeper reports to keeper_options::on_event.
struct keeper_event {
    /// What happened.
    enum class kind {
        /// The keeper can no longer vouch for the lease: lost() was requested.
        lost,
        /// Releasing a held lease (its destructor, or release()) failed: the
        /// term ends on its own on the store's clock.
        release_failed,
    };
    kind what = kind::lost;  ///< what happened
    std::string name;  ///< the lease's name
    std::string owner;  ///< the lease's owner
    fence_token token = 0;  ///< the grant's fence token
    /// Why: the renewal's refusal or the store's error, or errc::lease_lost
    /// when the safe deadline passed with no renewal answered.
    error why;
};

/// How a keeper renews and bounds its leases.
struct keeper_options {
    /// Renew when this share of the term has passed since the last renewal
    /// was sent: 3 renews after a third (as etcd's KeepAlive and Redisson's
    /// watchdog do), leaving two thirds of the term for retries. 2 to 100.
    unsigned renewals_per_term = 3;
    /// The most the holder's steady clock may run slower than the store's
    /// clock, as a share of the term (0.01: 1%, 10,000 ppm: far above what
    /// NTP-disciplined or even free-running quartz clocks drift, and what
    /// Redis's Redlock allows). The safe deadline ends the term this much
    /// early, plus allowance_floor. 0 to 0.5.
    double max_clock_drift = detail::default_max_clock_drift;
    /// Added to the drift allowance: the clocks' reading granularity and the
    /// delay between reading the holder's clock and sending. 0 to 1 s.
    std::chrono::milliseconds allowance_floor{detail::default_allowance_floor};
    /// Renewals on a thread of the keeper's own (the default). false: they
    /// run when the application calls service(), from its own event loop (or
    /// a test on manual clocks).
    bool own_thread = true;
    /// Told when a lease is lost (on the thread that found it: the keeper's,
    /// or the one calling service()) and when a release failed (on the
    /// releasing thread). Must not throw; should return quickly.
    std::function<void(const keeper_event&)> on_event;
};

namespace detail {

// One lease a keeper holds: what the held lease and the keeper's thread share.
// Its term is kept by the rule of coord/detail/term.hpp.
template <class Steady>
struct kept_lease {
    using time_point = typename Steady::time_point;

    kept_lease(lease l, time_point sent, std::chrono::nanoseconds allowance, unsigned per_term)
        : name(std::move(l.name)), owner(std::move(l.owner)), token(l.token), ttl(l.ttl), expires_at(l.expires_at),
          term(l.ttl, allowance, l.ttl / per_term, sent) {}

    const std::string name;
    const std::string owner;
    const fence_token token;
    const std::chrono::nanoseconds ttl;

    mutable std::mutex m;
    std::chrono::nanoseconds expires_at;  // on the store's clock, as of the last answer
    renewed_term<time_point> term;
    std::uint64_t renewals = 0;
    bool released = false;
    std::optional<error> why_lost;
    std::stop_source lost;
};

// The keeper's state, shared with the leases it holds (so that a held lease
// that outlives its keeper can still release).
template <class Store, class Steady>
struct keeper_core {
    using entry = kept_lease<Steady>;

    keeper_core(Store& s, keeper_options o, Steady c) : store(&s), opt(std::move(o)), clock(std::move(c)) {}

    // Marks `e` lost (once) and tells the callback. Called without e->m held.
    void lose(const std::shared_ptr<entry>& e, error why) {
        {
            std::lock_guard lk(e->m);
            if (e->released || e->why_lost) return;
            e->why_lost = why;
        }
        e->lost.request_stop();
        tell(keeper_event::kind::lost, *e, std::move(why));
    }

    // Marks `e` lost when its safe deadline has passed (checked under its
    // lock, so that a renewal answered just before is never undone).
    bool lose_if_overdue(const std::shared_ptr<entry>& e) {
        {
            std::lock_guard lk(e->m);
            if (e->released || e->why_lost) return e->why_lost.has_value();
            if (e->term.vouched(clock.now())) return false;
        }
        lose(e, error(make_error_code(errc::lease_lost),
                      "no renewal was answered before the safe deadline (the term less the clock-drift "
                      "allowance, from when the last renewal was sent)"));
        return true;
    }

    void tell(keeper_event::kind what, const entry& e, error why) {
        if (!opt.on_event) return;
        keeper_event ev{what, e.name, e.owner, e.token, std::move(why)};
        try {
            opt.on_event(ev);
        } catch (...) {  // a callback must not throw; the keeper goes on regardless
        }
    }

    // Renews `e` when due; marks it lost when it can no longer be vouched for.
    void service(const std::shared_ptr<entry>& e) {
        if (lose_if_overdue(e)) return;
        {
            std::lock_guard lk(e->m);
            if (e->released || e->why_lost || !e->term.due(clock.now())) return;
        }
        const auto sent = clock.now();
        auto r = store->lease_renew(e->name, e->owner, e->token, e->ttl);
        const auto answered = clock.now();
        if (r) {
            std::lock_guard lk(e->m);
            e->expires_at = r->expires_at;
            e->term.renewed(sent);
            ++e->renewals;
            return;
        }
        const error& why = r.error().code;
        const bool may_retry = why == condition::unavailable || why == condition::outcome_unknown;
        if (may_retry) {
            std::lock_guard lk(e->m);
            if (e->term.vouched(answered)) {
                e->term.unanswered(answered);  // try again soon, never past the safe deadline
                return;
            }
        }
        lose(e, why);
    }

    // Every lease held now (the list is copied: store calls run unlocked).
    std::vector<std::shared_ptr<entry>> snapshot() {
        std::lock_guard lk(m);
        return held;
    }

    // The next instant something is due: a renewal or a safe deadline (or
    // only a safe deadline).
    typename Steady::time_point next_due(bool deadlines_only = false) {
        auto due = Steady::time_point::max();
        for (const auto& e : snapshot()) {
            std::lock_guard lk(e->m);
            if (e->released || e->why_lost) continue;
            due = std::min(due, deadlines_only ? e->term.safe_until : e->term.next_due());
        }
        return due;
    }

    void add(std::shared_ptr<entry> e) {
        {
            std::lock_guard lk(m);
            held.push_back(std::move(e));
            ++version;
        }
        cv.notify_all();
    }
    void remove(const entry* e) {
        std::lock_guard lk(m);
        std::erase_if(held, [&](const std::shared_ptr<entry>& x) { return x.get() == e; });
    }

    Store* store;
    const keeper_options opt;
    const Steady clock;

    std::mutex m;
    std::condition_variable cv;
    bool stopping = false;
    std::uint64_t version = 0;  // moves when a lease is added
    std::vector<std::shared_ptr<entry>> held;
};

}  // namespace detail

template <lease_store Store, monotonic_clock Steady>
class basic_keeper;

/// A lease a keeper holds: renewed in the background while it lives,
/// released when it is destroyed. Movable, not copyable.
template <class Store, class Steady = steady_clock>
class basic_held_lease {
    using core = detail::keeper_core<Store, Steady>;
    using entry = detail::kept_lease<Steady>;

public:
    /// Moves the hold: the moved-from object holds nothing.
    basic_held_lease(basic_held_lease&&) noexcept = default;
    /// Releases what this object held, then takes `o`'s hold.
    basic_held_lease& operator=(basic_held_lease&& o) noexcept {
        if (this != &o) {
            end();
            core_ = std::move(o.core_);
            e_ = std::move(o.e_);
        }
        return *this;
    }
    basic_held_lease(const basic_held_lease&) = delete;
    basic_held_lease& operator=(const basic_held_lease&) = delete;
    /// Releases the lease (bounded by the store's call timeout). A failed
    /// release goes to keeper_options::on_event, never out of here.
    ~basic_held_lease() { end(); }

    /// The lease's name.
    const std::string& name() const noexcept { return e_->name; }
    /// The owner the lease is held for.
    const std::string& owner() const noexcept { return e_->owner; }
    /// The grant's fence token: send it with every write the lease guards.
    fence_token token() const noexcept { return e_->token; }
    /// The term each renewal asks for.
    std::chrono::nanoseconds ttl() const noexcept { return e_->ttl; }

    /// When the term ends on the store's clock, as of the last answer
    /// (time since the store clock's epoch, as lease::expires_at).
    std::chrono::nanoseconds expires_at() const {
        std::lock_guard lk(e_->m);
        return e_->expires_at;
    }
    /// The lease as of the last answer.
    lease view() const {
        std::lock_guard lk(e_->m);
        return lease{e_->name, e_->owner, e_->token, e_->ttl, e_->expires_at};
    }

    /// The safe deadline on the holder's steady clock: until then the
    /// keeper vouches for ownership (unless lost() says otherwise sooner).
    typename Steady::time_point safe_until() const {
        std::lock_guard lk(e_->m);
        return e_->term.safe_until;
    }
    /// True while the keeper vouches for ownership: not lost, and the safe
    /// deadline not passed on the holder's clock now. No store call.
    bool valid() const {
        std::lock_guard lk(e_->m);
        return !e_->released && !e_->why_lost && e_->term.vouched(core_->clock.now());
    }
    /// Requested the moment ownership can no longer be vouched for (see the
    /// header comment); never reset: a lost lease stays lost.
    std::stop_token lost() const noexcept { return e_->lost.get_token(); }
    /// Why the lease was lost, or nullopt while it is not.
    std::optional<error> why_lost() const {
        std::lock_guard lk(e_->m);
        return e_->why_lost;
    }
    /// Renewals answered so far.
    std::uint64_t renewals() const {
        std::lock_guard lk(e_->m);
        return e_->renewals;
    }

    /// Stops renewing and releases now, saying how it went (the destructor
    /// does the same and reports a failure to the callback instead). After
    /// it, the held lease is empty: only destroying or assigning it is left.
    result<void, lease_error> release() {
        auto c = std::move(core_);
        auto e = std::move(e_);
        return finish(*c, e);
    }

private:
    template <lease_store, monotonic_clock>
    friend class basic_keeper;
    basic_held_lease(std::shared_ptr<core> c, std::shared_ptr<entry> e) noexcept
        : core_(std::move(c)), e_(std::move(e)) {}

    void end() noexcept {
        if (!core_ || !e_) return;
        auto c = std::move(core_);
        auto e = std::move(e_);
        auto r = finish(*c, e);
        if (!r) c->tell(keeper_event::kind::release_failed, *e, r.error().code);
    }

    static result<void, lease_error> finish(core& c, const std::shared_ptr<entry>& e) {
        {
            std::lock_guard lk(e->m);
            e->released = true;
        }
        c.remove(e.get());
        e->lost.request_stop();  // nobody may act as the holder from here on
        return c.store->lease_release(e->name, e->owner, e->token);
    }

    std::shared_ptr<core> core_;
    std::shared_ptr<entry> e_;
};

/// Takes leases and keeps them: two threads per keeper, however many leases
/// it holds (one renews, one watches the safe deadlines; or service(), see
/// keeper_options::own_thread). The store must
/// outlive the keeper and every lease it handed out.
template <lease_store Store, monotonic_clock Steady = steady_clock>
class basic_keeper;

template <lease_store Store, monotonic_clock Steady>
class basic_keeper {
    using core = detail::keeper_core<Store, Steady>;
    using entry = detail::kept_lease<Steady>;

public:
    /// A lease this keeper holds and renews.
    using held_lease = basic_held_lease<Store, Steady>;

    /// Throws std::invalid_argument for an option out of range.
    explicit basic_keeper(Store& store, keeper_options opt = {}, Steady clock = Steady{})
        : core_(std::make_shared<core>(store, checked(std::move(opt)), std::move(clock))) {
        if (core_->opt.own_thread) {
            renewer_ = std::thread([c = core_] { run(*c, false); });
            watcher_ = std::thread([c = core_] { run(*c, true); });
        }
    }
    basic_keeper(const basic_keeper&) = delete;
    basic_keeper& operator=(const basic_keeper&) = delete;
    /// Stops renewing. Leases still held are marked lost (their terms run out
    /// on the store); destroying them still releases.
    ~basic_keeper() {
        {
            std::lock_guard lk(core_->m);
            core_->stopping = true;
        }
        core_->cv.notify_all();
        if (renewer_.joinable()) renewer_.join();
        if (watcher_.joinable()) watcher_.join();
        for (const auto& e : core_->snapshot())
            core_->lose(e, error(make_error_code(errc::lease_lost), "the keeper that renewed it ended"));
    }

    /// Takes `name` for `owner` at once (one store call) and keeps it; or the
    /// refusal (lease_held: error() says who holds it until when) or the
    /// store's error. Throws std::invalid_argument as basic_lease_manager.
    template <class Rep, class Period>
    result<held_lease, lease_error> hold(std::string_view name, std::string_view owner,
                                         std::chrono::duration<Rep, Period> ttl) {
        check_term(ttl);
        const auto sent = core_->clock.now();
        auto r = basic_lease_manager<Store>(*core_->store).acquire(name, owner, ttl);
        if (!r) return unexpected(std::move(r.error()));
        return keep(std::move(*r), sent);
    }

    /// Waits for `name` until `deadline` with the store's queued acquire
    /// (basic_lease_manager's waiting acquire: first come, first served,
    /// woken by the store) and keeps it; lease_held at the deadline.
    template <class Rep, class Period>
        requires lease_queue_store<Store>
    result<held_lease, lease_error> hold(std::string_view name, std::string_view owner,
                                         std::chrono::duration<Rep, Period> ttl,
                                         std::chrono::steady_clock::time_point deadline,
                                         std::chrono::milliseconds place_ttl = std::chrono::seconds{2}) {
        check_term(ttl);
        auto sent = core_->clock.now();
        auto r = basic_lease_manager<Store>(*core_->store)
                     .acquire(name, owner, ttl, deadline, place_ttl, [&] { sent = core_->clock.now(); });
        if (!r) return unexpected(std::move(r.error()));
        return keep(std::move(*r), sent);
    }

    /// Does what is due now on the keeper's clock (renewals, safe deadlines)
    /// and returns when something is due next (time_point::max() when
    /// nothing is held). With own_thread, the keeper's thread calls it;
    /// without, the application does, no later than the instant returned.
    typename Steady::time_point service() { return service(*core_); }

    /// The store the keeper's leases live in.
    Store& store() noexcept { return *core_->store; }

    /// How many leases the keeper holds now.
    std::size_t size() {
        std::lock_guard lk(core_->m);
        return core_->held.size();
    }

    /// The allowance the safe deadline ends a term of `ttl` early by.
    std::chrono::nanoseconds allowance(std::chrono::nanoseconds ttl) const { return allowance(core_->opt, ttl); }

private:
    static keeper_options checked(keeper_options o) {
        if (o.renewals_per_term < 2 || o.renewals_per_term > 100)
            throw std::invalid_argument("coord::keeper_options::renewals_per_term must be 2 to 100");
        if (!(o.max_clock_drift >= 0.0 && o.max_clock_drift <= 0.5))
            throw std::invalid_argument("coord::keeper_options::max_clock_drift must be 0 to 0.5");
        if (o.allowance_floor < std::chrono::milliseconds::zero() || o.allowance_floor > std::chrono::seconds{1})
            throw std::invalid_argument("coord::keeper_options::allowance_floor must be 0 to 1 s");
        return o;
    }
    template <class Rep, class Period>
    void check_term(std::chrono::duration<Rep, Period> ttl) const {
        using ns = std::chrono::nanoseconds;
        if (ttl > ttl.zero() && std::chrono::duration_cast<std::chrono::duration<double, std::nano>>(ttl).count() <
                                    static_cast<double>(std::numeric_limits<ns::rep>::max() / 4) &&
            allowance(core_->opt, std::chrono::duration_cast<ns>(ttl)) >= std::chrono::duration_cast<ns>(ttl))
            throw std::invalid_argument("coord::keeper: ttl must be longer than the clock-drift allowance");
    }
    static std::chrono::nanoseconds allowance(const keeper_options& o, std::chrono::nanoseconds ttl) {
        return detail::drift_allowance(ttl, o.max_clock_drift, o.allowance_floor);
    }

    result<held_lease, lease_error> keep(lease l, typename Steady::time_point sent) {
        const auto allow = allowance(core_->opt, l.ttl);
        auto e = std::make_shared<entry>(std::move(l), sent, allow, core_->opt.renewals_per_term);
        core_->add(e);
        // An answer that came after the safe deadline (a pause, a slow
        // store): the lease is handed out lost, so that the caller sees it.
        core_->service(e);
        return held_lease(core_, std::move(e));
    }

    static typename Steady::time_point service(core& c) {
        for (const auto& e : c.snapshot()) c.service(e);
        return c.next_due();
    }

    // The keeper's two threads. The renewer services what is due (renewals,
    // which may wait on the store up to its call timeout). The watcher only
    // marks leases lost at their safe deadlines, so that lost() is requested
    // on time even while a renewal waits on a store that does not answer.
    // Each waits for its next due instant, a new lease, or the end; the wait
    // is on std's steady clock, and a Steady that is not (a test clock) is
    // read again at least every 10 ms of real time.
    static void run(core& c, bool watcher) {
        std::uint64_t seen = 0;
        for (;;) {
            typename Steady::time_point due;
            if (watcher) {
                for (const auto& e : c.snapshot()) c.lose_if_overdue(e);
                due = c.next_due(true);
            } else {
                due = service(c);
            }
            std::unique_lock lk(c.m);
            if (c.stopping) return;
            if (c.version != seen) {
                seen = c.version;
                continue;
            }
            const auto now = c.clock.now();
            if (due <= now) continue;
            std::chrono::steady_clock::duration wait = std::chrono::hours{1};
            if (due - now < std::chrono::hours{1})
                wait = std::chrono::duration_cast<std::chrono::steady_clock::duration>(due - now) +
                       std::chrono::microseconds{100};
            if constexpr (!std::is_same_v<Steady, steady_clock>)
                wait = std::min<std::chrono::steady_clock::duration>(wait, std::chrono::milliseconds{10});
            c.cv.wait_for(lk, wait, [&] { return c.stopping || c.version != seen; });
            if (c.stopping) return;
        }
    }

    std::shared_ptr<core> core_;
    std::thread renewer_;
    std::thread watcher_;
};

}  // namespace coord
