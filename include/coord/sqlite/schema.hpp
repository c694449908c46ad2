// SPDX-License-Identifier: Apache-2.0
// coord/sqlite/schema.hpp: the SQLite schema as numbered migrations.
//
// The database records the version it is at (table coord_schema, one row;
// PRAGMA user_version is left to the application). A store applies the
// migrations above that version in one write transaction (BEGIN IMMEDIATE:
// processes that open together wait on one another) and refuses a database
// whose version is newer than the last one it knows (errc::schema_too_new).
// Never edit a migration that has shipped: add the next one.
//
// Fence tokens and other unsigned 64-bit values are stored in INTEGER
// columns with their bits kept: a value above 2^63-1 reads as negative in
// SQL (coord reads it back exactly).
#pragma once

#include <span>
#include <string>

#include "coord/sqlite/connection.hpp"

namespace coord::sqlite {

/// One step of the schema.
struct migration {
    int version;  ///< the schema version it brings the database to
    const char* what;  ///< what it adds, for a person
    const char* sql;  ///< the statements it runs, in one transaction
};

/// Every migration, in order; the last one's version is the schema this
/// library writes with.
inline std::span<const migration> migrations() {
    static const migration all[] = {
        {1, "fences, leases, reservations, segments, the ledger, sessions, revocations", R"SQL(
CREATE TABLE coord_fence (key TEXT PRIMARY KEY, highest INTEGER NOT NULL, written INTEGER NOT NULL,
  has_seq INTEGER NOT NULL, seq INTEGER NOT NULL, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE coord_lease (name TEXT PRIMARY KEY, last_token INTEGER NOT NULL, held INTEGER NOT NULL,
  holder TEXT NOT NULL, token INTEGER NOT NULL, ttl_ns INTEGER NOT NULL, expires_ns INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE coord_reservation (key TEXT PRIMARY KEY, highest INTEGER NOT NULL, until_ms INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE coord_segment (tag TEXT PRIMARY KEY, next INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE coord_ledger (key TEXT PRIMARY KEY, scheduled_ms INTEGER NOT NULL, schedule_version INTEGER NOT NULL,
  state INTEGER NOT NULL, fence INTEGER NOT NULL, attempt INTEGER NOT NULL, holder TEXT NOT NULL,
  lease_until_ns INTEGER NOT NULL, started_ns INTEGER NOT NULL, completed_ns INTEGER NOT NULL,
  retain_until_ns INTEGER NOT NULL, payload_hash TEXT NOT NULL, result BLOB NOT NULL, fail_reason BLOB NOT NULL) WITHOUT ROWID;
CREATE INDEX coord_ledger_prune ON coord_ledger (state, retain_until_ns);
CREATE TABLE coord_session (hash TEXT PRIMARY KEY, user_name TEXT NOT NULL, data BLOB NOT NULL,
  created_ms INTEGER NOT NULL, last_seen_ms INTEGER NOT NULL, absolute_expiry_ms INTEGER NOT NULL,
  idle_timeout_ms INTEGER NOT NULL, version INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX coord_session_user ON coord_session (user_name);
CREATE TABLE coord_denied_token (jti TEXT PRIMARY KEY, until_s INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE coord_subject_nbf (sub TEXT PRIMARY KEY, not_before_s INTEGER NOT NULL) WITHOUT ROWID;
)SQL"},
        {2, "lease queues: waiters in arrival order, each place a short lease", R"SQL(
CREATE TABLE coord_lease_queue (name TEXT PRIMARY KEY, last_ticket INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE coord_lease_waiter (name TEXT NOT NULL, ticket INTEGER NOT NULL, who TEXT NOT NULL,
  until_ns INTEGER NOT NULL, PRIMARY KEY (name, ticket)) WITHOUT ROWID;
)SQL"},
        {3, "the store's identity and its count of write transactions (connection.hpp, \"Going back\")", R"SQL(
CREATE TABLE coord_store (id INTEGER PRIMARY KEY CHECK (id = 1), identity TEXT NOT NULL,
  generation INTEGER NOT NULL);
INSERT INTO coord_store VALUES (1, lower(hex(randomblob(16))), 0);
)SQL"},
        {4, "the floors a recovery states (store::initialize): where a record is missing, coord answers from them", R"SQL(
ALTER TABLE coord_store ADD COLUMN segment_floor INTEGER NOT NULL DEFAULT 0;
ALTER TABLE coord_store ADD COLUMN fence_floor INTEGER NOT NULL DEFAULT 0;
ALTER TABLE coord_store ADD COLUMN ledger_floor_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE coord_store ADD COLUMN reservation_floor_ms INTEGER NOT NULL DEFAULT 0;
)SQL"},
    };
    return all;
}

/// The schema version this library writes with.
inline int schema_version() { return migrations().back().version; }

/// Brings the database to schema_version() in one write transaction;
/// refuses a newer database. The error's detail names the migration that
/// failed and SQLite's words.
inline result<void> migrate(database& db) {
    database::transaction t(db, true);
    if (!t) return unexpected(*t.failed());
    if (int rc = db.exec_raw("CREATE TABLE IF NOT EXISTS coord_schema (id INTEGER PRIMARY KEY CHECK (id = 1), "
                             "version INTEGER NOT NULL)");
        rc != SQLITE_OK)
        return unexpected(t.error(rc));
    auto st = t.prepare("SELECT version FROM coord_schema WHERE id = 1");
    if (!st) return unexpected(st.error());
    auto row = t.next(**st);
    if (!row) return unexpected(row.error());
    const int at = *row ? static_cast<int>((*st)->i64(0)) : 0;
    (*st)->reset();
    if (at > schema_version())
        return unexpected(coord::error(make_error_code(errc::schema_too_new),
                                       db.path().string() + ": the database's coord schema is version " +
                                           std::to_string(at) + ", newer than this library's " +
                                           std::to_string(schema_version()) + ": upgrade coord"));
    if (at == schema_version()) return t.commit();
    for (const auto& m : migrations()) {
        if (m.version <= at) continue;
        if (int rc = db.exec_raw(m.sql); rc != SQLITE_OK) {
            const auto e = t.error(rc);
            return unexpected(coord::error(e.code(), "migration " + std::to_string(m.version) + " (" + m.what +
                                                         "): " + e.detail()));
        }
    }
    auto up = t.prepare("INSERT INTO coord_schema VALUES (1, ?1) ON CONFLICT (id) DO UPDATE SET version = excluded.version");
    if (!up) return unexpected(up.error());
    (*up)->bind(1, static_cast<std::int64_t>(schema_version()));
    if (auto r = t.run(**up); !r) return unexpected(r.error());
    return t.commit();
}

}  // namespace coord::sqlite
