// SPDX-License-Identifier: Apache-2.0
// coord/snowflake.hpp: 64-bit time-ordered IDs (time + node + sequence) that
// are never reissued: not within a tick, not after the clock steps back, not
// after a restart, not when two processes claim the same node id.
//
// The shifts are the easy part. What goes wrong in practice is the clock
// stepping back (an NTP step reissues a whole range of IDs in generators that
// trust the clock), two pods started with one worker id, and a time field that
// runs out. This generator:
// - keeps the last (tick, sequence) it issued in one atomic word, so every ID
//   is above the previous one whatever the clock says, and reacts to a clock
//   that went back by a chosen policy (reject, wait up to a bound, or borrow
//   ahead on the last tick up to a bound), never by reissuing;
// - reserves time ahead in its store (a reserved-until timestamp, extended a
//   window at a time, not per ID) before issuing inside it, so a generator
//   started after a restart, even with the clock set back, starts above
//   anything the previous run may have issued;
// - holds its node id through a lease, so a second live generator with the
//   same node id is refused; the reservation is fenced by the lease token, so
//   even a generator that paused past its lease cannot extend into the new
//   holder's range. The lease is held by a keeper (coord/keeper.hpp) that the
//   generator services inline, on whichever call finds a renewal due (no
//   thread of its own): its safe deadline, on a steady clock, decides when the
//   generator stops issuing. A generator that was idle past its term takes the node
//   id again on its next call when nobody else holds it, starting above the
//   store's reservation (so above anything a holder in between issued);
//   errc::lease_lost means another generator really holds the node id now.
//
// Layout (default: Twitter's 41/10/12 bits, 1 ms ticks, epoch 1288834974657):
//
//    63  62                        22 21        12 11          0
//   +---+----------------------------+------------+-------------+
//   | 0 | timestamp: ticks since     |  node id   |  sequence   |
//   |   | the layout's epoch         |            |  in a tick  |
//   +---+----------------------------+------------+-------------+
//
//   coord::file_store store{"/var/lib/app/coord.state"};
//   coord::basic_snowflake<coord::default_layout, coord::system_clock, coord::file_store>
//       ids{store, {.node = 7}};
//   auto id = ids.next();                 // result<uint64_t>
//   auto parts = coord::default_layout::decode(*id);
//
// What the application must add: a node id per process (from its deployment,
// or by trying ids until start() succeeds); one generator per process, shared
// by its threads (creating one per call costs a store round trip each); and
// the knowledge that IDs from different nodes are ordered only as well as the
// nodes' clocks agree.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

#include "coord/clock.hpp"
#include "coord/error.hpp"
#include "coord/fence.hpp"
#include "coord/keeper.hpp"
#include "coord/lease.hpp"
#include "coord/reservation.hpp"
#include "coord/result.hpp"

namespace coord {

/// The fields of a Snowflake ID.
struct snowflake_parts {
    /// The start of the ID's tick, in Unix time.
    std::chrono::sys_time<std::chrono::milliseconds> time;
    /// Ticks since the layout's epoch.
    std::int64_t tick = 0;
    std::uint64_t node = 0;  ///< the node id field
    std::uint64_t sequence = 0;  ///< the sequence field
};

/// A compile-time ID layout: the bit widths (at most 63 in all: the sign bit
/// stays 0), the tick length in milliseconds and the epoch in Unix
/// milliseconds. Impossible layouts do not compile.
template <int TimeBits, int NodeBits, int SequenceBits, std::int64_t TickMillis = 1,
          std::int64_t EpochUnixMillis = 1288834974657>
struct snowflake_layout {
    static_assert(TimeBits >= 1 && NodeBits >= 0 && SequenceBits >= 1,
                  "snowflake_layout: timestamp and sequence need at least one bit");
    static_assert(TimeBits + NodeBits + SequenceBits <= 63,
                  "snowflake_layout: timestamp + node + sequence bits must be at most 63");
    static_assert(TickMillis >= 1, "snowflake_layout: a tick is at least 1 ms");
    static_assert(EpochUnixMillis >= 0, "snowflake_layout: the epoch must not precede 1970");
    static_assert(TimeBits < 63 && (std::int64_t{1} << TimeBits) <=
                                       (std::numeric_limits<std::int64_t>::max() - EpochUnixMillis) / TickMillis,
                  "snowflake_layout: the timestamp field would outlast 64-bit milliseconds");

    /// IDs are unsigned 64-bit integers (the sign bit stays 0).
    using id_type = std::uint64_t;
    static constexpr int time_bits = TimeBits;  ///< the timestamp field's width
    static constexpr int node_bits = NodeBits;  ///< the node id field's width
    static constexpr int sequence_bits = SequenceBits;  ///< the sequence field's width
    static constexpr int total_bits = TimeBits + NodeBits + SequenceBits;  ///< the bits an ID uses
    static constexpr std::chrono::milliseconds tick{TickMillis};  ///< one unit of the timestamp field
    static constexpr std::chrono::sys_time<std::chrono::milliseconds> epoch{std::chrono::milliseconds{EpochUnixMillis}};  ///< the instant the timestamp field counts from
    static constexpr std::uint64_t max_node = (std::uint64_t{1} << NodeBits) - 1;  ///< the largest node id
    static constexpr std::uint64_t max_sequence = (std::uint64_t{1} << SequenceBits) - 1;  ///< the largest sequence number in one tick
    static constexpr std::int64_t max_tick = (std::int64_t{1} << TimeBits) - 1;  ///< the largest tick the timestamp field holds
    /// The first instant the timestamp field cannot hold: the layout's end.
    static constexpr std::chrono::sys_time<std::chrono::milliseconds> expires_at = epoch + tick * (max_tick + 1);
    /// The largest ID the layout can produce.
    static constexpr id_type max_id = (id_type{1} << total_bits) - 1;

    /// Packs the fields. Preconditions: 0 <= t <= max_tick, node <= max_node, seq <= max_sequence.
    static constexpr id_type compose(std::int64_t t, std::uint64_t node, std::uint64_t seq) noexcept {
        return (static_cast<id_type>(t) << (NodeBits + SequenceBits)) | (node << SequenceBits) | seq;
    }
    /// Splits an ID into its fields.
    static constexpr snowflake_parts decode(id_type id) noexcept {
        const auto t = static_cast<std::int64_t>((id >> (NodeBits + SequenceBits)) & static_cast<id_type>(max_tick));
        return {epoch + tick * t, t, (id >> SequenceBits) & max_node, id & max_sequence};
    }
    /// The tick holding Unix millisecond `ms` (negative before the epoch).
    static constexpr std::int64_t tick_of(std::int64_t unix_ms) noexcept {
        const auto d = unix_ms - EpochUnixMillis;
        return d >= 0 ? d / TickMillis : -((-d + TickMillis - 1) / TickMillis);
    }
    /// The Unix millisecond at which tick t starts.
    static constexpr std::int64_t tick_start(std::int64_t t) noexcept { return EpochUnixMillis + t * TickMillis; }

    /// Parses a decimal ID (digits only, within the layout's bits);
    /// errc::invalid_text otherwise.
    static result<id_type> parse(std::string_view text) noexcept {
        id_type v = 0;
        if (text.empty() || text.size() > 19) return unexpected(make_error_code(errc::invalid_text));
        auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc{} || p != text.data() + text.size() || v > max_id)
            return unexpected(make_error_code(errc::invalid_text));
        return v;
    }
};

/// Twitter's layout: 41 bits of 1 ms ticks from 2010-11-04T01:42:54.657Z
/// (runs out 2080-07-10), 10 node bits, 12 sequence bits: 4,096,000 IDs per
/// second per node.
using default_layout = snowflake_layout<41, 10, 12, 1, 1288834974657>;
/// Sonyflake's proportions: 39 bits of 10 ms ticks from 2014-09-01 (about 174
/// years), 8 node bits, 16 sequence bits (here ordered time, node, sequence).
using sonyflake_layout = snowflake_layout<39, 8, 16, 10, 1409529600000>;
/// IDs below 2^53, exact as JavaScript numbers: 41 bits of 1 ms ticks from
/// 2020-01-01 (runs out 2089), 4 node bits, 8 sequence bits (256,000 per
/// second per node).
using js_safe_layout = snowflake_layout<41, 4, 8, 1, 1577836800000>;
static_assert(js_safe_layout::max_id < (std::uint64_t{1} << 53));

/// What the generator does when a tick's sequence is used up.
enum class exhaustion_policy {
    wait,    ///< wait for the next tick (the clock's sleep_until): the default
    reject,  ///< return errc::sequence_exhausted
};

/// What the generator does when the clock reads earlier than its last tick.
enum class rollback_policy {
    reject,  ///< return errc::clock_rollback
    wait,    ///< wait for the clock to catch up when it is behind by at most the bound, else reject: the default
    borrow,  ///< keep issuing on the last tick (and the next ones) up to `bound` ahead of the clock, else reject
};

/// Something the generator noticed (reported on slow paths only).
struct snowflake_event {
    /// What was noticed.
    enum kind_t {
        rollback_seen,         ///< the clock read `amount` earlier than the last tick
        time_borrowed,         ///< an ID was issued `amount` ahead of the clock
        sequence_exhausted,    ///< a tick's sequence ran out
        reservation_extended,  ///< the store's reserved-until moved `amount` ahead
        lease_renewed,         ///< the node lease was renewed
        lease_lost,            ///< another generator holds the node id: issuing stopped until it is free
        lease_reacquired,      ///< the node lease, ended while idle, was taken again
    } kind;  ///< what was noticed
    std::chrono::nanoseconds amount{0};  ///< how much, where the kind says
};

/// Counters of what the generator noticed.
struct snowflake_stats {
    std::uint64_t rollbacks_seen = 0;      ///< calls that found the clock behind the last tick
    std::uint64_t borrowed_ids = 0;        ///< IDs issued on a tick ahead of the clock
    std::uint64_t sequence_exhausted = 0;  ///< calls that found the tick's sequence used up
    std::uint64_t reservations = 0;        ///< store writes extending the reservation
    std::uint64_t lease_renewals = 0;  ///< node lease renewals that succeeded
    std::uint64_t lease_reacquisitions = 0;  ///< node leases taken again after their term ended
    bool lease_lost = false;                 ///< another generator holds the node id now
};

/// Generator settings. Out-of-range values make the constructor throw
/// std::invalid_argument naming the field.
struct snowflake_options {
    /// This process's node id: 0 .. Layout::max_node.
    std::uint64_t node = 0;
    exhaustion_policy when_exhausted = exhaustion_policy::wait;  ///< what a call does when the tick's sequence ran out
    rollback_policy when_clock_goes_back = rollback_policy::wait;  ///< what a call does when the clock reads earlier than the last tick
    /// rollback_policy::wait: the longest wait; borrow: the most time issued ahead of the clock.
    std::chrono::milliseconds rollback_bound{10};
    /// Start each tick's sequence at a random value in the lower half, so
    /// that shards keyed on the low bits are not skewed to sequence 0.
    bool random_sequence_start = false;
    /// How far ahead the store's reserved-until is moved at a time: one store
    /// write per window. A generator started within a window of the previous
    /// run's last ID waits (clock.sleep_until) for the clock to pass it.
    std::chrono::milliseconds reserve_ahead{200};
    /// The store key prefix: reservations under "<name>/<node>", the node lease
    /// under "<name>/node/<node>".
    std::string name = "snowflake";
    /// Hold the node id through a lease (when the store is a lease_store).
    bool hold_node_lease = true;
    /// The node lease's term. A keeper (coord/keeper.hpp) holds the lease:
    /// renewed after a third of the term by whichever call finds it due, and
    /// vouched for until its safe deadline (the term from when the last
    /// renewal was sent, less 1% and 2 ms, on a steady clock: the keeper's
    /// defaults). Once that passes without a renewal (an idle generator, an
    /// unreachable store) or a renewal is refused, the lease is let go and
    /// nothing is issued until the node id is acquired again: the next call
    /// takes it if nobody else holds it (errc::lease_lost when somebody does;
    /// the store's error when it cannot be reached), starting above the
    /// store's reservation. Retries are at most every 1/20 of the term.
    std::chrono::milliseconds node_lease_ttl{10000};
    /// Called on slow paths (rollback, exhaustion, reservation, lease); may be
    /// called from several threads at once.
    std::function<void(const snowflake_event&)> on_event;
};

/// A time reservation store that keeps no leases, wrapped to say so: a
/// Snowflake generator on it does not hold its node id, and two live
/// generators given the same node id can then issue the same IDs. Only for a
/// deployment that guarantees unique node ids by other means.
///   coord::without_node_lease<my_store> unleased{store};
///   coord::basic_snowflake<coord::default_layout, coord::system_clock,
///                          coord::without_node_lease<my_store>> ids{unleased, {.node = 7}};
template <time_reservation_store Store>
class without_node_lease {
public:
    /// Wraps `store`, which must outlive this object.
    explicit without_node_lease(Store& store) noexcept : store_(&store) {}
    /// The wrapped store's time_reserve.
    result<std::int64_t, write_error> time_reserve(std::string_view key, std::int64_t until_ms, fence_token token) {
        return store_->time_reserve(key, until_ms, token);
    }

private:
    Store* store_;
};

namespace detail {
template <class S>
inline constexpr bool opts_out_of_node_lease = false;
template <class S>
inline constexpr bool opts_out_of_node_lease<without_node_lease<S>> = true;

// The keeper of a generator's node lease, and the lease it holds; nothing on
// a store without leases.
struct no_node_keeper {
    template <class... A>
    explicit no_node_keeper(A&&...) noexcept {}
};
template <class Store, class Steady, bool = lease_store<Store>>
struct node_keeper {
    using keeper = no_node_keeper;
    using held = no_node_keeper;
};
template <class Store, class Steady>
struct node_keeper<Store, Steady, true> {
    using keeper = basic_keeper<Store, Steady>;
    using held = basic_held_lease<Store, Steady>;
};
// Serviced by the generator's own calls: no thread.
inline keeper_options inline_keeper_options() {
    keeper_options o;
    o.own_thread = false;
    return o;
}
}  // namespace detail

/// The Snowflake generator. next() is safe from any number of threads and
/// lock-free on its hot path (one clock read, one compare-and-swap); the
/// store is written once per reservation window and the lease renewed once
/// per third of its term, on whichever call finds it due. Not copyable; the
/// store must outlive it.
template <class Layout, unix_clock Clock, time_reservation_store Store>
class basic_snowflake {
    static_assert(lease_store<Store> || detail::opts_out_of_node_lease<Store>,
                  "coord::basic_snowflake needs a lease_store to hold its node id (without it, two generators "
                  "given one node id issue the same IDs): use a store with leases, or wrap the store in "
                  "coord::without_node_lease<Store> to opt out explicitly");

public:
    /// The ID layout.
    using layout = Layout;
    /// The ID type.
    using id_type = typename Layout::id_type;

    /// Checks the options (throws std::invalid_argument naming the field)
    /// and that the layout has not run out on `clock` (throws
    /// std::invalid_argument). Does not touch the store: start() does.
    basic_snowflake(Store& store, snowflake_options options, Clock clock = Clock{})
        : store_(&store), clock_(std::move(clock)), opt_(std::move(options)) {
        if (opt_.node > Layout::max_node)
            throw std::invalid_argument("snowflake: node " + std::to_string(opt_.node) + " is out of range 0.." +
                                        std::to_string(Layout::max_node));
        if (opt_.rollback_bound < std::chrono::milliseconds::zero())
            throw std::invalid_argument("snowflake: rollback_bound must be >= 0");
        if (opt_.reserve_ahead < Layout::tick) throw std::invalid_argument("snowflake: reserve_ahead must be >= one tick");
        if (opt_.node_lease_ttl < std::chrono::milliseconds{30})
            throw std::invalid_argument("snowflake: node_lease_ttl must be >= 30 ms");
        if (opt_.name.empty()) throw std::invalid_argument("snowflake: name must not be empty");
        const auto now = unix_millis(clock_.now());
        if (now >= Layout::expires_at.time_since_epoch().count())
            throw std::invalid_argument("snowflake: the layout's timestamp field ran out at Unix ms " +
                                        std::to_string(Layout::expires_at.time_since_epoch().count()));
        if (now < Layout::epoch.time_since_epoch().count())
            throw std::invalid_argument("snowflake: the clock reads before the layout's epoch");
        key_ = opt_.name + "/" + std::to_string(opt_.node);
        lease_name_ = opt_.name + "/node/" + std::to_string(opt_.node);
        std::random_device rd;
        owner_ = "pid" + std::to_string(::getpid()) + "-" + std::to_string(rd()) + std::to_string(rd());
    }

    basic_snowflake(const basic_snowflake&) = delete;
    basic_snowflake& operator=(const basic_snowflake&) = delete;

    /// Releases the node lease (the reservation stays, so the next run starts above it).
    ~basic_snowflake() {
        std::lock_guard lk(mutex_);
        release_lease_locked();
    }

    /// Takes the node lease and reads the reservation. Called by the first
    /// next() when not called before. Refusals: errc::lease_held (another
    /// live generator has this node id), errc::stale_fence (a newer holder
    /// took over), the store's error. Cost: two store operations.
    result<void> start() {
        std::lock_guard lk(mutex_);
        return start_locked();
    }

    /// The next ID: above every ID this generator issued before and every
    /// ID a previous run with this node id and store may have issued.
    /// Refusals: errc::clock_rollback, errc::sequence_exhausted (reject
    /// policy), errc::time_exhausted (the layout ran out), errc::lease_lost
    /// (another generator holds the node id now; a later call takes it again
    /// once it is free), the store's error when a reservation or lease
    /// renewal is due and the store cannot be reached.
    result<id_type> next() {
        // The common cases in a straight line: the same tick with sequence
        // left, or a later tick inside the reservation. Everything else
        // (start, lease renewal, exhaustion, rollback, reservation) is claim().
        // The bounds of the last ID's tick come from last_ alone, so they are
        // ready when the clock returns: the same-tick case needs two
        // comparisons after the clock read, not a division.
        // Another thread's ID in between makes the compare-and-swap fail and
        // hands back the newer state: retry at once with the same clock
        // reading while that state's tick is not after it (a later tick is
        // another thread's later reading: claim() reads the clock again).
        auto cur = last_.load(std::memory_order_acquire);
        auto cur_tick = tick_of_state(cur);
        auto cur_start_ns = tick_start_ns(cur_tick), cur_end_ns = tick_start_ns(cur_tick + 1);
        const auto now_ns = since_epoch_ns(clock_.now());
        if (now_ns < slow_at_ns_.load(std::memory_order_relaxed)) {
            for (;;) {
                std::uint64_t next_state = 0;
                if (now_ns >= cur_start_ns && now_ns < cur_end_ns) {
                    if ((cur & Layout::max_sequence) != Layout::max_sequence) next_state = cur + 1;
                } else if (const auto now_tick = Layout::tick_of(floor_ms(now_ns));
                           now_tick > cur_tick && now_tick <= reserved_tick_.load(std::memory_order_acquire) &&
                           !opt_.random_sequence_start) {
                    next_state = pack(now_tick, 0);
                }
                if (next_state == 0) break;
                if (last_.compare_exchange_weak(cur, next_state, std::memory_order_acq_rel, std::memory_order_acquire))
                    return Layout::compose(tick_of_state(next_state), opt_.node, next_state & Layout::max_sequence);
                cur_tick = tick_of_state(cur);
                cur_start_ns = tick_start_ns(cur_tick);
                cur_end_ns = tick_start_ns(cur_tick + 1);
            }
        }
        auto c = claim(1);
        if (!c) return unexpected(c.error());
        return Layout::compose(c->tick, opt_.node, c->seq);
    }

    /// Fills `out` with increasing IDs, claiming as many per tick as the
    /// sequence allows. On a refusal some IDs may have been consumed (holes,
    /// never duplicates) and the error is returned.
    result<void> next(std::span<id_type> out) {
        std::size_t done = 0;
        while (done < out.size()) {
            auto c = claim(out.size() - done);
            if (!c) return unexpected(c.error());
            for (std::uint64_t i = 0; i < c->count; ++i) out[done++] = Layout::compose(c->tick, opt_.node, c->seq + i);
        }
        return {};
    }

    /// How far the last issued tick is ahead of the clock now (zero unless
    /// the clock went back and the borrow policy is issuing ahead).
    std::chrono::milliseconds borrowed() const {
        const auto last_tick = tick_of_state(last_.load(std::memory_order_acquire));
        const auto ahead = Layout::tick_start(last_tick) - unix_millis(clock_.now());
        return std::chrono::milliseconds{std::max<std::int64_t>(0, ahead)};
    }

    /// A snapshot of the counters.
    snowflake_stats stats() const {
        snowflake_stats s;
        s.rollbacks_seen = rollbacks_.load(std::memory_order_relaxed);
        s.borrowed_ids = borrowed_ids_.load(std::memory_order_relaxed);
        s.sequence_exhausted = exhausted_.load(std::memory_order_relaxed);
        s.reservations = reservations_.load(std::memory_order_relaxed);
        s.lease_renewals = renewals_.load(std::memory_order_relaxed);
        s.lease_lost = lost_.load(std::memory_order_relaxed);
        s.lease_reacquisitions = reacquired_.load(std::memory_order_relaxed);
        return s;
    }

    /// The options in force.
    const snowflake_options& options() const noexcept { return opt_; }

private:
    static constexpr int seq_shift = Layout::sequence_bits;
    // The node lease's safe deadline is kept on a steady clock: the
    // generator's own when it is one (a test's manual clock), else the
    // machine's (a wall clock may step).
    using keeper_clock = std::conditional_t<monotonic_clock<Clock>, Clock, steady_clock>;
    static keeper_clock keeper_clock_of(const Clock& c) {
        if constexpr (std::is_same_v<keeper_clock, Clock>) return c;
        else return keeper_clock{};
    }
    static constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();

    struct claimed {
        std::int64_t tick;
        std::uint64_t seq;
        std::uint64_t count;
    };

    // last_ holds ((tick + 1) << sequence_bits) | sequence, so that tick -1
    // ("nothing issued yet") is representable and 0 never collides with a real ID.
    static std::uint64_t pack(std::int64_t tick, std::uint64_t seq) noexcept {
        return (static_cast<std::uint64_t>(tick + 1) << seq_shift) | seq;
    }
    static constexpr std::int64_t floor_ms(std::int64_t ns) noexcept {
        if (ns >= 0) [[likely]]
            return ns / 1'000'000;
        return -((-ns + 999'999) / 1'000'000);
    }
    // The clock nanosecond at which tick t starts (saturated).
    static constexpr std::int64_t tick_start_ns(std::int64_t t) noexcept {
        return detail::ns_of_ms_saturated(Layout::tick_start(t));
    }
    static std::int64_t tick_of_state(std::uint64_t state) noexcept {
        return static_cast<std::int64_t>(state >> seq_shift) - 1;
    }
    typename Clock::time_point time_of_tick(std::int64_t tick) const {
        using D = typename Clock::duration;
        return typename Clock::time_point{
            std::chrono::duration_cast<D>(std::chrono::milliseconds{Layout::tick_start(tick)})};
    }
    void emit(typename snowflake_event::kind_t k, std::chrono::nanoseconds amount) const {
        if (opt_.on_event) opt_.on_event(snowflake_event{k, amount});
    }
    std::uint64_t first_sequence() const noexcept {
        if (!opt_.random_sequence_start) return 0;
        thread_local std::uint64_t x = std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32) | 1;
        x ^= x << 13;  // xorshift64: spreading, not secrecy
        x ^= x >> 7;
        x ^= x << 17;
        return x % ((Layout::max_sequence + 1) / 2);
    }

    // The hot path: claims up to `want` consecutive sequence numbers of one
    // tick with one compare-and-swap on last_.
    result<claimed> claim(std::uint64_t want) {
        if (!started_.load(std::memory_order_acquire))
            if (auto r = start(); !r) return unexpected(r.error());
        for (;;) {
            // Load the last ID before reading the clock: whoever issued it read
            // the clock earlier, so a clock that did not step back reads at
            // least its tick, and a thread preempted between the two steps
            // cannot mistake another thread's progress for a rollback.
            auto cur = last_.load(std::memory_order_acquire);
            const auto now_ns = since_epoch_ns(clock_.now());
            if (now_ns >= slow_at_ns_.load(std::memory_order_acquire))
                if (auto r = maintain_lease(now_ns); !r) return unexpected(r.error());
            const auto now_tick = Layout::tick_of(floor_ms(now_ns));
            const auto cur_tick = tick_of_state(cur);
            const auto cur_seq = cur & Layout::max_sequence;
            std::int64_t tick;
            std::uint64_t seq;
            if (now_tick > cur_tick) {
                tick = now_tick;
                seq = first_sequence();
            } else if (now_tick == cur_tick) {
                if (cur_seq == Layout::max_sequence) {
                    exhausted_.fetch_add(1, std::memory_order_relaxed);
                    emit(snowflake_event::sequence_exhausted, {});
                    if (opt_.when_exhausted == exhaustion_policy::reject)
                        return unexpected(make_error_code(errc::sequence_exhausted));
                    clock_.sleep_until(time_of_tick(cur_tick + 1));
                    continue;
                }
                tick = cur_tick;
                seq = cur_seq + 1;
            } else {
                const auto behind = std::chrono::milliseconds{(cur_tick - now_tick) * Layout::tick.count()};
                if (cur == start_state_.load(std::memory_order_relaxed) && behind <= opt_.reserve_ahead) {
                    // Nothing issued yet and the clock is inside the previous
                    // run's reservation: a restart, not a step back. Wait it out.
                    clock_.sleep_until(time_of_tick(cur_tick + 1));
                    continue;
                }
                rollbacks_.fetch_add(1, std::memory_order_relaxed);
                emit(snowflake_event::rollback_seen, behind);
                if (opt_.when_clock_goes_back == rollback_policy::reject)
                    return unexpected(make_error_code(errc::clock_rollback));
                if (opt_.when_clock_goes_back == rollback_policy::wait) {
                    if (behind > opt_.rollback_bound) return unexpected(make_error_code(errc::clock_rollback));
                    clock_.sleep_until(time_of_tick(cur_tick));
                    continue;
                }
                // borrow: continue on the last tick, then the ones after it.
                tick = cur_seq == Layout::max_sequence ? cur_tick + 1 : cur_tick;
                seq = cur_seq == Layout::max_sequence ? first_sequence() : cur_seq + 1;
                const auto ahead = std::chrono::milliseconds{(tick - now_tick) * Layout::tick.count()};
                if (ahead > opt_.rollback_bound) return unexpected(make_error_code(errc::clock_rollback));
                borrowed_ids_.fetch_add(1, std::memory_order_relaxed);
                emit(snowflake_event::time_borrowed, ahead);
            }
            if (tick > Layout::max_tick) return unexpected(make_error_code(errc::time_exhausted));
            if (tick > reserved_tick_.load(std::memory_order_acquire)) {
                if (auto r = extend_reservation(tick, now_ns); !r) return unexpected(r.error());
                continue;
            }
            const auto count = std::min<std::uint64_t>(want, Layout::max_sequence - seq + 1);
            if (last_.compare_exchange_weak(cur, pack(tick, seq + count - 1), std::memory_order_acq_rel,
                                            std::memory_order_acquire))
                return claimed{tick, seq, count};
        }
    }

    result<void> start_locked() {
        if (started_.load(std::memory_order_relaxed)) return {};
        const auto now_ns = since_epoch_ns(clock_.now());
        fence_token token = 0;
        bool held = false;
        if constexpr (lease_store<Store>) {
            if (opt_.hold_node_lease) {
                auto l = keeper_.hold(lease_name_, owner_, opt_.node_lease_ttl);
                if (!l) return unexpected(l.error().code);
                held_.emplace(std::move(*l));
                token = held_->token();
                held = true;
                lease_granted(now_ns);
            }
        }
        if (!held) slow_at_ns_.store(never, std::memory_order_release);
        token_ = token;
        auto r = store_->time_reserve(key_, 0, token_);
        if (!r) {
            release_lease_locked();
            slow_at_ns_.store(std::numeric_limits<std::int64_t>::min(), std::memory_order_release);
            return unexpected(r.error().code);
        }
        // The previous run may have issued on any tick starting before *r.
        const auto first_free = std::max<std::int64_t>(0, Layout::tick_of(*r - 1) + 1);
        start_state_.store(pack(first_free - 1, Layout::max_sequence), std::memory_order_relaxed);
        last_.store(pack(first_free - 1, Layout::max_sequence), std::memory_order_release);
        reserved_tick_.store(first_free - 1, std::memory_order_release);
        started_.store(true, std::memory_order_release);
        return {};
    }

    // Moves the store's reserved-until past `tick` (one store write per
    // window), fenced by the lease token.
    result<void> extend_reservation(std::int64_t tick, std::int64_t now_ns) {
        std::lock_guard lk(mutex_);
        if (tick <= reserved_tick_.load(std::memory_order_relaxed)) return {};
        if (auto held = maintain_lease_locked(now_ns); !held) return held;
        if (tick <= reserved_tick_.load(std::memory_order_relaxed)) return {};
        const auto until = Layout::tick_start(tick) + std::max(opt_.reserve_ahead, Layout::tick).count();
        auto r = store_->time_reserve(key_, until, token_);
        if (!r) {
            if (r.error() == errc::stale_fence) return lose_lease(now_ns);  // a newer holder fenced us out
            return unexpected(r.error().code);
        }
        reservations_.fetch_add(1, std::memory_order_relaxed);
        emit(snowflake_event::reservation_extended,
             std::chrono::milliseconds{*r - Layout::tick_start(reserved_tick_.load(std::memory_order_relaxed) + 1)});
        reserved_tick_.store(std::min(Layout::tick_of(*r - 1), Layout::max_tick), std::memory_order_release);
        return {};
    }

    // The lease was granted or renewed: the slow path is next taken when the
    // keeper has something due (a renewal, or the safe deadline).
    void lease_granted(std::int64_t now_ns) {
        if constexpr (lease_store<Store>) {
            const auto due = keeper_.service();
            std::int64_t at = never;
            if (due != keeper_clock::time_point::max()) {
                if constexpr (std::is_same_v<keeper_clock, Clock>) {
                    at = since_epoch_ns(due);
                } else {  // the keeper's steady clock, mapped onto the generator's
                    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(due - keeper_clock_.now());
                    at = detail::add_saturated(now_ns, std::max<std::int64_t>(0, left.count()));
                }
            }
            slow_at_ns_.store(at, std::memory_order_release);
        } else {
            (void)now_ns;
        }
    }

    // Another generator holds the node id now: nothing is issued; a later
    // call (at most every 1/20 of the term) tries to take it again.
    result<void> lose_lease(std::int64_t now_ns) {
        release_lease_locked();
        lost_.store(true, std::memory_order_relaxed);
        slow_at_ns_.store(std::numeric_limits<std::int64_t>::min(), std::memory_order_release);
        retry_at_ns_ = detail::add_saturated(now_ns, retry_interval_ns());
        last_lease_error_ = make_error_code(errc::lease_lost);
        emit(snowflake_event::lease_lost, {});
        return unexpected(last_lease_error_);
    }
    std::int64_t retry_interval_ns() const {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(opt_.node_lease_ttl).count() / 20;
    }

    result<void> maintain_lease(std::int64_t now_ns) {
        std::lock_guard lk(mutex_);
        return maintain_lease_locked(now_ns);
    }

    // Makes sure the node lease is held at now_ns: the keeper renews it when
    // due. Once the keeper can no longer vouch for it (a renewal refused, or
    // the safe deadline passed with none answered: an idle generator, an
    // unreachable store), it is let go (released, when the store still has it
    // as this generator's) and the node id acquired again: a new grant,
    // issuing above the store's reservation, so above anything a holder in
    // between issued.
    result<void> maintain_lease_locked(std::int64_t now_ns) {
        if constexpr (lease_store<Store>) {
            if (!opt_.hold_node_lease) {
                slow_at_ns_.store(never, std::memory_order_release);
                return {};
            }
            if (!held_) return reacquire_locked(now_ns);
            const auto before = held_->renewals();
            lease_granted(now_ns);  // services the keeper and schedules the next slow path
            if (const auto after = held_->renewals(); after != before) {
                renewals_.fetch_add(after - before, std::memory_order_relaxed);
                emit(snowflake_event::lease_renewed, {});
            }
            if (held_->valid()) return {};
            release_lease_locked();
            retry_at_ns_ = std::numeric_limits<std::int64_t>::min();
            return reacquire_locked(now_ns);
        } else {
            (void)now_ns;
            slow_at_ns_.store(never, std::memory_order_release);
            return {};
        }
    }

    // Acquires the node lease again after its term ended, and starts above
    // the store's reservation: a holder in between may have issued up to it.
    result<void> reacquire_locked(std::int64_t now_ns) {
        if constexpr (lease_store<Store>) {
            slow_at_ns_.store(std::numeric_limits<std::int64_t>::min(), std::memory_order_release);
            if (now_ns < retry_at_ns_) return unexpected(last_lease_error_);
            auto l = keeper_.hold(lease_name_, owner_, opt_.node_lease_ttl);
            if (!l) {
                if (l.error() == errc::lease_held) return lose_lease(now_ns);
                retry_at_ns_ = detail::add_saturated(now_ns, retry_interval_ns());
                last_lease_error_ = l.error().code;
                return unexpected(last_lease_error_);
            }
            auto r = store_->time_reserve(key_, 0, l->token());
            if (!r) {
                (void)l->release();
                retry_at_ns_ = detail::add_saturated(now_ns, retry_interval_ns());
                last_lease_error_ = r.error().code;
                return unexpected(last_lease_error_);
            }
            held_.emplace(std::move(*l));
            token_ = held_->token();
            // Everything below the store's reserved-until may have been issued.
            const auto floor_tick = std::max<std::int64_t>(-1, Layout::tick_of(*r - 1));
            const auto floor_state = pack(floor_tick, Layout::max_sequence);
            auto cur = last_.load(std::memory_order_acquire);
            while (cur < floor_state &&
                   !last_.compare_exchange_weak(cur, floor_state, std::memory_order_acq_rel, std::memory_order_acquire)) {
            }
            if (cur < floor_state) start_state_.store(floor_state, std::memory_order_relaxed);
            if (floor_tick > reserved_tick_.load(std::memory_order_relaxed))
                reserved_tick_.store(floor_tick, std::memory_order_release);
            lost_.store(false, std::memory_order_relaxed);
            reacquired_.fetch_add(1, std::memory_order_relaxed);
            lease_granted(now_ns);
            emit(snowflake_event::lease_reacquired, {});
            return {};
        } else {
            (void)now_ns;
            return {};
        }
    }

    void release_lease_locked() {
        if constexpr (lease_store<Store>) {
            if (held_) (void)held_->release();
            held_.reset();
        }
    }

    Store* store_;
    Clock clock_;
    snowflake_options opt_;
    std::string key_, lease_name_, owner_;

    // Hot path. last_ is the one word every next() writes: alone on its cache
    // line, so that the words every next() only reads (below) are not
    // invalidated by each ID another core issues.
    alignas(64) std::atomic<std::uint64_t> last_{0};  // pack(tick, sequence) of the last ID issued
    alignas(64) std::atomic<std::int64_t> reserved_tick_{-1};  // the last tick covered by the store's reservation
    // A clock reading from which next() must take the slow path: a lease
    // renewal is due, or (before start and after a lost lease) always.
    std::atomic<std::int64_t> slow_at_ns_{std::numeric_limits<std::int64_t>::min()};
    std::atomic<bool> started_{false};
    // last_ as start() (or a re-acquired lease) left it: a clock behind it is
    // a restart inside the reservation, not a step back.
    std::atomic<std::uint64_t> start_state_{0};
    std::atomic<bool> lost_{false};  // another generator holds the node id (stats)
    alignas(64) std::atomic<std::uint64_t> rollbacks_{0}, borrowed_ids_{0}, exhausted_{0}, reservations_{0},
        renewals_{0}, reacquired_{0};

    // Slow path, under mutex_. The keeper is serviced inline (no thread);
    // held_ is declared after it, so it ends first.
    std::mutex mutex_;
    keeper_clock keeper_clock_ = keeper_clock_of(clock_);
    typename detail::node_keeper<Store, keeper_clock>::keeper keeper_{*store_, detail::inline_keeper_options(),
                                                                       keeper_clock_};
    std::optional<typename detail::node_keeper<Store, keeper_clock>::held> held_;
    fence_token token_ = 0;
    std::int64_t retry_at_ns_ = std::numeric_limits<std::int64_t>::min();  // no store call before this
    error last_lease_error_;
};

}  // namespace coord
