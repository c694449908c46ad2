// SPDX-License-Identifier: Apache-2.0
// coord/detail/engine_store.hpp: how every engine assembles its store,
// written once: the engine's context (its connections, clock and key names)
// built first, then one adapter per capability on it. An engine's
// basic_store derives from engine_store and adds only what is its own: the
// checks its constructor makes and its diagnostics. docs/internals/architecture.md,
// "Adding an engine".
#pragma once

#include <utility>

namespace coord::detail {

/// Context: the engine's detail::context<Clock>, built from the store's
/// constructor arguments. Adapters: the capability adapters, each built on
/// the context (an adapter keeps a reference to it, or to a part of it).
/// Bases are built in order, so the context exists before any adapter.
template <class Context, class... Adapters>
class engine_store : private Context, public Adapters... {
public:
    engine_store(const engine_store&) = delete;
    engine_store& operator=(const engine_store&) = delete;

protected:
    template <class... Args>
    explicit engine_store(Args&&... args)
        : Context(std::forward<Args>(args)...), Adapters(static_cast<Context&>(*this))... {}
    ~engine_store() = default;

    /// The context the adapters work through (for the store's own calls).
    Context& engine() noexcept { return *this; }
    const Context& engine() const noexcept { return *this; }
};

}  // namespace coord::detail
