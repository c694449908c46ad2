// SPDX-License-Identifier: Apache-2.0
// coord/uuid7.hpp: UUIDs (RFC 9562): the `uuid` value type, and a UUIDv7
// generator with the RFC's monotonicity methods, a testable clock, strong
// buffered randomness and a defined answer to a clock that went back.
//
// UUIDv7 puts Unix milliseconds in the top 48 bits, so IDs sort by time
// without a coordinator. What goes wrong in practice: UUIDs out of order
// within a millisecond or across threads, generators that trust a wall clock
// that stepped back, and a system call for randomness per UUID. Here
// - one generator shared by threads hands out strictly increasing UUIDs (one
//   compare-and-swap on a 64-bit state), with RFC 9562 section 6.2 method 1
//   (a 16-bit counter seeded randomly each millisecond, top bit clear as a
//   guard) or method 3 (12 bits of extra clock precision in rand_a, as
//   PostgreSQL 18 does), or plain random (no order within a millisecond);
// - a counter that overflows moves the timestamp forward one millisecond, as
//   the RFC allows; it never wraps;
// - a clock that went back is absorbed up to a bound (the generator keeps
//   issuing after its last timestamp); past it, a chosen policy rejects or
//   accepts the new time and counts it;
// - a Store may keep a reserved-until time so that order survives a restart.
//
//    0                   1                   2                   3
//    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//   |                           unix_ts_ms                          |
//   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//   |          unix_ts_ms           |  ver  |       rand_a          |
//   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//   |var|                        rand_b                             |
//   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//   |                            rand_b                             |
//   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//   method 1: rand_a and the top 4 bits of rand_b hold the counter.
//
//   coord::uuid7_generator gen;                 // system clock, os_random
//   coord::uuid u = *gen.next();
//   std::string s = u.to_string();              // 018f...-7...-8...-...
//   auto back = coord::uuid::parse(s);          // result<uuid>
//
// What the application must add: UUIDs from different generators (machines,
// processes) are ordered only as well as their clocks agree; and a UUIDv7
// shows when it was made, so do not use one where that leaks something.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "coord/clock.hpp"
#include "coord/error.hpp"
#include "coord/random.hpp"
#include "coord/reservation.hpp"
#include "coord/result.hpp"

namespace coord {

/// A UUID: 16 bytes in network order. Comparisons follow byte order, which
/// for v7 is time order. Trivially copyable.
class uuid {
public:
    /// The variant field's meaning (RFC 9562, section 4.1).
    enum class variant_kind { ncs, rfc9562, microsoft, future };

    std::array<std::uint8_t, 16> bytes{};  ///< the 16 bytes, in network order

    constexpr uuid() noexcept = default;
    /// The UUID with these bytes.
    constexpr explicit uuid(const std::array<std::uint8_t, 16>& b) noexcept : bytes(b) {}

    /// A version 7 UUID from its fields: 48-bit Unix milliseconds, 12-bit
    /// rand_a, 62-bit rand_b (higher bits are dropped).
    static constexpr uuid make_v7(std::uint64_t unix_ts_ms, std::uint16_t rand_a, std::uint64_t rand_b) noexcept {
        const std::uint64_t hi = (unix_ts_ms << 16) | 0x7000u | (rand_a & 0x0FFFu);
        const std::uint64_t lo = (std::uint64_t{0x2} << 62) | (rand_b & 0x3FFFFFFFFFFFFFFFull);
        return from_halves(hi, lo);
    }
    /// A UUID from its two big-endian 64-bit halves.
    static constexpr uuid from_halves(std::uint64_t hi, std::uint64_t lo) noexcept {
        uuid u;
        if (!std::is_constant_evaluated()) {
            // One 16-byte store: two 8-byte stores read back as 16 bytes
            // stall store forwarding, which cost a third of a UUID's time.
            using v2 = std::uint64_t __attribute__((vector_size(16)));
            const v2 v{__builtin_bswap64(hi), __builtin_bswap64(lo)};
            std::memcpy(u.bytes.data(), &v, 16);
            return u;
        }
        for (int i = 0; i < 8; ++i) {
            u.bytes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(hi >> (56 - 8 * i));
            u.bytes[static_cast<std::size_t>(8 + i)] = static_cast<std::uint8_t>(lo >> (56 - 8 * i));
        }
        return u;
    }

    /// The version field (bits 48-51): 7 for UUIDv7, 4 for random UUIDs.
    constexpr int version() const noexcept { return bytes[6] >> 4; }
    /// The variant field (bits 64-65..67).
    constexpr variant_kind variant() const noexcept {
        const auto v = bytes[8];
        if ((v & 0x80) == 0) return variant_kind::ncs;
        if ((v & 0xC0) == 0x80) return variant_kind::rfc9562;
        if ((v & 0xE0) == 0xC0) return variant_kind::microsoft;
        return variant_kind::future;
    }
    /// unix_ts_ms: the top 48 bits (meaningful for v7).
    constexpr std::uint64_t unix_ts_ms() const noexcept {
        std::uint64_t v = 0;
        for (int i = 0; i < 6; ++i) v = (v << 8) | bytes[static_cast<std::size_t>(i)];
        return v;
    }
    /// rand_a: the 12 bits after the version.
    constexpr std::uint16_t rand_a() const noexcept {
        return static_cast<std::uint16_t>(((bytes[6] & 0x0F) << 8) | bytes[7]);
    }
    /// rand_b: the 62 bits after the variant.
    constexpr std::uint64_t rand_b() const noexcept {
        std::uint64_t v = bytes[8] & 0x3F;
        for (int i = 9; i < 16; ++i) v = (v << 8) | bytes[static_cast<std::size_t>(i)];
        return v;
    }
    /// The creation time of a v7 UUID (RFC variant); nullopt for others.
    std::optional<std::chrono::sys_time<std::chrono::milliseconds>> time() const noexcept {
        if (version() != 7 || variant() != variant_kind::rfc9562) return std::nullopt;
        return std::chrono::sys_time<std::chrono::milliseconds>{
            std::chrono::milliseconds{static_cast<std::int64_t>(unix_ts_ms())}};
    }
    /// True for the nil UUID (all zero).
    constexpr bool is_nil() const noexcept {
        return std::all_of(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b == 0; });
    }

    /// Writes the canonical form (36 lowercase characters, 8-4-4-4-12) to out.
    void to_chars(char* out) const noexcept {
        constexpr char hex[] = "0123456789abcdef";
        for (std::size_t i = 0, o = 0; i < 16; ++i) {
            if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
            out[o++] = hex[bytes[i] >> 4];
            out[o++] = hex[bytes[i] & 0x0F];
        }
    }
    /// The canonical form: 36 lowercase characters, 8-4-4-4-12.
    std::string to_string() const {
        std::string s(36, '\0');
        to_chars(s.data());
        return s;
    }

    /// Parses the canonical form in either case, or the same prefixed with
    /// "urn:uuid:" (prefix in either case). Anything else (braces, missing
    /// or misplaced dashes, non-hex digits, other lengths) is
    /// errc::invalid_text. Never throws.
    static result<uuid> parse(std::string_view text) noexcept {
        constexpr std::string_view urn = "urn:uuid:";
        if (text.size() == 45) {
            for (std::size_t i = 0; i < urn.size(); ++i)
                if ((text[i] | 0x20) != urn[i]) return unexpected(make_error_code(errc::invalid_text));
            text.remove_prefix(urn.size());
        }
        if (text.size() != 36) return unexpected(make_error_code(errc::invalid_text));
        uuid u;
        std::size_t pos = 0;
        for (std::size_t i = 0; i < 16; ++i) {
            if (i == 4 || i == 6 || i == 8 || i == 10) {
                if (text[pos] != '-') return unexpected(make_error_code(errc::invalid_text));
                ++pos;
            }
            const int hi = hex_value(text[pos]), lo = hex_value(text[pos + 1]);
            if (hi < 0 || lo < 0) return unexpected(make_error_code(errc::invalid_text));
            u.bytes[i] = static_cast<std::uint8_t>((hi << 4) | lo);
            pos += 2;
        }
        return u;
    }

    /// Equal bytes.
    friend constexpr bool operator==(const uuid&, const uuid&) noexcept = default;
    /// Byte order, which for version 7 is time order.
    friend constexpr auto operator<=>(const uuid&, const uuid&) noexcept = default;

private:
    static constexpr int hex_value(char c) noexcept {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    }
};

/// RFC 9562 section 6.2's ways of ordering UUIDs within a millisecond.
enum class uuid7_method {
    counter,          ///< method 1: 16-bit counter, seeded randomly each ms with the top bit clear (default)
    clock_precision,  ///< method 3: 12 bits of sub-millisecond time in rand_a (PostgreSQL 18's choice)
    random,           ///< no order within a millisecond: all 74 bits random
};

/// What to do when the clock is further behind the last timestamp than the bound.
enum class uuid7_rollback_policy {
    reject,  ///< errc::clock_rollback until the clock catches up (default)
    accept,  ///< take the new time (order breaks once) and count it in stats()
};

/// Generator settings; out-of-range values make the constructor throw
/// std::invalid_argument naming the field.
struct uuid7_options {
    uuid7_method method = uuid7_method::counter;  ///< how UUIDs of one millisecond are ordered
    /// How far the generator keeps issuing after its last timestamp while the
    /// clock reads earlier (also how far ahead a counter overflow may carry).
    std::chrono::milliseconds rollback_bound{10'000};
    /// What a call does when the clock is further behind than rollback_bound.
    uuid7_rollback_policy past_bound = uuid7_rollback_policy::reject;
    /// With a store: how far ahead the reserved-until time is moved at a time.
    /// At most rollback_bound.
    std::chrono::milliseconds reserve_ahead{1000};
    /// The store key.
    std::string name = "uuid7";
};

/// What the generator noticed.
struct uuid7_stats {
    std::uint64_t rollbacks_absorbed = 0;  ///< UUIDs issued after the last timestamp while the clock was behind
    std::uint64_t rollbacks_accepted = 0;  ///< times the accept policy took an earlier time
    std::uint64_t rollbacks_rejected = 0;  ///< calls refused with errc::clock_rollback
    std::uint64_t counter_overflows = 0;   ///< times the timestamp moved forward because the counter ran out
};

namespace detail {

/// The ordering state of a UUIDv7 generator in 64 bits, and the step from
/// one UUID to the next (shared by the shared and the per-thread forms).
///   counter:         (unix_ms << 16) | counter
///   clock_precision: (unix_ms << 12) | sub-millisecond fraction in 1/4096 ms
struct uuid7_step {
    static constexpr int shift(uuid7_method m) noexcept { return m == uuid7_method::counter ? 16 : 12; }

    struct outcome {
        std::uint64_t state = 0;
        bool absorbed = false, accepted = false, overflow = false;
    };

    /// The state after `cur` for a clock reading of `now_ns` Unix ns; or an error.
    template <class Random>
    static result<outcome> next(std::uint64_t cur, std::int64_t now_ns, const uuid7_options& o, Random& rng) {
        const int sh = shift(o.method);
        const std::uint64_t low_mask = (std::uint64_t{1} << sh) - 1;
        if (now_ns < 0) now_ns = 0;
        const auto now_ms = static_cast<std::uint64_t>(now_ns / 1'000'000);
        // The state this clock reading gives on its own (a random draw only when needed).
        auto fresh = [&]() -> std::uint64_t {
            if (o.method == uuid7_method::counter) return (now_ms << 16) | (rng.next_u64() & 0x7FFF);
            return (now_ms << 12) | static_cast<std::uint64_t>((now_ns % 1'000'000) * 4096 / 1'000'000);
        };
        const std::uint64_t cur_ms = cur >> sh;
        if (now_ms > cur_ms || cur == 0 || o.method == uuid7_method::random) return outcome{fresh()};
        if (o.method == uuid7_method::clock_precision) {
            const auto f = fresh();
            if (f > cur) return outcome{f};
        }
        // Same millisecond, or the clock is behind: continue after the last state.
        outcome out;
        out.absorbed = cur_ms > now_ms;
        std::uint64_t nxt = cur + 1;
        if ((cur & low_mask) == low_mask) {  // the counter ran out: move the timestamp forward
            out.overflow = true;
            nxt = o.method == uuid7_method::counter ? ((cur_ms + 1) << 16) | (rng.next_u64() & 0x7FFF)
                                                    : (cur_ms + 1) << 12;
        }
        if (static_cast<std::int64_t>((nxt >> sh) - now_ms) > o.rollback_bound.count()) {
            if (o.past_bound == uuid7_rollback_policy::reject) return unexpected(make_error_code(errc::clock_rollback));
            return outcome{fresh(), false, true, false};
        }
        out.state = nxt;
        return out;
    }

    /// The UUID of a counter-method state, its random bits taken from `r`.
    static uuid make_counter(std::uint64_t state, std::uint64_t r) noexcept {
        const auto counter = state & 0xFFFF;
        return uuid::make_v7(state >> 16, static_cast<std::uint16_t>(counter >> 4), ((counter & 0xF) << 58) | (r >> 6));
    }

    /// The counter method's common case, decided without a division: `cur`
    /// is a state already issued and `now_ns` falls in its millisecond, with
    /// counter left. Returns the next state, or 0 when the full step is needed.
    /// [start_ns, end_ns) are the millisecond's bounds from ms_bounds(cur).
    static std::uint64_t same_ms_counter(std::uint64_t cur, std::int64_t now_ns, std::int64_t start_ns,
                                         std::int64_t end_ns) noexcept {
        if (now_ns >= start_ns && now_ns < end_ns && (cur & 0xFFFF) != 0xFFFF && cur != 0) return cur + 1;
        return 0;
    }
    /// The Unix-ns bounds of a counter state's millisecond (saturated).
    static std::pair<std::int64_t, std::int64_t> ms_bounds(std::uint64_t cur) noexcept {
        const auto ms = static_cast<std::int64_t>(cur >> 16);  // 48 bits
        return {detail::ns_of_ms_saturated(ms), detail::ns_of_ms_saturated(ms + 1)};
    }

    template <class Random>
    static uuid make(std::uint64_t state, const uuid7_options& o, Random& rng) {
        const auto r = rng.next_u64();
        if (o.method == uuid7_method::counter) return make_counter(state, r);
        if (o.method == uuid7_method::clock_precision)
            return uuid::make_v7(state >> 12, static_cast<std::uint16_t>(state & 0xFFF), r >> 2);
        return uuid::make_v7(state >> 12, static_cast<std::uint16_t>(r >> 52), rng.next_u64() >> 2);
    }
};

inline void check_uuid7_options(const uuid7_options& o, bool has_store) {
    if (o.rollback_bound < std::chrono::milliseconds::zero())
        throw std::invalid_argument("uuid7: rollback_bound must be >= 0");
    if (has_store && (o.reserve_ahead <= std::chrono::milliseconds::zero() || o.reserve_ahead > o.rollback_bound))
        throw std::invalid_argument("uuid7: reserve_ahead must be in (0, rollback_bound]");
    if (o.name.empty()) throw std::invalid_argument("uuid7: name must not be empty");
}

}  // namespace detail

/// The UUIDv7 generator, shared by any number of threads: next() is one clock
/// read, one or two random draws and one compare-and-swap, and UUIDs come out
/// strictly increasing in the order next() hands them out (except with
/// uuid7_method::random). With a Store, the reserved-until time is extended
/// (one store write per reserve_ahead window) before a UUID past it is issued,
/// so that a restarted generator continues above the previous run.
/// Not copyable; the store must outlive it.
template <unix_clock Clock = system_clock, random_source Random = os_random,
          time_reservation_store Store = no_time_reservation>
class basic_uuid7_generator {
public:
    static constexpr bool has_store = !std::is_same_v<Store, no_time_reservation>;  ///< true when it keeps a reservation on a store

    /// Without a store (order holds within this generator).
    explicit basic_uuid7_generator(uuid7_options options = {}, Clock clock = Clock{}, Random random = Random{})
        requires(!has_store)
        : opt_(std::move(options)), clock_(std::move(clock)), rng_(std::move(random)) {
        detail::check_uuid7_options(opt_, false);
        reserved_ms_.store(std::numeric_limits<std::int64_t>::max(), std::memory_order_relaxed);
    }
    /// With a store keeping the order across restarts.
    basic_uuid7_generator(Store& store, uuid7_options options = {}, Clock clock = Clock{}, Random random = Random{})
        : store_(&store), opt_(std::move(options)), clock_(std::move(clock)), rng_(std::move(random)) {
        detail::check_uuid7_options(opt_, has_store);
        if (!has_store) reserved_ms_.store(std::numeric_limits<std::int64_t>::max(), std::memory_order_relaxed);
    }
    basic_uuid7_generator(const basic_uuid7_generator&) = delete;
    basic_uuid7_generator& operator=(const basic_uuid7_generator&) = delete;

    /// The next UUIDv7. Refusals: errc::clock_rollback (the clock is behind
    /// the last timestamp by more than the bound, reject policy), or the
    /// store's error when a reservation is due.
    result<uuid> next() {
        if (opt_.method == uuid7_method::counter) {
            // The common case in a straight line: the same millisecond with
            // counter left. The random bits and the millisecond's bounds come
            // before the clock read, so its cost hides theirs. (No store check:
            // the reservation already covers a millisecond issued before.)
            // A failed compare-and-swap hands back another thread's newer
            // state: retry at once with the same reading while it is in the
            // same millisecond (see snowflake.hpp).
            const auto r = rng_.next_u64();
            auto cur = state_.load(std::memory_order_acquire);
            auto bounds = detail::uuid7_step::ms_bounds(cur);
            const auto now_ns = since_epoch_ns(clock_.now());
            for (;;) {
                const auto nxt = detail::uuid7_step::same_ms_counter(cur, now_ns, bounds.first, bounds.second);
                if (nxt == 0) break;
                if (state_.compare_exchange_weak(cur, nxt, std::memory_order_acq_rel, std::memory_order_acquire))
                    return detail::uuid7_step::make_counter(nxt, r);
                bounds = detail::uuid7_step::ms_bounds(cur);
            }
        }
        const int sh = detail::uuid7_step::shift(opt_.method);
        for (;;) {
            auto cur = state_.load(std::memory_order_acquire);  // before the clock: see snowflake.hpp
            const auto now_ns = since_epoch_ns(clock_.now());
            auto step = detail::uuid7_step::next(cur, now_ns, opt_, rng_);
            if (!step) {
                rejected_.fetch_add(1, std::memory_order_relaxed);
                return unexpected(step.error());
            }
            if constexpr (has_store) {
                if (static_cast<std::int64_t>(step->state >> sh) >= reserved_ms_.load(std::memory_order_acquire)) {
                    if (auto r = reserve(static_cast<std::int64_t>(step->state >> sh)); !r) return unexpected(r.error());
                    continue;
                }
            }
            if (opt_.method == uuid7_method::random) return detail::uuid7_step::make(step->state, opt_, rng_);
            if (state_.compare_exchange_weak(cur, step->state, std::memory_order_acq_rel, std::memory_order_acquire)) {
                if (step->absorbed) absorbed_.fetch_add(1, std::memory_order_relaxed);
                if (step->accepted) accepted_.fetch_add(1, std::memory_order_relaxed);
                if (step->overflow) overflows_.fetch_add(1, std::memory_order_relaxed);
                return detail::uuid7_step::make(step->state, opt_, rng_);
            }
        }
    }

    /// A snapshot of the counters.
    uuid7_stats stats() const {
        return {absorbed_.load(std::memory_order_relaxed), accepted_.load(std::memory_order_relaxed),
                rejected_.load(std::memory_order_relaxed), overflows_.load(std::memory_order_relaxed)};
    }

private:
    // Makes the reservation cover `ms` (and reads the previous run's on first use).
    result<void> reserve(std::int64_t ms) {
        std::lock_guard lk(mutex_);
        if (ms < reserved_ms_.load(std::memory_order_relaxed)) return {};
        const int sh = detail::uuid7_step::shift(opt_.method);
        if (!started_) {
            auto prev = store_->time_reserve(opt_.name, 0, 0);
            if (!prev) return unexpected(prev.error().code);
            started_ = true;
            if (*prev > 0) {
                // Continue after everything the previous run may have issued.
                const auto floor = (static_cast<std::uint64_t>(*prev) << sh) - 1;
                auto cur = state_.load(std::memory_order_relaxed);
                while (cur < floor && !state_.compare_exchange_weak(cur, floor, std::memory_order_acq_rel)) {
                }
                reserved_ms_.store(*prev, std::memory_order_release);
                if (ms < *prev) return {};
            }
        }
        auto r = store_->time_reserve(opt_.name, ms + opt_.reserve_ahead.count(), 0);
        if (!r) return unexpected(r.error().code);
        reserved_ms_.store(*r, std::memory_order_release);
        return {};
    }

    Store* store_ = nullptr;
    uuid7_options opt_;
    Clock clock_;
    Random rng_;
    // state_ is the one word every next() writes: alone on its cache line.
    alignas(64) std::atomic<std::uint64_t> state_{0};
    alignas(64) std::atomic<std::int64_t> reserved_ms_{std::numeric_limits<std::int64_t>::min()};
    std::atomic<std::uint64_t> absorbed_{0}, accepted_{0}, rejected_{0}, overflows_{0};
    std::mutex mutex_;
    bool started_ = false;
};

/// The per-thread form: the same algorithm without atomics, for one thread
/// (keep one per thread, e.g. thread_local). UUIDs increase within it.
template <unix_clock Clock = system_clock, random_source Random = os_random>
class basic_uuid7_local {
public:
    /// A generator for one thread; throws std::invalid_argument naming an option out of range.
    explicit basic_uuid7_local(uuid7_options options = {}, Clock clock = Clock{}, Random random = Random{})
        : opt_(std::move(options)), clock_(std::move(clock)), rng_(std::move(random)) {
        detail::check_uuid7_options(opt_, false);
    }
    /// See basic_uuid7_generator::next.
    result<uuid> next() {
        if (opt_.method == uuid7_method::counter) {
            const auto r = rng_.next_u64();
            const auto [start_ns, end_ns] = detail::uuid7_step::ms_bounds(state_);
            const auto now_ns = since_epoch_ns(clock_.now());
            if (const auto nxt = detail::uuid7_step::same_ms_counter(state_, now_ns, start_ns, end_ns); nxt != 0) {
                state_ = nxt;
                return detail::uuid7_step::make_counter(nxt, r);
            }
            return slow(now_ns);
        }
        return slow(since_epoch_ns(clock_.now()));
    }

private:
    result<uuid> slow(std::int64_t now_ns) {
        auto step = detail::uuid7_step::next(state_, now_ns, opt_, rng_);
        if (!step) return unexpected(step.error());
        if (opt_.method != uuid7_method::random) state_ = step->state;
        return detail::uuid7_step::make(step->state, opt_, rng_);
    }

    uuid7_options opt_;
    Clock clock_;
    Random rng_;
    std::uint64_t state_ = 0;
};

/// A generator on the system clock and os_random, no store.
using uuid7_generator = basic_uuid7_generator<>;

/// A UUIDv7 from this thread's own generator (system clock, os_random,
/// method 1): the fastest form; increasing within the calling thread.
inline result<uuid> uuid7() {
    thread_local basic_uuid7_local<> local;
    return local.next();
}

}  // namespace coord

/// Hashes a uuid (its bytes are already well mixed; the halves are folded).
/// @cond STD_SPECIALIZATIONS
template <>
struct std::hash<coord::uuid> {
    std::size_t operator()(const coord::uuid& u) const noexcept {
        std::uint64_t a, b;
        std::memcpy(&a, u.bytes.data(), 8);
        std::memcpy(&b, u.bytes.data() + 8, 8);
        std::uint64_t x = a ^ (b * 0x9E3779B97F4A7C15ull);
        x ^= x >> 31;
        x *= 0xBF58476D1CE4E5B9ull;
        x ^= x >> 29;
        return static_cast<std::size_t>(x);
    }
};
/// @endcond
