// SPDX-License-Identifier: Apache-2.0
// coord/cron.hpp: the distributed cron runner: any number of instances run
// one schedule on one store; each due slot `job@time` is claimed by one
// instance at a time, and every run gets its own fence token for whatever it
// writes. Part of target coord::schedule.
//
// Every instance walks the same slots (coord/schedule.hpp) and claims each
// due one through the job ledger (coord/job_ledger.hpp): one instance wins
// the claim and runs the job under an execution lease it heartbeats; the
// others see it in progress. Every judgement of time that decides who runs
// what is the store's: whether a claim's lease ended, whether a slot is too
// late to start (its start window, the ledger's replay window). The
// instance's own clock only decides when to look: a slot is examined once
// the local clock reaches its time.
//
// A runner whose clock runs ahead of the store's starts slots that early
// (the store refuses late starts, not early ones; the runner logs the skew
// it sees); keep the machines' clocks synchronised.
//
// The promise: one running claim per slot at a time, under the claim's
// lease; each claim has a fence token larger than the slot's earlier
// claims'. A slot whose claim is lost (its instance was paused past the
// lease, or a newer slot replaced it) has its job stopped and records
// nothing; its late writes carry a smaller fence token than its successor's,
// so a fenced resource refuses them. So a slot may START more than once: after
// a lost runner (a new claim, a larger fence), and when a job finished but
// its instance died before recording it. What the job must add: an effect
// that is idempotent, or fenced with COORD_FENCE. A slot is done once its
// exit status is recorded.
//
// Instances: the ledger records a claim under the runner's worker name and
// an instance nonce of its own (`worker #nonce`), and a claim whose answer
// was lost is adopted only by the runner object that sent it, never by
// another instance that happens to share the worker name.
//
// The job's schedule has an identity (its version: schedule_options::version,
// or one derived from the expression, the zone and the DST policies), kept
// with the job on the store. A runner whose schedule differs from the stored
// one is refused (errc::cron_schedule_conflict; it stops claiming and lets its
// running jobs finish), unless it takes the job over from an instant
// (cron_options::take_over_from): then slots before that instant follow the
// old schedule and slots from it the new one, walked by whichever runner
// runs, and every runner of the old schedule is refused from then on.
//
// The three books of a slot, side by side (cron_history): the schedule (when
// it was due, and under which schedule), the execution (who claimed it,
// which attempt, when it started) and the effect (its exit status, or why it
// did not run: missed with its reason, skipped, replaced).
//
//   coord::sqlite::store store{"/var/lib/app/coord.db"};
//   auto sched = coord::schedule::make("report", "0 */5 * * * *", "Europe/Paris");
//   coord::cron_options opt;
//   opt.worker = coord::unique_owner();   // or a name of your own: unique per instance is best
//   my_launcher jobs;   // starts the job of a slot (cron_launcher)
//   coord::basic_cron_runner runner{store, *sched, jobs, opt};
//   runner.run_until(stop_flag);
//   if (auto why = runner.refusal()) { /* another schedule runs this job */ }
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "coord/clock.hpp"
#include "coord/detail/options.hpp"
#include "coord/detail/term.hpp"
#include "coord/error.hpp"
#include "coord/fence.hpp"
#include "coord/job_ledger.hpp"
#include "coord/owner.hpp"
#include "coord/result.hpp"
#include "coord/schedule.hpp"

namespace coord {

/// What a started job is told (coordctl puts it in the environment:
/// COORD_SLOT, COORD_FENCE, COORD_ATTEMPT, COORD_SCHEDULED_AT).
struct cron_context {
    const slot& which;  ///< the slot to run
    fence_token fence;        ///< hand to downstream fenced writes
    std::uint32_t attempt;    ///< 1 for the first claim of the slot
    std::string scheduled_at; ///< the slot's time, ISO 8601 UTC
    std::string_view worker;  ///< this runner's worker name, as the ledger records it
};

/// Starts the job of a slot. `start(ctx)` returns a handle (or throws when
/// the job cannot start: the attempt is recorded as failed); the handle's
/// `poll()` answers nullopt while the job runs, then its exit status (>= 0,
/// or minus the signal number that ended it); `terminate()` asks it to stop
/// (SIGTERM), `kill()` stops it (SIGKILL). Called from the thread that runs
/// the runner.
template <class L>
concept cron_launcher = requires(L& l, const cron_context& c) {
    typename L::handle;
    { l.start(c) } -> std::same_as<typename L::handle>;
} && requires(typename L::handle& h) {
    { h.poll() } -> std::same_as<std::optional<int>>;
    h.terminate();
    h.kill();
};

/// One line of the runner's log.
struct cron_event {
    /// What happened.
    enum kind_t {
        claimed,   ///< this instance won the slot's claim
        started,   ///< its job started (detail: what the launcher says, e.g. "pid=123")
        finished,  ///< the job ended and its status was recorded (detail: "exit 0")
        lost,      ///< the claim was lost while the job ran: the job is stopped, nothing recorded
        missed,    ///< the slot's start window passed with no run: recorded as missed
        skipped,   ///< forbid: the previous run was still going: recorded as skipped
        replaced,  ///< replace: a running slot was revoked for a newer one
        stopping,  ///< shutting down: the job is asked to stop
        error,     ///< a store call failed (detail: the error); retried on the next tick
        refused,   ///< the store runs this job under another schedule: no new claims (detail: why)
        took_over, ///< this instance took the job over for its schedule (detail: from when)
    } kind;  ///< what happened
    std::string slot;  ///< canonical slot text (the job id alone for an error of the whole job)
    fence_token fence = 0;  ///< the claim's fence token (0 when there is none)
    std::uint32_t attempt = 0;  ///< the claim's attempt number (0 when there is none)
    std::string detail;  ///< words for a person: the launcher's, the exit status, or an error
};

inline const char* to_string(cron_event::kind_t k) noexcept {
    switch (k) {
    case cron_event::claimed: return "claimed";
    case cron_event::started: return "started";
    case cron_event::finished: return "finished";
    case cron_event::lost: return "lost";
    case cron_event::missed: return "missed";
    case cron_event::skipped: return "skipped";
    case cron_event::replaced: return "replaced";
    case cron_event::stopping: return "stopping";
    case cron_event::error: return "error";
    case cron_event::refused: return "refused";
    case cron_event::took_over: return "took-over";
    }
    return "?";
}

/// Runner settings; out-of-range values make the constructor throw
/// std::invalid_argument naming the field.
struct cron_options {
    /// This instance's name in the ledger (coord::unique_owner() is a good
    /// one; coordctl's default). Required. The runner adds a nonce of its own
    /// (`worker #nonce`), so two instances given one name (a copied unit
    /// file, containers sharing a hostname) still never run one claim: a
    /// claim whose answer was lost is adopted only by the runner that sent it.
    std::string worker;
    /// A slot may start this long after its time (judged on the store's
    /// clock); a slot that did not start within it is recorded as missed.
    /// So after downtime the slots of the last `catch_up` run, oldest first.
    /// 0 to 400 days; the start window is never shorter than start_grace.
    std::chrono::milliseconds catch_up{0};
    /// The shortest start window (how late an on-time slot may still start):
    /// 1 ms to 24 h.
    std::chrono::milliseconds start_grace{std::chrono::seconds{5}};
    /// allow: runs may overlap; skip ("forbid"): a slot due while the
    /// previous run goes on is recorded as skipped (catch-up slots wait their
    /// turn instead); replace: the running slot is revoked (its fence goes
    /// stale, its job is stopped) and the newest due slot starts. queue_one
    /// is not a runner policy.
    overlap_policy overlap = overlap_policy::skip;
    /// The execution lease of a claim: 100 ms to 24 h. A paused instance
    /// loses its slot this long after its last heartbeat; the runner stops
    /// the job a little earlier, at the safe deadline of the keeper's rule
    /// (the lease from when the last heartbeat was sent, less 1% and 2 ms:
    /// coord/keeper.hpp), unless a heartbeat was answered by then.
    std::chrono::milliseconds lease_ttl{std::chrono::seconds{30}};
    /// How often a running slot's lease is renewed: 0 means lease_ttl / 3.
    std::chrono::milliseconds heartbeat{0};
    /// How long a job asked to stop (SIGTERM) has before it is killed, and
    /// how long a shutdown waits for running jobs: 0 to 24 h.
    std::chrono::milliseconds stop_grace{std::chrono::seconds{10}};
    /// A slot whose job failed (non-zero exit) is claimed again, within its
    /// start window, until this many attempts: 1 to 1000.
    std::uint32_t max_attempts = 3;
    /// How long missed slots are recorded one by one: slots older than this
    /// are counted in one `missed` event and not written. 0: 8 days, or the
    /// start window plus a day when longer; else at least the start window
    /// plus a day, at most 100 years.
    std::chrono::milliseconds record_window{0};
    /// How often this instance prunes the ledger of records past the record
    /// window (ledger.prune(): every job's on the store), from its first
    /// tick on: 0 never (then prune elsewhere), else 1 min to 30 days.
    std::chrono::milliseconds prune_every{std::chrono::hours{1}};
    /// Store operations per tick at most (a long backlog is worked through
    /// over several ticks, heartbeats in between): 8 to 100000.
    std::size_t steps_per_tick = 256;
    /// Jobs this instance runs at once at most (catch-up and normal runs
    /// alike; jobs being stopped count until they end): 1 to 10000. A due
    /// slot over the cap waits its turn within its start window, and is
    /// recorded missed (with this reason) once the window passed. The
    /// replace policy runs one slot at a time and is not capped.
    std::size_t max_running = 8;
    /// Take the job over for this runner's schedule from this instant (UTC),
    /// when the store keeps another schedule for it: slots before it follow
    /// the stored schedule, slots from it this one. Refused when the job's
    /// slots are already settled past it (errc::cron_schedule_conflict names
    /// the settled point). Without it (and without take_over_now) a runner
    /// whose schedule differs from the stored one is refused.
    std::optional<std::chrono::sys_seconds> take_over_from;
    /// As take_over_from, from the later of now and the job's settled point.
    bool take_over_now = false;
    /// Called for every event, on the runner's thread.
    std::function<void(const cron_event&)> on_event;
};

/// A slot's record, as the three books show it.
struct cron_slot_status {
    /// Where the slot stands: no record, running, done, failed, missed, skipped, or revoked for a newer slot.
    enum state_t { none, running, done, failed, missed, skipped, replaced } state = none;  ///< where the slot stands
    std::string slot;  ///< canonical slot text
    std::string worker;    ///< the worker name of the slot's last claim
    std::string instance;  ///< that runner's nonce (empty for claims made without one)
    /// The schedule the slot belongs to: its version, and "CRON TZ" when the
    /// job's record on the store still names it (empty otherwise).
    std::uint32_t schedule_version = 0;
    std::string schedule;  ///< "CRON TZ" of the slot's schedule, when the job's record still names it
    std::uint32_t attempt = 0;  ///< how many claims were granted
    std::string exit;  ///< "0", "3", "signal 9", or "-"
    std::string detail;  ///< the failure's reason, or what the record adds
    std::chrono::milliseconds scheduled{0};  ///< the slot's time, Unix milliseconds
    std::chrono::nanoseconds started{0};     ///< since the Unix epoch on the store's clock; 0 when it never started
};

inline const char* to_string(cron_slot_status::state_t s) noexcept {
    switch (s) {
    case cron_slot_status::none: return "none";
    case cron_slot_status::running: return "running";
    case cron_slot_status::done: return "done";
    case cron_slot_status::failed: return "failed";
    case cron_slot_status::missed: return "missed";
    case cron_slot_status::skipped: return "skipped";
    case cron_slot_status::replaced: return "replaced";
    }
    return "?";
}

namespace detail {
// The texts the runner records as a slot's result (done) or fail reason.
inline constexpr std::string_view cron_missed = "missed";
inline constexpr std::string_view cron_skipped = "skipped: ";
inline constexpr std::string_view cron_replaced = "replaced by ";
inline constexpr std::string_view cron_failed = "failed: ";  // a final failure (done, not retried)
inline constexpr std::string_view cron_abandoned = "abandoned: its claim ended past the start window";

inline std::string cron_exit_text(int status) {
    return status >= 0 ? "exit " + std::to_string(status) : "signal " + std::to_string(-status);
}
inline bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// A claim's holder in the ledger: "<worker> #<16 hex digits: the runner's nonce>".
inline std::string cron_holder(std::string_view worker, std::uint64_t nonce) {
    char tail[24];
    std::snprintf(tail, sizeof tail, " #%016llx", static_cast<unsigned long long>(nonce));
    return std::string(worker) + tail;
}
// Splits a holder into worker and nonce (a holder without a nonce: all worker).
inline std::pair<std::string, std::string> cron_split_holder(std::string_view h) {
    if (h.size() >= 18 && h.compare(h.size() - 18, 2, " #") == 0) {
        const auto nonce = h.substr(h.size() - 16);
        if (nonce.find_first_not_of("0123456789abcdef") == std::string_view::npos)
            return {std::string(h.substr(0, h.size() - 18)), std::string(nonce)};
    }
    return {std::string(h), {}};
}

// One schedule of a job as its record keeps it: the identity (version,
// zone, expression, DST policies) and the first instant it applies from.
struct cron_plan_entry {
    std::uint32_t version = 0;
    std::int64_t from_s = 0;  // Unix seconds; 0 for the job's first schedule
    std::string zone;
    std::string cron;
    gap_policy gap = gap_policy::run_after_gap;
    fold_policy fold = fold_policy::first;

    bool operator==(const cron_plan_entry&) const = default;
    bool same_schedule(const cron_plan_entry& o) const {
        return version == o.version && zone == o.zone && cron == o.cron && gap == o.gap && fold == o.fold;
    }
    std::string describe() const {
        std::string d = "v" + std::to_string(version) + " (cron \"" + cron + "\" tz " + zone;
        if (gap != gap_policy::run_after_gap) d += ", gap skip";
        if (fold != fold_policy::first) d += fold == fold_policy::second ? ", fold second" : ", fold both";
        return d + ")";
    }
};

// A schedule's version: schedule_options::version when given, else derived
// from the identity's text (FNV-1a, never 0).
inline std::uint32_t cron_version_of(std::string_view zone, std::string_view cron, gap_policy g, fold_policy f,
                                     std::uint32_t given) {
    if (given != 0) return given;
    std::uint32_t h = 2166136261u;
    auto mix = [&](std::string_view t) {
        for (const char c : t) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
        h = (h ^ 0x1fu) * 16777619u;
    };
    mix(zone);
    mix(cron);
    mix(std::to_string(static_cast<int>(g)));
    mix(std::to_string(static_cast<int>(f)));
    return h == 0 ? 1 : h;
}
inline cron_plan_entry cron_entry_of(const schedule& s) {
    cron_plan_entry e;
    e.zone = std::string(s.zone());
    e.cron = s.cron().text();
    e.gap = s.options().gap;
    e.fold = s.options().fold;
    e.version = cron_version_of(e.zone, e.cron, e.gap, e.fold, s.options().version);
    return e;
}

// The job's record: the value of its cursor key, a fenced key whose token is
// 1 + the Unix second up to which every slot is settled (a fence only grows:
// instances move it forward together). The value names the job's schedules,
// oldest first, so that cron_history can list a job's slots knowing only its
// id and every runner can check its schedule against the stored one:
//   "coord.cron v2\n<settled, ISO>\n" then per schedule
//   "<version>\t<from unix s>\t<gap 0|1>\t<fold 0|1|2>\t<zone>\t<cron>\n".
// Records of the first layout ("coord.cron v1\t<zone>\t<cron>\t<time>") read
// as one schedule of the derived version. A record keeps its last 32 schedules.
struct cron_plan {
    std::vector<cron_plan_entry> entries;
    std::int64_t settled_s = 0;

    static std::optional<cron_plan> parse(std::string_view text) {
        cron_plan p;
        const std::string_view v1 = "coord.cron v1\t";
        if (starts_with(text, v1)) {
            const auto z = text.find('\t', v1.size());
            const auto c = z == std::string_view::npos ? z : text.find('\t', z + 1);
            if (c == std::string_view::npos) return std::nullopt;
            cron_plan_entry e;
            e.zone = std::string(text.substr(v1.size(), z - v1.size()));
            e.cron = std::string(text.substr(z + 1, c - z - 1));
            e.version = cron_version_of(e.zone, e.cron, e.gap, e.fold, 0);
            p.entries.push_back(std::move(e));
            return p;
        }
        const std::string_view v2 = "coord.cron v2\n";
        if (!starts_with(text, v2)) return std::nullopt;
        std::size_t at = text.find('\n', v2.size());
        if (at == std::string_view::npos) return std::nullopt;
        ++at;
        while (at < text.size()) {
            const auto end = text.find('\n', at);
            if (end == std::string_view::npos) return std::nullopt;
            std::string_view line = text.substr(at, end - at);
            at = end + 1;
            std::string_view f[6];
            for (int i = 0; i < 5; ++i) {
                const auto tab = line.find('\t');
                if (tab == std::string_view::npos) return std::nullopt;
                f[i] = line.substr(0, tab);
                line.remove_prefix(tab + 1);
            }
            f[5] = line;
            cron_plan_entry e;
            std::uint64_t version = 0, from = 0;
            if (!digits(f[0], version) || version == 0 || version > 0xffffffffu || !digits(f[1], from) ||
                (f[2] != "0" && f[2] != "1") || (f[3] != "0" && f[3] != "1" && f[3] != "2") || f[4].empty() ||
                f[5].empty())
                return std::nullopt;
            e.version = static_cast<std::uint32_t>(version);
            e.from_s = static_cast<std::int64_t>(from);
            e.gap = f[2] == "1" ? gap_policy::skip : gap_policy::run_after_gap;
            e.fold = f[3] == "1" ? fold_policy::second : f[3] == "2" ? fold_policy::both : fold_policy::first;
            e.zone = std::string(f[4]);
            e.cron = std::string(f[5]);
            if (!p.entries.empty() && e.from_s <= p.entries.back().from_s) return std::nullopt;
            p.entries.push_back(std::move(e));
        }
        if (p.entries.empty()) return std::nullopt;
        return p;
    }
    std::string text() const {
        std::string t = "coord.cron v2\n";
        t += format_utc(std::chrono::sys_seconds{std::chrono::seconds{settled_s}});
        t += '\n';
        for (const auto& e : entries) {
            t += std::to_string(e.version) + '\t' + std::to_string(e.from_s) + '\t' +
                 (e.gap == gap_policy::skip ? "1" : "0") + '\t' +
                 (e.fold == fold_policy::second ? "1" : e.fold == fold_policy::both ? "2" : "0") + '\t';
            t += e.zone + '\t' + e.cron + '\n';
        }
        return t;
    }
    const cron_plan_entry* find(std::uint32_t version) const {
        for (auto it = entries.rbegin(); it != entries.rend(); ++it)
            if (it->version == version) return &*it;
        return nullptr;
    }

private:
    static bool digits(std::string_view t, std::uint64_t& out) {
        if (t.empty() || t.size() > 19) return false;
        out = 0;
        for (const char c : t) {
            if (c < '0' || c > '9') return false;
            out = out * 10 + static_cast<std::uint64_t>(c - '0');
        }
        return true;
    }
};

// The schedules of a plan, made once: the fire after t, each schedule in its
// own span [from, next from).
class cron_schedules {
public:
    // nullopt when a stored schedule no longer parses (a zone gone from the tz database).
    static std::optional<cron_schedules> make(const std::string& job, const cron_plan& p) {
        cron_schedules out;
        for (const auto& e : p.entries) {
            schedule_options o;
            o.version = e.version;
            o.gap = e.gap;
            o.fold = e.fold;
            auto s = schedule::make(job, e.cron, e.zone, o);
            if (!s) return std::nullopt;
            out.spans_.push_back(span{std::move(*s), std::chrono::sys_seconds{std::chrono::seconds{e.from_s}}});
        }
        return out;
    }
    std::optional<fire> next_after(std::chrono::sys_seconds t) const {
        for (std::size_t i = 0; i < spans_.size(); ++i) {
            const bool last = i + 1 == spans_.size();
            if (!last && spans_[i + 1].from <= t + std::chrono::seconds{1}) continue;  // span over
            const auto from = std::max(t, spans_[i].from - std::chrono::seconds{1});
            auto f = spans_[i].sched.next_after(from);
            if (f && (last || f->utc < spans_[i + 1].from)) return f;
        }
        return std::nullopt;
    }
    // The last `count` fires at or before t, oldest first.
    std::vector<fire> last_fires(std::chrono::sys_seconds t, std::size_t count) const {
        std::vector<fire> out;
        for (std::size_t i = spans_.size(); i-- > 0 && out.size() < count;) {
            auto upto = t;
            if (i + 1 < spans_.size()) upto = std::min(upto, spans_[i + 1].from - std::chrono::seconds{1});
            auto fs = spans_[i].sched.last_fires(upto, count - out.size());
            std::vector<fire> kept;
            for (auto& f : fs)
                if (f.utc >= spans_[i].from) kept.push_back(std::move(f));
            out.insert(out.begin(), std::make_move_iterator(kept.begin()), std::make_move_iterator(kept.end()));
        }
        if (out.size() > count) out.erase(out.begin(), out.end() - static_cast<std::ptrdiff_t>(count));
        return out;
    }

private:
    struct span {
        schedule sched;
        std::chrono::sys_seconds from;
    };
    std::vector<span> spans_;
};

inline std::string cron_cursor_key(const std::string& job) { return "coord.cron/" + job; }

/// The ledger record of a slot as a status line.
inline cron_slot_status cron_status_of(const slot& s, const std::optional<ledger_record>& r,
                                       const cron_plan* plan = nullptr) {
    cron_slot_status out;
    out.slot = s.to_string();
    out.scheduled = s.scheduled().time_since_epoch();
    out.schedule_version = s.schedule_version();
    out.exit = "-";
    if (r && r->schedule_version != 0) out.schedule_version = r->schedule_version;
    if (plan)
        if (const auto* e = plan->find(out.schedule_version)) out.schedule = e->cron + " " + e->zone;
    if (!r) return out;
    auto [worker, instance] = cron_split_holder(r->holder);
    out.worker = std::move(worker);
    out.instance = std::move(instance);
    out.attempt = r->attempt;
    out.started = r->started;
    auto exit_of = [](std::string_view text) -> std::string {
        if (starts_with(text, "exit ")) return std::string(text.substr(5));
        if (starts_with(text, "signal ")) return std::string(text);
        return "-";
    };
    using st = ledger_record::state_t;
    if (r->state == st::running) {
        out.state = cron_slot_status::running;
    } else if (r->state == st::done) {
        const std::string_view res = r->result;
        if (res == cron_missed || starts_with(res, std::string(cron_missed) + ": ")) {
            out.state = cron_slot_status::missed;
            if (res.size() > cron_missed.size()) out.detail = std::string(res.substr(cron_missed.size() + 2));
            out.worker.clear();
            out.instance.clear();
            out.attempt = 0;
            out.started = {};
        } else if (starts_with(res, cron_skipped)) {
            out.state = cron_slot_status::skipped;
            out.detail = std::string(res.substr(cron_skipped.size()));
            out.worker.clear();
            out.instance.clear();
            out.attempt = 0;
            out.started = {};
        } else if (starts_with(res, cron_replaced)) {
            out.state = cron_slot_status::replaced;
            out.detail = std::string(res);
        } else if (starts_with(res, cron_failed)) {
            out.state = cron_slot_status::failed;
            out.detail = std::string(res.substr(cron_failed.size()));
            out.exit = exit_of(out.detail);
        } else {
            out.state = cron_slot_status::done;
            out.exit = exit_of(res);
        }
    } else if (r->attempt > 0 && starts_with(r->fail_reason, cron_replaced)) {
        out.state = cron_slot_status::replaced;  // revoked, not yet closed
        out.detail = r->fail_reason;
    } else if (r->attempt > 0) {
        out.state = cron_slot_status::failed;
        out.detail = r->fail_reason;
        out.exit = exit_of(r->fail_reason);
    }
    return out;
}

// Why a cursor update was abandoned: the job's record changed under it.
struct cron_plan_changed {};
}  // namespace detail

/// The schedules a job's record on the store names, oldest first, and the
/// instant up to which its slots are settled. errc::cron_job_unknown when no
/// runner has run the job on this store; errc::cron_cursor_corrupt when the
/// record is not one a runner wrote.
struct cron_job_schedule {
    std::uint32_t version = 0;  ///< the schedule's version: 1 for the first, one more for each change
    std::chrono::sys_seconds from{};  ///< the first instant it applies to (the epoch for the first)
    std::string cron;  ///< the cron expression
    std::string zone;  ///< the IANA zone it is read in ("UTC" for UTC)
};
template <class Store>
    requires fence_store<Store>
result<std::pair<std::vector<cron_job_schedule>, std::chrono::sys_seconds>> cron_job_plan(Store& store,
                                                                                       const std::string& job) {
    auto v = store.fence_read(detail::cron_cursor_key(job));
    if (!v) return unexpected(v.error());
    if (!v->written) return unexpected(make_error_code(errc::cron_job_unknown));
    auto p = detail::cron_plan::parse(v->value);
    if (!p) return unexpected(make_error_code(errc::cron_cursor_corrupt));
    std::vector<cron_job_schedule> out;
    for (const auto& e : p->entries)
        out.push_back(cron_job_schedule{e.version, std::chrono::sys_seconds{std::chrono::seconds{e.from_s}}, e.cron, e.zone});
    return std::make_pair(std::move(out), std::chrono::sys_seconds{std::chrono::seconds{static_cast<std::int64_t>(v->fence - 1)}});
}

/// A job's history without its schedule: the schedules are the ones its
/// runners recorded with the job (each slot under the schedule that covered
/// its time). errc::cron_job_unknown when no runner has run the job on this
/// store. Cost: one read, then one ledger read per slot.
template <class Store>
    requires ledger_store<Store> && fence_store<Store>
result<std::vector<cron_slot_status>> cron_history(Store& store, const std::string& job, std::chrono::sys_seconds now,
                                                  std::size_t count) {
    if (count < 1 || count > 10000) throw std::invalid_argument("cron_history: count must be 1 to 10000");
    auto v = store.fence_read(detail::cron_cursor_key(job));
    if (!v) return unexpected(v.error());
    if (!v->written) return unexpected(make_error_code(errc::cron_job_unknown));
    auto plan = detail::cron_plan::parse(v->value);
    if (!plan) return unexpected(make_error_code(errc::cron_cursor_corrupt));
    auto scheds = detail::cron_schedules::make(job, *plan);
    if (!scheds) return unexpected(make_error_code(errc::cron_cursor_corrupt));
    const auto cursor = std::chrono::sys_seconds{std::chrono::seconds{static_cast<std::int64_t>(v->fence - 1)}};
    std::vector<cron_slot_status> out;
    for (auto& f : scheds->last_fires(std::max(now, cursor), count)) {
        auto r = store.ledger_read(f.which.to_string());
        if (!r) return unexpected(r.error());
        out.push_back(detail::cron_status_of(f.which, *r, &*plan));
    }
    return out;
}

/// The last `count` slots of `sched` scheduled at or before `now` (oldest
/// first), each with its record in the ledger: the three books side by side.
/// Cost: one ledger read per slot. `count` is 1 to 10000.
template <ledger_store Store>
result<std::vector<cron_slot_status>> cron_history(Store& store, const schedule& sched, std::chrono::sys_seconds now,
                                                  std::size_t count) {
    if (count < 1 || count > 10000) throw std::invalid_argument("cron_history: count must be 1 to 10000");
    std::vector<cron_slot_status> out;
    for (auto& f : sched.last_fires(now, count)) {
        auto r = store.ledger_read(f.which.to_string());
        if (!r) return unexpected(r.error());
        out.push_back(detail::cron_status_of(f.which, *r));
    }
    return out;
}

/// The cron runner: one instance of a distributed cron. Any number of
/// instances, on any machines, run one schedule on one store; each due slot
/// is claimed through the job ledger and its job started by the winner
/// (see the file's comment for the promise).
///
/// Not thread-safe: one thread calls tick() (or run_until()). `Clock` says
/// when slots come due (a unix_clock); `Steady` times heartbeats and grace
/// periods (tests pass one manual_clock as both). The store, schedule and
/// launcher must outlive the runner.
template <class Store, cron_launcher Launcher, unix_clock Clock = system_clock, monotonic_clock Steady = steady_clock>
    requires ledger_store<Store> && fence_update_store<Store>
class basic_cron_runner {
public:
    /// A reading of the Steady clock (heartbeats and grace periods).
    using steady_point = typename Steady::time_point;

    /// A runner of `sched` on `store`; throws std::invalid_argument for options out of range.
    basic_cron_runner(Store& store, const schedule& sched, Launcher& launcher, cron_options options = {},
                      Clock clock = {}, Steady steady = {})
        : store_(&store), sched_(&sched), launcher_(&launcher), opt_(checked(std::move(options))), clock_(clock),
          steady_(steady), run_ledger_(store, ledger_for(opt_, window(opt_))),
          record_ledger_(store, ledger_for(opt_, opt_.record_window)), mine_(detail::cron_entry_of(sched)),
          holder_(detail::cron_holder(opt_.worker, detail::kernel_random_u64())) {}

    basic_cron_runner(const basic_cron_runner&) = delete;
    basic_cron_runner& operator=(const basic_cron_runner&) = delete;

    /// Does what is due now: reaps finished jobs and records their status,
    /// renews running claims (stopping the jobs whose claim was lost), and
    /// (unless stopping) claims and starts the due slots, records missed
    /// and skipped ones. Returns when the next tick is due (earlier is fine).
    steady_point tick() {
        const auto s_now = steady_.now();
        reap(s_now);
        renew(s_now);
        bool more = false;
        if (claiming_ && (walk_now_ || s_now >= next_walk_)) {
            walk_now_ = false;
            more = walk();
            next_walk_ = more ? s_now : s_now + std::min<typename Steady::duration>(opt_.heartbeat, until_next_fire());
        }
        if (claiming_ && opt_.prune_every.count() > 0 && (!pruned_ || s_now >= next_prune_)) {
            pruned_ = true;
            next_prune_ = s_now + opt_.prune_every;
            if (auto p = record_ledger_.prune(); !p) job_error("prune: " + p.error().message());
        }
        return next_wake(s_now, more);
    }

    /// Stops claiming new slots; running jobs go on (and are still renewed).
    void stop_claiming() noexcept { claiming_ = false; }

    /// Asks every running job to stop (SIGTERM): each is killed after
    /// stop_grace, and its attempt recorded as failed ("stopped"), so
    /// another instance may run the slot again within its window.
    void stop_all() {
        for (auto& r : runs_)
            if (!r.stopping && !r.exit) begin_stop(r, "stopped: the runner shut down", true, steady_.now());
    }

    /// How many jobs this instance has running (including ones being stopped).
    std::size_t running() const noexcept { return runs_.size(); }

    /// Set when the store runs this job under another schedule (or took it
    /// over from this runner's): errc::cron_schedule_conflict with what the
    /// store holds and what to do. The runner then claims nothing more;
    /// run_until() returns once its running jobs ended.
    const std::optional<error>& refusal() const noexcept { return refusal_; }

    /// The holder this runner's claims carry in the ledger: `worker #nonce`.
    const std::string& holder() const noexcept { return holder_; }
    /// This runner's schedule version (schedule_options::version, or the
    /// one derived from its expression, zone and DST policies).
    std::uint32_t schedule_version() const noexcept { return mine_.version; }

    /// Runs ticks until `stop` is set (then shuts down gracefully: no new
    /// claims, running jobs get stop_grace to finish, then are stopped) or,
    /// when given, until `until` on the steady clock (the same shutdown).
    /// `poll` bounds each sleep (job exits are noticed within it). A status
    /// the store would not take is given up a lease after the jobs ended
    /// (the claim then lapses, and another instance runs the slot again).
    void run_until(const std::atomic<bool>& stop, std::optional<steady_point> until = std::nullopt,
                   std::chrono::milliseconds poll = std::chrono::milliseconds{50}) {
        auto done = [&] {
            return stop.load(std::memory_order_relaxed) || refusal_ || (until && steady_.now() >= *until);
        };
        while (!done()) sleep_until(tick(), poll);
        stop_claiming();
        const auto grace_end = steady_.now() + opt_.stop_grace;
        while (running() > 0 && steady_.now() < grace_end) sleep_until(std::min(tick(), grace_end), poll);
        if (running() > 0) stop_all();
        const auto give_up = steady_.now() + opt_.stop_grace + opt_.lease_ttl;
        while (running() > 0 && steady_.now() < give_up) sleep_until(std::min(tick(), give_up), poll);
        for (auto& r : runs_) {  // never leave a job behind
            if (!r.exit) r.job.kill();
            emit(cron_event::error, r.which, r.fence, r.attempt, "gave up recording its status at shutdown");
        }
        runs_.clear();
    }

    /// The options in force (after their checks).
    const cron_options& options() const noexcept { return opt_; }

private:
    static cron_options checked(cron_options o) {
        using std::chrono::milliseconds;
        detail::check_name("cron: worker", o.worker);
        // The ledger's holder is the worker, " #" and 16 hex digits: a name too.
        if (o.worker.size() > max_name_size - 18)
            throw std::invalid_argument("cron: worker must be at most 1006 bytes, got " + std::to_string(o.worker.size()));
        if (o.catch_up < milliseconds::zero() || o.catch_up > std::chrono::hours{24 * 400})
            throw std::invalid_argument("cron: catch_up must be 0 to 400 days");
        coord::detail::check_timeout("cron: start_grace", o.start_grace);
        if (o.overlap == overlap_policy::queue_one)
            throw std::invalid_argument("cron: overlap must be allow, skip (forbid) or replace");
        if (o.lease_ttl < milliseconds{100} || o.lease_ttl > std::chrono::hours{24})
            throw std::invalid_argument("cron: lease_ttl must be 100 ms to 24 h");
        if (o.heartbeat < milliseconds::zero() || o.heartbeat >= o.lease_ttl)
            throw std::invalid_argument("cron: heartbeat must be 0 (lease_ttl / 3) or shorter than lease_ttl");
        if (o.heartbeat == milliseconds::zero()) o.heartbeat = o.lease_ttl / 3;
        if (o.stop_grace < milliseconds::zero() || o.stop_grace > std::chrono::hours{24})
            throw std::invalid_argument("cron: stop_grace must be 0 to 24 h");
        if (o.max_attempts < 1 || o.max_attempts > 1000)
            throw std::invalid_argument("cron: max_attempts must be 1 to 1000");
        if (o.record_window == milliseconds::zero())
            o.record_window = std::max<milliseconds>(std::chrono::hours{24 * 8}, window(o) + std::chrono::hours{24});
        if (o.record_window < window(o) + std::chrono::hours{24} ||
            o.record_window > std::chrono::duration_cast<milliseconds>(std::chrono::years{100}))
            throw std::invalid_argument("cron: record_window must be the start window plus a day to 100 years");
        if (o.prune_every != milliseconds::zero() &&
            (o.prune_every < std::chrono::minutes{1} || o.prune_every > std::chrono::hours{24 * 30}))
            throw std::invalid_argument("cron: prune_every must be 0 or 1 min to 30 days");
        if (o.steps_per_tick < 8 || o.steps_per_tick > 100000)
            throw std::invalid_argument("cron: steps_per_tick must be 8 to 100000");
        if (o.max_running < 1 || o.max_running > 10000)
            throw std::invalid_argument("cron: max_running must be 1 to 10000");
        if (o.take_over_now && o.take_over_from)
            throw std::invalid_argument("cron: take_over_from and take_over_now exclude each other");
        if (o.take_over_from && o.take_over_from->time_since_epoch().count() <= 0)
            throw std::invalid_argument("cron: take_over_from must be after 1970");
        return o;
    }

    struct run {
        slot which;
        fence_token fence;
        std::uint32_t attempt;
        std::int64_t started_ns;  // the claim's time on the store's clock
        typename Launcher::handle job;
        // The claim's term, kept by the keeper's rule (coord/detail/term.hpp):
        // heartbeats every opt_.heartbeat from when the last one was sent,
        // vouched for until the safe deadline.
        detail::renewed_term<steady_point> term;
        bool stopping = false;
        bool record_failure = false;  // stopping on shutdown: record the attempt as failed
        std::string stop_reason;
        steady_point kill_at{};
        bool killed = false;
        std::optional<int> exit;  // ended; its status not yet recorded (a store error)
    };

    static std::chrono::milliseconds window(const cron_options& o) { return std::max(o.catch_up, o.start_grace); }
    static ledger_options ledger_for(const cron_options& o, std::chrono::milliseconds replay) {
        ledger_options l;
        l.lease_ttl = std::clamp(o.lease_ttl, std::chrono::milliseconds{100}, std::chrono::milliseconds{std::chrono::hours{24}});
        l.replay_window = std::max(replay, std::chrono::milliseconds{1});
        l.retention = std::max(l.replay_window, o.record_window);
        return l;
    }

    void emit(cron_event::kind_t k, const slot& s, fence_token f, std::uint32_t a, std::string detail = {}) const {
        if (opt_.on_event) opt_.on_event(cron_event{k, s.to_string(), f, a, std::move(detail)});
    }
    // An error of the job, not of one slot: the event's slot is the job id alone.
    void job_error(std::string detail) const { job_event(cron_event::error, std::move(detail)); }
    void job_event(cron_event::kind_t k, std::string detail) const {
        if (opt_.on_event) opt_.on_event(cron_event{k, sched_->job(), 0, 0, std::move(detail)});
    }
    void store_error(const slot& s, const char* what, const error& e) const {
        emit(cron_event::error, s, 0, 0, std::string(what) + ": " + e.message());
    }

    // --- running jobs ----------------------------------------------------

    void reap(steady_point now) {
        for (std::size_t i = 0; i < runs_.size();) {
            auto& r = runs_[i];
            if (!r.exit) r.exit = r.job.poll();
            if (!r.exit) {
                if (r.stopping && !r.killed && now >= r.kill_at) {
                    r.job.kill();
                    r.killed = true;
                }
                ++i;
                continue;
            }
            if (!record_end(r)) {
                ++i;  // the store did not answer: record on the next tick
                continue;
            }
            runs_.erase(runs_.begin() + static_cast<std::ptrdiff_t>(i));
            walk_now_ = true;  // a slot waiting for this run may start
        }
    }

    // Records how a job ended; false when the store must be asked again.
    bool record_end(run& r) {
        const auto status = detail::cron_exit_text(*r.exit);
        if (r.stopping && !r.record_failure) return true;  // lost: nothing recorded
        result<void> w;
        if (r.record_failure) {
            w = run_ledger_.fail(r.which, r.fence, r.stop_reason + " (" + status + ")");
        } else if (*r.exit == 0) {
            w = run_ledger_.complete(r.which, r.fence, status);
        } else if (r.attempt >= opt_.max_attempts) {
            w = run_ledger_.complete(r.which, r.fence, std::string(detail::cron_failed) + status);
        } else {
            w = run_ledger_.fail(r.which, r.fence, status);
        }
        if (!w) {
            if (w.error() == errc::stale_fence) {
                // Revoked or taken over since the last heartbeat (or a repeat of
                // a write that applied): the slot is not ours to record.
                emit(cron_event::lost, r.which, r.fence, r.attempt, status + ", not recorded: the claim had ended");
                return true;
            }
            store_error(r.which, "recording the status", w.error());
            return false;
        }
        emit(cron_event::finished, r.which, r.fence, r.attempt, status);
        return true;
    }

    // Heartbeats the running claims when due. A claim is stopped at once
    // when a heartbeat is refused (a newer claim holds the slot), and when
    // its safe deadline passed with no heartbeat answered (an instance that
    // was paused, a store that did not answer): another instance may hold
    // the slot by then.
    void renew(steady_point now) {
        for (auto& r : runs_) {
            if (r.exit || r.stopping) continue;
            if (!r.term.vouched(now)) {
                begin_stop(r, std::string(not_vouched), false, now);
                continue;
            }
            if (!r.term.due(now)) continue;
            auto h = run_ledger_.heartbeat(r.which, r.fence);  // sent after `now` was read
            if (h) {
                r.term.renewed(now);
                continue;
            }
            if (h.error() == errc::stale_fence) {
                begin_stop(r, "claim lost: a newer claim holds the slot", false, now);
                continue;
            }
            store_error(r.which, "heartbeat", h.error());
            const auto answered = steady_.now();
            r.term.unanswered(answered);
            if (!r.term.vouched(answered)) begin_stop(r, std::string(not_vouched), false, answered);
        }
    }
    static constexpr const char* not_vouched =
        "claim not renewed by its safe deadline (the lease from the last heartbeat sent, less the clock-drift "
        "allowance): it may have ended";
    // The term of a claim sent at `sent`.
    detail::renewed_term<steady_point> claim_term(steady_point sent) const {
        const std::chrono::nanoseconds ttl = opt_.lease_ttl;
        return detail::renewed_term<steady_point>(ttl, detail::drift_allowance(ttl), opt_.heartbeat, sent);
    }

    void begin_stop(run& r, std::string reason, bool record, steady_point now) {
        r.stopping = true;
        r.record_failure = record;
        r.stop_reason = std::move(reason);
        r.kill_at = now + opt_.stop_grace;
        emit(record ? cron_event::stopping : cron_event::lost, r.which, r.fence, r.attempt, r.stop_reason);
        r.job.terminate();
        if (opt_.stop_grace == std::chrono::milliseconds::zero()) {
            r.job.kill();
            r.killed = true;
        }
    }

    run* mine(const slot& s) {
        for (auto& r : runs_)
            if (r.which == s && !r.stopping) return &r;
        return nullptr;
    }
    bool stopping_here(const slot& s) const {
        for (const auto& r : runs_)
            if (r.which == s && r.stopping) return true;
        return false;
    }

    // Starts the job of a claim sent at claim_sent_. `granted_earlier`: the
    // claim was granted by an earlier call whose answer was lost, so its term
    // began before claim_sent_: the first heartbeat is due at once, and the
    // term is vouched for from its send instant on.
    bool start(const slot& s, fence_token fence, std::uint32_t attempt, std::int64_t started_ns,
               bool granted_earlier = false) {
        const cron_context ctx{s, fence, attempt, format_utc(s.scheduled()), opt_.worker};
        try {
            auto h = launcher_->start(ctx);
            auto term = claim_term(claim_sent_);
            if (granted_earlier) term.next_renewal = claim_sent_;
            runs_.push_back(run{s, fence, attempt, started_ns, std::move(h), term, false, false, {}, {}, false, {}});
            emit(cron_event::started, s, fence, attempt);
            return true;
        } catch (const std::exception& e) {
            const std::string why = std::string("cannot start: ") + e.what();
            auto w = attempt >= opt_.max_attempts
                         ? run_ledger_.complete(s, fence, std::string(detail::cron_failed) + why)
                         : run_ledger_.fail(s, fence, why);
            if (!w) store_error(s, "recording a failed start", w.error());
            emit(cron_event::finished, s, fence, attempt, why);
            return false;
        }
    }

    // --- the walk over due slots ------------------------------------------

    std::string cursor_key() const { return detail::cron_cursor_key(sched_->job()); }
    static fence_token token_of(std::chrono::sys_seconds t) {
        return static_cast<fence_token>(t.time_since_epoch().count()) + 1;
    }
    static std::chrono::sys_seconds settled_of(fence_token f) {
        return std::chrono::sys_seconds{std::chrono::seconds{static_cast<std::int64_t>(f - 1)}};
    }

    // Reads the job's record (making it when the job is new: its slots
    // start now, not before its first instance), and checks this runner's
    // schedule against the stored one, taking the job over when told to.
    // Returns the instant up to which every slot is settled, or nullopt (an
    // error was logged, or the runner was refused).
    std::optional<std::chrono::sys_seconds> read_plan(std::chrono::sys_seconds now) {
        auto v = store_->fence_read(cursor_key());
        if (!v) {
            job_error("reading the job's record: " + v.error().message());
            return std::nullopt;
        }
        if (!v->written) {
            detail::cron_plan p;
            p.entries.push_back(mine_);
            p.entries.back().from_s = 0;
            p.settled_s = now.time_since_epoch().count();
            const auto text = p.text();
            try {
                auto w = store_->fence_update(cursor_key(), token_of(now), [&](std::string& val) {
                    if (!val.empty()) throw detail::cron_plan_changed{};  // another instance made it first
                    val = text;
                });
                if (!w && w.error().code != errc::stale_fence) {
                    job_error("making the job's record: " + w.error().code.message());
                    return std::nullopt;
                }
            } catch (const detail::cron_plan_changed&) {
            }
            v = store_->fence_read(cursor_key());
            if (!v) {
                job_error("reading the job's record: " + v.error().message());
                return std::nullopt;
            }
        }
        auto plan = detail::cron_plan::parse(v->value);
        if (!plan) {
            job_error("the job's record on the store is not one a runner wrote: nothing claimed");
            return std::nullopt;
        }
        const auto settled = settled_of(v->fence);
        if (plan->entries.back().same_schedule(mine_)) return adopt(std::move(*plan), v->value) ? std::optional{settled} : std::nullopt;
        if ((opt_.take_over_from || opt_.take_over_now) && !took_over_) {
            take_over(*plan, v->value, v->fence, now);
            return std::nullopt;  // walk on the next tick, with the record it left
        }
        const auto& cur = plan->entries.back();
        bool superseded = false;
        for (std::size_t i = 0; i + 1 < plan->entries.size(); ++i) superseded |= plan->entries[i].same_schedule(mine_);
        if (superseded)
            refuse("job " + sched_->job() + " was taken over by schedule " + cur.describe() + " from " +
                   format_utc(std::chrono::sys_seconds{std::chrono::seconds{cur.from_s}}) + "; this runner's schedule " +
                   mine_.describe() + " applies no longer: stop this runner");
        else
            refuse("job " + sched_->job() + " runs schedule " + cur.describe() + " on this store; this runner's is " +
                   mine_.describe() +
                   ": run the stored schedule, or take the job over from an instant (coordctl cron run "
                   "--take-over-from INSTANT|now; cron_options::take_over_from), after which the runners of the "
                   "stored schedule are refused");
        return std::nullopt;
    }

    // Makes `p` the plan the walk follows; false when a stored schedule no
    // longer parses (logged).
    bool adopt(detail::cron_plan p, const std::string& text) {
        if (scheds_ && text == plan_text_) return true;
        auto sc = detail::cron_schedules::make(sched_->job(), p);
        if (!sc) {
            job_error("a schedule in the job's record no longer parses here (its time zone?): nothing claimed");
            return false;
        }
        scheds_ = std::move(sc);
        plan_ = std::move(p);
        plan_text_ = text;
        return true;
    }

    void take_over(detail::cron_plan p, const std::string& text, fence_token fence, std::chrono::sys_seconds now) {
        using std::chrono::seconds;
        const auto settled = settled_of(fence);
        const auto from = opt_.take_over_now ? std::max(now, settled + seconds{1}) : *opt_.take_over_from;
        const auto cur = p.entries.back();  // a copy: the entries grow below
        if (from <= settled || from.time_since_epoch().count() <= cur.from_s) {
            refuse("cannot take job " + sched_->job() + " over from " + format_utc(from) + ": its slots are settled up to " +
                   format_utc(std::max(settled, std::chrono::sys_seconds{seconds{cur.from_s}})) + " under schedule " +
                   cur.describe() + "; take it over from a later instant (or now)");
            return;
        }
        auto e = mine_;
        e.from_s = from.time_since_epoch().count();
        p.entries.push_back(std::move(e));
        // Keep the last 32 schedules (cron_history shows slots under each).
        if (p.entries.size() > 32) p.entries.erase(p.entries.begin(), p.entries.end() - 32);
        p.settled_s = settled.time_since_epoch().count();
        const auto next = p.text();
        try {
            // The same token: the cursor stays; a record changed meanwhile refuses.
            auto w = store_->fence_update(cursor_key(), fence, [&](std::string& val) {
                if (val != text) throw detail::cron_plan_changed{};
                val = next;
            });
            if (!w) {
                if (w.error().code != errc::stale_fence)
                    job_error("taking the job over: " + w.error().code.message() +
                              (w.error() == condition::outcome_unknown ? " (read again on the next tick)" : ""));
                walk_now_ = true;
                return;
            }
        } catch (const detail::cron_plan_changed&) {
            walk_now_ = true;  // another instance moved the record: look again
            return;
        }
        took_over_ = true;
        walk_now_ = true;
        job_event(cron_event::took_over, "schedule " + mine_.describe() + " from " + format_utc(from) + ", after " +
                                             cur.describe());
    }

    void refuse(std::string why) {
        claiming_ = false;
        refusal_ = error(make_error_code(errc::cron_schedule_conflict), why);
        job_event(cron_event::refused, std::move(why));
    }

    // Moves the cursor to `t` (every slot up to it settled) unless the job's
    // record changed since this runner read it (a take-over: it reads again).
    bool write_cursor(std::chrono::sys_seconds t) {
        auto next = plan_;
        next.settled_s = t.time_since_epoch().count();
        const auto text = next.text();
        try {
            auto w = store_->fence_update(cursor_key(), token_of(t), [&](std::string& val) {
                auto p = detail::cron_plan::parse(val);
                if (!p || p->entries != plan_.entries) throw detail::cron_plan_changed{};
                val = text;
            });
            return w || w.error().code == errc::stale_fence;  // another instance moved it further
        } catch (const detail::cron_plan_changed&) {
            walk_now_ = true;
            return false;
        }
    }

    std::optional<fire> next_fire(std::chrono::sys_seconds t) const {
        return scheds_ ? scheds_->next_after(t) : sched_->next_after(t);
    }

    // Claims and starts what is due; true when the step budget ran out.
    bool walk() {
        using namespace std::chrono;
        const auto now = floor<seconds>(sys_time<nanoseconds>{nanoseconds{since_epoch_ns(clock_.now())}});
        walked_to_ = now;
        auto cur = read_plan(now);
        if (!cur) return false;
        auto cursor = *cur;
        // Held-back slots that are settled now need no reason any more.
        held_back_.erase(held_back_.begin(), held_back_.upper_bound(cursor));
        // Slots too old to record are counted, not walked one by one.
        const auto record_from = now - duration_cast<seconds>(opt_.record_window) + seconds{60};
        if (cursor < record_from) {
            std::size_t n = 0;
            std::optional<fire> first, last;
            for (auto t = cursor; n < 1'000'000;) {
                auto f = next_fire(t);
                if (!f || f->utc >= record_from) break;
                if (!first) first = *f;
                t = f->utc;
                last = std::move(f);
                ++n;
            }
            if (n > 0)
                emit(cron_event::missed, first->which, 0, 0,
                     std::to_string(n) + " slots through " + last->which.to_string() +
                         " (older than the record window: not recorded one by one)");
            const auto to = n == 1'000'000 ? last->utc : record_from - seconds{1};
            if (!write_cursor(to)) return false;
            cursor = to;
        }
        std::size_t steps = 0;
        bool going = false;          // an earlier slot's run goes on (here or elsewhere)
        // When the earliest run still going started (the store's clock): under
        // forbid a slot due after it is skipped, one due before waits its turn.
        std::int64_t going_since = std::numeric_limits<std::int64_t>::max();
        bool settled_prefix = true;  // every slot walked so far is settled
        auto settled_to = cursor;
        std::vector<std::pair<slot, fence_token>> runs_going;  // for replace
        for (auto t = cursor; steps < opt_.steps_per_tick;) {
            auto f = next_fire(t);
            if (!f || f->utc > now) break;
            t = f->utc;
            const slot& s = f->which;
            const auto after = next_fire(t);
            const bool latest = !after || after->utc > now;  // no later slot is due yet
            bool settled = false;
            const auto due_ns = detail::ns_of_ms_saturated(s.scheduled().time_since_epoch().count());
            if (run* r = mine(s)) {
                going = true;
                going_since = std::min(going_since, r->started_ns);
                runs_going.emplace_back(r->which, r->fence);
            } else if (going && opt_.overlap == overlap_policy::skip && due_ns <= going_since) {
                // forbid: a slot that was due before the going run started
                // (a catch-up slot) waits its turn.
            } else if (opt_.overlap != overlap_policy::replace && runs_.size() >= opt_.max_running) {
                // Over this instance's cap: the slot waits its turn within its
                // start window (another instance may take it meanwhile); once
                // this instance's clock says the window passed, it is settled
                // (recorded missed, with the reason) without a claim to run.
                held_back_.insert(t);
                if (t + duration_cast<seconds>(window(opt_)) + seconds{1} < now)
                    settled = settle_late(s, going, going_since, runs_going, steps);
            } else {
                ++steps;
                claim_sent_ = steady_.now();
                auto c = run_ledger_.claim(s, holder_);
                if (!c) {
                    store_error(s, "claim", c.error());
                    break;
                }
                switch (c->kind) {
                case claim_outcome::replayed:
                case claim_outcome::payload_mismatch: settled = true; break;
                case claim_outcome::in_progress:
                    if (c->holder == holder_ && !stopping_here(s)) {
                        // This runner's own claim whose answer was lost (the
                        // holder carries this runner's nonce): it is ours to run.
                        emit(cron_event::claimed, s, c->fence, c->attempt, "a claim whose answer was lost");
                        const auto since = c->lease_until.count() - ttl_ns();
                        if (!start(s, c->fence, c->attempt, since, true)) settled = true;
                        going = true;
                        going_since = std::min(going_since, since);
                        break;
                    }
                    going = true;
                    runs_going.emplace_back(s, c->fence);
                    if (opt_.overlap == overlap_policy::skip) {
                        ++steps;
                        auto rec = run_ledger_.read(s);  // when that run started
                        going_since = std::min(going_since, rec && *rec ? (*rec)->started.count() : std::numeric_limits<std::int64_t>::min());
                    }
                    break;
                case claim_outcome::expired: settled = settle_late(s, going, going_since, runs_going, steps); break;
                case claim_outcome::granted:
                    emit(cron_event::claimed, s, c->fence, c->attempt);
                    if (const auto store_now = c->lease_until.count() - ttl_ns(); due_ns > store_now + 1'000'000'000)
                        // The store judges lateness, not earliness: say so.
                        emit(cron_event::error, s, c->fence, c->attempt,
                             "this instance's clock is " + std::to_string((due_ns - store_now) / 1'000'000) +
                                 " ms ahead of the store's: the slot starts early");
                    settled = granted(s, *c, going, latest, runs_going, steps);
                    if (!settled) {
                        going = true;
                        going_since = std::min(going_since, c->lease_until.count() - ttl_ns());
                    }
                    break;
                }
            }
            if (settled && settled_prefix) settled_to = t;
            if (!settled) settled_prefix = false;
        }
        if (settled_to > cursor) (void)write_cursor(settled_to);
        return steps >= opt_.steps_per_tick;
    }

    // A granted claim of a due slot; true when the slot is settled.
    bool granted(const slot& s, const claim_outcome& c, bool going, bool latest,
                 const std::vector<std::pair<slot, fence_token>>& runs_going, std::size_t& steps) {
        if (opt_.overlap == overlap_policy::replace && !latest) {
            // replace: only the newest due slot runs; older ones are replaced by it.
            return close(s, c.fence, std::string(detail::cron_replaced) + "a newer due slot", cron_event::replaced);
        }
        if (going && opt_.overlap == overlap_policy::skip)
            return close(s, c.fence, std::string(detail::cron_skipped) + "the previous run was still going",
                         cron_event::skipped);
        if (going && opt_.overlap == overlap_policy::replace) {
            for (const auto& [old, fence] : runs_going) {
                ++steps;
                auto v = run_ledger_.revoke(old, std::string(detail::cron_replaced) + s.to_string());
                if (!v) {
                    if (v.error() != errc::stale_fence) store_error(old, "revoke", v.error());
                    continue;
                }
                emit(cron_event::replaced, old, fence, 0, "by " + s.to_string());
                // Close the revoked slot at once, so that nobody runs it again.
                auto again = record_ledger_.claim(old, holder_);
                if (again && again->kind == claim_outcome::granted)
                    (void)run_ledger_.complete(old, again->fence, std::string(detail::cron_replaced) + s.to_string());
            }
        }
        return !start(s, c.fence, c.attempt, c.lease_until.count() - ttl_ns());
    }

    std::int64_t ttl_ns() const noexcept { return static_cast<std::int64_t>(opt_.lease_ttl.count()) * 1'000'000; }

    // Records a granted slot as done without running it.
    bool close(const slot& s, fence_token fence, const std::string& why, cron_event::kind_t k) {
        auto w = run_ledger_.complete(s, fence, why);
        if (!w) {
            if (w.error() == errc::stale_fence) return true;
            store_error(s, "recording", w.error());
            return false;
        }
        emit(k, s, fence, 0, why);
        return true;
    }

    // A slot past its start window (the store said so): recorded as missed if
    // it has no record; a failed one stays failed; an abandoned claim (its
    // holder's lease ended) is closed as failed. True when settled.
    bool settle_late(const slot& s, bool& going, std::int64_t& going_since,
                     std::vector<std::pair<slot, fence_token>>& runs_going, std::size_t& steps) {
        ++steps;
        auto r = record_ledger_.read(s);
        if (!r) {
            store_error(s, "read", r.error());
            return false;
        }
        using st = ledger_record::state_t;
        if (*r && (*r)->state == st::done) return true;
        if (*r && (*r)->state == st::idle && (*r)->attempt > 0) return true;  // failed: final now
        ++steps;
        auto c = record_ledger_.claim(s, holder_);
        if (!c) {
            store_error(s, "claim", c.error());
            return false;
        }
        switch (c->kind) {
        case claim_outcome::granted: {
            if (c->attempt > 1 || (*r && (*r)->state == st::running))
                return close(s, c->fence, std::string(detail::cron_failed) + std::string(detail::cron_abandoned),
                             cron_event::missed);
            const auto t = std::chrono::floor<std::chrono::seconds>(s.scheduled());
            const bool held = held_back_.erase(t) > 0;
            const std::string why =
                held ? "held back: this instance ran " + std::to_string(opt_.max_running) +
                           " jobs (max running) until its start window passed"
                     : "its start window passed before any instance started it (instances down, late or held back)";
            return close(s, c->fence, std::string(detail::cron_missed) + ": " + why, cron_event::missed);
        }
        case claim_outcome::in_progress:
            going = true;  // a long run past its window
            runs_going.emplace_back(s, c->fence);
            going_since = std::min(going_since, *r ? (*r)->started.count() : std::numeric_limits<std::int64_t>::min());
            return false;
        case claim_outcome::expired:
            emit(cron_event::missed, s, 0, 0, "older than the record window: not recorded");
            return true;
        case claim_outcome::replayed:
        case claim_outcome::payload_mismatch: return true;
        }
        return true;
    }

    steady_point next_wake(steady_point now, bool more) const {
        if (more) return now;
        using namespace std::chrono;
        auto wake = now + hours{1};
        for (const auto& r : runs_) {
            if (r.exit) return now + milliseconds{200};  // retry recording
            if (!r.stopping) wake = std::min(wake, r.term.next_due());
            else if (!r.killed) wake = std::min(wake, r.kill_at);
        }
        if (claiming_) wake = std::min(wake, next_walk_);
        return wake;
    }

    // How long until the first fire after the last walk's time, on the wall
    // clock (0 when it has come; an hour at most).
    typename Steady::duration until_next_fire() const {
        using namespace std::chrono;
        const auto wall = clock_.now();
        auto until = duration_cast<nanoseconds>(hours{1});
        if (auto f = next_fire(walked_to_))
            until = std::clamp(nanoseconds{since_epoch_ns(f->utc)} - nanoseconds{since_epoch_ns(wall)}, nanoseconds::zero(), until);
        return duration_cast<typename Steady::duration>(until);
    }

    void sleep_until(steady_point t, std::chrono::milliseconds poll) {
        steady_.sleep_until(std::min(t, steady_.now() + poll));
    }

    Store* store_;
    const schedule* sched_;
    Launcher* launcher_;
    cron_options opt_;
    Clock clock_;
    Steady steady_;
    basic_job_ledger<Store> run_ledger_;     // replay window = the start window: the store says "too late"
    basic_job_ledger<Store> record_ledger_;  // replay window = the record window: to record missed slots
    std::vector<run> runs_;
    bool claiming_ = true;
    bool walk_now_ = true;
    bool pruned_ = false;
    steady_point next_prune_{};
    std::chrono::sys_seconds walked_to_{};  // the wall-clock second the last walk went up to
    steady_point next_walk_{};
    steady_point claim_sent_{};  // when the last run claim was sent: its term starts there
    detail::cron_plan_entry mine_;                 // this runner's schedule, as the job's record names it
    std::string holder_;                           // "worker #nonce": this runner's claims
    detail::cron_plan plan_;                       // the job's record, as last read
    std::string plan_text_;
    std::optional<detail::cron_schedules> scheds_;  // plan_'s schedules
    bool took_over_ = false;
    std::optional<error> refusal_;
    std::set<std::chrono::sys_seconds> held_back_;  // due slots left unclaimed by max_running
};

}  // namespace coord
