// SPDX-License-Identifier: Apache-2.0
// tests/redis/redis_support.hpp: the Redis the tests use (started by the
// ctest fixture, tests/redis/redis.sh, its URL in COORD_REDIS_URL) and the factory
// the conformance suites run on. Each factory works under a fresh key prefix
// (its own hash tag), so tests never see each other's keys. A missing server
// fails the test.
#pragma once

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

#include "coord/redis/store.hpp"
#include "support/test_support.hpp"

namespace coord::test {

/// The URL of the test server; throws when the fixture did not set it.
inline std::string redis_url() {
    const char* u = std::getenv("COORD_REDIS_URL");
    if (!u || !*u) throw std::runtime_error("COORD_REDIS_URL is not set: run through ctest (fixture Redis.start)");
    return u;
}

/// A key prefix no other test uses.
inline std::string redis_fresh_prefix() { return unique_name(); }

inline redis::options redis_options(std::string prefix) {
    redis::options o;
    o.prefix = std::move(prefix);
    return o;
}

/// Runs one command on a fresh blocking connection (outside the library):
/// the reply as text (an integer as its decimal, nil as "(nil)", an array's
/// elements a line each).
inline std::string redis_command(const std::vector<std::string>& args) {
    const auto a = redis::parse_url(redis_url());
    if (!a) throw std::runtime_error("bad COORD_REDIS_URL");
    timeval tv{5, 0};
    redisContext* c = redisConnectWithTimeout(a->host.c_str(), a->port, tv);
    if (!c || c->err) {
        std::string why = c ? c->errstr : "out of memory";
        if (c) redisFree(c);
        throw std::runtime_error("cannot reach the test Redis: " + why);
    }
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& s : args) {
        argv.push_back(s.data());
        lens.push_back(s.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data()));
    std::string out;
    if (!r) out = std::string("error: ") + c->errstr;
    else if (r->type == REDIS_REPLY_INTEGER) out = std::to_string(r->integer);
    else if (r->type == REDIS_REPLY_NIL) out = "(nil)";
    else if (r->type == REDIS_REPLY_ARRAY)
        for (std::size_t i = 0; i < r->elements; ++i) {
            const redisReply* e = r->element[i];
            if (i) out += '\n';
            if (e->type == REDIS_REPLY_INTEGER) out += std::to_string(e->integer);
            else if (e->str) out.append(e->str, e->len);
        }
    else if (r->str) out.assign(r->str, r->len);
    if (r) freeReplyObject(r);
    redisFree(c);
    return out;
}

struct redis_factory {
    using store_type = redis::basic_store<manual_clock>;
    static constexpr const char* name = "redis";
    std::string prefix = redis_fresh_prefix();
    std::unique_ptr<store_type> make(manual_clock clock) {
        auto s = std::make_unique<store_type>(redis_url(), clock, redis_options(prefix));
        if (!s->initialize(coord::redis::initial_floors{})) throw std::runtime_error("cannot initialize the test Redis store");
        return s;
    }
    /// A second store on the same keys over its own connections, as another process would.
    std::unique_ptr<store_type> second;
    store_type* reopen(store_type*, manual_clock clock) {
        second = std::make_unique<store_type>(redis_url(), clock, redis_options(prefix));
        return second.get();
    }
};

}  // namespace coord::test
