// SPDX-License-Identifier: Apache-2.0
// coord/sqlite/connection.hpp: the SQLite connection layer of coord's
// engine: the error codes, the store's options, the database handle and the
// one way an operation runs: one transaction.
//
// A write begins immediately (BEGIN IMMEDIATE: the database's write lock is
// taken first, so two processes never both read and then fail to upgrade);
// a read is one deferred transaction (a consistent snapshot in WAL mode).
// Waits for the lock are bounded by options::busy_timeout, in this process
// (a timed mutex over the connection) and across processes (SQLite's busy
// handler). Every error carries SQLite's own words and the file's path in
// the error value (coord::error::detail()).
//
// Going back. The database counts its write transactions (coord_store's
// generation, raised inside each one) and every store object records the
// count it committed in a small file beside the database, PATH-coord (with
// the database's identity, a random value written when it was created). A
// store opened on a database whose identity is not the recorded one (the
// file deleted and made again) or whose generation is below the recorded
// one (an older copy put back), and a write that finds the generation below
// what this object committed before, is refused with
// errc::state_went_back: nothing from the older state is handed out (the
// store object opens, and every call on it is refused, reads too). Not
// detectable: the database and PATH-coord deleted or restored together (a
// new store, or the old one as it was); PATH-coord may lag the database by
// the last writes of processes committing at the same instant (each records
// its own count, without a lock: never ahead of the database). With
// durability::off (scratch data: a power loss may lose anything) a store
// object raises the count in at most one write transaction a millisecond
// (its first write, then the first one a millisecond or more after its last
// raise); every write still reads it. A copy taken in the last millisecond
// of a process's writes before it died without closing the store is then
// not detected either. Raising it in every transaction writes one more page
// per commit, which costs nothing beside an fsync and 40% without one.
//
// Recovery (store::initialize with replace): one write transaction gives the
// database a new identity and a generation above both counts, raises its
// fence records, segment counters and reservations to the floors an
// operator states, and keeps the floors in coord_store, where every write
// transaction reads them with its generation (a missing record starts from
// them; a slot scheduled at or before the ledger floor is not run again).
// A write of a store object that saw another identity is refused with
// errc::store_identity_changed.
#pragma once

// Marks that a store header is in (tests/layering_test.cpp checks that no
// primitive or rule header pulls one in); every engine header includes this one.
#ifndef COORD_STORE_HEADER_INCLUDED
#define COORD_STORE_HEADER_INCLUDED 1
#endif

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "coord/detail/engine_errors.hpp"
#include "coord/detail/engine_outcome.hpp"
#include "coord/detail/options.hpp"
#include "coord/error.hpp"
#include "coord/initial_floors.hpp"
#include "coord/result.hpp"

namespace coord::sqlite {

/// Failures of the SQLite engine.
enum class errc {
    /// The database file could not be opened or created (a missing
    /// directory, permissions).
    open_failed = 1,
    /// The file is not an SQLite database (SQLITE_NOTADB): nothing was written to it.
    not_a_database,
    /// The database is damaged or truncated (SQLITE_CORRUPT): nothing was written.
    corrupt,
    /// The database cannot be written (a read-only file or file system).
    read_only,
    /// The disk or the file size limit is full (SQLITE_FULL): the transaction rolled back.
    disk_full,
    /// Another process held the database's lock past options::busy_timeout.
    lock_timeout,
    /// An I/O error; for a write at COMMIT it is errc::outcome_unknown instead.
    io_error,
    /// SQLite refused a statement (the transaction rolled back).
    server_refused,
    /// The database's coord schema is newer than this library knows.
    schema_too_new,
    /// A row was not of the shape the engine expects (schema drift?).
    bad_answer,
};

inline const std::error_category& category() noexcept {
    static const coord::detail::engine_category<errc, 10> instance(
        "coord.sqlite", "SQLite",
        {{
             {errc::open_failed, coord::condition::unavailable, "SQLite database cannot be opened"},
             {errc::not_a_database, coord::condition::corrupt_state, "file is not an SQLite database"},
             {errc::corrupt, coord::condition::corrupt_state, "SQLite database is corrupt"},
             {errc::read_only, coord::condition::unavailable, "SQLite database is read-only"},
             {errc::disk_full, coord::condition::unavailable, "disk full"},
             {errc::lock_timeout, coord::condition::unavailable, "SQLite database's lock not free within the busy timeout"},
             {errc::io_error, coord::condition::unavailable, "SQLite I/O error"},
             {errc::server_refused, coord::condition::unavailable, "SQLite refused the statement"},
             {errc::schema_too_new, coord::condition::unavailable, "SQLite schema newer than this coord"},
             {errc::bad_answer, coord::condition::outcome_unknown, "unexpected row from SQLite"},
        }});
    return instance;
}
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), category()}; }

}  // namespace coord::sqlite

/// @cond STD_SPECIALIZATIONS
template <>
struct std::is_error_code_enum<coord::sqlite::errc> : std::true_type {};
/// @endcond

namespace coord::sqlite {

/// How a commit reaches the disk (PRAGMA synchronous, in WAL mode).
enum class durability {
    /// The default: every acknowledged transaction survives kill -9 and
    /// power loss (synchronous=FULL: the WAL is fsynced at each commit).
    full,
    /// Survives kill -9; a power loss may lose the last transactions
    /// acknowledged before it (synchronous=NORMAL), never corrupting the
    /// database. A lost transaction breaks the promise it carried: a lease
    /// or a fence token may be granted again, a segment range handed out
    /// twice, a done slot run again.
    normal,
    /// Tests and scratch data only: a power loss may lose or corrupt the
    /// database (synchronous=OFF). Every promise may break on power loss.
    off,
};

/// Store settings; out-of-range values make the constructor throw
/// std::invalid_argument naming the field.
struct options {
    /// How long an operation waits for the database's lock (1 ms to 24 h),
    /// held by another thread or process, before errc::lock_timeout.
    std::chrono::milliseconds busy_timeout = coord::detail::defaults::lock_timeout;
    durability sync = durability::full;  ///< what a commit waits for (PRAGMA synchronous)
};

namespace detail {

inline std::int64_t as_i64(std::uint64_t v) noexcept { return static_cast<std::int64_t>(v); }   // bits kept
inline std::uint64_t as_u64(std::int64_t v) noexcept { return static_cast<std::uint64_t>(v); }  // bits kept

/// One prepared statement of the connection; reset after each use.
class statement {
public:
    explicit statement(sqlite3_stmt* s) noexcept : s_(s) {}
    statement(const statement&) = delete;
    statement& operator=(const statement&) = delete;
    ~statement() { sqlite3_finalize(s_); }

    statement& reset() noexcept {
        sqlite3_reset(s_);
        sqlite3_clear_bindings(s_);
        return *this;
    }
    statement& bind(int i, std::int64_t v) noexcept {
        sqlite3_bind_int64(s_, i, v);
        return *this;
    }
    statement& bind(int i, std::string_view text) noexcept {
        sqlite3_bind_text64(s_, i, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
        return *this;
    }
    statement& bind_blob(int i, std::string_view bytes) noexcept {
        // A zero-length blob, not NULL, for an empty value.
        if (bytes.empty()) sqlite3_bind_zeroblob(s_, i, 0);
        else sqlite3_bind_blob64(s_, i, bytes.data(), bytes.size(), SQLITE_TRANSIENT);
        return *this;
    }
    /// SQLITE_ROW, SQLITE_DONE or an error code.
    int step() noexcept { return sqlite3_step(s_); }

    std::int64_t i64(int col) const noexcept { return sqlite3_column_int64(s_, col); }
    std::uint64_t u64(int col) const noexcept { return as_u64(i64(col)); }
    std::string text(int col) const {
        const auto* p = sqlite3_column_text(s_, col);
        return p ? std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(s_, col)))
                 : std::string();
    }
    std::string blob(int col) const {
        const void* p = sqlite3_column_blob(s_, col);
        const auto n = static_cast<std::size_t>(sqlite3_column_bytes(s_, col));
        return p ? std::string(static_cast<const char*>(p), n) : std::string();
    }

private:
    sqlite3_stmt* s_;
};

/// The error of an SQLite result code, with SQLite's words and the file.
inline coord::error error_of(int rc, sqlite3* db, const std::string& path) {
    errc code;
    switch (rc & 0xff) {
    case SQLITE_NOTADB: code = errc::not_a_database; break;
    case SQLITE_CORRUPT: code = errc::corrupt; break;
    case SQLITE_READONLY: code = errc::read_only; break;
    case SQLITE_FULL: code = errc::disk_full; break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: code = errc::lock_timeout; break;
    case SQLITE_IOERR: code = errc::io_error; break;
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_AUTH: code = errc::open_failed; break;
    default: code = errc::server_refused; break;
    }
    std::string words = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    return coord::error(make_error_code(code), path + ": " + words);
}

}  // namespace detail

namespace detail {
/// A lock whose acquisition waits at most a given time. Built on a mutex and
/// a condition variable rather than std::timed_mutex, whose timed lock
/// (pthread_mutex_clocklock) ThreadSanitizer does not see.
class timed_lock {
public:
    bool try_lock_for(std::chrono::milliseconds d) {
        std::unique_lock lk(m_);
        if (!cv_.wait_for(lk, d, [&] { return !held_; })) return false;
        held_ = true;
        return true;
    }
    void unlock() {
        {
            std::lock_guard lk(m_);
            held_ = false;
        }
        cv_.notify_one();
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    bool held_ = false;
};
}  // namespace detail

/// One SQLite connection to one database file, shared by the threads of a
/// store object under a timed mutex (SQLite runs one writer at a time
/// anyway: a second connection would wait on the same lock).
class database {
public:
    /// Opens (or creates) the database at `path` (already resolved) with WAL
    /// and the durability asked for. Throws store_error naming the file.
    database(std::filesystem::path path, options opts) : path_(std::move(path)), opts_(opts) {
        coord::detail::check_timeout("coord::sqlite::options::busy_timeout", opts_.busy_timeout);
        const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW;
        const int rc = sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr);
        if (rc != SQLITE_OK) fail_open(rc);
        sqlite3_extended_result_codes(db_, 1);
        if (sqlite3_db_readonly(db_, "main") == 1) {
            close();
            throw store_error(make_error_code(errc::read_only), "coord SQLite store " + path_.string() + ": the file cannot be written");
        }
        sqlite3_busy_timeout(db_, static_cast<int>(opts_.busy_timeout.count()));
        // The first statements read the header: a file that is not a
        // database, or a damaged one, is refused here, never reset.
        const char* sync = opts_.sync == durability::full ? "PRAGMA synchronous=FULL"
                           : opts_.sync == durability::normal ? "PRAGMA synchronous=NORMAL"
                                                              : "PRAGMA synchronous=OFF";
        // A page cache of up to 64 MiB per store object (allocated as pages
        // are read): a write's B-tree path stays in memory with millions of keys.
        // Processes opening a new file at once all ask for WAL, each holding
        // the shared lock while it waits for the exclusive one: SQLite's busy
        // handler cannot resolve that (each waits for the other), so the
        // switch is tried in short attempts, the locks released in between,
        // until busy_timeout.
        sqlite3_busy_timeout(db_, 10);
        const auto until = std::chrono::steady_clock::now() + opts_.busy_timeout;
        for (;;) {
            const int e = exec_raw("PRAGMA journal_mode=WAL");
            if (e == SQLITE_OK) break;
            if ((e & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= until) fail_open(e);
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        sqlite3_busy_timeout(db_, static_cast<int>(opts_.busy_timeout.count()));
        for (const char* sql : {sync, "PRAGMA cache_size=-65536"}) {
            if (int e = exec_raw(sql); e != SQLITE_OK) fail_open(e);
        }
    }
    database(const database&) = delete;
    database& operator=(const database&) = delete;
    ~database() {
        raise_on_close();
        close();
    }

    /// The database file's path.
    const std::filesystem::path& path() const noexcept { return path_; }
    /// The options in force.
    const options& opts() const noexcept { return opts_; }

    /// One operation: the connection for this thread, and one transaction.
    class transaction {
    public:
        /// Takes the connection (within the busy timeout) and begins: IMMEDIATE
        /// when `writes` (the write lock first), else deferred (a snapshot).
        /// Refused on a database that went back.
        transaction(database& d, bool writes) : transaction(d, writes, false) {}
        /// The recovery's transaction (database::reinitialize): it begins on
        /// a database that went back.
        struct recovering_t {};
        static constexpr recovering_t recovering{};  ///< selects the recovery's transaction
        /// The recovery's transaction, which begins on a database that went back.
        transaction(database& d, bool writes, recovering_t) : transaction(d, writes, true) {}

    private:
        transaction(database& d, bool writes, bool recovering) : d_(d), writes_(writes) {
            if (!d.mutex_.try_lock_for(d.opts_.busy_timeout)) {
                error_ = coord::error(make_error_code(errc::lock_timeout),
                                      d.path_.string() + ": another thread of this process held the database");
                return;
            }
            locked_ = true;
            if (int rc = d.exec_cached(writes ? "BEGIN IMMEDIATE" : "BEGIN"); rc != SQLITE_OK) {
                error_ = detail::error_of(rc, d.db_, d.path_.string());
                return;
            }
            open_ = true;
            if (d.went_back_ && !recovering) {
                error_ = *d.went_back_;
                (void)d.exec_cached("ROLLBACK");
                open_ = false;
                return;
            }
            if (writes && d.counting_) {
                auto g = d.next_generation(floors_);
                if (!g) {
                    error_ = g.error();
                    (void)d.exec_cached("ROLLBACK");
                    open_ = false;
                    return;
                }
                generation_ = *g;
            }
        }

    public:
        transaction(const transaction&) = delete;
        transaction& operator=(const transaction&) = delete;
        ~transaction() {
            if (open_) (void)d_.exec_cached("ROLLBACK");
            if (locked_) d_.mutex_.unlock();
        }

        /// Why the transaction could not begin (busy, I/O, the database went
        /// back), or nothing.
        const std::optional<coord::error>& failed() const noexcept { return error_; }
        /// The floors the store was initialized with, read with the
        /// generation (a writing transaction only; zeros otherwise).
        const coord::detail::stated_floors& floors() const noexcept { return floors_; }
        /// True when the transaction began.
        explicit operator bool() const noexcept { return open_; }

        /// The prepared statement of `sql` (prepared once per connection), reset.
        result<detail::statement*> prepare(const char* sql) { return d_.prepare(sql); }

        /// Runs a statement that returns no rows.
        result<void> run(detail::statement& st) {
            const int rc = st.step();
            st.reset();
            if (rc != SQLITE_DONE && rc != SQLITE_ROW) return unexpected(error(rc));
            return {};
        }
        /// Steps a statement: true with a row to read, false at the end.
        /// (At the end or on an error the statement is reset; after a row
        /// the caller resets it when done reading.)
        result<bool> next(detail::statement& st) {
            const int rc = st.step();
            if (rc == SQLITE_ROW) return true;
            st.reset();
            if (rc == SQLITE_DONE) return false;
            return unexpected(error(rc));
        }

        /// Commits. A writing transaction whose COMMIT failed on I/O may or
        /// may not be in the database (the WAL frames may be there, unsynced):
        /// errc::outcome_unknown. Any other failure rolled back.
        result<void> commit() {
            const int rc = d_.exec_cached("COMMIT");
            if (rc == SQLITE_OK) {
                open_ = false;
                if (generation_ != 0) d_.committed(generation_);
                return {};
            }
            auto e = error(rc);
            const bool unsure = (rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_CORRUPT;
            if (sqlite3_get_autocommit(d_.db_) == 0) (void)d_.exec_cached("ROLLBACK");
            open_ = false;
            return unexpected(coord::detail::engine_failure(
                unsure ? coord::detail::call_fate::lost_after_send : coord::detail::call_fate::failed_on_server,
                writes_, std::move(e)));
        }

        /// The connection, for an effect that writes in this transaction.
        sqlite3* handle() const noexcept { return d_.db_; }

        /// The error for SQLite's result code `rc`, with SQLite's words and the file's path.
        coord::error error(int rc) const { return detail::error_of(rc, d_.db_, d_.path_.string()); }

    private:
        database& d_;
        bool writes_;
        bool locked_ = false;
        bool open_ = false;
        std::uint64_t generation_ = 0;  // this write's, once counted (0: not raised)
        coord::detail::stated_floors floors_;
        std::optional<coord::error> error_;
    };

    /// Starts counting write transactions against the record beside the
    /// file (PATH-coord, made when missing): refused with
    /// errc::state_went_back when the database is not the one recorded
    /// there or is older. Called once, by the store's constructor (before
    /// any other thread can reach the connection), after the schema has
    /// coord_store.
    result<void> watch_generations() {
        // The record first, then the database: the record is written after
        // each commit, so a database read after it is never below it unless
        // the database went back (read the other way round, a commit of
        // another process in between would look like a rollback).
        const std::string side = path_.string() + "-coord";
        side_fd_ = ::open(side.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (side_fd_ < 0) return unexpected(coord::error(std::error_code(errno, std::system_category()), side));
        while (::flock(side_fd_, LOCK_EX) != 0)
            if (errno != EINTR) return unexpected(coord::error(std::error_code(errno, std::system_category()), side));
        auto unlock = [&] { (void)::flock(side_fd_, LOCK_UN); };
        char buf[side_size + 1] = {};
        const ssize_t n = ::pread(side_fd_, buf, side_size, 0);
        auto st = prepare("SELECT identity, generation FROM coord_store WHERE id = 1");
        if (!st) {
            unlock();
            return unexpected(st.error());
        }
        if ((*st)->step() != SQLITE_ROW) {
            (*st)->reset();
            unlock();
            return unexpected(coord::error(coord::make_error_code(coord::errc::state_corrupt),
                                           path_.string() + ": the coord_store row is missing"));
        }
        const std::string identity((*st)->text(0));
        const std::uint64_t generation = (*st)->u64(1);
        (*st)->reset();
        if (n == 0) {  // a database coord never recorded: record it now
            const std::string text = side_text(identity, generation);
            const bool ok = ::pwrite(side_fd_, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size());
            unlock();
            if (!ok) return unexpected(coord::error(std::error_code(errno, std::system_category()), side));
            identity_ = identity;
            recorded_ = seen_ = generation;
            counting_ = true;
            return {};
        }
        unlock();
        auto recorded = parse_side(std::string_view(buf, n < 0 ? 0 : static_cast<std::size_t>(n)));
        if (!recorded)
            return unexpected(coord::error(coord::make_error_code(coord::errc::state_corrupt),
                                           side + ": not coord's record of the database's generation"));
        identity_ = identity;
        recorded_ = recorded->second;
        seen_ = generation;
        counting_ = true;
        if (recorded->first != identity)
            went_back_ = went_back("it is not the database coord last wrote there (its identity is " + identity + ", " +
                                   side + " records " + recorded->first +
                                   "): the file was deleted or replaced, and made again");
        else if (generation < recorded->second)
            went_back_ = went_back("its generation is " + std::to_string(generation) + ", below the " +
                                   std::to_string(recorded->second) + " recorded in " + side +
                                   ": an older copy of the database was put back");
        return {};
    }

    /// Why every call on this database is refused (it went back), or nothing.
    const std::optional<coord::error>& went_back_error() const noexcept { return went_back_; }

    /// The recovery: in one write transaction, a new identity and a
    /// generation above every count seen (the database's, PATH-coord's,
    /// this object's), `f` kept in coord_store, fence records, segment
    /// counters and reservations raised to the floors; then PATH-coord
    /// records the new identity and generation. Refused with
    /// store_already_initialized unless `replace` (a database is
    /// initialized when first opened). With `fence_now`, the fence floor is
    /// also above every lease token the database granted. Returns the new
    /// identity.
    result<std::string> reinitialize(coord::detail::stated_floors f, bool fence_now, bool replace) {
        if (!replace)
            return unexpected(coord::error(coord::make_error_code(coord::errc::store_already_initialized),
                                           "coord SQLite store " + path_.string() +
                                               " is already initialized (when it was first opened); replacing its "
                                               "identity (--force) makes every process that opened it reopen"));
        transaction t(*this, true, transaction::recovering);
        if (!t) return unexpected(*t.failed());
        auto cur = t.prepare("SELECT (SELECT generation FROM coord_store WHERE id = 1), "
                             "(SELECT coalesce(max(last_token), 0) FROM coord_lease)");
        if (!cur) return unexpected(cur.error());
        auto row = t.next(**cur);
        if (!row) return unexpected(row.error());
        const std::uint64_t generation = std::max({(*cur)->u64(0), recorded_, seen_}) + 1;
        if (fence_now) f.fence = std::max<fence_token>(f.fence, (*cur)->u64(1) + 1);  // above every lease token
        (*cur)->reset();
        const std::string id = coord::detail::new_store_identity();
        auto up = t.prepare("UPDATE coord_store SET identity = ?1, generation = ?2, segment_floor = ?3, fence_floor = ?4, "
                            "ledger_floor_ms = ?5, reservation_floor_ms = ?6 WHERE id = 1");
        if (!up) return unexpected(up.error());
        (*up)->bind(1, id)
            .bind(2, detail::as_i64(generation))
            .bind(3, detail::as_i64(f.segment))
            .bind(4, detail::as_i64(f.fence))
            .bind(5, f.ledger_ms)
            .bind(6, f.reservation_ms);
        if (auto w = t.run(**up); !w) return unexpected(w.error());
        // Tokens and counters are below 2^63 here (the store refuses larger
        // floors), stored as they are.
        for (auto [sql, v] : {std::pair{"UPDATE coord_fence SET highest = ?1, has_seq = 0, seq = 0 WHERE written AND "
                                        "highest >= 0 AND highest < ?1",
                                        detail::as_i64(f.fence)},
                              std::pair{"UPDATE coord_segment SET next = ?1 WHERE next >= 0 AND next < ?1",
                                        detail::as_i64(f.segment + 1)},
                              std::pair{"UPDATE coord_reservation SET until_ms = ?1 WHERE until_ms < ?1", f.reservation_ms}}) {
            auto st = t.prepare(sql);
            if (!st) return unexpected(st.error());
            (*st)->bind(1, v);
            if (auto w = t.run(**st); !w) return unexpected(w.error());
        }
        if (auto c = t.commit(); !c) return unexpected(c.error());
        const std::string text = side_text(id, generation);
        while (::flock(side_fd_, LOCK_EX) != 0)
            if (errno != EINTR) return unexpected(coord::error(std::error_code(errno, std::system_category()), path_.string() + "-coord"));
        const bool ok = ::pwrite(side_fd_, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size());
        const int saved = errno;
        (void)::flock(side_fd_, LOCK_UN);
        if (!ok) return unexpected(coord::error(std::error_code(saved, std::system_category()), path_.string() + "-coord"));
        identity_ = id;
        recorded_ = seen_ = generation;
        went_back_.reset();
        return id;
    }

    /// Runs a statement with no parameters (a pragma, a migration's SQL).
    int exec_raw(const char* sql) noexcept { return sqlite3_exec(db_, sql, nullptr, nullptr, nullptr); }
    /// The same for a statement run in every transaction (BEGIN, COMMIT,
    /// ROLLBACK): prepared once, not parsed each time.
    int exec_cached(const char* sql) noexcept {
        auto st = prepare(sql);
        if (!st) return exec_raw(sql);
        const int rc = (*st)->step();
        (*st)->reset();
        return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
    }

private:
    // With durability::off: writes committed since this object last raised
    // the count are counted in one more write transaction, so a copy taken
    // before them and put back after a clean close is below the record.
    void raise_on_close() noexcept {
        if (!db_ || !counting_ || !unraised_ || went_back_) return;
        raised_at_.reset();
        try {
            transaction t(*this, true);
            if (t) (void)t.commit();
        } catch (...) {  // best effort: a process that dies does not get here either
        }
    }

    // A constructor that throws runs no destructor: the handle is closed first.
    [[noreturn]] void fail_open(int rc) {
        const auto e = detail::error_of(rc, db_, path_.string());
        close();
        throw store_error(e, "coord SQLite store " + e.detail());
    }
    void close() noexcept {
        statements_.clear();
        if (db_) sqlite3_close_v2(db_);
        db_ = nullptr;
        if (side_fd_ >= 0) ::close(side_fd_);
        side_fd_ = -1;
    }

    // PATH-coord: "coord-sqlite 1 <identity: 32 hex digits> <generation: 20 digits>\n".
    static constexpr std::size_t side_size = 13 + 2 + 32 + 1 + 20 + 1;
    static constexpr std::size_t side_generation_at = 13 + 2 + 32 + 1;
    static std::string side_text(const std::string& identity, std::uint64_t generation) {
        return "coord-sqlite 1 " + identity + " " + digits(generation) + "\n";
    }
    static std::string digits(std::uint64_t v) {
        std::string g = std::to_string(v);
        g.insert(0, 20 - g.size(), '0');
        return g;
    }
    static std::optional<std::pair<std::string, std::uint64_t>> parse_side(std::string_view t) {
        if (t.size() != side_size || t.substr(0, 15) != "coord-sqlite 1 " || t[side_generation_at - 1] != ' ' ||
            t.back() != '\n')
            return std::nullopt;
        std::uint64_t g = 0;
        const char* b = t.data() + side_generation_at;
        auto [p, ec] = std::from_chars(b, b + 20, g);
        if (ec != std::errc{} || p != b + 20) return std::nullopt;
        return std::pair{std::string(t.substr(15, 32)), g};
    }
    coord::error went_back(const std::string& what) const {
        return coord::error(coord::make_error_code(coord::errc::state_went_back),
                            "coord SQLite store " + path_.string() + " went back: " + what +
                                "; nothing is answered from it. Put back the newest copy of the database (with its "
                                "-wal file) if there is one; otherwise recover stating floors above everything it "
                                "handed out: coordctl store init --store sqlite:PATH --force --segment-floor N "
                                "--fence-floor now --ledger-floor now (docs/concepts/went-back.md)");
    }

    // Inside a write transaction: the database's count of write
    // transactions raised (with durability::off, only if this object last
    // raised it a millisecond ago or more) and the generation returned (0
    // when not raised); refused when it was below what this object
    // committed or read before (the file went back under it).
    result<std::uint64_t> next_generation(coord::detail::stated_floors& floors) {
        const auto now = std::chrono::steady_clock::now();
        const bool raise = opts_.sync != durability::off || !raised_at_ ||
                           now - *raised_at_ >= std::chrono::milliseconds(1);
        if (raise) {
            auto up = prepare("UPDATE coord_store SET generation = generation + 1 WHERE id = 1");
            if (!up) return unexpected(up.error());
            const int urc = (*up)->step();
            (*up)->reset();
            if (urc != SQLITE_DONE) return unexpected(detail::error_of(urc, db_, path_.string()));
        }
        auto st = prepare("SELECT generation, identity, segment_floor, fence_floor, ledger_floor_ms, reservation_floor_ms "
                          "FROM coord_store WHERE id = 1");
        if (!st) return unexpected(st.error());
        const int rc = (*st)->step();
        if (rc != SQLITE_ROW) {
            (*st)->reset();
            return unexpected(detail::error_of(rc == SQLITE_DONE ? SQLITE_CORRUPT : rc, db_, path_.string()));
        }
        const std::uint64_t g = (*st)->u64(0);
        const bool same = (*st)->text(1) == identity_;
        floors = {(*st)->u64(2), (*st)->u64(3), (*st)->i64(4), (*st)->i64(5)};
        (*st)->reset();
        if (!same)
            return unexpected(coord::error(coord::make_error_code(coord::errc::store_identity_changed),
                                           "coord SQLite store " + path_.string() +
                                               " was initialized again since this store object opened it: open it again"));
        const std::uint64_t before = raise ? g - 1 : g;
        if (before < seen_)
            return unexpected(went_back("its generation is " + std::to_string(before) + ", below the " +
                                        std::to_string(seen_) + " this process committed or read"));
        if (!raise) {
            seen_ = g;
            unraised_ = true;
            return 0;
        }
        return g;
    }
    // After a commit that raised the count: the count recorded beside the
    // file (no lock: a concurrent writer's larger count may be overwritten
    // by this smaller one, never the other way round beyond what the
    // database holds).
    void committed(std::uint64_t g) noexcept {
        seen_ = g;
        raised_at_ = std::chrono::steady_clock::now();
        unraised_ = false;
        const std::string d = digits(g);
        (void)!::pwrite(side_fd_, d.data(), d.size(), static_cast<off_t>(side_generation_at));
    }

    result<detail::statement*> prepare(const char* sql) {
        auto it = statements_.find(sql);
        if (it != statements_.end()) return &it->second->reset();
        sqlite3_stmt* s = nullptr;
        const int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
        if (rc != SQLITE_OK) return unexpected(detail::error_of(rc, db_, path_.string()));
        auto [pos, _] = statements_.emplace(sql, std::make_unique<detail::statement>(s));
        return pos->second.get();
    }

    std::filesystem::path path_;
    options opts_;
    sqlite3* db_ = nullptr;
    int side_fd_ = -1;
    bool counting_ = false;   // write transactions raise coord_store's generation
    std::uint64_t seen_ = 0;  // the largest generation this object read or committed
    std::optional<std::chrono::steady_clock::time_point> raised_at_;  // this object's last committed raise
    bool unraised_ = false;  // a write committed since then without raising the count
    std::uint64_t recorded_ = 0;  // PATH-coord's generation when this object opened
    std::string identity_;        // the database's identity when this object opened (or initialized) it
    std::optional<coord::error> went_back_;  // set when opened: every call is refused
    detail::timed_lock mutex_;
    std::unordered_map<std::string, std::unique_ptr<detail::statement>> statements_;
};

}  // namespace coord::sqlite
