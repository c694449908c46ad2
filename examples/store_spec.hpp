// SPDX-License-Identifier: Apache-2.0
// examples/store_spec.hpp: opening a store from the text users give on a
// command line (file:PATH, sqlite:PATH, postgres:CONNINFO, redis://...,
// etcd://..., zookeeper://...). Shared by coordctl, coord_web and the fault
// suite's clients, so every program accepts the same --store values. Each
// engine is compiled in when its COORD_HAS_<ENGINE> macro is defined (the
// examples' CMakeLists defines it when the engine's target exists).
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>

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
#include "coord/storage/file.hpp"
#include "coord/storage/memory.hpp"

namespace coord_examples {

/// A --store value that names no store this program was built with, or
/// that is malformed. The message says which.
struct store_spec_error : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

/// A stored or given string as one unambiguous token of output: a backslash
/// and every byte below 0x20, 0x7f and above are escaped (\\, \n, \t, \r,
/// \xHH), so a value like "x\ntoken=999" cannot forge an output line.
inline std::string printable(std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(s.size());
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else if (c < 0x20 || c >= 0x7f) {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else out += ch;
    }
    return out;
}

/// The --store schemes this program was built with.
inline std::string store_schemes() {
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

/// Opens the store `spec` names and returns f(store). `timeout` (0: each
/// store's default) bounds every call: the file store's lock wait, SQLite's
/// busy timeout, the servers' operation and connect timeouts. Throws
/// store_spec_error for a spec that names no store; the engines' own
/// constructors throw what they throw (a store that cannot be opened).
template <class F>
decltype(auto) with_store(const std::string& spec, std::chrono::milliseconds timeout, F&& f) {
    const bool timed = timeout.count() > 0;
    if (spec.rfind("file:", 0) == 0 && spec.size() > 5) {
        coord::file_store_options fo;
        if (timed) fo.lock_timeout = timeout;
        coord::file_store store(spec.substr(5), {}, fo);
        return f(store);
    }
#if defined(COORD_HAS_SQLITE)
    if (spec.rfind("sqlite:", 0) == 0 && spec.size() > 7) {
        coord::sqlite::options so;
        if (timed) so.busy_timeout = timeout;
        coord::sqlite::store store(spec.substr(7), {}, so);
        return f(store);
    }
#endif
#if defined(COORD_HAS_POSTGRES)
    if (spec.rfind("postgres:", 0) == 0) {
        const auto conninfo = spec.substr(9);
        if (auto why = coord::postgres::conninfo_error(conninfo))
            throw store_spec_error("--store postgres:CONNINFO: " + printable(*why));
        coord::postgres::options po;
        if (timed) po.operation_timeout = po.connect_timeout = timeout;
        coord::postgres::store store(conninfo, {}, po);
        return f(store);
    }
#endif
#if defined(COORD_HAS_REDIS)
    if (spec.rfind("redis://", 0) == 0) {
        if (auto a = coord::redis::parse_url(spec); !a) throw store_spec_error("--store " + printable(spec) + ": " + a.error());
        coord::redis::options ro;
        if (timed) ro.operation_timeout = ro.connect_timeout = timeout;
        coord::redis::store store(spec, {}, ro);
        return f(store);
    }
#endif
#if defined(COORD_HAS_ETCD)
    if (spec.rfind("etcd://", 0) == 0) {
        if (auto e = coord::etcd::parse_url(spec); !e) throw store_spec_error("--store " + printable(spec) + ": " + e.error());
        coord::etcd::options eo;
        if (timed) eo.operation_timeout = eo.connect_timeout = timeout;
        coord::etcd::store store(spec, {}, eo);
        return f(store);
    }
#endif
#if defined(COORD_HAS_ZOOKEEPER)
    if (spec.rfind("zookeeper://", 0) == 0) {
        if (auto a = coord::zookeeper::parse_url(spec); !a)
            throw store_spec_error("--store " + printable(spec) + ": " + a.error());
        coord::zookeeper::options zo;
        if (timed) zo.operation_timeout = zo.connect_timeout = timeout;
        coord::zookeeper::store store(spec, {}, zo);
        return f(store);
    }
#endif
    throw store_spec_error("--store must be one of " + store_schemes() + ", got '" + printable(spec) + "'");
}

}  // namespace coord_examples
