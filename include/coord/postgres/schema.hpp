// SPDX-License-Identifier: Apache-2.0
// coord/postgres/schema.hpp: the PostgreSQL schema as numbered migrations.
//
// The database records the version it is at (table coord_schema, one row).
// A store applies the migrations above that version in order, each in its
// own transaction, under an advisory lock (so processes may start
// together), and refuses a database whose version is newer than the last
// one it knows (errc::schema_too_new): an older library must not write with
// rules it does not know. A database made before versions were recorded
// (tables coord_*, no coord_schema) is at version 1. Never edit a migration
// that has shipped: add the next one.
//
// Round trips when the store opens: 4 (lock, table, version, unlock) when the
// database is current; 3 more per migration applied (BEGIN, the migration and
// its version, COMMIT).
#pragma once

#include <span>
#include <string>

#include "coord/initial_floors.hpp"
#include "coord/postgres/connection.hpp"

namespace coord::postgres {

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
        {1, "wave 1: fences, leases, reservations, segments, sessions, revocations, the ledger", R"SQL(
CREATE TABLE IF NOT EXISTS coord_fence (
  key text PRIMARY KEY, highest numeric(20,0) NOT NULL DEFAULT 0, written boolean NOT NULL DEFAULT false,
  has_seq boolean NOT NULL DEFAULT false, seq numeric(20,0) NOT NULL DEFAULT 0, value bytea NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS coord_lease (
  name text PRIMARY KEY, last_token bigint NOT NULL DEFAULT 0, held boolean NOT NULL DEFAULT false,
  holder text NOT NULL DEFAULT '', token bigint NOT NULL DEFAULT 0, ttl_ns bigint NOT NULL DEFAULT 0,
  expires_ns bigint NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS coord_reservation (
  key text PRIMARY KEY, highest numeric(20,0) NOT NULL DEFAULT 0, until_ms bigint NOT NULL DEFAULT 0);
-- next may reach 2^63 (an exclusive end), one past bigint: numeric.
CREATE TABLE IF NOT EXISTS coord_segment (tag text PRIMARY KEY, next numeric(20,0) NOT NULL);

-- The server's clock in nanoseconds since the Unix epoch (microsecond resolution).
CREATE OR REPLACE FUNCTION coord_now_ns() RETURNS bigint LANGUAGE sql VOLATILE AS
$$ SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint * 1000 $$;

-- status: 0 granted, 1 held (o_* describe the holder).
CREATE OR REPLACE FUNCTION coord_lease_acquire(p_name text, p_owner text, p_ttl bigint, p_now bigint)
RETURNS TABLE(o_status int, o_holder text, o_token bigint, o_ttl bigint, o_expires bigint) LANGUAGE plpgsql AS $$
DECLARE r coord_lease; now_ns bigint := coalesce(p_now, coord_now_ns());
BEGIN
  INSERT INTO coord_lease(name) VALUES (p_name) ON CONFLICT DO NOTHING;
  SELECT * INTO r FROM coord_lease WHERE name = p_name FOR UPDATE;
  IF r.held AND now_ns < r.expires_ns THEN
    RETURN QUERY SELECT 1, r.holder, r.token, r.ttl_ns, r.expires_ns; RETURN;
  END IF;
  UPDATE coord_lease SET last_token = r.last_token + 1, held = true, holder = p_owner, token = r.last_token + 1,
    ttl_ns = p_ttl, expires_ns = now_ns + p_ttl WHERE name = p_name;
  RETURN QUERY SELECT 0, p_owner, r.last_token + 1, p_ttl, now_ns + p_ttl;
END $$;

-- status: 0 renewed (o_* the new term), 1 not the holder, 2 expired (o_* the live holder, if any).
CREATE OR REPLACE FUNCTION coord_lease_renew(p_name text, p_owner text, p_token bigint, p_ttl bigint, p_now bigint)
RETURNS TABLE(o_status int, o_holder text, o_token bigint, o_ttl bigint, o_expires bigint) LANGUAGE plpgsql AS $$
DECLARE r coord_lease; now_ns bigint := coalesce(p_now, coord_now_ns()); live boolean; ttl bigint;
BEGIN
  SELECT * INTO r FROM coord_lease WHERE name = p_name FOR UPDATE;
  IF NOT FOUND THEN RETURN QUERY SELECT 1, ''::text, 0::bigint, 0::bigint, 0::bigint; RETURN; END IF;
  live := r.held AND now_ns < r.expires_ns;
  IF NOT (r.held AND r.holder = p_owner AND (p_token = 0 OR p_token = r.token)) THEN
    IF live THEN RETURN QUERY SELECT 1, r.holder, r.token, r.ttl_ns, r.expires_ns;
    ELSE RETURN QUERY SELECT 1, ''::text, 0::bigint, 0::bigint, 0::bigint; END IF;
    RETURN;
  END IF;
  IF NOT live THEN RETURN QUERY SELECT 2, ''::text, 0::bigint, 0::bigint, 0::bigint; RETURN; END IF;
  ttl := CASE WHEN p_ttl > 0 THEN p_ttl ELSE r.ttl_ns END;
  UPDATE coord_lease SET ttl_ns = ttl, expires_ns = now_ns + ttl WHERE name = p_name;
  RETURN QUERY SELECT 0, r.holder, r.token, ttl, now_ns + ttl;
END $$;

-- status: 0 released, 1 not the holder (o_* the live holder, if any).
CREATE OR REPLACE FUNCTION coord_lease_release(p_name text, p_owner text, p_token bigint, p_now bigint)
RETURNS TABLE(o_status int, o_holder text, o_token bigint, o_ttl bigint, o_expires bigint) LANGUAGE plpgsql AS $$
DECLARE r coord_lease; now_ns bigint := coalesce(p_now, coord_now_ns());
BEGIN
  SELECT * INTO r FROM coord_lease WHERE name = p_name FOR UPDATE;
  IF NOT FOUND OR NOT (r.held AND r.holder = p_owner AND (p_token = 0 OR p_token = r.token)) THEN
    IF FOUND AND r.held AND now_ns < r.expires_ns THEN RETURN QUERY SELECT 1, r.holder, r.token, r.ttl_ns, r.expires_ns;
    ELSE RETURN QUERY SELECT 1, ''::text, 0::bigint, 0::bigint, 0::bigint; END IF;
    RETURN;
  END IF;
  UPDATE coord_lease SET held = false, holder = '', expires_ns = 0 WHERE name = p_name;
  RETURN QUERY SELECT 0, ''::text, 0::bigint, 0::bigint, 0::bigint;
END $$;

-- The live holder, or no row.
CREATE OR REPLACE FUNCTION coord_lease_read(p_name text, p_now bigint)
RETURNS TABLE(o_holder text, o_token bigint, o_ttl bigint, o_expires bigint) LANGUAGE sql AS $$
  SELECT holder, token, ttl_ns, expires_ns FROM coord_lease
  WHERE name = p_name AND held AND coalesce(p_now, coord_now_ns()) < expires_ns $$;

-- status: 0 reserved (o_value the reservation, never lowered), 1 stale fence (o_value the highest token).
CREATE OR REPLACE FUNCTION coord_time_reserve(p_key text, p_until bigint, p_token numeric)
RETURNS TABLE(o_status int, o_value numeric) LANGUAGE plpgsql AS $$
DECLARE r coord_reservation;
BEGIN
  INSERT INTO coord_reservation(key) VALUES (p_key) ON CONFLICT DO NOTHING;
  SELECT * INTO r FROM coord_reservation WHERE key = p_key FOR UPDATE;
  IF p_token < r.highest THEN RETURN QUERY SELECT 1, r.highest; RETURN; END IF;
  UPDATE coord_reservation SET highest = p_token, until_ms = greatest(r.until_ms, p_until) WHERE key = p_key;
  RETURN QUERY SELECT 0, greatest(r.until_ms, p_until)::numeric;
END $$;

-- Sessions: only the SHA-256 of an ID is kept. status: 0 ok, 1 not found, 2 expired, 3 conflict.
CREATE TABLE IF NOT EXISTS coord_session (
  hash text PRIMARY KEY, user_name text NOT NULL, data bytea NOT NULL, created_ms bigint NOT NULL,
  last_seen_ms bigint NOT NULL, absolute_expiry_ms bigint NOT NULL, idle_timeout_ms bigint NOT NULL,
  version bigint NOT NULL);
CREATE INDEX IF NOT EXISTS coord_session_user ON coord_session(user_name);

-- Given the locked row of a session (p_found: there was one): 0 live, 1 not
-- found, 2 expired (and the row is deleted).
CREATE OR REPLACE FUNCTION coord_session_state(p_found boolean, r coord_session, p_now bigint) RETURNS int
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT p_found THEN RETURN 1; END IF;
  IF p_now >= r.absolute_expiry_ms OR p_now >= r.last_seen_ms + r.idle_timeout_ms THEN
    DELETE FROM coord_session WHERE hash = r.hash; RETURN 2;
  END IF;
  RETURN 0;
END $$;

CREATE OR REPLACE FUNCTION coord_session_load(p_hash text, p_now bigint)
RETURNS TABLE(o_status int, o_user text, o_data bytea, o_created bigint, o_last_seen bigint, o_expiry bigint,
  o_idle bigint, o_version bigint) LANGUAGE plpgsql AS $$
DECLARE st int; r coord_session;
BEGIN
  SELECT * INTO r FROM coord_session WHERE hash = p_hash FOR UPDATE;
  st := coord_session_state(FOUND, r, p_now);
  IF st <> 0 THEN RETURN QUERY SELECT st, ''::text, ''::bytea, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint; RETURN; END IF;
  UPDATE coord_session SET last_seen_ms = greatest(r.last_seen_ms, p_now) WHERE hash = p_hash;
  RETURN QUERY SELECT 0, r.user_name, r.data, r.created_ms, greatest(r.last_seen_ms, p_now), r.absolute_expiry_ms,
    r.idle_timeout_ms, r.version;
END $$;

CREATE OR REPLACE FUNCTION coord_session_save(p_hash text, p_version bigint, p_data bytea, p_now bigint)
RETURNS TABLE(o_status int, o_version bigint) LANGUAGE plpgsql AS $$
DECLARE st int; r coord_session;
BEGIN
  SELECT * INTO r FROM coord_session WHERE hash = p_hash FOR UPDATE;
  st := coord_session_state(FOUND, r, p_now);
  IF st <> 0 THEN RETURN QUERY SELECT st, 0::bigint; RETURN; END IF;
  IF r.version <> p_version THEN RETURN QUERY SELECT 3, r.version; RETURN; END IF;
  UPDATE coord_session SET data = p_data, last_seen_ms = greatest(r.last_seen_ms, p_now), version = r.version + 1
    WHERE hash = p_hash;
  RETURN QUERY SELECT 0, r.version + 1;
END $$;

CREATE OR REPLACE FUNCTION coord_session_rotate(p_old text, p_new text, p_version bigint, p_now bigint)
RETURNS TABLE(o_status int, o_version bigint) LANGUAGE plpgsql AS $$
DECLARE st int; r coord_session;
BEGIN
  SELECT * INTO r FROM coord_session WHERE hash = p_old FOR UPDATE;
  st := coord_session_state(FOUND, r, p_now);
  IF st <> 0 THEN RETURN QUERY SELECT st, 0::bigint; RETURN; END IF;
  IF r.version <> p_version THEN RETURN QUERY SELECT 3, r.version; RETURN; END IF;
  INSERT INTO coord_session VALUES (p_new, r.user_name, r.data, r.created_ms, greatest(r.last_seen_ms, p_now),
    r.absolute_expiry_ms, r.idle_timeout_ms, r.version + 1) ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN RETURN QUERY SELECT 3, r.version; RETURN; END IF;
  DELETE FROM coord_session WHERE hash = p_old;
  RETURN QUERY SELECT 0, r.version + 1;
END $$;

-- Token revocation: a denied jti until a time, a subject's not-before (Unix seconds).
CREATE TABLE IF NOT EXISTS coord_denied_token (jti text PRIMARY KEY, until_s bigint NOT NULL);
CREATE TABLE IF NOT EXISTS coord_subject_nbf (sub text PRIMARY KEY, not_before_s bigint NOT NULL);

-- The job-slot ledger: state 0 idle, 1 running, 2 done.
CREATE TABLE IF NOT EXISTS coord_ledger (
  key text PRIMARY KEY, scheduled_ms bigint NOT NULL DEFAULT 0, schedule_version bigint NOT NULL DEFAULT 0,
  state smallint NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0, attempt bigint NOT NULL DEFAULT 0,
  holder text NOT NULL DEFAULT '', lease_until_ns bigint NOT NULL DEFAULT 0, started_ns bigint NOT NULL DEFAULT 0,
  completed_ns bigint NOT NULL DEFAULT 0, retain_until_ns bigint NOT NULL DEFAULT 0,
  payload_hash text NOT NULL DEFAULT '', result bytea NOT NULL DEFAULT '', fail_reason text NOT NULL DEFAULT '');

-- o_kind: 0 granted, 1 replayed, 2 in progress, 3 payload mismatch (claim_outcome's order).
CREATE OR REPLACE FUNCTION coord_ledger_claim(p_key text, p_scheduled_ms bigint, p_version bigint, p_worker text,
  p_hash text, p_now bigint, p_lease_until bigint)
RETURNS TABLE(o_kind int, o_fence bigint, o_attempt bigint, o_holder text, o_lease_until bigint, o_result bytea)
LANGUAGE plpgsql AS $$
DECLARE r coord_ledger;
BEGIN
  INSERT INTO coord_ledger(key) VALUES (p_key) ON CONFLICT DO NOTHING;
  SELECT * INTO r FROM coord_ledger WHERE key = p_key FOR UPDATE;
  IF (r.attempt > 0 OR r.state <> 0) AND r.payload_hash <> p_hash THEN
    RETURN QUERY SELECT 3, 0::bigint, 0::bigint, ''::text, 0::bigint, ''::bytea; RETURN;
  END IF;
  IF r.state = 2 THEN RETURN QUERY SELECT 1, r.fence, r.attempt, ''::text, 0::bigint, r.result; RETURN; END IF;
  IF r.state = 1 AND p_now < r.lease_until_ns THEN
    RETURN QUERY SELECT 2, r.fence, r.attempt, r.holder, r.lease_until_ns, ''::bytea; RETURN;
  END IF;
  UPDATE coord_ledger SET scheduled_ms = p_scheduled_ms, schedule_version = p_version, payload_hash = p_hash,
    state = 1, fence = r.fence + 1, attempt = r.attempt + 1, holder = p_worker, lease_until_ns = p_lease_until,
    started_ns = p_now WHERE key = p_key;
  RETURN QUERY SELECT 0, r.fence + 1, r.attempt + 1, p_worker, p_lease_until, ''::bytea;
END $$;
)SQL"},
        {2, "every expiry on the server's clock: session functions and the ledger claim read the server's now", R"SQL(-- The server's clock in Unix milliseconds (floor), or p_now when a test sends one.
CREATE OR REPLACE FUNCTION coord_now_ms(p_now bigint) RETURNS bigint LANGUAGE sql VOLATILE AS
$$ SELECT coalesce(p_now, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) $$;

-- A new session stamped with the server's clock; 0 created, 3 conflict.
CREATE OR REPLACE FUNCTION coord_session_create(p_hash text, p_user text, p_data bytea, p_idle bigint,
  p_absolute bigint, p_now bigint)
RETURNS TABLE(o_status int, o_created bigint, o_expiry bigint) LANGUAGE plpgsql AS $$
DECLARE now_ms bigint := coord_now_ms(p_now);
BEGIN
  INSERT INTO coord_session VALUES (p_hash, p_user, p_data, now_ms, now_ms, now_ms + p_absolute, p_idle, 1)
    ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN RETURN QUERY SELECT 3, 0::bigint, 0::bigint; RETURN; END IF;
  RETURN QUERY SELECT 0, now_ms, now_ms + p_absolute;
END $$;

-- Given the locked row of a session (p_found: there was one): 0 live, 1 not
-- found, 2 expired (and the row is deleted).
CREATE OR REPLACE FUNCTION coord_session_state(p_found boolean, r coord_session, p_now bigint) RETURNS int
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT p_found THEN RETURN 1; END IF;
  IF p_now >= r.absolute_expiry_ms OR p_now >= r.last_seen_ms + r.idle_timeout_ms THEN
    DELETE FROM coord_session WHERE hash = r.hash; RETURN 2;
  END IF;
  RETURN 0;
END $$;

CREATE OR REPLACE FUNCTION coord_session_load(p_hash text, p_now bigint)
RETURNS TABLE(o_status int, o_user text, o_data bytea, o_created bigint, o_last_seen bigint, o_expiry bigint,
  o_idle bigint, o_version bigint) LANGUAGE plpgsql AS $$
DECLARE st int; r coord_session; now_ms bigint := coord_now_ms(p_now);
BEGIN
  SELECT * INTO r FROM coord_session WHERE hash = p_hash FOR UPDATE;
  st := coord_session_state(FOUND, r, now_ms);
  IF st <> 0 THEN RETURN QUERY SELECT st, ''::text, ''::bytea, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint; RETURN; END IF;
  UPDATE coord_session SET last_seen_ms = greatest(r.last_seen_ms, now_ms) WHERE hash = p_hash;
  RETURN QUERY SELECT 0, r.user_name, r.data, r.created_ms, greatest(r.last_seen_ms, now_ms), r.absolute_expiry_ms,
    r.idle_timeout_ms, r.version;
END $$;

CREATE OR REPLACE FUNCTION coord_session_save(p_hash text, p_version bigint, p_data bytea, p_now bigint)
RETURNS TABLE(o_status int, o_version bigint) LANGUAGE plpgsql AS $$
DECLARE st int; r coord_session; now_ms bigint := coord_now_ms(p_now);
BEGIN
  SELECT * INTO r FROM coord_session WHERE hash = p_hash FOR UPDATE;
  st := coord_session_state(FOUND, r, now_ms);
  IF st <> 0 THEN RETURN QUERY SELECT st, 0::bigint; RETURN; END IF;
  IF r.version <> p_version THEN RETURN QUERY SELECT 3, r.version; RETURN; END IF;
  UPDATE coord_session SET data = p_data, last_seen_ms = greatest(r.last_seen_ms, now_ms), version = r.version + 1
    WHERE hash = p_hash;
  RETURN QUERY SELECT 0, r.version + 1;
END $$;

CREATE OR REPLACE FUNCTION coord_session_rotate(p_old text, p_new text, p_version bigint, p_now bigint)
RETURNS TABLE(o_status int, o_version bigint) LANGUAGE plpgsql AS $$
DECLARE st int; r coord_session; now_ms bigint := coord_now_ms(p_now);
BEGIN
  SELECT * INTO r FROM coord_session WHERE hash = p_old FOR UPDATE;
  st := coord_session_state(FOUND, r, now_ms);
  IF st <> 0 THEN RETURN QUERY SELECT st, 0::bigint; RETURN; END IF;
  IF r.version <> p_version THEN RETURN QUERY SELECT 3, r.version; RETURN; END IF;
  INSERT INTO coord_session VALUES (p_new, r.user_name, r.data, r.created_ms, greatest(r.last_seen_ms, now_ms),
    r.absolute_expiry_ms, r.idle_timeout_ms, r.version + 1) ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN RETURN QUERY SELECT 3, r.version; RETURN; END IF;
  DELETE FROM coord_session WHERE hash = p_old;
  RETURN QUERY SELECT 0, r.version + 1;
END $$;

-- The server's clock in Unix nanoseconds, or p_now when a test sends one.
CREATE OR REPLACE FUNCTION coord_now_ns(p_now bigint) RETURNS bigint LANGUAGE sql VOLATILE AS
$$ SELECT coalesce(p_now, coord_now_ns()) $$;

-- o_kind: 0 granted, 1 replayed, 2 in progress, 3 payload mismatch, 4
-- expired (claim_outcome's order). Every time is the server's: the lease
-- ends p_ttl after its now; a slot scheduled more than p_window_ms before
-- its now is expired (and no row is made for it).
DROP FUNCTION IF EXISTS coord_ledger_claim(text, bigint, bigint, text, text, bigint, bigint);
CREATE OR REPLACE FUNCTION coord_ledger_claim(p_key text, p_scheduled_ms bigint, p_version bigint, p_worker text,
  p_hash text, p_ttl bigint, p_window_ms bigint, p_now bigint)
RETURNS TABLE(o_kind int, o_fence bigint, o_attempt bigint, o_holder text, o_lease_until bigint, o_result bytea)
LANGUAGE plpgsql AS $$
DECLARE r coord_ledger; now_ns bigint := coord_now_ns(p_now);
BEGIN
  IF p_scheduled_ms::numeric + p_window_ms < floor(now_ns::numeric / 1000000) THEN
    RETURN QUERY SELECT 4, 0::bigint, 0::bigint, ''::text, 0::bigint, ''::bytea; RETURN;
  END IF;
  INSERT INTO coord_ledger(key) VALUES (p_key) ON CONFLICT DO NOTHING;
  SELECT * INTO r FROM coord_ledger WHERE key = p_key FOR UPDATE;
  IF (r.attempt > 0 OR r.state <> 0) AND r.payload_hash <> p_hash THEN
    RETURN QUERY SELECT 3, 0::bigint, 0::bigint, ''::text, 0::bigint, ''::bytea; RETURN;
  END IF;
  IF r.state = 2 THEN RETURN QUERY SELECT 1, r.fence, r.attempt, ''::text, 0::bigint, r.result; RETURN; END IF;
  IF r.state = 1 AND now_ns < r.lease_until_ns THEN
    RETURN QUERY SELECT 2, r.fence, r.attempt, r.holder, r.lease_until_ns, ''::bytea; RETURN;
  END IF;
  UPDATE coord_ledger SET scheduled_ms = p_scheduled_ms, schedule_version = p_version, payload_hash = p_hash,
    state = 1, fence = r.fence + 1, attempt = r.attempt + 1, holder = p_worker, lease_until_ns = now_ns + p_ttl,
    started_ns = now_ns WHERE key = p_key;
  RETURN QUERY SELECT 0, r.fence + 1, r.attempt + 1, p_worker, now_ns + p_ttl, ''::bytea;
END $$;
)SQL"},
        {3, "lease queues: waiters in arrival order, each place a short lease, a release notifying the first in line", R"SQL(
CREATE TABLE IF NOT EXISTS coord_lease_queue (name text PRIMARY KEY, last_ticket bigint NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS coord_lease_waiter (name text NOT NULL, ticket bigint NOT NULL, who text NOT NULL,
  until_ns bigint NOT NULL, PRIMARY KEY (name, ticket));

-- One notification channel per place, so that a NOTIFY reaches only that waiter.
CREATE OR REPLACE FUNCTION coord_lease_channel(p_name text, p_ticket bigint) RETURNS text LANGUAGE sql IMMUTABLE AS
$$ SELECT 'coord_lw_' || left(encode(sha256(convert_to(p_name, 'UTF8')), 'hex'), 32) || '_' || p_ticket::text $$;

-- Wakes the first live waiter of a name (delivered when the transaction commits).
CREATE OR REPLACE FUNCTION coord_lease_wake(p_name text, p_now bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t bigint;
BEGIN
  SELECT ticket INTO t FROM coord_lease_waiter WHERE name = p_name AND until_ns > coord_now_ns(p_now)
    ORDER BY ticket LIMIT 1;
  IF FOUND THEN PERFORM pg_notify(coord_lease_channel(p_name, t), ''); END IF;
END $$;

-- A new place at the back of the line; the queue row's lock orders the tickets.
CREATE OR REPLACE FUNCTION coord_lease_enqueue(p_name text, p_who text, p_place bigint, p_now bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE now_ns bigint := coord_now_ns(p_now); t bigint;
BEGIN
  INSERT INTO coord_lease_queue(name) VALUES (p_name) ON CONFLICT DO NOTHING;
  UPDATE coord_lease_queue SET last_ticket = last_ticket + 1 WHERE name = p_name RETURNING last_ticket INTO t;
  DELETE FROM coord_lease_waiter WHERE name = p_name AND until_ns <= now_ns;
  INSERT INTO coord_lease_waiter VALUES (p_name, t, p_who, now_ns + p_place);
  RETURN t;
END $$;

-- The queued acquire (lease_queue_rule::acquire): status 0 granted; 1 held
-- (o_ahead the places before this one; the place renewed once half its term
-- is gone); 3 the place lapsed or is another owner's. o_now: the server's now.
CREATE OR REPLACE FUNCTION coord_lease_acquire_queued(p_name text, p_owner text, p_ttl bigint, p_ticket bigint,
  p_place bigint, p_now bigint)
RETURNS TABLE(o_status int, o_holder text, o_token bigint, o_ttl bigint, o_expires bigint, o_ahead bigint, o_now bigint)
LANGUAGE plpgsql AS $$
DECLARE now_ns bigint := coord_now_ns(p_now); r coord_lease; w coord_lease_waiter; ahead bigint; live boolean;
BEGIN
  -- Lock order everywhere: the queue row, then the lease row.
  INSERT INTO coord_lease_queue(name) VALUES (p_name) ON CONFLICT DO NOTHING;
  PERFORM 1 FROM coord_lease_queue WHERE name = p_name FOR UPDATE;
  DELETE FROM coord_lease_waiter WHERE name = p_name AND until_ns <= now_ns;
  INSERT INTO coord_lease(name) VALUES (p_name) ON CONFLICT DO NOTHING;
  SELECT * INTO r FROM coord_lease WHERE name = p_name FOR UPDATE;
  live := r.held AND now_ns < r.expires_ns;
  SELECT * INTO w FROM coord_lease_waiter WHERE name = p_name AND ticket = p_ticket;
  IF NOT FOUND OR w.who <> p_owner THEN
    IF live THEN RETURN QUERY SELECT 3, r.holder, r.token, r.ttl_ns, r.expires_ns, 0::bigint, now_ns;
    ELSE RETURN QUERY SELECT 3, ''::text, 0::bigint, 0::bigint, 0::bigint, 0::bigint, now_ns; END IF;
    RETURN;
  END IF;
  SELECT count(*) INTO ahead FROM coord_lease_waiter WHERE name = p_name AND ticket < p_ticket;
  IF w.until_ns - now_ns < p_place / 2 THEN
    UPDATE coord_lease_waiter SET until_ns = now_ns + p_place WHERE name = p_name AND ticket = p_ticket;
  END IF;
  IF ahead > 0 OR live THEN
    IF live THEN RETURN QUERY SELECT 1, r.holder, r.token, r.ttl_ns, r.expires_ns, ahead, now_ns;
    ELSE RETURN QUERY SELECT 1, ''::text, 0::bigint, 0::bigint, 0::bigint, ahead, now_ns; END IF;
    RETURN;
  END IF;
  UPDATE coord_lease SET last_token = r.last_token + 1, held = true, holder = p_owner, token = r.last_token + 1,
    ttl_ns = p_ttl, expires_ns = now_ns + p_ttl WHERE name = p_name;
  DELETE FROM coord_lease_waiter WHERE name = p_name AND ticket = p_ticket;
  RETURN QUERY SELECT 0, p_owner, r.last_token + 1, p_ttl, now_ns + p_ttl, 0::bigint, now_ns;
END $$;

CREATE OR REPLACE FUNCTION coord_lease_dequeue(p_name text, p_ticket bigint, p_now bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM coord_lease_waiter WHERE name = p_name AND ticket = p_ticket;
  IF FOUND THEN PERFORM coord_lease_wake(p_name, p_now); END IF;
END $$;

-- True when `p_ticket` is first in line and nobody holds the lease (a waiter
-- checks this after LISTEN, so that a release just before is not missed).
CREATE OR REPLACE FUNCTION coord_lease_next_in_line(p_name text, p_ticket bigint, p_now bigint) RETURNS boolean
LANGUAGE sql AS $$
  SELECT coalesce((SELECT ticket FROM coord_lease_waiter WHERE name = p_name AND until_ns > coord_now_ns(p_now)
                   ORDER BY ticket LIMIT 1) = p_ticket, false)
     AND NOT EXISTS (SELECT 1 FROM coord_lease WHERE name = p_name AND held AND coord_now_ns(p_now) < expires_ns)
$$;

-- The release, as in migration 1, now waking the first waiter in line.
CREATE OR REPLACE FUNCTION coord_lease_release(p_name text, p_owner text, p_token bigint, p_now bigint)
RETURNS TABLE(o_status int, o_holder text, o_token bigint, o_ttl bigint, o_expires bigint) LANGUAGE plpgsql AS $$
DECLARE r coord_lease; now_ns bigint := coalesce(p_now, coord_now_ns());
BEGIN
  SELECT * INTO r FROM coord_lease WHERE name = p_name FOR UPDATE;
  IF NOT FOUND OR NOT (r.held AND r.holder = p_owner AND (p_token = 0 OR p_token = r.token)) THEN
    IF FOUND AND r.held AND now_ns < r.expires_ns THEN RETURN QUERY SELECT 1, r.holder, r.token, r.ttl_ns, r.expires_ns;
    ELSE RETURN QUERY SELECT 1, ''::text, 0::bigint, 0::bigint, 0::bigint; END IF;
    RETURN;
  END IF;
  UPDATE coord_lease SET held = false, holder = '', expires_ns = 0 WHERE name = p_name;
  PERFORM coord_lease_wake(p_name, p_now);
  RETURN QUERY SELECT 0, ''::text, 0::bigint, 0::bigint, 0::bigint;
END $$;
)SQL"},
        {4, "lease queues: a waiter's upkeep independent of the line's length (the lapsed places by index, ahead counted to 2)", R"SQL(
CREATE INDEX IF NOT EXISTS coord_lease_waiter_until ON coord_lease_waiter (name, until_ns);

-- As in migration 3, but o_ahead is 0, 1 or 2 (2: two or more before this
-- one; only those three matter to a waiter), so that a waiter's queued
-- acquire reads a bounded number of rows however long the line is, and the
-- place is renewed once a quarter of its term is gone (coord/rules/lease.hpp).
CREATE OR REPLACE FUNCTION coord_lease_acquire_queued(p_name text, p_owner text, p_ttl bigint, p_ticket bigint,
  p_place bigint, p_now bigint)
RETURNS TABLE(o_status int, o_holder text, o_token bigint, o_ttl bigint, o_expires bigint, o_ahead bigint, o_now bigint)
LANGUAGE plpgsql AS $$
DECLARE now_ns bigint := coord_now_ns(p_now); r coord_lease; w coord_lease_waiter; ahead bigint; live boolean;
BEGIN
  -- Lock order everywhere: the queue row, then the lease row.
  INSERT INTO coord_lease_queue(name) VALUES (p_name) ON CONFLICT DO NOTHING;
  PERFORM 1 FROM coord_lease_queue WHERE name = p_name FOR UPDATE;
  DELETE FROM coord_lease_waiter WHERE name = p_name AND until_ns <= now_ns;
  INSERT INTO coord_lease(name) VALUES (p_name) ON CONFLICT DO NOTHING;
  SELECT * INTO r FROM coord_lease WHERE name = p_name FOR UPDATE;
  live := r.held AND now_ns < r.expires_ns;
  SELECT * INTO w FROM coord_lease_waiter WHERE name = p_name AND ticket = p_ticket;
  IF NOT FOUND OR w.who <> p_owner THEN
    IF live THEN RETURN QUERY SELECT 3, r.holder, r.token, r.ttl_ns, r.expires_ns, 0::bigint, now_ns;
    ELSE RETURN QUERY SELECT 3, ''::text, 0::bigint, 0::bigint, 0::bigint, 0::bigint, now_ns; END IF;
    RETURN;
  END IF;
  SELECT count(*) INTO ahead FROM (SELECT 1 FROM coord_lease_waiter WHERE name = p_name AND ticket < p_ticket
                                   ORDER BY ticket LIMIT 2) first_two;
  IF w.until_ns - now_ns < p_place - p_place / 4 THEN
    UPDATE coord_lease_waiter SET until_ns = now_ns + p_place WHERE name = p_name AND ticket = p_ticket;
  END IF;
  IF ahead > 0 OR live THEN
    IF live THEN RETURN QUERY SELECT 1, r.holder, r.token, r.ttl_ns, r.expires_ns, ahead, now_ns;
    ELSE RETURN QUERY SELECT 1, ''::text, 0::bigint, 0::bigint, 0::bigint, ahead, now_ns; END IF;
    RETURN;
  END IF;
  UPDATE coord_lease SET last_token = r.last_token + 1, held = true, holder = p_owner, token = r.last_token + 1,
    ttl_ns = p_ttl, expires_ns = now_ns + p_ttl WHERE name = p_name;
  DELETE FROM coord_lease_waiter WHERE name = p_name AND ticket = p_ticket;
  RETURN QUERY SELECT 0, p_owner, r.last_token + 1, p_ttl, now_ns + p_ttl, 0::bigint, now_ns;
END $$;
)SQL"},
        {5, "lease tokens at least the clock's microseconds (never back when the data went back); grants and releases NOTIFY a name's observers", R"SQL(
-- watch_until_ns: until when (the server's clock) someone LISTENs on the
-- name's observer channel; 0: nobody. A grant or a release of an observed
-- name NOTIFYs that channel; a name nobody observes pays one comparison (no
-- NOTIFY: a notifying commit takes a lock every notifying transaction of the
-- cluster waits for).
ALTER TABLE coord_lease ADD COLUMN IF NOT EXISTS watch_until_ns bigint NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION coord_lease_observer_channel(p_name text) RETURNS text LANGUAGE sql IMMUTABLE AS
$$ SELECT 'coord_lo_' || left(encode(sha256(convert_to(p_name, 'UTF8')), 'hex'), 32) $$;

-- While the name is observed (p_until ahead on the server's clock): NOTIFYs
-- its channel and returns p_until; after: 0, nobody observes it.
CREATE OR REPLACE FUNCTION coord_lease_notify(p_name text, p_until bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  IF p_until <= coord_now_ns() THEN RETURN 0; END IF;
  PERFORM pg_notify(coord_lease_observer_channel(p_name), '');
  RETURN p_until;
END $$;

-- An observer (LISTENing on the channel already) keeps the name observed for
-- p_for ns from now on the server's clock; the longest of the observers' wins.
CREATE OR REPLACE FUNCTION coord_lease_observe(p_name text, p_for bigint) RETURNS void LANGUAGE sql AS $$
  INSERT INTO coord_lease(name, watch_until_ns) VALUES (p_name, coord_now_ns() + p_for)
  ON CONFLICT (name) DO UPDATE SET watch_until_ns = greatest(coord_lease.watch_until_ns, EXCLUDED.watch_until_ns)
$$;

-- A grant's token: above the last one, and at least the clock's reading in
-- microseconds, so that a token never goes back when the row or the whole
-- database went back (a restored backup, a failover to a standby without the
-- last commits), as long as the clock did not go back by more than the time
-- between the lost grant and the next one.
CREATE OR REPLACE FUNCTION coord_lease_next_token(p_last bigint, p_now bigint) RETURNS bigint LANGUAGE sql IMMUTABLE AS
$$ SELECT greatest(p_last + 1, p_now / 1000) $$;

-- As in migration 1, with the token above and the observers told.
CREATE OR REPLACE FUNCTION coord_lease_acquire(p_name text, p_owner text, p_ttl bigint, p_now bigint)
RETURNS TABLE(o_status int, o_holder text, o_token bigint, o_ttl bigint, o_expires bigint) LANGUAGE plpgsql AS $$
DECLARE r coord_lease; now_ns bigint := coalesce(p_now, coord_now_ns()); t bigint; w bigint;
BEGIN
  INSERT INTO coord_lease(name) VALUES (p_name) ON CONFLICT DO NOTHING;
  SELECT * INTO r FROM coord_lease WHERE name = p_name FOR UPDATE;
  IF r.held AND now_ns < r.expires_ns THEN
    RETURN QUERY SELECT 1, r.holder, r.token, r.ttl_ns, r.expires_ns; RETURN;
  END IF;
  t := coord_lease_next_token(r.last_token, now_ns);
  w := r.watch_until_ns;
  IF w <> 0 THEN w := coord_lease_notify(p_name, w); END IF;
  UPDATE coord_lease SET last_token = t, held = true, holder = p_owner, token = t, ttl_ns = p_ttl,
    expires_ns = now_ns + p_ttl, watch_until_ns = w WHERE name = p_name;
  RETURN QUERY SELECT 0, p_owner, t, p_ttl, now_ns + p_ttl;
END $$;

-- As in migration 4, with the token above and the observers told.
CREATE OR REPLACE FUNCTION coord_lease_acquire_queued(p_name text, p_owner text, p_ttl bigint, p_ticket bigint,
  p_place bigint, p_now bigint)
RETURNS TABLE(o_status int, o_holder text, o_token bigint, o_ttl bigint, o_expires bigint, o_ahead bigint, o_now bigint)
LANGUAGE plpgsql AS $$
DECLARE now_ns bigint := coord_now_ns(p_now); r coord_lease; w coord_lease_waiter; ahead bigint; live boolean;
  t bigint; o bigint;
BEGIN
  -- Lock order everywhere: the queue row, then the lease row.
  INSERT INTO coord_lease_queue(name) VALUES (p_name) ON CONFLICT DO NOTHING;
  PERFORM 1 FROM coord_lease_queue WHERE name = p_name FOR UPDATE;
  DELETE FROM coord_lease_waiter WHERE name = p_name AND until_ns <= now_ns;
  INSERT INTO coord_lease(name) VALUES (p_name) ON CONFLICT DO NOTHING;
  SELECT * INTO r FROM coord_lease WHERE name = p_name FOR UPDATE;
  live := r.held AND now_ns < r.expires_ns;
  SELECT * INTO w FROM coord_lease_waiter WHERE name = p_name AND ticket = p_ticket;
  IF NOT FOUND OR w.who <> p_owner THEN
    IF live THEN RETURN QUERY SELECT 3, r.holder, r.token, r.ttl_ns, r.expires_ns, 0::bigint, now_ns;
    ELSE RETURN QUERY SELECT 3, ''::text, 0::bigint, 0::bigint, 0::bigint, 0::bigint, now_ns; END IF;
    RETURN;
  END IF;
  SELECT count(*) INTO ahead FROM (SELECT 1 FROM coord_lease_waiter WHERE name = p_name AND ticket < p_ticket
                                   ORDER BY ticket LIMIT 2) first_two;
  IF w.until_ns - now_ns < p_place - p_place / 4 THEN
    UPDATE coord_lease_waiter SET until_ns = now_ns + p_place WHERE name = p_name AND ticket = p_ticket;
  END IF;
  IF ahead > 0 OR live THEN
    IF live THEN RETURN QUERY SELECT 1, r.holder, r.token, r.ttl_ns, r.expires_ns, ahead, now_ns;
    ELSE RETURN QUERY SELECT 1, ''::text, 0::bigint, 0::bigint, 0::bigint, ahead, now_ns; END IF;
    RETURN;
  END IF;
  t := coord_lease_next_token(r.last_token, now_ns);
  o := r.watch_until_ns;
  IF o <> 0 THEN o := coord_lease_notify(p_name, o); END IF;
  UPDATE coord_lease SET last_token = t, held = true, holder = p_owner, token = t, ttl_ns = p_ttl,
    expires_ns = now_ns + p_ttl, watch_until_ns = o WHERE name = p_name;
  DELETE FROM coord_lease_waiter WHERE name = p_name AND ticket = p_ticket;
  RETURN QUERY SELECT 0, p_owner, t, p_ttl, now_ns + p_ttl, 0::bigint, now_ns;
END $$;

-- As in migration 3, with the observers told.
CREATE OR REPLACE FUNCTION coord_lease_release(p_name text, p_owner text, p_token bigint, p_now bigint)
RETURNS TABLE(o_status int, o_holder text, o_token bigint, o_ttl bigint, o_expires bigint) LANGUAGE plpgsql AS $$
DECLARE r coord_lease; now_ns bigint := coalesce(p_now, coord_now_ns()); w bigint;
BEGIN
  SELECT * INTO r FROM coord_lease WHERE name = p_name FOR UPDATE;
  IF NOT FOUND OR NOT (r.held AND r.holder = p_owner AND (p_token = 0 OR p_token = r.token)) THEN
    IF FOUND AND r.held AND now_ns < r.expires_ns THEN RETURN QUERY SELECT 1, r.holder, r.token, r.ttl_ns, r.expires_ns;
    ELSE RETURN QUERY SELECT 1, ''::text, 0::bigint, 0::bigint, 0::bigint; END IF;
    RETURN;
  END IF;
  w := r.watch_until_ns;
  IF w <> 0 THEN w := coord_lease_notify(p_name, w); END IF;
  UPDATE coord_lease SET held = false, holder = '', expires_ns = 0, watch_until_ns = w WHERE name = p_name;
  PERFORM coord_lease_wake(p_name, p_now);
  RETURN QUERY SELECT 0, ''::text, 0::bigint, 0::bigint, 0::bigint;
END $$;
)SQL"},
        {6, "the store's identity and floors (store init), and the guard every call runs", R"SQL(
-- Written by store init only (store::initialize), never by opening: a store
-- without this row answers nothing from its records. The floors are what
-- a missing record starts from (coord/initial_floors.hpp).
CREATE TABLE IF NOT EXISTS coord_store (id int PRIMARY KEY CHECK (id = 1), identity text NOT NULL,
  segment_floor numeric(20,0) NOT NULL DEFAULT 0, fence_floor numeric(20,0) NOT NULL DEFAULT 0,
  ledger_floor_ms bigint NOT NULL DEFAULT 0, reservation_floor_ms bigint NOT NULL DEFAULT 0);

-- Run first in every call's transaction (pool::call): the store's identity
-- and its row's version ("ID.XMIN": restoring a dump writes the row again,
-- with a new xmin), or an error when it is not what the caller saw (p_seen;
-- empty: nothing seen yet). CD001: never initialized; CD002: went back (the
-- row gone, or restored); CD003: initialized again. The shared lock on
-- coord_store is held to the end of the transaction, so a restore cannot
-- replace it in between.
CREATE OR REPLACE FUNCTION coord_guard(p_seen text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v text;
BEGIN
  SELECT identity || '.' || xmin::text INTO v FROM coord_store WHERE id = 1;
  IF v IS NULL THEN
    IF p_seen = '' THEN RAISE EXCEPTION 'coord: the store was never initialized' USING ERRCODE = 'CD001'; END IF;
    RAISE EXCEPTION 'coord: the store''s identity is gone' USING ERRCODE = 'CD002';
  END IF;
  IF p_seen <> '' AND v <> p_seen THEN
    IF split_part(v, '.', 1) = split_part(p_seen, '.', 1) THEN
      RAISE EXCEPTION 'coord: the store went back' USING ERRCODE = 'CD002';
    END IF;
    RAISE EXCEPTION 'coord: the store was initialized again' USING ERRCODE = 'CD003';
  END IF;
  RETURN v;
END $$;

-- As in migration 1, with a missing reservation starting at the reservation floor.
CREATE OR REPLACE FUNCTION coord_time_reserve(p_key text, p_until bigint, p_token numeric)
RETURNS TABLE(o_status int, o_value numeric) LANGUAGE plpgsql AS $$
DECLARE r coord_reservation;
BEGIN
  INSERT INTO coord_reservation(key, until_ms) SELECT p_key, reservation_floor_ms FROM coord_store WHERE id = 1
    ON CONFLICT DO NOTHING;
  SELECT * INTO r FROM coord_reservation WHERE key = p_key FOR UPDATE;
  IF NOT FOUND THEN RAISE EXCEPTION 'coord: the store was never initialized' USING ERRCODE = 'CD001'; END IF;
  IF p_token < r.highest THEN RETURN QUERY SELECT 1, r.highest; RETURN; END IF;
  UPDATE coord_reservation SET highest = p_token, until_ms = greatest(r.until_ms, p_until) WHERE key = p_key;
  RETURN QUERY SELECT 0, greatest(r.until_ms, p_until)::numeric;
END $$;

-- As in migration 2, with the ledger floor: a slot scheduled at or before it
-- is run again never (its done record may have been lost): a done record
-- still replays, anything else is expired and no row is made.
CREATE OR REPLACE FUNCTION coord_ledger_claim(p_key text, p_scheduled_ms bigint, p_version bigint, p_worker text,
  p_hash text, p_ttl bigint, p_window_ms bigint, p_now bigint)
RETURNS TABLE(o_kind int, o_fence bigint, o_attempt bigint, o_holder text, o_lease_until bigint, o_result bytea)
LANGUAGE plpgsql AS $$
DECLARE r coord_ledger; now_ns bigint := coord_now_ns(p_now); below boolean;
BEGIN
  IF p_scheduled_ms::numeric + p_window_ms < floor(now_ns::numeric / 1000000) THEN
    RETURN QUERY SELECT 4, 0::bigint, 0::bigint, ''::text, 0::bigint, ''::bytea; RETURN;
  END IF;
  SELECT p_scheduled_ms <= ledger_floor_ms INTO below FROM coord_store WHERE id = 1;
  IF below IS NULL THEN RAISE EXCEPTION 'coord: the store was never initialized' USING ERRCODE = 'CD001'; END IF;
  IF NOT below THEN INSERT INTO coord_ledger(key) VALUES (p_key) ON CONFLICT DO NOTHING; END IF;
  SELECT * INTO r FROM coord_ledger WHERE key = p_key FOR UPDATE;
  IF NOT FOUND THEN RETURN QUERY SELECT 4, 0::bigint, 0::bigint, ''::text, 0::bigint, ''::bytea; RETURN; END IF;
  IF (r.attempt > 0 OR r.state <> 0) AND r.payload_hash <> p_hash THEN
    RETURN QUERY SELECT 3, 0::bigint, 0::bigint, ''::text, 0::bigint, ''::bytea; RETURN;
  END IF;
  IF r.state = 2 THEN RETURN QUERY SELECT 1, r.fence, r.attempt, ''::text, 0::bigint, r.result; RETURN; END IF;
  IF below THEN RETURN QUERY SELECT 4, 0::bigint, 0::bigint, ''::text, 0::bigint, ''::bytea; RETURN; END IF;
  IF r.state = 1 AND now_ns < r.lease_until_ns THEN
    RETURN QUERY SELECT 2, r.fence, r.attempt, r.holder, r.lease_until_ns, ''::bytea; RETURN;
  END IF;
  UPDATE coord_ledger SET scheduled_ms = p_scheduled_ms, schedule_version = p_version, payload_hash = p_hash,
    state = 1, fence = r.fence + 1, attempt = r.attempt + 1, holder = p_worker, lease_until_ns = now_ns + p_ttl,
    started_ns = now_ns WHERE key = p_key;
  RETURN QUERY SELECT 0, r.fence + 1, r.attempt + 1, p_worker, now_ns + p_ttl, ''::bytea;
END $$;
)SQL"},
        {7, "writers: a store object's write transactions counted, so that a database that lost some refuses", R"SQL(
-- One row per pooled connection of a store object (a writer): n counts its
-- write transactions, each setting n to the next value the writer chose
-- (pool::call's guard); the writer knows n lies in [lo, hi] (one value once
-- its last write is acknowledged). A database that lost a write it
-- acknowledged (an asynchronous standby promoted without the last commits,
-- an older backup put back) holds a smaller n, or no row: the writer's next
-- call is refused (CD004) before anything is applied. touched_ms: the
-- server's clock at its last write (or daily read); a row untouched for 30
-- days (its store object gone) is swept when a new writer's row is made,
-- and the sweep's cutoff kept, so that a writer that finds its row gone can
-- tell a sweep (its last touch before the cutoff) from a loss.
CREATE TABLE IF NOT EXISTS coord_writer (id text PRIMARY KEY, n bigint NOT NULL, touched_ms bigint NOT NULL);
CREATE TABLE IF NOT EXISTS coord_writer_swept (id int PRIMARY KEY CHECK (id = 1), before_ms bigint NOT NULL);

CREATE OR REPLACE FUNCTION coord_writer_sweep(p_now_ms bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE cutoff bigint := p_now_ms - 30::bigint * 86400000;
BEGIN
  IF EXISTS (SELECT 1 FROM coord_writer WHERE touched_ms < cutoff) THEN
    INSERT INTO coord_writer_swept AS s VALUES (1, cutoff) ON CONFLICT (id) DO UPDATE
      SET before_ms = greatest(s.before_ms, EXCLUDED.before_ms);
    DELETE FROM coord_writer WHERE id IN (SELECT id FROM coord_writer WHERE touched_ms < cutoff LIMIT 100);
  END IF;
END $$;

-- coord_guard, then the writer's check: its row's n within [p_lo, p_hi]
-- (no row: p_lo = 0, or swept), set to p_next for a write (NULL: a read,
-- which touches the row at most once a day). CD004: the database lost
-- writes this writer saw acknowledged. Returns coord_guard's answer, '|',
-- and the row's touched_ms (0: no row).
CREATE OR REPLACE FUNCTION coord_guard_w(p_seen text, p_id text, p_lo bigint, p_hi bigint, p_next bigint,
  p_touched bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v text := coord_guard(p_seen); r coord_writer; swept bigint; now_ms bigint := coord_now_ns() / 1000000;
BEGIN
  SELECT * INTO r FROM coord_writer WHERE id = p_id;
  IF NOT FOUND THEN
    IF p_lo > 0 THEN
      SELECT before_ms INTO swept FROM coord_writer_swept WHERE id = 1;
      IF swept IS NULL OR p_touched >= swept THEN
        RAISE EXCEPTION 'coord: writes this store object saw acknowledged are missing' USING ERRCODE = 'CD004';
      END IF;
    END IF;
    IF p_next IS NULL THEN RETURN v || '|0'; END IF;
    INSERT INTO coord_writer VALUES (p_id, p_next, now_ms);
    IF p_lo = 0 THEN PERFORM coord_writer_sweep(now_ms); END IF;
    RETURN v || '|' || now_ms;
  END IF;
  IF r.n < p_lo OR r.n > p_hi THEN
    RAISE EXCEPTION 'coord: writes this store object saw acknowledged are missing' USING ERRCODE = 'CD004';
  END IF;
  IF p_next IS NOT NULL OR r.touched_ms < now_ms - 86400000 THEN
    UPDATE coord_writer SET n = coalesce(p_next, n), touched_ms = now_ms WHERE id = p_id;
    RETURN v || '|' || now_ms;
  END IF;
  RETURN v || '|' || r.touched_ms;
END $$;
)SQL"},
        {8, "a ledger claim's fence above the store's fence floor (a recovery's), so that its fenced effect passes it", R"SQL(
-- As in migration 6, the granted fence above the fence floor: a key with no
-- fence record refuses tokens below the floor, and a claim's fenced effect
-- after a recovery would be refused for ever.
CREATE OR REPLACE FUNCTION coord_ledger_claim(p_key text, p_scheduled_ms bigint, p_version bigint, p_worker text,
  p_hash text, p_ttl bigint, p_window_ms bigint, p_now bigint)
RETURNS TABLE(o_kind int, o_fence bigint, o_attempt bigint, o_holder text, o_lease_until bigint, o_result bytea)
LANGUAGE plpgsql AS $$
DECLARE r coord_ledger; now_ns bigint := coord_now_ns(p_now); below boolean; ff bigint; f bigint;
BEGIN
  IF p_scheduled_ms::numeric + p_window_ms < floor(now_ns::numeric / 1000000) THEN
    RETURN QUERY SELECT 4, 0::bigint, 0::bigint, ''::text, 0::bigint, ''::bytea; RETURN;
  END IF;
  SELECT p_scheduled_ms <= ledger_floor_ms, least(fence_floor, 9223372036854775806)::bigint INTO below, ff
    FROM coord_store WHERE id = 1;
  IF below IS NULL THEN RAISE EXCEPTION 'coord: the store was never initialized' USING ERRCODE = 'CD001'; END IF;
  IF NOT below THEN INSERT INTO coord_ledger(key) VALUES (p_key) ON CONFLICT DO NOTHING; END IF;
  SELECT * INTO r FROM coord_ledger WHERE key = p_key FOR UPDATE;
  IF NOT FOUND THEN RETURN QUERY SELECT 4, 0::bigint, 0::bigint, ''::text, 0::bigint, ''::bytea; RETURN; END IF;
  IF (r.attempt > 0 OR r.state <> 0) AND r.payload_hash <> p_hash THEN
    RETURN QUERY SELECT 3, 0::bigint, 0::bigint, ''::text, 0::bigint, ''::bytea; RETURN;
  END IF;
  IF r.state = 2 THEN RETURN QUERY SELECT 1, r.fence, r.attempt, ''::text, 0::bigint, r.result; RETURN; END IF;
  IF below THEN RETURN QUERY SELECT 4, 0::bigint, 0::bigint, ''::text, 0::bigint, ''::bytea; RETURN; END IF;
  IF r.state = 1 AND now_ns < r.lease_until_ns THEN
    RETURN QUERY SELECT 2, r.fence, r.attempt, r.holder, r.lease_until_ns, ''::bytea; RETURN;
  END IF;
  f := greatest(r.fence, ff) + 1;
  UPDATE coord_ledger SET scheduled_ms = p_scheduled_ms, schedule_version = p_version, payload_hash = p_hash,
    state = 1, fence = f, attempt = r.attempt + 1, holder = p_worker, lease_until_ns = now_ns + p_ttl,
    started_ns = now_ns WHERE key = p_key;
  RETURN QUERY SELECT 0, f, r.attempt + 1, p_worker, now_ns + p_ttl, ''::bytea;
END $$;
)SQL"},
        {9, "writers: every call checks the store object's other writers too, so that a loss is refused on every connection", R"SQL(
-- The other writers of the calling store object (p_ids, with the counts
-- they saw acknowledged, p_lo, and their last touches, p_touched): true
-- when every one's row holds at least its count. A row missing is a loss
-- unless a sweep after its last touch took it (as coord_guard_w tells).
-- PL/pgSQL, whose plan the session keeps (an SQL function's would be made
-- at each call); callers skip it when there are no other writers.
CREATE OR REPLACE FUNCTION coord_writers_kept(p_ids text[], p_lo bigint[], p_touched bigint[]) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN NOT EXISTS (
    SELECT 1 FROM unnest(p_ids, p_lo, p_touched) AS s(id, lo, touched) LEFT JOIN coord_writer x ON x.id = s.id
    WHERE x.n < s.lo OR (x.n IS NULL AND s.touched >= coalesce((SELECT before_ms FROM coord_writer_swept WHERE id = 1), 0)));
END $$;

-- coord_guard_w (migration 7), then the other writers' rows (coord_writers_kept).
CREATE OR REPLACE FUNCTION coord_guard_w(p_seen text, p_id text, p_lo bigint, p_hi bigint, p_next bigint,
  p_touched bigint, p_ids text[], p_ids_lo bigint[], p_ids_touched bigint[]) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v text := coord_guard_w(p_seen, p_id, p_lo, p_hi, p_next, p_touched);
BEGIN
  IF cardinality(p_ids) > 0 THEN
    IF NOT coord_writers_kept(p_ids, p_ids_lo, p_ids_touched) THEN
      RAISE EXCEPTION 'coord: writes this store object saw acknowledged are missing' USING ERRCODE = 'CD004';
    END IF;
  END IF;
  RETURN v;
END $$;
)SQL"},
    };
    return all;
}

/// The schema version this library writes with.
inline int schema_version() { return migrations().back().version; }

/// Brings the database to schema_version() on `c`'s connection: under an
/// advisory lock (so that processes may start together), each migration
/// above the recorded version in a transaction of its own with the new
/// version; refuses a newer database (errc::schema_too_new). The error's
/// detail names the migration that failed and the server's words.
inline result<void> migrate(pool::call& c) {
    using namespace detail;
    if (auto l = c.exec("SELECT pg_advisory_lock(7370426)", {}, false); !l) return unexpected(l.error());
    auto body = [&]() -> result<void> {
        if (auto t = c.exec("CREATE TABLE IF NOT EXISTS coord_schema (id int PRIMARY KEY CHECK (id = 1), "
                            "version int NOT NULL)",
                            {}, true);
            !t)
            return unexpected(t.error());
        auto v = c.exec("SELECT coalesce((SELECT version FROM coord_schema WHERE id = 1), "
                        "CASE WHEN to_regclass('coord_fence') IS NULL THEN 0 ELSE 1 END)",
                        {}, false);
        if (!v) return unexpected(v.error());
        const int at = static_cast<int>(v->i64(0, 0));
        if (at > schema_version())
            return unexpected(coord::error(make_error_code(errc::schema_too_new),
                                           "the database's coord schema is version " + std::to_string(at) +
                                               ", newer than this library's " + std::to_string(schema_version()) +
                                               ": upgrade coord"));
        for (const auto& m : migrations()) {
            if (m.version <= at) continue;
            c.restart_deadline();  // each migration gets a whole operation timeout
            if (auto b = c.exec("BEGIN", {}, false); !b) return unexpected(b.error());
            auto applied = c.exec(m.sql, {}, true);
            auto recorded = applied ? c.exec("INSERT INTO coord_schema VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET "
                                             "version = EXCLUDED.version",
                                             {param(static_cast<std::int64_t>(m.version))}, true)
                                    : result<answer>(unexpected(applied.error()));
            if (!recorded) {
                (void)c.exec("ROLLBACK", {}, false);
                const auto& e = recorded.error();
                return unexpected(coord::error(e.code(), "migration " + std::to_string(m.version) + " (" + m.what +
                                                             "): " + e.detail()));
            }
            // A store an earlier coord made (it made its tables when opened)
            // was in use: it takes its identity here, with zero floors (its
            // records are all there). A new database gets none: store init.
            if (m.version == 6 && at >= 1) {
                auto id = c.exec("INSERT INTO coord_store(id, identity) VALUES (1, $1) ON CONFLICT DO NOTHING",
                                 {param(coord::detail::new_store_identity())}, true);
                if (!id) {
                    (void)c.exec("ROLLBACK", {}, false);
                    return unexpected(coord::error(id.error().code(), "migration 6 (" + std::string(m.what) +
                                                                          "): " + id.error().detail()));
                }
            }
            if (auto done = c.exec("COMMIT", {}, true); !done) return unexpected(done.error());
        }
        return {};
    };
    auto r = body();
    (void)c.exec("SELECT pg_advisory_unlock(7370426)", {}, false);
    return r;
}

}  // namespace coord::postgres
