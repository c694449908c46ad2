// SPDX-License-Identifier: Apache-2.0
// coord/zookeeper/connection.hpp: the ZooKeeper connection layer of coord's
// engine: the error codes, the store's options and ensemble address, one
// ZooKeeper session (the C client, libzookeeper_mt), and the one way a call
// talks to the ensemble: an asynchronous request whose completion is awaited
// under the call's deadline.
//
// A request that gets no completion by its deadline returns: a writing
// request is errc::outcome_unknown (it may have been applied), a reading one
// errc::deadline_passed; the completion, if it comes later, is dropped.
// Connection loss is not session expiry: while the client reconnects (to any
// server of the ensemble) requests fail with connection_loss (a write that
// was sent: outcome_unknown); once the ensemble expired the session, the
// store opens a new one on the next call, and every session-bound lease of
// the old session is gone (ZooKeeper deleted its nodes).
#pragma once

// Marks that a store header is in (tests/layering_test.cpp checks that no
// primitive or rule header pulls one in); every engine header includes this one.
#ifndef COORD_STORE_HEADER_INCLUDED
#define COORD_STORE_HEADER_INCLUDED 1
#endif

#include <zookeeper/zookeeper.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "coord/clock.hpp"
#include "coord/detail/deadline.hpp"
#include "coord/detail/engine_errors.hpp"
#include "coord/detail/engine_outcome.hpp"
#include "coord/detail/host.hpp"
#include "coord/detail/options.hpp"
#include "coord/detail/text.hpp"
#include "coord/error.hpp"
#include "coord/result.hpp"

namespace coord::zookeeper {

/// Infrastructure failures of the ZooKeeper engine.
enum class errc {
    /// No session could be established with the ensemble in time.
    connection_failed = 1,
    /// The client lost its connection (it is reconnecting); for a read, or a
    /// write that was not sent. A write that was sent is outcome_unknown.
    connection_loss,
    /// The ensemble expired the session: session-bound leases are gone.
    session_expired,
    /// ZooKeeper refused the request (nothing was applied).
    server_refused,
    /// The answer was not what the engine expects (a node not written by coord?).
    bad_answer,
    /// No completion within options::operation_timeout, for a call that wrote nothing.
    deadline_passed,
    /// The same compare-and-set lost to other writers too many times in a row.
    contention,
    /// The ensemble refused the request for this client's identity (ZNOAUTH:
    /// coord's nodes were created by other credentials, or none were given
    /// where they are required; ZAUTHFAILED). Nothing was applied.
    not_authorized,
};

inline const std::error_category& category() noexcept {
    static const coord::detail::engine_category<errc, 8> instance(
        "coord.zookeeper", "ZooKeeper",
        {{
             {errc::connection_failed, coord::condition::unavailable, "no ZooKeeper session could be established"},
             {errc::connection_loss, coord::condition::unavailable, "the connection to ZooKeeper was lost"},
             {errc::session_expired, coord::condition::unavailable, "the ZooKeeper session expired"},
             {errc::server_refused, coord::condition::unavailable, "ZooKeeper refused the request"},
             {errc::bad_answer, coord::condition::outcome_unknown, "unexpected answer from ZooKeeper"},
             {errc::deadline_passed, coord::condition::unavailable, "no answer from ZooKeeper within the operation timeout"},
             {errc::contention, coord::condition::unavailable, "a ZooKeeper compare-and-set kept losing to other writers"},
             {errc::not_authorized, coord::condition::not_authorized,
              "ZooKeeper refused this client's identity for coord's nodes"},
        }});
    return instance;
}
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), category()}; }

}  // namespace coord::zookeeper

/// @cond STD_SPECIALIZATIONS
template <>
struct std::is_error_code_enum<coord::zookeeper::errc> : std::true_type {};
/// @endcond

namespace coord::zookeeper {

/// The ensemble and the root node: zookeeper://HOST:PORT[,HOST:PORT...][/ROOT].
struct address {
    std::string hosts;           ///< "h1:p1,h2:p2" as the C client takes it
    std::string root = "/coord"; ///< every node of the store lies under it
};

/// Why `root` cannot be the store's root node, or nothing: ZooKeeper's
/// paths are absolute, without empty, "." or ".." components or control
/// characters (the server refuses them), and the /zookeeper tree is the
/// server's own.
inline std::optional<std::string> root_error(std::string_view root) {
    const std::string form = "the root must be a node path such as /coord";
    if (root.size() < 2 || root.front() != '/') return form;
    std::size_t at = 1;
    while (at <= root.size()) {
        auto end = root.find('/', at);
        if (end == std::string_view::npos) end = root.size();
        const std::string_view part = root.substr(at, end - at);
        if (part.empty() || part == "." || part == "..") return form + " (no empty, '.' or '..' components)";
        for (unsigned char c : part)
            if (c < 0x20 || c == 0x7f) return form + " (no control characters)";
        at = end + 1;
    }
    if (root == "/zookeeper" || root.substr(0, 11) == "/zookeeper/")
        return std::string("the root must not be in /zookeeper: that tree is ZooKeeper's own");
    if (!coord::detail::valid_name_text(root)) return form + " (valid UTF-8)";
    return std::nullopt;
}

/// Parses zookeeper://HOST:PORT[,HOST:PORT...][/ROOT]; the error says what is wrong.
inline result<address, std::string> parse_url(std::string_view url) {
    constexpr std::string_view scheme = "zookeeper://";
    if (url.substr(0, scheme.size()) != scheme) return unexpected(std::string("a ZooKeeper URL starts with zookeeper://"));
    std::string_view rest = url.substr(scheme.size());
    address a;
    if (auto slash = rest.find('/'); slash != std::string_view::npos) {
        a.root = std::string(rest.substr(slash));
        rest = rest.substr(0, slash);
        while (a.root.size() > 1 && a.root.back() == '/') a.root.pop_back();
        if (auto why = root_error(a.root)) return unexpected(*why);
    }
    std::string_view hosts = rest;
    while (!hosts.empty()) {
        const auto comma = hosts.find(',');
        const std::string_view one = hosts.substr(0, comma);
        auto hp = coord::detail::parse_host_port(one, "server");
        if (!hp) return unexpected(hp.error());
        if (comma == std::string_view::npos) break;
        hosts = hosts.substr(comma + 1);
        if (hosts.empty()) return unexpected(std::string("each server is HOST:PORT"));
    }
    if (rest.empty()) return unexpected(std::string("the URL names no server"));
    a.hosts = std::string(rest);
    return a;
}

/// Store settings; out-of-range values make the constructor throw
/// std::invalid_argument naming the field.
struct options {
    /// Bounds each call as a whole (1 ms to 24 h).
    std::chrono::milliseconds operation_timeout = coord::detail::defaults::operation_timeout;
    /// The session timeout asked for (the ensemble clamps it to its
    /// minSessionTimeout..maxSessionTimeout, by default 2 to 20 ticks: 4 s to
    /// 40 s with tickTime=2000): the term of session-bound leases.
    std::chrono::milliseconds session_timeout{10000};
    /// Bounds establishing a session (1 ms to 24 h).
    std::chrono::milliseconds connect_timeout = coord::detail::defaults::connect_timeout;
    /// The most bytes of node data and paths one request carries (4 KiB to
    /// 64 MiB): the ensemble drops a packet above its jute.maxbuffer (1 MiB
    /// by default) and closes the connection. A larger request is refused
    /// before it is sent (coord::errc::value_too_large, condition
    /// bad_input). Raise it with the ensemble's jute.maxbuffer.
    std::size_t max_request_bytes = 1024 * 1024 - 4096;
    /// Digest credentials, "USER:PASSWORD" (empty: none). Given, the session
    /// authenticates with them (ZooKeeper's `addauth digest`, again on every
    /// new session) and every node coord creates carries the ACL
    /// `auth::cdrwa` (all rights to this identity only) plus
    /// `world:anyone:r` (others may read, never change or delete). Never
    /// logged or put in an error. The URL form reads them from a file:
    /// zookeeper://HOST:PORT/ROOT?digest_file=PATH (coord/open.hpp).
    std::string digest{};
};

/// The clock policy that means "the ensemble's clock": every term is judged
/// on times the ensemble stamps (a node's modification time). Tests may give
/// a manual_clock instead, whose readings are written with each record.
using server_clock = coord::server_clock;

class session;

namespace detail {

/// What a completion brought back.
struct reply {
    int rc = ZOK;
    std::string data;
    Stat stat{};
    std::string path;  // a create's path
    std::vector<int> results;  // a multi's per-operation codes
    std::vector<Stat> stats;   // and stats (set operations)
    std::vector<std::string> names;  // a node's children
};

/// The state one request shares with its completion (which may come after
/// the caller gave up: it then lands here and is dropped).
struct pending {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    reply out;
    // A multi's operations and their results live as long as the request.
    std::vector<zoo_op_t> ops;
    std::vector<zoo_op_result_t> op_results;
    std::vector<std::string> keep;     // buffers the ops point into
    std::vector<Stat> op_stats;
    std::vector<std::vector<char>> path_buffers;
};
using pending_ptr = std::shared_ptr<pending>;

inline void finish(const void* data, const std::function<void(reply&)>& fill) {
    auto* holder = static_cast<pending_ptr*>(const_cast<void*>(data));
    {
        std::lock_guard lk((*holder)->mutex);
        fill((*holder)->out);
        (*holder)->done = true;
    }
    (*holder)->cv.notify_all();
    delete holder;
}

/// A one-shot watch's flag: set when ZooKeeper calls the watch (the node
/// was created, changed or deleted, or an event of the session: a wake
/// either way). The session keeps it until then (the C client holds a raw
/// pointer to it), or to its own end.
struct watch_flag {
    std::mutex mutex;
    std::condition_variable cv;
    bool fired = false;
    session* owner = nullptr;
    std::string path;
};

inline std::string rc_words(int rc) {
    const char* w = zerror(rc);
    return w ? w : "unknown";
}

}  // namespace detail

/// One ZooKeeper session, reopened when the ensemble expired it. Thread-safe
/// (the C client is).
class session {
public:
    /// A session with the ensemble at `a`, opened on first use.
    session(const address& a, const options& o) : address_(a), opts_(o) {
        // A library writes nothing to the application's stderr: the C
        // client's own log is off (level 0); errors come back in the values.
        static const bool quiet = [] {
            zoo_set_debug_level(static_cast<ZooLogLevel>(0));
            return true;
        }();
        (void)quiet;
    }
    session(const session&) = delete;
    session& operator=(const session&) = delete;
    /// The hosts and root it was opened with.
    const address& where() const noexcept { return address_; }
    ~session() {
        std::vector<zhandle_t*> all;
        {
            std::lock_guard lk(mutex_);
            all = std::move(retired_);
            if (zh_) all.push_back(std::exchange(zh_, nullptr));
        }
        for (auto* zh : all) zookeeper_close(zh);  // outside the lock: its last watcher call takes it
        // The watches that never fired die with their handles, above; their
        // flags go with armed_ and unarmed_.
    }

    /// The watch flag of `path`: the one armed already and not fired yet
    /// (fresh false: watchers of one node share one watch), or a new one
    /// (fresh true: pass flag.get() as the watcher context of a zoo_aw* call
    /// with on_watch, and unarmed() when that call failed). Kept by this
    /// session until its watch fires.
    std::pair<std::shared_ptr<detail::watch_flag>, bool> watch_of(const std::string& path) {
        std::lock_guard lk(watches_mutex_);
        auto& f = armed_[path];
        if (f) return {f, false};
        f = std::make_shared<detail::watch_flag>();
        f->owner = this;
        f->path = path;
        return {f, true};
    }
    /// A new flag whose zoo_aw* call failed: not shared any more; kept (the
    /// call may still have armed it) until it fires or the session ends.
    void unarmed(const std::shared_ptr<detail::watch_flag>& f) {
        std::lock_guard lk(watches_mutex_);
        if (auto it = armed_.find(f->path); it != armed_.end() && it->second == f) armed_.erase(it);
        unarmed_.push_back(f);
    }
    /// The watcher of watch_of()'s flags.
    static void on_watch(zhandle_t*, int type, int, const char*, void* ctx) {
        auto* f = static_cast<detail::watch_flag*>(ctx);
        {
            std::lock_guard lk(f->mutex);
            f->fired = true;
        }
        f->cv.notify_all();
        session* s = f->owner;
        std::lock_guard lk(s->watches_mutex_);
        auto it = s->armed_.find(f->path);
        const bool shared = it != s->armed_.end() && it->second.get() == f;
        if (type == ZOO_SESSION_EVENT) {
            // A session's event does not end the watch (the client delivers
            // it to every watch it keeps, and may call it again): fired, so
            // no longer shared, and kept.
            if (shared) {
                s->unarmed_.push_back(std::move(it->second));
                s->armed_.erase(it);
            }
            return;
        }
        // A node's event ends the watch: f may be gone from here on.
        s->node_events_.fetch_add(1, std::memory_order_relaxed);
        if (shared) {
            s->armed_.erase(it);
            return;
        }
        std::erase_if(s->unarmed_, [&](const std::shared_ptr<detail::watch_flag>& w) { return w.get() == f; });
    }

    /// The options in force.
    const options& opts() const noexcept { return opts_; }

    /// How many watch notifications of a node (created, changed, deleted)
    /// the ensemble delivered to this object's sessions: what waiting
    /// costs, counted (the herd-free tests compare it).
    std::uint64_t node_notifications() const noexcept { return node_events_.load(std::memory_order_relaxed); }

    ///@{
    /// The session's id and the term the ensemble negotiated, once connected (0 before).
    std::int64_t id() {
        std::lock_guard lk(mutex_);
        return zh_ ? zoo_client_id(zh_)->client_id : 0;
    }
    std::chrono::milliseconds negotiated_timeout() {
        std::lock_guard lk(mutex_);
        return std::chrono::milliseconds{zh_ ? zoo_recv_timeout(zh_) : 0};
    }
    ///@}
    /// How many sessions this object has had (a new one after an expiry).
    std::uint64_t generation() {
        std::lock_guard lk(mutex_);
        return generation_;
    }

    /// The handle, connected: a new session when there is none or the
    /// ensemble expired the last one; waits for the connection until `until`.
    result<zhandle_t*> handle(coord::detail::deadline until) {
        std::unique_lock lk(mutex_);
        if (zh_ && zoo_state(zh_) == ZOO_EXPIRED_SESSION_STATE) {
            // Other threads may still be in a call on it: closed with the store.
            retired_.push_back(std::exchange(zh_, nullptr));
        }
        if (!zh_) {
            zh_ = zookeeper_init(address_.hosts.c_str(), &session::watcher, static_cast<int>(opts_.session_timeout.count()),
                                 nullptr, this, 0);
            if (!zh_) return unexpected(coord::error(make_error_code(errc::connection_failed), "zookeeper_init failed"));
            ++generation_;
            auth_rc_ = ZOK;
            if (!opts_.digest.empty()) {
                // Sent with the connection (and again at each reconnection
                // of this handle); its answer comes with the first one.
                auth_rc_ = ZNOTHING;
                const int rc = zoo_add_auth(zh_, "digest", opts_.digest.data(), static_cast<int>(opts_.digest.size()),
                                            &session::authenticated, this);
                if (rc != ZOK) return unexpected(failure(rc, false, false));
            }
        }
        const auto limit = std::min(until, coord::detail::deadline_after(opts_.connect_timeout));
        const bool up = state_cv_.wait_until(lk, limit, [&] {
            return auth_rc_ != ZNOTHING && (auth_rc_ != ZOK || zoo_state(zh_) == ZOO_CONNECTED_STATE);
        });
        if (up && auth_rc_ != ZOK) return unexpected(failure(auth_rc_, false, false));
        if (!up) {
            const int st = zoo_state(zh_);
            if (st == ZOO_EXPIRED_SESSION_STATE)
                return unexpected(coord::error(make_error_code(errc::session_expired), "the ensemble expired the session"));
            return unexpected(coord::error(make_error_code(errc::connection_failed),
                                           address_.hosts + ": no connection within the connect timeout"));
        }
        return zh_;
    }

    /// Runs `start(zh, completion-data)` (an asynchronous zoo_a* call that
    /// completes through detail::finish) and waits for its completion until
    /// the call's deadline. `writes`: a request that may change the tree.
    template <class Start>
    result<detail::reply> call(Start&& start, bool writes, const detail::pending_ptr& p = nullptr) {
        const auto until = coord::detail::deadline_after(opts_.operation_timeout);
        auto zh = handle(until);
        if (!zh) return unexpected(zh.error());
        auto state = p ? p : std::make_shared<detail::pending>();
        auto* holder = new detail::pending_ptr(state);
        const int rc = start(*zh, static_cast<const void*>(holder));
        if (rc != ZOK) {
            delete holder;  // not queued: no completion will come
            return unexpected(failure(rc, writes, false));
        }
        std::unique_lock lk(state->mutex);
        if (!state->cv.wait_until(lk, until, [&] { return state->done; })) {
            return unexpected(coord::detail::engine_failure(
                coord::detail::call_fate::lost_after_send, writes,
                coord::error(make_error_code(errc::deadline_passed), "no completion within the call's deadline")));
        }
        detail::reply out = std::move(state->out);
        return out;
    }

    /// The error a completion code is (ZOK and the codes the adapters
    /// handle themselves never reach here).
    static coord::error failure(int rc, bool writes, bool sent = true) {
        const std::string words = detail::rc_words(rc);
        switch (rc) {
        case ZCONNECTIONLOSS:
        case ZOPERATIONTIMEOUT:
            return coord::detail::engine_failure(sent ? coord::detail::call_fate::lost_after_send : coord::detail::call_fate::not_sent,
                                                 writes, coord::error(make_error_code(errc::connection_loss), words));
        case ZSESSIONEXPIRED:
        case ZSESSIONMOVED:
            return coord::detail::engine_failure(sent ? coord::detail::call_fate::lost_after_send : coord::detail::call_fate::not_sent,
                                                 writes, coord::error(make_error_code(errc::session_expired), words));
        case ZINVALIDSTATE:
        case ZCLOSING:
            return coord::error(make_error_code(errc::connection_loss), words);
        case ZNOAUTH:
        case ZAUTHFAILED:
        case ZINVALIDACL:
            return coord::error(make_error_code(errc::not_authorized),
                                words + ": coord's nodes there were created by other credentials, or this client gave "
                                        "none (options::digest; the URL's digest_file=PATH)");
        default: return coord::error(make_error_code(errc::server_refused), words);
        }
    }

    /// The ACL every node coord creates carries: with digest credentials,
    /// all rights to this session's identity and reading to anyone; without,
    /// ZooKeeper's open ACL.
    const ACL_vector* acl() const noexcept {
        static ACL owner_and_readers[] = {{ZOO_PERM_ALL, ZOO_AUTH_IDS}, {ZOO_PERM_READ, ZOO_ANYONE_ID_UNSAFE}};
        static ACL_vector secured = {2, owner_and_readers};
        return opts_.digest.empty() ? &ZOO_OPEN_ACL_UNSAFE : &secured;
    }

private:
    static void watcher(zhandle_t*, int, int, const char*, void* ctx) {
        auto* self = static_cast<session*>(ctx);
        { std::lock_guard lk(self->mutex_); }
        self->state_cv_.notify_all();
    }
    static void authenticated(int rc, const void* ctx) {
        auto* self = static_cast<session*>(const_cast<void*>(ctx));
        {
            std::lock_guard lk(self->mutex_);
            self->auth_rc_ = rc;
        }
        self->state_cv_.notify_all();
    }

    address address_;
    options opts_;
    std::mutex mutex_;
    std::condition_variable state_cv_;
    zhandle_t* zh_ = nullptr;
    std::vector<zhandle_t*> retired_;  // expired sessions' handles
    std::mutex watches_mutex_;
    std::atomic<std::uint64_t> node_events_{0};
    std::map<std::string, std::shared_ptr<detail::watch_flag>> armed_;  // by path: armed, not fired yet
    std::vector<std::shared_ptr<detail::watch_flag>> unarmed_;           // their calls failed, not fired yet
    std::uint64_t generation_ = 0;
    int auth_rc_ = ZOK;  // the digest's answer for the current handle (ZNOTHING: not yet)
};

}  // namespace coord::zookeeper
