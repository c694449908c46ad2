// SPDX-License-Identifier: Apache-2.0
// coord/zookeeper/context.hpp: what every adapter of the ZooKeeper engine
// shares: node paths under the store's root, the requests (get, set,
// create, delete, multi) awaited under the call's deadline, the records'
// encoding, and the clock: the ensemble's (a node's modification time,
// stamped by the ensemble when it writes the node) or a test clock's.
#pragma once

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "coord/clock.hpp"
#include "coord/detail/backoff.hpp"
#include "coord/detail/options.hpp"
#include "coord/initial_floors.hpp"
#include "coord/zookeeper/connection.hpp"

namespace coord::zookeeper::detail {

/// A node name for any bytes: [A-Za-z0-9_-] kept, every other byte %XX,
/// after "n-" (so that no name is "." or ".." and none holds a slash).
inline std::string node_name(std::string_view s) {
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string out = "n-";
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-') {
            out += ch;
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

/// Records: fields as "<size>:<bytes>", one after another.
inline std::string encode(const std::vector<std::string>& fields) {
    std::string out;
    for (const auto& f : fields) {
        out += std::to_string(f.size());
        out += ':';
        out += f;
    }
    return out;
}
inline std::optional<std::vector<std::string>> decode(std::string_view s, std::size_t n) {
    std::vector<std::string> out;
    while (!s.empty() && out.size() < n) {
        const auto colon = s.find(':');
        std::size_t len = 0;
        if (colon == std::string_view::npos) return std::nullopt;
        auto [p, ec] = std::from_chars(s.data(), s.data() + colon, len);
        if (ec != std::errc{} || p != s.data() + colon || len > s.size() - colon - 1) return std::nullopt;
        out.emplace_back(s.substr(colon + 1, len));
        s = s.substr(colon + 1 + len);
    }
    if (out.size() != n || !s.empty()) return std::nullopt;
    return out;
}
inline std::optional<std::int64_t> i64(std::string_view s) {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
    return v;
}
inline std::optional<std::uint64_t> u64(std::string_view s) {
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
    return v;
}

/// The sequence a sequential node's name ends in (the ten digits ZooKeeper
/// appends), or nullopt.
inline std::optional<std::uint64_t> sequence_of(std::string_view name) {
    if (name.size() < 10) return std::nullopt;
    return u64(name.substr(name.size() - 10));
}

/// A waiter's pause when its watch could not be armed: until `until`, at
/// most 100 ms (the caller reads again).
inline void watchless_pause(std::chrono::steady_clock::time_point until) {
    std::this_thread::sleep_until(std::min(until, std::chrono::steady_clock::now() + std::chrono::milliseconds{100}));
}

inline coord::error bad(const std::string& what) { return coord::error(make_error_code(errc::bad_answer), what); }
/// A compare-and-set that lost to other writers on every try (`what` names
/// the call: "segment allocate").
inline coord::error contention(std::string_view what, int tries = coord::detail::conflict_tries) {
    return coord::detail::conflicts_in_a_row(make_error_code(errc::contention), what, tries);
}

/// A node of the store holding what coord did not write (another program,
/// an operator, an older coord's layout): coord::errc::state_corrupt
/// (condition corrupt_state), never "outcome unknown": nothing was written.
inline coord::error corrupt(const std::string& path, const std::string& what) {
    return coord::error(coord::make_error_code(coord::errc::state_corrupt),
                        what + " at " + path + " (a node of the store holds what coord did not write: another program, "
                        "or an older coord's layout)");
}

/// A node as read: its data and stat; nullopt when it does not exist.
struct node {
    std::string data;
    Stat stat{};
};

/// The session, the paths and the clock, shared by the adapters of one store.
/// The store's URL parsed; std::invalid_argument when it is malformed.
inline address parsed(const std::string& url) {
    auto a = parse_url(url);
    if (!a) throw std::invalid_argument("coord: ZooKeeper URL '" + url + "' is malformed: " + a.error());
    return *a;
}

/// The options, checked; std::invalid_argument naming one out of range.
inline options checked(options o) {
    coord::detail::check_timeout("coord::zookeeper::options::operation_timeout", o.operation_timeout);
    coord::detail::check_timeout("coord::zookeeper::options::connect_timeout", o.connect_timeout);
    coord::detail::check_timeout("coord::zookeeper::options::session_timeout", o.session_timeout);
    if (o.max_request_bytes < 4096 || o.max_request_bytes > 64u * 1024 * 1024)
        throw std::invalid_argument("coord::zookeeper::options::max_request_bytes must be 4 KiB to 64 MiB");
    if (!o.digest.empty() && (o.digest.find(':') == std::string::npos || o.digest.front() == ':' ||
                              o.digest.find_first_of("\r\n") != std::string::npos))
        throw std::invalid_argument("coord::zookeeper::options::digest must be USER:PASSWORD on one line (not shown)");
    return o;
}

template <class Clock>
class context {
public:
    static constexpr bool test_clock = !std::is_same_v<Clock, server_clock>;

    /// Opens the session (the C client connects in the background; the
    /// first request waits for it). Throws std::invalid_argument for a
    /// malformed URL or an option out of range.
    context(const std::string& url, Clock clock, options opts)
        : session_(parsed(url), checked(std::move(opts))), root_(session_.where().root), clock_(std::move(clock)), url_(url) {}
    context(const context&) = delete;
    context& operator=(const context&) = delete;

    /// A request of `bytes` (node data and paths) above the limit: refused
    /// before it is sent, since the ensemble would drop the connection.
    std::optional<coord::error> too_large(std::size_t bytes) const {
        const std::size_t limit = session_.opts().max_request_bytes;
        if (bytes <= limit) return std::nullopt;
        return coord::error(make_error_code(coord::errc::value_too_large),
                            "the request carries " + std::to_string(bytes) + " bytes, above the limit of " +
                                std::to_string(limit) +
                                " (options::max_request_bytes, the ensemble's jute.maxbuffer); not sent");
    }

    session& zk() noexcept { return session_; }
    const std::string& root() const noexcept { return root_; }
    std::string path(std::string_view kind) const { return root_ + "/" + std::string(kind); }
    std::string path(std::string_view kind, std::string_view name) const { return path(kind) + "/" + node_name(name); }

    /// The node initialize() writes once: the store's identity and floors
    /// (coord/initial_floors.hpp). Its creation zxid is the store's: a root
    /// deleted and initialized again has another.
    std::string identity_path() const { return root_ + "/identity"; }

    /// The store's identity as the ensemble has it now, checked against the
    /// one this store object works under (adopted when it knew none yet):
    /// store_uninitialized when there is none and this object never saw one,
    /// state_went_back when the one it saw is gone (coord's root deleted),
    /// store_identity_changed when it was initialized again since. 1 round trip.
    result<coord::detail::store_identity> checked_identity() {
        auto n = get(identity_path());
        if (!n) return unexpected(n.error());
        const std::int64_t known = known_czxid();
        if (!*n) {
            if (known == 0) return unexpected(uninitialized());
            return unexpected(went_back("its identity node " + identity_path() +
                                        ", there when this process first read it, is gone: coord's root or part of it "
                                        "was deleted (by another client or an operator)"));
        }
        auto id = coord::detail::parse_identity((*n)->data);
        if (!id) return unexpected(corrupt(identity_path(), "the store's identity is malformed"));
        if (known != 0 && known != (*n)->stat.czxid)
            return unexpected(coord::error(coord::make_error_code(coord::errc::store_identity_changed),
                                           "the ZooKeeper store at " + url_ + " was initialized again since this "
                                           "process opened it (" + identity_path() + " was created anew): reopen it"));
        if (known == 0) adopt(n->value().stat.czxid, id->floors.fence);
        return std::move(*id);
    }

    /// What every lease token rests on: the store's fence floor, as the
    /// identity this store object works under states it (read once: 1 round
    /// trip until then, store_uninitialized before `store init`). A lease
    /// token is the floor plus the granting zxid (token_of): zxids go back
    /// with a whole ensemble restored from an old snapshot, and the
    /// recovery's floor (--fence-floor now) puts every later token above
    /// every earlier one.
    result<fence_token> lease_floor() {
        {
            std::lock_guard lk(mutex_);
            if (known_czxid_ != 0) return known_floor_;
        }
        auto id = checked_identity();
        if (!id) return unexpected(id.error());
        std::lock_guard lk(mutex_);
        return known_floor_;
    }
    /// A lease token: `floor` (lease_floor) plus the granting zxid.
    static fence_token token_of(fence_token floor, std::int64_t zxid) {
        return floor + static_cast<fence_token>(zxid < 0 ? 0 : zxid);
    }

    /// What creating a missing record of a counted kind (fence, segment,
    /// reservation, ledger) rests on: the floors the record starts from
    /// (it may be one that was lost), and the kind's parent node, whose data
    /// counts the records coord created under it (created and deleted only
    /// together with that count, in one multi-operation).
    struct absence {
        coord::detail::stated_floors floors;
        std::string parent;
        int parent_version = 0;
        std::uint64_t count = 0;
    };
    /// Checks the store's identity, and that no record of `kind` went missing
    /// (the parent holding fewer children than coord created there: one was
    /// deleted by another client: state_went_back). 2 round trips; only
    /// where a record is missing.
    result<absence> absent(std::string_view kind) {
        auto id = checked_identity();
        if (!id) return unexpected(id.error());
        absence a{id->floors, path(kind), 0, 0};
        auto n = get(a.parent);
        if (!n) return unexpected(n.error());
        if (!*n) return unexpected(went_back(a.parent + " is missing (deleted by another client or an operator)"));
        if (!(*n)->data.empty()) {
            auto c = u64((*n)->data);
            if (!c) return unexpected(corrupt(a.parent, "the count of coord's records is not a number"));
            a.count = *c;
        }
        a.parent_version = (*n)->stat.version;
        const auto children = static_cast<std::uint64_t>((*n)->stat.numChildren < 0 ? 0 : (*n)->stat.numChildren);
        if (children < a.count)
            return unexpected(went_back(std::to_string(a.count - children) + " of the " + std::to_string(a.count) +
                                        " records coord created under " + a.parent +
                                        " are missing (deleted by another client or an operator)"));
        if (children > a.count)
            return unexpected(corrupt(a.parent, "more nodes than coord created there (" + std::to_string(children) +
                                                    ", coord counted " + std::to_string(a.count) + ")"));
        return a;
    }
    /// Creates the record at `p` with its kind's count raised, in one
    /// multi-operation conditional on the count's version: the reply's rc
    /// ZOK (its stat.version 0), or ZBADVERSION, ZNODEEXISTS or ZNONODE
    /// (someone created or deleted in between: read and check again).
    result<reply> create_counted(const absence& a, const std::string& p, const std::string& data) {
        auto r = multi([&](pending& st) {
            st.keep = {a.parent, std::to_string(a.count + 1), p, data};
            st.ops.resize(2);
            st.op_stats.resize(1);
            st.path_buffers.assign(1, std::vector<char>(p.size() + 16));
            zoo_set_op_init(&st.ops[0], st.keep[0].c_str(), st.keep[1].data(), static_cast<int>(st.keep[1].size()),
                            a.parent_version, &st.op_stats[0]);
            zoo_create_op_init(&st.ops[1], st.keep[2].c_str(), st.keep[3].data(), static_cast<int>(st.keep[3].size()),
                               session_.acl(), 0, st.path_buffers[0].data(),
                               static_cast<int>(st.path_buffers[0].size()));
        });
        if (r && r->rc == ZOK) r->stat.version = 0;
        return r;
    }
    /// Deletes the record at `p` (on `version`) with its kind's count
    /// lowered, in one multi-operation: rc ZOK, or ZBADVERSION or ZNONODE
    /// when the record changed or went (the count's own conflicts are
    /// retried here).
    result<reply> delete_counted(std::string_view kind, const std::string& p, int version) {
        const std::string parent = path(kind);
        for (int attempt = 0;; ++attempt) {
            auto n = get(parent);
            if (!n) return unexpected(n.error());
            if (!*n) return unexpected(went_back(parent + " is missing (deleted by another client or an operator)"));
            auto c = u64((*n)->data.empty() ? std::string("0") : (*n)->data);
            if (!c || *c == 0) return unexpected(corrupt(parent, "the count of coord's records is not a positive number"));
            const int pv = (*n)->stat.version;
            auto r = multi([&](pending& st) {
                st.keep = {p, parent, std::to_string(*c - 1)};
                st.ops.resize(2);
                st.op_stats.resize(1);
                zoo_delete_op_init(&st.ops[0], st.keep[0].c_str(), version);
                zoo_set_op_init(&st.ops[1], st.keep[1].c_str(), st.keep[2].data(), static_cast<int>(st.keep[2].size()), pv,
                                &st.op_stats[0]);
            });
            if (!r) return r;
            const bool count_moved = r->rc == ZBADVERSION && r->results.size() == 2 && r->results[1] == ZBADVERSION;
            if (!count_moved || attempt + 1 == coord::detail::conflict_tries) return r;
        }
    }

    /// Initializes the store (store::initialize): the root and its kinds'
    /// nodes created where missing, each counted kind's count set to the
    /// records it holds, and the identity node written with the floors (a
    /// new one, when `replace`), in one multi-operation. The floors' "now":
    /// the time the ensemble stamps on the clock node's write just before
    /// (the fence floor: that time in nanoseconds, and at least the floor
    /// before it plus that write's zxid; see lease_floor).
    result<std::string> initialize(const initial_floors& f, bool replace) {
        std::vector<std::string> paths;
        for (std::size_t i = 1; i <= root_.size(); ++i)
            if (i == root_.size() || root_[i] == '/') paths.push_back(root_.substr(0, i));
        for (const char* kind : {"fence", "lease", "lock", "segment", "reservation", "ledger", "clock"})
            paths.push_back(path(kind));
        for (const auto& p : paths) {
            auto r = create_raw(p, "", 0);
            if (!r) return unexpected(r.error());
            if (r->rc != ZOK && r->rc != ZNODEEXISTS) return unexpected(session::failure(r->rc, true));
        }
        const std::string id = coord::detail::new_store_identity();
        for (int attempt = 0; attempt < coord::detail::conflict_tries; ++attempt) {
            auto old = get(identity_path());
            if (!old) return unexpected(old.error());
            if (*old && !replace)
                return unexpected(coord::error(coord::make_error_code(coord::errc::store_already_initialized),
                                               "the ZooKeeper store at " + url_ + " is already initialized; replacing "
                                               "its identity (--force) makes every process that opened it reopen"));
            auto now = set(path("clock"), "", -1);
            if (!now) return unexpected(now.error());
            if (now->rc != ZOK) return unexpected(went_back(path("clock") + " went missing while initializing"));
            coord::detail::stated_floors stated;
            stated.segment = f.segment;
            std::int64_t now_ms = now->stat.mtime;
            if constexpr (test_clock) now_ms = since_epoch_ns(clock_.now()) / 1'000'000;
            stated.fence = f.fence;
            if (f.fence_now) {
                fence_token before = 0;
                if (*old)
                    if (auto was = coord::detail::parse_identity((*old)->data)) before = was->floors.fence;
                stated.fence = std::max(static_cast<fence_token>(now_ms < 0 ? 0 : now_ms) * 1'000'000,
                                        token_of(before, now->stat.mzxid) + 1);
            }
            stated.ledger_ms = f.ledger_now ? now_ms : f.ledger_ms;
            stated.reservation_ms = f.reservation_now ? now_ms : f.reservation_ms;
            std::vector<std::pair<std::string, std::string>> counts;  // parent, its children now
            std::vector<int> versions;
            for (const char* kind : counted_kinds) {
                auto n = get(path(kind));
                if (!n) return unexpected(n.error());
                if (!*n) return unexpected(went_back(path(kind) + " went missing while initializing"));
                counts.emplace_back(path(kind), std::to_string((*n)->stat.numChildren));
                versions.push_back((*n)->stat.version);
            }
            const std::string text = coord::detail::identity_text(id, stated);
            auto r = multi([&](pending& st) {
                for (auto& [p, c] : counts) {
                    st.keep.push_back(p);
                    st.keep.push_back(c);
                }
                st.keep.push_back(identity_path());
                st.keep.push_back(text);
                const std::size_t n = counts.size();
                st.ops.resize(n + (*old ? 2 : 1));
                st.op_stats.resize(n);
                for (std::size_t i = 0; i < n; ++i)
                    zoo_set_op_init(&st.ops[i], st.keep[2 * i].c_str(), st.keep[2 * i + 1].data(),
                                    static_cast<int>(st.keep[2 * i + 1].size()), versions[i], &st.op_stats[i]);
                std::size_t at = n;
                if (*old) zoo_delete_op_init(&st.ops[at++], st.keep[2 * n].c_str(), (*old)->stat.version);
                st.path_buffers.assign(1, std::vector<char>(identity_path().size() + 16));
                zoo_create_op_init(&st.ops[at], st.keep[2 * n].c_str(), st.keep[2 * n + 1].data(),
                                   static_cast<int>(st.keep[2 * n + 1].size()), session_.acl(), 0,
                                   st.path_buffers[0].data(), static_cast<int>(st.path_buffers[0].size()));
            });
            if (!r) return unexpected(r.error());
            if (r->rc != ZOK) continue;  // a record created or the identity written in between: again
            auto mine = get(identity_path());
            if (!mine) return unexpected(mine.error());
            if (*mine) {
                std::lock_guard lk(mutex_);
                known_czxid_ = (*mine)->stat.czxid;
                known_floor_ = stated.fence;
            }
            return id;
        }
        return unexpected(contention("store initialize"));
    }

    result<std::optional<node>> get(const std::string& p) {
        auto r = session_.call(
            [&](zhandle_t* zh, const void* data) {
                return zoo_aget(zh, p.c_str(), 0,
                                [](int rc, const char* value, int len, const Stat* stat, const void* d) {
                                    finish(d, [&](reply& out) {
                                        out.rc = rc;
                                        if (rc == ZOK) {
                                            if (value && len > 0) out.data.assign(value, static_cast<std::size_t>(len));
                                            if (stat) out.stat = *stat;
                                        }
                                    });
                                },
                                data);
            },
            false);
        if (!r) return unexpected(r.error());
        if (r->rc == ZNONODE) return std::optional<node>{};
        if (r->rc != ZOK) return unexpected(session::failure(r->rc, false));
        return std::optional<node>{node{std::move(r->data), r->stat}};
    }

    /// A one-shot watch on the node at `p` (zoo_awexists: it fires when the
    /// node is created, its data changes or it is deleted), armed now or
    /// already (one per node and session), and its flag. An error: the
    /// watch may not be armed (wait by polling).
    result<std::shared_ptr<watch_flag>> watch(const std::string& p) {
        auto armed = session_.watch_of(p);
        std::shared_ptr<watch_flag> flag = std::move(armed.first);
        if (!armed.second) return flag;  // armed already
        auto r = session_.call(
            [&](zhandle_t* zh, const void* data) {
                return zoo_awexists(zh, p.c_str(), &session::on_watch, flag.get(),
                                    [](int rc, const Stat*, const void* d) { finish(d, [&](reply& out) { out.rc = rc; }); },
                                    data);
            },
            false);
        if (r && (r->rc == ZOK || r->rc == ZNONODE)) return flag;
        session_.unarmed(flag);
        if (!r) return unexpected(r.error());
        return unexpected(session::failure(r->rc, false));
    }

    /// The names of a node's children (a missing node has none).
    result<std::vector<std::string>> children(const std::string& p) {
        auto r = session_.call(
            [&](zhandle_t* zh, const void* data) {
                return zoo_aget_children(zh, p.c_str(), 0,
                                         [](int rc, const String_vector* names, const void* d) {
                                             finish(d, [&](reply& out) {
                                                 out.rc = rc;
                                                 if (rc == ZOK && names)
                                                     for (int i = 0; i < names->count; ++i) out.names.emplace_back(names->data[i]);
                                             });
                                         },
                                         data);
            },
            false);
        if (!r) return unexpected(r.error());
        if (r->rc == ZNONODE) return std::vector<std::string>{};
        if (r->rc != ZOK) return unexpected(session::failure(r->rc, false));
        return std::move(r->names);
    }

    /// setData with a version (-1: any). The reply's rc is the caller's to
    /// read (ZBADVERSION, ZNONODE are answers, not failures).
    result<reply> set(const std::string& p, const std::string& v, int version) {
        if (auto big = too_large(p.size() + v.size())) return unexpected(*big);
        auto r = session_.call(
            [&](zhandle_t* zh, const void* data) {
                return zoo_aset(zh, p.c_str(), v.data(), static_cast<int>(v.size()), version,
                                [](int rc, const Stat* stat, const void* d) {
                                    finish(d, [&](reply& out) {
                                        out.rc = rc;
                                        if (rc == ZOK && stat) out.stat = *stat;
                                    });
                                },
                                data);
            },
            true);
        if (!r) return r;
        if (r->rc != ZOK && r->rc != ZBADVERSION && r->rc != ZNONODE) return unexpected(session::failure(r->rc, true));
        return r;
    }

    /// create (flags: 0 persistent, ZOO_EPHEMERAL), an existing node being
    /// server_refused.
    result<reply> create(const std::string& p, const std::string& v, int flags) {
        auto r = create_or_exists(p, v, flags);
        if (!r) return r;
        if (r->rc == ZNODEEXISTS) return unexpected(coord::error(make_error_code(errc::server_refused), "node exists"));
        if (r->rc != ZOK) return unexpected(session::failure(r->rc, true));
        return r;
    }

    /// create that tells "exists" apart: rc ZOK or ZNODEEXISTS. A missing
    /// parent is the store's state gone (checked_identity says how).
    result<reply> create_or_exists(const std::string& p, const std::string& v, int flags) {
        auto r = create_raw(p, v, flags);
        if (!r) return r;
        if (r->rc == ZNONODE) return unexpected(gone(p.substr(0, p.rfind('/'))));
        if (r->rc != ZOK && r->rc != ZNODEEXISTS) return unexpected(session::failure(r->rc, true));
        return r;
    }

    /// Why a node coord needs (`p`: a kind's parent, the clock) is missing:
    /// the store's identity gone or changed, or, with the identity in place,
    /// state_went_back naming it.
    coord::error gone(const std::string& p) {
        auto id = checked_identity();
        if (!id) return id.error();
        return went_back(p + " is missing (deleted by another client or an operator)");
    }

    /// create, every rc the caller's to read.
    result<reply> create_raw(const std::string& p, const std::string& v, int flags) {
        if (auto big = too_large(p.size() + v.size())) return unexpected(*big);
        return session_.call(
            [&](zhandle_t* zh, const void* data) {
                return zoo_acreate2(zh, p.c_str(), v.data(), static_cast<int>(v.size()), session_.acl(), flags,
                                    [](int rc, const char* path, const Stat* stat, const void* d) {
                                        finish(d, [&](reply& out) {
                                            out.rc = rc;
                                            if (rc == ZOK) {
                                                if (path) out.path = path;
                                                if (stat) out.stat = *stat;
                                            }
                                        });
                                    },
                                    data);
            },
            true);
    }

    /// delete with a version; rc ZOK, ZNONODE or ZBADVERSION are answers.
    result<reply> del(const std::string& p, int version) {
        auto r = session_.call(
            [&](zhandle_t* zh, const void* data) {
                return zoo_adelete(zh, p.c_str(), version,
                                   [](int rc, const void* d) { finish(d, [&](reply& out) { out.rc = rc; }); }, data);
            },
            true);
        if (!r) return r;
        if (r->rc != ZOK && r->rc != ZNONODE && r->rc != ZBADVERSION) return unexpected(session::failure(r->rc, true));
        return r;
    }

    /// One multi-operation (all or nothing). `build(state)` fills state.ops
    /// (pointing into state.keep); the reply's rc is the multi's, results the ops'.
    template <class Build>
    result<reply> multi(Build&& build) {
        auto state = std::make_shared<pending>();
        build(*state);
        std::size_t bytes = 0;
        for (const auto& k : state->keep) bytes += k.size();
        if (auto big = too_large(bytes)) return unexpected(*big);
        state->op_results.resize(state->ops.size());
        auto r = session_.call(
            [&](zhandle_t* zh, const void* data) {
                return zoo_amulti(zh, static_cast<int>(state->ops.size()), state->ops.data(), state->op_results.data(),
                                  [](int rc, const void* d) {
                                      auto* holder = static_cast<const pending_ptr*>(d);
                                      auto& st = **holder;
                                      finish(d, [&](reply& out) {
                                          out.rc = rc;
                                          for (const auto& res : st.op_results) {
                                              out.results.push_back(res.err);
                                              out.stats.push_back(res.stat ? *res.stat : Stat{});
                                          }
                                      });
                                  },
                                  data);
            },
            true, state);
        if (!r) return r;
        if (r->rc != ZOK && r->rc != ZBADVERSION && r->rc != ZNODEEXISTS && r->rc != ZNONODE)
            return unexpected(session::failure(r->rc, true));
        return r;
    }

    /// The store's clock now, in ns: the test clock's reading, or the
    /// ensemble's: the modification time it stamps on the clock node, written
    /// for that purpose (one request; millisecond resolution).
    result<std::int64_t> now_ns() {
        if constexpr (test_clock) {
            return since_epoch_ns(clock_.now());
        } else {
            auto r = set(path("clock"), "", -1);
            if (!r) return unexpected(r.error());
            if (r->rc != ZOK) return unexpected(gone(path("clock")));
            return r->stat.mtime * 1'000'000;
        }
    }

    /// When a record written with `stat` began, on the store's clock: the
    /// ensemble's stamp, or the test clock's reading written in the record.
    static std::int64_t written_at(const Stat& stat, std::int64_t recorded_ns) {
        if constexpr (test_clock) return recorded_ns;
        else return stat.mtime * 1'000'000;
    }
    /// The time a record being written records (the test clock's now; 0 with
    /// the ensemble's clock, which stamps it itself).
    std::string stamp() const {
        if constexpr (test_clock) return std::to_string(since_epoch_ns(clock_.now()));
        else return "0";
    }

    /// The kinds whose records coord counts in their parent's data.
    static constexpr const char* counted_kinds[] = {"fence", "segment", "reservation", "ledger"};

private:
    std::int64_t known_czxid() {
        std::lock_guard lk(mutex_);
        return known_czxid_;
    }
    void adopt(std::int64_t czxid, fence_token floor) {
        std::lock_guard lk(mutex_);
        if (known_czxid_ != 0) return;
        known_czxid_ = czxid;
        known_floor_ = floor;
    }
    coord::error went_back(const std::string& what) const {
        return coord::error(coord::make_error_code(coord::errc::state_went_back),
                            "the ZooKeeper store at " + url_ + " went back: " + what +
                                "; nothing that needs its data is answered. Initialize it again stating floors above "
                                "everything it handed out, and nothing is handed out twice: " + init_words(true));
    }
    coord::error uninitialized() const {
        return coord::error(coord::make_error_code(coord::errc::store_uninitialized),
                            "the ZooKeeper store at " + url_ + " is not initialized (no " + identity_path() +
                                "): a root that never served coord is initialized with coordctl store init --store URL "
                                "--segment-floor 0 --fence-floor 0 --ledger-floor none; one that served coord and lost "
                                "its nodes must state floors above everything it handed out: " + init_words(false));
    }
    static std::string init_words(bool force) {
        return std::string("coordctl store init --store URL") + (force ? " --force" : "") +
               " --segment-floor N (at least the largest segment ID it ever handed out) --fence-floor N|now (at least "
               "the highest fence token it accepted; now: above every lease token it granted) --ledger-floor "
               "INSTANT|now (slots scheduled up to it are not run again); docs/concepts/went-back.md";
    }

    session session_;
    std::string root_;
    Clock clock_;
    std::string url_;
    std::mutex mutex_;
    std::int64_t known_czxid_ = 0;  // the identity node's creation zxid, once read
    fence_token known_floor_ = 0;   // its fence floor
};

}  // namespace coord::zookeeper::detail
