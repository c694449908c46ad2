// SPDX-License-Identifier: Apache-2.0
// coord/postgres/connection.hpp: the PostgreSQL connection layer of coord's
// engine: the error codes, the store's options, a small pool of libpq
// connections, and the one way a call talks to the server (a statement, or a
// pipeline of statements in one round trip), every call under a deadline.
//
// A call (pool::call) takes one connection from the pool for its whole step
// (a transaction stays on its connection) and holds the call's deadline:
// waiting for a free connection, connecting, sending and waiting for every
// answer all count against options::operation_timeout. libpq runs
// non-blocking and the layer polls the socket (detail/deadline.hpp), so a
// paused, partitioned or black-holed server gives an answer in bounded time:
// - nothing was sent, or the server answered with an error (the statement
//   rolled back): the engine's code, condition unavailable;
// - a writing call was sent and no answer came in time, or the connection
//   broke after sending: errc::outcome_unknown (it may have committed).
// The connection is then dropped and the next call reconnects. Every error
// carries the server's or the connection's own words in the error value
// (coord::error::detail(), part of message()).
#pragma once

// Marks that a store header is in (tests/layering_test.cpp checks that no
// primitive or rule header pulls one in); every engine header includes this one.
#ifndef COORD_STORE_HEADER_INCLUDED
#define COORD_STORE_HEADER_INCLUDED 1
#endif

#include <libpq-fe.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "coord/clock.hpp"
#include "coord/detail/connection_pool.hpp"
#include "coord/detail/deadline.hpp"
#include "coord/detail/engine_errors.hpp"
#include "coord/detail/engine_outcome.hpp"
#include "coord/detail/host.hpp"
#include "coord/detail/options.hpp"
#include "coord/error.hpp"
#include "coord/initial_floors.hpp"
#include "coord/result.hpp"

namespace coord::postgres {

/// Infrastructure failures of the PostgreSQL engine.
enum class errc {
    /// No connection could be made (server down, refused, bad conninfo, no
    /// answer within options::connect_timeout).
    connection_failed = 1,
    /// The server refused or failed the statement (it was rolled back).
    server_refused,
    /// The statement was cancelled by the server (statement_timeout, SQLSTATE
    /// 57014) and rolled back.
    statement_timeout,
    /// The server's answer was not what the engine expects (schema drift?).
    bad_answer,
    /// The database's coord schema is newer than this library knows:
    /// upgrade coord before writing with it.
    schema_too_new,
    /// No answer within options::operation_timeout (a paused or unreachable
    /// server), for a call that wrote nothing; a writing call that was sent
    /// is errc::outcome_unknown instead.
    deadline_passed,
    /// A lock the statement needed was not free within the server's
    /// lock_timeout (SQLSTATE 55P03); the statement was rolled back.
    lock_timeout,
    /// The server and this client did not accept each other (a password
    /// refused or missing, no pg_hba.conf entry for this connection, a
    /// server certificate the client's CA did not sign or whose name does
    /// not match), or the role lacks a right on coord's tables (SQLSTATE
    /// class 28, 42501): a configuration to fix. Nothing was applied.
    not_authorized,
};

inline const std::error_category& category() noexcept {
    static const coord::detail::engine_category<errc, 8> instance(
        "coord.postgres", "PostgreSQL",
        {{
             {errc::connection_failed, coord::condition::unavailable, "PostgreSQL connection failed"},
             {errc::server_refused, coord::condition::unavailable, "PostgreSQL refused the statement"},
             {errc::statement_timeout, coord::condition::unavailable, "PostgreSQL cancelled the statement (statement_timeout)"},
             {errc::bad_answer, coord::condition::outcome_unknown, "unexpected answer from PostgreSQL"},
             {errc::schema_too_new, coord::condition::unavailable, "PostgreSQL schema newer than this coord"},
             {errc::deadline_passed, coord::condition::unavailable, "no answer from PostgreSQL within the operation timeout"},
             {errc::lock_timeout, coord::condition::unavailable, "a PostgreSQL lock was not free within lock_timeout"},
             {errc::not_authorized, coord::condition::not_authorized,
              "PostgreSQL and this client did not accept each other's credentials, or the role lacks a right"},
        }});
    return instance;
}
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), category()}; }

}  // namespace coord::postgres

/// @cond STD_SPECIALIZATIONS
template <>
struct std::is_error_code_enum<coord::postgres::errc> : std::true_type {};
/// @endcond

namespace coord::postgres {

/// Why `conninfo` is not a connection string libpq accepts (a malformed
/// key=value list or URI, or a value libpq would refuse at every connect:
/// a port that is not 1 to 65535, a connect_timeout that is not a number,
/// a host with a control character), or nullopt when it is one. Says
/// nothing of whether the server can be reached.
inline std::optional<std::string> conninfo_error(const std::string& conninfo) {
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), &err);
    if (opts) {
        std::optional<std::string> why;
        // Each value of a comma-separated list (multi-host conninfo).
        auto each = [](std::string_view list, auto&& ok) {
            for (;;) {
                const auto comma = list.find(',');
                if (!ok(list.substr(0, comma))) return false;
                if (comma == std::string_view::npos) return true;
                list = list.substr(comma + 1);
            }
        };
        for (const PQconninfoOption* o = opts; o->keyword && !why; ++o) {
            if (!o->val) continue;
            const std::string_view key = o->keyword, val = o->val;
            if (key == "port" && !val.empty() &&
                !each(val, [](std::string_view p) { return p.empty() || coord::detail::port_number(p) != 0; }))
                why = "the port must be 1 to 65535";
            else if (key == "connect_timeout" && !val.empty() &&
                     val.find_first_not_of("0123456789") != std::string_view::npos)
                why = "connect_timeout must be a whole number of seconds";
            else if ((key == "host" || key == "hostaddr") &&
                     !each(val, [](std::string_view h) {
                         for (unsigned char c : h)
                             if (c < 0x20 || c == 0x7f || c == ';' || c == '\\') return false;
                         return true;
                     }))
                why = "the " + std::string(key) + " is malformed";
        }
        PQconninfoFree(opts);
        return why;
    }
    std::string why = err ? err : "out of memory";
    if (err) PQfreemem(err);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    return why;
}

/// Store settings; out-of-range values make the constructor throw
/// std::invalid_argument naming the field.
struct options {
    /// Connections kept open at most (1 to 64). Each call takes one for its
    /// whole step (a transaction stays on its connection); calls from more
    /// threads than this wait for one to come back (within their deadline).
    /// Connections are opened on first use and reopened on the next call
    /// after they break or time out.
    std::size_t pool_size = coord::detail::defaults::pool_size;
    /// Bounds each call as a whole (1 ms to 24 h): waiting for a pooled
    /// connection, connecting, sending, waiting for the answer. A call that
    /// compounds with the caller's own function (fence_update, a ledger run)
    /// has this bound before the function and again after it.
    std::chrono::milliseconds operation_timeout = coord::detail::defaults::operation_timeout;
    /// Bounds making a connection (1 ms to 24 h; also within the call's
    /// operation timeout). Host names are resolved before it starts: give an
    /// address, or a resolver that answers, to bound that too.
    std::chrono::milliseconds connect_timeout = coord::detail::defaults::connect_timeout;
    /// An idle connection probes its peer after this long without traffic
    /// (TCP keepalive, 1 s to 1 h; then every third of it, three probes), so
    /// a dead server is noticed before the next call needs it. Sent data
    /// unacknowledged for the operation timeout also drops the connection
    /// (TCP_USER_TIMEOUT).
    std::chrono::seconds keepalive_idle{10};
    /// The role and its password, when the conninfo does not say (empty:
    /// libpq's defaults: PGUSER, the passfile). Never put in a message.
    std::string user{};
    std::string password{};  ///< the role's password (never in a message)
    /// TLS files, when the conninfo does not say: the CAs that sign the
    /// server's certificate (sslrootcert; given, sslmode is verify-full
    /// unless the conninfo says otherwise), the client certificate and its
    /// key (sslcert, sslkey).
    std::string ca_file{};
    std::string cert_file{};  ///< the client certificate (sslcert)
    std::string key_file{};  ///< its private key (sslkey)
};

/// The clock policy that means "the server's clock": every expiry is judged
/// on clock_timestamp() of the server. Tests may give a manual_clock instead,
/// whose readings are sent with each call.
using server_clock = coord::server_clock;

namespace detail {

/// A query result, freed with the object.
class answer {
public:
    explicit answer(PGresult* r) noexcept : r_(r) {}
    answer(answer&& o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
    answer& operator=(answer&&) = delete;
    ~answer() {
        if (r_) PQclear(r_);
    }
    PGresult* get() const noexcept { return r_; }
    int rows() const noexcept { return PQntuples(r_); }
    /// Rows an UPDATE or DELETE changed.
    std::uint64_t changed() const noexcept { return std::strtoull(PQcmdTuples(r_), nullptr, 10); }
    std::string text(int row, int col) const {
        return std::string(PQgetvalue(r_, row, col), static_cast<std::size_t>(PQgetlength(r_, row, col)));
    }
    std::uint64_t u64(int row, int col) const { return std::strtoull(PQgetvalue(r_, row, col), nullptr, 10); }
    std::int64_t i64(int row, int col) const { return std::strtoll(PQgetvalue(r_, row, col), nullptr, 10); }
    bool boolean(int row, int col) const { return PQgetvalue(r_, row, col)[0] == 't'; }
    /// A bytea column in text format ("\x" and hex).
    std::string bytes(int row, int col) const {
        std::size_t n = 0;
        unsigned char* raw = PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(r_, row, col)), &n);
        if (!raw) return {};
        std::string out(reinterpret_cast<const char*>(raw), n);
        PQfreemem(raw);
        return out;
    }

private:
    PGresult* r_;
};

/// One parameter: text (NULL when nullopt), or binary bytes for a bytea.
struct param_value {
    std::optional<std::string> text;
    bool binary = false;
};
inline param_value param(std::string_view s) { return {std::string(s), false}; }
inline param_value param(std::int64_t v) { return {std::to_string(v), false}; }
inline param_value param_u64(std::uint64_t v) { return {std::to_string(v), false}; }
inline param_value bytes_param(std::string_view s) { return {std::string(s), true}; }
inline param_value null_param() { return {std::nullopt, false}; }

/// The time a test clock sends (NULL for server_clock: the server reads its own).
template <class Clock>
param_value now_ns_param(const Clock& clock) {
    if constexpr (std::is_same_v<Clock, server_clock>) return null_param();
    else return param(since_epoch_ns(clock.now()));
}
template <class Clock>
param_value now_ms_param(const Clock& clock) {
    if constexpr (std::is_same_v<Clock, server_clock>) return null_param();
    else return param(unix_millis(clock.now()));
}

/// state_went_back: coord's store in the database is not the one a store
/// object saw (`why`), with the recovery that hands nothing out twice.
inline coord::error went_back_error(const std::string& why) {
    return coord::error(
        coord::make_error_code(coord::errc::state_went_back),
        "coord's store in this PostgreSQL database went back: " + why +
            "; its fences, segment counters, ledger records and reservations may be older than what was handed "
            "out, and nothing was applied. Recovery that hands nothing out twice: coordctl store init --force "
            "--segment-floor N (at least the largest segment ID handed out) --fence-floor now --ledger-floor now "
            "(docs/concepts/went-back.md)");
}

/// What the guard's SQLSTATEs (schema.hpp, coord_guard) and a missing
/// table or function (42P01, 42883: coord's schema is not there) mean;
/// nullopt for any other state.
inline std::optional<coord::error> store_state_error(std::string_view sqlstate, const std::string& server_words) {
    using coord::errc;
    if (sqlstate == "CD001" || sqlstate == "42P01" || sqlstate == "42883")
        return coord::error(
            coord::make_error_code(errc::store_uninitialized),
            "coord's store in this PostgreSQL database (the schema on the connection's search_path) " +
                std::string(sqlstate == "CD001" ? "was never initialized"
                                                : "is missing its tables (" + server_words + ")") +
                ", or it lost its data (a schema dropped and made again), so nothing that needs its records is "
                "answered. Initialize it stating floors above everything it handed out, and nothing is handed out "
                "again: coordctl store init --store URL --segment-floor N (at least the largest segment ID it ever "
                "handed out) --fence-floor N|now (at least the highest fence token it accepted; now: the server's "
                "time in microseconds, above every lease token it granted) --ledger-floor INSTANT|now (slots "
                "scheduled up to it are not run again; none for a store that never served coord); docs/concepts/went-back.md");
    if (sqlstate == "CD002")
        return went_back_error("its identity row is not the one this store object saw (the schema was restored "
                               "from a dump, or dropped and made again)");
    if (sqlstate == "CD004")
        return went_back_error("writes this store object saw acknowledged are missing from the database it reached "
                               "now (a failover to a standby that lacked the last commits, or an older backup put "
                               "back)");
    if (sqlstate == "CD003")
        return coord::error(coord::make_error_code(errc::store_identity_changed),
                            "coord's store in this PostgreSQL database was initialized again since this store "
                            "object opened it: open the store again");
    return std::nullopt;
}

/// What one store object saw of its database: the store's identity and the
/// version of the row it is kept in ("ID.XMIN" of coord_store: a dump
/// restored writes the row again, a new xmin), empty until the first call
/// after the store was initialized. Each call sends it to coord_guard, which
/// refuses the call when the database now holds another (schema.hpp).
class seen_store {
public:
    std::string get() const {
        std::lock_guard lock(m_);
        return v_;
    }
    void saw(std::string v) {
        std::lock_guard lock(m_);
        if (v_.empty()) v_ = std::move(v);
    }
    /// After this store object initialized the store itself.
    void replace(std::string v) {
        std::lock_guard lock(m_);
        v_ = std::move(v);
    }

private:
    mutable std::mutex m_;
    std::string v_;
};

/// coord_guard's answer as an SQL expression (schema.hpp, migration 6): what
/// a statement that checks the store itself compares with the value seen
/// (pool::call::exec_checking).
#define COORD_PG_STORE_SEEN "(SELECT identity || '.' || xmin::text FROM coord_store WHERE id = 1)"

/// The parameters of `a`, then `b`'s, then `c`'s: a statement's own, the
/// store seen, the writer's step (pool::call::writer_step).
inline std::vector<param_value> joined(std::vector<param_value> a, const std::vector<param_value>& b,
                                       const std::vector<param_value>& c) {
    a.insert(a.end(), b.begin(), b.end());
    a.insert(a.end(), c.begin(), c.end());
    return a;
}

/// One statement of a pipeline (those with parameters are prepared first).
struct step {
    const char* sql;
    std::vector<param_value> params;
};

inline std::string trimmed(const char* s) {
    std::string out = s ? s : "";
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
}

inline std::string millis_text(std::chrono::nanoseconds d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

/// A pooled connection's writer (schema.hpp, migration 7): its row counts
/// the connection's write transactions, and the writer knows the count lies
/// in [lo, hi]. A write sets it to hi + 1 (hi grows at once; lo follows when
/// the write's transaction is known committed), so a write whose outcome is
/// unknown widens the range and a database that lost an acknowledged write
/// holds a count below lo: refused (CD004). Each call also checks the
/// rows of the pool's other writers against the bounds they published
/// (pool::siblings), so that a loss is refused on every connection of the
/// store object, not only on the one that wrote the lost commit.
struct writer {
    std::string id;               // random, made on the connection's first call
    unsigned epoch = 0;           // the pool's writer epoch it was made in (pool::renew_writers)
    std::int64_t lo = 0, hi = 0;  // 0: no row made yet
    std::int64_t touched_ms = 0;  // the server's clock at the last touch this writer saw
    coord::detail::deadline touched_at{};  // this machine's time of it
    bool bumped = false;                   // a write of the transaction open now set the count
    std::int64_t pending_touched = 0;      // the touch of the transaction open now
};

/// One libpq connection, non-blocking, and the statements prepared on it.
class connection {
public:
    connection() = default;
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;
    ~connection() { drop(); }

    /// Closes the connection; the next call opens a new one. (Its writer
    /// stays: it belongs to the pool's slot, across reconnections.)
    void drop() noexcept {
        if (conn_) PQfinish(conn_);
        conn_ = nullptr;
        prepared_.clear();
        next_name_ = 0;
        writer_.bumped = false;  // the open transaction, if any, ended with the connection
        writer_.pending_touched = 0;
    }

    /// This connection's writer (see writer), a new one when it was made
    /// before the pool's writer epoch `epoch` (the store initialized anew).
    detail::writer& writer(unsigned epoch) {
        if (writer_.id.empty() || writer_.epoch != epoch) {
            writer_ = detail::writer{};
            writer_.id = coord::detail::new_store_identity();
            writer_.epoch = epoch;
        }
        return writer_;
    }
    /// The writer as the call that holds the connection took it (writer(epoch)).
    detail::writer& taken_writer() noexcept { return writer_; }
    /// After a statement or pipeline (`ok`: it succeeded; `rollback`: it was
    /// a ROLLBACK): a writer's count set in a transaction that is now
    /// committed is known, hi; one rolled back or failed stays within [lo, hi].
    /// True when what the writer knows changed (pool::publish).
    bool settle(bool ok, bool rollback) noexcept {
        if (!conn_ || PQtransactionStatus(conn_) != PQTRANS_IDLE) return false;  // still in a transaction, or dropped
        bool changed = false;
        if (ok && !rollback) {
            if (writer_.bumped && writer_.lo != writer_.hi) {
                writer_.lo = writer_.hi;
                changed = true;
            }
            if (writer_.pending_touched > writer_.touched_ms) {
                writer_.touched_ms = writer_.pending_touched;
                writer_.touched_at = coord::detail::deadline_clock::now();
                changed = true;
            }
        }
        writer_.bumped = false;
        writer_.pending_touched = 0;
        return changed;
    }

    /// Opens the connection unless it is open and the server did not close
    /// it while it was idle (then nothing was sent on it: it is opened
    /// again, through every host of the conninfo), by `until` and within the
    /// connect timeout.
    result<void> connect(const std::string& conninfo, const options& o, coord::detail::deadline until) {
        // libpq reads what waits (a notification, the server's last error
        // before it closed) and finds the close.
        const auto now = coord::detail::deadline_clock::now();
        const bool recent = now - used_ < coord::detail::idle_check_after;
        used_ = now;
        if (conn_ && PQstatus(conn_) == CONNECTION_OK &&
            (recent || coord::detail::peek_idle(PQsocket(conn_)) == coord::detail::idle_socket::quiet ||
             (PQconsumeInput(conn_) == 1 && PQstatus(conn_) == CONNECTION_OK &&
              coord::detail::peek_idle(PQsocket(conn_)) != coord::detail::idle_socket::closed)))
            return {};
        drop();
        const auto limit = std::min(until, coord::detail::deadline_after(o.connect_timeout));
        const std::string idle = std::to_string(o.keepalive_idle.count());
        const std::string interval = std::to_string(std::max<std::int64_t>(1, o.keepalive_idle.count() / 3));
        const std::string user_timeout = std::to_string(o.operation_timeout.count());
        // The user's conninfo comes last: what it sets wins over these.
        std::vector<const char*> keys = {"keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
                                         "tcp_user_timeout"};
        std::vector<const char*> values = {"1", idle.c_str(), interval.c_str(), "3", user_timeout.c_str()};
        if (!o.user.empty()) keys.push_back("user"), values.push_back(o.user.c_str());
        if (!o.password.empty()) keys.push_back("password"), values.push_back(o.password.c_str());
        if (!o.ca_file.empty()) {
            keys.push_back("sslrootcert"), values.push_back(o.ca_file.c_str());
            keys.push_back("sslmode"), values.push_back("verify-full");
        }
        if (!o.cert_file.empty()) keys.push_back("sslcert"), values.push_back(o.cert_file.c_str());
        if (!o.key_file.empty()) keys.push_back("sslkey"), values.push_back(o.key_file.c_str());
        keys.push_back("dbname"), values.push_back(conninfo.c_str());
        keys.push_back(nullptr), values.push_back(nullptr);
        conn_ = PQconnectStartParams(keys.data(), values.data(), 1);
        if (!conn_) return not_sent(errc::connection_failed, "out of memory");
        // A library writes nothing to the application's stderr: the server's
        // notices are dropped; errors come back in the error value.
        PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
        PostgresPollingStatusType st = PGRES_POLLING_WRITING;
        while (PQstatus(conn_) != CONNECTION_BAD && st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
            const short ev = st == PGRES_POLLING_READING ? POLLIN : POLLOUT;
            const auto w = coord::detail::wait_fd(PQsocket(conn_), ev, limit);
            if (w == coord::detail::wait_result::timed_out) {
                drop();
                return not_sent(errc::connection_failed,
                                "no answer while connecting within " +
                                    millis_text(std::min(o.connect_timeout, o.operation_timeout)));
            }
            st = PQconnectPoll(conn_);
        }
        if (PQstatus(conn_) != CONNECTION_OK) {
            auto why = trimmed(PQerrorMessage(conn_));
            drop();
            return not_sent(refused_credentials(why) ? errc::not_authorized : errc::connection_failed, why);
        }
        if (PQsetnonblocking(conn_, 1) != 0) {
            auto why = trimmed(PQerrorMessage(conn_));
            drop();
            return not_sent(errc::connection_failed, why);
        }
        return {};
    }

    /// One statement, under `until`. `writes`: a call that may change the
    /// database (a lost answer is then outcome_unknown). Statements with
    /// parameters are prepared once per connection unless `prepare` is false.
    result<answer> exec(const char* sql, const std::vector<param_value>& params, bool writes, bool prepare,
                        coord::detail::deadline until) {
        std::string name;
        if (prepare && !params.empty()) {
            auto n = prepared(sql, static_cast<int>(params.size()), until);
            if (!n) return unexpected(n.error());
            name = std::move(*n);
        }
        if (!send(sql, name, params)) return lost(false, writes, errc::connection_failed);
        return answer_of_sent(writes, until);
    }

    /// Every step, then one sync: one round trip for the lot (libpq pipeline
    /// mode), under `until`. A statement not yet prepared on this connection
    /// is prepared in the same pipeline, so the first call is one round trip
    /// too. The first failure is reported.
    result<std::vector<answer>> pipeline(const std::vector<step>& steps, bool writes, coord::detail::deadline until) {
        if (PQenterPipelineMode(conn_) != 1) return lost(false, writes, errc::connection_failed);
        std::vector<std::string> names(steps.size());
        std::vector<bool> preparing(steps.size(), false);
        bool sent = true;
        for (std::size_t i = 0; i < steps.size() && sent; ++i) {
            const auto& st = steps[i];
            if (!st.params.empty()) {
                if (auto it = prepared_.find(st.sql); it != prepared_.end()) {
                    names[i] = it->second;
                } else {
                    names[i] = "coord_" + std::to_string(next_name_++);
                    preparing[i] = true;
                    sent = PQsendPrepare(conn_, names[i].c_str(), st.sql, static_cast<int>(st.params.size()), nullptr) == 1;
                    if (!sent) break;
                }
            }
            sent = send(st.sql, names[i], st.params);
        }
        if (!sent || PQpipelineSync(conn_) != 1) return lost(false, writes, errc::connection_failed);
        if (auto f = flush(until); !f) return lost(f.error() == timed_out, writes, errc::connection_failed);
        // One result and its ending NULL per prepare and per statement, then the sync.
        auto take = [&]() -> result<answer> {
            auto r = next(until);
            if (!r) return lost(r.error() == timed_out, writes, errc::connection_failed);
            if (!*r) return lost(false, writes, errc::connection_failed);
            answer a(*r);
            auto end = next(until);
            if (!end) return lost(end.error() == timed_out, writes, errc::connection_failed);
            if (*end) PQclear(*end);
            return a;
        };
        std::vector<answer> out;
        std::optional<coord::error> first_error;
        for (std::size_t i = 0; i < steps.size(); ++i) {
            if (preparing[i]) {
                auto p = take();
                if (!p) return unexpected(p.error());
                if (PQresultStatus(p->get()) == PGRES_COMMAND_OK) prepared_.emplace(steps[i].sql, names[i]);
                else if (!first_error) first_error = statement_error(*p, writes);
            }
            auto a = take();
            if (!a) return unexpected(a.error());
            if (!first_error) first_error = statement_error(*a, writes);
            out.push_back(std::move(*a));
        }
        auto sync = next(until);
        if (!sync) return lost(sync.error() == timed_out, writes, errc::connection_failed);
        answer s(*sync);
        if (!s.get() || PQresultStatus(s.get()) != PGRES_PIPELINE_SYNC) return lost(false, writes, errc::connection_failed);
        PQexitPipelineMode(conn_);
        if (first_error) return unexpected(*first_error);
        return out;
    }

    /// Waits until a NOTIFY on `channel` (LISTENed on this connection;
    /// one that came since the last wait counts) or `wake`: true when one
    /// came. Others are dropped.
    result<bool> wait_notification(const std::string& channel, coord::detail::deadline wake) {
        bool got = false;
        while (conn_) {
            while (PGnotify* n = PQnotifies(conn_)) {
                got = got || channel == n->relname;
                PQfreemem(n);
            }
            if (got) return true;
            const auto w = coord::detail::wait_fd(PQsocket(conn_), POLLIN, wake);
            if (w != coord::detail::wait_result::ready) return false;
            if (PQconsumeInput(conn_) != 1) return lost(false, false, errc::connection_failed);
        }
        return not_sent(errc::connection_failed, "not connected");
    }
    /// Drops the notifications that came and were not waited for.
    void drop_notifications() noexcept {
        while (PGnotify* n = conn_ ? PQnotifies(conn_) : nullptr) PQfreemem(n);
    }

private:
    // The error a failed answer is (nullopt when it succeeded).
    static std::optional<coord::error> statement_error(const answer& a, bool writes) {
        const auto status = PQresultStatus(a.get());
        if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) return std::nullopt;
        const char* state = PQresultErrorField(a.get(), PG_DIAG_SQLSTATE);
        const std::string_view sqlstate = state ? state : "";
        // The store's guard (coord_guard, schema.hpp migration 6) and a
        // schema whose tables or functions are gone: nothing was applied.
        if (auto e = store_state_error(sqlstate, trimmed(PQresultErrorMessage(a.get())))) return e;
        const errc code = sqlstate == "57014"                                    ? errc::statement_timeout
                          : sqlstate == "55P03"                                  ? errc::lock_timeout
                          : sqlstate == "42501" || sqlstate.substr(0, 2) == "28" ? errc::not_authorized
                                                                                 : errc::server_refused;
        return coord::detail::engine_failure(
            coord::detail::call_fate::failed_on_server, writes,
            coord::error(make_error_code(code),
                         trimmed(PQresultErrorMessage(a.get()))));
    }

    static constexpr int timed_out = 1;
    static constexpr int broken = 2;

    // A connection refused for its credentials or TLS settings (libpq's and
    // the server's words: a failed connection carries no SQLSTATE), not for
    // a server that is down or busy.
    static bool refused_credentials(std::string_view why) {
        for (const char* w : {"password authentication failed", "no password supplied", "pg_hba.conf",
                              "certificate verify failed", "does not match host name", "root certificate file",
                              "server does not support SSL", "certificate required", "alert bad certificate",
                              "alert unknown ca", "SCRAM", "permission denied", "does not exist"})
            if (why.find(w) != std::string_view::npos) return true;
        return false;
    }

    static unexpected<coord::error> not_sent(errc code, std::string why) {
        return unexpected(coord::error(make_error_code(code), std::move(why)));
    }

    // The call was (maybe) sent and no answer came: the connection is
    // dropped (a late answer must not be read as the next call's).
    unexpected<coord::error> lost(bool deadline_passed, bool writes, errc code) {
        std::string why = deadline_passed ? "no answer within the call's deadline" : trimmed(conn_ ? PQerrorMessage(conn_) : "");
        if (why.empty()) why = "the connection broke";
        drop();
        const auto own = deadline_passed ? errc::deadline_passed : code;
        return unexpected(coord::detail::engine_failure(coord::detail::call_fate::lost_after_send, writes,
                                                        coord::error(make_error_code(own), why)));
    }

    bool send(const char* sql, const std::string& name, const std::vector<param_value>& params) {
        std::vector<const char*> values;
        std::vector<int> lengths, formats;
        for (const auto& p : params) {
            values.push_back(p.text ? p.text->data() : nullptr);
            lengths.push_back(p.text ? static_cast<int>(p.text->size()) : 0);
            formats.push_back(p.binary ? 1 : 0);
        }
        const int n = static_cast<int>(params.size());
        if (!name.empty())
            return PQsendQueryPrepared(conn_, name.c_str(), n, values.data(), lengths.data(), formats.data(), 0) == 1;
        // Outside a pipeline, a statement without parameters goes as a
        // simple query (which may hold several commands: a migration).
        if (n == 0 && PQpipelineStatus(conn_) == PQ_PIPELINE_OFF) return PQsendQuery(conn_, sql) == 1;
        return PQsendQueryParams(conn_, sql, n, nullptr, values.data(), lengths.data(), formats.data(), 0) == 1;
    }

    // Sends what libpq buffered, reading meanwhile (the server may answer
    // before it takes more). Error values: timed_out, broken.
    result<void, int> flush(coord::detail::deadline until) {
        for (;;) {
            const int f = PQflush(conn_);
            if (f == 0) return {};
            if (f < 0) return unexpected(broken);
            const auto w = coord::detail::wait_fd(PQsocket(conn_), POLLIN | POLLOUT, until);
            if (w == coord::detail::wait_result::timed_out) return unexpected(timed_out);
            if (w == coord::detail::wait_result::failed || PQconsumeInput(conn_) != 1) return unexpected(broken);
        }
    }

    // The next result (nullptr: the current query's results are over),
    // waiting for the server until `until`.
    result<PGresult*, int> next(coord::detail::deadline until) {
        while (PQisBusy(conn_)) {
            const auto w = coord::detail::wait_fd(PQsocket(conn_), POLLIN, until);
            if (w == coord::detail::wait_result::timed_out) return unexpected(timed_out);
            if (w == coord::detail::wait_result::failed || PQconsumeInput(conn_) != 1) return unexpected(broken);
        }
        return PQgetResult(conn_);
    }

    // Flushes what was sent and reads its answer (outside a pipeline). A
    // simple query of several commands has a result each: the answer is the
    // first that failed, or else the last.
    result<answer> answer_of_sent(bool writes, coord::detail::deadline until) {
        if (auto f = flush(until); !f) return lost(f.error() == timed_out, writes, errc::connection_failed);
        std::optional<answer> kept;
        for (;;) {
            auto r = next(until);
            if (!r) return lost(r.error() == timed_out, writes, errc::connection_failed);
            if (!*r) break;
            if (kept && statement_error(*kept, writes)) PQclear(*r);
            else kept.emplace(*r);
        }
        if (!kept) return lost(false, writes, errc::connection_failed);
        if (auto e = statement_error(*kept, writes)) return unexpected(*e);
        return std::move(*kept);
    }

    // The name of `sql` prepared on this connection (prepared on first use):
    // every later call is one round trip without parsing or planning.
    result<std::string> prepared(const char* sql, int nparams, coord::detail::deadline until) {
        auto it = prepared_.find(sql);
        if (it != prepared_.end()) return it->second;
        std::string name = "coord_" + std::to_string(next_name_++);
        if (PQsendPrepare(conn_, name.c_str(), sql, nparams, nullptr) != 1) return lost(false, false, errc::connection_failed);
        if (auto r = answer_of_sent(false, until); !r) return unexpected(r.error());
        prepared_.emplace(sql, name);
        return name;
    }

    PGconn* conn_ = nullptr;
    coord::detail::deadline used_{};  // when a call last took it
    std::unordered_map<std::string, std::string> prepared_;  // SQL text -> statement name, this connection
    std::uint64_t next_name_ = 0;                              // statement names are never reused on a connection
    detail::writer writer_;
};

}  // namespace detail

/// The connections of one store. Thread-safe.
class pool {
public:
    /// Throws std::invalid_argument when `conninfo` is malformed
    /// (conninfo_error) or an option is out of range. Connects to nothing yet.
    pool(std::string conninfo, options opts)
        : conninfo_(std::move(conninfo)), opts_(opts), slots_(std::clamp<std::size_t>(opts.pool_size, 1, 64)) {
        if (auto why = conninfo_error(conninfo_))
            throw std::invalid_argument("coord: PostgreSQL conninfo is malformed: " + *why);
        if (opts_.pool_size < 1 || opts_.pool_size > 64)
            throw std::invalid_argument("coord::postgres::options::pool_size must be 1 to 64");
        using std::chrono::milliseconds;
        coord::detail::check_timeout("coord::postgres::options::operation_timeout", opts_.operation_timeout);
        coord::detail::check_timeout("coord::postgres::options::connect_timeout", opts_.connect_timeout);
        if (opts_.keepalive_idle < std::chrono::seconds{1} || opts_.keepalive_idle > std::chrono::hours{1})
            throw std::invalid_argument("coord::postgres::options::keepalive_idle must be 1 s to 1 h");
    }
    pool(const pool&) = delete;
    pool& operator=(const pool&) = delete;

    /// The conninfo the pool was made from.
    const std::string& conninfo() const noexcept { return conninfo_; }
    /// The options in force.
    const options& opts() const noexcept { return opts_; }

    /// Every call of this pool that touches coord's records carries the
    /// guard of `seen` (the store's context sets it on the pool its
    /// adapters call through).
    void guard_with(detail::seen_store* seen) noexcept { seen_ = seen; }

    /// A call that carries no guard: the schema's migrations and the
    /// store's initialization, which make what the guard checks.
    struct unguarded_t {};
    static constexpr unguarded_t unguarded{};  ///< selects the unguarded call

    /// One call: a connection of the pool for its whole step, and its
    /// deadline (options::operation_timeout from now). Each round trip that
    /// holds a statement with parameters (every operation on coord's
    /// records) runs the guard first in the same round trip and the same
    /// transaction (after BEGIN when the pipeline opens one): a database
    /// whose store is not the one this store object saw refuses the call
    /// before anything is applied (schema.hpp, coord_guard). Statements
    /// sent unprepared (an effect's SQL inside a guarded transaction) carry
    /// none; a hot path's statement compares the guard's value itself
    /// (exec_checking).
    class call {
    public:
        // No connection in time: c_ stays empty and every statement says so.
        /// A guarded call on a connection of `p` (none in time: every statement says so).
        explicit call(pool& p)
            : p_(p), seen_(p.seen_), until_(coord::detail::deadline_after(p.opts_.operation_timeout)),
              c_(p.slots_.take(until_)) {}
        /// A call that carries no guard (migrations, initialization).
        call(pool& p, unguarded_t) : call(p) { seen_ = nullptr; }
        call(const call&) = delete;
        call& operator=(const call&) = delete;
        ~call() { p_.slots_.give(std::move(c_)); }

        /// After the caller's own function ran inside the call (fence_update,
        /// a ledger run): the rest of the call gets a full timeout again.
        void restart_deadline() noexcept { until_ = coord::detail::deadline_after(p_.opts_.operation_timeout); }

        /// One statement in one round trip, with the guard first when it has parameters (`prepare`: as a prepared statement; `writes`: it may change records).
        result<detail::answer> exec(const char* sql, const std::vector<detail::param_value>& params, bool writes,
                                    bool prepare = true) {
            if (auto c = ready(); !c) return unexpected(c.error());
            if (!seen_ || !prepare || params.empty()) {
                auto r = c_->exec(sql, params, writes, prepare, until_);
                settle(r.has_value(), std::string_view(sql).rfind("ROLLBACK", 0) == 0);
                return r;
            }
            auto r = guarded({guard_step(writes), {sql, params}}, 0, writes);
            if (!r) return unexpected(r.error());
            return std::move(r->front());
        }
        /// The steps in one round trip (one transaction when they start with BEGIN), with the guard first (after the BEGIN) when any has parameters; `writes`: they may change records.
        result<std::vector<detail::answer>> pipeline(const std::vector<detail::step>& steps, bool writes) {
            if (auto c = ready(); !c) return unexpected(c.error());
            if (!seen_ || std::none_of(steps.begin(), steps.end(), [](const detail::step& s) { return !s.params.empty(); })) {
                auto r = c_->pipeline(steps, writes, until_);
                settle(r.has_value(), !steps.empty() && std::string_view(steps.back().sql).rfind("ROLLBACK", 0) == 0);
                return r;
            }
            const std::size_t at = !steps.empty() && std::string_view(steps.front().sql) == "BEGIN" ? 1 : 0;
            std::vector<detail::step> all;
            all.reserve(steps.size() + 1);
            all.insert(all.end(), steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(at));
            all.push_back(guard_step(writes));
            all.insert(all.end(), steps.begin() + static_cast<std::ptrdiff_t>(at), steps.end());
            return guarded(std::move(all), at, writes);
        }

        /// What the guard checks this call against ("ID.XMIN" of the
        /// store's coord_store row, as coord_guard answers it), learned by
        /// running the guard alone when the store object saw none yet;
        /// empty for an unguarded call. A statement on a hot path compares
        /// it itself (exec_checking) instead of running the guard beside it.
        result<std::string> seen() {
            if (!seen_) return std::string();
            if (auto v = seen_->get(); !v.empty()) return v;
            if (auto g = check(); !g) return unexpected(g.error());
            return seen_->get();
        }
        /// The guard alone, in a round trip of its own: why a statement that
        /// checks the store itself changed and answered nothing.
        result<void> check() {
            if (auto c = ready(); !c) return unexpected(c.error());
            if (!seen_) return {};
            auto r = guarded({guard_step(false)}, 0, false);
            if (!r) return unexpected(r.error());
            return {};
        }
        /// For a statement that checks the store itself and writes (exec_checking):
        /// the writer's step as parameters, to be set by the statement in the
        /// same transaction when its count is within the range and the other
        /// writers' rows hold what they saw acknowledged, as the guard would
        /// ("UPDATE coord_writer SET n = $next WHERE id = $id AND n BETWEEN
        /// $lo AND $hi AND (cardinality($ids) = 0 OR coord_writers_kept($ids,
        /// $los, $touched))": no other writer, no call of the function): next,
        /// id, lo, hi, ids, los, touched. nullopt when the writer's row may
        /// be missing (never made, or its last touch a day ago: rows
        /// untouched for 30 days are swept; the guarded statement touches it,
        /// and tells a sweep from a loss): then the guarded statement must be
        /// used instead.
        std::optional<std::vector<detail::param_value>> writer_step() {
            if (!seen_ || !c_) return std::nullopt;
            auto& w = writer();
            if (w.lo == 0 || coord::detail::deadline_clock::now() - w.touched_at > std::chrono::hours{24}) return std::nullopt;
            const std::int64_t lo = w.lo, hi = w.hi;
            w.hi += 1;
            w.bumped = true;
            auto sib = p_.siblings(w.id);
            return std::vector<detail::param_value>{detail::param(w.hi), detail::param(w.id),   detail::param(lo),
                                                    detail::param(hi),   detail::param(sib.ids), detail::param(sib.los),
                                                    detail::param(sib.touched)};
        }
        /// A statement that checks the store itself: it compares seen() with
        /// COORD_PG_STORE_SEEN (coord_guard's answer) and changes and answers nothing when
        /// they differ; the caller then runs check(). Sent alone (one
        /// statement, no pipeline): the hot paths' cost stays that of one
        /// statement. The comparison's read of coord_store holds the same
        /// shared lock as the guard to the end of the statement's transaction.
        result<detail::answer> exec_checking(const char* sql, const std::vector<detail::param_value>& params,
                                             bool writes) {
            if (auto c = ready(); !c) return unexpected(c.error());
            auto r = c_->exec(sql, params, writes, true, until_);
            settle(r.has_value(), false);
            if (!r) return unexpected(gone_if_seen(r.error(), true));
            return r;
        }

        /// LISTENs on `channel` (an identifier the engine made) until
        /// unlisten(): notifications wait on the connection meanwhile.
        result<void> listen(const std::string& channel) {
            if (auto c = ready(); !c) return unexpected(c.error());
            restart_deadline();
            auto r = c_->exec(("LISTEN " + channel).c_str(), {}, false, false, until_);
            if (!r) return unexpected(r.error());
            return {};
        }
        /// Waits for a NOTIFY on `channel` until `wake` (see connection::wait_notification).
        result<bool> wait_notification(const std::string& channel, coord::detail::deadline wake) {
            if (auto c = ready(); !c) return unexpected(c.error());
            return c_->wait_notification(channel, wake);
        }
        /// Stops listening on `channel`; its late notifications are dropped.
        result<void> unlisten(const std::string& channel) {
            if (auto c = ready(); !c) return unexpected(c.error());
            restart_deadline();
            auto r = c_->exec(("UNLISTEN " + channel).c_str(), {}, false, false, until_);
            if (!r) return unexpected(r.error());
            c_->drop_notifications();
            return {};
        }

    private:
        // The guard and the writer's check (a write sets the writer's count:
        // connection.hpp, writer; schema.hpp, coord_guard_w).
        detail::step guard_step(bool writes) {
            auto& w = writer();
            const std::int64_t lo = w.lo, hi = w.hi;
            if (writes) {
                w.hi += 1;
                w.bumped = true;
            }
            auto sib = p_.siblings(w.id);
            return {"SELECT coord_guard_w($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                    {detail::param(seen_->get()), detail::param(w.id), detail::param(lo), detail::param(hi),
                     writes ? detail::param(w.hi) : detail::null_param(), detail::param(w.touched_ms),
                     detail::param(sib.ids), detail::param(sib.los), detail::param(sib.touched)}};
        }

        detail::writer& writer() { return c_->writer(p_.writer_epoch_.load(std::memory_order_acquire)); }
        // The connection's settle, and what its writer knows now published to the pool.
        void settle(bool ok, bool rollback) {
            if (c_->settle(ok, rollback)) p_.publish(c_->taken_writer());
        }

        // `all` with the guard at `at`, in one round trip; the guard's answer
        // is checked and left out of what is returned.
        result<std::vector<detail::answer>> guarded(std::vector<detail::step> all, std::size_t at, bool writes) {
            const bool saw = !all[at].params.front().text->empty();
            auto r = c_->pipeline(all, writes, until_);
            // The guard's answer: "ID.XMIN|TOUCHED_MS", the store seen and the writer's last touch.
            std::string g = r && (*r)[at].rows() == 1 ? (*r)[at].text(0, 0) : std::string();
            const auto bar = g.rfind('|');
            if (bar != std::string::npos) c_->taken_writer().pending_touched = std::strtoll(g.c_str() + bar + 1, nullptr, 10);
            settle(r.has_value(), std::string_view(all.back().sql).rfind("ROLLBACK", 0) == 0);
            if (!r) return unexpected(gone_if_seen(r.error(), saw));
            if (bar == std::string::npos) return unexpected(coord::error(make_error_code(errc::bad_answer), "coord_guard_w"));
            seen_->saw(g.substr(0, bar));
            std::vector<detail::answer> out;
            for (std::size_t i = 0; i < r->size(); ++i)
                if (i != at) out.push_back(std::move((*r)[i]));
            return out;
        }

        // A schema gone under a store object that saw it went back.
        static coord::error gone_if_seen(coord::error e, bool saw) {
            if (e == coord::errc::store_uninitialized && saw)
                return detail::went_back_error(
                    "this store object saw it initialized, and its identity or tables are gone now");
            return e;
        }

        result<void> ready() {
            if (!c_)
                return unexpected(coord::error(make_error_code(errc::deadline_passed),
                                               "no pooled connection came free within " +
                                                   detail::millis_text(p_.opts_.operation_timeout)));
            return c_->connect(p_.conninfo_, p_.opts_, until_);
        }

        pool& p_;
        detail::seen_store* seen_;
        coord::detail::deadline until_;
        std::unique_ptr<detail::connection> c_;
    };

    /// After the store was initialized anew (store::initialize with
    /// replace): every connection's writer starts again, with a new row,
    /// and the bounds published so far are dropped (the loss they detected
    /// is what the initialization recovered from).
    void renew_writers() {
        std::lock_guard lk(writers_mutex_);
        writers_.clear();
        writer_epoch_.fetch_add(1, std::memory_order_acq_rel);
    }

private:
    // What a writer of this pool saw acknowledged: its count and its last
    // touch (the server's clock), published when they change (call::settle).
    struct writer_bound {
        std::string id;
        std::int64_t lo;
        std::int64_t touched_ms;
    };
    // The other writers' bounds as PostgreSQL array literals, for
    // coord_writers_kept (schema.hpp, migration 9).
    struct sibling_bounds {
        std::string ids = "{", los = "{", touched = "{";
    };

    void publish(const detail::writer& w) {
        if (w.lo == 0) return;
        std::lock_guard lk(writers_mutex_);
        if (w.epoch != writer_epoch_.load(std::memory_order_relaxed)) return;  // made before renew_writers
        for (auto& b : writers_)
            if (b.id == w.id) {
                b.lo = std::max(b.lo, w.lo);
                b.touched_ms = std::max(b.touched_ms, w.touched_ms);
                return;
            }
        writers_.push_back({w.id, w.lo, w.touched_ms});
    }
    sibling_bounds siblings(const std::string& self) {
        sibling_bounds out;
        std::lock_guard lk(writers_mutex_);
        for (const auto& b : writers_) {
            if (b.id == self) continue;
            if (out.ids.size() > 1) {
                out.ids += ',';
                out.los += ',';
                out.touched += ',';
            }
            out.ids += b.id;  // hex (new_store_identity): nothing to quote
            out.los += std::to_string(b.lo);
            out.touched += std::to_string(b.touched_ms);
        }
        out.ids += '}';
        out.los += '}';
        out.touched += '}';
        return out;
    }

    std::string conninfo_;
    options opts_;
    detail::seen_store* seen_ = nullptr;
    coord::detail::connection_pool<detail::connection> slots_;
    std::mutex writers_mutex_;
    std::vector<writer_bound> writers_;  // one per connection whose writer made its row
    std::atomic<unsigned> writer_epoch_{0};
};

}  // namespace coord::postgres
