// SPDX-License-Identifier: Apache-2.0
// Schedules: cron parsing, DST in three zones under every policy (exact fire
// lists), calendar edges, misfire catch-up, overlap through the ledger.
#include <gtest/gtest.h>

#include <bitset>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "coord/schedule.hpp"
#include "coord/storage/memory.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using coord::fold_policy;
using coord::gap_policy;

std::chrono::sys_seconds at(const std::string& iso) {  // "2026-03-08T07:00Z"
    auto s = coord::slot::parse("t@" + iso);
    EXPECT_TRUE(s) << iso;
    return std::chrono::floor<std::chrono::seconds>(s->scheduled());
}

std::vector<std::string> fires(const std::string& cron, const std::string& zone, const std::string& from,
                               const std::string& to, coord::schedule_options o = {}) {
    auto s = coord::schedule::make("job", cron, zone, o);
    EXPECT_TRUE(s) << (s ? "" : s.error().message);
    auto list = s->between(at(from), at(to), 10000);
    EXPECT_TRUE(list);
    std::vector<std::string> out;
    for (auto& f : *list) out.push_back(f.which.to_string().substr(4));  // drop "job@"
    return out;
}

coord::schedule_options with(gap_policy g, fold_policy f = fold_policy::first) {
    coord::schedule_options o;
    o.gap = g;
    o.fold = f;
    return o;
}
coord::schedule_options with(fold_policy f) { return with(gap_policy::run_after_gap, f); }

using list = std::vector<std::string>;

// America/New_York 2026: 02:00 EST -> 03:00 EDT on March 8 (07:00Z);
// 02:00 EDT -> 01:00 EST on November 1 (06:00Z).
TEST(ScheduleDst, NewYorkDailyInTheGap) {
    const auto run = fires("30 2 * * *", "America/New_York", "2026-03-07T00:00Z", "2026-03-10T00:00Z");
    EXPECT_EQ(run, (list{"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}));
    const auto skip = fires("30 2 * * *", "America/New_York", "2026-03-07T00:00Z", "2026-03-10T00:00Z",
                            with(gap_policy::skip));
    EXPECT_EQ(skip, (list{"2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z"}));
}

TEST(ScheduleDst, NewYorkDailyInTheFold) {
    const std::string f = "2026-10-31T00:00Z", t = "2026-11-03T00:00Z";
    EXPECT_EQ(fires("30 1 * * *", "America/New_York", f, t, with(fold_policy::first)),
              (list{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}));
    EXPECT_EQ(fires("30 1 * * *", "America/New_York", f, t, with(fold_policy::second)),
              (list{"2026-10-31T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"}));
    EXPECT_EQ(fires("30 1 * * *", "America/New_York", f, t, with(fold_policy::both)),
              (list{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"}));
}

TEST(ScheduleDst, NewYorkHourly) {
    // Spring forward: local 02:00 does not exist; after the gap is 03:00 EDT = 07:00Z, fired once.
    for (auto g : {gap_policy::run_after_gap, gap_policy::skip})
        EXPECT_EQ(fires("0 * * * *", "America/New_York", "2026-03-08T04:00Z", "2026-03-08T09:00Z", with(g)),
                  (list{"2026-03-08T05:00:00Z", "2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z",
                        "2026-03-08T09:00:00Z"}));
    // Fall back: local 01:00 happens at 05:00Z (EDT) and 06:00Z (EST).
    const std::string f = "2026-11-01T04:00Z", t = "2026-11-01T08:00Z";
    EXPECT_EQ(fires("0 * * * *", "America/New_York", f, t, with(fold_policy::first)),
              (list{"2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"}));
    EXPECT_EQ(fires("0 * * * *", "America/New_York", f, t, with(fold_policy::second)),
              (list{"2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"}));
    EXPECT_EQ(fires("0 * * * *", "America/New_York", f, t, with(fold_policy::both)),
              (list{"2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"}));
}

TEST(ScheduleDst, NewYorkEveryMinute) {
    // The 60 nonexistent minutes all stand for 07:00Z: one fire there (run_after_gap) or none extra (skip).
    for (auto g : {gap_policy::run_after_gap, gap_policy::skip})
        EXPECT_EQ(fires("* * * * *", "America/New_York", "2026-03-08T06:58Z", "2026-03-08T07:02Z", with(g)),
                  (list{"2026-03-08T06:59:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:01:00Z", "2026-03-08T07:02:00Z"}));
    const std::string f = "2026-11-01T05:58Z", t = "2026-11-01T06:02Z";
    EXPECT_EQ(fires("* * * * *", "America/New_York", f, t, with(fold_policy::first)), (list{"2026-11-01T05:59:00Z"}));
    EXPECT_EQ(fires("* * * * *", "America/New_York", f, t, with(fold_policy::second)),
              (list{"2026-11-01T06:00:00Z", "2026-11-01T06:01:00Z", "2026-11-01T06:02:00Z"}));
    EXPECT_EQ(fires("* * * * *", "America/New_York", f, t, with(fold_policy::both)),
              (list{"2026-11-01T05:59:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:01:00Z", "2026-11-01T06:02:00Z"}));
}

// Europe/Berlin 2026: 02:00 CET -> 03:00 CEST on March 29 (01:00Z);
// 03:00 CEST -> 02:00 CET on October 25 (01:00Z).
TEST(ScheduleDst, BerlinDailyHourlyAndEveryMinute) {
    EXPECT_EQ(fires("30 2 * * *", "Europe/Berlin", "2026-03-28T00:00Z", "2026-03-31T00:00Z"),
              (list{"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}));
    EXPECT_EQ(fires("30 2 * * *", "Europe/Berlin", "2026-03-28T00:00Z", "2026-03-31T00:00Z", with(gap_policy::skip)),
              (list{"2026-03-28T01:30:00Z", "2026-03-30T00:30:00Z"}));
    const std::string f = "2026-10-24T00:00Z", t = "2026-10-27T00:00Z";
    EXPECT_EQ(fires("30 2 * * *", "Europe/Berlin", f, t, with(fold_policy::first)),
              (list{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}));
    EXPECT_EQ(fires("30 2 * * *", "Europe/Berlin", f, t, with(fold_policy::second)),
              (list{"2026-10-24T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"}));
    EXPECT_EQ(fires("30 2 * * *", "Europe/Berlin", f, t, with(fold_policy::both)),
              (list{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"}));
    // Hourly across the fall-back: local 02:00 at 00:00Z (CEST) and 01:00Z (CET).
    EXPECT_EQ(fires("0 * * * *", "Europe/Berlin", "2026-10-24T23:00Z", "2026-10-25T02:00Z", with(fold_policy::first)),
              (list{"2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z"}));
    EXPECT_EQ(fires("0 * * * *", "Europe/Berlin", "2026-10-24T23:00Z", "2026-10-25T02:00Z", with(fold_policy::both)),
              (list{"2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"}));
    EXPECT_EQ(fires("0 * * * *", "Europe/Berlin", "2026-03-28T23:00Z", "2026-03-29T02:00Z", with(gap_policy::skip)),
              (list{"2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"}));
    EXPECT_EQ(fires("0 * * * *", "Europe/Berlin", "2026-10-24T23:00Z", "2026-10-25T02:00Z", with(fold_policy::second)),
              (list{"2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"}));
    EXPECT_EQ(fires("0 * * * *", "Europe/Berlin", "2026-03-28T23:00Z", "2026-03-29T02:00Z"),
              (list{"2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"}));
    for (auto g : {gap_policy::run_after_gap, gap_policy::skip})
        EXPECT_EQ(fires("* * * * *", "Europe/Berlin", "2026-03-29T00:58Z", "2026-03-29T01:01Z", with(g)),
                  (list{"2026-03-29T00:59:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:01:00Z"}));
    // Every minute across the fall-back: 02:00-02:59 local happen at 00:00Z-00:59Z and 01:00Z-01:59Z.
    const std::string mf = "2026-10-25T00:58Z", mt = "2026-10-25T01:02Z";
    EXPECT_EQ(fires("* * * * *", "Europe/Berlin", mf, mt, with(fold_policy::first)), (list{"2026-10-25T00:59:00Z"}));
    EXPECT_EQ(fires("* * * * *", "Europe/Berlin", mf, mt, with(fold_policy::second)),
              (list{"2026-10-25T01:00:00Z", "2026-10-25T01:01:00Z", "2026-10-25T01:02:00Z"}));
    EXPECT_EQ(fires("* * * * *", "Europe/Berlin", mf, mt, with(fold_policy::both)),
              (list{"2026-10-25T00:59:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:01:00Z", "2026-10-25T01:02:00Z"}));
}

// Australia/Lord_Howe: a 30-minute shift. 2026: 02:00 (+10:30) -> 02:30 (+11)
// on October 4 (October 3 15:30Z); 02:00 (+11) -> 01:30 (+10:30) on April 5 (April 4 15:00Z).
TEST(ScheduleDst, LordHoweThirtyMinuteShift) {
    EXPECT_EQ(fires("15 2 * * *", "Australia/Lord_Howe", "2026-10-02T00:00Z", "2026-10-05T00:00Z"),
              (list{"2026-10-02T15:45:00Z", "2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"}));
    EXPECT_EQ(fires("15 2 * * *", "Australia/Lord_Howe", "2026-10-02T00:00Z", "2026-10-05T00:00Z",
                    with(gap_policy::skip)),
              (list{"2026-10-02T15:45:00Z", "2026-10-04T15:15:00Z"}));
    const std::string f = "2026-04-03T00:00Z", t = "2026-04-06T00:00Z";
    EXPECT_EQ(fires("45 1 * * *", "Australia/Lord_Howe", f, t, with(fold_policy::first)),
              (list{"2026-04-03T14:45:00Z", "2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"}));
    EXPECT_EQ(fires("45 1 * * *", "Australia/Lord_Howe", f, t, with(fold_policy::second)),
              (list{"2026-04-03T14:45:00Z", "2026-04-04T15:15:00Z", "2026-04-05T15:15:00Z"}));
    EXPECT_EQ(fires("45 1 * * *", "Australia/Lord_Howe", f, t, with(fold_policy::both)),
              (list{"2026-04-03T14:45:00Z", "2026-04-04T14:45:00Z", "2026-04-04T15:15:00Z", "2026-04-05T15:15:00Z"}));
    // Hourly on the fall-back day: local 01:00 once, then 01:30-02:00 repeats
    // (no hour mark inside it), so every fold policy gives the same fires.
    for (auto p : {fold_policy::first, fold_policy::second, fold_policy::both})
        EXPECT_EQ(fires("0 * * * *", "Australia/Lord_Howe", "2026-04-04T13:30Z", "2026-04-04T16:30Z", with(p)),
                  (list{"2026-04-04T14:00:00Z", "2026-04-04T15:30:00Z", "2026-04-04T16:30:00Z"}));
    // Hourly across the gap: local 02:00 does not exist (02:00-02:29).
    EXPECT_EQ(fires("0 * * * *", "Australia/Lord_Howe", "2026-10-03T14:00Z", "2026-10-03T17:00Z"),
              (list{"2026-10-03T14:30:00Z", "2026-10-03T15:30:00Z", "2026-10-03T16:00:00Z", "2026-10-03T17:00:00Z"}));
    EXPECT_EQ(fires("0 * * * *", "Australia/Lord_Howe", "2026-10-03T14:00Z", "2026-10-03T17:00Z", with(gap_policy::skip)),
              (list{"2026-10-03T14:30:00Z", "2026-10-03T16:00:00Z", "2026-10-03T17:00:00Z"}));
    // Every minute across the gap: 02:00-02:29 local do not exist; 15:30Z is 02:30 (+11).
    for (auto g : {gap_policy::run_after_gap, gap_policy::skip})
        EXPECT_EQ(fires("* * * * *", "Australia/Lord_Howe", "2026-10-03T15:28Z", "2026-10-03T15:31Z", with(g)),
                  (list{"2026-10-03T15:29:00Z", "2026-10-03T15:30:00Z", "2026-10-03T15:31:00Z"}));
    // Every minute across the fold: 01:30-01:59 local at 14:30Z-14:59Z (+11) and 15:00Z-15:29Z (+10:30).
    const std::string mf = "2026-04-04T14:58Z", mt = "2026-04-04T15:02Z";
    EXPECT_EQ(fires("* * * * *", "Australia/Lord_Howe", mf, mt, with(fold_policy::first)), (list{"2026-04-04T14:59:00Z"}));
    EXPECT_EQ(fires("* * * * *", "Australia/Lord_Howe", mf, mt, with(fold_policy::second)),
              (list{"2026-04-04T15:00:00Z", "2026-04-04T15:01:00Z", "2026-04-04T15:02:00Z"}));
    EXPECT_EQ(fires("* * * * *", "Australia/Lord_Howe", mf, mt, with(fold_policy::both)),
              (list{"2026-04-04T14:59:00Z", "2026-04-04T15:00:00Z", "2026-04-04T15:01:00Z", "2026-04-04T15:02:00Z"}));
}

TEST(ScheduleFire, KeepsLocalTimeOffsetAndTzdbVersion) {
    auto s = coord::schedule::make("billing", "30 2 * * *", "America/New_York");
    ASSERT_TRUE(s);
    auto f = s->next_after(at("2026-03-08T00:00Z"));
    ASSERT_TRUE(f);
    EXPECT_EQ(f->which.to_string(), "billing@2026-03-08T07:00:00Z");
    EXPECT_EQ(f->local_time, "2026-03-08T02:30:00");  // the nonexistent time it stands for
    EXPECT_EQ(f->offset_text(), "-04:00");
    EXPECT_FALSE(f->tzdb_version.empty());
    EXPECT_NE(f->tzdb_version, "unknown");
    coord::manual_clock clock{std::chrono::sys_days{std::chrono::year{2026} / 3 / 9}};
    EXPECT_EQ(s->next_fire(clock)->which.to_string(), "billing@2026-03-09T06:30:00Z");
}

TEST(ScheduleCron, CalendarEdgesAndTheOrRule) {
    EXPECT_EQ(fires("0 0 29 2 *", "UTC", "2026-01-01T00:00Z", "2029-01-01T00:00Z"), (list{"2028-02-29T00:00:00Z"}));
    EXPECT_EQ(fires("0 12 31 * *", "UTC", "2026-01-01T00:00Z", "2026-06-01T00:00Z"),
              (list{"2026-01-31T12:00:00Z", "2026-03-31T12:00:00Z", "2026-05-31T12:00:00Z"}));
    // Day 13 OR Friday (November 2026: Fridays 6, 13, 20, 27).
    EXPECT_EQ(fires("0 0 13 11 FRI", "UTC", "2026-11-01T00:00Z", "2026-12-01T00:00Z"),
              (list{"2026-11-06T00:00:00Z", "2026-11-13T00:00:00Z", "2026-11-20T00:00:00Z", "2026-11-27T00:00:00Z"}));
    EXPECT_EQ(fires("0 0 * 11 fri", "UTC", "2026-11-01T00:00Z", "2026-11-14T00:00Z"),
              (list{"2026-11-06T00:00:00Z", "2026-11-13T00:00:00Z"}));
    EXPECT_EQ(fires("*/20 * * * * *", "UTC", "2026-11-01T00:00Z", "2026-11-01T00:01Z"),
              (list{"2026-11-01T00:00:20Z", "2026-11-01T00:00:40Z", "2026-11-01T00:01:00Z"}));
    EXPECT_EQ(fires("5/20 9-10 * * MON-FRI", "UTC", "2026-11-30T00:00Z", "2026-11-30T10:00Z"),
              (list{"2026-11-30T09:05:00Z", "2026-11-30T09:25:00Z", "2026-11-30T09:45:00Z"}));
    EXPECT_EQ(fires("@hourly", "UTC", "2026-11-30T00:00Z", "2026-11-30T02:00Z"),
              (list{"2026-11-30T01:00:00Z", "2026-11-30T02:00:00Z"}));
    EXPECT_EQ(fires("0 0 1,15 JAN,jul *", "UTC", "2026-01-01T00:00Z", "2026-12-31T00:00Z"),
              (list{"2026-01-15T00:00:00Z", "2026-07-01T00:00:00Z", "2026-07-15T00:00:00Z"}));
}

// Vixie cron's rule: a day field starting with * (alone or with a step)
// makes both day fields required; two restricted fields are an OR.
TEST(ScheduleCron, StarWithAStepInADayFieldMeansAnd) {
    // The issue's example: 1st, 9th, 17th, 25th of September or October, when a Tuesday.
    auto s = *coord::schedule::make("j", "56 20 */8 9-10 2", "UTC");
    auto f = s.next_after(at("2026-03-08T00:00Z"));
    ASSERT_TRUE(f);
    EXPECT_EQ(f->which.to_string(), "j@2026-09-01T20:56:00Z");
    f = s.next_after(f->utc);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->which.to_string(), "j@2028-10-17T20:56:00Z");
    // */N in day-of-week with a restricted day-of-month: AND as well.
    EXPECT_EQ(fires("0 0 13 * */5", "UTC", "2026-01-01T00:00Z", "2027-01-01T00:00Z"),
              (list{"2026-02-13T00:00:00Z", "2026-03-13T00:00:00Z", "2026-09-13T00:00:00Z",
                    "2026-11-13T00:00:00Z", "2026-12-13T00:00:00Z"}));  // the 13th when a Sunday or a Friday
    // A field listing every value without a * stays restricted: OR.
    EXPECT_EQ(fires("0 0 13 11 0-6", "UTC", "2026-11-01T00:00Z", "2026-11-04T00:00Z"),
              (list{"2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z", "2026-11-04T00:00:00Z"}));
    EXPECT_EQ(fires("0 0 13 11 *", "UTC", "2026-11-01T00:00Z", "2026-12-01T00:00Z"), (list{"2026-11-13T00:00:00Z"}));
}

// No date satisfies the expression: refused at parse, never answered with
// some other day.
TEST(ScheduleCron, AnExpressionNoDateSatisfiesIsRefused) {
    for (const char* expr : {"0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 30,31 2 */2", "0 0 31 2 ?", "0 0 0 31 FEB *"}) {
        auto s = coord::schedule::make("j", expr, "UTC");
        ASSERT_FALSE(s) << expr;
        EXPECT_NE(s.error().message.find("no date matches"), std::string::npos) << expr << ": " << s.error().message;
    }
    // Both day fields restricted: an OR, so Mondays of February fire.
    auto mondays = coord::schedule::make("j", "0 0 30 2 MON", "UTC");
    ASSERT_TRUE(mondays);
    EXPECT_EQ(mondays->next_after(at("2026-01-01T00:00Z"))->which.to_string(), "j@2026-02-02T00:00:00Z");
    // February 29 on a Sunday (AND): rare, found across the century gap.
    auto leap_sunday = coord::schedule::make("j", "0 0 29 2 */7", "UTC");
    ASSERT_TRUE(leap_sunday);
    EXPECT_EQ(leap_sunday->next_after(at("2026-01-01T00:00Z"))->which.to_string(), "j@2032-02-29T00:00:00Z");
    EXPECT_EQ(leap_sunday->next_after(at("2088-03-01T00:00Z"))->which.to_string(), "j@2128-02-29T00:00:00Z");
}

// No fire past 9999-12-31T23:59:59Z, the last instant a slot can name; no
// overflow anywhere on the way.
TEST(ScheduleCron, NeverFiresPastTheYear9999) {
    EXPECT_EQ(fires("*/20 * * * *", "UTC", "9999-12-31T23:00Z", "9999-12-31T23:59:59Z"),
              (list{"9999-12-31T23:20:00Z", "9999-12-31T23:40:00Z"}));
    auto s = *coord::schedule::make("j", "59 23 31 12 *", "UTC");
    EXPECT_EQ(s.next_after(at("9999-01-01T00:00Z"))->which.to_string(), "j@9999-12-31T23:59:00Z");
    EXPECT_FALSE(s.next_after(at("9999-12-31T23:59Z")));
    // Local 9999-12-31 23:00 in UTC-5 is already in the year 10000 UTC.
    auto west = *coord::schedule::make("j", "0 23 31 12 *", "Etc/GMT+5");
    EXPECT_FALSE(west.next_after(at("9999-12-30T00:00Z")));
    auto every = *coord::schedule::make("j", "* * * * * *", "Asia/Tokyo");
    EXPECT_FALSE(every.next_after(at("9999-12-31T23:59:59Z")));
    EXPECT_FALSE(every.next_after(std::chrono::sys_seconds{std::chrono::seconds{std::numeric_limits<std::int64_t>::max() / 2}}));
    auto first = every.next_after(std::chrono::sys_seconds{std::chrono::seconds{-1}});
    ASSERT_TRUE(first);
    EXPECT_EQ(first->which.to_string(), "j@1970-01-01T00:00:00Z");
}

// A differential check against a brute-force matcher written from Vixie
// cron's rule (every candidate day, then every minute and second), on
// thousands of random expressions built from every field syntax, in zones
// without daylight saving, from random instants.
namespace brute {
struct field {
    std::string text;
    std::bitset<64> values;
    bool star = false;
};
const char* const month_names[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
const char* const day_names[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

std::string name_or_number(int v, int kind, std::mt19937& rng) {  // kind 1 month, 2 day of week
    if (kind == 1 && rng() % 3 == 0) return month_names[v - 1];
    if (kind == 2 && v <= 6 && rng() % 3 == 0) return day_names[v];
    return std::to_string(v);
}

field random_field(int lo, int hi, int kind, std::mt19937& rng) {
    auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
    field f;
    auto item = [&](bool allow_star) {
        const int form = pick(allow_star ? 0 : 2, 5);
        std::string t;
        if (form == 0) {
            t = "*";
            for (int v = lo; v <= hi; ++v) f.values.set(v);
        } else if (form == 1) {
            const int n = pick(2, std::max(2, (hi - lo) / 2 + 1));
            t = "*/" + std::to_string(n);
            for (int v = lo; v <= hi; v += n) f.values.set(v);
        } else if (form == 2 || form == 5) {
            const int a = pick(lo, hi);
            t = name_or_number(a, kind, rng);
            f.values.set(a);
        } else if (form == 3) {
            const int a = pick(lo, hi), b = pick(a, hi);
            t = name_or_number(a, kind, rng) + "-" + name_or_number(b, kind, rng);
            for (int v = a; v <= b; ++v) f.values.set(v);
        } else {
            const int a = pick(lo, hi), b = pick(a, hi), n = pick(1, std::max(1, hi - lo));
            t = std::to_string(a) + "-" + std::to_string(b) + "/" + std::to_string(n);
            for (int v = a; v <= b; v += n) f.values.set(v);
        }
        return t;
    };
    const int parts = pick(0, 3) == 0 ? pick(2, 3) : 1;
    for (int i = 0; i < parts; ++i) {
        if (i) f.text += ',';
        f.text += item(true);
    }
    f.star = f.text[0] == '*';
    if (kind == 2 && f.values.test(7)) f.values.set(0);  // 7 is Sunday
    return f;
}

struct expr {
    bool seconds;
    field sec, min, hour, dom, mon, dow;
    std::string text() const {
        return (seconds ? sec.text + " " : std::string()) + min.text + " " + hour.text + " " + dom.text + " " +
               mon.text + " " + dow.text;
    }
    bool day_matches(std::chrono::year_month_day d) const {
        if (!mon.values.test(static_cast<unsigned>(d.month()))) return false;
        const bool dm = dom.values.test(static_cast<unsigned>(d.day()));
        const bool wm = dow.values.test(std::chrono::weekday{std::chrono::sys_days{d}}.c_encoding());
        return dom.star || dow.star ? dm && wm : dm || wm;
    }
    // The first instant after `from` (UTC) whose local time (UTC + offset) matches.
    std::optional<std::chrono::sys_seconds> next_after(std::chrono::sys_seconds from, std::chrono::seconds offset) const {
        using namespace std::chrono;
        const auto local_from = from + offset;
        auto day = floor<days>(local_from);
        for (int n = 0; n < 366 * 60; ++n, day += days{1}) {
            if (!day_matches(year_month_day{day})) continue;
            for (int h = 0; h < 24; ++h) {
                if (!hour.values.test(h)) continue;
                for (int m = 0; m < 60; ++m) {
                    if (!min.values.test(m)) continue;
                    for (int sec_v = 0; sec_v < 60; ++sec_v) {
                        if (seconds ? !sec.values.test(sec_v) : sec_v != 0) continue;
                        const auto local = day + hours{h} + minutes{m} + std::chrono::seconds{sec_v};
                        if (local > local_from) return local - offset;
                    }
                }
            }
        }
        return std::nullopt;
    }
};
}  // namespace brute

TEST(ScheduleCron, MatchesABruteForceVixieReferenceOnRandomExpressions) {
    std::mt19937 rng(20261201);
    struct zone {
        const char* name;
        std::chrono::seconds offset;
    };
    const zone zones[] = {{"UTC", 0s}, {"Asia/Tokyo", 9h}, {"Asia/Kolkata", 5h + 30min}, {"Asia/Kathmandu", 5h + 45min},
                          {"Etc/GMT+11", -11h}, {"Pacific/Kiritimati", 14h}};
    int compared = 0, refused = 0;
    for (int i = 0; i < 3000; ++i) {
        brute::expr e;
        e.seconds = rng() % 4 == 0;
        e.sec = brute::random_field(0, 59, 0, rng);
        e.min = brute::random_field(0, 59, 0, rng);
        e.hour = brute::random_field(0, 23, 0, rng);
        e.dom = brute::random_field(1, 31, 0, rng);
        e.mon = brute::random_field(1, 12, 1, rng);
        e.dow = brute::random_field(0, 7, 2, rng);
        const auto& z = zones[rng() % std::size(zones)];
        const auto from = std::chrono::sys_seconds{std::chrono::seconds{
            std::uniform_int_distribution<std::int64_t>(1'767'225'600, 1'924'992'000)(rng)}};  // 2026..2031
        auto s = coord::schedule::make("job", e.text(), z.name);
        const auto want = e.next_after(from, z.offset);
        if (!s) {
            // Refused only when no date can match (the brute force finds none).
            EXPECT_NE(s.error().message.find("no date matches"), std::string::npos) << e.text() << ": " << s.error().message;
            EXPECT_FALSE(want) << e.text() << " refused, but fires at " << coord::format_utc(*want);
            ++refused;
            continue;
        }
        const auto got = s->next_after(from);
        ASSERT_EQ(got.has_value(), want.has_value()) << e.text() << " in " << z.name << " from " << coord::format_utc(from);
        if (want) {
            ASSERT_EQ(got->utc, *want) << e.text() << " in " << z.name << " from " << coord::format_utc(from) << ": got "
                                       << coord::format_utc(got->utc) << ", want " << coord::format_utc(*want);
            // And the fire after it, to walk past the first match.
            const auto want2 = e.next_after(*want, z.offset);
            const auto got2 = s->next_after(got->utc);
            ASSERT_EQ(got2.has_value(), want2.has_value()) << e.text();
            if (want2) {
                ASSERT_EQ(got2->utc, *want2) << e.text() << " in " << z.name;
            }
        }
        ++compared;
    }
    EXPECT_GT(compared, 2500);
    EXPECT_GT(refused, 0);
}

TEST(ScheduleCron, RefusesBadExpressionsNamingTheField) {
    struct bad {
        const char* expr;
        const char* says;
    };
    for (auto [expr, says] : {bad{"61 * * * *", "minute"}, bad{"* 24 * * *", "hour"}, bad{"* * 0 * *", "day-of-month"},
                              bad{"* * * FOO *", "month"}, bad{"* * * * 8", "day-of-week"}, bad{"* * * *", "5 fields"},
                              bad{"* * * * * * *", "5 fields"}, bad{"*/0 * * * *", "step"}, bad{"5-1 * * * *", "backwards"},
                              bad{"1,,2 * * * *", "empty"}, bad{"@every5m", "macro"}, bad{"60 * * * * *", "second"}}) {
        auto s = coord::schedule::make("j", expr, "UTC");
        ASSERT_FALSE(s) << expr;
        EXPECT_EQ(s.error(), coord::errc::invalid_text);
        EXPECT_NE(s.error().message.find(says), std::string::npos) << expr << ": " << s.error().message;
    }
    auto zone = coord::schedule::make("j", "* * * * *", "Mars/Olympus_Mons");
    ASSERT_FALSE(zone);
    EXPECT_NE(zone.error().message.find("Mars/Olympus_Mons"), std::string::npos);
}

// A 3-day outage of an hourly job: what each misfire policy runs when it comes back.
TEST(ScheduleMisfire, CatchUpAfterAThreeDayOutage) {
    auto s = *coord::schedule::make("sync", "0 * * * *", "Europe/Berlin");
    const auto last = at("2026-11-01T10:00Z"), now = at("2026-11-04T10:30Z");
    EXPECT_TRUE(s.missed(last, now, coord::misfire_policy::none, 24h, 1000)->empty());
    auto latest = s.missed(last, now, coord::misfire_policy::latest, 24h, 1000);
    ASSERT_EQ(latest->size(), 1u);
    EXPECT_EQ(latest->front().which.to_string(), "sync@2026-11-04T10:00:00Z");
    auto window = s.missed(last, now, coord::misfire_policy::all_within, 6h, 1000);
    ASSERT_EQ(window->size(), 6u);
    EXPECT_EQ(window->front().which.to_string(), "sync@2026-11-04T05:00:00Z");
    EXPECT_EQ(s.missed(last, now, coord::misfire_policy::all_within, 72h, 1000)->size(), 72u);
    auto capped = s.missed(last, now, coord::misfire_policy::all_within, 72h, 50);
    ASSERT_FALSE(capped);
    EXPECT_EQ(capped.error(), coord::errc::too_many_slots);
    auto back = s.backfill(at("2026-11-01T00:00Z"), at("2026-11-01T03:00Z"), 10);
    ASSERT_EQ(back->size(), 4u);  // 00:00, 01:00, 02:00, 03:00 inclusive
}

TEST(ScheduleOverlap, PoliciesAndReplaceFencesOffTheOldRun) {
    using coord::overlap_action;
    using coord::overlap_policy;
    EXPECT_EQ(coord::decide_overlap(overlap_policy::skip, false, false), overlap_action::start);
    EXPECT_EQ(coord::decide_overlap(overlap_policy::allow, true, false), overlap_action::start);
    EXPECT_EQ(coord::decide_overlap(overlap_policy::skip, true, false), overlap_action::skip);
    EXPECT_EQ(coord::decide_overlap(overlap_policy::queue_one, true, false), overlap_action::queue);
    EXPECT_EQ(coord::decide_overlap(overlap_policy::queue_one, true, true), overlap_action::skip);
    EXPECT_EQ(coord::decide_overlap(overlap_policy::replace, true, false), overlap_action::replace_previous);

    // A 10-minute job whose 09:00 run is still going at 09:10.
    coord::manual_clock clock{coord::test::test_epoch()};  // 2026-10-13T09:00Z
    coord::basic_memory_store<coord::manual_clock> store{clock};
    coord::basic_job_ledger<decltype(store)> ledger{store, {}};
    auto sched = *coord::schedule::make("report", "*/10 * * * *", "UTC");
    auto first = *sched.next_after(at("2026-10-13T08:59Z"));
    auto old_run = ledger.claim(first.which, "worker-old");
    ASSERT_EQ(old_run->kind, coord::claim_outcome::granted);
    clock.advance(10min);
    auto second = *sched.next_after(first.utc);
    ASSERT_EQ(coord::decide_overlap(overlap_policy::replace, true, false), overlap_action::replace_previous);
    auto bumped = ledger.revoke(first.which, "replaced by " + second.which.to_string());
    ASSERT_TRUE(bumped);
    EXPECT_GT(*bumped, old_run->fence);
    ASSERT_EQ(ledger.run(second.which, "worker-new", "", [](const coord::ledger_context&) { return std::string("ok"); })
                  ->kind,
              coord::run_outcome::applied);
    // The replaced run finishes late: refused by the ledger.
    EXPECT_EQ(ledger.complete(first.which, old_run->fence, "late").error(), coord::errc::stale_fence);
    EXPECT_EQ(ledger.heartbeat(first.which, old_run->fence).error(), coord::errc::stale_fence);
}

}  // namespace
