// SPDX-License-Identifier: Apache-2.0
// A tiny program that uses coord::jwt (JWT on OpenSSL) as a consumer would.
#include <coord/jwt.hpp>

#include <string>

int main() {
    using namespace coord::jwt;
    const key k = key::hmac(algorithm::hs256, std::string(32, 's'), "k1");
    auto token = signer(k).sign(R"({"sub":"alice","exp":253402300799})");
    if (!token) return 1;
    validator v(key_set{k}, validation_options{});
    auto c = v.validate(*token);
    return c && c->sub() == "alice" ? 0 : 2;
}
