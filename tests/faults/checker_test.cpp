// SPDX-License-Identifier: Apache-2.0
// The fault suite's checker on hand-made histories: a valid one passes; a
// stale write accepted after a newer one, a duplicate ID, a second effect
// for one slot, an effect of a slot not done and a lost acknowledged write
// each fail with a message naming the operations; unknown outcomes prove
// nothing either way; malformed lines are refused naming the line.
#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <string>

#include "faults/checker.hpp"

namespace {

coord::faults::report check(const std::string& history) {
    std::istringstream in(history);
    return coord::faults::check(coord::faults::parse_history(in));
}

std::string all(const coord::faults::report& r, const char* workload) {
    std::string s;
    auto it = r.workloads.find(workload);
    if (it != r.workloads.end())
        for (const auto& v : it->second.violations) s += v + "\n";
    return s;
}

// Two holders in turn, the older one's write refused after the newer's;
// IDs unique; each done slot with one effect; every acknowledged put read
// back; a fault window counted by kind.
const char* valid = R"(
{"t0":0,"t1":10,"proc":"c1","f":"write","key":"r","token":5,"value":"a","type":"ok"}
{"t0":20,"t1":30,"proc":"c2","f":"write","key":"r","token":9,"value":"b","type":"ok"}
{"t0":40,"t1":50,"proc":"c1","f":"write","key":"r","token":5,"value":"late","type":"refused"}
{"t0":15,"t1":45,"proc":"c3","f":"write","key":"r","token":7,"value":"c","type":"unknown"}
{"t0":60,"t1":61,"proc":"c1","f":"id","gen":"snowflake","id":1001,"type":"ok"}
{"t0":62,"t1":63,"proc":"c2","f":"id","gen":"snowflake","id":1002,"type":"ok"}
{"t0":62,"t1":63,"proc":"c2","f":"id","gen":"segment","id":1001,"type":"ok"}
{"t0":70,"t1":71,"proc":"c1","f":"run","slot":"s1","type":"ok"}
{"t0":72,"t1":73,"proc":"c2","f":"run","slot":"s1","type":"refused"}
{"t0":90,"t1":91,"proc":"check","f":"slot","slot":"s1","state":"done","fence":2,"type":"ok"}
{"t0":90,"t1":91,"proc":"check","f":"effect","slot":"s1","fence":2,"mode":"atomic","order":0,"type":"ok"}
{"t0":90,"t1":91,"proc":"check","f":"slot","slot":"s3","state":"done","fence":4,"type":"ok"}
{"t0":90,"t1":91,"proc":"check","f":"effect","slot":"s3","fence":3,"mode":"fenced","order":0,"type":"ok"}
{"t0":90,"t1":91,"proc":"check","f":"effect","slot":"s3","fence":4,"mode":"fenced","order":1,"type":"ok"}
{"t0":90,"t1":91,"proc":"check","f":"slot","slot":"s2","state":"idle","type":"ok"}
{"t0":80,"t1":81,"proc":"c1","f":"put","key":"k1","value":"v1","type":"ok"}
{"t0":80,"t1":81,"proc":"c2","f":"put","key":"k2","value":"v2","type":"unknown"}
{"t0":95,"t1":96,"proc":"check","f":"final","key":"k1","value":"v1","type":"ok"}
{"t0":95,"t1":96,"proc":"check","f":"final","key":"k2","present":false,"type":"ok"}
{"t0":35,"t1":55,"proc":"nemesis","f":"fault","kind":"client-pause","target":"c1","type":"ok"}
)";

TEST(FaultChecker, AValidHistoryPasses) {
    const auto r = check(valid);
    EXPECT_EQ(r.violations(), 0u) << all(r, "register") << all(r, "ids") << all(r, "ledger") << all(r, "durability");
    EXPECT_EQ(r.workloads.at("register").operations, 4u);
    EXPECT_EQ(r.workloads.at("register").unknown, 1u);
    EXPECT_EQ(r.workloads.at("register").refused, 1u);
    EXPECT_EQ(r.faults.at("client-pause"), 1u);
    const auto j = r.to_json();
    EXPECT_EQ(j["ids"]["operations"], 3);
    EXPECT_EQ(j["ledger"]["operations"], 5);  // two runs, three final reads of slots
    EXPECT_EQ(j["durability"]["violations"], 0);
}

TEST(FaultChecker, AStaleWriteAcceptedAfterANewerOneFailsNamingBoth) {
    const auto r = check(R"(
{"t0":0,"t1":10,"proc":"c2","f":"write","key":"r","token":9,"value":"new","type":"ok"}
{"t0":20,"t1":30,"proc":"c1","f":"write","key":"r","token":5,"value":"stale","type":"ok"}
)");
    ASSERT_EQ(r.violations(), 1u);
    const auto v = all(r, "register");
    EXPECT_NE(v.find("stale write accepted after a newer one"), std::string::npos) << v;
    EXPECT_NE(v.find("op 3 (c1 write key=r token=5"), std::string::npos) << v;
    EXPECT_NE(v.find("op 2 (c2 write key=r token=9"), std::string::npos) << v;
}

TEST(FaultChecker, OverlappingWritesAndUnknownOutcomesProveNoViolation) {
    // Concurrent writes may land in either order; an unknown write is not
    // known to have been accepted.
    const auto r = check(R"(
{"t0":0,"t1":30,"proc":"c2","f":"write","key":"r","token":9,"value":"new","type":"ok"}
{"t0":20,"t1":40,"proc":"c1","f":"write","key":"r","token":5,"value":"old","type":"ok"}
{"t0":50,"t1":60,"proc":"c3","f":"write","key":"q","token":9,"value":"x","type":"unknown"}
{"t0":70,"t1":80,"proc":"c1","f":"write","key":"q","token":5,"value":"y","type":"ok"}
)");
    EXPECT_EQ(r.violations(), 0u) << all(r, "register");
}

TEST(FaultChecker, ADuplicateIdFailsNamingBoth) {
    const auto r = check(R"(
{"t0":0,"t1":1,"proc":"c1","f":"id","gen":"segment","id":42,"type":"ok"}
{"t0":5,"t1":6,"proc":"c3","f":"id","gen":"segment","id":42,"type":"ok"}
)");
    ASSERT_EQ(r.violations(), 1u);
    const auto v = all(r, "ids");
    EXPECT_NE(v.find("duplicate ID segment/42"), std::string::npos) << v;
    EXPECT_NE(v.find("op 3 (c3 id"), std::string::npos) << v;
    EXPECT_NE(v.find("op 2 (c1 id"), std::string::npos) << v;
}

TEST(FaultChecker, ASecondEffectForOneSlotFailsNamingBoth) {
    const auto r = check(R"(
{"t0":0,"t1":1,"proc":"c1","f":"effect","slot":"s7","fence":1,"mode":"atomic","type":"ok"}
{"t0":5,"t1":6,"proc":"c2","f":"effect","slot":"s7","fence":2,"mode":"atomic","type":"ok"}
{"t0":9,"t1":9,"proc":"check","f":"slot","slot":"s7","state":"done","fence":2,"type":"ok"}
)");
    ASSERT_EQ(r.violations(), 1u);
    const auto v = all(r, "ledger");
    EXPECT_NE(v.find("slot s7 has 2 effects"), std::string::npos) << v;
    EXPECT_NE(v.find("op 2 (c1 effect"), std::string::npos) << v;
    EXPECT_NE(v.find("op 3 (c2 effect"), std::string::npos) << v;
}

TEST(FaultChecker, AnEffectOfASlotNotDoneAndADoneSlotWithoutOneFail) {
    const auto r = check(R"(
{"t0":0,"t1":1,"proc":"c1","f":"effect","slot":"s1","type":"ok"}
{"t0":9,"t1":9,"proc":"check","f":"slot","slot":"s1","state":"idle","type":"ok"}
{"t0":9,"t1":9,"proc":"check","f":"slot","slot":"s2","state":"done","type":"ok"}
)");
    ASSERT_EQ(r.violations(), 2u);
    const auto v = all(r, "ledger");
    EXPECT_NE(v.find("slot s1 is not done but has an effect: op 2"), std::string::npos) << v;
    EXPECT_NE(v.find("slot s2 is done with no effect: op 4"), std::string::npos) << v;
}

TEST(FaultChecker, AnAtomicEffectOfAnotherClaimThanTheDoneOneFails) {
    const auto r = check(R"(
{"t0":0,"t1":1,"proc":"check","f":"effect","slot":"s1","fence":1,"mode":"atomic","order":0,"type":"ok"}
{"t0":9,"t1":9,"proc":"check","f":"slot","slot":"s1","state":"done","fence":2,"type":"ok"}
)");
    ASSERT_EQ(r.violations(), 1u);
    EXPECT_NE(all(r, "ledger").find("slot s1's effect is not the done claim's (fence 2)"), std::string::npos) << all(r, "ledger");
}

TEST(FaultChecker, AFencedEffectOfAStaleClaimAfterANewerOneFails) {
    // s1: the stale claim (fence 1) applied after fence 2; s2: the done
    // claim's effect is not the last one the key holds; s3: an attempt that
    // paused past its lease applied its effect first, the done claim's came
    // last (the fenced ledger's promise: allowed).
    const auto r = check(R"(
{"t0":0,"t1":1,"proc":"check","f":"effect","slot":"s1","fence":2,"mode":"fenced","order":0,"type":"ok"}
{"t0":0,"t1":1,"proc":"check","f":"effect","slot":"s1","fence":1,"mode":"fenced","order":1,"type":"ok"}
{"t0":0,"t1":1,"proc":"check","f":"slot","slot":"s1","state":"done","fence":2,"type":"ok"}
{"t0":0,"t1":1,"proc":"check","f":"effect","slot":"s2","fence":3,"mode":"fenced","order":0,"type":"ok"}
{"t0":0,"t1":1,"proc":"check","f":"slot","slot":"s2","state":"done","fence":5,"type":"ok"}
{"t0":0,"t1":1,"proc":"check","f":"effect","slot":"s3","fence":1,"mode":"fenced","order":0,"type":"ok"}
{"t0":0,"t1":1,"proc":"check","f":"effect","slot":"s3","fence":2,"mode":"fenced","order":1,"type":"ok"}
{"t0":0,"t1":1,"proc":"check","f":"slot","slot":"s3","state":"done","fence":2,"type":"ok"}
)");
    const auto v = all(r, "ledger");
    EXPECT_EQ(r.violations(), 3u) << v;
    EXPECT_NE(v.find("slot s1: a stale claim's effect applied after a newer one's"), std::string::npos) << v;
    EXPECT_NE(v.find("slot s2's last effect is not the done claim's (fence 5)"), std::string::npos) << v;
    EXPECT_EQ(v.find("slot s3"), std::string::npos) << v;
}

TEST(FaultChecker, ALostAcknowledgedWriteFailsNamingIt) {
    const auto r = check(R"(
{"t0":0,"t1":1,"proc":"c1","f":"put","key":"k1","value":"v1","type":"ok"}
{"t0":0,"t1":1,"proc":"c2","f":"put","key":"k2","value":"v2","type":"ok"}
{"t0":9,"t1":9,"proc":"check","f":"final","key":"k1","present":false,"type":"ok"}
{"t0":9,"t1":9,"proc":"check","f":"final","key":"k2","value":"older","type":"ok"}
)");
    ASSERT_EQ(r.violations(), 2u);
    const auto v = all(r, "durability");
    EXPECT_NE(v.find("acknowledged write lost: op 2 (c1 put key=k1"), std::string::npos) << v;
    EXPECT_NE(v.find("acknowledged write lost: op 3 (c2 put key=k2"), std::string::npos) << v;
}

TEST(FaultChecker, MalformedLinesAreRefusedNamingTheLine) {
    for (const char* bad : {"{\"t0\":0}\n", "not json\n",
                            "{\"t0\":5,\"t1\":1,\"proc\":\"c\",\"f\":\"id\",\"type\":\"ok\"}\n",
                            "{\"t0\":0,\"t1\":1,\"proc\":\"c\",\"f\":\"id\",\"type\":\"maybe\"}\n"}) {
        std::istringstream in(std::string("\n") + bad);
        try {
            (void)coord::faults::parse_history(in);
            ADD_FAILURE() << "accepted: " << bad;
        } catch (const std::runtime_error& e) {
            EXPECT_NE(std::string(e.what()).find("history line 2"), std::string::npos) << e.what();
        }
    }
    EXPECT_THROW(check(R"({"t0":0,"t1":1,"proc":"c","f":"teleport","type":"ok"})"), std::runtime_error);
}

}  // namespace
