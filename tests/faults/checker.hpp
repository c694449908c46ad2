// SPDX-License-Identifier: Apache-2.0
// tests/faults/checker.hpp: the fault suite's checker. It reads a whole
// recorded history (one JSON object a line, written by the workload clients
// and the fault scheduler) and says what the history proves about the
// store's promises, Jepsen-style: an operation whose reply never came
// (outcome "unknown") may or may not have been applied, so it never counts
// as proof of a violation, and never as proof that a promise held.
//
// A line: {"t0": ns, "t1": ns, "proc": "c3", "f": F, "type": "ok" | "refused" | "unknown", ...}
//   f = "write"   key, token, value: a fenced register write (lease + register workload)
//   f = "id"      gen, id: an ID handed out
//   f = "run"     slot: one attempt at a slot (counted only: the effects the
//                 store holds at the end are what the ledger check reads)
//   f = "effect"  slot, fence, mode, order: an effect the store holds at the
//                 end (the final read); mode "atomic" (a row written in the
//                 store's transaction with the done marker) or "fenced" (the
//                 claim's fence appended to a fenced key: order is its place
//                 in the key's value)
//   f = "slot"    slot, state ("done", "running", "idle", "none"), fence: the
//                 final read of a slot
//   f = "put"     key, value: a durable write (durability workload)
//   f = "final"   key, value (absent: "present": false): the final read of a key
//   f = "fault"   kind, target: a fault window [t0, t1] (type is "ok")
// Checked:
//   register:   no accepted write goes back in token order: an accepted
//               write whose token is below that of an accepted write that
//               completed before it started is a violation (the stale
//               holder's write after a newer holder's);
//   ids:        no ID handed out twice (per generator kind);
//   ledger:     atomic effects: a done slot has exactly one effect, written
//               by the claim that marked it done (its fence), a slot not
//               done has none. Fenced effects (stores whose ledger cannot
//               take the effect into its step: an attempt that paused past
//               its lease may have applied its effect before a newer claim,
//               which is why the effect is fenced): a done slot's effects
//               were applied in increasing fence order and the last one is
//               the done claim's (no stale claim's effect landed after it,
//               so the state the slot leaves is the done claim's); a slot
//               not done has none;
//   durability: every acknowledged put is what the final read shows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace coord::faults {

struct op {
    std::size_t line = 0;  // 1-based line of the history
    std::int64_t t0 = 0, t1 = 0;
    std::string proc, f, type;
    nlohmann::json raw;
    bool ok() const { return type == "ok"; }
    bool unknown() const { return type == "unknown"; }
    /// "op 12 (c3 write key=r token=5 ok)"
    std::string name() const {
        std::ostringstream s;
        s << "op " << line << " (" << proc << ' ' << f;
        for (const char* k : {"key", "token", "gen", "id", "slot", "state", "kind", "value"})
            if (raw.contains(k)) s << ' ' << k << '=' << (raw[k].is_string() ? raw[k].get<std::string>() : raw[k].dump());
        s << ' ' << type << ')';
        return s.str();
    }
};

struct workload_report {
    std::size_t operations = 0, ok = 0, refused = 0, unknown = 0;
    std::vector<std::string> violations;
    std::vector<std::size_t> violation_lines;  // the history lines of the offending operations
};

struct report {
    std::map<std::string, workload_report> workloads;  // register, ids, ledger, durability
    std::map<std::string, std::size_t> faults;         // by kind
    std::size_t violations() const {
        std::size_t n = 0;
        for (const auto& [_, w] : workloads) n += w.violations.size();
        return n;
    }
    nlohmann::json to_json() const {
        nlohmann::json j;
        for (const auto& [name, w] : workloads)
            j[name] = {{"operations", w.operations}, {"ok", w.ok}, {"refused", w.refused}, {"unknown", w.unknown},
                       {"violations", w.violations.size()}, {"violation_messages", w.violations}};
        j["faults"] = faults;
        return j;
    }
};

/// Parses a history; throws std::runtime_error naming the line for a line
/// that is not one well-formed operation.
inline std::vector<op> parse_history(std::istream& in) {
    std::vector<op> ops;
    std::string text;
    for (std::size_t line = 1; std::getline(in, text); ++line) {
        if (text.empty()) continue;
        op o;
        o.line = line;
        try {
            o.raw = nlohmann::json::parse(text);
            o.t0 = o.raw.at("t0").get<std::int64_t>();
            o.t1 = o.raw.at("t1").get<std::int64_t>();
            o.proc = o.raw.at("proc").get<std::string>();
            o.f = o.raw.at("f").get<std::string>();
            o.type = o.raw.at("type").get<std::string>();
        } catch (const std::exception& e) {
            throw std::runtime_error("history line " + std::to_string(line) + ": " + e.what());
        }
        if (o.type != "ok" && o.type != "refused" && o.type != "unknown")
            throw std::runtime_error("history line " + std::to_string(line) + ": type must be ok, refused or unknown");
        if (o.t1 < o.t0) throw std::runtime_error("history line " + std::to_string(line) + ": t1 before t0");
        ops.push_back(std::move(o));
    }
    return ops;
}

namespace detail {
inline void count(workload_report& w, const op& o) {
    ++w.operations;
    if (o.ok()) ++w.ok;
    else if (o.unknown()) ++w.unknown;
    else ++w.refused;
}
inline std::string str(const op& o, const char* k) {
    const auto& v = o.raw.at(k);
    return v.is_string() ? v.get<std::string>() : v.dump();
}
}  // namespace detail

/// Checks a whole history.
inline report check(const std::vector<op>& ops) {
    report out;
    std::map<std::string, std::vector<const op*>> writes;  // register writes by key
    std::map<std::string, const op*> ids;                  // gen/id -> first op handing it out
    std::map<std::string, std::vector<const op*>> effects; // accepted effects by slot
    std::map<std::string, const op*> slot_states;
    std::map<std::string, const op*> puts;                 // acknowledged puts by key
    std::map<std::string, const op*> finals;
    for (const auto& o : ops) {
        if (o.f == "fault") {
            ++out.faults[detail::str(o, "kind")];
            continue;
        }
        if (o.f == "write") {
            detail::count(out.workloads["register"], o);
            if (o.ok()) writes[detail::str(o, "key")].push_back(&o);
        } else if (o.f == "id") {
            auto& w = out.workloads["ids"];
            detail::count(w, o);
            if (!o.ok()) continue;
            const auto id = detail::str(o, "gen") + "/" + detail::str(o, "id");
            auto [it, fresh] = ids.emplace(id, &o);
            if (!fresh) {
                w.violations.push_back("duplicate ID " + id + ": " + o.name() + " and " + it->second->name());
                w.violation_lines.push_back(o.line);
            }
        } else if (o.f == "run") {
            detail::count(out.workloads["ledger"], o);
        } else if (o.f == "effect") {
            if (o.ok()) effects[detail::str(o, "slot")].push_back(&o);
        } else if (o.f == "slot") {
            detail::count(out.workloads["ledger"], o);
            if (o.ok()) slot_states[detail::str(o, "slot")] = &o;
        } else if (o.f == "put") {
            detail::count(out.workloads["durability"], o);
            if (o.ok()) puts[detail::str(o, "key")] = &o;
        } else if (o.f == "final") {
            detail::count(out.workloads["durability"], o);
            if (o.ok()) finals[detail::str(o, "key")] = &o;
        } else {
            throw std::runtime_error("history line " + std::to_string(o.line) + ": unknown f '" + o.f + "'");
        }
    }
    // register: sweep the accepted writes by start time, knowing the largest
    // token among those that completed before.
    for (auto& [key, ws] : writes) {
        auto& w = out.workloads["register"];
        std::vector<const op*> by_end = ws;
        std::sort(ws.begin(), ws.end(), [](const op* a, const op* b) { return a->t0 < b->t0; });
        std::sort(by_end.begin(), by_end.end(), [](const op* a, const op* b) { return a->t1 < b->t1; });
        const op* newest = nullptr;  // the largest-token write completed so far
        std::size_t e = 0;
        for (const op* b : ws) {
            for (; e < by_end.size() && by_end[e]->t1 < b->t0; ++e)
                if (!newest || by_end[e]->raw.at("token").get<std::uint64_t>() > newest->raw.at("token").get<std::uint64_t>())
                    newest = by_end[e];
            if (newest && b->raw.at("token").get<std::uint64_t>() < newest->raw.at("token").get<std::uint64_t>())
            {
                w.violations.push_back("stale write accepted after a newer one: " + b->name() + " started after " +
                                       newest->name() + " completed");
                w.violation_lines.push_back(b->line);
            }
        }
    }
    // ledger
    for (const auto& [slot, st] : slot_states) {
        auto& w = out.workloads["ledger"];
        const auto it = effects.find(slot);
        std::vector<const op*> es = it == effects.end() ? std::vector<const op*>{} : it->second;
        std::sort(es.begin(), es.end(), [](const op* a, const op* b) {
            return a->raw.value("order", std::uint64_t{0}) < b->raw.value("order", std::uint64_t{0});
        });
        const bool done = detail::str(*st, "state") == "done";
        const bool fenced = !es.empty() && es.front()->raw.value("mode", std::string("atomic")) == "fenced";
        const auto fence_of = [](const op* o) { return o->raw.value("fence", std::uint64_t{0}); };
        const std::uint64_t done_fence = st->raw.value("fence", std::uint64_t{0});
        std::string names;
        for (const op* e : es) names += (names.empty() ? "" : ", ") + e->name();
        if (done && es.empty()) w.violations.push_back("slot " + slot + " is done with no effect: " + st->name());
        if (!done && !es.empty())
            w.violations.push_back("slot " + slot + " is not done but has an effect: " + names + "; " + st->name());
        if (!done || es.empty()) continue;
        if (!fenced) {
            if (es.size() > 1)
                w.violations.push_back("slot " + slot + " has " + std::to_string(es.size()) + " effects: " + names);
            else if (st->raw.contains("fence") && fence_of(es.front()) != done_fence)
                w.violations.push_back("slot " + slot + "'s effect is not the done claim's (fence " +
                                       std::to_string(done_fence) + "): " + names);
            continue;
        }
        for (std::size_t i = 1; i < es.size(); ++i)
            if (fence_of(es[i]) <= fence_of(es[i - 1]))
                w.violations.push_back("slot " + slot + ": a stale claim's effect applied after a newer one's: " + names);
        if (st->raw.contains("fence") && fence_of(es.back()) != done_fence)
            w.violations.push_back("slot " + slot + "'s last effect is not the done claim's (fence " +
                                   std::to_string(done_fence) + "): " + names);
    }
    for (const auto& [slot, es] : effects)
        if (!slot_states.count(slot))
            out.workloads["ledger"].violations.push_back("slot " + slot + " has an effect and no final read: " +
                                                         es.front()->name());
    // durability
    for (const auto& [key, p] : puts) {
        auto& w = out.workloads["durability"];
        const auto f = finals.find(key);
        if (f == finals.end()) {
            w.violations.push_back("acknowledged write not read at the end: " + p->name());
            continue;
        }
        const bool present = !f->second->raw.contains("present") || f->second->raw["present"].get<bool>();
        if (!present || detail::str(*f->second, "value") != detail::str(*p, "value"))
            w.violations.push_back("acknowledged write lost: " + p->name() + ", the final read: " + f->second->name());
    }
    return out;
}

}  // namespace coord::faults
