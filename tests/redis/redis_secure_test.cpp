// SPDX-License-Identifier: Apache-2.0
// coord on a Redis that takes TLS only, wants a client certificate its CA
// signed and has ACL users only (tests/redis/redis.sh start ... secure,
// fixture RedisSecure: users coord (everything) and reader (read commands
// only)): over rediss:// with the test CA, the client certificate and the
// user coord every call works; a certificate coord cannot trust (another CA,
// another name), a client certificate the server refuses or none at all are
// errc::tls_failed, credentials and rights are errc::not_authorized (both of
// condition not_authorized: a configuration to fix, nothing applied, never an
// unknown outcome); one side speaking TLS and the other not is refused when
// the connection is made, before any call is sent; the password is in no
// message.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

#include "coord/open.hpp"
#include "coord/redis/store.hpp"
#include "redis/redis_support.hpp"

namespace {

using namespace std::chrono_literals;

std::string dir() { return COORD_REDIS_SECURE_DIR; }
std::string url() {
    const char* u = std::getenv("COORD_REDIS_SECURE_URL");
    if (!u || !*u) throw std::runtime_error("COORD_REDIS_SECURE_URL is not set: run through ctest (fixture RedisSecure.start)");
    return u;
}
std::string port() { return url().substr(url().rfind(':') + 1); }
std::string password(const std::string& user) {
    std::ifstream in(dir() + "/" + user + ".password");
    std::string p;
    std::getline(in, p);
    return p;
}

// Options of the user `user` (none: ""), with the test CA and the client
// certificate (each piece replaceable for the refusals).
coord::redis::options signed_in(const std::string& prefix, const std::string& user = "coord") {
    coord::redis::options o;
    o.prefix = prefix;
    o.ca_file = dir() + "/tls/ca.crt";
    o.cert_file = dir() + "/tls/client.crt";
    o.key_file = dir() + "/tls/client.key";
    o.operation_timeout = 5s;
    if (!user.empty()) {
        o.user = user;
        o.password = password(user);
    }
    return o;
}

TEST(RedisSecure, OverTlsWithAClientCertificateAndAnAclUserEveryCallWorks) {
    const std::string prefix = coord::test::redis_fresh_prefix();
    coord::redis::store s(url(), {}, signed_in(prefix));
    ASSERT_TRUE(s.initialize(coord::redis::initial_floors{}));
    ASSERT_TRUE(s.fence_write("f", 7, "v"));
    auto r = s.fence_read("f");
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->value, "v");
    auto a = s.lease_acquire("n", "A", 30s);
    ASSERT_TRUE(a) << a.error().code.message();
    EXPECT_TRUE(s.lease_release("n", "A", a->token));
    auto ids = s.segment_allocate("ids", 10);
    ASSERT_TRUE(ids) << ids.error().message();

    // The same store from a URL: the files in its query, or in the options
    // (which switch TLS on for a redis:// URL too).
    const std::string files = "ca_file=" + dir() + "/tls/ca.crt&cert_file=" + dir() + "/tls/client.crt&key_file=" +
                              dir() + "/tls/client.key";
    coord::open_options creds;
    creds.user = "coord";
    creds.password = password("coord");
    auto from_url = coord::open_store<coord::redis::store>(url() + "?prefix=" + prefix + "&" + files, creds);
    auto again = from_url.fence_read("f");
    ASSERT_TRUE(again) << again.error().message();
    EXPECT_EQ(again->fence, 7u);
    creds.ca_file = dir() + "/tls/ca.crt";
    creds.cert_file = dir() + "/tls/client.crt";
    creds.key_file = dir() + "/tls/client.key";
    auto switched = coord::open_store<coord::redis::store>("redis://127.0.0.1:" + port() + "?prefix=" + prefix, creds);
    auto third = switched.fence_read("f");
    ASSERT_TRUE(third) << third.error().message();
    EXPECT_EQ(third->fence, 7u);
}

// A refused write: the error's code and condition, never unknown, the
// password nowhere, and nothing applied. (Opening the store talks to the
// server: a refusal may come from there, as store_error, before the write.)
void expect_refused(const std::string& at, coord::redis::options o, coord::redis::errc code, const std::string& prefix,
                    const std::string& words_say = "") {
    const std::string secret = password("coord");
    std::error_code got;
    std::string words;
    try {
        coord::redis::store s(at, {}, std::move(o));
        auto w = s.fence_write("f", 99, "refused");
        ASSERT_FALSE(w);
        got = w.error().code;
        words = w.error().code.message();
    } catch (const coord::store_error& e) {
        got = e.code();
        words = e.what();
    }
    EXPECT_EQ(got, code) << words;
    EXPECT_NE(got, coord::condition::outcome_unknown) << words;
    EXPECT_EQ(words.find(secret), std::string::npos) << "the password is in the message";
    if (!words_say.empty()) {
        EXPECT_NE(words.find(words_say), std::string::npos) << words;
    }
    coord::redis::store ok(url(), {}, signed_in(prefix));
    auto r = ok.fence_read("f");
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->fence, 7u);
}

TEST(RedisSecure, CertificatesCredentialsAndRightsTheServerOrCoordRefusesAreConfigurationErrors) {
    const std::string prefix = coord::test::redis_fresh_prefix();
    {
        coord::redis::store s(url(), {}, signed_in(prefix));
        ASSERT_TRUE(s.initialize(coord::redis::initial_floors{}));
        ASSERT_TRUE(s.fence_write("f", 7, "v"));
    }
    using coord::redis::errc;
    // What coord refuses: a server certificate of a CA it does not trust, or
    // not for the address it dialled (127.0.0.2: the certificate names
    // 127.0.0.1 and localhost only).
    auto other_ca = signed_in(prefix);
    other_ca.ca_file = dir() + "/tls/other-ca.crt";
    expect_refused(url(), other_ca, errc::tls_failed, prefix, "certificate");
    expect_refused("rediss://127.0.0.2:" + port(), signed_in(prefix), errc::tls_failed, prefix, "mismatch");
    // What the server refuses: no client certificate, one of another CA.
    auto no_certificate = signed_in(prefix);
    no_certificate.cert_file.clear();
    no_certificate.key_file.clear();
    expect_refused(url(), no_certificate, errc::tls_failed, prefix, "client certificate");
    auto stranger = signed_in(prefix);
    stranger.cert_file = dir() + "/tls/stranger.crt";
    stranger.key_file = dir() + "/tls/stranger.key";
    expect_refused(url(), stranger, errc::tls_failed, prefix, "client certificate");
    // Credentials and rights, over a good TLS connection.
    auto wrong_password = signed_in(prefix);
    wrong_password.password = "not-" + wrong_password.password;
    expect_refused(url(), wrong_password, errc::not_authorized, prefix, "WRONGPASS");
    expect_refused(url(), signed_in(prefix, ""), errc::not_authorized, prefix, "NOAUTH");
    expect_refused(url(), signed_in(prefix, "reader"), errc::not_authorized, prefix, "NOPERM");
    // Every refusal above is of condition not_authorized.
    EXPECT_EQ(coord::redis::make_error_code(errc::tls_failed), coord::condition::not_authorized);
}

TEST(RedisSecure, APlainClientOnTheTlsPortIsRefusedWhenItConnectsNeverAfterSendingACall) {
    const std::string prefix = coord::test::redis_fresh_prefix();
    auto o = coord::test::redis_options(prefix);
    o.user = "coord";
    o.password = password("coord");
    o.operation_timeout = 5s;
    try {
        coord::redis::store s("redis://127.0.0.1:" + port(), {}, o);
        ADD_FAILURE() << "a plain connection to the TLS port was served";
    } catch (const coord::store_error& e) {
        EXPECT_EQ(e.code(), coord::redis::errc::connection_failed) << e.what();
        EXPECT_NE(std::string(e.what()).find("rediss://"), std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).find(o.password), std::string::npos) << "the password is in the message";
    }
}

TEST(RedisSecure, TlsToAPortThatDoesNotSpeakItIsRefusedInBoundedTime) {
    // A port that accepts and never answers (a plain Redis waits the same
    // way for the rest of a line the handshake never sends).
    const coord::test::silent_port silent;
    auto o = signed_in("x");
    o.operation_timeout = o.connect_timeout = 200ms;
    try {
        coord::redis::store s("rediss://" + silent.address(), {}, o);
        ADD_FAILURE() << "a port that never answers answered";
    } catch (const coord::store_error& e) {
        EXPECT_EQ(e.code(), coord::redis::errc::connection_failed) << e.what();
        EXPECT_NE(std::string(e.what()).find("TLS"), std::string::npos) << e.what();
    }
}

TEST(RedisSecure, TlsFilesOpenSslCannotUseAreRefusedWhenTheStoreIsMade) {
    auto missing = signed_in("x");
    missing.ca_file = dir() + "/tls/no-such-ca.crt";
    try {
        coord::redis::store s(url(), {}, missing);
        ADD_FAILURE() << "a CA file that does not exist was taken";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("no-such-ca.crt"), std::string::npos) << e.what();
    }
    auto mismatched = signed_in("x");
    mismatched.key_file = dir() + "/tls/stranger.key";  // not client.crt's key
    EXPECT_THROW(coord::redis::store(url(), {}, mismatched), std::invalid_argument);
    auto half = signed_in("x");
    half.key_file.clear();  // a certificate without its key
    EXPECT_THROW(coord::redis::store(url(), {}, half), std::invalid_argument);
    coord::open_options o;
    o.cert_file = dir() + "/tls/client.crt";
    EXPECT_THROW(coord::open_store<coord::redis::store>(url(), o), coord::bad_store_url);
}

}  // namespace
