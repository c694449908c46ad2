// SPDX-License-Identifier: Apache-2.0
// tests/postgres/pg_support.hpp: the PostgreSQL the tests use (started by the
// ctest fixture, tests/postgres/postgres.sh, its conninfo in COORD_PG_CONNINFO) and the
// factory the conformance suites run on. Each factory works in a fresh schema,
// so tests never see each other's rows. A missing server fails the test.
#pragma once

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "coord/postgres/store.hpp"
#include "support/test_support.hpp"

namespace coord::test {

/// The conninfo of the test server; throws when the fixture did not set it.
inline std::string pg_conninfo() {
    const char* c = std::getenv("COORD_PG_CONNINFO");
    if (!c || !*c) throw std::runtime_error("COORD_PG_CONNINFO is not set: run through ctest (fixture Postgres.start)");
    return c;
}

/// Runs one SQL command on a fresh connection; throws with the server's message.
inline void pg_command(const std::string& conninfo, const std::string& sql) {
    PGconn* c = PQconnectdb(conninfo.c_str());
    if (PQstatus(c) != CONNECTION_OK) {
        std::string m = PQerrorMessage(c);
        PQfinish(c);
        throw std::runtime_error("cannot reach the test PostgreSQL: " + m);
    }
    PGresult* r = PQexec(c, sql.c_str());
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    std::string m = PQerrorMessage(c);
    PQclear(r);
    PQfinish(c);
    if (!ok) throw std::runtime_error("test PostgreSQL refused '" + sql + "': " + m);
}

/// The first column of the first row of a query, as text.
inline std::string pg_query(const std::string& conninfo, const std::string& sql) {
    PGconn* c = PQconnectdb(conninfo.c_str());
    PGresult* r = PQexec(c, sql.c_str());
    const bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0;
    std::string out = ok ? PQgetvalue(r, 0, 0) : "error: " + std::string(PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    return out;
}

/// A conninfo whose search_path is a new, empty schema (plus `settings`,
/// more "-c name=value" server settings for the session): no coord store
/// there yet (see pg_fresh_schema).
inline std::string pg_new_schema(const std::string& settings = "") {
    static std::atomic<int> counter{0};
    const std::string schema = "t" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    const std::string base = pg_conninfo();
    pg_command(base, "SET client_min_messages = warning; DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema);
    return base + " options='-c search_path=" + schema + (settings.empty() ? "" : " " + settings) + "'";
}

/// The schema a conninfo of pg_new_schema works in.
inline std::string pg_schema_of(const std::string& conninfo) {
    const auto at = conninfo.find("search_path=") + 12;
    return conninfo.substr(at, conninfo.find_first_of(" '", at) - at);
}

/// pg_new_schema with a coord store initialized in it (store init, zero
/// floors), as a deployment makes one before its first use.
inline std::string pg_fresh_schema(const std::string& settings = "") {
    std::string conninfo = pg_new_schema(settings);
    postgres::store s{conninfo};
    if (auto r = s.initialize({}); !r) throw std::runtime_error("store init: " + r.error().message());
    return conninfo;
}

struct postgres_factory {
    using store_type = postgres::basic_store<manual_clock>;
    static constexpr const char* name = "postgres";
    std::string conninfo = pg_fresh_schema();
    std::unique_ptr<store_type> make(manual_clock clock) { return std::make_unique<store_type>(conninfo, clock); }
    /// A second store on the same tables over its own connection, as another process would.
    std::unique_ptr<store_type> second;
    store_type* reopen(store_type*, manual_clock clock) {
        second = std::make_unique<store_type>(conninfo, clock);
        return second.get();
    }
};

}  // namespace coord::test
