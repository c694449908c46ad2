// SPDX-License-Identifier: Apache-2.0
// examples/common/http_server.hpp: the examples' HTTP side (coord_web and
// coord_service): a request as a route sees it, a response, and a server on
// GNU libmicrohttpd (Debian's libmicrohttpd-dev: an event loop with
// per-connection memory limits and idle timeouts) that enforces the limits
// below before a route runs. Logs "PROGRAM: METHOD PATH STATUS" to stderr.
// Not part of the library: an example's own code, kept in one place.
#pragma once

#include <microhttpd.h>
#include <netdb.h>

#include <cctype>
#include <charconv>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "coord/detail/text.hpp"

namespace coord_example {

/// The program's name, in front of every log line ("coord_web").
inline const char* program_name = "coord_example";

/// What one client may cost.
struct http_limits {
    std::size_t max_body = 16 * 1024;            ///< request body bytes (413 over it)
    std::size_t connection_memory = 16 * 1024;   ///< request line + headers per connection (431)
    unsigned client_timeout_s = 10;              ///< a silent client is disconnected
    unsigned max_connections = 512, max_per_address = 32, threads = 4;
};

/// One request: its method, path, headers (looked up case-insensitively by
/// libmicrohttpd) and its body, read whole (at most http_limits::max_body).
class http_request {
public:
    http_request(MHD_Connection* c, std::string method, std::string path)
        : connection_(c), method(std::move(method)), path(std::move(path)) {}

    /// A header's value ("" when absent).
    std::string header(const char* name) const {
        const char* v = MHD_lookup_connection_value(connection_, MHD_HEADER_KIND, name);
        return v ? v : "";
    }
    /// A field of an application/x-www-form-urlencoded body ("" when absent).
    std::string form_field(const std::string& name) const {
        std::size_t p = 0;
        while (p <= body.size()) {
            auto e = body.find('&', p);
            if (e == std::string::npos) e = body.size();
            const auto eq = body.find('=', p);
            if (eq < e && url_decode(body.substr(p, eq - p)) == name) return url_decode(body.substr(eq + 1, e - eq - 1));
            p = e + 1;
        }
        return "";
    }

private:
    MHD_Connection* connection_;

    static std::string url_decode(const std::string& s) {
        std::string out;
        for (std::size_t i = 0; i < s.size(); ++i) {
            if (s[i] == '+') {
                out += ' ';
            } else if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
                       std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
                out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
                i += 2;
            } else {
                out += s[i];
            }
        }
        return out;
    }

public:
    const std::string method, path;
    std::string body;
    bool answered = false;  ///< refused before its body was read
};

struct http_response {
    int status = 200;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string content, type = "text/plain; charset=utf-8";

    void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
    void set_content(std::string body, std::string content_type) {
        content = std::move(body);
        type = std::move(content_type);
    }
};

using http_route = std::function<void(const http_request&, http_response&)>;

/// Serves routes (METHOD and exact path) on libmicrohttpd's own threads
/// (an event loop each), under http_limits. Logs "METHOD PATH STATUS".
class http_server {
public:
    http_server(http_limits limits) : limits_(limits) {}
    http_server(const http_server&) = delete;
    http_server& operator=(const http_server&) = delete;
    ~http_server() {
        if (daemon_) MHD_stop_daemon(daemon_);
    }

    void route(const std::string& method, const std::string& path, http_route r) { routes_[{method, path}] = std::move(r); }

    /// Starts listening on HOST:PORT (numeric or a name); false when the
    /// address cannot be bound.
    bool listen(const std::string& host, int port) {
        addrinfo hints{}, *found = nullptr;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
        if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) return false;
        std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(found, freeaddrinfo);
        unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
        if (found->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
        daemon_ = MHD_start_daemon(flags, static_cast<std::uint16_t>(port), nullptr, nullptr, &http_server::on_request, this,
                                   MHD_OPTION_EXTERNAL_LOGGER, &http_server::on_error, nullptr,
                                   MHD_OPTION_SOCK_ADDR, found->ai_addr,
                                   MHD_OPTION_CONNECTION_MEMORY_LIMIT, limits_.connection_memory,
                                   MHD_OPTION_CONNECTION_TIMEOUT, limits_.client_timeout_s,
                                   MHD_OPTION_CONNECTION_LIMIT, limits_.max_connections,
                                   MHD_OPTION_PER_IP_CONNECTION_LIMIT, limits_.max_per_address,
                                   MHD_OPTION_THREAD_POOL_SIZE, limits_.threads,
                                   MHD_OPTION_NOTIFY_COMPLETED, &http_server::on_completed, nullptr,
                                   MHD_OPTION_END);
        return daemon_ != nullptr;
    }

private:
    http_limits limits_;
    std::map<std::pair<std::string, std::string>, http_route> routes_;
    MHD_Daemon* daemon_ = nullptr;

    static void on_error(void*, const char* format, va_list ap) {
        std::fprintf(stderr, "%s: http: ", program_name);
        std::vfprintf(stderr, format, ap);
    }

    static void on_completed(void*, MHD_Connection*, void** state, MHD_RequestTerminationCode) {
        delete static_cast<http_request*>(*state);
        *state = nullptr;
    }

    static MHD_Result send(MHD_Connection* c, const http_request& req, const http_response& res) {
        std::unique_ptr<MHD_Response, decltype(&MHD_destroy_response)> r(
            MHD_create_response_from_buffer(res.content.size(), const_cast<char*>(res.content.data()), MHD_RESPMEM_MUST_COPY),
            MHD_destroy_response);
        if (!r) return MHD_NO;
        MHD_add_response_header(r.get(), "Content-Type", res.type.c_str());
        for (const auto& [name, value] : res.headers) MHD_add_response_header(r.get(), name.c_str(), value.c_str());
        std::fprintf(stderr, "%s: %s %s %d\n", program_name, req.method.c_str(), coord::detail::printable(req.path).c_str(), res.status);
        return MHD_queue_response(c, static_cast<unsigned>(res.status), r.get());
    }

    static http_response refusal(int status, const char* text) {
        http_response res;
        res.status = status;
        res.set_content(text, "text/plain; charset=utf-8");
        return res;
    }

    // Called once when the headers are in (state empty), once per piece of
    // body, and once when the body is complete.
    static MHD_Result on_request(void* self, MHD_Connection* c, const char* url, const char* method, const char*,
                                 const char* upload, std::size_t* upload_size, void** state) {
        auto& server = *static_cast<http_server*>(self);
        auto* req = static_cast<http_request*>(*state);
        if (!req) {
            req = new http_request(c, method, url);
            *state = req;
            const std::string length = req->header(MHD_HTTP_HEADER_CONTENT_LENGTH);
            if (!req->header(MHD_HTTP_HEADER_TRANSFER_ENCODING).empty()) {
                req->answered = true;
                return send(c, *req, refusal(411, "A request body must come with its Content-Length.\n"));
            }
            std::uint64_t n = 0;
            const auto [end, ec] = std::from_chars(length.data(), length.data() + length.size(), n);
            if (!length.empty() && (ec != std::errc{} || end != length.data() + length.size() || n > server.limits_.max_body)) {
                req->answered = true;
                return send(c, *req, refusal(413, "The request body is over 16 KiB.\n"));
            }
            return MHD_YES;
        }
        if (req->answered) return MHD_NO;  // a refused request's body is never read
        if (*upload_size != 0) {
            if (req->body.size() + *upload_size > server.limits_.max_body) return MHD_NO;
            req->body.append(upload, *upload_size);
            *upload_size = 0;
            return MHD_YES;
        }
        http_response res;
        const auto it = server.routes_.find({req->method, req->path});
        if (it != server.routes_.end()) {
            try {
                it->second(*req, res);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "%s: %s %s: %s\n", program_name, req->method.c_str(), coord::detail::printable(req->path).c_str(), e.what());
                res = refusal(500, "Internal error.\n");
            }
        } else {
            res = refusal(404, "Not found.\n");
        }
        return send(c, *req, res);
    }
};

}  // namespace coord_example
