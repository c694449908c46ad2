// SPDX-License-Identifier: Apache-2.0
// coord/detail/path.hpp: one spelling for a store file however it is reached
// (symlinks, ".", "..", "//", a relative path), shared by the file store and
// the SQLite engine, so that a store's identity survives how it is named.
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>

#include "coord/error.hpp"

namespace coord::detail {

/// The one spelling of a store file's path, however it was reached: the
/// directory made absolute and resolved (symlinks, ".", "..", "//"), and a
/// final component that is a symbolic link followed (up to 40 links), so
/// that every spelling and link of one state file gives one state and one
/// lock file. Throws store_error when the directory cannot be resolved or
/// the path names a directory.
inline std::filesystem::path resolve_store_path(const std::filesystem::path& given, const char* what) {
    namespace fs = std::filesystem;
    const auto refuse = [&](std::error_code ec, const std::string& why) {
        return store_error(ec, std::string(what) + " " + given.string() + ": " + why);
    };
    if (given.empty()) throw refuse(make_error_code(errc::state_not_regular), "empty path");
    fs::path p = given;
    for (int links = 0; links <= 40; ++links) {
        std::error_code ec;
        const fs::path abs = fs::absolute(p, ec);
        if (ec) throw refuse(ec, "cannot make the path absolute");
        const fs::path name = abs.filename();
        if (name.empty() || name == "." || name == "..")
            throw refuse(make_error_code(errc::state_not_regular), "the path names a directory");
        const fs::path dir = fs::canonical(abs.parent_path(), ec);
        if (ec) throw refuse(ec, "cannot resolve its directory " + abs.parent_path().string());
        const fs::path full = dir / name;
        struct stat st {};
        if (::lstat(full.c_str(), &st) != 0) {
            if (errno == ENOENT) return full;  // a new store
            throw refuse(std::error_code(errno, std::system_category()), "cannot stat " + full.string());
        }
        if (!S_ISLNK(st.st_mode)) return full;
        const fs::path target = fs::read_symlink(full, ec);
        if (ec) throw refuse(ec, "cannot read the symbolic link " + full.string());
        p = target.is_absolute() ? target : dir / target;
    }
    throw refuse(std::make_error_code(std::errc::too_many_symbolic_link_levels), "too many symbolic links");
}

}  // namespace coord::detail
