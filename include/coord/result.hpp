// SPDX-License-Identifier: Apache-2.0
// coord/result.hpp: result<T, E>, a value or the reason there is none.
//
// coord reports expected outcomes (a stale fence, a held lease, a clock that
// went back) as values, never as exceptions. result<T, E> is shaped like
// C++23's std::expected (has_value, value, error, explicit bool, *, ->,
// unexpected) so that moving to std::expected later is a rename. E defaults to
// coord::error (a std::error_code and, from an engine, its own words).
//
//   coord::result<int> parse(std::string_view s);
//   if (auto r = parse("42")) use(*r); else log(r.error().message());
#pragma once

#include <exception>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include "coord/error.hpp"

namespace coord {

/// Wraps an error value so that a result can be built from it unambiguously.
template <class E>
class unexpected {
public:
    /// Wraps `e`.
    constexpr explicit unexpected(E e) : error_(std::move(e)) {}
    ///@{
    /// The wrapped error.
    constexpr const E& error() const& noexcept { return error_; }
    constexpr E& error() & noexcept { return error_; }
    constexpr E&& error() && noexcept { return std::move(error_); }
    ///@}

private:
    E error_;
};

template <class E>
unexpected(E) -> unexpected<E>;

/// Thrown by result::value() when the result holds an error: a caller bug,
/// since the caller should have checked has_value() first.
class bad_result_access : public std::exception {
public:
    /// Says that value() was called on an error.
    const char* what() const noexcept override { return "coord::result: value() called on an error"; }
};

/// A T, or an E saying why there is no T. Thread safety: like any value type.
template <class T, class E = error>
class [[nodiscard]] result {
public:
    using value_type = T;  ///< T
    using error_type = E;  ///< E

    /// A result holding a value-initialised T.
    constexpr result() requires std::is_default_constructible_v<T> : v_(std::in_place_index<0>) {}
    /// A result holding `value`.
    template <class U = T>
        requires(std::is_constructible_v<T, U &&> &&
                 !std::is_same_v<std::remove_cvref_t<U>, result> &&
                 !std::is_same_v<std::remove_cvref_t<U>, unexpected<E>>)
    constexpr result(U&& value) : v_(std::in_place_index<0>, std::forward<U>(value)) {}
    ///@{
    /// A result holding the error.
    template <class G>
        requires std::is_constructible_v<E, const G&>
    constexpr result(const unexpected<G>& u) : v_(std::in_place_index<1>, u.error()) {}
    template <class G>
        requires std::is_constructible_v<E, G &&>
    constexpr result(unexpected<G>&& u) : v_(std::in_place_index<1>, std::move(u).error()) {}
    ///@}

    /// True when it holds a value.
    constexpr bool has_value() const noexcept { return v_.index() == 0; }
    /// has_value().
    constexpr explicit operator bool() const noexcept { return has_value(); }

    ///@{
    /// The value; throws bad_result_access if there is none.
    constexpr T& value() & { check(); return std::get<0>(v_); }
    constexpr const T& value() const& { check(); return std::get<0>(v_); }
    constexpr T&& value() && { check(); return std::get<0>(std::move(v_)); }
    ///@}

    ///@{
    /// The error. Precondition: !has_value().
    constexpr E& error() & noexcept { return *std::get_if<1>(&v_); }
    constexpr const E& error() const& noexcept { return *std::get_if<1>(&v_); }
    constexpr E&& error() && noexcept { return std::move(*std::get_if<1>(&v_)); }
    ///@}

    ///@{
    /// The value. Precondition: has_value().
    constexpr T& operator*() & noexcept { return *std::get_if<0>(&v_); }
    constexpr const T& operator*() const& noexcept { return *std::get_if<0>(&v_); }
    constexpr T&& operator*() && noexcept { return std::move(*std::get_if<0>(&v_)); }
    ///@}
    ///@{
    /// A pointer to the value. Precondition: has_value().
    constexpr T* operator->() noexcept { return std::get_if<0>(&v_); }
    constexpr const T* operator->() const noexcept { return std::get_if<0>(&v_); }
    ///@}

    /// The value, or `fallback` when there is none.
    template <class U>
    constexpr T value_or(U&& fallback) const& {
        return has_value() ? **this : static_cast<T>(std::forward<U>(fallback));
    }

    /// Equal to a value when it holds an equal value (as std::expected).
    template <class U>
        requires(!std::is_same_v<std::remove_cvref_t<U>, result> && requires(const T& t, const U& u) { t == u; })
    friend constexpr bool operator==(const result& r, const U& v) {
        return r.has_value() && *r == v;
    }

private:
    constexpr void check() const {
        if (!has_value()) throw bad_result_access();
    }
    std::variant<T, E> v_;
};

/// A success with nothing to return, or an E.
template <class E>
class [[nodiscard]] result<void, E> {
public:
    using value_type = void;  ///< void
    using error_type = E;     ///< E

    /// A success.
    constexpr result() noexcept = default;
    ///@{
    /// A result holding the error.
    template <class G>
        requires std::is_constructible_v<E, const G&>
    constexpr result(const unexpected<G>& u) : error_(u.error()), ok_(false) {}
    template <class G>
        requires std::is_constructible_v<E, G &&>
    constexpr result(unexpected<G>&& u) : error_(std::move(u).error()), ok_(false) {}
    ///@}

    /// True on success.
    constexpr bool has_value() const noexcept { return ok_; }
    /// has_value().
    constexpr explicit operator bool() const noexcept { return ok_; }
    /// Throws bad_result_access when the result holds an error.
    constexpr void value() const {
        if (!ok_) throw bad_result_access();
    }
    ///@{
    /// The error. Precondition: !has_value().
    constexpr const E& error() const& noexcept { return error_; }
    constexpr E& error() & noexcept { return error_; }
    constexpr E&& error() && noexcept { return std::move(error_); }
    ///@}

private:
    E error_{};
    bool ok_ = true;
};

}  // namespace coord
