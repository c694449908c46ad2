// SPDX-License-Identifier: Apache-2.0
// coord/etcd/connection.hpp: the etcd connection layer of coord's engine:
// the error codes, the store's options and endpoints, a pool of libcurl
// handles speaking etcd's v3 API through its JSON gateway (POST /v3/... over
// HTTP/1.1 keep-alive), every call under a deadline, and the JSON the API
// speaks (keys and values in base64, 64-bit numbers as strings).
//
// A call tries the endpoints it was given, starting with the one that last
// answered: an endpoint that refuses the connection, or answers that it has
// no leader, is skipped for the next (nothing was applied). A call that was
// sent and got no answer in time, or that etcd answers "request timed out"
// (the proposal may still commit), is errc::outcome_unknown when it writes.
// libcurl's own timeouts bound each request (CURLOPT_TIMEOUT_MS, the time left
// of the call's deadline), so a paused or partitioned member gives an answer
// in bounded time.
//
// Secured clusters: etcds:// endpoints are https (libcurl's TLS: the server's
// certificate checked against options::ca_file or the system's CAs, its name
// against the endpoint's host; a client certificate when etcd asks for one,
// --client-cert-auth), and options::user/password sign in to etcd's
// authentication (/v3/auth/authenticate): its token goes with every request,
// and a token etcd no longer takes (expired, or the auth store changed) is
// replaced once per call before the request is sent again (etcd refused it
// unapplied). Credentials and TLS that etcd refuses are errc::not_authorized
// and errc::tls_failed (condition not_authorized: a configuration to fix,
// never "retry later"); the password is never in a message.
#pragma once

// Marks that a store header is in (tests/layering_test.cpp checks that no
// primitive or rule header pulls one in); every engine header includes this one.
#ifndef COORD_STORE_HEADER_INCLUDED
#define COORD_STORE_HEADER_INCLUDED 1
#endif

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
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
#include "coord/detail/base64url.hpp"
#include "coord/detail/connection_pool.hpp"
#include "coord/detail/deadline.hpp"
#include "coord/detail/engine_errors.hpp"
#include "coord/detail/engine_outcome.hpp"
#include "coord/detail/host.hpp"
#include "coord/detail/json.hpp"
#include "coord/detail/options.hpp"
#include "coord/error.hpp"
#include "coord/result.hpp"

namespace coord::etcd {

/// Infrastructure failures of the etcd engine.
enum class errc {
    /// No endpoint could be reached (refused, unreachable, no answer within
    /// options::connect_timeout).
    connection_failed = 1,
    /// No endpoint had a leader (an election, a partitioned member).
    no_leader,
    /// etcd refused the request (nothing was applied).
    server_refused,
    /// etcd's answer was not what the engine expects.
    bad_answer,
    /// No answer within options::operation_timeout, for a call that wrote
    /// nothing; a writing call that was sent is errc::outcome_unknown instead.
    deadline_passed,
    /// The same compare-and-swap lost to other writers too many times in a row.
    contention,
    /// etcd refused the credentials (a wrong user or password, none given
    /// while its authentication is on) or the user's rights (permission
    /// denied on coord's keys). Nothing was applied.
    not_authorized,
    /// The TLS handshake failed: the server's certificate is not trusted
    /// (options::ca_file) or not for that host, etcd wants a client
    /// certificate (options::cert_file, key_file) or refused it, a file
    /// cannot be read, or the endpoint speaks plain http (etcd://) or https
    /// (etcds://) where the URL says otherwise. Nothing was sent.
    tls_failed,
};

inline const std::error_category& category() noexcept {
    static const coord::detail::engine_category<errc, 8> instance(
        "coord.etcd", "etcd",
        {{
             {errc::connection_failed, coord::condition::unavailable, "no etcd endpoint could be reached"},
             {errc::no_leader, coord::condition::unavailable, "etcd has no leader"},
             {errc::server_refused, coord::condition::unavailable, "etcd refused the request"},
             {errc::bad_answer, coord::condition::outcome_unknown, "unexpected answer from etcd"},
             {errc::deadline_passed, coord::condition::unavailable, "no answer from etcd within the operation timeout"},
             {errc::contention, coord::condition::unavailable, "an etcd compare-and-swap kept losing to other writers"},
             {errc::not_authorized, coord::condition::not_authorized, "etcd refused these credentials or their rights"},
             {errc::tls_failed, coord::condition::not_authorized, "the TLS handshake with etcd failed"},
        }});
    return instance;
}
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), category()}; }

}  // namespace coord::etcd

/// @cond STD_SPECIALIZATIONS
template <>
struct std::is_error_code_enum<coord::etcd::errc> : std::true_type {};
/// @endcond

namespace coord::etcd {

/// Parses etcd://HOST:PORT[,HOST:PORT...] into http://HOST:PORT base URLs,
/// and etcds://... (TLS) into https://HOST:PORT ones. The error says what
/// is wrong.
inline result<std::vector<std::string>, std::string> parse_url(std::string_view url) {
    const bool tls = url.substr(0, 8) == "etcds://";
    if (!tls && url.substr(0, 7) != "etcd://")
        return unexpected(std::string("an etcd URL starts with etcd:// (or etcds:// for TLS)"));
    std::string_view rest = url.substr(tls ? 8 : 7);
    std::vector<std::string> out;
    while (true) {
        const auto comma = rest.find(',');
        const std::string_view one = rest.substr(0, comma);
        auto hp = coord::detail::parse_host_port(one, "endpoint");
        if (!hp) return unexpected(hp.error());
        out.push_back((tls ? "https://" : "http://") + hp->host + ":" + std::to_string(hp->port));
        if (comma == std::string_view::npos) break;
        rest = rest.substr(comma + 1);
    }
    return out;
}

/// Store settings; out-of-range values make the constructor throw
/// std::invalid_argument naming the field.
struct options {
    /// Connections (libcurl handles, each keeping its HTTP connection alive)
    /// kept at most, 1 to 64.
    std::size_t pool_size = coord::detail::defaults::pool_size;
    /// Bounds each call as a whole (1 ms to 24 h), over every endpoint tried.
    std::chrono::milliseconds operation_timeout = coord::detail::defaults::operation_timeout;
    /// Bounds making one connection (1 ms to 24 h).
    std::chrono::milliseconds connect_timeout = coord::detail::defaults::connect_timeout;
    /// Every key of the store starts with "PREFIX/" (1 to 64 characters, no NUL).
    std::string prefix = coord::detail::defaults::prefix;
    /// The largest request body sent (4 KiB to 64 MiB): etcd refuses a
    /// request above its --max-request-bytes (1.5 MiB by default), and the
    /// gateway's JSON carries values in base64 (4/3 of their size), so
    /// values up to about 1.1 MiB pass by default. A larger request is
    /// refused before it is sent (coord::errc::value_too_large, condition
    /// bad_input). Raise it with the server's limit.
    std::size_t max_request_bytes = 1536 * 1024;
    /// TLS (etcds:// URLs only): the PEM file of the CAs that sign the
    /// server's certificate (empty: the system's); the client certificate
    /// and its unencrypted private key (PEM) for a cluster started with
    /// --client-cert-auth (both or neither).
    std::string ca_file{};
    std::string cert_file{};  ///< the client certificate (PEM)
    std::string key_file{};  ///< its unencrypted private key (PEM)
    /// etcd's authentication: the user and password signed in with (both
    /// or neither; empty: none). The password is never in a message.
    std::string user{};
    std::string password{};  ///< the password (never in a message)
};

/// The clock policy that means "etcd's clock": every expiry is judged by
/// etcd's lease timers on its leader. A test clock drives expiry instead: a
/// lease whose term ended on it is revoked (which deletes its keys, as
/// etcd's expiry does) before the next call.
using server_clock = coord::server_clock;

namespace detail {

/// Standard base64 with padding (etcd's JSON for bytes).
inline std::string b64(std::string_view s) {
    std::string out = coord::detail::base64url_encode(s);
    for (char& c : out) c = c == '-' ? '+' : c == '_' ? '/' : c;
    while (out.size() % 4) out += '=';
    return out;
}
inline std::optional<std::string> unb64(std::string_view s) {
    std::string in(s);
    while (!in.empty() && in.back() == '=') in.pop_back();
    for (char& c : in) {
        if (c == '-' || c == '_') return std::nullopt;
        c = c == '+' ? '-' : c == '/' ? '_' : c;
    }
    std::string out;
    if (!coord::detail::base64url_decode(in, out)) return std::nullopt;
    return out;
}

/// A JSON object member by name (the first level only): nullopt when absent.
inline std::optional<coord::detail::json::value> member(std::string_view object, std::string_view name) {
    std::optional<coord::detail::json::value> found;
    coord::detail::json::reader r(object, 64);
    r.read_object([&](const coord::detail::json::value& k, const coord::detail::json::value& v) {
        if (coord::detail::json::equals(k, name)) {
            found = v;
            return false;
        }
        return true;
    });
    return found;
}
/// A member holding an integer: etcd writes int64 as a string; absent is 0
/// (proto3 leaves zero values out).
inline std::optional<std::int64_t> int_member(std::string_view object, std::string_view name) {
    auto v = member(object, name);
    if (!v) return 0;
    if (v->type == coord::detail::json::kind::integer) return v->integer;
    if (v->type != coord::detail::json::kind::string) return std::nullopt;
    std::int64_t out = 0;
    const auto b = v->body();
    auto [p, ec] = std::from_chars(b.data(), b.data() + b.size(), out);
    if (ec != std::errc{} || p != b.data() + b.size()) return std::nullopt;
    return out;
}
inline std::optional<std::string> bytes_member(std::string_view object, std::string_view name) {
    auto v = member(object, name);
    if (!v) return std::string();
    if (v->type != coord::detail::json::kind::string) return std::nullopt;
    return unb64(v->body());
}
inline bool bool_member(std::string_view object, std::string_view name) {
    auto v = member(object, name);
    return v && v->type == coord::detail::json::kind::boolean && v->boolean;
}
/// The elements of an array member (views into `object`).
inline std::vector<std::string_view> array_member(std::string_view object, std::string_view name) {
    std::vector<std::string_view> out;
    auto v = member(object, name);
    if (!v || v->type != coord::detail::json::kind::array) return out;
    coord::detail::json::for_each_element(*v, [&](const coord::detail::json::value& e) { out.push_back(e.raw); });
    return out;
}

/// A key-value as etcd reports it.
struct kv {
    std::string key;
    std::string value;
    std::int64_t create_revision = 0;
    std::int64_t mod_revision = 0;
    std::int64_t lease = 0;
};
inline std::optional<kv> kv_of(std::string_view object) {
    kv out;
    auto k = bytes_member(object, "key");
    auto v = bytes_member(object, "value");
    auto c = int_member(object, "create_revision");
    auto m = int_member(object, "mod_revision");
    auto l = int_member(object, "lease");
    if (!k || !v || !c || !m || !l) return std::nullopt;
    out.key = std::move(*k);
    out.value = std::move(*v);
    out.create_revision = *c;
    out.mod_revision = *m;
    out.lease = *l;
    return out;
}

/// JSON text builders for requests.
inline std::string json_string(std::string_view s) {
    std::string out;
    coord::detail::json::append_quoted(s, out);
    return out;
}
inline std::string number(std::int64_t v) { return json_string(std::to_string(v)); }

inline std::string millis_text(std::chrono::nanoseconds d) {
    std::string s = std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
    s += " ms";
    return s;
}

/// One libcurl handle: its HTTP connection stays open between requests.
class connection {
public:
    connection() : h_(curl_easy_init()) {}
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;
    ~connection() {
        if (h_) curl_easy_cleanup(h_);
    }

    enum class outcome { answered, not_sent, lost, timed_out, refused };
    struct response {
        outcome how = outcome::answered;
        long status = 0;
        std::string body;
        std::string why;  // libcurl's words when not answered
    };

    /// POSTs `body` to base + path within `timeout` (connecting within
    /// `connect_timeout`), with `token` (etcd's auth token; empty: none).
    /// `refused` when the TLS handshake failed (nothing was sent).
    response post(const options& o, const std::string& token, const std::string& base, const char* path,
                  const std::string& body, std::chrono::milliseconds timeout, std::chrono::milliseconds connect_timeout) {
        response out;
        if (!h_) {
            out.how = outcome::not_sent;
            out.why = "out of memory";
            return out;
        }
        prepare(o, token, base + path, body, timeout, connect_timeout, &connection::collect, out.body);
        char words[CURL_ERROR_SIZE] = {0};
        curl_easy_setopt(h_, CURLOPT_ERRORBUFFER, words);
        const CURLcode rc = curl_easy_perform(h_);
        curl_easy_setopt(h_, CURLOPT_ERRORBUFFER, nullptr);
        if (rc == CURLE_OK) {
            curl_easy_getinfo(h_, CURLINFO_RESPONSE_CODE, &out.status);
            return out;
        }
        out.why = words[0] ? words : curl_easy_strerror(rc);
        if (tls_refused(rc, out.why)) {
            out.how = outcome::refused;
            return out;
        }
        long connected = 0, connects = 0;
        curl_easy_getinfo(h_, CURLINFO_CONNECT_TIME_T, &connected);
        curl_easy_getinfo(h_, CURLINFO_NUM_CONNECTS, &connects);
        const bool tls = base.rfind("https://", 0) == 0;
        if (tls && connects > 0 &&
            (rc == CURLE_SEND_ERROR || (rc == CURLE_COULDNT_CONNECT && out.why.find("getpeername") != std::string::npos))) {
            // A new TLS connection the server closed as the handshake ended
            // (libcurl sends only after it), before the request went out:
            // under TLS 1.3 that is how a server that wants a client
            // certificate its CA signed says no.
            out.how = outcome::refused;
            out.why += " (etcd closed the new connection as the TLS handshake ended: it wants a client certificate its "
                       "CA signed: options::cert_file, key_file)";
            return out;
        }
        if (!tls && connects > 0 && rc == CURLE_GOT_NOTHING)
            out.why += " (an endpoint that speaks TLS answers plain http so: then use etcds://)";
        // A request that could not be sent was not applied.
        const bool reached = rc != CURLE_COULDNT_CONNECT && rc != CURLE_COULDNT_RESOLVE_HOST && rc != CURLE_SEND_ERROR &&
                             !(rc == CURLE_OPERATION_TIMEDOUT && connected == 0);
        out.how = !reached ? outcome::not_sent : rc == CURLE_OPERATION_TIMEDOUT ? outcome::timed_out : outcome::lost;
        return out;
    }

    /// POSTs a watch's create request to base + path and reads its stream
    /// until a message with events (or the watch's cancellation) arrives:
    /// then `answered`, with the messages in body. `timed_out` when `until`
    /// came first (the usual end of a watch that saw nothing).
    response watch(const options& o, const std::string& token, const std::string& base, const char* path,
                   const std::string& body, std::chrono::steady_clock::time_point until,
                   std::chrono::milliseconds connect_timeout) {
        response out;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
        if (!h_ || left.count() <= 0) {
            out.how = h_ ? outcome::timed_out : outcome::not_sent;
            return out;
        }
        prepare(o, token, base + path, body, left, connect_timeout, &connection::until_event, out.body);
        const CURLcode rc = curl_easy_perform(h_);
        if (rc == CURLE_WRITE_ERROR || rc == CURLE_OK) return out;  // stopped at the event (or the stream ended)
        out.why = curl_easy_strerror(rc);
        out.how = rc == CURLE_OPERATION_TIMEDOUT ? outcome::timed_out : outcome::lost;
        return out;
    }

private:
    // A handshake that failed on certificates, keys or protocol: a
    // configuration to fix, nothing sent. (TLS 1.3 reports a client
    // certificate etcd wants or refuses as an alert read after the
    // handshake, before the server read the request.)
    static bool tls_refused(CURLcode rc, std::string_view words) {
        switch (rc) {
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_CIPHER:
        case CURLE_SSL_CRL_BADFILE:
        case CURLE_SSL_ISSUER_ERROR:
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        case CURLE_SSL_INVALIDCERTSTATUS: return true;
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
            for (std::string_view w : {"alert", "certificate", "wrong version number", "unknown ca", "verify failed"})
                if (words.find(w) != std::string_view::npos) return true;
            return false;
        default: return false;
        }
    }

    // A POST of `body` (which must outlive the transfer) to `url`, its answer
    // handed to `write` with `out`.
    void prepare(const options& o, const std::string& token, const std::string& url, const std::string& body,
                 std::chrono::milliseconds timeout, std::chrono::milliseconds connect_timeout, curl_write_callback write,
                 std::string& out) {
        if (!configured_) {  // the same for every request of the store: set once (libcurl copies the strings)
            configured_ = true;
            // HTTP/1.1 over TLS too (libcurl would offer HTTP/2): one request
            // at a time per connection, as over http.
            curl_easy_setopt(h_, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
            curl_easy_setopt(h_, CURLOPT_SSL_VERIFYPEER, 1L);
            curl_easy_setopt(h_, CURLOPT_SSL_VERIFYHOST, 2L);
            if (!o.ca_file.empty()) curl_easy_setopt(h_, CURLOPT_CAINFO, o.ca_file.c_str());
            if (!o.cert_file.empty()) curl_easy_setopt(h_, CURLOPT_SSLCERT, o.cert_file.c_str());
            if (!o.key_file.empty()) curl_easy_setopt(h_, CURLOPT_SSLKEY, o.key_file.c_str());
        }
        if (token != token_) {
            token_ = token;
            headers_.reset(curl_slist_append(nullptr, "Content-Type: application/json"));
            if (!token_.empty()) headers_.reset(curl_slist_append(headers_.release(), ("Authorization: " + token_).c_str()));
        }
        curl_easy_setopt(h_, CURLOPT_URL, url.c_str());  // libcurl copies it
        curl_easy_setopt(h_, CURLOPT_POST, 1L);
        curl_easy_setopt(h_, CURLOPT_POSTFIELDS, body.data());
        curl_easy_setopt(h_, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
        curl_easy_setopt(h_, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h_, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(h_, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(h_, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max<std::int64_t>(1, timeout.count())));
        curl_easy_setopt(h_, CURLOPT_CONNECTTIMEOUT_MS,
                         static_cast<long>(std::max<std::int64_t>(1, std::min(timeout, connect_timeout).count())));
        curl_easy_setopt(h_, CURLOPT_HTTPHEADER, headers_.get());
        curl_easy_setopt(h_, CURLOPT_WRITEFUNCTION, write);
        curl_easy_setopt(h_, CURLOPT_WRITEDATA, &out);
    }
    // A watch's stream: kept until a message with events or a cancellation
    // has come (then 0: libcurl ends the transfer).
    static std::size_t until_event(char* p, std::size_t size, std::size_t n, void* out) {
        auto& body = *static_cast<std::string*>(out);
        body.append(p, size * n);
        const bool seen = body.find("\"events\"") != std::string::npos || body.find("\"canceled\":true") != std::string::npos ||
                          body.find("\"error\"") != std::string::npos;
        return seen ? 0 : size * n;
    }
    static std::size_t collect(char* p, std::size_t size, std::size_t n, void* out) {
        static_cast<std::string*>(out)->append(p, size * n);
        return size * n;
    }
    struct free_headers {
        void operator()(curl_slist* l) const noexcept { curl_slist_free_all(l); }
    };

    CURL* h_;
    bool configured_ = false;
    std::string token_ = "-";  // the token headers_ carries ("-": none made yet)
    std::unique_ptr<curl_slist, free_headers> headers_;
};

}  // namespace detail

/// The connections of one store and its endpoints. Thread-safe.
class pool {
public:
    /// Throws std::invalid_argument when `url` is malformed (parse_url) or an
    /// option is out of range. Connects to nothing yet.
    pool(std::string url, options opts) : url_(std::move(url)), opts_(std::move(opts)), slots_(opts_.pool_size) {
        static const bool global = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
        if (!global) throw std::runtime_error("coord: libcurl failed to initialize");
        auto e = parse_url(url_);
        if (!e) throw std::invalid_argument("coord: etcd URL '" + url_ + "' is malformed: " + e.error());
        endpoints_ = std::move(*e);
        using std::chrono::milliseconds;
        if (opts_.pool_size < 1 || opts_.pool_size > 64)
            throw std::invalid_argument("coord::etcd::options::pool_size must be 1 to 64");
        coord::detail::check_timeout("coord::etcd::options::operation_timeout", opts_.operation_timeout);
        coord::detail::check_timeout("coord::etcd::options::connect_timeout", opts_.connect_timeout);
        if (opts_.prefix.empty() || opts_.prefix.size() > 64 || opts_.prefix.find('\0') != std::string::npos)
            throw std::invalid_argument("coord::etcd::options::prefix must be 1 to 64 characters without NUL");
        if (opts_.max_request_bytes < 4096 || opts_.max_request_bytes > 64u * 1024 * 1024)
            throw std::invalid_argument("coord::etcd::options::max_request_bytes must be 4 KiB to 64 MiB");
        const bool tls = endpoints_.front().rfind("https://", 0) == 0;
        if (!tls && !(opts_.ca_file.empty() && opts_.cert_file.empty() && opts_.key_file.empty()))
            throw std::invalid_argument("coord::etcd::options::ca_file, cert_file and key_file are for TLS: an etcds:// URL");
        if (opts_.cert_file.empty() != opts_.key_file.empty())
            throw std::invalid_argument("coord::etcd::options::cert_file and key_file go together (a client certificate and its key)");
        if (opts_.user.empty() != opts_.password.empty())
            throw std::invalid_argument("coord::etcd::options::user and password go together");
        if (opts_.user.size() > 1024 || opts_.password.size() > 1024)
            throw std::invalid_argument("coord::etcd::options::user and password must be at most 1024 bytes");
    }
    pool(const pool&) = delete;
    pool& operator=(const pool&) = delete;

    /// The URL the pool was made from, without credentials.
    const std::string& url() const noexcept { return url_; }
    /// The options in force.
    const options& opts() const noexcept { return opts_; }
    /// The members' base URLs, in the order they are tried.
    const std::vector<std::string>& endpoints() const noexcept { return endpoints_; }

    /// One request (POST path body): the answer's body when etcd answered
    /// 200, else the error. `writes`: a request that may change etcd (a lost
    /// answer is then outcome_unknown). Endpoints that cannot be reached or
    /// have no leader are skipped for the next, within the deadline.
    result<std::string> request(const char* path, const std::string& body, bool writes) {
        if (opts_.user.empty()) return send(path, body, writes, {}, nullptr);
        // Signed in: the token (signing in first when there is none), and a
        // token etcd refused (unapplied) replaced once.
        auto token = current_token();
        if (!token) return unexpected(token.error());
        bool stale = false;
        auto r = send(path, body, writes, *token, &stale);
        if (!stale) return r;
        token = sign_in(*token);
        if (!token) return unexpected(token.error());
        return send(path, body, writes, *token, nullptr);
    }

    /// How a watch ended.
    enum class watched { event, until, other };
    /// Watches `key` (the keys in [key, end) when `end` is given) from
    /// `revision` on connection `c` (one of the caller's own: a watch holds
    /// it until an event or `until`): `event` when a change came (only a
    /// deletion with `deletions_only`: etcd leaves puts out), `until` when the
    /// time ran out, `other` when the watch ended otherwise (canceled, as for
    /// a compacted revision; no member answered).
    watched watch(detail::connection& c, const std::string& key, std::int64_t revision,
                  std::chrono::steady_clock::time_point until, const std::string& end = {}, bool deletions_only = false) {
        const std::size_t at = preferred_.load(std::memory_order_relaxed) % endpoints_.size();
        std::string body = R"({"create_request":{"key":")" + detail::b64(key) + R"(","start_revision":)" + std::to_string(revision);
        if (!end.empty()) body += R"(,"range_end":")" + detail::b64(end) + "\"";
        if (deletions_only) body += R"(,"filters":["NOPUT"])";
        body += "}}";
        std::string token;
        if (!opts_.user.empty()) {
            std::lock_guard lk(auth_mutex_);
            token = token_;
        }
        auto r = c.watch(opts_, token, endpoints_[at], "/v3/watch", body, until, opts_.connect_timeout);
        if (r.how == detail::connection::outcome::timed_out) return watched::until;
        if (r.how == detail::connection::outcome::answered && r.body.find("\"events\"") != std::string::npos) return watched::event;
        return watched::other;
    }

private:
    // The token to send: the one etcd gave, or a new one (signing in).
    result<std::string> current_token() {
        {
            std::lock_guard lk(auth_mutex_);
            if (!token_.empty() || auth_off_) return token_;
        }
        return sign_in({});
    }

    // Signs in (/v3/auth/authenticate) unless another call replaced `refused`
    // meanwhile; the token etcd gave. Authentication that is not enabled is
    // no error (as etcd's own client: requests go without a token). Its
    // errors say the request was not sent (never outcome_unknown).
    result<std::string> sign_in(const std::string& refused) {
        std::lock_guard lk(auth_mutex_);
        if (token_ != refused) return token_;
        auth_off_ = false;
        const std::string body = R"({"name":)" + detail::json_string(opts_.user) + R"(,"password":)" +
                                 detail::json_string(opts_.password) + "}";
        auto r = send("/v3/auth/authenticate", body, false, {}, nullptr);
        if (!r) {
            if (r.error().detail().find("authentication is not enabled") != std::string::npos) {
                auth_off_ = true;
                token_.clear();
                return token_;
            }
            return unexpected(r.error());
        }
        auto t = detail::member(*r, "token");
        if (!t || t->type != coord::detail::json::kind::string || t->body().empty())
            return unexpected(coord::error(make_error_code(errc::bad_answer), "etcd's answer to signing in has no token"));
        token_ = coord::detail::json::unescape(*t);
        return token_;
    }

    // One request with `token`: the answer's body when etcd answered 200,
    // else the error; *stale set (when given) when etcd refused the token
    // itself (expired, or its auth store changed: nothing applied).
    result<std::string> send(const char* path, const std::string& body, bool writes, const std::string& token, bool* stale) {
        if (body.size() > opts_.max_request_bytes)
            return unexpected(coord::error(make_error_code(coord::errc::value_too_large),
                                           "the request is " + std::to_string(body.size()) +
                                               " bytes, above the limit of " + std::to_string(opts_.max_request_bytes) +
                                               " (options::max_request_bytes, etcd's --max-request-bytes); not sent"));
        const auto until = coord::detail::deadline_after(opts_.operation_timeout);
        auto c = slots_.take(until);
        if (!c)
            return unexpected(coord::error(make_error_code(errc::deadline_passed),
                                           "no pooled connection came free within " +
                                               detail::millis_text(opts_.operation_timeout)));
        struct give_back {
            pool& p;
            std::unique_ptr<detail::connection>& c;
            ~give_back() { p.slots_.give(std::move(c)); }
        } back{*this, c};
        const std::size_t n = endpoints_.size();
        const std::size_t first = preferred_.load(std::memory_order_relaxed) % n;
        coord::error last(make_error_code(errc::connection_failed), "no endpoint tried");
        for (std::size_t i = 0; i < n; ++i) {
            const std::size_t at = (first + i) % n;
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - coord::detail::deadline_clock::now());
            if (left.count() <= 0) break;
            auto r = c->post(opts_, token, endpoints_[at], path, body, left, opts_.connect_timeout);
            const std::string where = endpoints_[at];
            if (r.how == detail::connection::outcome::refused)
                return unexpected(coord::error(make_error_code(errc::tls_failed), where + ": " + r.why));
            if (r.how == detail::connection::outcome::not_sent) {
                last = coord::error(make_error_code(errc::connection_failed), where + ": " + r.why);
                continue;
            }
            if (r.how != detail::connection::outcome::answered) {
                // Sent, and no answer: the request may have applied. The next
                // call starts with the next member (a paused member accepts
                // connections and never answers).
                preferred_.store((at + 1) % n, std::memory_order_relaxed);
                const auto own = r.how == detail::connection::outcome::timed_out ? errc::deadline_passed : errc::connection_failed;
                return unexpected(coord::detail::engine_failure(coord::detail::call_fate::lost_after_send, writes,
                                                                coord::error(make_error_code(own), where + ": " + r.why)));
            }
            if (r.status == 200) {
                preferred_.store(at, std::memory_order_relaxed);
                return std::move(r.body);
            }
            const auto message = detail::member(r.body, "error");
            const std::string words = where + ": " + (message ? coord::detail::json::unescape(*message) : r.body);
            const std::string_view text = words;
            if (stale && (text.find("invalid auth token") != std::string_view::npos ||
                          text.find("revision of auth store is old") != std::string_view::npos ||
                          text.find("user name is empty") != std::string_view::npos)) {
                *stale = true;  // refused before anything applied: signed in again by request()
                return unexpected(coord::error(make_error_code(errc::not_authorized), words));
            }
            if (text.find("authentication failed") != std::string_view::npos ||
                text.find("permission denied") != std::string_view::npos ||
                text.find("user name is empty") != std::string_view::npos ||
                text.find("invalid auth token") != std::string_view::npos)
                return unexpected(coord::error(make_error_code(errc::not_authorized), words));
            if (r.status == 400 && text.find("HTTPS server") != std::string_view::npos)  // http:// to a TLS port
                return unexpected(coord::error(make_error_code(errc::tls_failed),
                                               where + ": the endpoint speaks TLS: use an etcds:// URL"));
            if (text.find("CommonName of client") != std::string_view::npos)
                return unexpected(coord::error(
                    make_error_code(errc::tls_failed),
                    where + ": etcd's JSON gateway refuses a client certificate with a common name (etcd takes a CN "
                            "as a user name, which its gateway cannot pass on): give coord a certificate without "
                            "one, and sign in with options::user and password"));
            if (text.find("no leader") != std::string_view::npos || text.find("not capable") != std::string_view::npos ||
                text.find("server stopped") != std::string_view::npos) {
                last = coord::error(make_error_code(errc::no_leader), words);  // refused before proposing: try another member
                continue;
            }
            const bool changed = text.find("leader changed") != std::string_view::npos;
            if (changed && !writes) {
                last = coord::error(make_error_code(errc::no_leader), words);
                continue;
            }
            if (changed || text.find("request timed out") != std::string_view::npos) {
                preferred_.store((at + 1) % n, std::memory_order_relaxed);
                // The proposal was made and may still commit.
                return unexpected(coord::detail::engine_failure(coord::detail::call_fate::lost_after_send, writes,
                                                                coord::error(make_error_code(errc::deadline_passed), words)));
            }
            return unexpected(coord::detail::engine_failure(coord::detail::call_fate::failed_on_server, writes,
                                                            coord::error(make_error_code(errc::server_refused), words)));
        }
        if (coord::detail::deadline_clock::now() >= until && last == errc::connection_failed)
            last = coord::error(make_error_code(errc::deadline_passed), last.detail());
        return unexpected(last);
    }

    std::string url_;
    options opts_;
    std::vector<std::string> endpoints_;
    coord::detail::connection_pool<detail::connection> slots_;
    std::atomic<std::size_t> preferred_{0};
    std::mutex auth_mutex_;  // one sign-in at a time; guards token_ and auth_off_
    std::string token_;      // etcd's auth token, once signed in
    bool auth_off_ = false;  // etcd said its authentication is not enabled
};

}  // namespace coord::etcd
