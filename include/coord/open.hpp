// SPDX-License-Identifier: Apache-2.0
// coord/open.hpp: a store from a URL, the first thing a service does.
//
//   file:PATH                                   coord::file_store (one machine)
//   sqlite:PATH                                 coord::sqlite::store (one machine)
//   postgres:CONNINFO                           coord::postgres::store (libpq's conninfo)
//   redis://HOST:PORT[/DB]                      coord::redis::store
//   etcd://HOST:PORT[,HOST:PORT...]             coord::etcd::store
//   zookeeper://HOST:PORT[,HOST:PORT...][/ROOT] coord::zookeeper::store
//
// with_store(url, f) opens the store the URL names and calls f(store) with
// the concrete store type, so everything after it is as fast as naming the
// type (no virtual calls): write f as a generic lambda, or give it an
// overload per store type. An engine is known here when its CMake target is
// linked (coord::sqlite, coord::postgres, coord::redis, coord::etcd,
// coord::zookeeper define COORD_HAS_<ENGINE>), or when the program defines
// that macro and includes the engine's dependencies itself.
//
// A URL that names no engine built in, or that is malformed, is refused
// before anything is opened: coord::bad_store_url (a std::invalid_argument),
// its message naming the forms known and the URL escaped (a user:password@
// part or a conninfo with a password not shown). The engines'
// constructors throw what they throw (std::invalid_argument for bad
// options, std::runtime_error for a store that cannot be opened).
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "coord/detail/text.hpp"
#include "coord/storage/file.hpp"
#if defined(COORD_HAS_POSTGRES)
#include "coord/postgres/store.hpp"
#endif
#if defined(COORD_HAS_SQLITE)
#include "coord/sqlite/store.hpp"
#endif
#if defined(COORD_HAS_REDIS)
#include "coord/redis/store.hpp"
#endif
#if defined(COORD_HAS_ETCD)
#include "coord/etcd/store.hpp"
#endif
#if defined(COORD_HAS_ZOOKEEPER)
#include "coord/zookeeper/store.hpp"
#endif

namespace coord {

/// A store URL that names no engine this program was built with, or that is
/// malformed. The message says which, with the URL escaped.
struct bad_store_url : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

/// How with_store opens a store.
struct open_options {
    /// Bounds every call (0: each store's default): the file store's lock
    /// wait, SQLite's busy timeout, the servers' operation and connect
    /// timeouts.
    std::chrono::milliseconds timeout{0};
};

/// The URL forms this program was built with, for messages and help.
inline std::string store_url_forms() {
    std::string s = "file:PATH";
#if defined(COORD_HAS_SQLITE)
    s += ", sqlite:PATH";
#endif
#if defined(COORD_HAS_POSTGRES)
    s += ", postgres:CONNINFO";
#endif
#if defined(COORD_HAS_REDIS)
    s += ", redis://HOST:PORT[/DB]";
#endif
#if defined(COORD_HAS_ETCD)
    s += ", etcd://HOST:PORT[,HOST:PORT...]";
#endif
#if defined(COORD_HAS_ZOOKEEPER)
    s += ", zookeeper://HOST:PORT[,HOST:PORT...][/ROOT]";
#endif
    return s;
}

namespace detail {
// A store URL as an error message may show it: escaped, and without what
// may be a secret (a user:password@ part, a conninfo's password=).
inline std::string url_for_message(std::string_view u) {
    std::string lower(u);
    for (auto& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    const auto colon = u.find(':');
    if (lower.find("password") != std::string::npos) return printable(u.substr(0, colon == u.npos ? 0 : colon)) + ":(not shown)";
    std::string shown(u);
    if (const auto p = shown.find("://"); p != std::string::npos) {
        const auto end = shown.find_first_of("/?#", p + 3);
        const auto at = shown.rfind('@', end == std::string::npos ? shown.size() : end);
        if (at != std::string::npos && at > p) shown = shown.substr(0, p + 3) + "(not shown)" + shown.substr(at);
    }
    return printable(shown);
}
}  // namespace detail

/// Opens the store `url` names and returns f(store). Throws bad_store_url
/// for a URL that names no store or is malformed (nothing was opened).
template <class F>
decltype(auto) with_store(std::string_view url, F&& f, const open_options& o = {}) {
    const bool timed = o.timeout.count() > 0;
    const std::string u(url);
    [[maybe_unused]] auto malformed = [&](const std::string& why) {
        return bad_store_url("store URL '" + detail::url_for_message(u) + "': " + why);
    };
    if (u.rfind("file:", 0) == 0 && u.size() > 5) {
        file_store_options fo;
        if (timed) fo.lock_timeout = o.timeout;
        file_store store(u.substr(5), {}, fo);
        return std::forward<F>(f)(store);
    }
#if defined(COORD_HAS_SQLITE)
    if (u.rfind("sqlite:", 0) == 0 && u.size() > 7) {
        sqlite::options so;
        if (timed) so.busy_timeout = o.timeout;
        sqlite::store store(u.substr(7), {}, so);
        return std::forward<F>(f)(store);
    }
#endif
#if defined(COORD_HAS_POSTGRES)
    if (u.rfind("postgres:", 0) == 0) {
        const auto conninfo = u.substr(9);
        if (auto why = postgres::conninfo_error(conninfo)) throw malformed(detail::printable(*why));
        postgres::options po;
        if (timed) po.operation_timeout = po.connect_timeout = o.timeout;
        postgres::store store(conninfo, {}, po);
        return std::forward<F>(f)(store);
    }
#endif
#if defined(COORD_HAS_REDIS)
    if (u.rfind("redis://", 0) == 0) {
        if (auto a = redis::parse_url(u); !a) throw malformed(a.error());
        redis::options ro;
        if (timed) ro.operation_timeout = ro.connect_timeout = o.timeout;
        redis::store store(u, {}, ro);
        return std::forward<F>(f)(store);
    }
#endif
#if defined(COORD_HAS_ETCD)
    if (u.rfind("etcd://", 0) == 0) {
        if (auto a = etcd::parse_url(u); !a) throw malformed(a.error());
        etcd::options eo;
        if (timed) eo.operation_timeout = eo.connect_timeout = o.timeout;
        etcd::store store(u, {}, eo);
        return std::forward<F>(f)(store);
    }
#endif
#if defined(COORD_HAS_ZOOKEEPER)
    if (u.rfind("zookeeper://", 0) == 0) {
        if (auto a = zookeeper::parse_url(u); !a) throw malformed(a.error());
        zookeeper::options zo;
        if (timed) zo.operation_timeout = zo.connect_timeout = o.timeout;
        zookeeper::store store(u, {}, zo);
        return std::forward<F>(f)(store);
    }
#endif
    throw bad_store_url("a store URL is one of " + store_url_forms() + ", got '" + detail::url_for_message(u) + "'");
}

}  // namespace coord
