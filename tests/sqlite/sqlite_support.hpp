// SPDX-License-Identifier: Apache-2.0
// tests/sqlite/sqlite_support.hpp: the factory the conformance suites run on
// SQLite (a fresh database file in a scratch directory each time).
#pragma once

#include <memory>

#include "coord/sqlite/store.hpp"
#include "support/test_support.hpp"

namespace coord::test {

struct sqlite_factory {
    using store_type = sqlite::basic_store<manual_clock>;
    static constexpr const char* name = "sqlite";
    scratch_dir dir;
    std::unique_ptr<store_type> make(manual_clock clock) { return std::make_unique<store_type>(dir / "coord.db", clock); }
    /// A second store object on the same file, as another process would open it.
    std::unique_ptr<store_type> second;
    store_type* reopen(store_type*, manual_clock clock) {
        second = std::make_unique<store_type>(dir / "coord.db", clock);
        return second.get();
    }
};

}  // namespace coord::test
