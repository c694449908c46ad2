// SPDX-License-Identifier: Apache-2.0
// coord/detail/engine_errors.hpp: the error category of an engine, written
// once. Each engine keeps its own enum of codes and hands this a table: for
// every code, the coord::condition it is and its message.
//
// Codes named alike mean alike on every engine (docs/internals/architecture.md):
//   connection_failed  no connection or session could be made
//   server_refused     the server refused the statement, command or request
//                      and applied nothing
//   lock_timeout       a lock the server takes was not free in time
//   busy               the server is too loaded to serve (a long script,
//                      out of memory)
//   bad_answer         the answer was not of the shape the engine expects
//                      (condition outcome_unknown: it says nothing of what
//                      the server did)
//   deadline_passed    no answer within options::operation_timeout, for a
//                      call that wrote nothing
//   contention         a compare-and-set kept losing to other writers
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <system_error>

#include "coord/error.hpp"

namespace coord::detail {

/// One row of an engine's error table.
template <class Errc>
struct engine_error_entry {
    Errc code;
    coord::condition condition;
    const char* message;
};

/// The std::error_category of an engine's codes, from its table.
template <class Errc, std::size_t N>
class engine_category final : public std::error_category {
public:
    constexpr engine_category(const char* name, const char* engine,
                              std::array<engine_error_entry<Errc>, N> table) noexcept
        : name_(name), engine_(engine), table_(table) {}

    const char* name() const noexcept override { return name_; }
    std::error_condition default_error_condition(int ev) const noexcept override {
        for (const auto& e : table_)
            if (static_cast<int>(e.code) == ev) return coord::make_error_condition(e.condition);
        return coord::make_error_condition(coord::condition::unavailable);
    }
    std::string message(int ev) const override {
        for (const auto& e : table_)
            if (static_cast<int>(e.code) == ev) return e.message;
        return std::string("unknown ") + engine_ + " error";
    }

private:
    const char* name_;
    const char* engine_;
    std::array<engine_error_entry<Errc>, N> table_;
};

}  // namespace coord::detail
