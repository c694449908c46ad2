// SPDX-License-Identifier: Apache-2.0
// coord/session.hpp: opaque server-side sessions with rotation, idle and
// absolute timeouts, revocation and optimistic versions; token revocation;
// a Set-Cookie builder that refuses insecure combinations.
//
// A session ID is 256 bits from the kernel's CSPRNG (getrandom), given to the
// client once; the store keeps only its SHA-256, so a leaked store does not
// hand out live sessions. Every change is one atomic store step: load (which
// also moves the idle clock), save (compared on the version loaded, so two
// requests cannot silently overwrite each other and a session revoked in
// between cannot come back), rotate (new ID, old ID dead, in one step: call
// it on every privilege change against session fixation), revoke, revoke all
// of a user's sessions. Idle and absolute expiry are judged by the store on
// its own clock (memory: the process's steady clock; PostgreSQL: the
// server's), never on the clock of the instance that handles the request:
// two instances whose clocks are hours apart agree on which sessions live.
//
//   coord::memory_store store;
//   coord::session_manager sessions{store, {.idle_timeout = 30min, .absolute_timeout = 12h}};
//   auto s = sessions.create("alice");                 // s->id goes into the cookie
//   auto again = sessions.load(cookie_value);          // errc::session_expired, ...
//   auto fresh = sessions.rotate(*again);              // after login / sudo
//   std::string header = coord::set_cookie("__Host-sid", fresh->id).max_age(43200s).str();
//
// What the application must still add: TLS (the cookie is a bearer secret),
// CSRF defences for state-changing requests (SameSite helps, it is not all),
// and retry on errc::session_conflict (reload, reapply, save).
#pragma once

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "coord/clock.hpp"
#include "coord/detail/base64url.hpp"
#include "coord/detail/sha256.hpp"
#include "coord/detail/text.hpp"
#include "coord/error.hpp"
#include "coord/random.hpp"
#include "coord/result.hpp"
#include "coord/rules/session.hpp"

namespace coord {

/// A session store: the server-side half of opaque sessions. Keys are
/// SHA-256 hex digests of session IDs. "Now" is the store's own clock, read
/// inside each step; no caller sends a time.
/// What the compiler cannot check:
///   - each operation is one atomic step (an engine: one conditional UPDATE /
///     DELETE ... RETURNING, or one transaction);
///   - create stamps created and last_seen with now and the absolute expiry
///     with now + absolute_timeout_ms;
///   - a record past its absolute expiry or its idle timeout at now is
///     treated as gone (session_expired once, then session_not_found);
///   - load, save and rotate move last_seen to now (never back);
///   - save and rotate act only when the stored version equals `version`
///     (else errc::session_conflict), and bump it;
///   - a transport failure returns the engine's error, or
///     errc::outcome_unknown when the step may have been applied: a save or
///     rotate that did apply makes the repeat session_conflict (the version
///     moved), a create that did apply leaves a session nobody holds the ID
///     of, which its idle timeout ends.
template <class S>
concept session_store = requires(S& s, std::string_view hash, const session_request& req, std::uint64_t version,
                                 std::string_view data) {
    /// Inserts a new record (errc::session_conflict if the hash exists); the record as stored.
    { s.session_create(hash, req) } -> std::same_as<result<session_record>>;
    /// The live record; moves last_seen to now in the same step.
    { s.session_load(hash) } -> std::same_as<result<session_record>>;
    /// Replaces data if the version matches; the new version.
    { s.session_save(hash, version, data) } -> std::same_as<result<std::uint64_t>>;
    /// Moves the record to a new hash if the version matches; the new version.
    { s.session_rotate(hash, hash, version) } -> std::same_as<result<std::uint64_t>>;
    /// Deletes one session; true if it existed.
    { s.session_revoke(hash) } -> std::same_as<result<bool>>;
    /// Deletes every session of a user; how many there were.
    { s.session_revoke_user(data) } -> std::same_as<result<std::size_t>>;
};

/// A token revocation store: a denylist of JWT IDs until their exp, and a
/// not-before time per subject (every token of the subject issued before it
/// is refused: "log out everywhere"). Times are Unix seconds.
/// What the compiler cannot check: each call is one atomic step; entries
/// past their time may be dropped; token_revoked is a read of both lists at
/// once; a transport failure returns the engine's error.
template <class S>
concept revocation_store = requires(S& s, std::string_view id, std::int64_t t, std::optional<std::int64_t> iat) {
    /// Deny token `id` (its jti) until `t` (its exp).
    { s.revoke_token(id, t) } -> std::same_as<result<void>>;
    /// Refuse tokens of subject `id` with iat < t (or without iat). Never moves back.
    { s.revoke_subject(id, t) } -> std::same_as<result<void>>;
    /// True when the token (jti, sub, iat) is revoked at now `t`.
    { s.token_revoked(id, id, iat, t) } -> std::same_as<result<bool>>;
};

/// Timeouts of a session manager (each at most 400 days, the longest a
/// browser keeps a cookie).
struct session_options {
    /// A session unused for this long ends.
    std::chrono::milliseconds idle_timeout{std::chrono::minutes(30)};
    /// A session ends this long after it was created, however it is used.
    /// Rotation keeps the original creation time.
    std::chrono::milliseconds absolute_timeout{std::chrono::hours(12)};
};

/// A session as the application sees it.
struct session {
    /// The opaque ID to give the client (43 base64url characters, 256 bits).
    std::string id;
    std::string user;  ///< the user it belongs to
    std::string data;  ///< the application's data
    std::uint64_t version = 0;  ///< bumped by every save and rotate (save checks it)
    std::chrono::milliseconds created{0};          ///< since the Unix epoch on the store's clock
    std::chrono::milliseconds absolute_expiry{0};  ///< since the Unix epoch on the store's clock
    /// What is left of the absolute term at the store's now of this step:
    /// the cookie's Max-Age, free of this instance's clock.
    std::chrono::milliseconds remaining{0};
};

namespace detail {

/// True when `id` has the shape of a session ID (43 base64url characters).
inline bool session_id_shape(std::string_view id) noexcept {
    if (id.size() != 43) return false;
    for (const char c : id)
        if (base64url_values[static_cast<unsigned char>(c)] < 0) return false;
    return true;
}

}  // namespace detail

/// Opaque server-side sessions on a Store (not owned), whose clock judges
/// every expiry: the manager reads no clock. Safe from any number of threads
/// when the store is.
template <session_store Store>
class basic_session_manager {
public:
    /// Throws std::invalid_argument when a timeout is not positive, above 400
    /// days, or the idle timeout exceeds the absolute one.
    explicit basic_session_manager(Store& store, session_options options = {}) : store_(store), options_(options) {
        constexpr std::chrono::milliseconds most = std::chrono::hours(24 * 400);
        if (options_.idle_timeout <= std::chrono::milliseconds(0) || options_.idle_timeout > most)
            throw std::invalid_argument("coord::session_options::idle_timeout must be 1 ms to 400 days");
        if (options_.absolute_timeout < options_.idle_timeout || options_.absolute_timeout > most)
            throw std::invalid_argument(
                "coord::session_options::absolute_timeout must be at least idle_timeout and at most 400 days");
    }

    /// A new session for `user` (throws std::invalid_argument when it is
    /// empty, not valid UTF-8 or holds NUL; data is bytes). One store step.
    [[nodiscard]] result<session> create(std::string_view user, std::string_view data = {}) {
        detail::check_name("coord::session: user", user);
        const session_request req{user, data, options_.idle_timeout.count(), options_.absolute_timeout.count()};
        std::string id = new_id();
        auto rec = store_.session_create(hash(id), req);
        if (!rec) return unexpected(rec.error());
        return to_session(std::move(id), std::move(*rec));
    }

    /// The live session with this ID: errc::session_not_found (unknown,
    /// revoked, rotated away, or not an ID at all), errc::session_expired.
    /// Moves the idle clock. One store step.
    [[nodiscard]] result<session> load(std::string_view id) {
        if (!detail::session_id_shape(id)) return unexpected(errc::session_not_found);
        auto rec = store_.session_load(hash(id));
        if (!rec) return unexpected(rec.error());
        return to_session(std::string(id), std::move(*rec));
    }

    /// Stores s.data if nobody saved or rotated the session since `s` was
    /// loaded: errc::session_conflict if someone did (reload and reapply),
    /// session_not_found if it was revoked (a logged-out session stays out).
    /// Updates s.version. One store step.
    [[nodiscard]] result<void> save(session& s) {
        if (!detail::session_id_shape(s.id)) return unexpected(errc::session_not_found);
        auto v = store_.session_save(hash(s.id), s.version, s.data);
        if (!v) return unexpected(v.error());
        s.version = *v;
        return {};
    }

    /// A new ID for the session, the old one dead in the same step (call on
    /// login and every privilege change). Same errors as save. One store step.
    [[nodiscard]] result<session> rotate(const session& s) {
        if (!detail::session_id_shape(s.id)) return unexpected(errc::session_not_found);
        std::string id = new_id();
        auto v = store_.session_rotate(hash(s.id), hash(id), s.version);
        if (!v) return unexpected(v.error());
        session out = s;
        out.id = std::move(id);
        out.version = *v;
        return out;
    }

    /// Ends one session (logout); true if it was live. One store step.
    [[nodiscard]] result<bool> revoke(std::string_view id) {
        if (!detail::session_id_shape(id)) return false;
        return store_.session_revoke(hash(id));
    }

    /// Ends every session of `user`; how many. One store step.
    [[nodiscard]] result<std::size_t> revoke_user(std::string_view user) { return store_.session_revoke_user(user); }

    /// The store key of an ID (SHA-256, hex).
    static std::string hash(std::string_view id) { return detail::sha256_hex(id); }

private:
    Store& store_;
    session_options options_;

    static std::string new_id() {
        unsigned char raw[32];
        detail::os_entropy(raw, sizeof raw);
        std::string id;
        detail::base64url_append(raw, sizeof raw, id);
        return id;
    }

    static session to_session(std::string id, session_record rec) {
        const auto left = std::max<std::int64_t>(0, rec.absolute_expiry_ms - rec.last_seen_ms);
        return session{std::move(id),        std::move(rec.user),          std::move(rec.data),
                       rec.version,          std::chrono::milliseconds{rec.created_ms},
                       std::chrono::milliseconds{rec.absolute_expiry_ms},  std::chrono::milliseconds(left)};
    }
};

// --- Set-Cookie -----------------------------------------------------------

/// Builds a Set-Cookie header value (RFC 6265, with the prefixes and
/// SameSite of RFC 6265bis). Secure and HttpOnly are on and SameSite is Lax
/// unless changed. str() throws std::invalid_argument naming the rule for
/// an insecure or malformed combination:
///   - name not a token, value not cookie-octets, path/domain with ; or CTLs;
///   - SameSite=None without Secure;
///   - __Secure- without Secure; __Host- without Secure, with a Domain, or
///     with a Path other than "/";
///   - Max-Age negative or above 400 days (browsers cap there).
class set_cookie {
public:
    /// The SameSite attribute's value.
    enum class same_site { strict, lax, none };

    /// A cookie `name`=`value`, Secure, HttpOnly and SameSite=Lax.
    set_cookie(std::string name, std::string value) : name_(std::move(name)), value_(std::move(value)) {}

    /// Sets Secure (on by default).
    set_cookie& secure(bool on) { secure_ = on; return *this; }
    /// Sets HttpOnly (on by default).
    set_cookie& http_only(bool on) { http_only_ = on; return *this; }
    /// Sets SameSite (Lax by default).
    set_cookie& site(same_site s) { same_site_ = s; return *this; }
    /// Sets Path (none by default).
    set_cookie& path(std::string p) { path_ = std::move(p); return *this; }
    /// Sets Domain (none by default).
    set_cookie& domain(std::string d) { domain_ = std::move(d); return *this; }
    /// Sets Max-Age (none by default: a session cookie).
    set_cookie& max_age(std::chrono::seconds s) { max_age_ = s; return *this; }

    /// The header value, e.g. `__Host-sid=...; Path=/; Max-Age=3600; Secure; HttpOnly; SameSite=Lax`.
    std::string str() const {
        check();
        std::string out = name_ + "=" + value_;
        if (path_) out += "; Path=" + *path_;
        if (domain_) out += "; Domain=" + *domain_;
        if (max_age_) out += "; Max-Age=" + std::to_string(max_age_->count());
        if (secure_) out += "; Secure";
        if (http_only_) out += "; HttpOnly";
        out += same_site_ == same_site::strict ? "; SameSite=Strict"
               : same_site_ == same_site::lax  ? "; SameSite=Lax"
                                               : "; SameSite=None";
        return out;
    }

private:
    std::string name_, value_;
    bool secure_ = true, http_only_ = true;
    same_site same_site_ = same_site::lax;
    std::optional<std::string> path_, domain_;
    std::optional<std::chrono::seconds> max_age_;

    [[noreturn]] static void refuse(const std::string& why) { throw std::invalid_argument("coord::set_cookie: " + why); }

    static bool token_char(unsigned char c) noexcept {
        if (c <= 0x20 || c >= 0x7f) return false;
        return std::string_view("()<>@,;:\\\"/[]?={}").find(static_cast<char>(c)) == std::string_view::npos;
    }
    static bool cookie_octet(unsigned char c) noexcept {
        return c == 0x21 || (c >= 0x23 && c <= 0x2B) || (c >= 0x2D && c <= 0x3A) || (c >= 0x3C && c <= 0x5B) ||
               (c >= 0x5D && c <= 0x7E);
    }
    static bool attribute_text(std::string_view s) noexcept {
        for (const char ch : s) {
            const auto c = static_cast<unsigned char>(ch);
            if (c < 0x20 || c == 0x7f || c == ';') return false;
        }
        return true;
    }

    void check() const {
        if (name_.empty()) refuse("the name is empty");
        for (const char c : name_)
            if (!token_char(static_cast<unsigned char>(c))) refuse("the name is not an RFC 6265 token");
        for (const char c : value_)
            if (!cookie_octet(static_cast<unsigned char>(c))) refuse("the value holds a character outside cookie-octet");
        if (path_ && (path_->empty() || (*path_)[0] != '/' || !attribute_text(*path_)))
            refuse("Path must start with / and hold no ; or control characters");
        if (domain_ && (domain_->empty() || !attribute_text(*domain_))) refuse("Domain is empty or holds ; or control characters");
        if (max_age_ && (max_age_->count() < 0 || *max_age_ > std::chrono::hours(24 * 400)))
            refuse("Max-Age must be 0 to 400 days");
        if (same_site_ == same_site::none && !secure_) refuse("SameSite=None needs Secure");
        if (name_.rfind("__Secure-", 0) == 0 && !secure_) refuse("the __Secure- prefix needs Secure");
        if (name_.rfind("__Host-", 0) == 0) {
            if (!secure_) refuse("the __Host- prefix needs Secure");
            if (domain_) refuse("the __Host- prefix forbids Domain");
            if (!path_ || *path_ != "/") refuse("the __Host- prefix needs Path=/");
        }
    }
};

}  // namespace coord
