#pragma once
// omnirt::expected / omnirt::unexpected: std::expected where the standard library provides it
// (GCC 12 in C++23 mode), otherwise a minimal equivalent. The fallback exists only for clang-14
// (the libFuzzer toolchain), whose concepts level hides libstdc++'s <expected>; it implements
// the subset of the std::expected interface omnirt uses.
#include <version>

#if defined(__cpp_lib_expected)
#include <expected>
namespace omnirt {
template <class T, class E>
using expected = std::expected<T, E>;
template <class E>
using unexpected = std::unexpected<E>;
}  // namespace omnirt
#else
#include <cstdlib>
#include <type_traits>
#include <utility>
#include <variant>

namespace omnirt {

template <class E>
class unexpected {
  public:
    explicit unexpected(E error) : error_(std::move(error)) {}
    const E& error() const& { return error_; }
    E& error() & { return error_; }
    E&& error() && { return std::move(error_); }

  private:
    E error_;
};

template <class T, class E>
class expected {
  public:
    using value_type = T;
    using error_type = E;

    expected() requires std::is_default_constructible_v<T> : state_(std::in_place_index<0>) {}
    template <class U = T>
    requires std::is_constructible_v<T, U&&> &&
        (!std::is_same_v<std::remove_cvref_t<U>, expected>)&&(
            !std::is_same_v<std::remove_cvref_t<U>, unexpected<E> >)expected(U&& value)
        : state_(std::in_place_index<0>, std::forward<U>(value)) {}
    template <class G>
    expected(unexpected<G> error) : state_(std::in_place_index<1>, std::move(error).error()) {}

    bool has_value() const { return state_.index() == 0; }
    explicit operator bool() const { return has_value(); }
    T& value() & {
        check_value();
        return std::get<0>(state_);
    }
    const T& value() const& {
        check_value();
        return std::get<0>(state_);
    }
    T&& value() && {
        check_value();
        return std::move(std::get<0>(state_));
    }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T&& operator*() && { return std::move(*this).value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    E& error() & { return std::get<1>(state_); }
    const E& error() const& { return std::get<1>(state_); }
    E&& error() && { return std::move(std::get<1>(state_)); }
    template <class U>
    T value_or(U&& other) const& {
        return has_value() ? value() : T(std::forward<U>(other));
    }

  private:
    void check_value() const {
        if (!has_value()) std::abort();
    }
    std::variant<T, E> state_;
};

template <class E>
class expected<void, E> {
  public:
    using value_type = void;
    using error_type = E;

    expected() = default;
    template <class G>
    expected(unexpected<G> error) : error_(std::move(error).error()), failed_(true) {}

    bool has_value() const { return !failed_; }
    explicit operator bool() const { return has_value(); }
    void value() const {
        if (failed_) std::abort();
    }
    E& error() & { return error_; }
    const E& error() const& { return error_; }
    E&& error() && { return std::move(error_); }

  private:
    E error_{};
    bool failed_ = false;
};

}  // namespace omnirt
#endif
