// SPDX-License-Identifier: Apache-2.0
// coord_fault_check: reads a fault-suite history (tests/faults/checker.hpp),
// prints one line per workload (operations, ok, refused, unknown,
// violations) and the faults by kind, the violations' messages, each server
// fault's stall (below), and writes the summary as JSON and a timeline as
// SVG when asked. Exit 0: no
// violation (and, with --control, the control showed violations); 1:
// violations, or a control that showed none; 2: a history it cannot read.
//
//   coord_fault_check HISTORY [--control HISTORY] [--summary FILE] [--svg FILE]
//                     [--meta KEY=VALUE]...
//
// --control: the history of the control workload (the same lease and
// register with the fence check left out), checked on its own: it must show
// violations, or the suite proves nothing (the checker or the faults could
// not catch an unfenced lock). --meta: strings copied into the summary
// (engine, seed, seconds; "not_run.KIND=why" for a fault or workload the
// engine cannot take).
//
// A server fault's stall: the longest stretch, from the fault's start to the
// next fault's (or the workloads' end), in which no operation of the fenced workloads completed ok
// (what every client saw of an election, a failover or a cut), with the
// refused and unknown outcomes that ended inside it. A client fault stalls
// no one: not measured.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "faults/checker.hpp"

namespace {

using coord::faults::op;

std::vector<op> read_history(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    try {
        return coord::faults::parse_history(in);
    } catch (const std::exception& e) {
        throw std::runtime_error(path + ": " + e.what());
    }
}

void print(const char* title, const coord::faults::report& r) {
    std::printf("%s\n%-12s %10s %10s %10s %10s %10s\n", title, "workload", "operations", "ok", "refused", "unknown",
                "violations");
    for (const auto& [name, w] : r.workloads)
        std::printf("%-12s %10zu %10zu %10zu %10zu %10zu\n", name.c_str(), w.operations, w.ok, w.refused, w.unknown,
                    w.violations.size());
}

std::string esc(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '<') out += "&lt;";
        else if (c == '>') out += "&gt;";
        else if (c == '&') out += "&amp;";
        else if (c == '"') out += "&quot;";
        else out += c;
    }
    return out;
}

/// The timeline: one row per client process (the control's below), time
/// left to right; fault windows shaded (a server or network fault across
/// every row, a client fault on its row); the lease workloads' writes and
/// the ledger's runs as ticks: ok, refused, unknown, and violations in red
/// (a ledger run refused, a replay or a slot in progress, is not drawn).
/// ID and durability operations are too many to draw: the table counts them.
std::string svg(const std::vector<op>& main, const std::vector<op>& control, const std::set<std::size_t>& bad_main,
                const std::set<std::size_t>& bad_control, const std::string& title) {
    std::int64_t lo = INT64_MAX, hi = INT64_MIN;
    std::vector<std::string> rows;
    std::map<std::string, int> row_of;
    auto add_row = [&](const std::string& name) {
        if (!row_of.count(name)) {
            row_of[name] = static_cast<int>(rows.size());
            rows.push_back(name);
        }
    };
    auto drawn = [](const op& o) { return o.f == "write" || (o.f == "run" && o.type != "refused"); };
    for (const auto* h : {&main, &control})
        for (const auto& o : *h) {
            if (o.f != "fault" && !drawn(o)) continue;
            lo = std::min(lo, o.t0);
            hi = std::max(hi, o.t1);
        }
    std::vector<std::string> names;
    for (const auto& o : main)
        if (drawn(o)) names.push_back(o.proc);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) add_row(n);
    names.clear();
    for (const auto& o : control)
        if (drawn(o)) names.push_back(o.proc);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) add_row("control " + n);
    if (lo >= hi) hi = lo + 1;
    const int left = 130, width = 900, row_h = 18, top = 40;
    const int height = top + static_cast<int>(rows.size()) * row_h + 50;
    auto x = [&](std::int64_t t) { return left + static_cast<double>(t - lo) * width / static_cast<double>(hi - lo); };
    std::string s;
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
                  "font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                  "<text x=\"%d\" y=\"20\" font-size=\"14\">%s</text>\n",
                  left + width + 20, height, left, esc(title).c_str());
    s += buf;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const int y = top + static_cast<int>(i) * row_h;
        std::snprintf(buf, sizeof buf,
                      "<text x=\"4\" y=\"%d\">%s</text><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#ddd\"/>\n",
                      y + 12, esc(rows[i]).c_str(), left, y + row_h / 2, left + width, y + row_h / 2);
        s += buf;
    }
    // Faults (they are in the main history; the control ran under the same ones).
    for (const auto& o : main) {
        if (o.f != "fault") continue;
        const std::string kind = o.raw.value("kind", std::string("fault"));
        const std::string target = o.raw.value("target", std::string());
        const bool client = kind.rfind("client", 0) == 0 || kind == "clock";
        const bool network = kind == "partition" || kind == "leader-partition" || kind == "connection-cut";
        const bool server = kind.rfind("server", 0) == 0 || kind.rfind("leader", 0) == 0;
        const char* colour = network ? "#9ecae1" : server ? "#fdae6b" : kind == "clock" ? "#c7e9c0" : "#dadaeb";
        const double x0 = x(o.t0), w = std::max(1.0, x(o.t1) - x0);
        int y0 = top, h = static_cast<int>(rows.size()) * row_h;
        if (client) {
            // The target is a process name: shade its rows (main and control).
            // (a comma-separated list: a pause stops several at once).
            bool any = false;
            for (std::size_t p = 0; p <= target.size();) {
                auto e = target.find(',', p);
                if (e == std::string::npos) e = target.size();
                const std::string one = target.substr(p, e - p);
                p = e + 1;
                for (const auto& name : {one, "control " + one}) {
                    auto it = row_of.find(name);
                    if (it == row_of.end()) continue;
                    any = true;
                    std::snprintf(buf, sizeof buf,
                                  "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" opacity=\"0.8\"/>\n",
                                  x0, top + it->second * row_h, w, row_h, colour);
                    s += buf;
                }
            }
            if (any) continue;
        }
        std::snprintf(buf, sizeof buf,
                      "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" opacity=\"0.5\"/>"
                      "<text x=\"%.1f\" y=\"%d\" font-size=\"9\">%s</text>\n",
                      x0, y0, w, h, colour, x0, y0 - 3, esc(kind).c_str());
        s += buf;
    }
    auto ticks = [&](const std::vector<op>& h, const std::set<std::size_t>& bad, const std::string& prefix) {
        for (const auto& o : h) {
            if (!drawn(o)) continue;
            const int y = top + row_of[prefix + o.proc] * row_h;
            const char* colour = bad.count(o.line) ? "#d62728" : o.ok() ? "#2ca02c" : o.unknown() ? "#ff7f0e" : "#999";
            const int tall = bad.count(o.line) ? row_h - 2 : row_h / 2;
            std::snprintf(buf, sizeof buf, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>\n", x(o.t0),
                          y + (row_h - tall) / 2, std::max(1.5, x(o.t1) - x(o.t0)), tall, colour);
            s += buf;
        }
    };
    ticks(main, bad_main, "");
    ticks(control, bad_control, "control ");
    const int ly = top + static_cast<int>(rows.size()) * row_h + 20;
    std::snprintf(buf, sizeof buf,
                  "<text x=\"%d\" y=\"%d\">%.1f s. Ticks: writes (lease workloads) and ledger runs: "
                  "<tspan fill=\"#2ca02c\">ok</tspan>, <tspan fill=\"#999\">refused</tspan>, "
                  "<tspan fill=\"#ff7f0e\">unknown</tspan>, <tspan fill=\"#d62728\">violation</tspan>.</text>\n"
                  "<text x=\"%d\" y=\"%d\">Shaded: client pause or kill (its rows, grey), faked clock (its rows, green), "
                  "server kill or pause (orange), partition or connection cut (blue).</text>\n",
                  left, ly, static_cast<double>(hi - lo) / 1e9, left, ly + 16);
    s += buf;
    s += "</svg>\n";
    return s;
}

struct stall {
    std::string kind, target;
    std::int64_t t0 = 0, ms = 0;
    std::size_t refused = 0, unknown = 0;
};

bool server_fault(const std::string& kind) {
    return kind.rfind("client", 0) != 0 && kind != "clock";
}

std::vector<stall> stalls(const std::vector<op>& main) {
    // Ok completions of the workloads, in time order (the final reads,
    // after every fault healed and the workloads stopped, are not theirs).
    std::vector<std::int64_t> done;
    std::int64_t first = INT64_MAX, last = INT64_MIN;
    for (const auto& o : main) {
        if (o.f == "fault" || o.f == "final" || o.proc == "final") continue;
        first = std::min(first, o.t0);
        last = std::max(last, o.t1);
        if (o.ok()) done.push_back(o.t1);
    }
    std::sort(done.begin(), done.end());
    std::vector<const op*> faults;
    for (const auto& o : main)
        if (o.f == "fault") faults.push_back(&o);
    std::sort(faults.begin(), faults.end(), [](const op* a, const op* b) { return a->t0 < b->t0; });
    std::vector<stall> out;
    for (std::size_t k = 0; k < faults.size(); ++k) {
        const op& f = *faults[k];
        const std::string kind = f.raw.value("kind", std::string());
        if (!server_fault(kind)) continue;
        stall st{kind, f.raw.value("target", std::string()), f.t0 - first};
        const std::int64_t end = std::min(k + 1 < faults.size() ? faults[k + 1]->t0 : INT64_MAX, last);
        // Consecutive completions (a, b), their gap clipped to [t0, end).
        std::int64_t a0 = 0, b0 = 0;
        for (std::size_t i = 0; i + 1 < done.size(); ++i) {
            const std::int64_t a = std::max(done[i], f.t0), b = std::min(done[i + 1], end);
            if (b - a > st.ms) st.ms = b - a, a0 = a, b0 = b;
        }
        for (const auto& o : main)
            if (o.f != "fault" && o.t1 > a0 && o.t1 < b0) {
                if (o.unknown()) ++st.unknown;
                else if (!o.ok()) ++st.refused;
            }
        st.ms /= 1000000;
        out.push_back(st);
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: coord_fault_check HISTORY [--control HISTORY] [--summary FILE] [--svg FILE] [--meta K=V]...\n");
        return 2;
    }
    std::string control_path, summary_path, svg_path;
    std::vector<std::pair<std::string, std::string>> meta;
    for (int i = 2; i < argc; i += 2) {
        const std::string k = argv[i];
        if (i + 1 >= argc) {
            std::fprintf(stderr, "coord_fault_check: %s needs a value\n", k.c_str());
            return 2;
        }
        const std::string v = argv[i + 1];
        if (k == "--control") control_path = v;
        else if (k == "--summary") summary_path = v;
        else if (k == "--svg") svg_path = v;
        else if (k == "--meta" && v.find('=') != std::string::npos) meta.emplace_back(v.substr(0, v.find('=')), v.substr(v.find('=') + 1));
        else {
            std::fprintf(stderr, "coord_fault_check: unknown option %s\n", k.c_str());
            return 2;
        }
    }
    std::vector<op> main_ops, control_ops;
    coord::faults::report r, c;
    try {
        main_ops = read_history(argv[1]);
        r = coord::faults::check(main_ops);
        if (!control_path.empty()) {
            control_ops = read_history(control_path);
            c = coord::faults::check(control_ops);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "coord_fault_check: %s\n", e.what());
        return 2;
    }
    print("coord (fenced):", r);
    for (const auto& [kind, n] : r.faults) std::printf("fault %-20s %zu\n", kind.c_str(), n);
    for (const auto& [k, v] : meta)
        if (k.rfind("not_run.", 0) == 0) std::printf("not run: %-14s %s\n", k.substr(8).c_str(), v.c_str());
    for (const auto& [name, w] : r.workloads)
        for (const auto& v : w.violations) std::printf("VIOLATION %s: %s\n", name.c_str(), v.c_str());
    const auto stalled = stalls(main_ops);
    for (const auto& st : stalled)
        std::printf("stall %-16s %-6s at %5.1f s: %6lld ms without an ok operation (refused %zu, unknown %zu)\n",
                    st.kind.c_str(), st.target.c_str(), static_cast<double>(st.t0) / 1e9, static_cast<long long>(st.ms),
                    st.refused, st.unknown);
    const bool with_control = !control_path.empty();
    const bool control_caught = with_control && c.violations() > 0;
    if (with_control) {
        print("control (the same lease, the register without the fence check):", c);
        std::printf("control: %zu violations%s\n", c.violations(),
                    control_caught ? " (expected: the checker catches an unfenced lock)"
                                   : ": THE CONTROL PASSED, so this run proves nothing");
        std::size_t shown = 0;
        for (const auto& [name, w] : c.workloads)
            for (const auto& v : w.violations)
                if (shown++ < 3) std::printf("  control %s: %s\n", name.c_str(), v.c_str());
    }
    auto summary = r.to_json();
    if (with_control) {
        auto cj = c.to_json();
        cj.erase("faults");
        nlohmann::json control = cj.contains("register") ? cj["register"] : nlohmann::json::object();
        auto& msgs = control["violation_messages"];
        if (msgs.is_array() && msgs.size() > 20) msgs.erase(msgs.begin() + 20, msgs.end());  // enough to show it
        summary["control"] = control;
    }
    for (const auto& [k, v] : meta) {
        if (k.rfind("not_run.", 0) == 0) summary["not_run"][k.substr(8)] = v;
        else summary[k] = v;
    }
    summary["stalls"] = nlohmann::json::array();
    for (const auto& st : stalled)
        summary["stalls"].push_back({{"kind", st.kind}, {"target", st.target}, {"at_ms", st.t0 / 1000000}, {"ms", st.ms},
                                     {"refused", st.refused}, {"unknown", st.unknown}});
    summary["violations"] = r.violations();
    summary["passed"] = r.violations() == 0 && (!with_control || control_caught);
    if (!summary_path.empty()) {
        std::ofstream out(summary_path);
        out << summary.dump(2) << "\n";
        if (!out) {
            std::fprintf(stderr, "coord_fault_check: cannot write %s\n", summary_path.c_str());
            return 2;
        }
    }
    if (!svg_path.empty()) {
        std::set<std::size_t> bad_main, bad_control;
        for (const auto& [_, w] : r.workloads) bad_main.insert(w.violation_lines.begin(), w.violation_lines.end());
        for (const auto& [_, w] : c.workloads) bad_control.insert(w.violation_lines.begin(), w.violation_lines.end());
        std::string title = "coord fault suite";
        for (const auto& [k, v] : meta)
            if (k == "engine" || k == "seed" || k == "seconds") title += "  " + k + "=" + v;
        std::ofstream out(svg_path);
        out << svg(main_ops, control_ops, bad_main, bad_control, title);
        if (!out) {
            std::fprintf(stderr, "coord_fault_check: cannot write %s\n", svg_path.c_str());
            return 2;
        }
    }
    // One row of the results table (docs/internals/fault-suite.md).
    auto cell = [&](const char* w) {
        auto it = r.workloads.find(w);
        if (it == r.workloads.end()) {
            for (const auto& [k, v] : meta)
                if (k == std::string("not_run.") + w) return std::string("not run");
            return std::string("-");
        }
        return std::to_string(it->second.ok) + " / " + std::to_string(it->second.refused) + " / " +
               std::to_string(it->second.unknown) + " / **" + std::to_string(it->second.violations.size()) + "**";
    };
    std::string engine = "?", faults_run;
    for (const auto& [k, v] : meta)
        if (k == "engine") engine = v;
    for (const auto& [kind, n] : r.faults) faults_run += (faults_run.empty() ? "" : ", ") + kind + " " + std::to_string(n);
    std::printf("markdown: | %s | %s | %s | %s | %s | %s | %zu |\n", engine.c_str(), faults_run.c_str(), cell("register").c_str(),
                cell("ids").c_str(), cell("ledger").c_str(), cell("durability").c_str(), c.violations());
    if (with_control && !control_caught) return 1;
    return r.violations() == 0 ? 0 : 1;
}
