// SPDX-License-Identifier: Apache-2.0
// coord/error.hpp: coord::errc, the outcomes coord's primitives report, and
// its std::error_category.
//
// Every refusal that a primitive's rule produces (a stale fence, a lease held
// by someone else, a clock that went back) is an errc value carried in a
// std::error_code, so that callers can compare it with `==` whatever the
// store underneath. Infrastructure failures (I/O, a lost connection) keep the
// category of the layer that produced them (std::system_category for files).
//
//   auto r = resource.write(token, "v");
//   if (!r && r.error() == coord::errc::stale_fence) { /* a newer holder wrote */ }
#pragma once

#include <string>
#include <memory>
#include <ostream>
#include <system_error>

namespace coord {

/// The outcomes coord reports. Values are stable: new ones are appended.
enum class errc {
    /// A write carried a fence token below the highest the resource has seen.
    stale_fence = 1,
    /// An ordered write carried a (token, sequence) pair not above the last accepted one.
    stale_sequence,
    /// The lease is held by another owner and has not expired.
    lease_held,
    /// renew or release by someone who is not the current holder.
    not_lease_holder,
    /// renew of a lease whose term has already ended (expiry is final).
    lease_expired,
    /// A state file is shorter than its header says: it was cut off.
    state_truncated,
    /// A state file fails its checksum or is not a coord state file.
    state_corrupt,
    /// A state file was written by a format version this build does not read.
    state_unsupported,
    /// The store's state went back: a state file vanished or holds an older
    /// generation than this process already saw (restored from an old
    /// copy?), or an engine answered from an older state than it answered
    /// this store object before (etcd: a lower revision, after a snapshot
    /// restore).
    state_went_back,
    /// The operation may or may not have been applied (for example the store
    /// replaced its file but could not make the directory durable).
    outcome_unknown,
    /// The clock went back and the primitive's policy refuses to continue.
    clock_rollback,
    /// Every sequence value of the current tick is used and the policy rejects.
    sequence_exhausted,
    /// The lease a generator issues under could not be renewed in time.
    lease_lost,
    /// An ID layout's timestamp field has run out: issuing would wrap.
    time_exhausted,
    /// Text that should hold an ID, a UUID or a slot is malformed.
    invalid_text,
    /// Both ranges of a segment generator are used up and the allocator has
    /// not delivered the next one (it is down or slow).
    allocator_unavailable,
    /// A tag's ID space (63 bits) is used up.
    range_exhausted,
    /// An enumeration of schedule fires passed its cap.
    too_many_slots,
    /// A token is longer than the validator's limit (checked before decoding).
    token_too_large,
    /// A token is not three non-empty dot-separated parts, or its header
    /// lacks a well-typed alg/kid/typ.
    token_malformed,
    /// A token part is not canonical base64url (padding, + or /, whitespace,
    /// non-zero unused bits).
    token_bad_encoding,
    /// A token's header or claims are not one JSON object within the limits
    /// (syntax, duplicate member names, depth, invalid UTF-8).
    token_bad_json,
    /// The token's alg is none, unknown, or not the algorithm of its key.
    token_alg_refused,
    /// No key of the key set matches the token's kid (or, without a kid, no
    /// single key has the token's alg).
    token_unknown_key,
    /// The signature or MAC does not verify.
    token_bad_signature,
    /// The header's crit names a parameter the validator does not understand.
    token_unknown_crit,
    /// A registered claim has the wrong type or is out of range (exp as a
    /// string, a float, negative, after year 9999; aud not strings).
    token_bad_claim,
    /// A claim the validator requires is absent.
    token_missing_claim,
    /// now >= exp (+ leeway).
    token_expired,
    /// now < nbf (- leeway), or iat lies in the future.
    token_not_yet_valid,
    /// The token is older than the validator's maximum age (from iat).
    token_too_old,
    /// iss is not the expected issuer.
    token_wrong_issuer,
    /// aud holds none of the expected audiences.
    token_wrong_audience,
    /// The header's typ is not the expected type.
    token_wrong_type,
    /// The token's jti is denied, or its subject's tokens issued before a
    /// not-before time are.
    token_revoked,
    /// A key is unusable for its algorithm (type, curve, size, exponent,
    /// known-weak, private material where a public key belongs).
    invalid_key,
    /// No live session has this ID (never issued, revoked, rotated away).
    session_not_found,
    /// The session passed its idle or absolute timeout.
    session_expired,
    /// The session changed since it was loaded (another request saved it).
    session_conflict,
    /// A state path is not a regular file (a directory, FIFO, device or
    /// socket), or its lock file is not.
    state_not_regular,
    /// A state file has other hard links: a write replaces one name and the
    /// others would keep the old state, so it cannot be shared safely.
    state_hard_linked,
    /// A state is over the file format's limits (one string over 256 MiB,
    /// or the whole state over 1 GiB); nothing was written.
    state_too_large,
    /// A store's lock was not free within its lock timeout (another process
    /// holds it: paused, or stuck); nothing was done. Retrying later may succeed.
    lock_timeout,
    /// A waiter's place in a lease's queue lapsed (it was not renewed in
    /// time): it must queue again, at the back.
    wait_place_lost,
    /// The store holds no identity record: it was never initialized, or it
    /// lost its data (a restart without persistence, a failover to a replica
    /// without the last writes). Nothing was done: what the store would
    /// answer from lost data (a segment range, a ledger result, a fence)
    /// could reissue what was already handed out. Initializing it again
    /// takes floors above everything it handed out (coordctl store init
    /// --segment-floor --fence-floor --ledger-floor).
    store_uninitialized,
    /// The store's identity is not the one this store object opened (it lost
    /// its data and was initialized again while this process ran): nothing
    /// was done. Restart the process once the store is known to be safe.
    store_identity_changed,
    /// Initializing a store that is already initialized; nothing was done
    /// (coordctl store init --force re-initializes).
    store_already_initialized,
    /// No cron runner has run this job on this store (it has no cursor).
    cron_job_unknown,
    /// A cron job's cursor on the store is not one a runner wrote.
    cron_cursor_corrupt,
    /// A cron runner's schedule is not the one the store keeps for its job
    /// (or the job was taken over from it): the runner claims nothing.
    cron_schedule_conflict,
    /// A value, result or session is larger than the store can keep (an
    /// engine's request or node limit); nothing was sent.
    value_too_large,
};

/// What kind of outcome an error code is, whatever its category: callers
/// (and coordctl's exit codes) decide by condition, not by listing codes.
///
///   if (r.error() == coord::condition::refused) { /* the rule said no: do not retry as is */ }
///   if (r.error() == coord::condition::outcome_unknown) { /* read back before retrying */ }
enum class condition {
    /// The primitive's rule refused (stale fence, lease held, token
    /// expired, ...): nothing was applied; retrying the same call gets the
    /// same answer until the state changes.
    refused = 1,
    /// The call may or may not have been applied (a connection lost after
    /// the request was sent, a rename that could not be made durable).
    outcome_unknown,
    /// The store could not be reached or could not serve the call, and it
    /// certainly did not apply (a failed connection, a statement cancelled
    /// and rolled back, an I/O error before anything was written, an
    /// allocator that has not delivered). Retrying later may succeed.
    unavailable,
    /// A durable store's state is damaged or went back; an operator must
    /// look. Nothing was written.
    corrupt_state,
    /// The input cannot be accepted by any store (malformed text or key).
    bad_input,
    /// The store refused this client's credentials, or their rights on
    /// coord's data (a wrong password, no credentials where the store
    /// requires them, a user without permission): a configuration to fix;
    /// retrying as it is gets the same answer. Nothing was applied.
    not_authorized,
};

/// The category of coord::condition; its name() is "coord.condition".
inline const std::error_category& condition_category() noexcept;

inline std::error_condition make_error_condition(condition c) noexcept {
    return {static_cast<int>(c), condition_category()};
}

namespace detail {

/// The condition of one coord::errc value.
constexpr condition condition_of(errc e) noexcept {
    switch (e) {
    case errc::outcome_unknown: return condition::outcome_unknown;
    case errc::allocator_unavailable:
    case errc::lock_timeout: return condition::unavailable;
    case errc::state_truncated:
    case errc::state_corrupt:
    case errc::state_unsupported:
    case errc::state_went_back:
    case errc::state_not_regular:
    case errc::state_hard_linked:
    case errc::state_too_large:
    case errc::store_uninitialized:
    case errc::cron_cursor_corrupt:
    case errc::store_identity_changed: return condition::corrupt_state;
    case errc::invalid_text:
    case errc::invalid_key:
    case errc::cron_schedule_conflict:
    case errc::value_too_large: return condition::bad_input;
    default: return condition::refused;
    }
}

/// True for the token refusals, which have a category of their own.
constexpr bool is_token_errc(errc e) noexcept {
    return static_cast<int>(e) >= static_cast<int>(errc::token_too_large) &&
           static_cast<int>(e) <= static_cast<int>(errc::token_revoked);
}

class coord_category_impl : public std::error_category {
public:
    const char* name() const noexcept override { return "coord"; }
    std::error_condition default_error_condition(int ev) const noexcept override {
        return make_error_condition(condition_of(static_cast<errc>(ev)));
    }

    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::stale_fence: return "stale fence";
        case errc::stale_sequence: return "stale sequence";
        case errc::lease_held: return "lease held";
        case errc::not_lease_holder: return "not the lease holder";
        case errc::lease_expired: return "lease expired";
        case errc::state_truncated: return "state file truncated";
        case errc::state_corrupt: return "state file corrupt";
        case errc::state_unsupported: return "state file format not supported";
        case errc::state_went_back: return "the store's state went back (missing, an older generation, or restored)";
        case errc::outcome_unknown: return "outcome unknown";
        case errc::clock_rollback: return "clock rollback";
        case errc::sequence_exhausted: return "sequence exhausted";
        case errc::lease_lost: return "lease lost";
        case errc::time_exhausted: return "timestamp field exhausted";
        case errc::invalid_text: return "invalid text";
        case errc::allocator_unavailable: return "allocator unavailable";
        case errc::range_exhausted: return "ID range exhausted";
        case errc::too_many_slots: return "too many slots";
        case errc::token_too_large: return "token too large";
        case errc::token_malformed: return "token malformed";
        case errc::token_bad_encoding: return "token not canonical base64url";
        case errc::token_bad_json: return "token JSON refused";
        case errc::token_alg_refused: return "token algorithm refused";
        case errc::token_unknown_key: return "no key for token";
        case errc::token_bad_signature: return "bad signature";
        case errc::token_unknown_crit: return "unknown critical header";
        case errc::token_bad_claim: return "bad claim";
        case errc::token_missing_claim: return "missing claim";
        case errc::token_expired: return "token expired";
        case errc::token_not_yet_valid: return "token not yet valid";
        case errc::token_too_old: return "token too old";
        case errc::token_wrong_issuer: return "wrong issuer";
        case errc::token_wrong_audience: return "wrong audience";
        case errc::token_wrong_type: return "wrong token type";
        case errc::token_revoked: return "token revoked";
        case errc::invalid_key: return "invalid key";
        case errc::session_not_found: return "session not found";
        case errc::session_expired: return "session expired";
        case errc::session_conflict: return "session changed concurrently";
        case errc::state_not_regular: return "state path is not a regular file";
        case errc::state_hard_linked: return "state file has other hard links (cannot be shared safely)";
        case errc::state_too_large: return "state over the file format's limits (a string over 256 MiB or a state over 1 GiB)";
        case errc::lock_timeout: return "the store's lock was not free within the lock timeout";
        case errc::wait_place_lost: return "the waiter's place in the lease queue lapsed";
        case errc::store_uninitialized:
            return "the store is not initialized (never, or it lost its data): initialize it stating floors above "
                   "everything it handed out (docs/stores/redis.md: When a store lost its data)";
        case errc::store_identity_changed: return "the store was initialized again since this process opened it";
        case errc::store_already_initialized: return "the store is already initialized";
        case errc::cron_job_unknown: return "no cron runner has run this job on this store";
        case errc::cron_cursor_corrupt: return "the cron job's cursor is not one a runner wrote";
        case errc::cron_schedule_conflict: return "the store runs this cron job under another schedule";
        case errc::value_too_large: return "value larger than the store can keep";
        }
        return "unknown coord error";
    }
};

/// The token refusals (errc::token_*): the same values, their own category,
/// so that a JWT refusal is told apart from a store's at a glance.
class token_category_impl final : public coord_category_impl {
public:
    const char* name() const noexcept override { return "coord.token"; }
};

class condition_category_impl final : public std::error_category {
public:
    const char* name() const noexcept override { return "coord.condition"; }
    std::string message(int ev) const override {
        switch (static_cast<condition>(ev)) {
        case condition::refused: return "refused by the primitive's rule";
        case condition::outcome_unknown: return "outcome unknown";
        case condition::unavailable: return "store unavailable";
        case condition::corrupt_state: return "store state corrupt or gone back";
        case condition::bad_input: return "bad input";
        case condition::not_authorized: return "not authorized by the store";
        }
        return "unknown condition";
    }
    // Codes of other categories map by their own default_error_condition
    // (coord's categories and the engines' map straight into a condition);
    // an operating system error is `unavailable`: an I/O call that failed
    // before the store changed anything.
    bool equivalent(const std::error_code& ec, int cond) const noexcept override {
        if (ec.category() == std::system_category() || ec.category() == std::generic_category())
            return ec && cond == static_cast<int>(condition::unavailable);
        return ec.category().default_error_condition(ec.value()) == std::error_condition(cond, *this);
    }
};

}  // namespace detail

/// Thrown when a store cannot be opened: its what() names the store (the
/// file path, the server) and the reason; code() is the errc or system error.
class store_error : public std::system_error {
public:
    using std::system_error::system_error;
};

/// The category of coord::errc values; its name() is "coord".
inline const std::error_category& coord_category() noexcept {
    static const detail::coord_category_impl instance;
    return instance;
}

/// The category of the token refusals (errc::token_*); its name() is "coord.token".
inline const std::error_category& token_category() noexcept {
    static const detail::token_category_impl instance;
    return instance;
}

inline const std::error_category& condition_category() noexcept {
    static const detail::condition_category_impl instance;
    return instance;
}

/// Makes a std::error_code from an errc (found by argument-dependent lookup):
/// the token refusals in token_category(), every other value in coord_category().
inline std::error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), detail::is_token_errc(e) ? token_category() : coord_category()};
}

/// An error as results carry it: a std::error_code (what kind of failure, to
/// compare and decide on) and, when an engine said more, the engine's own
/// words (the server's message, the connection's reason) carried in the
/// value itself, so that they travel with the error across threads and
/// calls. Converts to and from std::error_code; compares like one.
///
///   if (!r) log(r.error().message());          // "PostgreSQL statement failed: ERROR: ..."
///   if (r.error() == coord::condition::unavailable) retry_later();
class error {
public:
    error() noexcept = default;
    /// The code alone (implicit: every std::error_code is an error).
    error(std::error_code code) noexcept : code_(code) {}  // NOLINT(google-explicit-constructor)
    /// A code of an error code enumeration (coord::errc, postgres::errc, ...).
    template <class E>
        requires std::is_error_code_enum_v<E>
    error(E e) noexcept : code_(make_error_code(e)) {}  // NOLINT(google-explicit-constructor)
    /// The code and the engine's own words (empty words: none).
    error(std::error_code code, std::string detail)
        : code_(code), detail_(detail.empty() ? nullptr : std::make_shared<const std::string>(std::move(detail))) {}

    /// The code (implicit, so that an error passes where a std::error_code is expected).
    operator const std::error_code&() const noexcept { return code_; }  // NOLINT(google-explicit-constructor)
    /// The code.
    const std::error_code& code() const noexcept { return code_; }
    /// The code's number in its category.
    int value() const noexcept { return code_.value(); }
    /// The code's category (coord's, or an engine's).
    const std::error_category& category() const noexcept { return code_.category(); }
    /// The code's default condition, as std::error_code gives it.
    std::error_condition default_error_condition() const noexcept { return code_.default_error_condition(); }
    /// True when there is an error (a nonzero code).
    explicit operator bool() const noexcept { return static_cast<bool>(code_); }

    /// What the engine said (the server's message), or empty.
    const std::string& detail() const noexcept {
        static const std::string none;
        return detail_ ? *detail_ : none;
    }
    /// The code's message, then the engine's words when there are any.
    std::string message() const {
        std::string m = code_.message();
        if (detail_) m += ": " + *detail_;
        return m;
    }

    /// Equal codes (the engine's words are not compared).
    friend bool operator==(const error& a, const error& b) noexcept { return a.code_ == b.code_; }
    /// The code equals `b`.
    friend bool operator==(const error& a, const std::error_code& b) noexcept { return a.code_ == b; }
    /// The code matches the condition `b` (coord::condition or a std one).
    friend bool operator==(const error& a, const std::error_condition& b) noexcept { return a.code_ == b; }
    /// The code is `e`, an error code enumeration's value.
    template <class E>
        requires std::is_error_code_enum_v<E>
    friend bool operator==(const error& a, E e) noexcept {
        return a.code_ == make_error_code(e);
    }
    /// The code matches `e`, an error condition enumeration's value.
    template <class E>
        requires std::is_error_condition_enum_v<E>
    friend bool operator==(const error& a, E e) noexcept {
        return a.code_ == make_error_condition(e);
    }
    /// Writes "category:number (message)".
    friend std::ostream& operator<<(std::ostream& os, const error& e) {
        return os << e.code_.category().name() << ':' << e.code_.value() << " (" << e.message() << ')';
    }

private:
    std::error_code code_;
    std::shared_ptr<const std::string> detail_;  // shared: copying an error never allocates
};

}  // namespace coord

/// @cond STD_SPECIALIZATIONS
template <>
struct std::is_error_code_enum<coord::errc> : std::true_type {};
template <>
struct std::is_error_condition_enum<coord::condition> : std::true_type {};
/// @endcond
