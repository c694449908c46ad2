// SPDX-License-Identifier: Apache-2.0
// coord/storage/file.hpp: file_store, the durable embedded store: one state
// file that several processes on one machine may share.
//
// Each operation is one atomic step for every thread and process that opens
// the same path: it takes an exclusive flock on PATH.lock, reads and checks
// the whole state file, applies the same rule as memory_store, writes the new
// state to PATH.tmp, fsyncs it, renames it over PATH and fsyncs the directory.
// So an acknowledged operation survives kill -9 of the process (and a power
// cut, as far as the file system keeps fsync's promise), and a reader sees
// either the old state or the new one, never half of one.
//
// The file carries a magic, a format version, a generation counter, its
// length and CRC-32C checksums. A truncated, bit-flipped or foreign file is
// reported (errc::state_truncated, errc::state_corrupt,
// errc::state_unsupported; the constructor throws store_error naming the
// file) and never silently reset; the store refuses to write over it. A file
// that vanishes or goes back to an older generation gives
// errc::state_went_back for every operation: while a process has it open,
// and also in a process that opens it later, because every write records
// its generation in the lock file (so a state file deleted, or replaced by
// an older copy, between two coordctl calls is caught). initialize(floors,
// true) is the recovery that hands nothing out twice. Not detectable: the
// state file and its lock file deleted or restored together (that is a new
// store, or the old one as it was), and a copy of another store with a
// higher generation.
//
// One store, however it is reached: the path is resolved at open (symbolic
// links to the file or its directory, ".", "..", "//"), so every spelling
// gives the same state and the same lock file. A hard-linked state file is
// refused (errc::state_hard_linked): a write replaces one name and the other
// would keep the old state. A lock file removed or replaced while a process
// waits on it never yields an exclusive step: after the flock the store
// checks that the file it locked is the one at the path, and retries if not.
// Nor does one removed while a process holds it (a temp-file cleaner): the
// commit is a compare-and-swap on the state file's identity. Each write goes
// to a temporary file it creates exclusively, and the rename is made, under
// a short flock on the directory that every writer takes for its rename,
// only if the state file at the path is still the one the operation read and
// the temporary file is still its own; otherwise nothing was written and the
// operation runs again on the state now at the path. So two processes are
// never both told they hold one name, whatever happens to the lock file.
// A path that is a directory, FIFO, device or socket is refused at open
// (errc::state_not_regular), without blocking. A rewrite keeps the state
// file's mode and owner. A state over the format's limits (a string over 256
// MiB, the file over 1 GiB) is refused before anything is written
// (errc::state_too_large).
//
// Lease expiry is judged on the store's Clock, system_clock by default: the
// one clock all processes of the machine share. It is the wall clock and not
// the steady clock because expiry times are persisted, and a steady clock's
// readings mean nothing after a reboot. A wall-clock step forward ends terms
// early; the next holder gets a larger fence token, so fenced resources stay
// safe. A step back lengthens terms.
//
// Cost: a few system calls and two fsyncs per write; the whole state is
// rewritten, so keep one file to thousands of keys, not millions.
//
//   coord::file_store store{"/var/lib/myapp/coord.state"};
//   coord::basic_fenced_resource res{store, "orders"};
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>

#include "coord/clock.hpp"
#include "coord/detail/binary.hpp"
#include "coord/detail/deadline.hpp"
#include "coord/detail/lease_poll.hpp"
#include "coord/detail/options.hpp"
#include "coord/detail/path.hpp"
#include "coord/detail/string_map.hpp"
#include "coord/error.hpp"
#include "coord/initial_floors.hpp"
#include "coord/result.hpp"
#include "coord/rules/fence.hpp"
#include "coord/rules/lease.hpp"
#include "coord/rules/ledger.hpp"
#include "coord/rules/reservation.hpp"
#include "coord/rules/segment.hpp"

#ifndef COORD_STORE_HEADER_INCLUDED
#define COORD_STORE_HEADER_INCLUDED 1
#endif

namespace coord {

/// How a file_store writes.
struct file_store_options {
    /// fsync the state file and its directory before an operation returns.
    /// Turning it off keeps kill -9 safety (the kernel has the data) but not
    /// power-cut safety.
    bool fsync = true;
    /// How long an operation waits for the state's lock (1 ms to 24 h)
    /// before it gives up with errc::lock_timeout (condition unavailable,
    /// nothing done): another process holding it may be paused. The wait
    /// is a short backoff (from 50 us, at most 20 ms between tries): flock
    /// has no timed wait.
    std::chrono::milliseconds lock_timeout = coord::detail::defaults::lock_timeout;
};

namespace detail {

/// Everything a file store keeps; each table uses the rule its primitive defines.
struct file_state {
    std::uint64_t generation = 0;
    /// What a recovery stated (basic_file_store::initialize): where a record
    /// is missing (possibly lost), the store answers from these.
    stated_floors floors;
    string_map<fence_rule::record> fences;
    string_map<lease_rule::record> leases;
    string_map<reservation_rule::record> reservations;
    string_map<segment_rule::record> segments;
    string_map<ledger_record> ledger;
    string_map<lease_queue_rule::record> queues;
};

/// A file descriptor closed on destruction.
class unique_fd {
public:
    unique_fd() = default;
    explicit unique_fd(int fd) noexcept : fd_(fd) {}
    unique_fd(unique_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    unique_fd& operator=(unique_fd&& o) noexcept {
        reset(std::exchange(o.fd_, -1));
        return *this;
    }
    ~unique_fd() { reset(); }
    void reset(int fd = -1) noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }
    int get() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }

private:
    int fd_ = -1;
};

inline std::error_code last_errno() noexcept { return {errno, std::system_category()}; }

inline int retry_open(const char* path, int flags, mode_t mode = 0644) noexcept {
    int fd;
    do fd = ::open(path, flags | O_CLOEXEC, mode);
    while (fd < 0 && errno == EINTR);
    return fd;
}

/// The on-disk format of file_store, version 1.
///
///   header (40 bytes, little-endian):
///   +--------+---------+-------+------------+-------------+-------------+------------+
///   | magic  | version | flags | generation | payload_len | payload_crc | header_crc |
///   | 8 B    | u32     | u32   | u64        | u64         | u32 CRC-32C | u32 CRC-32C|
///   +--------+---------+-------+------------+-------------+-------------+------------+
///   payload: u32 section count, then per section: u8 id, u64 length, bytes.
///   Section 1, fences: u64 n, then n x (key, highest, written, has_seq, seq, value).
///   Section 2, leases: u64 n, then n x (name, last_token, held, holder, token, ttl_ns, expires_ns).
///   Section 3, reservations: u64 n, then n x (key, highest, until_ms).
///   Section 4, segments: u64 n, then n x (tag, next).
///   Section 5, ledger: u64 n, then n x (key, scheduled_ms, schedule_version,
///     state, fence, attempt, holder, lease_until, started, completed,
///     retain_until, payload_hash, result, fail_reason).
///   Section 6, queues (only when a waiting acquire was used): u64 n, then n x
///     (name, last_ticket, u64 m, m x (ticket, who, until)).
///   Section 7, floors (only after a recovery stated some): segment, fence,
///     ledger_ms, reservation_ms. A coord that predates it refuses the file
///     (state_unsupported) rather than answer without the floors.
struct file_format {
    static constexpr std::string_view magic{"COORD\0SF", 8};
    static constexpr std::uint32_t version = 1;
    static constexpr std::size_t header_size = 40;
    /// The format's limits: one string (a key, value, name, result) and the
    /// whole file. A state over them is refused before anything is written.
    static constexpr std::size_t max_string = std::size_t{256} << 20;
    static constexpr std::size_t max_file = std::size_t{1} << 30;
    enum section : std::uint8_t { fences = 1, leases = 2, reservations = 3, segments = 4, ledger = 5, queues = 6, floors = 7 };

    /// The file's bytes, or errc::state_too_large.
    static result<std::string> encode(const file_state& s) {
        byte_writer p;
        p.set_max_string(max_string);
        bool overflowed = false;
        // Sections 6 and 7 only when a waiting acquire was ever used, or a
        // recovery stated floors: older coords read every other file.
        const bool has_floors = s.floors.segment != 0 || s.floors.fence != 0 || s.floors.ledger_ms != 0 ||
                                s.floors.reservation_ms != 0;
        p.u32(5 + (s.queues.empty() ? 0 : 1) + (has_floors ? 1 : 0));
        section_out(p, fences, overflowed, [&](byte_writer& w) {
            w.u64(s.fences.size());
            for (const auto& [k, r] : s.fences) {
                w.str(k);
                w.u64(r.highest);
                w.boolean(r.written);
                w.boolean(r.has_seq);
                w.u64(r.seq);
                w.str(r.value);
            }
        });
        section_out(p, leases, overflowed, [&](byte_writer& w) {
            w.u64(s.leases.size());
            for (const auto& [k, r] : s.leases) {
                w.str(k);
                w.u64(r.last_token);
                w.boolean(r.held);
                w.str(r.holder);
                w.u64(r.token);
                w.i64(r.ttl_ns);
                w.i64(r.expires_ns);
            }
        });
        section_out(p, reservations, overflowed, [&](byte_writer& w) {
            w.u64(s.reservations.size());
            for (const auto& [k, r] : s.reservations) {
                w.str(k);
                w.u64(r.highest);
                w.i64(r.until_ms);
            }
        });
        section_out(p, segments, overflowed, [&](byte_writer& w) {
            w.u64(s.segments.size());
            for (const auto& [k, r] : s.segments) {
                w.str(k);
                w.u64(r.next);
            }
        });
        section_out(p, ledger, overflowed, [&](byte_writer& w) {
            w.u64(s.ledger.size());
            for (const auto& [k, r] : s.ledger) {
                w.str(k);
                w.i64(r.scheduled.count());
                w.u32(r.schedule_version);
                w.u8(static_cast<std::uint8_t>(r.state));
                w.u64(r.fence);
                w.u32(r.attempt);
                w.str(r.holder);
                w.i64(r.lease_until.count());
                w.i64(r.started.count());
                w.i64(r.completed.count());
                w.i64(r.retain_until.count());
                w.str(r.payload_hash);
                w.str(r.result);
                w.str(r.fail_reason);
            }
        });
        if (!s.queues.empty())
            section_out(p, queues, overflowed, [&](byte_writer& w) {
                w.u64(s.queues.size());
                for (const auto& [k, q] : s.queues) {
                    w.str(k);
                    w.u64(q.last_ticket);
                    w.u64(q.waiters.size());
                    for (const auto& wt : q.waiters) {
                        w.u64(wt.ticket);
                        w.str(wt.who);
                        w.i64(wt.until.count());
                    }
                }
            });
        if (has_floors)
            section_out(p, floors, overflowed, [&](byte_writer& w) {
                w.u64(s.floors.segment);
                w.u64(s.floors.fence);
                w.i64(s.floors.ledger_ms);
                w.i64(s.floors.reservation_ms);
            });
        if (overflowed || p.overflowed() || p.size() > max_file - header_size)
            return unexpected(make_error_code(errc::state_too_large));
        byte_writer h;
        h.raw(magic);
        h.u32(version);
        h.u32(0);
        h.u64(s.generation);
        h.u64(p.size());
        h.u32(crc32c(p.bytes().data(), p.size()));
        h.u32(crc32c(h.bytes().data(), h.size()));
        h.raw(p.bytes());
        return h.take();
    }

    static result<file_state> decode(std::string_view file) {
        auto fail = [](errc e) { return result<file_state>(unexpected(make_error_code(e))); };
        if (file.size() < header_size) {
            // A prefix of our magic is a cut-off state file; anything else is not ours.
            if (file.substr(0, std::min(file.size(), magic.size())) == magic.substr(0, std::min(file.size(), magic.size())))
                return fail(errc::state_truncated);
            return fail(errc::state_corrupt);
        }
        byte_reader h(file.substr(0, header_size));
        if (h.bytes(8) != magic) return fail(errc::state_corrupt);
        const auto ver = h.u32();
        (void)h.u32();
        file_state s;
        s.generation = h.u64();
        const auto len = h.u64();
        const auto payload_crc = h.u32();
        const auto header_crc = h.u32();
        if (header_crc != crc32c(file.data(), header_size - 4)) return fail(errc::state_corrupt);
        if (ver != version) return fail(errc::state_unsupported);
        if (len > max_file - header_size) return fail(errc::state_too_large);
        if (file.size() - header_size < len) return fail(errc::state_truncated);
        if (file.size() - header_size > len) return fail(errc::state_corrupt);
        const auto payload = file.substr(header_size);
        if (payload_crc != crc32c(payload.data(), payload.size())) return fail(errc::state_corrupt);

        byte_reader p(payload);
        const auto sections = p.u32();
        for (std::uint32_t i = 0; i < sections && p.ok(); ++i) {
            const auto id = p.u8();
            byte_reader r(p.bytes(p.u64()));
            if (id == fences) {
                for (auto n = r.u64(); n > 0 && r.ok(); --n) {
                    auto key = r.str();
                    fence_rule::record rec;
                    rec.highest = r.u64();
                    rec.written = r.boolean();
                    rec.has_seq = r.boolean();
                    rec.seq = r.u64();
                    rec.value = r.str();
                    s.fences.insert_or_assign(std::move(key), std::move(rec));
                }
            } else if (id == leases) {
                for (auto n = r.u64(); n > 0 && r.ok(); --n) {
                    auto key = r.str();
                    lease_rule::record rec;
                    rec.last_token = r.u64();
                    rec.held = r.boolean();
                    rec.holder = r.str();
                    rec.token = r.u64();
                    rec.ttl_ns = r.i64();
                    rec.expires_ns = r.i64();
                    s.leases.insert_or_assign(std::move(key), std::move(rec));
                }
            } else if (id == reservations) {
                for (auto n = r.u64(); n > 0 && r.ok(); --n) {
                    auto key = r.str();
                    reservation_rule::record rec;
                    rec.highest = r.u64();
                    rec.until_ms = r.i64();
                    s.reservations.insert_or_assign(std::move(key), rec);
                }
            } else if (id == segments) {
                for (auto n = r.u64(); n > 0 && r.ok(); --n) {
                    auto key = r.str();
                    segment_rule::record rec;
                    rec.next = r.u64();
                    s.segments.insert_or_assign(std::move(key), rec);
                }
            } else if (id == ledger) {
                for (auto n = r.u64(); n > 0 && r.ok(); --n) {
                    ledger_record rec;
                    rec.key = r.str();
                    rec.scheduled = std::chrono::milliseconds(r.i64());
                    rec.schedule_version = r.u32();
                    const auto st = r.u8();
                    if (st > 2) r.fail();
                    rec.state = static_cast<ledger_record::state_t>(st);
                    rec.fence = r.u64();
                    rec.attempt = r.u32();
                    rec.holder = r.str();
                    rec.lease_until = std::chrono::nanoseconds(r.i64());
                    rec.started = std::chrono::nanoseconds(r.i64());
                    rec.completed = std::chrono::nanoseconds(r.i64());
                    rec.retain_until = std::chrono::nanoseconds(r.i64());
                    rec.payload_hash = r.str();
                    rec.result = r.str();
                    rec.fail_reason = r.str();
                    auto key = rec.key;
                    s.ledger.insert_or_assign(std::move(key), std::move(rec));
                }
            } else if (id == queues) {
                for (auto n = r.u64(); n > 0 && r.ok(); --n) {
                    auto key = r.str();
                    lease_queue_rule::record q;
                    q.last_ticket = r.u64();
                    for (auto m = r.u64(); m > 0 && r.ok(); --m) {
                        lease_waiter wt;
                        wt.ticket = r.u64();
                        wt.who = r.str();
                        wt.until = std::chrono::nanoseconds{r.i64()};
                        q.waiters.push_back(std::move(wt));
                    }
                    s.queues.insert_or_assign(std::move(key), std::move(q));
                }
            } else if (id == floors) {
                s.floors.segment = r.u64();
                s.floors.fence = r.u64();
                s.floors.ledger_ms = r.i64();
                s.floors.reservation_ms = r.i64();
            } else {
                // A checksummed section we do not know: written by a newer coord.
                return fail(errc::state_unsupported);
            }
            if (!r.ok() || !r.at_end()) return fail(errc::state_corrupt);
        }
        if (!p.ok() || !p.at_end()) return fail(errc::state_corrupt);
        return s;
    }

private:
    template <class F>
    static void section_out(byte_writer& p, section id, bool& overflowed, F&& body) {
        byte_writer w;
        w.set_max_string(p.max_string());
        body(w);
        if (w.overflowed()) overflowed = true;
        p.u8(id);
        p.u64(w.size());
        p.raw(w.bytes());
    }
};

/// The lock file's record of the newest generation written: 24 bytes
/// (magic "COORDLK1", u64 generation, u32 CRC-32C of the first 16 bytes, u32
/// zero), rewritten in place after every write. A state file that goes back
/// (deleted, or replaced by an older copy) is caught by the next process
/// that opens it, not only by one that had it open. An empty lock file (a
/// new store, or one whose lock file was removed) records nothing.
struct lock_record {
    static constexpr std::string_view magic{"COORDLK1", 8};
    static constexpr std::size_t size = 24;

    static std::string encode(std::uint64_t generation) {
        byte_writer w;
        w.raw(magic);
        w.u64(generation);
        w.u32(crc32c(w.bytes().data(), w.size()));
        w.u32(0);
        return w.take();
    }
    /// The recorded generation (0 for an empty file), or errc::state_corrupt.
    static result<std::uint64_t> decode(std::string_view bytes) {
        if (bytes.empty()) return std::uint64_t{0};
        if (bytes.size() != size || bytes.substr(0, 8) != magic) return unexpected(make_error_code(errc::state_corrupt));
        byte_reader r(bytes);
        (void)r.bytes(8);
        const auto generation = r.u64();
        if (r.u32() != crc32c(bytes.data(), 16)) return unexpected(make_error_code(errc::state_corrupt));
        return generation;
    }
};

/// The one spelling of a state file's path (detail::resolve_store_path).
inline std::filesystem::path resolve_state_path(const std::filesystem::path& given) {
    return resolve_store_path(given, "coord file store");
}

}  // namespace detail

/// The durable file store: fence_store, fence_update_store, lease_store,
/// time_reservation_store, segment_allocator and ledger_store over one state
/// file shared by the processes of one machine.
/// Thread safety: every member function may be called from any thread; a
/// forked child may keep using the object (it reopens its lock file).
template <unix_clock Clock = system_clock>
class basic_file_store : public detail::fence_writes<basic_file_store<Clock>> {
    friend class detail::fence_writes<basic_file_store<Clock>>;

public:
    /// Opens the store at `path`, creating an empty one when the file does not
    /// exist (its directory must). Every spelling of one file (symbolic links
    /// to it or to its directory, ".", "..", "//") opens the same store, with
    /// one lock file: PATH.lock beside the resolved file. Throws store_error,
    /// naming the file, when it is truncated, corrupt, of an unsupported
    /// format, not a regular file (a directory, FIFO, device, socket),
    /// hard-linked elsewhere, or cannot be read or locked. A store that went
    /// back (its state file deleted, or replaced by an older copy, since the
    /// last write any process recorded) opens, and every operation on it is
    /// refused with errc::state_went_back until initialize(floors, true)
    /// recovers it, as on SQLite.
    explicit basic_file_store(std::filesystem::path path, Clock clock = Clock{}, file_store_options options = {})
        : path_(detail::resolve_state_path(path)), lock_path_(path_.string() + ".lock"),
          tmp_path_(path_.string() + ".tmp"), dir_(path_.parent_path()), clock_(std::move(clock)),
          options_(options) {
        coord::detail::check_timeout("coord::file_store_options::lock_timeout", options_.lock_timeout);
        std::lock_guard lk(mutex_);
        lock_guard fl;
        if (auto ec = lock_current(fl, LOCK_SH))
            throw store_error(ec, "coord file store " + lock_path_ + ": cannot open or lock the lock file");
        auto s = load();
        if (!s && s.error() != errc::state_went_back)
            throw store_error(s.error(), "coord file store " + path_.string());
    }

    /// The recovery of a store that went back, or the start of a store that
    /// takes over from one that was lost: in one step under the state's
    /// lock, the state file as it is now (an older copy, or nothing when it
    /// is missing) keeps `f` (a missing record answers from them: a fence
    /// refuses tokens below the fence floor, a segment tag continues above
    /// the segment floor, a reservation starts at the reservation floor, a
    /// slot scheduled up to the ledger floor is not run again unless its
    /// done record replays), its fence records, segment counters and
    /// reservations are raised to the floors, and it is written as a
    /// generation above every one recorded, so that it opens again. With
    /// fence_now, the fence floor is above the clock's microseconds and every
    /// lease token in the state; ledger_now and reservation_now take the
    /// clock's now. Refused with errc::store_already_initialized unless
    /// `replace` when the store holds state or a process recorded a
    /// generation. Returns the new generation, as text (a file store has no
    /// identity: its generation tells its copies apart). Throws
    /// std::invalid_argument for a segment or fence floor of 2^63 - 1 or more.
    result<std::string> initialize(const initial_floors& f, bool replace = false) {
        constexpr std::uint64_t limit = 0x7ffffffffffffffeull;
        if (f.segment > limit) throw std::invalid_argument("coord::file_store: the segment floor must be below 2^63-1");
        if (f.fence > limit) throw std::invalid_argument("coord::file_store: the fence floor must be below 2^63-1");
        std::lock_guard lk(mutex_);
        const auto until = coord::detail::deadline_after(options_.lock_timeout);
        for (;;) {
            lock_guard fl;
            if (auto ec = lock_current(fl, LOCK_EX, until)) return unexpected(error(ec));
            auto recorded = recorded_generation();
            if (!recorded) return unexpected(recorded.error());
            auto s = load(/*recovering=*/true);
            if (!s) return unexpected(s.error());
            if (!replace && (*recorded > 0 || s->generation > 0))
                return unexpected(error(make_error_code(errc::store_already_initialized),
                                        "coord file store " + path_.string() + " holds state (generation " +
                                            std::to_string(std::max(*recorded, s->generation)) +
                                            "): replacing it (--force) is the recovery of a store that went back"));
            const std::int64_t now_ns = since_epoch_ns(clock_.now());
            detail::stated_floors st{f.segment, f.fence, f.ledger_ms, f.reservation_ms};
            if (f.fence_now) {
                st.fence = std::max<fence_token>(st.fence, static_cast<fence_token>(std::max<std::int64_t>(now_ns / 1000, 0)));
                for (const auto& [name, l] : s->leases) st.fence = std::max<fence_token>(st.fence, l.last_token + 1);
                if (st.fence > limit) st.fence = limit;
            }
            if (f.ledger_now) st.ledger_ms = now_ns / 1'000'000;
            if (f.reservation_now) st.reservation_ms = now_ns / 1'000'000;
            for (auto& [key, r] : s->fences)
                if (r.written && r.highest < st.fence) {
                    r.highest = st.fence;
                    r.has_seq = false;
                    r.seq = 0;
                }
            for (auto& [tag, r] : s->segments) r.next = std::max(r.next, st.segment + 1);
            for (auto& [key, r] : s->reservations) r.until_ms = std::max(r.until_ms, st.reservation_ms);
            s->floors = st;
            s->generation = std::max({s->generation, *recorded, seen_generation_});
            bool lost = false;
            if (auto ec = save(*s, lost)) return unexpected(error(ec));
            if (!lost) return std::to_string(s->generation);
            if (coord::detail::deadline_clock::now() >= until) return unexpected(error(make_error_code(errc::lock_timeout)));
        }
    }
    basic_file_store(const basic_file_store&) = delete;
    basic_file_store& operator=(const basic_file_store&) = delete;

    // fence_store ---------------------------------------------------------
    // fence_write, fence_update: detail::fence_writes, through fence_apply.
    ///@{
    /// The fence_store operations, each one atomic step under the file's lock: coord::fence_store says what each does.
    result<fenced_value> fence_read(std::string_view key) {
        return transact<false, error>([&](detail::file_state& s, std::int64_t) -> result<fenced_value> {
            auto it = s.fences.find(key);
            return detail::fence_rule::view(it == s.fences.end() ? nullptr : &it->second);
        });
    }
    ///@}

    // lease_store ---------------------------------------------------------
    ///@{
    /// The lease_store operations, each one atomic step under the file's lock: coord::lease_store says what each does.
    result<lease, lease_error> lease_acquire(std::string_view name, std::string_view owner,
                                             std::chrono::nanoseconds ttl) {
        return transact<true, lease_error>([&](detail::file_state& s, std::int64_t now) {
            return detail::lease_rule::acquire(name, detail::find_or_insert(s.leases, name), owner, ttl.count(), now);
        });
    }
    result<lease, lease_error> lease_renew(std::string_view name, std::string_view owner, fence_token token,
                                           std::chrono::nanoseconds ttl) {
        return transact<true, lease_error>([&](detail::file_state& s, std::int64_t now) {
            return detail::lease_rule::renew(name, detail::find_or_insert(s.leases, name), owner, token,
                                             ttl.count(), now);
        });
    }
    result<void, lease_error> lease_release(std::string_view name, std::string_view owner, fence_token token) {
        return transact<true, lease_error>([&](detail::file_state& s, std::int64_t now) {
            return detail::lease_rule::release(detail::find_or_insert(s.leases, name), owner, token, now);
        });
    }
    ///@}

    // lease_queue_store -----------------------------------------------------
    // lease_queue_store: the queue is a section of the state file; a queued
    // acquire writes the file only when the lease or the line changed (a
    // place is renewed at most four times a term, not on every poll). No notification
    // crosses processes: a wait polls (coord/detail/lease_poll.hpp).

    ///@{
    /// The lease_queue_store operations, each one atomic step under the file's lock: coord::lease_queue_store says what each does.
    result<std::uint64_t> lease_enqueue(std::string_view name, std::string_view who, std::chrono::nanoseconds place_ttl) {
        return transact<true, error>([&](detail::file_state& s, std::int64_t now) -> result<std::uint64_t> {
            return detail::lease_queue_rule::enqueue(detail::find_or_insert(s.queues, name), who, place_ttl.count(), now);
        });
    }
    result<lease, lease_error> lease_acquire_queued(std::string_view name, std::string_view owner, std::chrono::nanoseconds ttl,
                                                    std::uint64_t ticket, std::chrono::nanoseconds place_ttl) {
        // The outer result always holds the rule's answer, so that a refusal
        // that renewed the place is saved too (when anything changed).
        using answer = result<lease, lease_error>;
        bool changed = false;
        auto r = transact<true, lease_error>(
            [&](detail::file_state& s, std::int64_t now) -> result<answer, lease_error> {
                auto& q = detail::find_or_insert(s.queues, name);
                const auto before = q;
                answer a = detail::lease_queue_rule::acquire(name, detail::find_or_insert(s.leases, name), q, ticket, owner,
                                                             ttl.count(), place_ttl.count(), now);
                changed = a.has_value() || !(before == q);
                return a;
            },
            [&](const auto&) { return changed; });
        if (!r) return unexpected(r.error());
        return std::move(*r);
    }
    result<void> lease_dequeue(std::string_view name, std::uint64_t ticket) {
        return transact<true, error>([&](detail::file_state& s, std::int64_t) -> result<void> {
            auto it = s.queues.find(name);
            if (it != s.queues.end()) (void)detail::lease_queue_rule::leave(it->second, ticket);
            return {};
        });
    }
    result<std::vector<lease_waiter>> lease_queue_read(std::string_view name) {
        return transact<false, error>([&](detail::file_state& s, std::int64_t now) -> result<std::vector<lease_waiter>> {
            auto it = s.queues.find(name);
            if (it == s.queues.end()) return std::vector<lease_waiter>{};
            auto q = it->second;
            detail::lease_queue_rule::purge(q, now);
            return q.waiters;
        });
    }
    /// Polls (coord/detail/lease_poll.hpp): no notification crosses processes.
    detail::polled_waiting lease_waiting(std::string_view, std::uint64_t) const { return {}; }

    result<std::optional<lease>> lease_read(std::string_view name) {
        return transact<false, error>(
            [&](detail::file_state& s, std::int64_t now) -> result<std::optional<lease>> {
                auto it = s.leases.find(name);
                return detail::lease_rule::read(name, it == s.leases.end() ? nullptr : &it->second, now);
            });
    }
    ///@}

    // time_reservation_store ----------------------------------------------
    ///@{
    /// The time_reservation_store operations, each one atomic step under the file's lock: coord::time_reservation_store says what each does.
    result<std::int64_t, write_error> time_reserve(std::string_view key, std::int64_t until_ms,
                                                        fence_token token) {
        return transact<true, write_error>([&](detail::file_state& s, std::int64_t) {
            return detail::reservation_rule::reserve(record_or(s.reservations, key, {0, s.floors.reservation_ms}), until_ms,
                                                     token);
        });
    }
    ///@}

    // segment_allocator ---------------------------------------------------
    ///@{
    /// The segment_allocator operations, each one atomic step under the file's lock: coord::segment_allocator says what each does.
    result<segment_range> segment_allocate(std::string_view tag, std::uint64_t step) {
        return transact<true, error>([&](detail::file_state& s, std::int64_t) {
            return detail::segment_rule::allocate(record_or(s.segments, tag, {s.floors.segment + 1}), step);
        });
    }
    ///@}

    // ledger_store --------------------------------------------------------
    ///@{
    /// The ledger_store operations, each one atomic step under the file's lock: coord::ledger_store says what each does.
    result<claim_outcome> ledger_claim(const ledger_claim_request& q) {
        // Only a grant changes the record: replays and refusals write nothing.
        return transact<true, error>(
            [&](detail::file_state& s, std::int64_t now) -> result<claim_outcome> {
                if (detail::ledger_rule::too_old(q, now)) return detail::ledger_rule::expired();
                // A slot scheduled up to a recovery's ledger floor is not run
                // again (its done record may have been lost); a done record
                // still replays.
                if (q.scheduled.count() <= s.floors.ledger_ms) {
                    auto* done = find_record(s, q.key);
                    if (!done || done->state != ledger_record::state_t::done) return detail::ledger_rule::expired();
                }
                return detail::ledger_rule::claim(detail::find_or_insert(s.ledger, q.key), q, now, s.floors.fence);
            },
            [](const result<claim_outcome>& r) { return r->kind == claim_outcome::granted; });
    }
    result<void> ledger_heartbeat(std::string_view key, fence_token fence, std::chrono::nanoseconds ttl) {
        return transact<true, error>([&](detail::file_state& s, std::int64_t now) {
            return detail::ledger_rule::heartbeat(find_record(s, key), fence, ttl.count(), now);
        });
    }
    result<void> ledger_complete(std::string_view key, fence_token fence, std::string_view result_text,
                                 std::chrono::nanoseconds retain_until) {
        return transact<true, error>([&](detail::file_state& s, std::int64_t now) {
            return detail::ledger_rule::complete(find_record(s, key), fence, result_text, now, retain_until.count());
        });
    }
    result<void> ledger_fail(std::string_view key, fence_token fence, std::string_view reason) {
        return transact<true, error>([&](detail::file_state& s, std::int64_t) {
            return detail::ledger_rule::fail(find_record(s, key), fence, reason);
        });
    }
    result<std::optional<ledger_record>> ledger_read(std::string_view key) {
        return transact<false, error>(
            [&](detail::file_state& s, std::int64_t) -> result<std::optional<ledger_record>> {
                auto* r = find_record(s, key);
                return r ? std::optional<ledger_record>(*r) : std::nullopt;
            });
    }
    result<std::size_t> ledger_prune() {
        return transact<true, error>([&](detail::file_state& s, std::int64_t now) -> result<std::size_t> {
            return static_cast<std::size_t>(
                std::erase_if(s.ledger, [&](const auto& kv) { return detail::ledger_rule::prunable(kv.second, now); }));
        });
    }

    result<fence_token> ledger_revoke(std::string_view key, std::string_view reason) {
        return transact<true, error>([&](detail::file_state& s, std::int64_t) {
            return detail::ledger_rule::revoke(find_record(s, key), reason);
        });
    }
    ///@}

    /// The state file's path, resolved (every spelling of one file gives the same).
    const std::filesystem::path& path() const noexcept { return path_; }
    /// The clock lease expiry is judged on.
    const Clock& clock() const noexcept { return clock_; }

private:
    /// An flock held for one operation.
    class lock_guard {
    public:
        lock_guard() = default;
        lock_guard(const lock_guard&) = delete;
        lock_guard& operator=(const lock_guard&) = delete;
        std::error_code lock(int fd, int how, coord::detail::deadline until) noexcept {
            auto pause = std::chrono::microseconds{50};
            while (::flock(fd, how | LOCK_NB) != 0) {
                if (errno == EINTR) continue;
                if (errno != EWOULDBLOCK) return detail::last_errno();
                if (coord::detail::deadline_clock::now() >= until) return make_error_code(errc::lock_timeout);
                std::this_thread::sleep_for(pause);
                pause = std::min(pause * 2, std::chrono::microseconds{20000});
            }
            fd_ = fd;
            return {};
        }
        void unlock() noexcept {
            if (fd_ >= 0) ::flock(fd_, LOCK_UN);
            fd_ = -1;
        }
        ~lock_guard() { unlock(); }

    private:
        int fd_ = -1;
    };

    // The record of `key` in `m`, made from `fresh` when there is none.
    template <class V>
    static V& record_or(detail::string_map<V>& m, std::string_view key, V fresh) {
        auto it = m.find(key);
        if (it != m.end()) return it->second;
        auto& r = detail::find_or_insert(m, key);
        r = std::move(fresh);
        return r;
    }

    static ledger_record* find_record(detail::file_state& s, std::string_view key) {
        auto it = s.ledger.find(key);
        return it == s.ledger.end() ? nullptr : &it->second;
    }

    template <class E>
    static E as_error(error ec) {
        if constexpr (std::is_same_v<E, error>) return ec;
        else {
            E e{};
            e.code = std::move(ec);
            return e;
        }
    }

    template <class Assign>
    result<void, write_error> fence_apply(std::string_view key, fence_token token,
                                          std::optional<std::uint64_t> seq, Assign&& assign) {
        return transact<true, write_error>([&](detail::file_state& s, std::int64_t) {
            // A key without a record may have lost it: it starts at the fence floor.
            detail::fence_rule::record fresh;
            if (s.floors.fence > 0) {
                fresh.highest = s.floors.fence;
                fresh.written = true;
            }
            return detail::fence_rule::apply(record_or(s.fences, key, std::move(fresh)), token, seq, assign);
        });
    }

    /// Runs op(state, now) as one atomic step: under the process mutex and an
    /// flock, on freshly loaded and checked state; when Mutates and op
    /// succeeded (and `changed` says it changed something), the new state is
    /// made durable before returning.
    /// Always write back a successful mutating operation's state.
    struct always_changed {
        template <class R>
        bool operator()(const R&) const noexcept {
            return true;
        }
    };

    template <bool Mutates, class E, class Op, class Changed = always_changed>
    auto transact(Op&& op, Changed changed = {}) -> decltype(op(std::declval<detail::file_state&>(), std::int64_t{})) {
        using R = decltype(op(std::declval<detail::file_state&>(), std::int64_t{}));
        std::lock_guard lk(mutex_);
        const auto until = coord::detail::deadline_after(options_.lock_timeout);
        for (;;) {
            lock_guard fl;
            if (auto ec = lock_current(fl, Mutates ? LOCK_EX : LOCK_SH, until)) return R(unexpected(as_error<E>(ec)));
            auto s = load();
            if (!s) return R(unexpected(as_error<E>(s.error())));
            R r = op(*s, since_epoch_ns(clock_.now()));
            if constexpr (Mutates) {
                if (r.has_value() && changed(r)) {
                    bool lost = false;
                    if (auto ec = save(*s, lost)) return R(unexpected(as_error<E>(ec)));
                    // Another process changed the state after we read it (our
                    // lock file was removed under us): nothing was written;
                    // run the operation again on the state now at the path.
                    if (lost) {
                        if (coord::detail::deadline_clock::now() >= until)
                            return R(unexpected(as_error<E>(make_error_code(errc::lock_timeout))));
                        continue;
                    }
                }
            }
            return r;
        }
    }

    // Opens the lock file at lock_path_ (creating it), refusing anything but
    // a regular file; O_NONBLOCK so that a FIFO planted there cannot hang us.
    std::error_code open_lock() {
        lock_fd_.reset(detail::retry_open(lock_path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK));
        if (!lock_fd_) return errno == ELOOP ? make_error_code(errc::state_not_regular) : detail::last_errno();
        struct stat st {};
        if (::fstat(lock_fd_.get(), &st) != 0) return detail::last_errno();
        if (!S_ISREG(st.st_mode)) {
            lock_fd_.reset();
            return make_error_code(errc::state_not_regular);
        }
        pid_ = ::getpid();
        return {};
    }

    // Takes the flock on the lock file that is at lock_path_ now: a lock file
    // removed or replaced while we waited on it never yields an exclusive
    // step (lock, then check that the file locked is still the one at the
    // path; reopen and retry otherwise). A forked child reopens its own.
    std::error_code lock_current(lock_guard& fl, int how) {
        return lock_current(fl, how, coord::detail::deadline_after(options_.lock_timeout));
    }
    std::error_code lock_current(lock_guard& fl, int how, coord::detail::deadline until) {
        for (;;) {
            if (!lock_fd_ || pid_ != ::getpid())
                if (auto ec = open_lock()) return ec;
            if (auto ec = fl.lock(lock_fd_.get(), how, until)) return ec;
            struct stat held {}, at_path {};
            if (::fstat(lock_fd_.get(), &held) != 0) return detail::last_errno();
            if (::lstat(lock_path_.c_str(), &at_path) == 0) {
                if (held.st_dev == at_path.st_dev && held.st_ino == at_path.st_ino) return {};
            } else if (errno != ENOENT) {
                return detail::last_errno();
            }
            // Removed or replaced while we waited: lock the file at the path.
            fl.unlock();
            lock_fd_.reset();
        }
    }

    // The newest generation any process recorded in the lock file (0: none).
    result<std::uint64_t> recorded_generation() {
        char buf[detail::lock_record::size + 1];
        ssize_t n;
        do n = ::pread(lock_fd_.get(), buf, sizeof buf, 0);
        while (n < 0 && errno == EINTR);
        if (n < 0) return unexpected(detail::last_errno());
        return detail::lock_record::decode(std::string_view(buf, static_cast<std::size_t>(n)));
    }

    // The state at the path, checked. A state older than the newest
    // generation recorded or seen (or missing after one) went back, unless
    // `recovering` (initialize, which replaces it).
    result<detail::file_state> load(bool recovering = false) {
        auto recorded = recorded_generation();
        if (!recorded) return unexpected(recorded.error());
        const auto floor = recovering ? 0 : std::max(seen_generation_, *recorded);
        loaded_ = {};
        detail::unique_fd fd(detail::retry_open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK));
        if (!fd) {
            if (errno == ENOENT) {
                if (floor > 0) return unexpected(went_back("its state file is missing", floor));
                have_mode_ = false;
                return detail::file_state{};
            }
            // ELOOP: the path became a symbolic link; ENXIO: it is a socket.
            if (errno == ELOOP || errno == ENXIO) return unexpected(make_error_code(errc::state_not_regular));
            return unexpected(detail::last_errno());
        }
        struct stat st {};
        if (::fstat(fd.get(), &st) != 0) return unexpected(detail::last_errno());
        loaded_ = file_identity{true, st.st_dev, st.st_ino};
        if (!S_ISREG(st.st_mode)) return unexpected(make_error_code(errc::state_not_regular));
        if (st.st_nlink > 1) return unexpected(make_error_code(errc::state_hard_linked));
        if (static_cast<std::uint64_t>(st.st_size) > detail::file_format::max_file)
            return unexpected(make_error_code(errc::state_too_large));
        std::string bytes;
        bytes.reserve(static_cast<std::size_t>(st.st_size));
        char buf[65536];
        for (;;) {
            const auto n = ::read(fd.get(), buf, sizeof buf);
            if (n < 0) {
                if (errno == EINTR) continue;
                return unexpected(detail::last_errno());
            }
            if (n == 0) break;
            bytes.append(buf, static_cast<std::size_t>(n));
            if (bytes.size() > detail::file_format::max_file) return unexpected(make_error_code(errc::state_too_large));
        }
        auto s = detail::file_format::decode(bytes);
        if (s && s->generation < floor)
            return unexpected(went_back("its state file is generation " + std::to_string(s->generation) +
                                            " (an older copy was put back)",
                                        floor));
        if (s) {
            seen_generation_ = s->generation;
            mode_ = st.st_mode & 07777;
            uid_ = st.st_uid;
            gid_ = st.st_gid;
            have_mode_ = true;
        }
        return s;
    }

    // What a store that went back says, with the recovery that hands nothing
    // out twice.
    error went_back(const std::string& what, std::uint64_t newest) const {
        return error(make_error_code(errc::state_went_back),
                     "coord file store " + path_.string() + " went back: " + what + ", and generation " +
                         std::to_string(newest) +
                         " was written (recorded in " + lock_path_ + "); its fences, segment counters, ledger "
                         "records and reservations may be older than what was handed out, and nothing was applied. "
                         "If a newer copy of the state file exists, put it back; otherwise recover stating floors "
                         "above everything it handed out: coordctl store init --store file:" + path_.string() +
                         " --force --segment-floor N (at least the largest segment ID handed out) --fence-floor now "
                         "--ledger-floor now (docs/concepts/went-back.md)");
    }

    // Writes `s` as the next generation and renames it over the state file
    // if the state file is still the one load() read (compare-and-swap under
    // a short flock on the directory, which every writer takes for its
    // rename). `lost`: another writer got there first, nothing was written.
    std::error_code save(detail::file_state& s, bool& lost) {
        ++s.generation;
        const auto bytes = detail::file_format::encode(s);
        if (!bytes) return bytes.error();  // over the format's limits: nothing written
        file_identity mine;
        {
            // A temporary file of this write's own, created exclusively, so
            // that another writer (holding another lock file) cannot write
            // into it; a crashed writer's leftover is removed first (anything
            // but a regular file there is refused, not removed).
            struct stat left {};
            if (::lstat(tmp_path_.c_str(), &left) == 0 && !S_ISREG(left.st_mode))
                return make_error_code(errc::state_not_regular);
            if (::unlink(tmp_path_.c_str()) != 0 && errno != ENOENT) return detail::last_errno();
            detail::unique_fd fd(detail::retry_open(tmp_path_.c_str(),
                                                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK));
            if (!fd) {
                if (errno == EEXIST) {  // another writer's, made just now
                    lost = true;
                    return {};
                }
                return errno == ELOOP || errno == ENXIO ? make_error_code(errc::state_not_regular) : detail::last_errno();
            }
            struct stat st {};
            if (::fstat(fd.get(), &st) != 0) return detail::last_errno();
            if (!S_ISREG(st.st_mode)) return make_error_code(errc::state_not_regular);
            mine = file_identity{true, st.st_dev, st.st_ino};
            // The new file keeps the old one's mode and owner.
            if (have_mode_) {
                if ((st.st_uid != uid_ || st.st_gid != gid_) && ::fchown(fd.get(), uid_, gid_) != 0)
                    return detail::last_errno();
                if (::fchmod(fd.get(), mode_) != 0) return detail::last_errno();
            }
            std::size_t off = 0;
            while (off < bytes->size()) {
                const auto n = ::write(fd.get(), bytes->data() + off, bytes->size() - off);
                if (n < 0) {
                    if (errno == EINTR) continue;
                    return detail::last_errno();
                }
                off += static_cast<std::size_t>(n);
            }
            if (options_.fsync && ::fsync(fd.get()) != 0) return detail::last_errno();
        }
        {
            // Kept open; a forked child opens its own (an flock belongs to
            // the open file, which a child shares with its parent).
            if (!dir_fd_ || dir_pid_ != ::getpid()) {
                dir_fd_.reset(detail::retry_open(dir_.c_str(), O_RDONLY | O_DIRECTORY));
                if (!dir_fd_) return detail::last_errno();
                dir_pid_ = ::getpid();
            }
            const int dir = dir_fd_.get();
            lock_guard dl;
            if (auto ec = dl.lock(dir, LOCK_EX, coord::detail::deadline_after(options_.lock_timeout))) return ec;
            if (identity_at(tmp_path_.c_str()) != mine) {
                lost = true;  // another writer replaced our temporary file
                return {};
            }
            if (identity_at(path_.c_str()) != loaded_) {
                lost = true;  // another writer renamed its state in after we read
                ::unlink(tmp_path_.c_str());
                return {};
            }
            if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) return detail::last_errno();
            dl.unlock();
            seen_generation_ = s.generation;
            // The new state is visible from here on; if the directory cannot
            // be made durable we cannot say whether a power cut would keep it.
            if (options_.fsync && ::fsync(dir) != 0) return make_error_code(errc::outcome_unknown);
        }
        // Recorded after the state is in place (and durable): a later process
        // that finds an older state file than this knows it went back.
        const auto record = detail::lock_record::encode(s.generation);
        ssize_t n;
        do n = ::pwrite(lock_fd_.get(), record.data(), record.size(), 0);
        while (n < 0 && errno == EINTR);
        if (n != static_cast<ssize_t>(record.size())) return make_error_code(errc::outcome_unknown);
        return {};
    }

    // A file's identity (device and inode), or none (no file at the path).
    struct file_identity {
        bool exists = false;
        dev_t dev = 0;
        ino_t ino = 0;
        bool operator==(const file_identity&) const = default;
    };
    static file_identity identity_at(const char* path) noexcept {
        struct stat st {};
        if (::lstat(path, &st) != 0) return {};
        return file_identity{true, st.st_dev, st.st_ino};
    }

    std::filesystem::path path_;
    std::string lock_path_;
    std::string tmp_path_;
    std::filesystem::path dir_;
    Clock clock_;
    file_store_options options_;
    std::mutex mutex_;
    detail::unique_fd lock_fd_;
    pid_t pid_ = 0;
    detail::unique_fd dir_fd_;  // the state file's directory: its flock guards each commit
    pid_t dir_pid_ = 0;
    std::uint64_t seen_generation_ = 0;
    file_identity loaded_;  // the state file the current operation read
    // The state file's mode and owner as last loaded, kept across rewrites.
    bool have_mode_ = false;
    mode_t mode_ = 0;
    uid_t uid_ = 0;
    gid_t gid_ = 0;
};

/// The everyday durable store (leases judged on the machine's wall clock).
using file_store = basic_file_store<>;

}  // namespace coord
