// SPDX-License-Identifier: Apache-2.0
// coord/redis/connection.hpp: the Redis connection layer of coord's engine:
// the error codes, the store's options and address, a pool of connections,
// and the one way a call talks to the server (commands sent together and
// their replies read back, scripts by SHA), every call under a deadline.
//
// The layer owns its sockets, non-blocking, and polls them
// (coord/detail/deadline.hpp); hiredis formats the commands and parses the
// replies (its reader), which every hiredis since 0.14 has. Over TLS
// (rediss://, or a CA or client certificate in the options) OpenSSL carries
// the bytes: the server's certificate checked against options::ca_file (or
// the system's CAs) and its name against the host of the URL, the client's
// certificate sent when given; a handshake the server or coord refuses is
// errc::tls_failed (condition not_authorized: a configuration to fix).
// Debian 12's hiredis 0.14 has no TLS of its own.
//
// A paused, partitioned or black-holed server gives an answer in bounded time:
// - nothing was sent, or the server refused the command (LOADING, MISCONF,
//   READONLY, an error reply): the engine's code, condition unavailable;
// - a writing call was sent and no reply came in time, or the connection
//   broke after sending: errc::outcome_unknown (the script may have run).
// The connection is then dropped and the next call reconnects. A new
// connection is checked with one round trip (AUTH, SELECT or PING) before a
// call uses it: a server that speaks TLS to a plain client (or the other way
// round) is refused there, never an unknown outcome of the first write.
#pragma once

// Marks that a store header is in (tests/layering_test.cpp checks that no
// primitive or rule header pulls one in); every engine header includes this one.
#ifndef COORD_STORE_HEADER_INCLUDED
#define COORD_STORE_HEADER_INCLUDED 1
#endif

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <type_traits>
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
#include "coord/result.hpp"

namespace coord::redis {

/// Infrastructure failures of the Redis engine.
enum class errc {
    /// No connection could be made (refused, unreachable, no answer within
    /// options::connect_timeout, SELECT of the database refused).
    connection_failed = 1,
    /// The server answered the command with an error (nothing was applied).
    server_refused,
    /// The server is loading its data set after a restart (LOADING).
    loading,
    /// The server refuses writes because it cannot persist (MISCONF).
    misconfigured,
    /// The server is a read-only replica (READONLY): write to the master.
    read_only,
    /// A script ran too long on the server (BUSY) or it is out of memory (OOM).
    busy,
    /// The server's reply was not what the engine expects.
    bad_answer,
    /// No reply within options::operation_timeout, for a call that wrote
    /// nothing; a writing call that was sent is errc::outcome_unknown instead.
    deadline_passed,
    /// The server is older than Redis 7.0 (scripts need its flags and
    /// effects replication).
    server_too_old,
    /// The server refused these credentials or the user's rights on coord's
    /// keys and scripts (WRONGPASS, NOAUTH, NOPERM): a configuration to fix.
    not_authorized,
    /// The TLS handshake failed: the server's certificate is not signed by
    /// the CA coord trusts or not for that host, the server wants a client
    /// certificate or refused it, or one side does not speak TLS (rediss://
    /// to a plain port): a configuration to fix.
    tls_failed,
};

inline const std::error_category& category() noexcept {
    static const coord::detail::engine_category<errc, 11> instance(
        "coord.redis", "Redis",
        {{
             {errc::connection_failed, coord::condition::unavailable, "Redis connection failed"},
             {errc::server_refused, coord::condition::unavailable, "Redis refused the command"},
             {errc::loading, coord::condition::unavailable, "Redis is loading its data set"},
             {errc::misconfigured, coord::condition::unavailable, "Redis refuses writes (MISCONF: it cannot persist)"},
             {errc::read_only, coord::condition::unavailable, "Redis is a read-only replica"},
             {errc::busy, coord::condition::unavailable, "Redis is busy or out of memory"},
             {errc::bad_answer, coord::condition::outcome_unknown, "unexpected reply from Redis"},
             {errc::deadline_passed, coord::condition::unavailable, "no reply from Redis within the operation timeout"},
             {errc::server_too_old, coord::condition::unavailable, "Redis 7.0 or later is required"},
             {errc::not_authorized, coord::condition::not_authorized, "Redis refused these credentials or their rights"},
             {errc::tls_failed, coord::condition::not_authorized, "the TLS handshake with Redis failed"},
        }});
    return instance;
}
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), category()}; }

}  // namespace coord::redis

/// @cond STD_SPECIALIZATIONS
template <>
struct std::is_error_code_enum<coord::redis::errc> : std::true_type {};
/// @endcond

namespace coord::redis {

/// One server: a host (an IPv6 address without its brackets) and a port.
struct server {
    std::string host;  ///< the host: a name or an address
    int port = 6379;   ///< the TCP port
};

/// Where the server is: redis://HOST:PORT[/DB] (rediss:// for TLS), or the
/// Sentinels that name it: redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER[/DB]
/// (rediss+sentinel:// for TLS to the Sentinels and the master alike).
struct address {
    std::string host;                 ///< the server (without Sentinels)
    int port = 6379;                  ///< its port (without Sentinels)
    int db = 0;                       ///< the database number (SELECT)
    bool tls = false;                 ///< rediss: TLS to every server
    std::vector<server> sentinels{};  ///< asked, in order, for the master's address
    std::string master{};             ///< the name the Sentinels monitor it under
};

/// Parses redis://HOST:PORT[/DB], rediss://HOST:PORT[/DB] (TLS),
/// redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER[/DB] and
/// rediss+sentinel://... (HOST a name, an IPv4 address or [IPv6]; PORT 1 to
/// 65535, 6379 and for a Sentinel 26379 when left out; MASTER letters,
/// digits, '.', '-' and '_'; DB 0 to 15, default 0). The error says what is
/// wrong.
inline result<address, std::string> parse_url(std::string_view url) {
    address a;
    bool sentinel = false;
    std::string_view rest;
    for (const auto& [scheme, tls, by_sentinel] :
         {std::tuple{std::string_view("redis://"), false, false}, std::tuple{std::string_view("rediss://"), true, false},
          std::tuple{std::string_view("redis+sentinel://"), false, true},
          std::tuple{std::string_view("rediss+sentinel://"), true, true}})
        if (url.substr(0, scheme.size()) == scheme) {
            a.tls = tls;
            sentinel = by_sentinel;
            rest = url.substr(scheme.size());
            break;
        }
    if (rest.data() == nullptr)
        return unexpected(std::string("a Redis URL starts with redis:// (rediss:// for TLS, redis+sentinel:// for Sentinels)"));
    const auto slash = rest.find('/');
    const std::string_view hosts = rest.substr(0, slash);
    std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (hosts.find('@') != std::string_view::npos)
        return unexpected(std::string("credentials in the URL are not supported (give options::password)"));
    if (hosts.empty()) return unexpected(std::string("the URL names no host"));
    auto unbracketed = [](const std::string& h) { return h.front() == '[' ? h.substr(1, h.size() - 2) : h; };
    if (sentinel) {
        for (std::string_view list = hosts;;) {
            const auto comma = list.find(',');
            auto hp = coord::detail::parse_host_port(list.substr(0, comma), "Sentinel", 26379);
            if (!hp) return unexpected(hp.error());
            a.sentinels.push_back({unbracketed(hp->host), hp->port});
            if (comma == std::string_view::npos) break;
            list = list.substr(comma + 1);
        }
        const auto end = path.find('/');
        a.master = std::string(path.substr(0, end));
        path = end == std::string_view::npos ? std::string_view() : path.substr(end + 1);
        const bool named = !a.master.empty() && a.master.size() <= 128 &&
                           std::all_of(a.master.begin(), a.master.end(), [](char c) {
                               return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                                      c == '.' || c == '-' || c == '_';
                           });
        if (!named)
            return unexpected(std::string("after the Sentinels comes /MASTER: the name they monitor the master under "
                                          "(letters, digits, '.', '-', '_')"));
        if (end == std::string_view::npos) return a;
    } else {
        if (slash == std::string_view::npos) path = std::string_view();
        auto hp = coord::detail::parse_host_port(hosts, "server", 6379);
        if (!hp) return unexpected(hp.error());
        a.host = unbracketed(hp->host);
        a.port = hp->port;
        if (slash == std::string_view::npos) return a;
    }
    int v = -1;
    auto [p, ec] = std::from_chars(path.data(), path.data() + path.size(), v);
    if (path.empty() || ec != std::errc{} || p != path.data() + path.size() || v < 0 || v > 15)
        return unexpected(std::string("the database after / must be 0 to 15"));
    a.db = v;
    return a;
}

/// Store settings; out-of-range values make the constructor throw
/// std::invalid_argument naming the field.
struct options {
    /// Connections kept open at most (1 to 64); each call takes one for its
    /// whole step. Opened on first use, reopened on the next call after they
    /// break or time out.
    std::size_t pool_size = coord::detail::defaults::pool_size;
    /// Bounds each call as a whole (1 ms to 24 h): waiting for a pooled
    /// connection, connecting, sending, waiting for the reply.
    std::chrono::milliseconds operation_timeout = coord::detail::defaults::operation_timeout;
    /// Bounds making a connection (1 ms to 24 h; also within the call's
    /// operation timeout). Host names are resolved before it starts.
    std::chrono::milliseconds connect_timeout = coord::detail::defaults::connect_timeout;
    /// Every key of the store starts with "{prefix}:": one hash tag, so that
    /// every key of every operation (and the store's identity key, which
    /// every script that needs the store's data checks) lies in one slot of
    /// a Redis Cluster. 1 to 64 characters, no braces. Stores with different
    /// prefixes on one server are independent (and may lie on different
    /// shards of a cluster).
    std::string prefix = coord::detail::defaults::prefix;
    /// AUTH with this password when not empty (and `user`, when not empty:
    /// an ACL user).
    std::string user;
    std::string password;  ///< AUTH's password (never in a message)
    /// TLS (also switched on by a rediss:// URL): the CA bundle the server's
    /// certificate must be signed by (PEM; empty: the system's CAs), and the
    /// client's certificate chain and key (PEM, both or neither) for a
    /// server that asks for one (tls-auth-clients). A CA or a certificate
    /// switches TLS on. A file OpenSSL cannot use makes the constructor throw
    /// std::invalid_argument naming it.
    std::string ca_file{};
    std::string cert_file{};  ///< the client's certificate chain (PEM)
    std::string key_file{};  ///< its private key (PEM)
};

/// The clock policy that means "the server's clock": every expiry is judged
/// on the server's TIME, read inside the script. Tests may give a
/// manual_clock instead, whose readings are sent with each call.
using server_clock = coord::server_clock;

namespace detail {

struct reply_deleter {
    void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
/// One reply, freed with the object.
using reply = std::unique_ptr<redisReply, reply_deleter>;

/// The text of a string, status or error reply (empty otherwise).
inline std::string_view text(const redisReply* r) noexcept {
    if (!r) return {};
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR)
        return {r->str, r->len};
    return {};
}
/// Element i of an array reply as text ("" when absent or not a string).
inline std::string_view element(const redisReply* r, std::size_t i) noexcept {
    if (!r || r->type != REDIS_REPLY_ARRAY || i >= r->elements) return {};
    return text(r->element[i]);
}
inline std::size_t elements(const redisReply* r) noexcept {
    return r && r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
}

/// A decimal the engine wrote (unsigned): nullopt when it is not one.
/// A token as the fence and lease records keep it: 20 decimal digits, zeros
/// in front (every 64-bit value fits; equal widths compare as numbers).
inline void append_token_digits(std::string& out, std::uint64_t v) {
    char buf[20];
    for (int i = 19; i >= 0; --i) {
        buf[i] = static_cast<char>('0' + v % 10);
        v /= 10;
    }
    out.append(buf, sizeof buf);
}
inline std::string token_digits(std::uint64_t v) {
    std::string s;
    append_token_digits(s, v);
    return s;
}

inline std::optional<std::uint64_t> u64_of(std::string_view s) noexcept {
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
    return v;
}
inline std::optional<std::int64_t> i64_of(std::string_view s) noexcept {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
    return v;
}

inline std::string millis_text(std::chrono::nanoseconds d) {
    std::string s = std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
    s += " ms";
    return s;
}

/// One command: its arguments, binary-safe.
using command = std::vector<std::string>;

/// A Lua script of the engine. Its SHA-1 is learned from the server (SCRIPT
/// LOAD) the first time and kept for the process: a function of the body.
struct script {
    const char* body;
};

/// The SHA-1s the server gave for the scripts (a function of the body).
class script_shas {
public:
    /// The SHA learned for `s`, or null. A SHA once learned stays, unchanged
    /// (the same body has the same SHA), so the pointer stays valid.
    static const std::string* of(const script& s) {
        std::lock_guard lk(mutex());
        auto it = map().find(s.body);
        return it == map().end() ? nullptr : &it->second;
    }
    static void learn(const script& s, std::string sha) {
        std::lock_guard lk(mutex());
        map().try_emplace(s.body, std::move(sha));
    }

private:
    static std::mutex& mutex() {
        static std::mutex m;
        return m;
    }
    static std::map<const char*, std::string>& map() {
        static std::map<const char*, std::string> m;
        return m;
    }
};

/// The condition an error reply names (failed on the server: nothing applied).
inline coord::error server_error(std::string_view message) {
    auto starts = [&](std::string_view p) { return message.substr(0, p.size()) == p; };
    // A key of the store that holds another type (a script stops at the
    // command before it writes anything).
    if (starts("WRONGTYPE"))
        return coord::error(coord::make_error_code(coord::errc::state_corrupt),
                            std::string(message) + " (a key of the store holds another type: another program, or an older coord's layout)");
    const errc code = starts("LOADING")    ? errc::loading
                      : starts("MISCONF")  ? errc::misconfigured
                      : starts("READONLY") ? errc::read_only
                      : starts("BUSY") || starts("OOM") ? errc::busy
                      : starts("WRONGPASS") || starts("NOAUTH") || starts("NOPERM") ? errc::not_authorized
                                                                                    : errc::server_refused;
    return coord::error(make_error_code(code), std::string(message));
}

/// OpenSSL's queued errors in words (the queue emptied).
inline std::string tls_errors() {
    std::string out;
    while (const unsigned long e = ERR_get_error()) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof buf);
        if (!out.empty()) out += "; ";
        out += buf;
    }
    return out;
}

struct tls_context_deleter {
    void operator()(SSL_CTX* c) const noexcept { SSL_CTX_free(c); }
};
/// The TLS client settings of one pool, shared by its connections.
using tls_context = std::unique_ptr<SSL_CTX, tls_context_deleter>;

/// The client context the options ask for: TLS 1.2 or later, the server's
/// certificate checked against options::ca_file (or the system's CAs), the
/// client certificate and key loaded when given (an encrypted key is refused,
/// never prompted for). Throws std::invalid_argument naming the file
/// OpenSSL could not use, and why.
inline tls_context make_tls_context(const options& o) {
    tls_context ctx(SSL_CTX_new(TLS_client_method()));
    if (!ctx) throw std::runtime_error("coord: Redis TLS context: " + tls_errors());
    (void)SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    SSL_CTX_set_default_passwd_cb(ctx.get(), [](char*, int, int, void*) { return 0; });
    auto refuse = [](const char* field, const std::string& file) {
        return std::invalid_argument(std::string("coord::redis::options::") + field + " " + file + ": " + tls_errors());
    };
    if (o.ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx.get()) != 1
                          : SSL_CTX_load_verify_locations(ctx.get(), o.ca_file.c_str(), nullptr) != 1)
        throw refuse("ca_file", o.ca_file.empty() ? "(the system's CAs)" : o.ca_file);
    if (!o.cert_file.empty()) {
        if (SSL_CTX_use_certificate_chain_file(ctx.get(), o.cert_file.c_str()) != 1) throw refuse("cert_file", o.cert_file);
        if (SSL_CTX_use_PrivateKey_file(ctx.get(), o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) throw refuse("key_file", o.key_file);
        if (SSL_CTX_check_private_key(ctx.get()) != 1) throw refuse("key_file", o.key_file + " (not cert_file's key)");
    }
    return ctx;
}

/// OpenSSL's socket BIO, but writing with send(MSG_NOSIGNAL): a write on a
/// socket the server closed fails with EPIPE instead of raising SIGPIPE
/// (OpenSSL's own writes with write(2)). Made once, kept for the process.
inline const BIO_METHOD* socket_without_sigpipe() {
    static BIO_METHOD* const method = [] {
        const BIO_METHOD* base = BIO_s_socket();
        BIO_METHOD* m = BIO_meth_new(BIO_TYPE_SOCKET, "coord socket");
        if (!m) return m;
        (void)BIO_meth_set_create(m, BIO_meth_get_create(base));
        (void)BIO_meth_set_destroy(m, BIO_meth_get_destroy(base));
        (void)BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(base));
        (void)BIO_meth_set_read(m, BIO_meth_get_read(base));
        (void)BIO_meth_set_write(m, [](BIO* b, const char* data, int len) -> int {
            const int fd = static_cast<int>(BIO_get_fd(b, nullptr));
            const ssize_t n = ::send(fd, data, static_cast<std::size_t>(len), MSG_NOSIGNAL);
            BIO_clear_retry_flags(b);
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_write(b);
            return static_cast<int>(n);
        });
        return m;
    }();
    return method;
}

/// One connection to the server, non-blocking, plain or over TLS.
class connection {
public:
    connection() = default;
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;
    ~connection() { drop(); }

    void drop() noexcept {
        if (ssl_) SSL_free(ssl_);
        ssl_ = nullptr;
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
        if (reader_) redisReaderFree(reader_);
        reader_ = nullptr;
        out_.clear();
        subscribed_ = false;
    }
    bool subscribed() const noexcept { return subscribed_; }

    /// Opens the connection unless it is open and alive (an open one the
    /// server closed meanwhile is opened again: nothing was sent on it), by
    /// `until` and within the connect timeout. With Sentinels, one of them
    /// names the master first. Then TCP, the TLS handshake with `tls` when
    /// not null, and one round trip: AUTH and SELECT as the address and
    /// options say, and ROLE with Sentinels (a server that is not a master
    /// is refused: errc::read_only), PING when there is nothing else.
    result<void> connect(const address& a, const options& o, SSL_CTX* tls, coord::detail::deadline until) {
        const auto now = coord::detail::deadline_clock::now();
        const bool recent = now - used_ < coord::detail::idle_check_after;
        used_ = now;
        if (fd_ >= 0) {
            if (recent || idle_and_open()) return {};
            drop();
        }
        const auto limit = std::min(until, coord::detail::deadline_after(o.connect_timeout));
        server target{a.host, a.port};
        if (!a.sentinels.empty()) {
            auto m = ask_sentinels(a, o, tls, limit);
            if (!m) return unexpected(m.error());
            target = std::move(*m);
        }
        if (auto c = open(target, o, tls, limit); !c) return c;
        const std::string where = target.host + ":" + std::to_string(target.port);
        std::vector<command> hello;
        if (!o.password.empty()) {
            if (o.user.empty()) hello.push_back({"AUTH", o.password});
            else hello.push_back({"AUTH", o.user, o.password});
        }
        if (a.db != 0) hello.push_back({"SELECT", std::to_string(a.db)});
        if (!a.sentinels.empty()) hello.push_back({"ROLE"});
        if (hello.empty()) hello.push_back({"PING"});
        auto r = greet(hello, tls != nullptr, limit, where);
        if (!r) return unexpected(r.error());
        if (!a.sentinels.empty() && element(r->back().get(), 0) != "master") {
            drop();
            return not_sent(errc::read_only, where + ": Sentinel named it the master of " + a.master + ", and it is a " +
                                                 std::string(element(r->back().get(), 0)) + " (a failover under way?)");
        }
        return {};
    }

    /// Whether this idle connection is still open: nothing waits on its
    /// socket, or, over TLS, only records OpenSSL reads without a byte for
    /// the caller (a session ticket). A close (with TLS's close_notify or
    /// without), or bytes nobody asked for, and it is not.
    bool idle_and_open() {
        const auto idle = coord::detail::peek_idle(fd_);
        if (idle == coord::detail::idle_socket::quiet) return true;
        if (idle == coord::detail::idle_socket::closed || !ssl_) return false;
        char b;
        ERR_clear_error();
        const int n = SSL_read(ssl_, &b, 1);
        const int e = n > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl_, n);
        ERR_clear_error();
        return e == SSL_ERROR_WANT_READ && coord::detail::peek_idle(fd_) != coord::detail::idle_socket::closed;
    }

    /// The pool's count of failovers seen when this connection was made.
    std::uint64_t epoch = 0;

private:
    // The master's address from the first Sentinel that names one.
    result<server> ask_sentinels(const address& a, const options& o, SSL_CTX* tls, coord::detail::deadline limit) {
        std::string why;
        for (const auto& sen : a.sentinels) {
            const std::string at = sen.host + ":" + std::to_string(sen.port);
            connection s;
            auto r = s.open(sen, o, tls, limit);
            std::optional<std::vector<reply>> answer;
            if (r) {
                auto g = s.greet({{"SENTINEL", "get-master-addr-by-name", a.master}}, tls != nullptr, limit, at);
                if (g) answer = std::move(*g);
                else r = unexpected(g.error());
            }
            if (!r) {
                why += (why.empty() ? "" : "; ") + r.error().detail();
                if (r.error() == errc::tls_failed) return unexpected(r.error());
                continue;
            }
            const redisReply* named = (*answer)[0].get();
            const auto port = i64_of(element(named, 1));
            if (named->type == REDIS_REPLY_ERROR || elements(named) != 2 || !port) {
                why += (why.empty() ? "" : "; ") + at + (named->type == REDIS_REPLY_ERROR ? ": " + std::string(text(named))
                                                                                          : ": knows no master named " + a.master);
                continue;
            }
            return server{std::string(element(named, 0)), static_cast<int>(*port)};
        }
        return not_sent(errc::connection_failed, "no Sentinel named the master of " + a.master + ": " + why);
    }

    // TCP to `target` and, with `tls`, the handshake.
    result<void> open(const server& target, const options& o, SSL_CTX* tls, coord::detail::deadline limit) {
        const std::string where = target.host + ":" + std::to_string(target.port);
        const std::string in_time = millis_text(std::min(o.connect_timeout, o.operation_timeout));
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* found = nullptr;
        const std::string port = std::to_string(target.port);
        if (const int rc = ::getaddrinfo(target.host.c_str(), port.c_str(), &hints, &found); rc != 0)
            return not_sent(errc::connection_failed, where + ": " + ::gai_strerror(rc));
        std::unique_ptr<addrinfo, void (*)(addrinfo*)> addresses(found, ::freeaddrinfo);
        std::string why = "no address";
        for (const addrinfo* ai = found; ai && fd_ < 0; ai = ai->ai_next) {
            const int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0) {
                why = std::strerror(errno);
                continue;
            }
            if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
                why = std::strerror(errno);
                ::close(fd);
                continue;
            }
            const auto w = coord::detail::wait_fd(fd, POLLOUT, limit);
            if (w == coord::detail::wait_result::timed_out) {
                ::close(fd);
                return not_sent(errc::connection_failed, where + ": no answer while connecting within " + in_time);
            }
            int err = 0;
            socklen_t len = sizeof err;
            if (w == coord::detail::wait_result::failed || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
                why = std::strerror(err ? err : errno);
                ::close(fd);
                continue;
            }
            fd_ = fd;
        }
        if (fd_ < 0) return not_sent(errc::connection_failed, where + ": " + why);
        reader_ = redisReaderCreate();
        if (!reader_) return failed_connect(errc::connection_failed, where + ": out of memory");
        const int on = 1;
        (void)::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        // Keep-alive probes after 15 s idle, every 5 s, 3 of them (as hiredis's).
        const int idle = 15, interval = 5, count = 3;
        (void)::setsockopt(fd_, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
        (void)::setsockopt(fd_, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
        (void)::setsockopt(fd_, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
        (void)::setsockopt(fd_, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
        // Data unacknowledged for the operation timeout drops the connection.
        const unsigned user_timeout = static_cast<unsigned>(std::min<std::int64_t>(o.operation_timeout.count(), 1 << 30));
        (void)::setsockopt(fd_, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
        if (tls) {
            if (auto h = handshake(target.host, tls, limit, where, in_time); !h) return h;
        }
        return {};
    }

    // The first round trip on a new connection: `hello`'s replies, or why
    // the connection is refused (nothing of a call was sent yet). An error
    // reply is the error: LOADING and the credentials' refusals keep their
    // codes, any other (a SELECT refused) is a connection that failed.
    result<std::vector<reply>> greet(const std::vector<command>& hello, bool tls, coord::detail::deadline limit,
                                     const std::string& where) {
        auto r = run(hello, false, limit);
        if (!r) {
            std::string said = where + ": " + r.error().detail();
            if (r.error() == errc::deadline_passed) {
                drop();
                return not_sent(errc::deadline_passed, said);
            }
            if (!tls) {
                drop();
                return not_sent(errc::connection_failed,
                                said + " (a server that speaks TLS closes a plain connection: use a rediss:// URL)");
            }
            // TLS 1.3 ends the handshake before the server has checked the
            // client's certificate: a refusal is its alert and the
            // connection closed, at the first exchange (or, when the close
            // came first, a reset that lost the alert).
            drop();
            return not_sent(errc::tls_failed,
                            said + " (right after the TLS handshake: the server refused the client certificate, or "
                                   "wants one: options::cert_file, key_file)");
        }
        for (const auto& one : *r)
            if (one->type == REDIS_REPLY_ERROR) {
                const coord::error e = server_error(text(one.get()));
                drop();
                return unexpected(coord::error(e == errc::server_refused ? make_error_code(errc::connection_failed) : e.code(),
                                               where + ": " + e.detail()));
            }
        return r;
    }

public:
    /// Sends every command and reads every reply (one round trip), under
    /// `until`. Error replies come back as replies; a broken or silent
    /// connection is the error (outcome_unknown for a writing call).
    result<std::vector<reply>> run(const std::vector<command>& cmds, bool writes, coord::detail::deadline until) {
        for (const auto& cmd : cmds) append(cmd);
        return replies(cmds.size(), writes, until);
    }

    /// Runs a script by SHA (SCRIPT LOAD with it the first time in this
    /// process, and again when the server answers NOSCRIPT: after a restart
    /// or SCRIPT FLUSH). An error reply becomes the error.
    result<reply> eval(const script& s, const std::vector<std::string>& keys, const std::vector<std::string>& args,
                       bool writes, coord::detail::deadline until) {
        if (const std::string* sha = script_shas::of(s)) {
            append_eval("EVALSHA", *sha, keys, args);
            auto r = replies(1, writes, until);
            if (!r) return unexpected(r.error());
            reply& one = (*r)[0];
            if (one->type != REDIS_REPLY_ERROR || text(one.get()).substr(0, 8) != "NOSCRIPT") return answer(std::move(one));
        }
        // Not loaded (nothing ran): load it and run it in one round trip.
        append({"SCRIPT", "LOAD", s.body});
        append_eval("EVAL", s.body, keys, args);
        auto r = replies(2, writes, until);
        if (!r) return unexpected(r.error());
        if ((*r)[0]->type == REDIS_REPLY_STRING) script_shas::learn(s, std::string(text((*r)[0].get())));
        return answer(std::move((*r)[1]));
    }

    /// SUBSCRIBEs to `channel` (this connection then only listens).
    result<void> subscribe(const std::string& channel, coord::detail::deadline until) {
        auto r = run({{"SUBSCRIBE", channel}}, false, until);
        if (!r) return unexpected(r.error());
        if (element((*r)[0].get(), 0) != "subscribe") {
            drop();
            return unexpected(coord::error(make_error_code(errc::bad_answer), "SUBSCRIBE was not confirmed"));
        }
        subscribed_ = true;
        return {};
    }
    /// Waits for a message on the subscribed channel until `wake`: true
    /// when one came.
    result<bool> wait_message(coord::detail::deadline wake) {
        auto r = read(wake);
        if (!r) {
            if (r.error() == timed_out) return false;
            return lost(r.error(), false);
        }
        return element(r->get(), 0) == "message";
    }
    /// Leaves subscribe mode (messages that came meanwhile are dropped).
    result<void> unsubscribe(coord::detail::deadline until) {
        append({"UNSUBSCRIBE"});
        if (auto f = flush(until); !f) return lost(f.error(), false);
        for (;;) {
            auto r = read(until);
            if (!r) return lost(r.error(), false);
            if (element(r->get(), 0) == "unsubscribe" && elements(r->get()) == 3 &&
                r->get()->element[2]->type == REDIS_REPLY_INTEGER && r->get()->element[2]->integer == 0)
                break;
        }
        subscribed_ = false;
        return {};
    }

private:
    static constexpr int timed_out = 1;
    static constexpr int broken = 2;

    static unexpected<coord::error> not_sent(errc code, std::string why) {
        return unexpected(coord::error(make_error_code(code), std::move(why)));
    }
    unexpected<coord::error> failed_connect(errc code, std::string why) {
        drop();
        return not_sent(code, std::move(why));
    }

    // The TLS handshake on the connected socket, by `limit`: the server's
    // certificate checked against the context's CAs and for `host` (an IP
    // address as one; a name is also sent as SNI).
    result<void> handshake(const std::string& host, SSL_CTX* tls, coord::detail::deadline limit, const std::string& where,
                           const std::string& in_time) {
        ERR_clear_error();
        ssl_ = SSL_new(tls);
        BIO* bio = ssl_ && socket_without_sigpipe() ? BIO_new(socket_without_sigpipe()) : nullptr;
        if (!bio) return failed_connect(errc::connection_failed, where + ": " + tls_errors());
        (void)BIO_set_fd(bio, fd_, BIO_NOCLOSE);
        SSL_set_bio(ssl_, bio, bio);  // the session owns it
        unsigned char ip[sizeof(in6_addr)];
        if (::inet_pton(AF_INET, host.c_str(), ip) == 1 || ::inet_pton(AF_INET6, host.c_str(), ip) == 1) {
            (void)X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), host.c_str());
        } else {
            (void)SSL_set_tlsext_host_name(ssl_, host.c_str());
            (void)SSL_set1_host(ssl_, host.c_str());
        }
        for (;;) {
            ERR_clear_error();
            const int rc = SSL_connect(ssl_);
            const int e = rc == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl_, rc);
            if (rc == 1) return {};
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
                const auto w = coord::detail::wait_fd(fd_, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, limit);
                if (w == coord::detail::wait_result::timed_out)
                    return failed_connect(errc::connection_failed, where + ": no TLS handshake within " + in_time +
                                                                       " (does the server speak TLS on this port?)");
                if (w == coord::detail::wait_result::failed)
                    return failed_connect(errc::connection_failed, where + ": " + std::strerror(errno));
                continue;
            }
            const long verified = SSL_get_verify_result(ssl_);
            std::string why = verified != X509_V_OK
                                  ? std::string("the server's certificate: ") + X509_verify_cert_error_string(verified) +
                                        " (the CA coord trusts: options::ca_file; its name must match " + host + ")"
                                  : tls_words(e);
            if (why.find("wrong version number") != std::string::npos || why.find("packet length too long") != std::string::npos)
                why += " (the server does not speak TLS on this port: a redis:// URL for a plain one)";
            return failed_connect(errc::tls_failed, where + ": " + why);
        }
    }

    // What a failed TLS call says: OpenSSL's queued errors, or the socket's.
    std::string tls_words(int e) {
        std::string words = tls_errors();
        if (!words.empty()) return words;
        if (e == SSL_ERROR_ZERO_RETURN) return "the server closed the TLS connection";
        if (e == SSL_ERROR_SYSCALL && errno != 0) return std::strerror(errno);
        return "the server closed the connection";
    }

    static result<reply> answer(reply r) {
        if (!r) return unexpected(coord::error(make_error_code(errc::bad_answer), "no reply"));
        if (r->type == REDIS_REPLY_ERROR) return unexpected(server_error(text(r.get())));
        return r;
    }

    // The call was (maybe) sent and no reply came: the connection is
    // dropped (a late reply must not be read as the next call's). A TLS
    // alert from the server (a client certificate refused) is tls_failed.
    unexpected<coord::error> lost(int why, bool writes) {
        std::string words = why == timed_out ? "no reply within the call's deadline" : broke_;
        const auto own = why == timed_out ? errc::deadline_passed : tls_refused_ ? errc::tls_failed : errc::connection_failed;
        drop();
        return unexpected(coord::detail::engine_failure(coord::detail::call_fate::lost_after_send, writes,
                                                        coord::error(make_error_code(own), words)));
    }
    int broke(std::string words, bool tls_refused = false) {
        broke_ = std::move(words);
        tls_refused_ = tls_refused;
        return broken;
    }

    // One formatted command more to send.
    void append_argv(int argc, const char** argv, const std::size_t* lens) {
        char* cmd = nullptr;
        const int n = redisFormatCommandArgv(&cmd, argc, argv, lens);
        if (n < 0 || !cmd) throw std::bad_alloc();
        out_.append(cmd, static_cast<std::size_t>(n));
        redisFreeCommand(cmd);
    }
    void append(const command& cmd) {
        std::vector<const char*> argv;
        std::vector<std::size_t> lens;
        argv.reserve(cmd.size());
        lens.reserve(cmd.size());
        for (const auto& a : cmd) {
            argv.push_back(a.data());
            lens.push_back(a.size());
        }
        append_argv(static_cast<int>(cmd.size()), argv.data(), lens.data());
    }
    // EVAL or EVALSHA `what` with `keys` and `args`, formatted from where
    // they are (no copies: the hot path of every store call).
    void append_eval(std::string_view how, std::string_view what, const std::vector<std::string>& keys,
                     const std::vector<std::string>& args) {
        char nkeys[24];
        const auto n = std::to_chars(nkeys, nkeys + sizeof nkeys, keys.size()).ptr - nkeys;
        const std::size_t count = 3 + keys.size() + args.size();
        std::vector<const char*> argv;
        std::vector<std::size_t> lens;
        argv.reserve(count);
        lens.reserve(count);
        auto add = [&](std::string_view a) {
            argv.push_back(a.data());
            lens.push_back(a.size());
        };
        add(how);
        add(what);
        add(std::string_view(nkeys, static_cast<std::size_t>(n)));
        for (const auto& k : keys) add(k);
        for (const auto& a : args) add(a);
        append_argv(static_cast<int>(count), argv.data(), lens.data());
    }
    // Flushes what was appended and reads `n` replies (one round trip).
    result<std::vector<reply>> replies(std::size_t n, bool writes, coord::detail::deadline until) {
        if (auto f = flush(until); !f) return lost(f.error(), writes);
        std::vector<reply> out;
        out.reserve(n);
        for (std::size_t i = 0; i < n; ++i) {
            auto r = read(until);
            if (!r) return lost(r.error(), writes);
            out.push_back(std::move(*r));
        }
        return out;
    }

    result<void, int> flush(coord::detail::deadline until) {
        if (fd_ < 0) return unexpected(broke("not connected"));
        std::size_t done = 0;
        while (done < out_.size()) {
            short wait_for = POLLOUT;
            if (ssl_) {
                // A write that wants to wait is tried again with the same bytes.
                const int len = static_cast<int>(std::min<std::size_t>(out_.size() - done, INT_MAX));
                ERR_clear_error();
                const int n = SSL_write(ssl_, out_.data() + done, len);
                const int e = n > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl_, n);
                if (n > 0) {
                    done += static_cast<std::size_t>(n);
                    continue;
                }
                if (e == SSL_ERROR_WANT_READ) wait_for = POLLIN;
                else if (e != SSL_ERROR_WANT_WRITE) return unexpected(broke(tls_words(e), e == SSL_ERROR_SSL));
            } else {
                const ssize_t n = ::send(fd_, out_.data() + done, out_.size() - done, MSG_NOSIGNAL);
                if (n >= 0) {
                    done += static_cast<std::size_t>(n);
                    continue;
                }
                if (errno == EINTR) continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK) return unexpected(broke(std::strerror(errno)));
            }
            const auto w = coord::detail::wait_fd(fd_, wait_for, until);
            if (w == coord::detail::wait_result::timed_out) return unexpected(timed_out);
            if (w == coord::detail::wait_result::failed) return unexpected(broke(std::strerror(errno)));
        }
        out_.clear();
        return {};
    }

    result<reply, int> read(coord::detail::deadline until) {
        if (fd_ < 0) return unexpected(broke("not connected"));
        for (;;) {
            void* r = nullptr;
            if (redisReaderGetReply(reader_, &r) == REDIS_ERR) return unexpected(broke(reader_->errstr));
            if (r) return reply(static_cast<redisReply*>(r));
            char buf[16 * 1024];
            if (ssl_) {
                // Decrypted bytes may wait inside OpenSSL: read before polling.
                ERR_clear_error();
                const int n = SSL_read(ssl_, buf, sizeof buf);
                const int e = n > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl_, n);
                if (n > 0) {
                    if (redisReaderFeed(reader_, buf, static_cast<std::size_t>(n)) != REDIS_OK) return unexpected(broke(reader_->errstr));
                    continue;
                }
                if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) return unexpected(broke(tls_words(e), e == SSL_ERROR_SSL));
                const auto w = coord::detail::wait_fd(fd_, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, until);
                if (w == coord::detail::wait_result::timed_out) return unexpected(timed_out);
                if (w == coord::detail::wait_result::failed) return unexpected(broke(std::strerror(errno)));
                continue;
            }
            const auto w = coord::detail::wait_fd(fd_, POLLIN, until);
            if (w == coord::detail::wait_result::timed_out) return unexpected(timed_out);
            if (w == coord::detail::wait_result::failed) return unexpected(broke(std::strerror(errno)));
            const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n > 0) {
                if (redisReaderFeed(reader_, buf, static_cast<std::size_t>(n)) != REDIS_OK) return unexpected(broke(reader_->errstr));
            } else if (n == 0) {
                return unexpected(broke("the server closed the connection"));
            } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
                return unexpected(broke(std::strerror(errno)));
            }
        }
    }

    int fd_ = -1;
    SSL* ssl_ = nullptr;            // over TLS: the session on fd_
    redisReader* reader_ = nullptr; // hiredis's parser of the replies
    std::string out_;               // commands formatted, not yet sent
    std::string broke_;             // why the connection broke, for the error
    bool tls_refused_ = false;      // it broke on a TLS alert or protocol error
    coord::detail::deadline used_{};  // when a call last took it
    bool subscribed_ = false;
};

}  // namespace detail

/// The connections of one store. Thread-safe.
class pool {
public:
    /// Throws std::invalid_argument when `url` is malformed (parse_url) or an
    /// option is out of range. Connects to nothing yet.
    pool(std::string url, options opts) : url_(std::move(url)), opts_(std::move(opts)), slots_(opts_.pool_size) {
        auto a = parse_url(url_);
        if (!a) throw std::invalid_argument("coord: Redis URL '" + url_ + "' is malformed: " + a.error());
        address_ = std::move(*a);
        using std::chrono::milliseconds;
        if (opts_.pool_size < 1 || opts_.pool_size > 64)
            throw std::invalid_argument("coord::redis::options::pool_size must be 1 to 64");
        coord::detail::check_timeout("coord::redis::options::operation_timeout", opts_.operation_timeout);
        coord::detail::check_timeout("coord::redis::options::connect_timeout", opts_.connect_timeout);
        if (opts_.prefix.empty() || opts_.prefix.size() > 64 || opts_.prefix.find_first_of("{}") != std::string::npos)
            throw std::invalid_argument("coord::redis::options::prefix must be 1 to 64 characters without braces");
        if (opts_.cert_file.empty() != opts_.key_file.empty())
            throw std::invalid_argument("coord::redis::options::cert_file and key_file go together (a client certificate and its key)");
        if (address_.tls || !opts_.ca_file.empty() || !opts_.cert_file.empty()) tls_ = detail::make_tls_context(opts_);
    }
    pool(const pool&) = delete;
    pool& operator=(const pool&) = delete;

    /// The URL the pool was made from, without credentials.
    const std::string& url() const noexcept { return url_; }
    /// The options in force.
    const options& opts() const noexcept { return opts_; }
    /// True when the connections speak TLS.
    bool tls() const noexcept { return tls_ != nullptr; }

    /// One call: a connection of the pool for its whole step, and its
    /// deadline (options::operation_timeout from now).
    class call {
    public:
        // No connection in time: c_ stays empty and every command says so.
        /// A call on a connection of `p` (none in time: every command says so).
        explicit call(pool& p)
            : p_(p), until_(coord::detail::deadline_after(p.opts_.operation_timeout)), c_(p.slots_.take(until_)) {}
        call(const call&) = delete;
        call& operator=(const call&) = delete;
        ~call() {
            if (c_ && c_->subscribed()) c_->drop();  // never hand out a listening connection
            p_.slots_.give(std::move(c_));
        }

        /// After the caller's own function ran inside the call (fence_update):
        /// the rest of the call gets a full timeout again.
        void restart_deadline() noexcept { until_ = coord::detail::deadline_after(p_.opts_.operation_timeout); }

        /// Runs the script `s` on `keys` and `args` (EVALSHA, loading it once when the server lacks it); `writes`: it may change keys.
        result<detail::reply> eval(const detail::script& s, const std::vector<std::string>& keys,
                                   const std::vector<std::string>& args, bool writes) {
            if (auto c = ready(); !c) return unexpected(c.error());
            auto r = c_->eval(s, keys, args, writes, until_);
            if (!r && r.error() == errc::read_only) demoted();
            return r;
        }
        /// Commands in one round trip; error replies stay replies.
        result<std::vector<detail::reply>> run(const std::vector<detail::command>& cmds, bool writes) {
            if (auto c = ready(); !c) return unexpected(c.error());
            auto r = c_->run(cmds, writes, until_);
            if (r)
                for (const auto& one : *r)
                    if (detail::text(one.get()).substr(0, 8) == "READONLY" && one->type == REDIS_REPLY_ERROR) demoted();
            return r;
        }
        /// One command whose error reply is the error.
        result<detail::reply> command(const detail::command& cmd, bool writes) {
            auto r = run({cmd}, writes);
            if (!r) return unexpected(r.error());
            detail::reply& one = (*r)[0];
            if (one->type == REDIS_REPLY_ERROR) return unexpected(detail::server_error(detail::text(one.get())));
            return std::move(one);
        }

        /// SUBSCRIBEs to `channel`: the connection then only listens, until
        /// unsubscribe() or the call's end (which drops it).
        result<void> subscribe(const std::string& channel) {
            if (auto c = ready(); !c) return unexpected(c.error());
            restart_deadline();
            return c_->subscribe(channel, until_);
        }
        /// Waits for a message on the subscribed channel until `wake`: true
        /// when one came (one that came since the last wait counts).
        result<bool> wait_message(coord::detail::deadline wake) {
            if (!c_ || !c_->subscribed())
                return unexpected(coord::error(make_error_code(errc::connection_failed), "not subscribed"));
            return c_->wait_message(wake);
        }
        /// Leaves subscribe mode; the connection goes back to the pool.
        result<void> unsubscribe() {
            if (!c_ || !c_->subscribed()) return {};
            restart_deadline();
            return c_->unsubscribe(until_);
        }

    private:
        result<void> ready() {
            if (!c_)
                return unexpected(coord::error(make_error_code(errc::deadline_passed),
                                               "no pooled connection came free within " +
                                                   detail::millis_text(p_.opts_.operation_timeout)));
            const std::uint64_t epoch = p_.epoch_.load();
            if (c_->epoch != epoch) c_->drop();  // made before a failover: ask the Sentinels again
            auto c = c_->connect(p_.address_, p_.opts_, p_.tls_.get(), until_);
            if (c) c_->epoch = epoch;
            return c;
        }
        // The server answered READONLY: with Sentinels, it is a master no
        // longer, and every connection of the pool is made again (the
        // Sentinels asked anew); without, the URL names a replica.
        void demoted() {
            if (p_.address_.sentinels.empty() || !c_) return;
            c_->drop();
            p_.epoch_.fetch_add(1);
        }

        pool& p_;
        coord::detail::deadline until_;
        std::unique_ptr<detail::connection> c_;
    };

private:
    std::string url_;
    options opts_;
    address address_;
    detail::tls_context tls_;  // null: plain TCP
    std::atomic<std::uint64_t> epoch_{0};  // failovers seen (READONLY with Sentinels)
    coord::detail::connection_pool<detail::connection> slots_;
};

}  // namespace coord::redis
