// SPDX-License-Identifier: Apache-2.0
// coord on an etcd that takes TLS only, wants a client certificate its CA
// signed and has its authentication on (tests/etcd/etcd.sh start ... secure,
// fixture EtcdSecure: users coord (read and write on coord/...) and reader
// (read only)): signed in as coord every call works; a token etcd stops
// taking (the user's password was set) is replaced before the request is sent
// again, the caller sees nothing; credentials, rights and certificates etcd
// refuses are errc::not_authorized or errc::tls_failed (condition
// not_authorized: a configuration to fix), nothing applied, the password in
// no message.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "coord/etcd/store.hpp"
#include "etcd/etcd_support.hpp"

namespace {

using namespace std::chrono_literals;

std::string dir() { return COORD_ETCD_SECURE_DIR; }
std::string password(const std::string& user) {
    std::ifstream in(dir() + "/" + user + ".password");
    std::string p;
    std::getline(in, p);
    return p;
}

// Options signed in as `user`, with the test CA and the client certificate
// (each piece replaceable for the refusals).
coord::etcd::options signed_in(const std::string& prefix, const std::string& user = "coord") {
    coord::etcd::options o;
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

// Under coord/, where the role of user coord reaches.
std::string fresh_prefix() { return "coord/" + coord::test::etcd_fresh_prefix(); }

std::string url() { return coord::test::env_or_throw("COORD_ETCD_SECURE_URL", "EtcdSecure.start"); }

TEST(EtcdSecure, SignedInWithAClientCertificateEveryCallWorks) {
    coord::etcd::store s(url(), {}, signed_in(fresh_prefix()));
    coord::test::etcd_init(s);
    ASSERT_TRUE(s.fence_write("f", 7, "v"));
    auto r = s.fence_read("f");
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->value, "v");
    auto a = s.lease_acquire("n", "A", 30s);
    ASSERT_TRUE(a) << a.error().code.message();
    EXPECT_TRUE(s.lease_release("n", "A", a->token));
}

TEST(EtcdSecure, ATokenEtcdNoLongerTakesIsReplacedAndTheCallGoesThrough) {
    coord::etcd::store s(url(), {}, signed_in(fresh_prefix()));
    coord::test::etcd_init(s);
    ASSERT_TRUE(s.fence_write("f", 5, "before"));
    // coord's password is set again (the same one): etcd drops the token
    // this store signed in with ("invalid auth token" from now on).
    ASSERT_EQ(std::system((std::string(COORD_ETCD_SCRIPT) + " touch-password '" + dir() + "' coord").c_str()), 0);
    auto w = s.fence_write("f", 6, "after");
    ASSERT_TRUE(w) << w.error().code.message();
    auto a = s.lease_acquire("n", "A", 30s);
    ASSERT_TRUE(a) << a.error().code.message();
    EXPECT_TRUE(s.lease_release("n", "A", a->token));
    auto r = s.fence_read("f");
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->value, "after");
}

// A refused write: the error's code and condition, the password nowhere.
// (Opening the store reads its identity: a refusal may come from there, as
// store_error, before the write.)
void expect_refused(coord::etcd::options o, coord::etcd::errc code, const std::string& prefix) {
    const std::string secret = password("coord");
    std::error_code got;
    std::string words;
    try {
        coord::etcd::store s(url(), {}, std::move(o));
        auto w = s.fence_write("f", 99, "refused");
        ASSERT_FALSE(w);
        got = w.error().code;
        words = w.error().code.message();
    } catch (const coord::store_error& e) {
        got = e.code();
        words = e.what();
    }
    EXPECT_EQ(got, code) << words;
    EXPECT_EQ(got, coord::condition::not_authorized) << words;
    EXPECT_NE(got, coord::condition::outcome_unknown) << words;
    EXPECT_EQ(words.find(secret), std::string::npos) << "the password is in the message";
    // Nothing applied: coord still reads what it wrote.
    coord::etcd::store ok(url(), {}, signed_in(prefix));
    auto r = ok.fence_read("f");
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->fence, 7u);
}

TEST(EtcdSecure, CredentialsRightsAndCertificatesEtcdRefusesAreConfigurationErrors) {
    const std::string prefix = fresh_prefix();
    {
        coord::etcd::store s(url(), {}, signed_in(prefix));
        coord::test::etcd_init(s);
        ASSERT_TRUE(s.fence_write("f", 7, "v"));
    }
    using coord::etcd::errc;
    auto wrong_password = signed_in(prefix);
    wrong_password.password = "not-" + wrong_password.password;
    expect_refused(wrong_password, errc::not_authorized, prefix);
    expect_refused(signed_in(prefix, ""), errc::not_authorized, prefix);        // no credentials
    expect_refused(signed_in(prefix, "reader"), errc::not_authorized, prefix);  // read only
    auto other_ca = signed_in(prefix);
    other_ca.ca_file = dir() + "/tls/other-ca.crt";
    expect_refused(other_ca, errc::tls_failed, prefix);
    auto no_certificate = signed_in(prefix);
    no_certificate.cert_file.clear();
    no_certificate.key_file.clear();
    expect_refused(no_certificate, errc::tls_failed, prefix);
    auto stranger = signed_in(prefix);
    stranger.cert_file = dir() + "/tls/stranger.crt";
    stranger.key_file = dir() + "/tls/stranger.key";
    expect_refused(stranger, errc::tls_failed, prefix);
    // The reader may read.
    coord::etcd::store reader(url(), {}, signed_in(prefix, "reader"));
    auto r = reader.fence_read("f");
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->value, "v");
}

TEST(EtcdSecure, TlsOptionsWithoutAnEtcdsUrlAreRefused) {
    auto o = signed_in("coord/x");
    const std::string plain = "etcd://" + url().substr(8);
    EXPECT_THROW(coord::etcd::store(plain, {}, o), std::invalid_argument);
    o.key_file.clear();
    EXPECT_THROW(coord::etcd::store(url(), {}, o), std::invalid_argument);  // a certificate without its key
    auto p = signed_in("coord/x");
    p.password.clear();
    EXPECT_THROW(coord::etcd::store(url(), {}, p), std::invalid_argument);  // a user without a password
}

}  // namespace
