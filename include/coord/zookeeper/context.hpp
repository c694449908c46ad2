// SPDX-License-Identifier: Apache-2.0
// coord/zookeeper/context.hpp: what every adapter of the ZooKeeper engine
// shares: node paths under the store's root, the requests (get, set,
// create, delete, multi) awaited under the call's deadline, the records'
// encoding, and the clock: the ensemble's (a node's modification time,
// stamped by the ensemble when it writes the node) or a test clock's.
#pragma once

#include <charconv>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "coord/clock.hpp"
#include "coord/detail/backoff.hpp"
#include "coord/detail/options.hpp"
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
        : session_(parsed(url), checked(std::move(opts))), root_(session_.where().root), clock_(std::move(clock)) {}
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

    /// Creates the root and its kinds' parents (persistent, empty) when missing.
    result<void> ensure_tree() {
        std::vector<std::string> paths;
        for (std::size_t i = 1; i <= root_.size(); ++i)
            if (i == root_.size() || root_[i] == '/') paths.push_back(root_.substr(0, i));
        for (const char* kind : {"fence", "lease", "slease", "segment", "reservation", "ledger", "clock"})
            paths.push_back(path(kind));
        for (const auto& p : paths) {
            auto r = create(p, "", 0);
            if (!r && r.error() != errc::server_refused) return unexpected(r.error());
        }
        return {};
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

    /// create that tells "exists" apart: rc ZOK or ZNODEEXISTS.
    result<reply> create_or_exists(const std::string& p, const std::string& v, int flags) {
        if (auto big = too_large(p.size() + v.size())) return unexpected(*big);
        auto r = session_.call(
            [&](zhandle_t* zh, const void* data) {
                return zoo_acreate2(zh, p.c_str(), v.data(), static_cast<int>(v.size()), &ZOO_OPEN_ACL_UNSAFE, flags,
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
        if (!r) return r;
        if (r->rc != ZOK && r->rc != ZNODEEXISTS && r->rc != ZNONODE) return unexpected(session::failure(r->rc, true));
        return r;
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
            if (r->rc != ZOK) return unexpected(bad("the clock node is missing"));
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

private:
    session session_;
    std::string root_;
    Clock clock_;
};

}  // namespace coord::zookeeper::detail
