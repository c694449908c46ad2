// SPDX-License-Identifier: Apache-2.0
// coord/segment.hpp: segment IDs (Meituan Leaf's range allocation): an
// allocator hands out disjoint ranges, processes serve IDs from a local
// counter and fetch the next range in the background before they need it.
//
// One atomic update at the allocator hands a process a whole range, so the
// allocator is off the per-ID path. The known failure of the best-known
// implementation is the moment both buffers are empty under a burst; here
//  - the next range is requested when a fraction (10%) of the current one is
//    used, by a background thread, so next() never waits for the allocator in
//    steady state;
//  - the range size adapts to the rate, aiming for a range to last a target
//    time (15 minutes) within [min_step, max_step], so a burst grows the step
//    before the buffers drain;
//  - when both ranges are used up and the allocator has not answered,
//    next() returns errc::allocator_unavailable at once (no hang) and
//    recovers when the allocator returns.
//
// What it promises: IDs of one tag are unique across every process that uses
// the same allocator, across restarts. What it does not: IDs are not
// contiguous (a restart or a switch loses the rest of a range: holes), and
// across processes a smaller ID is not an earlier one. Within one generator
// and one range they increase.
//
//   coord::file_store store{"/var/lib/app/coord.state"};
//   coord::basic_segment_generator<coord::file_store> ids{store};
//   auto orders = ids.tag("orders");   // a handle: no lookup per ID
//   auto id = orders.next();           // result<uint64_t>
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <concepts>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

#include "coord/clock.hpp"
#include "coord/detail/text.hpp"
#include "coord/error.hpp"
#include "coord/result.hpp"
#include "coord/rules/segment.hpp"

namespace coord {

/// An allocator of disjoint ID ranges per tag.
///
/// Semantic requirements the compiler cannot check:
/// - segment_allocate(tag, step) is ONE atomic step: it returns [n, n + step)
///   and moves the tag's next value n to n + step, so no other call, in any
///   thread or process using the same allocator, ever receives any of those
///   IDs, also across restarts of the allocator (the next value never goes
///   back). Tags start at 1. Precondition: step >= 1.
/// - When n + step would pass segment_id_limit it returns
///   errc::range_exhausted and changes nothing.
/// - A transport or I/O failure returns that error; a call that may have
///   moved the next value anyway returns errc::outcome_unknown. Either way
///   the caller must not use any ID of a range it was not given: at worst a
///   range is lost (a hole), never handed out twice.
template <class A>
concept segment_allocator = requires(A& a, std::string_view tag, std::uint64_t step) {
    { a.segment_allocate(tag, step) } -> std::same_as<result<segment_range>>;
};

/// Generator settings. Out-of-range values make the constructor throw
/// std::invalid_argument naming the field.
struct segment_options {
    /// The first range's size, and the step while no rate is known.
    std::uint64_t initial_step = 1000;
    std::uint64_t min_step = 1000;  ///< the smallest range asked for once a rate is known
    std::uint64_t max_step = 10'000'000;  ///< the largest range asked for
    /// How long a range should last at the current rate.
    std::chrono::milliseconds target_duration = std::chrono::minutes{15};
    /// The fraction of the current range used when the next one is requested.
    double prefetch_at = 0.10;
};

/// What a tag's buffers look like now.
struct segment_stats {
    segment_range current;             ///< the range IDs are served from
    std::optional<segment_range> next;  ///< the prefetched range, if it arrived
    std::uint64_t step = 0;            ///< the size the next request will ask for
    std::uint64_t allocations = 0;     ///< successful allocator calls
    std::uint64_t failures = 0;        ///< failed allocator calls
    error last_error;        ///< the last allocator failure
};

namespace detail {

/// One tag's buffers: the range being served (a seqlock-protected
/// [begin, end) with a shared cursor) and the prefetched next range.
struct segment_tag_state {
    explicit segment_tag_state(std::string t) : tag(std::move(t)) {}

    const std::string tag;

    // Hot: read by every next(). A writer (the switch to the next range)
    // makes seq odd, updates cursor/begin/end, makes seq even again.
    alignas(64) std::atomic<std::uint64_t> seq{0};
    std::atomic<std::uint64_t> cursor{0};
    std::atomic<std::uint64_t> begin{0};
    std::atomic<std::uint64_t> end{0};
    std::atomic<std::uint64_t> prefetch_id{0};  // the ID whose issue requests the next range

    // Cold: under m.
    alignas(64) std::mutex m;
    std::condition_variable first_fetched;  // the first range's fetch finished (ok or not)
    std::optional<segment_range> next;
    bool fetching = false;
    std::uint64_t step = 0;
    std::int64_t range_started_ns = 0;  // when the current range started serving
    std::uint64_t allocations = 0, failures = 0;
    error last_error;
};

}  // namespace detail

/// Serves IDs for many tags from ranges an Allocator hands out. One
/// background thread fetches ranges. Thread safety: every member function may
/// be called from any thread. Not copyable; the allocator must outlive it.
template <segment_allocator Allocator, clock Clock = steady_clock>
class basic_segment_generator {
public:
    /// A tag's handle: next() without a lookup. Valid while the generator lives.
    class tag_handle {
    public:
        /// See basic_segment_generator::next.
        result<std::uint64_t> next() { return gen_->next_in(*state_); }
        /// The sequence's name.
        const std::string& name() const noexcept { return state_->tag; }

    private:
        friend class basic_segment_generator;
        tag_handle(basic_segment_generator* g, detail::segment_tag_state* s) : gen_(g), state_(s) {}
        basic_segment_generator* gen_;
        detail::segment_tag_state* state_;
    };

    /// Checks the options (std::invalid_argument naming the field) and starts
    /// the background fetcher. Does not call the allocator.
    explicit basic_segment_generator(Allocator& allocator, segment_options options = {}, Clock clock = Clock{})
        : alloc_(&allocator), opt_(options), clock_(std::move(clock)) {
        if (opt_.min_step < 1) throw std::invalid_argument("segment: min_step must be >= 1");
        if (opt_.max_step < opt_.min_step) throw std::invalid_argument("segment: max_step must be >= min_step");
        if (opt_.initial_step < opt_.min_step || opt_.initial_step > opt_.max_step)
            throw std::invalid_argument("segment: initial_step must be within [min_step, max_step]");
        if (!(opt_.prefetch_at > 0.0 && opt_.prefetch_at < 1.0))
            throw std::invalid_argument("segment: prefetch_at must be in (0, 1)");
        if (opt_.target_duration <= std::chrono::milliseconds::zero())
            throw std::invalid_argument("segment: target_duration must be > 0");
        worker_ = std::thread([this] { fetch_loop(); });
    }

    basic_segment_generator(const basic_segment_generator&) = delete;
    basic_segment_generator& operator=(const basic_segment_generator&) = delete;

    /// Stops the background fetcher (waiting for a fetch in flight).
    ~basic_segment_generator() {
        {
            std::lock_guard lk(queue_m_);
            stopping_ = true;
        }
        queue_cv_.notify_all();
        worker_.join();
    }

    /// The handle of `tag` (created on first use; the first range is fetched
    /// by the first next()).
    tag_handle tag(std::string_view name) { return tag_handle(this, &state_of(name)); }

    /// The next ID of `tag`. A lookup by name; keep a tag() handle on hot paths.
    result<std::uint64_t> next(std::string_view tag) { return next_in(state_of(tag)); }

    /// Fetches the first range of `tag` now, so that the first next() does
    /// not wait for the allocator. Returns the allocator's refusal.
    result<void> warm(std::string_view tag) {
        auto& s = state_of(tag);
        std::unique_lock lk(s.m);
        if (s.end.load(std::memory_order_relaxed) != 0) return {};
        return fetch_first(s, lk);
    }

    /// Blocks until no background fetch is queued or in flight.
    void quiesce() {
        std::unique_lock lk(queue_m_);
        idle_cv_.wait(lk, [&] { return queue_.empty() && !busy_; });
    }

    /// A snapshot of a tag's buffers.
    segment_stats stats(std::string_view tag) {
        auto& s = state_of(tag);
        std::lock_guard lk(s.m);
        segment_stats st;
        st.current = {s.begin.load(std::memory_order_relaxed), s.end.load(std::memory_order_relaxed)};
        st.next = s.next;
        st.step = s.step;
        st.allocations = s.allocations;
        st.failures = s.failures;
        st.last_error = s.last_error;
        return st;
    }

private:
    // The hot path: one fetch_add on the tag's cursor inside a seqlock read.
    result<std::uint64_t> next_in(detail::segment_tag_state& s) {
        for (;;) {
            // A seqlock read without standalone fences: the writer publishes
            // cursor, begin and end with release stores after making seq odd,
            // so reading any of them from a switch (acquire) makes the final
            // seq load see the switch too, and the value is dropped.
            const auto s1 = s.seq.load(std::memory_order_acquire);
            if ((s1 & 1) == 0) {
                const auto v = s.cursor.fetch_add(1, std::memory_order_acquire);
                const auto b = s.begin.load(std::memory_order_acquire);
                const auto e = s.end.load(std::memory_order_acquire);
                if (s.seq.load(std::memory_order_relaxed) == s1) {
                    if (v >= b && v < e) [[likely]] {
                        if (v == s.prefetch_id.load(std::memory_order_relaxed)) request_fetch(s);
                        return v;
                    }
                    if (auto r = switch_range(s, s1); !r) return unexpected(r.error());
                }
            }
            // A switch was in progress or just happened: read again.
        }
    }

    // Current range used up: switch to the prefetched one (no allocator call),
    // fetch the first range synchronously, or report the allocator unavailable.
    result<void> switch_range(detail::segment_tag_state& s, std::uint64_t seen_seq) {
        std::unique_lock lk(s.m);
        if (s.seq.load(std::memory_order_relaxed) != seen_seq) return {};  // someone switched already
        if (s.end.load(std::memory_order_relaxed) == 0) return fetch_first(s, lk);
        if (!s.next) {
            if (s.last_error == errc::range_exhausted) return unexpected(s.last_error);
            if (!s.fetching) queue_fetch(s);
            return unexpected(make_error_code(errc::allocator_unavailable));
        }
        install(s, *s.next);
        s.next.reset();
        return {};
    }

    // The tag's first range, fetched by the caller (nothing is buffered yet).
    // Callers that arrive while the first fetch is in flight wait for it, as
    // its caller does: there is nothing buffered to serve them meanwhile.
    result<void> fetch_first(detail::segment_tag_state& s, std::unique_lock<std::mutex>& lk) {
        if (s.fetching) {
            // Wake on the first range, not on "no fetch in flight": a prefetch
            // may already be in flight again by the time this thread runs.
            s.first_fetched.wait(lk, [&] { return s.end.load(std::memory_order_relaxed) != 0 || !s.fetching; });
            if (s.end.load(std::memory_order_relaxed) != 0) return {};
            if (s.last_error == errc::range_exhausted) return unexpected(s.last_error);
            return unexpected(error(make_error_code(errc::allocator_unavailable), s.last_error.message()));
        }
        if (s.step == 0) s.step = opt_.initial_step;
        s.fetching = true;
        const auto step = s.step;
        lk.unlock();
        auto r = alloc_->segment_allocate(s.tag, step);
        lk.lock();
        s.fetching = false;
        s.first_fetched.notify_all();
        if (!r) {
            ++s.failures;
            s.last_error = r.error();
            if (r.error() == errc::range_exhausted) return unexpected(r.error());
            return unexpected(error(make_error_code(errc::allocator_unavailable), r.error().message()));
        }
        ++s.allocations;
        if (s.end.load(std::memory_order_relaxed) == 0) install(s, *r);
        else if (!s.next) s.next = *r;
        return {};
    }

    // Publishes `range` as the current one (caller holds s.m).
    void install(detail::segment_tag_state& s, segment_range range) {
        const auto seq = s.seq.load(std::memory_order_relaxed);
        s.seq.store(seq + 1, std::memory_order_relaxed);
        // A reader whose fetch_add saw this store also sees seq change (the
        // release store carries the odd seq with it) and drops its value, so
        // the cursor may restart at the new range's first ID whatever the
        // old one counted up to.
        s.cursor.store(range.begin, std::memory_order_release);
        s.begin.store(range.begin, std::memory_order_release);
        s.end.store(range.end, std::memory_order_release);
        const auto used_before_prefetch =
            std::max<std::uint64_t>(1, static_cast<std::uint64_t>(static_cast<double>(range.size()) * opt_.prefetch_at));
        s.prefetch_id.store(range.begin + std::min(used_before_prefetch, range.size()) - 1, std::memory_order_relaxed);
        s.range_started_ns = since_epoch_ns(clock_.now());
        s.seq.store(seq + 2, std::memory_order_release);
    }

    void request_fetch(detail::segment_tag_state& s) {
        std::lock_guard lk(s.m);
        if (!s.next && !s.fetching) queue_fetch(s);
    }

    // Adapts the step to the rate seen on the current range, then queues the
    // tag for the background fetcher (caller holds s.m).
    void queue_fetch(detail::segment_tag_state& s) {
        const auto b = s.begin.load(std::memory_order_relaxed);
        const auto used = std::min(s.cursor.load(std::memory_order_relaxed), s.end.load(std::memory_order_relaxed)) - b;
        const auto elapsed = since_epoch_ns(clock_.now()) - s.range_started_ns;
        if (used > 0) {
            const double target_ns = std::chrono::duration<double, std::nano>(opt_.target_duration).count();
            const double wanted = elapsed <= 0 ? static_cast<double>(opt_.max_step)
                                               : static_cast<double>(used) * target_ns / static_cast<double>(elapsed);
            s.step = static_cast<std::uint64_t>(
                std::clamp(wanted, static_cast<double>(opt_.min_step), static_cast<double>(opt_.max_step)));
        }
        s.fetching = true;
        {
            std::lock_guard q(queue_m_);
            queue_.push_back(&s);
        }
        queue_cv_.notify_one();
    }

    void fetch_loop() {
        std::unique_lock lk(queue_m_);
        for (;;) {
            queue_cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;  // stopping, nothing left
            auto* s = queue_.front();
            queue_.pop_front();
            busy_ = true;
            lk.unlock();
            std::uint64_t step;
            {
                std::lock_guard sl(s->m);
                step = s->step;
            }
            auto r = alloc_->segment_allocate(s->tag, step);
            {
                std::lock_guard sl(s->m);
                s->fetching = false;
                if (r) {
                    ++s->allocations;
                    s->next = *r;
                } else {
                    ++s->failures;
                    s->last_error = r.error();
                }
            }
            lk.lock();
            busy_ = false;
            if (queue_.empty()) idle_cv_.notify_all();
        }
    }

    detail::segment_tag_state& state_of(std::string_view tag) {
        detail::check_name("segment: tag", tag);
        std::lock_guard lk(tags_m_);
        auto it = tags_.find(tag);
        if (it == tags_.end())
            it = tags_.emplace(std::string(tag), std::make_unique<detail::segment_tag_state>(std::string(tag))).first;
        return *it->second;
    }

    Allocator* alloc_;
    segment_options opt_;
    Clock clock_;

    std::mutex tags_m_;
    std::map<std::string, std::unique_ptr<detail::segment_tag_state>, std::less<>> tags_;

    std::mutex queue_m_;
    std::condition_variable queue_cv_, idle_cv_;
    std::deque<detail::segment_tag_state*> queue_;
    bool busy_ = false;
    bool stopping_ = false;
    std::thread worker_;  // last: starts after everything it uses exists
};

}  // namespace coord
