// SPDX-License-Identifier: Apache-2.0
// coord_web: a small web service on coord's server-side sessions and its
// Set-Cookie builder, the example to copy for browser sessions. Any number
// of instances on one store share the sessions: signed in through one, the
// others know the user; logout-all through one ends the user's sessions on
// all of them.
//
//   coord_web --store S --listen 127.0.0.1:PORT --users FILE
//             [--idle-timeout SECONDS] [--absolute-timeout SECONDS]
//             [--client-timeout SECONDS]
//             [--store-user NAME] [--store-password-file FILE]
//             [--store-ca-file PEM] [--store-cert-file PEM] [--store-key-file PEM]
//
// The store's credentials and TLS files as coordctl takes them (the
// password from a file of mode 600 or COORD_STORE_PASSWORD, never an
// argument).
// S: memory (this instance only), sqlite:PATH, postgres:CONNINFO or
// redis://HOST:PORT[/DB] (the stores that keep sessions). FILE: demo users,
// one "name password" a line (names: letters, digits, . _ -); the passwords
// are kept only as salted PBKDF2-HMAC-SHA256 hashes and never logged.
//
// Routes: GET / (the login form, or "Signed in as NAME" with the logout and
// logout-all forms), POST /login, POST /logout, POST /logout-all, GET
// /api/me (200 {"user":"NAME"} or 401).
//
// What it does for a browser session:
//   - the session ID (256 random bits) lives in one cookie, __Host-sid:
//     Secure, HttpOnly, SameSite=Lax, Path=/, no Domain (coord::set_cookie
//     refuses anything weaker for a __Host- name); its Max-Age is what is
//     left of the session's absolute term on the store's clock;
//   - login always creates a new session (and ends the one the browser came
//     with, if any): a session ID planted before login never becomes the
//     user's (fixation);
//   - logout ends the session in the store, logout-all every session of the
//     user, not only the cookie;
//   - every state-changing request must come from this origin (the Origin
//     header equals this Host) and, once signed in, carry the session's CSRF
//     token (kept in the session's data, so it is bound to the session and
//     changes with it);
//   - idle and absolute timeouts are judged by the store (its clock), so
//     every instance agrees when a session ends.
// What it does against a hostile client (the HTTP side is GNU
// libmicrohttpd: an event loop, so a slow client holds no worker):
//   - a request body over 16 KiB is refused 413 from its Content-Length,
//     before a byte of it is read; a body without a length is refused 411;
//   - request line and headers share 16 KiB per connection (431 over it,
//     libmicrohttpd's own limit), so a connection costs bounded memory;
//   - a client silent for --client-timeout seconds (default 10) is
//     disconnected; at most 512 connections, 32 from one address.
// What it leaves to the application: login rate limiting and lockout,
// password storage beyond a demo file, TLS (browsers treat 127.0.0.1 and
// localhost as secure contexts, so Secure cookies work there over HTTP;
// anywhere else put TLS in front and keep the cookie Secure).
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <signal.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../common/http_server.hpp"
#include "coord/open.hpp"
#include "coord/session.hpp"
#include "coord/storage/memory.hpp"

namespace {

constexpr const char* cookie_name = "__Host-sid";

struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

std::string hex(const unsigned char* p, std::size_t n) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    for (std::size_t i = 0; i < n; ++i) {
        s += digits[p[i] >> 4];
        s += digits[p[i] & 15];
    }
    return s;
}

std::string random_hex(std::size_t bytes) {
    std::vector<unsigned char> b(bytes);
    if (RAND_bytes(b.data(), static_cast<int>(b.size())) != 1) throw std::runtime_error("RAND_bytes failed");
    return hex(b.data(), b.size());
}

bool equal_constant_time(const std::string& a, const std::string& b) {
    return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

/// The demo users: name -> salted PBKDF2-HMAC-SHA256 of the password.
class user_table {
public:
    static constexpr int iterations = 100000;

    explicit user_table(const std::string& path) {
        std::ifstream in(path);
        if (!in) throw usage_error("--users: cannot read " + path);
        std::string line;
        for (int n = 1; std::getline(in, line); ++n) {
            if (!line.empty() && line.back() == '\r') line.pop_back();
            if (line.empty() || line[0] == '#') continue;
            const auto sp = line.find(' ');
            if (sp == std::string::npos || sp == 0 || sp + 1 >= line.size())
                throw usage_error("--users " + path + " line " + std::to_string(n) + ": expected 'name password'");
            const std::string name = line.substr(0, sp), password = line.substr(sp + 1);
            for (char c : name)
                if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
                    throw usage_error("--users " + path + " line " + std::to_string(n) +
                                      ": a name is letters, digits, '.', '_' and '-'");
            if (name.size() > 64) throw usage_error("--users " + path + " line " + std::to_string(n) + ": name over 64 characters");
            entry e;
            e.salt = random_hex(16);
            e.hash = derive(password, e.salt);
            if (!users_.emplace(name, std::move(e)).second)
                throw usage_error("--users " + path + " line " + std::to_string(n) + ": '" + name + "' given twice");
        }
        if (users_.empty()) throw usage_error("--users " + path + ": no users");
        dummy_salt_ = random_hex(16);
    }

    /// True when the password is the user's. An unknown user costs the same
    /// derivation as a known one.
    bool check(const std::string& name, const std::string& password) const {
        auto it = users_.find(name);
        const std::string salt = it == users_.end() ? dummy_salt_ : it->second.salt;
        const std::string h = derive(password, salt);
        return it != users_.end() && equal_constant_time(h, it->second.hash);
    }

private:
    struct entry {
        std::string salt, hash;
    };
    std::map<std::string, entry> users_;
    std::string dummy_salt_;

    static std::string derive(const std::string& password, const std::string& salt) {
        unsigned char out[32];
        if (PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()),
                              reinterpret_cast<const unsigned char*>(salt.data()), static_cast<int>(salt.size()), iterations,
                              EVP_sha256(), sizeof out, out) != 1)
            throw std::runtime_error("PBKDF2 failed");
        return hex(out, sizeof out);
    }
};

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
        }
    }
    return out;
}

// The HTTP side (examples/common/http_server.hpp).
using coord_example::http_limits;
using coord_example::http_request;
using coord_example::http_response;
using coord_example::http_server;

/// The value of the session cookie in a Cookie header ("" when absent).
std::string session_cookie(const http_request& req) {
    const std::string header = req.header("Cookie");
    std::size_t p = 0;
    while (p < header.size()) {
        auto e = header.find(';', p);
        if (e == std::string::npos) e = header.size();
        std::string part = header.substr(p, e - p);
        p = e + 1;
        const auto b = part.find_first_not_of(' ');
        if (b == std::string::npos) continue;
        part = part.substr(b);
        const auto eq = part.find('=');
        if (eq != std::string::npos && part.compare(0, eq, cookie_name) == 0) return part.substr(eq + 1);
    }
    return "";
}

const char* page_style =
    "<style>body{font-family:sans-serif;max-width:28em;margin:3em auto;color:#222}"
    "form{margin:1em 0}input{display:block;margin:.4em 0;padding:.3em;width:16em}"
    "button{padding:.4em 1.2em}.who{font-size:1.3em}.note{color:#666;font-size:.85em}</style>";

std::string page(const std::string& title, const std::string& body) {
    return "<!doctype html><html><head><meta charset=\"utf-8\"><title>" + html_escape(title) + "</title>" + page_style +
           "</head><body>" + body + "</body></html>";
}

std::string login_page(const std::string& message) {
    return page("coord_web: sign in",
                "<h1>coord_web</h1>" + (message.empty() ? "" : "<p class=\"note\">" + html_escape(message) + "</p>") +
                    "<form method=\"post\" action=\"/login\">"
                    "<label>User<input name=\"user\" autocomplete=\"username\"></label>"
                    "<label>Password<input name=\"password\" type=\"password\" autocomplete=\"current-password\"></label>"
                    "<button type=\"submit\">Sign in</button></form>");
}

std::string signed_in_page(const coord::session& s, const std::string& instance) {
    const std::string csrf = "<input type=\"hidden\" name=\"csrf\" value=\"" + html_escape(s.data) + "\">";
    return page("coord_web: " + s.user,
                "<h1>coord_web</h1><p class=\"who\">Signed in as " + html_escape(s.user) + "</p>"
                "<form method=\"post\" action=\"/logout\">" + csrf + "<button type=\"submit\">Sign out</button></form>"
                "<form method=\"post\" action=\"/logout-all\">" + csrf +
                "<button type=\"submit\">Sign out everywhere</button></form>"
                "<p class=\"note\">Served by " + html_escape(instance) +
                "; the session lives in the shared store, so every instance knows it.</p>");
}

void security_headers(http_response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Frame-Options", "DENY");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; style-src 'unsafe-inline'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'");
    res.set_header("Referrer-Policy", "same-origin");
}

/// True when a state-changing request comes from this origin: its Origin
/// header's host:port is the Host it was sent to.
bool same_origin(const http_request& req) {
    const std::string origin = req.header("Origin"), host = req.header("Host");
    if (origin.empty() || host.empty()) return false;
    const auto p = origin.find("://");
    return p != std::string::npos && origin.substr(p + 3) == host;
}

struct settings {
    std::string store, host, users;
    coord::open_options open;  // the store's credentials and TLS files
    int port = 0;
    unsigned client_timeout_s = 10;
    coord::session_options timeouts;
};

std::chrono::seconds seconds_option(const std::string& name, const std::string& v) {
    std::uint64_t n = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc{} || p != v.data() + v.size() || n == 0 || n > 400ull * 24 * 3600)
        throw usage_error("--" + name + " must be 1 to 34560000 seconds (400 days), got '" + coord::detail::printable(v) + "'");
    return std::chrono::seconds(n);
}

settings parse(int argc, char** argv) {
    settings s;
    std::map<std::string, std::string> v;
    for (int i = 1; i < argc; i += 2) {
        const std::string k = argv[i];
        if (k.rfind("--", 0) != 0 || i + 1 >= argc) throw usage_error("bad argument '" + coord::detail::printable(k) + "'");
        const std::string name = k.substr(2);
        if (name != "store" && name != "listen" && name != "users" && name != "idle-timeout" && name != "absolute-timeout" &&
            name != "client-timeout" && name != "store-user" && name != "store-password-file" && name != "store-ca-file" &&
            name != "store-cert-file" && name != "store-key-file")
            throw usage_error("unknown option " + coord::detail::printable(k));
        if (!v.emplace(name, argv[i + 1]).second) throw usage_error("option given twice: " + k);
    }
    for (const char* need : {"store", "listen", "users"})
        if (!v.count(need)) throw usage_error(std::string("missing option --") + need);
    s.store = v["store"];
    s.users = v["users"];
    // The store's credentials as coordctl takes them: the password from a
    // file of mode 600 or COORD_STORE_PASSWORD, never an argument.
    if (v.count("store-user")) s.open.user = v["store-user"];
    if (v.count("store-password-file")) {
        if (auto why = coord::detail::read_secret_file(v["store-password-file"], s.open.password))
            throw usage_error("--store-password-file " + *why);
    } else if (const char* env = std::getenv("COORD_STORE_PASSWORD"); env && *env) {
        s.open.password = env;
    }
    if (v.count("store-ca-file")) s.open.ca_file = v["store-ca-file"];
    if (v.count("store-cert-file")) s.open.cert_file = v["store-cert-file"];
    if (v.count("store-key-file")) s.open.key_file = v["store-key-file"];
    const auto& listen = v["listen"];
    const auto colon = listen.rfind(':');
    int port = 0;
    if (colon == std::string::npos || colon == 0 ||
        std::from_chars(listen.data() + colon + 1, listen.data() + listen.size(), port).ec != std::errc{} || port < 1 ||
        port > 65535)
        throw usage_error("--listen must be HOST:PORT (port 1..65535), got '" + coord::detail::printable(listen) + "'");
    s.host = listen.substr(0, colon);
    s.port = port;
    if (v.count("idle-timeout")) s.timeouts.idle_timeout = seconds_option("idle-timeout", v["idle-timeout"]);
    if (v.count("absolute-timeout")) s.timeouts.absolute_timeout = seconds_option("absolute-timeout", v["absolute-timeout"]);
    if (v.count("client-timeout")) {
        const auto t = seconds_option("client-timeout", v["client-timeout"]).count();
        if (t > 3600) throw usage_error("--client-timeout must be 1 to 3600 seconds, got '" + coord::detail::printable(v["client-timeout"]) + "'");
        s.client_timeout_s = static_cast<unsigned>(t);
    }
    if (s.timeouts.idle_timeout > s.timeouts.absolute_timeout)
        throw usage_error("--idle-timeout must not exceed --absolute-timeout");
    return s;
}

template <class Store>
int serve(Store& store, const settings& cfg, const user_table& users) {
    if constexpr (!coord::session_store<Store>) {
        throw usage_error("this store keeps no sessions: use memory, sqlite:PATH, postgres:CONNINFO or redis://HOST:PORT");
    } else {
        coord::basic_session_manager<Store> sessions{store, cfg.timeouts};
        const std::string instance = cfg.host + ":" + std::to_string(cfg.port);
        http_limits limits;
        limits.client_timeout_s = cfg.client_timeout_s;
        http_server svr(limits);

        auto cookie_for = [](const coord::session& s) {
            const auto left = std::chrono::duration_cast<std::chrono::seconds>(s.remaining);
            return coord::set_cookie(cookie_name, s.id)
                .path("/")
                .site(coord::set_cookie::same_site::lax)
                .max_age(std::max(left, std::chrono::seconds(1)))
                .str();
        };
        const std::string clear_cookie = coord::set_cookie(cookie_name, "").path("/").max_age(std::chrono::seconds(0)).str();
        auto see_other = [](http_response& res) {
            res.status = 303;
            res.set_header("Location", "/");
        };
        // The session of a request, or nothing: an unknown, ended or
        // malformed ID is no session; a store failure is answered 503.
        struct lookup {
            std::optional<coord::session> s;
            bool failed = false;
        };
        auto current = [&](const http_request& req) {
            lookup out;
            const auto id = session_cookie(req);
            if (id.empty()) return out;
            auto s = sessions.load(id);
            if (s) out.s = std::move(*s);
            else if (s.error() != coord::errc::session_not_found && s.error() != coord::errc::session_expired) {
                std::fprintf(stderr, "coord_web: store: %s\n", s.error().message().c_str());
                out.failed = true;
            }
            return out;
        };
        auto unavailable = [](http_response& res) {
            res.status = 503;
            res.set_content(page("unavailable", "<p>The session store is unavailable; try again.</p>"), "text/html; charset=utf-8");
        };

        svr.route("GET", "/", [&](const http_request& req, http_response& res) {
            security_headers(res);
            auto cur = current(req);
            if (cur.failed) return unavailable(res);
            if (cur.s) res.set_content(signed_in_page(*cur.s, instance), "text/html; charset=utf-8");
            else res.set_content(login_page(""), "text/html; charset=utf-8");
        });
        svr.route("GET", "/api/me", [&](const http_request& req, http_response& res) {
            security_headers(res);
            auto cur = current(req);
            if (cur.failed) return unavailable(res);
            if (!cur.s) {
                res.status = 401;
                res.set_content("{\"error\":\"not signed in\"}", "application/json");
                return;
            }
            res.set_content("{\"user\":\"" + cur.s->user + "\"}", "application/json");  // names are [A-Za-z0-9._-]
        });
        svr.route("POST", "/login", [&](const http_request& req, http_response& res) {
            security_headers(res);
            if (!same_origin(req)) {
                res.status = 403;
                res.set_content(page("refused", "<p>Cross-origin request refused.</p>"), "text/html; charset=utf-8");
                return;
            }
            const auto user = req.form_field("user"), password = req.form_field("password");
            if (!users.check(user, password)) {
                res.status = 401;
                res.set_content(login_page("Wrong user or password."), "text/html; charset=utf-8");
                return;
            }
            // Whatever session the browser came with ends here; the user gets a new one.
            if (const auto old = session_cookie(req); !old.empty()) (void)sessions.revoke(old);
            auto s = sessions.create(user, random_hex(32));
            if (!s) {
                std::fprintf(stderr, "coord_web: store: %s\n", s.error().message().c_str());
                return unavailable(res);
            }
            res.set_header("Set-Cookie", cookie_for(*s));
            see_other(res);
        });
        auto logout = [&](bool all) {
            return [&, all](const http_request& req, http_response& res) {
                security_headers(res);
                auto cur = current(req);
                if (cur.failed) return unavailable(res);
                if (!same_origin(req) || !cur.s || !equal_constant_time(req.form_field("csrf"), cur.s->data)) {
                    res.status = 403;
                    res.set_content(page("refused", "<p>Refused: not from this site, or without this session's token.</p>"),
                                    "text/html; charset=utf-8");
                    return;
                }
                if (all) {
                    auto n = sessions.revoke_user(cur.s->user);
                    if (!n) return unavailable(res);
                } else {
                    auto r = sessions.revoke(cur.s->id);
                    if (!r) return unavailable(res);
                }
                res.set_header("Set-Cookie", clear_cookie);
                see_other(res);
            };
        };
        svr.route("POST", "/logout", logout(false));
        svr.route("POST", "/logout-all", logout(true));

        if (!svr.listen(cfg.host, cfg.port)) throw std::runtime_error("cannot listen on " + instance);
        std::fprintf(stderr, "coord_web: serving on http://%s\n", instance.c_str());
        // Serving happens on libmicrohttpd's threads; this one waits for
        // SIGTERM or SIGINT (blocked in every thread since main began),
        // then the server stops as it goes out of scope.
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        int sig = 0;
        sigwait(&set, &sig);
        return 0;
    }
}

}  // namespace

int main(int argc, char** argv) {
    coord_example::program_name = "coord_web";
    // Blocked before any thread starts, so the waiter alone receives them.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    try {
        const auto cfg = parse(argc, argv);
        const user_table users(cfg.users);
        if (cfg.store == "memory") {
            coord::memory_store store;
            return serve(store, cfg, users);
        }
        return coord::with_store(cfg.store, [&](auto& store) { return serve(store, cfg, users); }, cfg.open);
    } catch (const usage_error& e) {
        std::fprintf(stderr, "coord_web: %s\n", e.what());
        return 2;
    } catch (const coord::bad_store_url& e) {
        std::fprintf(stderr, "coord_web: --store: %s (or memory)\n", e.what());
        return 2;
    } catch (const coord::store_error& e) {
        // Credentials or certificates the store refused: a configuration to fix.
        std::fprintf(stderr, "coord_web: %s\n", e.what());
        return e.code() == coord::condition::not_authorized ? 2 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "coord_web: %s\n", e.what());
        return 1;
    }
}
