// SPDX-License-Identifier: Apache-2.0
// coord/schedule.hpp: cron schedules in IANA time zones with defined
// daylight-saving behaviour, misfire catch-up and overlap policies; they
// produce job-ledger slots. Target coord::schedule (needs Howard Hinnant's
// date/tz over the system tz database: Debian's libhowardhinnant-date-dev).
//
// Schedulers disagree at daylight-saving changes: a 02:30 job is skipped on
// spring-forward in some and moved in others; a 01:30 job fires twice on
// fall-back in some and once in others. Here each is an explicit choice:
// - a local time that does not exist (spring-forward gap): run at the first
//   instant after the gap (default) or skip it;
// - a local time that occurs twice (fall-back): run at the first occurrence
//   (default), the second, or both.
// Slots are UTC instants (coord::slot, `job@...Z`); the local time, its UTC
// offset and the tz database version are kept with each fire as metadata.
// Fire times are found by walking local times one by one and asking the tz
// database about each, never by arithmetic on intervals; nothing reads the
// system clock (pass a Clock policy to next_fire).
//
//   auto s = coord::schedule::make("billing", "0 30 2 * * *", "America/New_York");
//   auto f = s->next_after(now);           // coord::fire: slot, utc, local, offset
//   ledger.run(f->which, "worker", "", effect);
//
// std::chrono's time zones (C++20, libstdc++ 14) have the same interface:
// define COORD_USE_STD_CHRONO_TZ to use them instead of date/tz.
#pragma once

#include <algorithm>
#include <bitset>
#include <cstdio>
#include <chrono>
#include <cstdint>
#include <deque>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#if defined(COORD_USE_STD_CHRONO_TZ)
namespace coord::detail {
namespace tz = std::chrono;
}
#else
#include <date/tz.h>
namespace coord::detail {
namespace tz = ::date;
}
#endif

#include "coord/clock.hpp"
#include "coord/error.hpp"
#include "coord/job_ledger.hpp"
#include "coord/result.hpp"

namespace coord {

/// Why a schedule was refused: errc::invalid_text (bad cron expression or
/// unknown zone) and a message that names the field.
struct schedule_error {
    error code;  ///< errc::invalid_text
    std::string message;  ///< names the field and what is wrong with it
    /// The code is `c`.
    friend bool operator==(const schedule_error& e, errc c) noexcept { return e.code == c; }
};

/// For a local time that does not exist (the clock jumped over it).
enum class gap_policy {
    run_after_gap,  ///< fire at the first instant after the gap (default)
    skip,           ///< do not fire
};

/// For a local time that occurs twice (the clock was set back over it).
enum class fold_policy {
    first,   ///< fire once, at the first occurrence (default)
    second,  ///< fire once, at the second occurrence
    both,    ///< fire at each occurrence
};

/// After downtime: which missed fires to run now.
enum class misfire_policy {
    none,        ///< none: wait for the next fire
    latest,      ///< only the latest missed fire
    all_within,  ///< every missed fire within a window (and a cap)
};

/// When a fire is due while the previous run still runs.
enum class overlap_policy {
    allow,      ///< start the new run beside the old one
    skip,       ///< do not start the new run
    queue_one,  ///< start it when the old one ends (one waiting at most)
    replace,    ///< revoke the old run in the ledger (its fence is bumped) and start the new one
};

/// What to do with a fire that is due, under an overlap policy.
enum class overlap_action { start, skip, queue, replace_previous };

/// The decision of `policy` when a fire is due; `previous_running`: the last
/// run has not completed; `one_queued`: a fire already waits.
constexpr overlap_action decide_overlap(overlap_policy policy, bool previous_running, bool one_queued) noexcept {
    if (!previous_running) return overlap_action::start;
    switch (policy) {
    case overlap_policy::allow: return overlap_action::start;
    case overlap_policy::skip: return overlap_action::skip;
    case overlap_policy::queue_one: return one_queued ? overlap_action::skip : overlap_action::queue;
    case overlap_policy::replace: return overlap_action::replace_previous;
    }
    return overlap_action::skip;
}

/// One fire of a schedule: the ledger slot (a UTC instant) and its local view.
struct fire {
    slot which;  ///< the ledger slot
    std::chrono::sys_seconds utc;  ///< the fire's instant
    /// The local wall time the cron expression matched (for a gap fire, the
    /// nonexistent local time it stands for).
    std::string local_time;  ///< 2026-03-08T02:30:00
    std::chrono::seconds utc_offset{0};  ///< the offset in force at `utc`
    std::string tzdb_version;  ///< the tz database version the local view was computed with
    /// "-04:00"
    std::string offset_text() const {
        const auto s = utc_offset.count();
        const auto a = s < 0 ? -s : s;
        char buf[16];
        std::snprintf(buf, sizeof buf, "%c%02d:%02d", s < 0 ? '-' : '+', static_cast<int>(a / 3600),
                      static_cast<int>(a / 60 % 60));
        return buf;
    }
};

/// Schedule settings.
struct schedule_options {
    gap_policy gap = gap_policy::run_after_gap;  ///< what a fire in a local time that does not exist (spring forward) does
    fold_policy fold = fold_policy::first;  ///< what a fire in a local time that happens twice (fall back) does
    /// Recorded in every slot (slot::schedule_version).
    std::uint32_t version = 0;
};

/// The version of the tz database in use, e.g. "2025b".
inline std::string tz_database_version() {
    std::string v = detail::tz::get_tzdb().version;
    if (v.empty() || v == "unknown") {
        // date/tz over the OS database does not always find its version: read tzdata.zi.
        std::ifstream zi("/usr/share/zoneinfo/tzdata.zi");
        std::string line;
        if (std::getline(zi, line) && line.rfind("# version ", 0) == 0) v = line.substr(10);
    }
    return v.empty() ? "unknown" : v;
}

/// A cron expression: five fields (minute hour day-of-month month
/// day-of-week) or six with seconds first; `*`, numbers, names (JAN-DEC,
/// SUN-SAT), ranges `a-b`, steps `*/n` and `a-b/n`, lists `a,b`, and the
/// macros `@yearly` `@annually` `@monthly` `@weekly` `@daily` `@midnight` `@hourly`.
/// Day-of-month and day-of-week follow Vixie cron's rule exactly: when
/// either day field starts with `*` (alone or with a step), both must match;
/// otherwise (both restricted) a day matching either fires. So `*/8` in
/// day-of-month with `2` in day-of-week means "the 1st, 9th, 17th or 25th
/// when it is a Tuesday", and a field that lists every value without a `*`
/// (`0-6`) stays restricted. An expression that no date can satisfy
/// ("0 0 30 2 *") is refused at parse.
class cron_expr {
public:
    /// Parses `text`; a schedule_error names the field that is wrong.
    static result<cron_expr, schedule_error> parse(std::string_view text) {
        std::string t(trim(text));
        if (!t.empty() && t[0] == '@') {
            if (t == "@yearly" || t == "@annually") t = "0 0 1 1 *";
            else if (t == "@monthly") t = "0 0 1 * *";
            else if (t == "@weekly") t = "0 0 * * 0";
            else if (t == "@daily" || t == "@midnight") t = "0 0 * * *";
            else if (t == "@hourly") t = "0 * * * *";
            else return fail("unknown macro '" + t + "'");
        }
        std::vector<std::string> f;
        for (std::size_t i = 0; i < t.size();) {
            while (i < t.size() && t[i] == ' ') ++i;
            std::size_t j = i;
            while (j < t.size() && t[j] != ' ') ++j;
            if (j > i) f.emplace_back(t.substr(i, j - i));
            i = j;
        }
        if (f.size() != 5 && f.size() != 6)
            return fail("expected 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), got " +
                        std::to_string(f.size()));
        cron_expr c;
        c.text_ = std::string(trim(text));
        const std::size_t o = f.size() == 6 ? 1 : 0;
        if (o) {
            if (auto e = field(f[0], "second", 0, 59, {}, c.sec_)) return unexpected(*e);
        } else {
            c.sec_.set(0);
        }
        static const char* months[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                       "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
        static const char* days[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};
        std::bitset<64> dow;
        if (auto e = field(f[o + 0], "minute", 0, 59, {}, c.min_)) return unexpected(*e);
        if (auto e = field(f[o + 1], "hour", 0, 23, {}, c.hour_)) return unexpected(*e);
        if (auto e = field(f[o + 2], "day-of-month", 1, 31, {}, c.dom_)) return unexpected(*e);
        if (auto e = field(f[o + 3], "month", 1, 12, {months, 12, 1}, c.mon_)) return unexpected(*e);
        if (auto e = field(f[o + 4], "day-of-week", 0, 7, {days, 7, 0}, dow)) return unexpected(*e);
        if (dow.test(7)) dow.set(0);  // 7 is Sunday too
        c.dow_ = std::bitset<7>(dow.to_ullong() & 0x7F);
        // Vixie cron's DOM_STAR / DOW_STAR: the field starts with '*' ('?' is
        // Quartz's "no value", the same as '*').
        c.dom_star_ = f[o + 2][0] == '*' || f[o + 2] == "?";
        c.dow_star_ = f[o + 4][0] == '*' || f[o + 4] == "?";
        if (!c.some_date_matches())
            return fail("no date matches: day-of-month '" + f[o + 2] + "' does not occur in month '" + f[o + 3] + "'" +
                        (c.dom_star_ || c.dow_star_ ? " (a day field starting with * makes both day fields required)"
                                                    : ""));
        return c;
    }

    /// Does the local date match (month, and the day-of-month/day-of-week rule)?
    bool day_matches(detail::tz::year_month_day ymd) const {
        if (!mon_.test(static_cast<unsigned>(ymd.month()))) return false;
        const bool dom = dom_.test(static_cast<unsigned>(ymd.day()));
        const bool dow = dow_.test(detail::tz::weekday{detail::tz::sys_days{ymd}}.c_encoding());
        if (dom_star_ || dow_star_) return dom && dow;
        return dom || dow;
    }

    /// The search horizon, in years: every date that exists recurs on every
    /// weekday within it (February 29 on a given weekday can be 40 years
    /// apart across a century year), so an expression that passed parse
    /// always has a next match inside it, until the year 9999 ends.
    static constexpr int horizon_years = 50;

    /// The first local time >= `from` the expression matches, searching up
    /// to `years` ahead and never past the year 9999 (the last year a slot
    /// can name): nullopt when none.
    std::optional<detail::tz::local_seconds> next_local(detail::tz::local_seconds from,
                                                        int years = horizon_years) const {
        using namespace std::chrono;
        namespace tz = detail::tz;
        auto t = from;
        const auto from_year = tz::year_month_day{floor<tz::days>(from)}.year();
        if (from_year > tz::year{9999}) return std::nullopt;
        const auto limit = std::min(from_year + tz::years{years}, tz::year{9999});
        for (;;) {
            const auto day = floor<tz::days>(t);
            const tz::year_month_day ymd{day};
            if (ymd.year() > limit) return std::nullopt;
            if (!mon_.test(static_cast<unsigned>(ymd.month()))) {
                t = tz::local_days{(ymd.year() / ymd.month() + tz::months{1}) / 1};
                continue;
            }
            if (!day_matches(ymd)) {
                t = day + tz::days{1};
                continue;
            }
            const tz::hh_mm_ss<seconds> hms{t - day};
            const auto h = static_cast<std::size_t>(hms.hours().count());
            const auto m = static_cast<std::size_t>(hms.minutes().count());
            const auto s = static_cast<std::size_t>(hms.seconds().count());
            if (!hour_.test(h)) {
                t = day + hours{h + 1};
                continue;
            }
            if (!min_.test(m)) {
                t = day + hours{h} + minutes{m + 1};
                continue;
            }
            if (!sec_.test(s)) {
                t += seconds{1};
                continue;
            }
            return t;
        }
    }

    /// The expression as given, trimmed (a macro as written).
    const std::string& text() const noexcept { return text_; }

private:
    struct names {
        const char* const* list = nullptr;
        int count = 0;
        int first = 0;
    };
    static result<cron_expr, schedule_error> fail(std::string message) {
        return unexpected(schedule_error{make_error_code(errc::invalid_text), "cron: " + std::move(message)});
    }
    static std::string_view trim(std::string_view s) {
        while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
        while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
        return s;
    }
    static std::optional<int> value(std::string_view v, names n) {
        if (v.empty()) return std::nullopt;
        if (v.size() <= 3) {
            int r = 0;
            bool digits = true;
            for (char c : v) {
                if (c < '0' || c > '9') digits = false;
                else r = r * 10 + (c - '0');
            }
            if (digits) return r;
        }
        if (n.list && v.size() == 3)
            for (int i = 0; i < n.count; ++i) {
                bool eq = true;
                for (int k = 0; k < 3; ++k) eq = eq && (v[static_cast<std::size_t>(k)] & ~0x20) == n.list[i][k];
                if (eq) return n.first + i;
            }
        return std::nullopt;
    }
    template <std::size_t N>
    static std::optional<schedule_error> field(std::string_view f, const char* what, int lo, int hi, names n,
                                               std::bitset<N>& out) {
        auto bad = [&](const std::string& why) {
            return schedule_error{make_error_code(errc::invalid_text),
                                  std::string("cron field ") + what + " '" + std::string(f) + "': " + why};
        };
        for (std::size_t i = 0; i <= f.size();) {
            const auto comma = std::min(f.find(',', i), f.size());
            auto item = f.substr(i, comma - i);
            i = comma + 1;
            if (item.empty()) return bad("empty list item");
            int step = 1;
            if (const auto slash = item.find('/'); slash != std::string_view::npos) {
                const auto s = value(item.substr(slash + 1), {});
                if (!s || *s < 1 || *s > hi) return bad("step must be 1.." + std::to_string(hi));
                step = *s;
                item = item.substr(0, slash);
            }
            int a, b;
            if (item == "*" || item == "?") {
                a = lo;
                b = hi;
            } else if (const auto dash = item.find('-'); dash != std::string_view::npos) {
                const auto x = value(item.substr(0, dash), n), y = value(item.substr(dash + 1), n);
                if (!x || !y) return bad("not a number or name");
                a = *x;
                b = *y;
                if (a > b) return bad("range goes backwards");
            } else {
                const auto x = value(item, n);
                if (!x) return bad("not a number or name");
                a = *x;
                b = step > 1 ? hi : *x;  // "5/15" means 5-max/15
            }
            if (a < lo || b > hi) return bad("out of range " + std::to_string(lo) + ".." + std::to_string(hi));
            for (int v = a; v <= b; v += step) out.set(static_cast<std::size_t>(v));
            if (comma == f.size()) break;
        }
        return std::nullopt;
    }

    // Can any date satisfy the day fields? Under the AND rule a day-of-month
    // that no chosen month has (30 February) never matches; under the OR
    // rule a restricted day-of-week always can (every weekday occurs in
    // every month).
    bool some_date_matches() const {
        static constexpr unsigned days_in[13] = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        if (!(dom_star_ || dow_star_) && dow_.any()) return true;
        for (unsigned m = 1; m <= 12; ++m) {
            if (!mon_.test(m)) continue;
            for (unsigned d = 1; d <= days_in[m]; ++d)
                if (dom_.test(d)) return true;
        }
        return false;
    }

    std::string text_;
    std::bitset<60> sec_, min_;
    std::bitset<24> hour_;
    std::bitset<32> dom_;
    std::bitset<13> mon_;
    std::bitset<7> dow_;
    bool dom_star_ = true, dow_star_ = true;
};

/// A job's schedule: a cron expression in an IANA time zone, with its DST
/// policies and version. Immutable; safe to share between threads.
class schedule {
public:
    /// Refusals (as values): a bad expression or an unknown zone, with a
    /// message naming the field. Throws std::invalid_argument for a bad job id.
    static result<schedule, schedule_error> make(std::string job, std::string_view cron, std::string_view zone,
                                                 schedule_options options = {}) {
        (void)slot(job, slot::time_point{});  // validates the job id
        auto c = cron_expr::parse(cron);
        if (!c) return unexpected(c.error());
        const detail::tz::time_zone* z = nullptr;
        try {
            z = detail::tz::locate_zone(zone);
        } catch (const std::exception&) {
            return unexpected(schedule_error{make_error_code(errc::invalid_text),
                                             "time zone '" + std::string(zone) + "' is not in the tz database"});
        }
        return schedule(std::move(job), std::move(*c), z, options);
    }

    /// The first fire strictly after `t` (an instant equal to `t` is not
    /// included), or nullopt when none comes before the end of the year 9999
    /// (the last a slot can name; no fire is ever made after it).
    std::optional<fire> next_after(std::chrono::sys_seconds t) const {
        using namespace std::chrono;
        if (t >= slot_limit()) return std::nullopt;
        // Fast path: t's UTC offset has held for 3 hours, and the first match
        // after t's local time is in the same offset period, so no local time
        // maps out of order between them: it is the next fire.
        if (const auto here = zone_->get_info(t); here.begin <= t - hours{3}) {
            if (auto m = cron_.next_local(zone_->to_local(t) + seconds{1})) {
                const auto info = zone_->get_info(*m);
                if (info.result == detail::tz::local_info::unique && info.first.begin == here.begin) {
                    auto fs = fires_at(*m);
                    if (fs.size() == 1 && fs.front().utc > t) return std::move(fs.front());
                }
            }
        }
        // Walk local times from a little before t's local time: a fold can
        // map an earlier local time to a later instant.
        auto l = zone_->to_local(t) - hours{3};
        std::optional<fire> best;
        for (int guard = 0; guard < 100000; ++guard) {
            auto m = cron_.next_local(l);
            if (!m) break;
            if (best && *m > zone_->to_local(best->utc) + hours{3}) break;
            for (auto& f : fires_at(*m))
                if (f.utc > t && (!best || f.utc < best->utc)) best = std::move(f);
            l = *m + seconds{1};
        }
        return best;
    }

    /// The first fire after the clock's now.
    template <unix_clock Clock>
    std::optional<fire> next_fire(const Clock& clock) const {
        return next_after(std::chrono::floor<std::chrono::seconds>(
            std::chrono::sys_time<std::chrono::nanoseconds>{std::chrono::nanoseconds{since_epoch_ns(clock.now())}}));
    }

    /// Every fire in (from, to], one by one; errc::too_many_slots when there
    /// are more than `cap`.
    result<std::vector<fire>, schedule_error> between(std::chrono::sys_seconds from, std::chrono::sys_seconds to,
                                                      std::size_t cap) const {
        std::vector<fire> out;
        auto t = from;
        while (auto f = next_after(t)) {
            if (f->utc > to) break;
            if (out.size() == cap)
                return unexpected(schedule_error{make_error_code(errc::too_many_slots),
                                                 "more than " + std::to_string(cap) + " fires between the bounds"});
            t = f->utc;
            out.push_back(std::move(*f));
        }
        return out;
    }

    /// The last `count` fires at or before `t`, oldest first (fewer when the
    /// schedule has fewer since 1970). `count` is at most 100000.
    std::vector<fire> last_fires(std::chrono::sys_seconds t, std::size_t count) const {
        using namespace std::chrono;
        std::vector<fire> out;
        if (count == 0) return out;
        count = std::min<std::size_t>(count, 100000);
        // Look back over a span that doubles until it holds `count` fires,
        // keeping the last `count` of each walk.
        for (seconds span{64};; span *= 2) {
            const bool to_epoch = t - span <= sys_seconds{} || span > hours{24 * 366 * 100};
            const auto from = to_epoch ? sys_seconds{} - seconds{1} : t - span;
            std::deque<fire> keep;
            for (auto x = from;;) {
                auto f = next_after(x);
                if (!f || f->utc > t) break;
                x = f->utc;
                keep.push_back(std::move(*f));
                if (keep.size() > count) keep.pop_front();
            }
            if (keep.size() >= count || to_epoch) {
                out.assign(std::make_move_iterator(keep.begin()), std::make_move_iterator(keep.end()));
                return out;
            }
        }
    }

    /// An explicit backfill: every fire in [from, to], capped.
    result<std::vector<fire>, schedule_error> backfill(std::chrono::sys_seconds from, std::chrono::sys_seconds to,
                                                       std::size_t cap) const {
        return between(from - std::chrono::seconds{1}, to, cap);
    }

    /// The fires missed in (last_run, now] to run now, by policy: none,
    /// the latest, or all within `window` before now (capped).
    result<std::vector<fire>, schedule_error> missed(std::chrono::sys_seconds last_run, std::chrono::sys_seconds now,
                                                     misfire_policy policy, std::chrono::seconds window,
                                                     std::size_t cap) const {
        if (policy == misfire_policy::none) return std::vector<fire>{};
        const auto from = policy == misfire_policy::all_within ? std::max(last_run, now - window) : last_run;
        if (policy == misfire_policy::all_within) return between(from, now, cap);
        // latest: walk one by one, keep the last (no cap on the walk, bounded by the range).
        std::optional<fire> last;
        auto t = from;
        while (auto f = next_after(t)) {
            if (f->utc > now) break;
            t = f->utc;
            last = std::move(f);
        }
        std::vector<fire> out;
        if (last) out.push_back(std::move(*last));
        return out;
    }

    /// The job's name.
    const std::string& job() const noexcept { return job_; }
    /// The cron expression.
    const cron_expr& cron() const noexcept { return cron_; }
    /// The IANA zone the expression is read in.
    std::string_view zone() const { return zone_->name(); }
    /// The options in force.
    const schedule_options& options() const noexcept { return opt_; }

private:
    schedule(std::string job, cron_expr c, const detail::tz::time_zone* z, schedule_options o)
        : job_(std::move(job)), cron_(std::move(c)), zone_(z), opt_(o), tzdb_(tz_database_version()) {}

    // The instants a matching local time stands for, by the DST policies.
    std::vector<fire> fires_at(detail::tz::local_seconds l) const {
        namespace tz = detail::tz;
        const auto info = zone_->get_info(l);
        std::vector<fire> out;
        auto make = [&](std::chrono::sys_seconds utc, std::chrono::seconds off) {
            if (utc < std::chrono::sys_seconds{} || utc > slot_limit()) return;  // no slot can name it
            out.push_back(fire{slot(job_, slot::time_point{utc}, opt_.version), utc, local_text(l), off, tzdb_});
        };
        switch (info.result) {
        case tz::local_info::unique: make(l.time_since_epoch() - info.first.offset + std::chrono::sys_seconds{}, info.first.offset); break;
        case tz::local_info::nonexistent:
            if (opt_.gap == gap_policy::run_after_gap) make(info.first.end, info.second.offset);
            break;
        case tz::local_info::ambiguous:
            if (opt_.fold != fold_policy::second)
                make(l.time_since_epoch() - info.first.offset + std::chrono::sys_seconds{}, info.first.offset);
            if (opt_.fold != fold_policy::first)
                make(l.time_since_epoch() - info.second.offset + std::chrono::sys_seconds{}, info.second.offset);
            break;
        }
        return out;
    }

    static std::chrono::sys_seconds slot_limit() {
        return std::chrono::floor<std::chrono::seconds>(slot::max_time);
    }

    static std::string local_text(detail::tz::local_seconds l) {
        using namespace std::chrono;
        const auto day = floor<detail::tz::days>(l);
        const detail::tz::year_month_day ymd{day};
        const detail::tz::hh_mm_ss<seconds> hms{l - day};
        char buf[32];
        std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d", static_cast<int>(ymd.year()),
                      static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                      static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                      static_cast<int>(hms.seconds().count()));
        return buf;
    }

    std::string job_;
    cron_expr cron_;
    const detail::tz::time_zone* zone_;
    schedule_options opt_;
    std::string tzdb_;
};

}  // namespace coord
