// SPDX-License-Identifier: Apache-2.0
// coord/open.hpp: a store from a URL, the first thing a service does.
//
//   file:PATH                                   coord::file_store (one machine)
//   sqlite:PATH                                 coord::sqlite::store (one machine)
//   postgres:CONNINFO                           coord::postgres::store (libpq's conninfo)
//   redis://HOST:PORT[/DB]                      coord::redis::store
//   rediss://HOST:PORT[/DB]                     the same over TLS
//   redis+sentinel://HOST:PORT[,...]/MASTER[/DB] the master Redis Sentinel names
//                                               (rediss+sentinel:// over TLS)
//   etcd://HOST:PORT[,HOST:PORT...]             coord::etcd::store
//   etcds://HOST:PORT[,HOST:PORT...]            the same over TLS
//   zookeeper://HOST:PORT[,HOST:PORT...][/ROOT] coord::zookeeper::store
//
// Options of the store after a '?' (open_store below lists them):
//   redis://127.0.0.1:6379/0?prefix=billing&pool=8
//
// with_store(url, f) opens the store the URL names and calls f(store) with
// the concrete store type, so everything after it is as fast as naming the
// type (no virtual calls): write f as a generic lambda, or give it an
// overload per store type. open_store<Store>(url) opens a URL of one known
// type (the URL must be of that engine). An engine is known here when its CMake target is
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

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
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
    /// Credentials for the store (empty: none; the URL's own, or the
    /// engine's defaults such as libpq's passfile). PostgreSQL: the role and
    /// its password (what the conninfo says wins); Redis: AUTH's user and
    /// password; ZooKeeper: the digest identity (both needed); etcd: its
    /// authentication's user and password (both needed). Not taken by file:
    /// and sqlite: (refused: bad_store_url). Never put in a message.
    std::string user{};
    std::string password{};  ///< the password (never in a message)
    /// TLS files (empty: the URL's own, or none): the PEM file of the CAs
    /// that sign the server's certificate, the client certificate and its
    /// key. etcds:// (its options), postgres: (sslrootcert, then sslmode
    /// verify-full; sslcert, sslkey: what the conninfo says wins). Refused
    /// by the other stores (bad_store_url).
    std::string ca_file{};
    std::string cert_file{};  ///< the client certificate (PEM)
    std::string key_file{};  ///< its private key (PEM)
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
    s += ", redis[s]://HOST:PORT[/DB], redis[s]+sentinel://HOST:PORT[,...]/MASTER[/DB]";
#endif
#if defined(COORD_HAS_ETCD)
    s += ", etcd[s]://HOST:PORT[,HOST:PORT...]";
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

namespace detail {

template <class>
inline constexpr bool unknown_store = false;

// A URL split at its first '?': the store's part and its options.
struct url_parts {
    std::string store;
    std::string_view query;
};
inline url_parts split_query(const std::string& u) {
    const auto q = u.find('?');
    if (q == std::string::npos) return {u, {}};
    return {u.substr(0, q), std::string_view(u).substr(q + 1)};
}

// Applies NAME=VALUE[&NAME=VALUE...]: set(name, value) returns why the
// option is refused (an unknown name, a bad value), or nullopt when taken.
template <class Set, class Malformed>
void apply_url_options(std::string_view query, Set&& set, const Malformed& malformed) {
    while (!query.empty()) {
        const auto amp = query.find('&');
        const auto item = query.substr(0, amp);
        const auto eq = item.find('=');
        if (eq == std::string_view::npos || eq == 0)
            throw malformed("option '" + printable(item) + "' is not NAME=VALUE");
        if (auto why = set(item.substr(0, eq), item.substr(eq + 1))) throw malformed(*why);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    }
}

// A whole number lo..hi written in decimal, or nullopt.
inline std::optional<std::uint64_t> url_number(std::string_view v, std::uint64_t lo, std::uint64_t hi) {
    std::uint64_t n = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (v.empty() || ec != std::errc{} || p != v.data() + v.size() || n < lo || n > hi) return std::nullopt;
    return n;
}

inline std::string unknown_url_option(std::string_view name, const char* known) {
    return "unknown option '" + printable(name) + "' (known: " + known + ")";
}

// A secret a URL names by its file (credentials never stand in a URL, on a
// command line or in a message): the file's one line, without its line end;
// or why not. A file that other users can read, an empty one, one of more
// than one line or above 4 KiB is refused. Its text is never in a message.
inline std::optional<std::string> read_secret_file(const std::string& path, std::string& secret) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return path + ": " + std::generic_category().message(errno);
    if (!S_ISREG(st.st_mode)) return path + " is not a regular file";
    if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
        return path + " can be read by other users (chmod 600 it): a secret's file is refused";
    if (st.st_size > 4096) return path + " is larger than 4 KiB: not a secret's file";
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return path + ": " + std::generic_category().message(errno);
    char buf[4097];
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    std::string text(buf, n);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.empty()) return path + " is empty";
    if (text.find_first_of("\r\n") != std::string::npos) return path + " holds more than one line";
    secret = std::move(text);
    return std::nullopt;
}

}  // namespace detail

/// Opens the store `url` names as the type Store, for code that knows its
/// engine when it is compiled (a service built for PostgreSQL, the benches):
/// the URL must be Store's form. Store is file_store or an engine's store
/// (coord::sqlite::store, coord::postgres::store, coord::redis::store,
/// coord::etcd::store, coord::zookeeper::store). Options from the URL, after
/// a '?' as NAME=VALUE joined by '&' (not for postgres:, whose conninfo is
/// libpq's own):
///
///   file:PATH?fsync=on|off
///   sqlite:PATH?sync=full|normal|off
///   redis://...?prefix=P&pool=N        (N connections, 1 to 1024)
///   rediss://...?prefix=P&pool=N&ca_file=PATH&cert_file=PATH&key_file=PATH
///   etcd://...?prefix=P&pool=N
///   etcds://...?prefix=P&pool=N&ca_file=PATH&cert_file=PATH&key_file=PATH
///   zookeeper://...?session_timeout=MS&digest_file=PATH
///                                      (PATH: a file, mode 600, holding
///                                      USER:PASSWORD: ZooKeeper's digest)
///
/// Throws bad_store_url for a URL of another form, a malformed one or an
/// unknown option (nothing was opened); the store's constructor throws what
/// it throws.
template <class Store>
Store open_store(std::string_view url, const open_options& o = {}) {
    const bool timed = o.timeout.count() > 0;
    const std::string u(url);
    [[maybe_unused]] auto malformed = [&](const std::string& why) {
        return bad_store_url("store URL '" + detail::url_for_message(u) + "': " + why);
    };
    [[maybe_unused]] auto form = [&](const char* scheme, const char* shape) {
        if (u.rfind(scheme, 0) != 0) throw malformed(std::string("this store's URL is ") + shape);
    };
    [[maybe_unused]] const auto parts = detail::split_query(u);
    [[maybe_unused]] auto no_credentials = [&](const char* engine) {
        if (!o.user.empty() || !o.password.empty())
            throw malformed(std::string(engine) + " takes no user or password");
    };
    [[maybe_unused]] auto no_tls_files = [&](const char* engine) {
        if (!o.ca_file.empty() || !o.cert_file.empty() || !o.key_file.empty())
            throw malformed(std::string(engine) + " takes no TLS files");
    };
    if constexpr (std::is_same_v<Store, file_store>) {
        no_credentials("a file store");
        no_tls_files("a file store");
        form("file:", "file:PATH");
        file_store_options fo;
        if (timed) fo.lock_timeout = o.timeout;
        detail::apply_url_options(parts.query, [&](std::string_view n, std::string_view v) -> std::optional<std::string> {
            if (n != "fsync") return detail::unknown_url_option(n, "fsync");
            if (v != "on" && v != "off") return std::string("fsync is on or off");
            fo.fsync = v == "on";
            return std::nullopt;
        }, malformed);
        if (parts.store.size() <= 5) throw malformed("file:PATH needs a path");
        return file_store(parts.store.substr(5), {}, fo);
    }
#if defined(COORD_HAS_SQLITE)
    else if constexpr (std::is_same_v<Store, sqlite::store>) {
        form("sqlite:", "sqlite:PATH");
        no_credentials("SQLite");
        no_tls_files("SQLite");
        sqlite::options so;
        if (timed) so.busy_timeout = o.timeout;
        detail::apply_url_options(parts.query, [&](std::string_view n, std::string_view v) -> std::optional<std::string> {
            if (n != "sync") return detail::unknown_url_option(n, "sync");
            if (v == "full") so.sync = sqlite::durability::full;
            else if (v == "normal") so.sync = sqlite::durability::normal;
            else if (v == "off") so.sync = sqlite::durability::off;
            else return std::string("sync is full, normal or off");
            return std::nullopt;
        }, malformed);
        if (parts.store.size() <= 7) throw malformed("sqlite:PATH needs a path");
        return sqlite::store(parts.store.substr(7), {}, so);
    }
#endif
#if defined(COORD_HAS_POSTGRES)
    else if constexpr (std::is_same_v<Store, postgres::store>) {
        form("postgres:", "postgres:CONNINFO");
        const auto conninfo = u.substr(9);
        if (auto why = postgres::conninfo_error(conninfo)) throw malformed(detail::printable(*why));
        postgres::options po;
        if (timed) po.operation_timeout = po.connect_timeout = o.timeout;
        po.user = o.user;
        po.password = o.password;
        po.ca_file = o.ca_file;
        po.cert_file = o.cert_file;
        po.key_file = o.key_file;
        return postgres::store(conninfo, {}, po);
    }
#endif
#if defined(COORD_HAS_REDIS)
    else if constexpr (std::is_same_v<Store, redis::store>) {
        const bool tls = u.rfind("rediss://", 0) == 0 || u.rfind("rediss+sentinel://", 0) == 0;
        if (!tls && u.rfind("redis+sentinel://", 0) != 0)
            form("redis://", "redis://HOST:PORT[/DB] (rediss:// for TLS, redis+sentinel://HOST:PORT[,...]/MASTER[/DB] for Sentinels)");
        if (auto a = redis::parse_url(parts.store); !a) throw malformed(a.error());
        redis::options ro;
        if (timed) ro.operation_timeout = ro.connect_timeout = o.timeout;
        ro.user = o.user;
        ro.password = o.password;
        ro.ca_file = o.ca_file;
        ro.cert_file = o.cert_file;
        ro.key_file = o.key_file;
        detail::apply_url_options(parts.query, [&](std::string_view n, std::string_view v) -> std::optional<std::string> {
            if (n == "prefix") ro.prefix = std::string(v);
            else if (tls && (n == "ca_file" || n == "cert_file" || n == "key_file")) {
                auto& f = n == "ca_file" ? ro.ca_file : n == "cert_file" ? ro.cert_file : ro.key_file;
                if (!f.empty()) return std::string(n) + " given twice (in the URL and the options)";
                f = std::string(v);
            } else if (n != "pool") return detail::unknown_url_option(n, tls ? "prefix, pool, ca_file, cert_file, key_file" : "prefix, pool");
            else if (auto k = detail::url_number(v, 1, 1024)) ro.pool_size = *k;
            else return std::string("pool is 1 to 1024 connections");
            return std::nullopt;
        }, malformed);
        if (ro.cert_file.empty() != ro.key_file.empty())
            throw malformed("a client certificate and its key go together (cert_file, key_file)");
        return redis::store(parts.store, {}, ro);
    }
#endif
#if defined(COORD_HAS_ETCD)
    else if constexpr (std::is_same_v<Store, etcd::store>) {
        const bool tls = u.rfind("etcds://", 0) == 0;
        if (!tls) form("etcd://", "etcd://HOST:PORT[,HOST:PORT...] (etcds:// for TLS)");
        if (auto a = etcd::parse_url(parts.store); !a) throw malformed(a.error());
        etcd::options eo;
        if (timed) eo.operation_timeout = eo.connect_timeout = o.timeout;
        eo.ca_file = o.ca_file;
        eo.cert_file = o.cert_file;
        eo.key_file = o.key_file;
        detail::apply_url_options(parts.query, [&](std::string_view n, std::string_view v) -> std::optional<std::string> {
            if (n == "prefix") eo.prefix = std::string(v);
            else if (tls && (n == "ca_file" || n == "cert_file" || n == "key_file")) {
                auto& f = n == "ca_file" ? eo.ca_file : n == "cert_file" ? eo.cert_file : eo.key_file;
                if (!f.empty()) return std::string(n) + " given twice (in the URL and the options)";
                f = std::string(v);
            } else if (n != "pool") return detail::unknown_url_option(n, tls ? "prefix, pool, ca_file, cert_file, key_file" : "prefix, pool");
            else if (auto k = detail::url_number(v, 1, 1024)) eo.pool_size = *k;
            else return std::string("pool is 1 to 1024 connections");
            return std::nullopt;
        }, malformed);
        if (!tls && (!eo.ca_file.empty() || !eo.cert_file.empty() || !eo.key_file.empty()))
            throw malformed("TLS files are for an etcds:// URL");
        if (eo.cert_file.empty() != eo.key_file.empty())
            throw malformed("a client certificate and its key go together (cert_file, key_file)");
        if (o.user.empty() != o.password.empty()) throw malformed("etcd's authentication needs both a user and a password");
        eo.user = o.user;
        eo.password = o.password;
        return etcd::store(parts.store, {}, eo);
    }
#endif
#if defined(COORD_HAS_ZOOKEEPER)
    else if constexpr (std::is_same_v<Store, zookeeper::store>) {
        form("zookeeper://", "zookeeper://HOST:PORT[,HOST:PORT...][/ROOT]");
        if (auto a = zookeeper::parse_url(parts.store); !a) throw malformed(a.error());
        no_tls_files("ZooKeeper (Debian's C client has no TLS)");
        zookeeper::options zo;
        if (timed) zo.operation_timeout = zo.connect_timeout = o.timeout;
        detail::apply_url_options(parts.query, [&](std::string_view n, std::string_view v) -> std::optional<std::string> {
            if (n == "digest_file") {
                if (auto why = detail::read_secret_file(std::string(v), zo.digest)) return "digest_file " + *why;
                if (zo.digest.find(':') == std::string::npos || zo.digest.front() == ':')
                    return "digest_file " + std::string(v) + " does not hold USER:PASSWORD";
                return std::nullopt;
            }
            if (n != "session_timeout") return detail::unknown_url_option(n, "session_timeout, digest_file");
            if (auto ms = detail::url_number(v, 1, 86'400'000)) zo.session_timeout = std::chrono::milliseconds(*ms);
            else return std::string("session_timeout is 1 to 86400000 milliseconds");
            return std::nullopt;
        }, malformed);
        if (!o.user.empty() || !o.password.empty()) {
            if (o.user.empty() || o.password.empty()) throw malformed("ZooKeeper's digest needs both a user and a password");
            if (!zo.digest.empty()) throw malformed("credentials given twice (digest_file and a user and password)");
            zo.digest = o.user + ":" + o.password;
        }
        return zookeeper::store(parts.store, {}, zo);
    }
#endif
    else {
        static_assert(detail::unknown_store<Store>, "open_store: Store is not a store open.hpp knows (or its engine's target is not linked)");
    }
}

/// Opens the store `url` names and returns f(store). Throws bad_store_url
/// for a URL that names no store or is malformed (nothing was opened).
template <class F>
decltype(auto) with_store(std::string_view url, F&& f, const open_options& o = {}) {
    const std::string u(url);
    if (u.rfind("file:", 0) == 0 && u.size() > 5) {
        auto store = open_store<file_store>(u, o);
        return std::forward<F>(f)(store);
    }
#if defined(COORD_HAS_SQLITE)
    if (u.rfind("sqlite:", 0) == 0 && u.size() > 7) {
        auto store = open_store<sqlite::store>(u, o);
        return std::forward<F>(f)(store);
    }
#endif
#if defined(COORD_HAS_POSTGRES)
    if (u.rfind("postgres:", 0) == 0) {
        auto store = open_store<postgres::store>(u, o);
        return std::forward<F>(f)(store);
    }
#endif
#if defined(COORD_HAS_REDIS)
    if (u.rfind("redis://", 0) == 0 || u.rfind("rediss://", 0) == 0 || u.rfind("redis+sentinel://", 0) == 0 ||
        u.rfind("rediss+sentinel://", 0) == 0) {
        auto store = open_store<redis::store>(u, o);
        return std::forward<F>(f)(store);
    }
#endif
#if defined(COORD_HAS_ETCD)
    if (u.rfind("etcd://", 0) == 0 || u.rfind("etcds://", 0) == 0) {
        auto store = open_store<etcd::store>(u, o);
        return std::forward<F>(f)(store);
    }
#endif
#if defined(COORD_HAS_ZOOKEEPER)
    if (u.rfind("zookeeper://", 0) == 0) {
        auto store = open_store<zookeeper::store>(u, o);
        return std::forward<F>(f)(store);
    }
#endif
    throw bad_store_url("a store URL is one of " + store_url_forms() + ", got '" + detail::url_for_message(u) + "'");
}

}  // namespace coord
