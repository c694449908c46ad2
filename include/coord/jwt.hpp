// SPDX-License-Identifier: Apache-2.0
// coord/jwt.hpp: strict JWS/JWT (RFC 7515, 7519) validation and signing with
// keys bound to one algorithm. Target coord::jwt (needs OpenSSL 3).
//
// A signature proves that a token came from the holder of a key and was not
// changed. It does not hide the claims (anyone can read them), it does not
// revoke a stolen copy (use a revocation store, or short exp), and it is worth
// nothing if the validator can be talked into another algorithm or key. So:
//
//   - A key is made for exactly one algorithm, and its type, curve and size
//     are checked then. A token's alg must equal its key's; `none` has no key
//     and is never accepted; an RSA or EC key can never act as an HMAC secret.
//   - Keys come from the application (PEM, JWK, JWKS), never from the token
//     (jwk, jku, x5u, x5c headers are ignored) and never from the network.
//   - Input is read strictly, in this order, and the first failure is the one
//     reason reported: size, three parts, canonical base64url, header JSON
//     (duplicate names refused), alg and key, crit, signature, then the
//     claims. No claim is read before the signature verifies. No exceptions
//     on this path; refusals carry no secret-derived data.
//
//   auto keys = coord::jwt::key_set{coord::jwt::key::hmac(coord::jwt::algorithm::hs256, secret, "k1")};
//   coord::jwt::validation_options opt;
//   opt.issuer = "https://auth.example.com";
//   opt.audiences = {"api"};
//   coord::jwt::validator v(keys, opt);
//   auto c = v.validate(token);
//   if (!c) return reject(c.error());        // e.g. coord::errc::token_expired
//   use(c->sub, c->json);
//
// What the application must still add: short expiries or a revocation store
// (session.hpp) for stolen tokens, TLS (the claims are readable), and key
// distribution and rotation (key_set swapped with set_keys).
//
// The parts, each usable alone: coord/jwt/algorithm.hpp and claims.hpp (no
// OpenSSL), key.hpp and keys.hpp (keys, key sets, JWK/JWKS), openssl.hpp (the
// OpenSSL detail), validator.hpp, signer.hpp.
#pragma once

#include "coord/jwt/algorithm.hpp"
#include "coord/jwt/claims.hpp"
#include "coord/jwt/key.hpp"
#include "coord/jwt/keys.hpp"
#include "coord/jwt/signer.hpp"
#include "coord/jwt/validator.hpp"
