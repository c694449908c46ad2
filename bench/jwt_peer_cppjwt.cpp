// SPDX-License-Identifier: Apache-2.0
// BM_Peer_CppJwt_Verify/<alg>: the JWT benchmark tokens through cpp-jwt 1.4 (Debian's
// package), registered into jwt_bench. cpp-jwt 1.4 has no PS* and no EdDSA.
#include <benchmark/benchmark.h>

#include <jwt/jwt.hpp>

#include <string>
#include <string_view>

#include "jwt_fixture.hpp"

namespace {

using coord::bench::fixture;
using coord::bench::get;
using coord::jwt::algorithm;

void BM_Peer_CppJwt_Verify(benchmark::State& state, algorithm alg) {
    const fixture& f = get(alg);
    const std::string& k = alg == algorithm::hs256 ? f.secret : f.public_pem;
    const std::string alg_name(name(alg));
    for (auto _ : state) {
        std::error_code ec;
        auto obj = jwt::decode(f.token, jwt::params::algorithms({alg_name}), ec, jwt::params::secret(k),
                               jwt::params::verify(true), jwt::params::issuer("https://auth.example.com"),
                               jwt::params::aud("api.example.com"));
        if (ec) {
            state.SkipWithError(("cpp-jwt refused the token: " + ec.message()).c_str());
            break;
        }
        benchmark::DoNotOptimize(obj);
    }
    state.SetItemsProcessed(state.iterations());
}

const int registered = [] {
    for (const auto& [label, alg] : {std::pair{"HS256", algorithm::hs256}, std::pair{"RS256", algorithm::rs256},
                                     std::pair{"ES256", algorithm::es256}})
        benchmark::RegisterBenchmark((std::string("BM_Peer_CppJwt_Verify/") + label).c_str(), BM_Peer_CppJwt_Verify, alg);
    return 0;
}();

}  // namespace
