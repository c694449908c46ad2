// SPDX-License-Identifier: Apache-2.0
// coord_fault_check: reads a fault-suite history (tests/faults/checker.hpp),
// prints one line per workload (operations, ok, refused, unknown,
// violations) and the faults by kind, the violations' messages, and writes
// the summary as JSON when asked. Exit 0: no violation; 1: violations; 2: a
// history it cannot read.
//
//   coord_fault_check HISTORY [--summary FILE]
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "faults/checker.hpp"

int main(int argc, char** argv) {
    if (argc != 2 && !(argc == 4 && std::string(argv[2]) == "--summary")) {
        std::fprintf(stderr, "usage: coord_fault_check HISTORY [--summary FILE]\n");
        return 2;
    }
    std::ifstream in(argv[1]);
    if (!in) {
        std::fprintf(stderr, "coord_fault_check: cannot read %s\n", argv[1]);
        return 2;
    }
    coord::faults::report r;
    try {
        r = coord::faults::check(coord::faults::parse_history(in));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "coord_fault_check: %s: %s\n", argv[1], e.what());
        return 2;
    }
    std::printf("%-12s %10s %10s %10s %10s %10s\n", "workload", "operations", "ok", "refused", "unknown", "violations");
    for (const auto& [name, w] : r.workloads)
        std::printf("%-12s %10zu %10zu %10zu %10zu %10zu\n", name.c_str(), w.operations, w.ok, w.refused, w.unknown,
                    w.violations.size());
    for (const auto& [kind, n] : r.faults) std::printf("fault %-20s %zu\n", kind.c_str(), n);
    for (const auto& [name, w] : r.workloads)
        for (const auto& v : w.violations) std::printf("VIOLATION %s: %s\n", name.c_str(), v.c_str());
    if (argc == 4) {
        std::ofstream out(argv[3]);
        out << r.to_json().dump(2) << "\n";
        if (!out) {
            std::fprintf(stderr, "coord_fault_check: cannot write %s\n", argv[3]);
            return 2;
        }
    }
    return r.violations() == 0 ? 0 : 1;
}
