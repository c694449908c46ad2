// SPDX-License-Identifier: Apache-2.0
// coordctl: coord's primitives from the command line, one subcommand each.
//
// Exit codes, for every subcommand:
//   0 success; 3 refused by the primitive's rule (stale fence, lease held);
//   2 bad usage or configuration; 1 infrastructure error (I/O, corrupt state).
//
//   coordctl fence write --store file:PATH --key K --token N --value V
//   coordctl fence read  --store file:PATH --key K
//   coordctl lease acquire --store file:PATH --name N --owner O --ttl MILLISECONDS
//   coordctl lease renew   --store file:PATH --name N --owner O
//   coordctl lease release --store file:PATH --name N --owner O
//   coordctl snowflake next [--node N] [-n COUNT] [--state file:PATH]
//   coordctl snowflake decode ID
//   coordctl segment next --store file:PATH --tag T [-n COUNT]
//   coordctl uuid7 [-n COUNT]
//   coordctl uuid inspect UUID
//   coordctl ledger run --store file:PATH --slot SLOT --effect-file F [--replay-window-hours H]
//   coordctl schedule next --cron EXPR --tz ZONE [--from ISO] [-n COUNT]
#include <algorithm>
#include <charconv>
#include <unistd.h>
#include <chrono>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "coord/fence.hpp"
#include "coord/job_ledger.hpp"
#include "coord/lease.hpp"
#include "coord/segment.hpp"
#include "coord/snowflake.hpp"
#if defined(COORD_HAS_SCHEDULE)
#include "coord/schedule.hpp"
#endif
#if defined(COORD_HAS_SESSION)
#include "coord/jwt.hpp"
#endif
#if defined(COORD_HAS_POSTGRES)
#include "coord/postgres/store.hpp"
#endif
#include "coord/storage/file.hpp"
#include "coord/uuid7.hpp"

namespace {

constexpr int exit_ok = 0, exit_infra = 1, exit_usage = 2, exit_refused = 3;

constexpr const char* usage_text =
    "usage: coordctl <command> [options]\n"
    "  (--store: file:PATH or postgres:CONNINFO)\n"
    "  fence write   --store file:PATH --key K --token N --value V\n"
    "  fence read    --store file:PATH --key K\n"
    "  lease acquire --store file:PATH --name N --owner O --ttl MILLISECONDS\n"
    "  lease renew   --store file:PATH --name N --owner O\n"
    "  lease release --store file:PATH --name N --owner O\n"
    "  snowflake next [--node N] [-n COUNT] [--state file:PATH]\n"
    "                (without --state, IDs are unique only within one invocation)\n"
    "  snowflake decode ID\n"
    "  segment next --store file:PATH --tag T [-n COUNT]\n"
    "  uuid7 [-n COUNT]\n"
    "  uuid inspect UUID\n"
    "  ledger run --store file:PATH --slot SLOT --effect-file F [--replay-window-hours H]\n"
    "                (the effect appends the line SLOT to F)\n"
    "  schedule next --cron EXPR --tz ZONE [--from YYYY-MM-DDTHH:MM[:SS]Z] [-n COUNT]\n"
    "  jwt verify (--key PEM_FILE --alg ALG | --secret-file FILE --alg ALG | --jwks FILE)\n"
    "             [--iss ISS] [--aud AUD] [--leeway SECONDS]   (token on standard input)\n"
    "  jwt sign (--key PEM_FILE | --secret-file FILE) --alg ALG [--kid KID]   (claims JSON on standard input)\n"
    "                (a secret file's one trailing newline is not part of the secret)\n"
    "exit codes: 0 ok, 1 infrastructure error, 2 bad usage, 3 refused by the primitive's rule\n";

/// A usage or configuration mistake: exit 2 with the message.
struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// `--name value` options of one subcommand, checked against what it accepts.
class options {
public:
    options(const std::vector<std::string_view>& args, std::set<std::string_view> allowed) {
        for (std::size_t i = 0; i < args.size(); ++i) {
            const auto a = args[i];
            // "--name value", and "-n value" for single-letter options.
            const auto name = a.substr(0, 2) == "--" ? a.substr(2) : a.size() == 2 && a[0] == '-' ? a.substr(1) : "";
            if (name.empty() || !allowed.count(name)) throw usage_error("unknown option: " + std::string(a));
            if (i + 1 >= args.size()) throw usage_error("option needs a value: " + std::string(a));
            values_[std::string(name)] = std::string(args[++i]);
        }
    }
    bool has(const std::string& name) const { return values_.count(name) != 0; }
    const std::string& required(const std::string& name) const {
        auto it = values_.find(name);
        if (it == values_.end()) throw usage_error("missing option --" + name);
        return it->second;
    }
    std::uint64_t number(const std::string& name) const {
        const auto& s = required(name);
        std::uint64_t v = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc{} || p != s.data() + s.size())
            throw usage_error("--" + name + " must be a non-negative integer, got '" + s + "'");
        return v;
    }

private:
    std::map<std::string, std::string> values_;
};

int infra(const coord::file_store& s, std::error_code ec) {
    std::fprintf(stderr, "error: %s: %s\n", s.path().c_str(), ec.message().c_str());
    return exit_infra;
}

#if defined(COORD_HAS_POSTGRES)
int infra(const coord::postgres::store&, std::error_code ec) {
    std::fprintf(stderr, "error: postgres: %s: %s\n", ec.message().c_str(), coord::postgres::last_error().c_str());
    return exit_infra;
}
#endif

/// Opens the store named by --store (file:PATH, or postgres:CONNINFO where
/// coordctl was built with coord::postgres) and calls f(store).
template <class F>
int with_store(const options& o, F&& f) {
    const auto& spec = o.required("store");
    if (spec.rfind("file:", 0) == 0 && spec.size() > 5) {
        coord::file_store store(spec.substr(5));
        return f(store);
    }
#if defined(COORD_HAS_POSTGRES)
    if (spec.rfind("postgres:", 0) == 0) {
        coord::postgres::store store(spec.substr(9));
        return f(store);
    }
    throw usage_error("--store must be file:PATH or postgres:CONNINFO, got '" + spec + "'");
#else
    throw usage_error("--store must be file:PATH (this coordctl has no coord::postgres), got '" + spec + "'");
#endif
}

int fence_command(std::string_view verb, const std::vector<std::string_view>& args) {
    if (verb == "write") {
        options o(args, {"store", "key", "token", "value"});
        const auto token = o.number("token");
        return with_store(o, [&](auto& store) {
            coord::basic_keyed_fenced_resource res{store};
            auto r = res.write(o.required("key"), token, o.required("value"));
            if (r) {
                std::puts("accepted");
                return exit_ok;
            }
            if (r.error() == coord::errc::stale_fence) {
                std::printf("rejected: stale fence (highest %llu)\n", static_cast<unsigned long long>(r.error().highest));
                return exit_refused;
            }
            return infra(store, r.error().code);
        });
    }
    if (verb == "read") {
        options o(args, {"store", "key"});
        return with_store(o, [&](auto& store) {
            coord::basic_keyed_fenced_resource res{store};
            auto r = res.read(o.required("key"));
            if (!r) return infra(store, r.error());
            std::printf("fence=%llu value=%s\n", static_cast<unsigned long long>(r->fence), r->value.c_str());
            return exit_ok;
        });
    }
    throw usage_error("unknown fence command: " + std::string(verb));
}

template <class Store>
int lease_refusal(const Store& store, const coord::lease_error& e) {
    if (e == coord::errc::lease_held) {
        std::printf("held by %s\n", e.holder.c_str());
        return exit_refused;
    }
    if (e == coord::errc::not_lease_holder) {
        std::puts("not the holder");
        return exit_refused;
    }
    if (e == coord::errc::lease_expired) {
        std::puts("expired");
        return exit_refused;
    }
    return infra(store, e.code);
}

int lease_command(std::string_view verb, const std::vector<std::string_view>& args) {
    if (verb == "acquire") {
        options o(args, {"store", "name", "owner", "ttl"});
        const auto ttl = o.number("ttl");
        if (ttl == 0 || ttl > 100ull * 365 * 24 * 3600 * 1000) throw usage_error("--ttl must be 1 ms to 100 years");
        const auto& name = o.required("name");
        const auto& owner = o.required("owner");
        if (name.empty() || owner.empty()) throw usage_error("--name and --owner must not be empty");
        return with_store(o, [&](auto& store) {
            coord::basic_lease_manager leases{store};
            auto r = leases.acquire(name, owner, std::chrono::milliseconds(ttl));
            if (!r) return lease_refusal(store, r.error());
            std::printf("token=%llu\n", static_cast<unsigned long long>(r->token));
            return exit_ok;
        });
    }
    if (verb == "renew" || verb == "release") {
        options o(args, {"store", "name", "owner"});
        const auto& name = o.required("name");
        const auto& owner = o.required("owner");
        if (name.empty() || owner.empty()) throw usage_error("--name and --owner must not be empty");
        return with_store(o, [&](auto& store) {
            coord::basic_lease_manager leases{store};
            if (verb == "release") {
                auto r = leases.release(name, owner);
                if (!r) return lease_refusal(store, r.error());
                std::puts("released");
                return exit_ok;
            }
            auto r = leases.renew(name, owner);
            if (!r) return lease_refusal(store, r.error());
            std::printf("renewed token=%llu\n", static_cast<unsigned long long>(r->token));
            return exit_ok;
        });
    }
    throw usage_error("unknown lease command: " + std::string(verb));
}

template <class Store>
int snowflake_next(Store& store, std::uint64_t node, std::uint64_t count) {
    coord::snowflake_options options;
    options.node = node;
    coord::basic_snowflake<coord::default_layout, coord::system_clock, Store> ids{store, options};
    std::string out;
    for (std::uint64_t i = 0; i < count; ++i) {
        auto id = ids.next();
        if (!id) {
            std::fputs(out.c_str(), stdout);
            if (id.error() == coord::errc::lease_held) {
                std::printf("node %llu is held by another generator\n", static_cast<unsigned long long>(node));
                return exit_refused;
            }
            for (auto rule : {coord::errc::clock_rollback, coord::errc::sequence_exhausted, coord::errc::time_exhausted,
                              coord::errc::lease_lost, coord::errc::stale_fence})
                if (id.error() == rule) {
                    std::printf("refused: %s\n", id.error().message().c_str());
                    return exit_refused;
                }
            std::fprintf(stderr, "error: %s\n", id.error().message().c_str());
            return exit_infra;
        }
        out += std::to_string(*id);
        out += '\n';
    }
    std::fputs(out.c_str(), stdout);
    return exit_ok;
}

int snowflake_command(std::string_view verb, const std::vector<std::string_view>& args) {
    if (verb == "next") {
        options o(args, {"node", "n", "state"});
        const auto node = o.has("node") ? o.number("node") : 0;
        if (node > coord::default_layout::max_node)
            throw usage_error("--node must be 0.." + std::to_string(coord::default_layout::max_node));
        const auto count = o.has("n") ? o.number("n") : 1;
        if (count < 1 || count > 10'000'000) throw usage_error("-n must be 1..10000000");
        if (!o.has("state")) {
            coord::memory_store store;
            return snowflake_next(store, node, count);
        }
        const auto& spec = o.required("state");
        if (spec.rfind("file:", 0) != 0 || spec.size() == 5)
            throw usage_error("--state must be file:PATH, got '" + spec + "'");
        coord::file_store store{spec.substr(5)};
        return snowflake_next(store, node, count);
    }
    if (verb == "decode") {
        if (args.size() != 1) throw usage_error("snowflake decode takes one ID");
        auto id = coord::default_layout::parse(args[0]);
        if (!id) throw usage_error("not a Snowflake ID of the default layout: '" + std::string(args[0]) + "'");
        const auto p = coord::default_layout::decode(*id);
        std::printf("time=%s node=%llu seq=%llu\n", coord::format_utc(p.time).c_str(),
                    static_cast<unsigned long long>(p.node), static_cast<unsigned long long>(p.sequence));
        return exit_ok;
    }
    throw usage_error("unknown snowflake command: " + std::string(verb));
}

int segment_command(std::string_view verb, const std::vector<std::string_view>& args) {
    if (verb != "next") throw usage_error("unknown segment command: " + std::string(verb));
    options o(args, {"store", "tag", "n"});
    const auto& tag = o.required("tag");
    if (tag.empty()) throw usage_error("--tag must not be empty");
    const auto count = o.has("n") ? o.number("n") : 1;
    if (count < 1 || count > 10'000'000) throw usage_error("-n must be 1..10000000");
    return with_store(o, [&](auto& store) {
        // One invocation: ask for about what it will use, so the hole it leaves is small.
        coord::segment_options opt;
        opt.min_step = 1;
        opt.initial_step = count;
        opt.max_step = std::max<std::uint64_t>(count, 1000);
        coord::basic_segment_generator<std::remove_reference_t<decltype(store)>> gen{store, opt};
        auto h = gen.tag(tag);
        std::string out;
        for (std::uint64_t i = 0; i < count;) {
            auto id = h.next();
            if (!id) {
                if (id.error() == coord::errc::allocator_unavailable && gen.stats(tag).last_error == std::error_code{}) {
                    gen.quiesce();  // the prefetch is in flight, not failing
                    continue;
                }
                std::fputs(out.c_str(), stdout);
                if (id.error() == coord::errc::range_exhausted) {
                    std::puts("refused: ID range exhausted");
                    return exit_refused;
                }
                const auto cause = gen.stats(tag).last_error;
                return infra(store, cause ? cause : id.error());
            }
            out += std::to_string(*id);
            out += '\n';
            ++i;
        }
        std::fputs(out.c_str(), stdout);
        return exit_ok;
    });
}

int uuid7_command(const std::vector<std::string_view>& args) {
    options o(args, {"n"});
    const auto count = o.has("n") ? o.number("n") : 1;
    if (count < 1 || count > 10'000'000) throw usage_error("-n must be 1..10000000");
    coord::uuid7_generator gen;
    std::string out;
    char text[37] = {};
    for (std::uint64_t i = 0; i < count; ++i) {
        auto u = gen.next();
        if (!u) {
            std::fputs(out.c_str(), stdout);
            std::printf("refused: %s\n", u.error().message().c_str());
            return exit_refused;
        }
        u->to_chars(text);
        out.append(text, 36);
        out += '\n';
    }
    std::fputs(out.c_str(), stdout);
    return exit_ok;
}

int uuid_command(std::string_view verb, const std::vector<std::string_view>& args) {
    if (verb != "inspect") throw usage_error("unknown uuid command: " + std::string(verb));
    if (args.size() != 1) throw usage_error("uuid inspect takes one UUID");
    auto u = coord::uuid::parse(args[0]);
    if (!u) throw usage_error("not a UUID: '" + std::string(args[0]) + "'");
    const char* variant = "future";
    switch (u->variant()) {
    case coord::uuid::variant_kind::ncs: variant = "ncs"; break;
    case coord::uuid::variant_kind::rfc9562: variant = "rfc9562"; break;
    case coord::uuid::variant_kind::microsoft: variant = "microsoft"; break;
    case coord::uuid::variant_kind::future: break;
    }
    std::printf("version=%d variant=%s", u->version(), variant);
    if (auto t = u->time()) std::printf(" time=%s", coord::format_utc(*t).c_str());
    std::printf("\n");
    return exit_ok;
}

int ledger_command(std::string_view verb, const std::vector<std::string_view>& args) {
    if (verb != "run") throw usage_error("unknown ledger command: " + std::string(verb));
    options o(args, {"store", "slot", "effect-file", "replay-window-hours"});
    auto slot = coord::slot::parse(o.required("slot"));
    if (!slot) throw usage_error("--slot must be job@YYYY-MM-DDTHH:MM[:SS]Z, got '" + o.required("slot") + "'");
    const auto& effect_file = o.required("effect-file");
    coord::ledger_options opt;
    if (o.has("replay-window-hours")) {
        const auto h = o.number("replay-window-hours");
        if (h < 1 || h > 24 * 366 * 10) throw usage_error("--replay-window-hours must be 1..87840");
        opt.replay_window = std::chrono::hours(h);
        opt.retention = opt.replay_window + std::chrono::hours(24);
    }
    return with_store(o, [&](auto& store) {
        coord::basic_job_ledger<std::remove_reference_t<decltype(store)>> ledger{store, opt};
        const auto worker = "coordctl-" + std::to_string(::getpid());
        auto r = ledger.run(*slot, worker, "", [&](const coord::ledger_context&) {
            std::FILE* f = std::fopen(effect_file.c_str(), "a");
            if (!f) throw std::runtime_error("cannot open " + effect_file);
            const auto line = slot->to_string() + "\n";
            const bool ok = std::fputs(line.c_str(), f) >= 0 && std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
            std::fclose(f);
            if (!ok) throw std::runtime_error("cannot write " + effect_file);
            return std::string("appended");
        });
        if (!r) return infra(store, r.error());
        switch (r->kind) {
        case coord::run_outcome::applied: std::puts("applied"); return exit_ok;
        case coord::run_outcome::replayed: std::puts("replayed"); return exit_ok;
        case coord::run_outcome::in_progress: std::puts("in progress"); return exit_refused;
        case coord::run_outcome::stale_fence: std::puts("stale fence"); return exit_refused;
        case coord::run_outcome::payload_mismatch: std::puts("payload mismatch"); return exit_refused;
        case coord::run_outcome::expired: std::puts("expired"); return exit_refused;
        }
        return exit_infra;
    });
}

int schedule_command(std::string_view verb, const std::vector<std::string_view>& args) {
#if defined(COORD_HAS_SCHEDULE)
    if (verb != "next") throw usage_error("unknown schedule command: " + std::string(verb));
    options o(args, {"cron", "tz", "from", "n"});
    const auto count = o.has("n") ? o.number("n") : 1;
    if (count < 1 || count > 100'000) throw usage_error("-n must be 1..100000");
    auto sched = coord::schedule::make("schedule", o.required("cron"), o.required("tz"));
    if (!sched) throw usage_error(sched.error().message);
    auto from = std::chrono::floor<std::chrono::seconds>(coord::system_clock{}.now());
    if (o.has("from")) {
        auto t = coord::slot::parse("from@" + o.required("from"));
        if (!t) throw usage_error("--from must be YYYY-MM-DDTHH:MM[:SS]Z, got '" + o.required("from") + "'");
        from = std::chrono::floor<std::chrono::seconds>(t->scheduled()) - std::chrono::seconds{1};
    }
    for (std::uint64_t i = 0; i < count; ++i) {
        auto f = sched->next_after(from);
        if (!f) {
            std::puts("no further fire time within 8 years");
            return i == 0 ? exit_refused : exit_ok;
        }
        std::printf("%s local=%s offset=%s\n", coord::format_utc(f->which.scheduled()).c_str(), f->local_time.c_str(),
                    f->offset_text().c_str());
        from = f->utc;
    }
    return exit_ok;
#else
    (void)verb;
    (void)args;
    throw usage_error("coordctl was built without coord::schedule (install libhowardhinnant-date-dev)");
#endif
}

#if defined(COORD_HAS_SESSION)
std::string read_file(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw usage_error("cannot read " + path + ": " + std::strerror(errno));
    std::string out;
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    std::fclose(f);
    return out;
}

std::string read_stdin() {
    std::string out;
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) out.append(buf, n);
    return out;
}

coord::jwt::algorithm parse_alg(const options& o) {
    const auto alg = coord::jwt::algorithm_from_name(o.required("alg"));
    if (!alg) throw usage_error("--alg must be HS256/384/512, RS256/384/512, PS256/384/512, ES256/384/512 or EdDSA");
    return *alg;
}

std::string secret_from(const options& o) {
    std::string secret = read_file(o.required("secret-file"));
    if (!secret.empty() && secret.back() == '\n') secret.pop_back();
    return secret;
}

int jwt_command(std::string_view verb, const std::vector<std::string_view>& args) {
    using namespace coord::jwt;
    if (verb == "verify") {
        options o(args, {"key", "secret-file", "jwks", "alg", "iss", "aud", "leeway"});
        if (o.has("key") + o.has("secret-file") + o.has("jwks") != 1)
            throw usage_error("give exactly one of --key, --secret-file, --jwks");
        key_set keys;
        if (o.has("jwks")) {
            auto set = parse_jwks(read_file(o.required("jwks")));
            if (!set) throw usage_error("--jwks: " + set.error().detail);
            keys = std::move(*set);
        } else if (o.has("key")) {
            auto k = key::try_from_pem(parse_alg(o), read_file(o.required("key")));
            if (!k) throw usage_error("--key: " + k.error().detail);
            keys.add(std::move(*k));
        } else {
            auto k = key::try_hmac(parse_alg(o), secret_from(o));
            if (!k) throw usage_error("--secret-file: " + k.error().detail);
            keys.add(std::move(*k));
        }
        validation_options opt;
        if (o.has("iss")) opt.issuer = o.required("iss");
        if (o.has("aud")) opt.audiences = {o.required("aud")};
        if (o.has("leeway")) {
            const auto leeway = o.number("leeway");
            if (leeway > 86400) throw usage_error("--leeway must be 0..86400 seconds");
            opt.leeway = std::chrono::seconds(leeway);
        }
        std::string token = read_stdin();
        while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
        validator v(std::move(keys), opt);
        auto c = v.validate(token);
        if (!c) {
            std::printf("rejected: %s\n", c.error().message().c_str());
            return exit_refused;
        }
        std::printf("%.*s\n", static_cast<int>(c->json().size()), c->json().data());
        return exit_ok;
    }
    if (verb == "sign") {
        options o(args, {"key", "secret-file", "alg", "kid"});
        if (o.has("key") == o.has("secret-file")) throw usage_error("give exactly one of --key, --secret-file");
        const auto alg = parse_alg(o);
        const std::string kid = o.has("kid") ? o.required("kid") : std::string();
        auto k = o.has("key") ? key::try_from_pem(alg, read_file(o.required("key")), kid)
                              : key::try_hmac(alg, secret_from(o), kid);
        if (!k) throw usage_error(k.error().detail);
        if (!k->can_sign()) throw usage_error("--key must be a private key to sign");
        auto token = signer(*k).sign(read_stdin());
        if (!token) {
            std::printf("rejected: claims are not one JSON object (%s)\n", token.error().message().c_str());
            return exit_refused;
        }
        std::printf("%s\n", token->c_str());
        return exit_ok;
    }
    throw usage_error("unknown jwt command: " + std::string(verb));
}
#endif

int run(const std::vector<std::string_view>& argv) {
    if (!argv.empty() && argv[0] == "uuid7") return uuid7_command({argv.begin() + 1, argv.end()});
    if (argv.size() < 2) throw usage_error("missing command");
    const auto primitive = argv[0];
    const auto verb = argv[1];
    const std::vector<std::string_view> rest(argv.begin() + 2, argv.end());
    if (primitive == "fence") return fence_command(verb, rest);
    if (primitive == "lease") return lease_command(verb, rest);
    if (primitive == "snowflake") return snowflake_command(verb, rest);
    if (primitive == "segment") return segment_command(verb, rest);
    if (primitive == "uuid") return uuid_command(verb, rest);
    if (primitive == "ledger") return ledger_command(verb, rest);
    if (primitive == "schedule") return schedule_command(verb, rest);
#if defined(COORD_HAS_SESSION)
    if (primitive == "jwt") return jwt_command(verb, rest);
#else
    if (primitive == "jwt") throw usage_error("coordctl was built without coord::session (install libssl-dev)");
#endif
    throw usage_error("unknown command: " + std::string(primitive));
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string_view> args(argv + 1, argv + argc);
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
        std::fputs(usage_text, stdout);
        return exit_ok;
    }
    try {
        return run(args);
    } catch (const usage_error& e) {
        std::fprintf(stderr, "coordctl: %s\n%s", e.what(), usage_text);
        return exit_usage;
    } catch (const coord::store_error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return exit_infra;
    } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "coordctl: %s\n", e.what());
        return exit_usage;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return exit_infra;
    }
}
