// SPDX-License-Identifier: Apache-2.0
// coord/sqlite/context.hpp: what every SQLite adapter works through, built
// once per store before the adapters: the database (its path resolved and
// checked) and the clock.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <utility>

#include "coord/detail/path.hpp"
#include "coord/sqlite/connection.hpp"

namespace coord::sqlite {

namespace detail {

// The database file's one spelling, refusing what SQLite cannot share safely:
// a path that is not a regular file (a FIFO would hang the open), and a file
// with other hard links (SQLite names its WAL after the path: two names of
// one database would get two WALs and lose writes).
inline std::filesystem::path checked_path(const std::filesystem::path& given) {
    auto path = coord::detail::resolve_store_path(given, "coord SQLite store");
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISREG(st.st_mode))
            throw store_error(coord::make_error_code(coord::errc::state_not_regular),
                              "coord SQLite store " + path.string() + ": not a regular file");
        if (st.st_nlink > 1)
            throw store_error(coord::make_error_code(coord::errc::state_hard_linked),
                              "coord SQLite store " + path.string() + ": the file has other hard links");
    }
    return path;
}

/// The database and the clock, built once per store before the adapters.
template <class Clock>
class context {
public:
    context(const std::filesystem::path& path, Clock clock, options opts)
        : db_(checked_path(path), opts), clock_(std::move(clock)) {}
    context(const context&) = delete;
    context& operator=(const context&) = delete;

    /// The one connection, behind its timed mutex: one transaction per operation.
    database& db() noexcept { return db_; }
    const database& db() const noexcept { return db_; }
    /// The clock every expiry is judged on, read inside the transaction.
    const Clock& clock() const noexcept { return clock_; }

private:
    database db_;
    Clock clock_;
};

}  // namespace detail

}  // namespace coord::sqlite
