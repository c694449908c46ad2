// SPDX-License-Identifier: Apache-2.0
// The strict JSON reader behind tokens and JWKs (coord/detail/json.hpp),
// checked against nlohmann/json on the same inputs: every text nlohmann
// refuses, coord refuses; every text coord accepts, nlohmann accepts with the
// same members. coord is stricter on purpose (duplicate names, lone
// surrogates, depth), and those cases are asserted one by one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

#include "coord/detail/json.hpp"

namespace {

namespace cj = coord::detail::json;

bool coord_accepts(std::string_view text, std::size_t depth = 16) {
    cj::reader r(text, depth);
    cj::value v;
    return r.read_value(v);
}

bool nlohmann_accepts(std::string_view text) { return nlohmann::json::accept(text); }

TEST(Json, AgreesWithNlohmannOnACorpus) {
    const std::vector<std::string> corpus = {
        "{}", "[]", "0", "-0", "1.5e10", "-1.25E-3", "01", "1.", ".5", "1e", "+1", "--1", "NaN", "Infinity",
        "true", "false", "null", "tru", "nul", "\"\"", "\"a\\nb\"", "\"\\u0041\"", "\"\\u00e9\"", "\"\\uD83D\\uDE00\"",
        "\"\\x41\"", "\"\\\"", "\"tab\there\"", "\"a", "{\"a\":1,}", "[1,]", "[,1]", "{\"a\" 1}", "{a:1}",
        "{\"a\":[1,2,{\"b\":null}]}", " \t\n{ \"k\" : [ true , false ] } \r\n", "{\"a\":1}x", "[1 2]",
        "\"\xc3\xa9\"", "\"\xe2\x82\xac\"", "\"\xf0\x9f\x98\x80\"", "\"\xc0\xaf\"", "\"\xe0\x80\xaf\"", "\"\xed\xa0\x80\"",
        "\"\xf4\x90\x80\x80\"", "\"\xff\"", "\"\x80\"", "\"\xc3\"", "123456789012345678901234567890", "1e400",
        "-9223372036854775808", "9223372036854775808", "[[[[[]]]]]", "{\"\":0}", "", " ", "{\"a\":\"\x01\"}",
    };
    for (const auto& text : corpus) {
        SCOPED_TRACE(text);
        if (!nlohmann_accepts(text)) {
            EXPECT_FALSE(coord_accepts(text));
        } else {
            EXPECT_TRUE(coord_accepts(text)) << "nlohmann accepts, coord refuses";
        }
    }
}

TEST(Json, StricterThanRfc8259WhereJoseNeedsIt) {
    EXPECT_FALSE(coord_accepts(R"({"a":1,"a":2})"));
    EXPECT_FALSE(coord_accepts(R"({"a":1,"\u0061":2})"));
    EXPECT_FALSE(coord_accepts(R"({"x":{"b":1,"b":1}})"));
    EXPECT_FALSE(coord_accepts(R"(["\ud800"])"));
    EXPECT_FALSE(coord_accepts(R"(["\udc00"])"));
    EXPECT_FALSE(coord_accepts(R"(["\ud800\u0041"])"));
    EXPECT_TRUE(coord_accepts(std::string(16, '[') + std::string(16, ']')));
    EXPECT_FALSE(coord_accepts(std::string(17, '[') + std::string(17, ']')));
    // Many members: the duplicate check switches to a set past 16.
    std::string many = "{";
    for (int i = 0; i < 100; ++i) many += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
    EXPECT_TRUE(coord_accepts(many + "\"end\":0}"));
    EXPECT_FALSE(coord_accepts(many + "\"k\\u0037\":0}"));  // "k7" again, escaped
}

TEST(Json, ValuesAndUnescaping) {
    cj::reader r(R"({"s":"a\u00e9\ud83d\ude00\n","i":-42,"big":18446744073709551616,"f":1.5,"b":true,"n":null,"o":{},"a":[]})", 16);
    std::vector<std::pair<std::string, cj::value>> members;
    ASSERT_TRUE(r.read_object([&](const cj::value& k, const cj::value& v) {
        members.emplace_back(cj::unescape(k), v);
        return true;
    }));
    ASSERT_EQ(members.size(), 8u);
    EXPECT_EQ(cj::unescape(members[0].second), "a\xc3\xa9\xf0\x9f\x98\x80\n");
    EXPECT_EQ(members[1].second.type, cj::kind::integer);
    EXPECT_EQ(members[1].second.integer, -42);
    EXPECT_EQ(members[2].second.type, cj::kind::number);  // beyond int64
    EXPECT_EQ(members[3].second.type, cj::kind::number);
    EXPECT_EQ(members[4].second.type, cj::kind::boolean);
    EXPECT_EQ(members[5].second.type, cj::kind::null);
    EXPECT_EQ(members[6].second.type, cj::kind::object);
    EXPECT_EQ(members[7].second.type, cj::kind::array);
}

// Random mutations of valid documents: coord never accepts what nlohmann refuses.
TEST(Json, RandomMutationsNeverAcceptWhatNlohmannRefuses) {
    const std::vector<std::string> seeds = {
        R"({"iss":"https://a.example","aud":["x","y"],"exp":1700000000,"n":-1.5e3,"t":true,"z":null})",
        R"({"alg":"ES256","kid":"k\u00e9y","crit":["b64"],"b64":false})",
        R"({"keys":[{"kty":"EC","crv":"P-256","x":"abc","y":"def"}]})"};
    std::mt19937_64 rng(12345);
    const std::string alphabet = "{}[]\",:\\/ u0123456789abcdefEe+-.tfnrl\x80\xc3\xff";
    int refused_by_both = 0;
    for (int i = 0; i < 50000; ++i) {
        std::string s = seeds[rng() % seeds.size()];
        const int edits = 1 + static_cast<int>(rng() % 3);
        for (int e = 0; e < edits; ++e) {
            const std::size_t at = rng() % (s.size() + 1);
            switch (rng() % 3) {
            case 0: s.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
            case 1: if (at < s.size()) s.erase(at, 1); break;
            default: if (at < s.size()) s[at] = alphabet[rng() % alphabet.size()]; break;
            }
        }
        const bool mine = coord_accepts(s), theirs = nlohmann_accepts(s);
        if (mine) {
            EXPECT_TRUE(theirs) << s;
        }
        if (!mine && !theirs) ++refused_by_both;
    }
    EXPECT_GT(refused_by_both, 1000);
}

}  // namespace
