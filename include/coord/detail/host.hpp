// SPDX-License-Identifier: Apache-2.0
// coord/detail/host.hpp: the one reading of HOST:PORT that every networked
// engine's URL uses (Redis, etcd, ZooKeeper): a host is a DNS name or IPv4
// address (letters, digits, '.', '-', '_') or an IPv6 address in brackets;
// a port is 1 to 65535. What can never name a server (a '%', '\', ';' or a
// control character in the host, an unbracketed IPv6 address, two ports) is
// refused when the URL is read: bad input, never "retry later".
#pragma once

#include <string>
#include <string_view>

#include "coord/result.hpp"

namespace coord::detail {

/// One server: the host as written (brackets kept for IPv6) and the port.
struct host_port {
    std::string host;
    int port = 0;
};

/// True when `host` can name a server: a DNS name or IPv4 address of
/// letters, digits, '.', '-' and '_' (at most 253 characters, not starting
/// with '-' or '.'), or "[IPv6]" with hex digits, ':' and '.' inside.
inline bool valid_host(std::string_view host) noexcept {
    if (host.empty() || host.size() > 255) return false;
    if (host.front() == '[') {
        if (host.size() < 4 || host.back() != ']') return false;
        for (char c : host.substr(1, host.size() - 2)) {
            const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
            if (!hex && c != ':' && c != '.') return false;
        }
        return host.find(':') != std::string_view::npos;
    }
    if (host.size() > 253 || host.front() == '-' || host.front() == '.') return false;
    for (char c : host) {
        const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
                        c == '-' || c == '_';
        if (!ok) return false;
    }
    return true;
}

/// A port of 1 to 65535 written in decimal digits only, or 0.
inline int port_number(std::string_view port) noexcept {
    if (port.empty() || port.size() > 5) return 0;
    int v = 0;
    for (char c : port) {
        if (c < '0' || c > '9') return 0;
        v = v * 10 + (c - '0');
    }
    return v >= 1 && v <= 65535 ? v : 0;
}

/// Reads "HOST:PORT" (HOST as valid_host; "[IPv6]:PORT"). `what` names the
/// part in the error ("endpoint", "server"). When `default_port` is not 0,
/// the port may be left out.
inline result<host_port, std::string> parse_host_port(std::string_view one, std::string_view what,
                                                       int default_port = 0) {
    const std::string form = "each " + std::string(what) + " is HOST:PORT (an IPv6 host in brackets: [::1]:PORT)";
    if (one.empty()) return unexpected(form);
    std::string_view host = one, port;
    bool has_port = false;
    if (one.front() == '[') {
        const auto close = one.find(']');
        if (close == std::string_view::npos) return unexpected(std::string("an IPv6 host needs its closing ]"));
        host = one.substr(0, close + 1);
        if (close + 1 < one.size()) {
            if (one[close + 1] != ':') return unexpected(form);
            port = one.substr(close + 2);
            has_port = true;
        }
    } else {
        const auto colon = one.find(':');
        if (colon != std::string_view::npos) {
            if (one.find(':', colon + 1) != std::string_view::npos) return unexpected(form);  // IPv6 unbracketed, two ports
            host = one.substr(0, colon);
            port = one.substr(colon + 1);
            has_port = true;
        }
    }
    if (!valid_host(host))
        return unexpected(std::string(
            "a host is a DNS name or IPv4 address (letters, digits, '.', '-', '_') or an IPv6 address in brackets"));
    host_port out{std::string(host), default_port};
    if (has_port || default_port == 0) {
        out.port = port_number(port);
        if (out.port == 0) return unexpected(std::string("the port must be 1 to 65535"));
    }
    return out;
}

}  // namespace coord::detail
