// SPDX-License-Identifier: Apache-2.0
// A tiny program that uses coord::session (server-side sessions: nothing
// beyond coord::coord, no OpenSSL) as a consumer would.
#include <coord/aliases.hpp>

int main() {
    coord::memory_store store;
    coord::memory::session_manager sessions{store};
    auto s = sessions.create("alice");
    if (!s) return 1;
    auto again = sessions.load(s->id);
    return again && again->user == "alice" ? 0 : 2;
}
