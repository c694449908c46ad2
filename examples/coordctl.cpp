// SPDX-License-Identifier: Apache-2.0
// coordctl: coord's primitives from the command line, one subcommand each.
//
// Exit codes, for every subcommand:
//   0 success; 3 refused by the primitive's rule (stale fence, lease held);
//   2 bad usage or configuration; 1 infrastructure error (I/O, corrupt state).
//
// S is any store spec: file:PATH, sqlite:PATH, postgres:CONNINFO,
// redis[s]://HOST:PORT[/DB], etcd[s]://HOST:PORT[,...], zookeeper://HOST:PORT[,...][/ROOT];
// every command with a store takes --timeout D. `coordctl --help` is the
// full list; in short:
//
//   coordctl store init --store S --segment-floor N --fence-floor N|now --ledger-floor ISO|now|none
//                       [--reservation-floor ISO|now|none] [--force]
//   coordctl fence write --store S --key K --token N --value V
//   coordctl fence read  --store S --key K
//   coordctl lease acquire --store S --name N [--owner O] --ttl MILLISECONDS [--wait D]
//   coordctl lease renew   --store S --name N --owner O [--token T]
//   coordctl lease hold    --store S --name N --ttl D [--owner O] [--wait D] [--grace D] -- COMMAND [ARGS...]
//   coordctl elect --store S --name N --ttl D [--candidate C] [--grace D] -- COMMAND [ARGS...]
//   coordctl leader --store S --name N [--watch]
//   coordctl lease release --store S --name N --owner O [--token T]
//   coordctl snowflake next [--node N] [-n COUNT] [--state S]
//   coordctl snowflake decode ID
//   coordctl segment next --store S --tag T [-n COUNT]
//   coordctl uuid7 [-n COUNT]
//   coordctl uuid inspect UUID
//   coordctl ledger run --store S --slot SLOT --effect-file F [--replay-window-hours H] [--lease-ttl MS]
//   coordctl ledger claim --store S --slot SLOT --worker W [--lease-ttl MS] [--replay-window-hours H]
//   coordctl session create --store S --user U [--idle-timeout S] [--absolute-timeout S]
//   coordctl session load|revoke --store S --id ID
//   coordctl schedule next --cron EXPR --tz ZONE [--from ISO] [-n COUNT]
//   coordctl cron run --store S --job ID --cron EXPR --tz ZONE [--catch-up D] [--overlap allow|forbid|replace]
//                     [--lease-ttl MS] [--for D] [--stop-grace D] [--max-attempts N] [--max-running N] [--worker W]
//                     [--schedule-version N] [--take-over-from INSTANT|now] -- COMMAND [ARGS...]
//   coordctl cron status --store S --job ID [-n COUNT]
//   coordctl jwt verify|sign ...
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <optional>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "coord/election.hpp"
#include "coord/fence.hpp"
#include "coord/initial_floors.hpp"
#include "coord/job_ledger.hpp"
#include "coord/keeper.hpp"
#include "coord/lease.hpp"
#include "coord/owner.hpp"
#include "coord/segment.hpp"
#include "coord/session.hpp"
#include "coord/snowflake.hpp"
#if defined(COORD_HAS_SCHEDULE)
#include "coord/cron.hpp"
#include "coord/schedule.hpp"
#endif
#if defined(COORD_HAS_SESSION)
#include "coord/jwt.hpp"
#endif
#include "coord/open.hpp"
#include "coord/storage/memory.hpp"
#include "coord/uuid7.hpp"

namespace {

constexpr int exit_ok = 0, exit_infra = 1, exit_usage = 2, exit_refused = 3;

constexpr const char* usage_text =
    "usage: coordctl <command> [options]\n"
    "  (--store: file:PATH, sqlite:PATH, postgres:CONNINFO, redis[s]://HOST:PORT[/DB],\n"
    "   redis[s]+sentinel://HOST:PORT[,...]/MASTER[/DB], etcd[s]://HOST:PORT[,...] or zookeeper://HOST:PORT[,...][/ROOT]\n"
    "   (no sessions on etcd and zookeeper, no ledger on etcd); every command with a store\n"
    "   takes --timeout DURATION, 500ms/90s/15m/2h: each call's bound, the store's default otherwise: file 10s lock\n"
    "   wait, postgres and redis 5s; and the store's credentials: --store-user NAME, the password from\n"
    "   --store-password-file FILE (one line, mode 600) or COORD_STORE_PASSWORD: postgres, redis, etcd, zookeeper\n"
    "   (its digest identity, put in its nodes' ACL); TLS: --store-ca-file, --store-cert-file, --store-key-file\n"
    "   (PEM): rediss:// and etcds:// (a CA or certificate switches redis:// to TLS), postgres: (sslrootcert with\n"
    "   verify-full, sslcert, sslkey))\n"
    "  store init    --store S --segment-floor N --fence-floor N|now --ledger-floor ISO|now|none\n"
    "                [--reservation-floor ISO|now|none] [--force]\n"
    "                (postgres:, redis://, etcd://, zookeeper://: once before first use, and after it lost its data or was\n"
    "                 restored: what needs its data is refused until then; the floors state what it handed out\n"
    "                 before, so nothing is handed out twice: a new store takes 0 0 none; the reservation floor\n"
    "                 defaults to now; refused when initialized unless --force; file:, sqlite:: with --force,\n"
    "                 the recovery of a store refused as gone back; memory needs none; etcd: now is this\n"
    "                 machine's clock, etcd shows none)\n"
    "  fence write   --store S --key K --token N --value V\n"
    "  fence read    --store S --key K\n"
    "  lease acquire --store S --name N [--owner O] --ttl MILLISECONDS [--wait DURATION]\n"
    "                (without --owner: a unique owner, HOST:PID:RANDOM, printed with the token)\n"
    "  lease renew   --store S --name N --owner O [--token T]   (--token: exactly that grant)\n"
    "  lease hold    --store S --name N --ttl D [--owner O] [--wait D] [--grace D] -- COMMAND [ARGS...]\n"
    "                (runs COMMAND while a keeper renews the lease, with COORD_LEASE_NAME, COORD_LEASE_OWNER and\n"
    "                 COORD_FENCE_TOKEN; exits with COMMAND's status; lost: COMMAND's group gets SIGTERM, SIGKILL\n"
    "                 after --grace (default 10s), exit 3; not granted: exit 3, COMMAND not started)\n"
    "  lease release --store S --name N --owner O [--token T]\n"
    "  elect --store S --name N --ttl D [--candidate C] [--grace D] -- COMMAND [ARGS...]\n"
    "                (campaigns until leader, then runs COMMAND while leader, as lease hold)\n"
    "  leader --store S --name N [--watch]   (leader=C token=T, or none; --watch: a line per change)\n"
    "  snowflake next [--node N] [-n COUNT] [--state S]\n"
    "                (--state: any store, where the node's lease and the reserved time live; without it,\n"
    "                 IDs are unique only within one invocation)\n"
    "  snowflake decode ID\n"
    "  segment next --store S --tag T [-n COUNT]\n"
    "  uuid7 [-n COUNT]\n"
    "  uuid inspect UUID\n"
    "  ledger run --store S --slot SLOT --effect-file F [--replay-window-hours H] [--lease-ttl MS]\n"
    "                (the effect appends the line SLOT to F unless F holds it: idempotent per slot)\n"
    "  ledger claim --store S --slot SLOT --worker W [--lease-ttl MS] [--replay-window-hours H]\n"
    "  session create --store S --user U [--idle-timeout S] [--absolute-timeout S]\n"
    "  session load|revoke --store S --id ID\n"
    "  schedule next --cron EXPR --tz ZONE [--from YYYY-MM-DDTHH:MM[:SS]Z] [-n COUNT]\n"
    "  cron run --store S --job ID --cron EXPR --tz ZONE [--catch-up D] [--overlap allow|forbid|replace]\n"
    "           [--lease-ttl MS] [--for D] [--stop-grace D] [--max-attempts N] [--max-running N] [--worker W]\n"
    "           [--schedule-version N] [--take-over-from YYYY-MM-DDTHH:MM[:SS]Z|now] -- COMMAND [ARGS...]\n"
    "                (one running claim per slot at a time across every instance on the store, each run with its\n"
    "                 own fence; COMMAND gets COORD_SLOT, COORD_FENCE, COORD_ATTEMPT and COORD_SCHEDULED_AT;\n"
    "                 --worker names this instance (default HOST:PID:RANDOM; a shared name is safe);\n"
    "                 --max-running: jobs run at once by this instance, default 8; a schedule other than the\n"
    "                 job's stored one exits 2 unless --take-over-from; SIGTERM/SIGINT: no new claims)\n"
    "  cron status --store S --job ID [-n COUNT]   (the last COUNT slots: state, worker, attempt, exit, times)\n"
    "  jwt verify (--key PEM_FILE --alg ALG | --secret-file FILE --alg ALG | --jwks FILE)\n"
    "             [--iss ISS] [--aud AUD] [--leeway SECONDS]   (token on standard input)\n"
    "  jwt sign (--key PEM_FILE | --secret-file FILE) --alg ALG [--kid KID]   (claims JSON on standard input)\n"
    "                (a secret file's one trailing newline is not part of the secret)\n"
    "exit codes: 0 ok, 1 infrastructure error, 2 bad usage, 3 refused by the primitive's rule\n";

/// A usage or configuration mistake: exit 2 with the message.
struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

using coord::detail::printable;

/// A refusal of an ID stream: to standard error (standard output carries
/// only IDs), exit 3.
int refused(const std::string& why) {
    std::fprintf(stderr, "refused: %s\n", why.c_str());
    return exit_refused;
}

/// `--name value` options of one subcommand, checked against what it accepts.
class options {
public:
    /// `flags` take no value (--force).
    options(const std::vector<std::string_view>& args, std::set<std::string_view> allowed,
            const std::set<std::string_view>& flags = {}) {
        // Every command that reaches a store takes --timeout and the store's credentials.
        if (allowed.count("store") || allowed.count("state")) allowed.insert({"timeout", "store-user", "store-password-file", "store-ca-file", "store-cert-file", "store-key-file"});
        for (std::size_t i = 0; i < args.size(); ++i) {
            const auto a = args[i];
            // "--name value", and "-n value" for single-letter options.
            const auto name = a.substr(0, 2) == "--" ? a.substr(2) : a.size() == 2 && a[0] == '-' ? a.substr(1) : "";
            const bool flag = !name.empty() && flags.count(name);
            if (name.empty() || (!allowed.count(name) && !flag)) throw usage_error("unknown option: " + printable(a));
            if (!flag && i + 1 >= args.size()) throw usage_error("option needs a value: " + printable(a));
            if (!values_.emplace(std::string(name), flag ? std::string() : std::string(args[++i])).second)
                throw usage_error("option given more than once: " + printable(a));
        }
    }
    bool has(const std::string& name) const { return values_.count(name) != 0; }
    const std::string& required(const std::string& name) const {
        auto it = values_.find(name);
        if (it == values_.end()) throw usage_error("missing option --" + name);
        return it->second;
    }
    /// A duration such as 500ms, 90s, 15m or 2h (1 ms to `max`; 0 too when `zero_ok`).
    std::chrono::milliseconds duration(const std::string& name, std::chrono::hours max = std::chrono::hours{24},
                                       bool zero_ok = false) const {
        const auto& s = required(name);
        if (zero_ok && s == "0") return std::chrono::milliseconds{0};
        std::uint64_t v = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        const std::string_view unit(p, static_cast<std::size_t>(s.data() + s.size() - p));
        const std::uint64_t scale = unit == "ms" ? 1 : unit == "s" ? 1000 : unit == "m" ? 60'000 : unit == "h" ? 3'600'000 : 0;
        const std::uint64_t max_ms = static_cast<std::uint64_t>(max.count()) * 3'600'000;
        if (ec != std::errc{} || p == s.data() || scale == 0)
            throw usage_error("--" + name + " must be a duration like 500ms, 90s, 15m or 2h, got '" + printable(s) + "'");
        if (v == 0 || v > max_ms / scale)
            throw usage_error("--" + name + " must be " + (zero_ok ? "0" : "1ms") + " to " + std::to_string(max.count()) +
                              "h, got '" + printable(s) + "'");
        return std::chrono::milliseconds{static_cast<std::int64_t>(v * scale)};
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

/// A name given on the command line (key, lease name, owner, tag, user,
/// worker): non-empty, valid UTF-8 without NUL, the same on every store.
const std::string& name_option(const options& o, const std::string& option) {
    const auto& v = o.required(option);
    if (v.empty()) throw usage_error("--" + option + " must not be empty");
    if (v.size() > coord::max_name_size)
        throw usage_error("--" + option + " must be at most 1024 bytes, got " + std::to_string(v.size()));
    if (!coord::detail::valid_name_text(v)) throw usage_error("--" + option + " must be valid UTF-8 text, got '" + printable(v) + "'");
    return v;
}

/// The exit code of an error, by its condition: the rule refused (3), the
/// input can never be accepted (2), anything else (1: unavailable, outcome
/// unknown, corrupt state).
int exit_for(std::error_code ec) {
    if (ec == coord::condition::refused) return exit_refused;
    if (ec == coord::condition::bad_input || ec == coord::condition::not_authorized) return exit_usage;  // configuration
    return exit_infra;
}

/// What an infrastructure error lets the caller assume.
const char* assumption(const coord::error& ec) {
    if (ec == coord::condition::outcome_unknown) return " (the outcome is unknown: read back before retrying)";
    if (ec == coord::condition::unavailable) return " (not applied: retrying later may succeed)";
    if (ec == coord::condition::not_authorized)
        return " (not applied: the store refused these credentials or their rights; fix the configuration)";
    return "";
}

int infra(const coord::file_store& s, const coord::error& ec) {
    std::fprintf(stderr, "error: %s: %s%s\n", s.path().c_str(), ec.message().c_str(), assumption(ec));
    return exit_for(ec);
}

#if defined(COORD_HAS_SQLITE)
int infra(const coord::sqlite::store& s, const coord::error& ec) {
    std::fprintf(stderr, "error: %s: %s%s\n", s.path().c_str(), ec.message().c_str(), assumption(ec));
    return exit_for(ec);
}
#endif

#if defined(COORD_HAS_POSTGRES)
int infra(const coord::postgres::store&, const coord::error& ec) {
    std::fprintf(stderr, "error: postgres: %s%s\n", ec.message().c_str(), assumption(ec));
    return exit_for(ec);
}
#endif

#if defined(COORD_HAS_REDIS)
int infra(const coord::redis::store& s, const coord::error& ec) {
    std::fprintf(stderr, "error: %s: %s%s\n", s.url().c_str(), ec.message().c_str(), assumption(ec));
    return exit_for(ec);
}
#endif

#if defined(COORD_HAS_ZOOKEEPER)
int infra(const coord::zookeeper::store& s, const coord::error& ec) {
    std::fprintf(stderr, "error: %s: %s%s\n", s.url().c_str(), ec.message().c_str(), assumption(ec));
    return exit_for(ec);
}
#endif

#if defined(COORD_HAS_ETCD)
int infra(const coord::etcd::store& s, const coord::error& ec) {
    std::fprintf(stderr, "error: %s: %s%s\n", s.url().c_str(), ec.message().c_str(), assumption(ec));
    return exit_for(ec);
}
#endif

/// Opens the store named by --store (file:PATH, or an engine's scheme where
/// coordctl was built with it) and calls f(store).
template <class F>
int with_store(const options& o, F&& f, const std::string& option = "store") {
    const auto& spec = o.required(option);
    // 0: not given (the store's default). (Not an optional: g++ 12 warns falsely.)
    const std::chrono::milliseconds timeout = o.has("timeout") ? o.duration("timeout") : std::chrono::milliseconds{0};
    coord::open_options how;
    how.timeout = timeout;
    // Credentials: --store-user, and the password from --store-password-file
    // (one line, mode 600) or COORD_STORE_PASSWORD; never an argument (ps
    // shows those). (Not --user: session create's --user is the session's.)
    if (o.has("store-user")) how.user = name_option(o, "store-user");
    if (o.has("store-password-file")) {
        if (auto why = coord::detail::read_secret_file(o.required("store-password-file"), how.password))
            throw usage_error("--store-password-file " + *why);
    } else if (const char* env = std::getenv("COORD_STORE_PASSWORD"); env && *env) {
        how.password = env;
    }
    if (o.has("store-ca-file")) how.ca_file = o.required("store-ca-file");
    if (o.has("store-cert-file")) how.cert_file = o.required("store-cert-file");
    if (o.has("store-key-file")) how.key_file = o.required("store-key-file");
    bool opened = false;
    try {
        return coord::with_store(
            spec,
            [&](auto& store) -> int {
                opened = true;
                return f(store);
            },
            how);
    } catch (const coord::bad_store_url& e) {
        if (opened) throw;
        throw usage_error("--" + option + ": " + e.what());
    }
}

int fence_command(std::string_view verb, const std::vector<std::string_view>& args) {
    if (verb == "write") {
        options o(args, {"store", "key", "token", "value"});
        const auto token = o.number("token");
        const auto& key = name_option(o, "key");
        return with_store(o, [&](auto& store) {
            coord::basic_keyed_fenced_resource res{store};
            auto r = res.write(key, token, o.required("value"));
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
        const auto& key = name_option(o, "key");
        return with_store(o, [&](auto& store) {
            coord::basic_keyed_fenced_resource res{store};
            auto r = res.read(key);
            if (!r) return infra(store, r.error());
            std::printf("fence=%llu value=%s\n", static_cast<unsigned long long>(r->fence), printable(r->value).c_str());
            return exit_ok;
        });
    }
    throw usage_error("unknown fence command: " + printable(verb));
}

template <class Store>
int lease_refusal(const Store& store, const coord::lease_error& e) {
    if (e == coord::errc::lease_held) {
        std::printf("held by %s\n", printable(e.holder).c_str());
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
        options o(args, {"store", "name", "owner", "ttl", "wait"});
        const auto ttl = o.number("ttl");
        if (ttl == 0 || ttl > 100ull * 365 * 24 * 3600 * 1000) throw usage_error("--ttl must be 1 ms to 100 years");
        const auto& name = name_option(o, "name");
        // Without --owner: an owner no other process instance has (printed,
        // for renew and release).
        const bool made_owner = !o.has("owner");
        const std::string owner = made_owner ? coord::unique_owner() : name_option(o, "owner");
        const auto wait = o.has("wait") ? o.duration("wait") : std::chrono::milliseconds{0};
        return with_store(o, [&](auto& store) {
            using Store = std::remove_reference_t<decltype(store)>;
            coord::basic_lease_manager leases{store};
            coord::result<coord::lease, coord::lease_error> r;
            static_assert(coord::lease_queue_store<Store>, "every store coordctl opens has a waiting acquire");
            if (wait.count() > 0) {
                r = leases.acquire(name, owner, std::chrono::milliseconds(ttl), std::chrono::steady_clock::now() + wait);
            } else {
                r = leases.acquire(name, owner, std::chrono::milliseconds(ttl));
            }
            if (!r) return lease_refusal(store, r.error());
            if (made_owner)
                std::printf("token=%llu owner=%s\n", static_cast<unsigned long long>(r->token), printable(owner).c_str());
            else
                std::printf("token=%llu\n", static_cast<unsigned long long>(r->token));
            return exit_ok;
        });
    }
    if (verb == "renew" || verb == "release") {
        // --token: act on exactly that grant (an older grant of the same
        // owner is refused as not the holder's).
        options o(args, {"store", "name", "owner", "token"});
        coord::lease grant;
        grant.name = name_option(o, "name");
        grant.owner = name_option(o, "owner");
        if (o.has("token")) {
            grant.token = o.number("token");
            if (grant.token == 0) throw usage_error("--token must be a granted token (1 or more)");
        }
        return with_store(o, [&](auto& store) {
            coord::basic_lease_manager leases{store};
            if (verb == "release") {
                auto r = grant.token ? leases.release(grant) : leases.release(grant.name, grant.owner);
                if (!r) return lease_refusal(store, r.error());
                std::puts("released");
                return exit_ok;
            }
            auto r = grant.token ? leases.renew(grant) : leases.renew(grant.name, grant.owner);
            if (!r) return lease_refusal(store, r.error());
            std::printf("renewed token=%llu\n", static_cast<unsigned long long>(r->token));
            return exit_ok;
        });
    }
    throw usage_error("unknown lease command: " + printable(verb));
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
            std::fflush(stdout);
            if (id.error() == coord::errc::lease_held || id.error() == coord::errc::lease_lost)
                return refused("node " + std::to_string(node) + " is held by another generator");
            for (auto rule : {coord::errc::clock_rollback, coord::errc::sequence_exhausted, coord::errc::time_exhausted,
                              coord::errc::stale_fence})
                if (id.error() == rule) return refused(id.error().message());
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
        // Any store: the node's lease and the time reservation live there.
        return with_store(
            o, [&](auto& store) { return snowflake_next(store, node, count); }, "state");
    }
    if (verb == "decode") {
        if (args.size() != 1) throw usage_error("snowflake decode takes one ID");
        auto id = coord::default_layout::parse(args[0]);
        if (!id) throw usage_error("not a Snowflake ID of the default layout: '" + printable(args[0]) + "'");
        const auto p = coord::default_layout::decode(*id);
        std::printf("time=%s node=%llu seq=%llu\n", coord::format_utc(p.time).c_str(),
                    static_cast<unsigned long long>(p.node), static_cast<unsigned long long>(p.sequence));
        return exit_ok;
    }
    throw usage_error("unknown snowflake command: " + printable(verb));
}

int segment_command(std::string_view verb, const std::vector<std::string_view>& args) {
    if (verb != "next") throw usage_error("unknown segment command: " + printable(verb));
    options o(args, {"store", "tag", "n"});
    const auto& tag = name_option(o, "tag");
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
                std::fflush(stdout);
                if (id.error() == coord::errc::range_exhausted) return refused("ID range exhausted");
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
            std::fflush(stdout);
            return refused(u.error().message());
        }
        u->to_chars(text);
        out.append(text, 36);
        out += '\n';
    }
    std::fputs(out.c_str(), stdout);
    return exit_ok;
}

int uuid_command(std::string_view verb, const std::vector<std::string_view>& args) {
    if (verb != "inspect") throw usage_error("unknown uuid command: " + printable(verb));
    if (args.size() != 1) throw usage_error("uuid inspect takes one UUID");
    auto u = coord::uuid::parse(args[0]);
    if (!u) throw usage_error("not a UUID: '" + printable(args[0]) + "'");
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

/// The ledger run's effect, idempotent per slot: under an exclusive lock on
/// the effect file, append the line SLOT unless the file already holds it.
/// A run killed after the append and before the done marker (or whose
/// transaction rolled back after it) is run again once its lease ends; the
/// rerun finds the line and appends nothing, so the file keeps one line per
/// slot under a kill at any point. The lock also orders a holder that paused
/// past its lease against its successor: whichever appends first, the other
/// finds the line.
std::string append_once(const std::string& path, const std::string& slot_text) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
    struct closer {
        int fd;
        ~closer() { ::close(fd); }  // also drops the lock
    } guard{fd};
    if (::flock(fd, LOCK_EX) != 0) throw std::runtime_error("cannot lock " + path + ": " + std::strerror(errno));
    std::string text;
    char buf[65536];
    for (off_t at = 0;;) {
        const auto n = ::pread(fd, buf, sizeof buf, at);
        if (n < 0) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
        if (n == 0) break;
        text.append(buf, static_cast<std::size_t>(n));
        at += n;
    }
    const std::string line = slot_text + "\n";
    for (std::size_t pos = 0; pos < text.size();) {
        const auto end = text.find('\n', pos);
        if (end == std::string::npos) break;
        if (text.compare(pos, end + 1 - pos, line) == 0) return "already applied";
        pos = end + 1;
    }
    // A line cut off by a crash mid-append is completed by a newline first,
    // so the slot's line stands alone.
    const std::string out = (!text.empty() && text.back() != '\n' ? "\n" : "") + line;
    if (::write(fd, out.data(), out.size()) != static_cast<ssize_t>(out.size()) || ::fsync(fd) != 0)
        throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
    return "appended";
}

coord::ledger_options ledger_options_of(const options& o) {
    coord::ledger_options opt;
    if (o.has("replay-window-hours")) {
        const auto h = o.number("replay-window-hours");
        if (h < 1 || h > 24 * 366 * 10) throw usage_error("--replay-window-hours must be 1..87840");
        opt.replay_window = std::chrono::hours(h);
        opt.retention = opt.replay_window + std::chrono::hours(24);
    }
    if (o.has("lease-ttl")) {
        const auto ms = o.number("lease-ttl");
        if (ms < 1 || ms > 30ull * 24 * 3600 * 1000) throw usage_error("--lease-ttl must be 1 ms to 30 days");
        opt.lease_ttl = std::chrono::milliseconds(ms);
    }
    return opt;
}

coord::slot slot_of(const options& o) {
    auto slot = coord::slot::parse(o.required("slot"));
    if (!slot) throw usage_error("--slot must be job@YYYY-MM-DDTHH:MM[:SS]Z, got '" + printable(o.required("slot")) + "'");
    return std::move(*slot);
}

int ledger_claim(const std::vector<std::string_view>& args) {
    options o(args, {"store", "slot", "worker", "lease-ttl", "replay-window-hours"});
    const auto slot = slot_of(o);
    const auto& worker = o.required("worker");
    if (worker.empty()) throw usage_error("--worker must not be empty");
    const auto opt = ledger_options_of(o);
    return with_store(o, [&](auto& store) -> int {
        using Store = std::remove_reference_t<decltype(store)>;
        if constexpr (!coord::ledger_store<Store>) {
            throw usage_error("this store keeps no job ledger (etcd has no clock to judge its replay window on: use file, sqlite, postgres, redis or zookeeper)");
        } else {
        coord::basic_job_ledger<Store> ledger{store, opt};
        auto c = ledger.claim(slot, worker);
        if (!c) return infra(store, c.error());
        switch (c->kind) {
        case coord::claim_outcome::granted:
            std::printf("granted fence=%llu attempt=%u\n", static_cast<unsigned long long>(c->fence), c->attempt);
            return exit_ok;
        case coord::claim_outcome::replayed: std::puts("replayed"); return exit_ok;
        case coord::claim_outcome::in_progress:
            std::printf("in progress holder=%s\n", printable(c->holder).c_str());
            return exit_refused;
        case coord::claim_outcome::payload_mismatch: std::puts("payload mismatch"); return exit_refused;
        case coord::claim_outcome::expired: std::puts("expired"); return exit_refused;
        }
        return exit_infra;
        }
    });
}

int ledger_command(std::string_view verb, const std::vector<std::string_view>& args) {
    if (verb == "claim") return ledger_claim(args);
    if (verb != "run") throw usage_error("unknown ledger command: " + printable(verb));
    options o(args, {"store", "slot", "effect-file", "replay-window-hours", "lease-ttl"});
    const auto slot_value = slot_of(o);
    const auto* slot = &slot_value;
    const auto& effect_file = o.required("effect-file");
    const auto opt = ledger_options_of(o);
    return with_store(o, [&](auto& store) -> int {
        using Store = std::remove_reference_t<decltype(store)>;
        if constexpr (!coord::ledger_store<Store>) {
            throw usage_error("this store keeps no job ledger (etcd has no clock to judge its replay window on: use file, sqlite, postgres, redis or zookeeper)");
        } else {
        coord::basic_job_ledger<Store> ledger{store, opt};
        const auto worker = "coordctl-" + std::to_string(::getpid());
        auto r = ledger.run(*slot, worker, "", [&](const coord::ledger_context&) {
            return append_once(effect_file, slot->to_string());
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
        }
    });
}

// Sessions live in stores that model them (postgres:); each call is one
// store step judged on the store's clock.
int session_command(std::string_view verb, const std::vector<std::string_view>& args) {
    std::set<std::string_view> allowed{"store"};
    if (verb == "create") allowed.insert({"user", "idle-timeout", "absolute-timeout"});
    else if (verb == "load" || verb == "revoke") allowed.insert("id");
    else throw usage_error("unknown session command: " + printable(verb));
    options o(args, allowed);
    coord::session_options opt;
    auto seconds = [&](const char* name, std::chrono::milliseconds& out) {
        if (!o.has(name)) return;
        const auto v = o.number(name);
        if (v < 1 || v > 400ull * 24 * 3600) throw usage_error(std::string("--") + name + " must be 1 to 34560000 seconds");
        out = std::chrono::seconds(v);
    };
    seconds("idle-timeout", opt.idle_timeout);
    seconds("absolute-timeout", opt.absolute_timeout);
    if (opt.absolute_timeout < opt.idle_timeout) throw usage_error("--absolute-timeout must be at least --idle-timeout");
    const std::string user = verb == "create" ? name_option(o, "user") : std::string();
    const std::string id = verb == "create" ? std::string() : o.required("id");
    return with_store(o, [&](auto& store) -> int {
        using Store = std::remove_reference_t<decltype(store)>;
        if constexpr (!coord::session_store<Store>) {
            throw usage_error("this store keeps no sessions (use sqlite:PATH, postgres:CONNINFO or redis://HOST:PORT)");
        } else {
            coord::basic_session_manager<Store> sessions{store, opt};
            auto refusal = [&](const coord::error& ec) {
                if (ec == coord::errc::session_not_found) return std::puts("not found"), exit_refused;
                if (ec == coord::errc::session_expired) return std::puts("expired"), exit_refused;
                return infra(store, ec);
            };
            if (verb == "create") {
                auto s = sessions.create(user);
                if (!s) return refusal(s.error());
                std::printf("id=%s remaining=%llds\n", s->id.c_str(),
                            static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(s->remaining).count()));
                return exit_ok;
            }
            if (verb == "load") {
                auto s = sessions.load(id);
                if (!s) return refusal(s.error());
                std::printf("user=%s version=%llu remaining=%llds\n", printable(s->user).c_str(),
                            static_cast<unsigned long long>(s->version),
                            static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(s->remaining).count()));
                return exit_ok;
            }
            auto r = sessions.revoke(id);
            if (!r) return infra(store, r.error());
            std::puts(*r ? "revoked" : "not found");
            return *r ? exit_ok : exit_refused;
        }
    });
}

int schedule_command(std::string_view verb, const std::vector<std::string_view>& args) {
#if defined(COORD_HAS_SCHEDULE)
    if (verb != "next") throw usage_error("unknown schedule command: " + printable(verb));
    options o(args, {"cron", "tz", "from", "n"});
    const auto count = o.has("n") ? o.number("n") : 1;
    if (count < 1 || count > 100'000) throw usage_error("-n must be 1..100000");
    auto sched = coord::schedule::make("schedule", o.required("cron"), o.required("tz"));
    if (!sched) throw usage_error(sched.error().message);
    auto from = std::chrono::floor<std::chrono::seconds>(coord::system_clock{}.now());
    if (o.has("from")) {
        auto t = coord::slot::parse("from@" + o.required("from"));
        if (!t) throw usage_error("--from must be YYYY-MM-DDTHH:MM[:SS]Z, got '" + o.required("from") + "'");
        // Fires at or after --from: the first whole second not before it, less one.
        from = std::chrono::ceil<std::chrono::seconds>(t->scheduled()) - std::chrono::seconds{1};
    }
    for (std::uint64_t i = 0; i < count; ++i) {
        auto f = sched->next_after(from);
        if (!f) {
            std::puts("no further fire time (none before the end of 9999, the last year a slot can name)");
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

/// `OPTIONS -- COMMAND [ARGS...]`: the options, and the command (cron run,
/// lease hold, elect); a usage error without a command.
std::pair<std::vector<std::string_view>, std::vector<std::string>> split_command(
    const std::vector<std::string_view>& all, const char* what) {
    const auto dashes = std::find(all.begin(), all.end(), std::string_view("--"));
    if (dashes == all.end() || dashes + 1 == all.end())
        throw usage_error(std::string(what) + " needs -- COMMAND [ARGS...]");
    return {{all.begin(), dashes}, {dashes + 1, all.end()}};
}

// --- commands run as child processes: cron's jobs, lease hold's command ---

std::atomic<bool> cron_stop{false};
std::atomic<int> hold_signal{0};
extern "C" void cron_on_signal(int) { cron_stop.store(true); }
extern "C" void hold_on_signal(int sig) {
    hold_signal.store(sig);
    cron_stop.store(true);
}

/// SIGTERM and SIGINT call `handler` (which only sets flags).
void on_stop_signals(void (*handler)(int)) {
    struct sigaction sa {};
    sa.sa_handler = handler;
    ::sigemptyset(&sa.sa_mask);
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGINT, &sa, nullptr);
}

/// Runs a command as a child process in a process group of its own (so
/// that stopping it stops what it started), killed if coordctl dies
/// (PR_SET_PDEATHSIG), with what it runs under in its environment (a cron
/// slot, a lease).
class process_launcher {
public:
    explicit process_launcher(std::vector<std::string> argv) : argv_(std::move(argv)) {}

    class handle {
    public:
        explicit handle(pid_t pid) : pid_(pid) {}
        handle(handle&& o) noexcept : pid_(std::exchange(o.pid_, -1)), status_(o.status_) {}
        handle& operator=(handle&& o) noexcept {
            std::swap(pid_, o.pid_);
            std::swap(status_, o.status_);
            return *this;
        }
        handle(const handle&) = delete;
        handle& operator=(const handle&) = delete;
        ~handle() {
            if (pid_ > 0 && !status_) {  // never leave a job behind
                ::kill(-pid_, SIGKILL);
                int st;
                ::waitpid(pid_, &st, 0);
            }
        }
        std::optional<int> poll() {
            if (status_ || pid_ <= 0) return status_;
            int st = 0;
            const pid_t r = ::waitpid(pid_, &st, WNOHANG);
            if (r == pid_) status_ = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1;
            else if (r < 0 && errno != EINTR) status_ = -1;
            return status_;
        }
        void terminate() { if (pid_ > 0 && !status_) ::kill(-pid_, SIGTERM); }
        void kill() { if (pid_ > 0 && !status_) ::kill(-pid_, SIGKILL); }
        pid_t pid() const noexcept { return pid_; }

    private:
        pid_t pid_;
        std::optional<int> status_;
    };

#if defined(COORD_HAS_SCHEDULE)
    handle start(const coord::cron_context& c) {
        return start({{"COORD_SLOT", c.which.to_string()},
                      {"COORD_FENCE", std::to_string(c.fence)},
                      {"COORD_ATTEMPT", std::to_string(c.attempt)},
                      {"COORD_SCHEDULED_AT", c.scheduled_at}});
    }
#endif

    /// Starts the command with `vars` set in its environment (replacing
    /// any of the same name coordctl got).
    handle start(const std::vector<std::pair<std::string, std::string>>& vars) {
        std::vector<std::string> env;
        for (char** e = environ; *e; ++e) {
            const std::string_view entry(*e);
            const bool replaced = std::any_of(vars.begin(), vars.end(), [&](const auto& v) {
                return entry.size() > v.first.size() && entry.substr(0, v.first.size()) == v.first &&
                       entry[v.first.size()] == '=';
            });
            if (!replaced) env.emplace_back(entry);
        }
        for (const auto& [name, value] : vars) env.push_back(name + "=" + value);
        std::vector<char*> envp, argv;
        for (auto& e : env) envp.push_back(e.data());
        envp.push_back(nullptr);
        for (auto& a : argv_) argv.push_back(a.data());
        argv.push_back(nullptr);
        int report[2];  // the child writes errno here if exec fails
        if (::pipe2(report, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
        const pid_t parent = ::getpid();
        const pid_t pid = ::fork();
        if (pid < 0) {
            const int e = errno;
            ::close(report[0]);
            ::close(report[1]);
            throw std::runtime_error(std::string("fork: ") + std::strerror(e));
        }
        if (pid == 0) {
            ::setpgid(0, 0);
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) ::_exit(137);  // coordctl died before prctl
            struct sigaction dfl {};
            dfl.sa_handler = SIG_DFL;
            ::sigaction(SIGTERM, &dfl, nullptr);
            ::sigaction(SIGINT, &dfl, nullptr);
            ::execvpe(argv[0], argv.data(), envp.data());
            const int e = errno;
            (void)!::write(report[1], &e, sizeof e);
            ::_exit(127);
        }
        ::setpgid(pid, pid);  // also here: no race with a signal to the group
        ::close(report[1]);
        int e = 0;
        ssize_t n;
        do n = ::read(report[0], &e, sizeof e);
        while (n < 0 && errno == EINTR);
        ::close(report[0]);
        handle h{pid};
        if (n == static_cast<ssize_t>(sizeof e)) {
            (void)h.poll();
            int st;
            ::waitpid(pid, &st, 0);
            throw std::runtime_error("cannot run " + argv_[0] + ": " + std::strerror(e));
        }
        last_pid_ = pid;
        return h;
    }
    pid_t last_pid() const noexcept { return last_pid_; }

private:
    std::vector<std::string> argv_;
    pid_t last_pid_ = -1;
};

// --- lease hold: a command run while a keeper holds the lease ------------

/// Stops a child's process group: SIGTERM, then SIGKILL after `grace`.
/// Returns its status as lease hold reports it (128 + signal when killed).
int stop_child(process_launcher::handle& child, std::chrono::milliseconds grace) {
    child.terminate();
    const auto kill_at = std::chrono::steady_clock::now() + grace;
    for (;;) {
        if (auto st = child.poll()) return *st < 0 ? 128 - *st : *st;
        if (std::chrono::steady_clock::now() >= kill_at) child.kill();
        std::this_thread::sleep_for(std::chrono::milliseconds{20});  // a lost lease is acted on within 20 ms
    }
}

/// Runs COMMAND while `held` is valid, with the lease in its environment
/// (lease hold and elect): COMMAND's status when it exits (the lease
/// released); exit 3 when the lease was lost (COMMAND stopped); 128 + the
/// signal on SIGTERM/SIGINT (COMMAND stopped, the lease released).
template <class Held>
int run_while_held(Held& held, process_launcher& launcher, std::chrono::milliseconds grace) {
    const std::string name = held.name();
    auto child = launcher.start({{"COORD_LEASE_NAME", name},
                                 {"COORD_LEASE_OWNER", held.owner()},
                                 {"COORD_FENCE_TOKEN", std::to_string(held.token())}});
    auto release = [&] {
        auto r = held.release();
        if (!r)
            std::fprintf(stderr, "coordctl: releasing %s: %s (its term ends on its own)\n", printable(name).c_str(),
                         r.error().code.message().c_str());
    };
    for (;;) {
        // Validity first: a COMMAND that ended after the lease was lost may
        // have run without it, which is reported as the loss (exit 3).
        if (held.valid()) {
            if (auto st = child.poll()) {
                release();
                return *st < 0 ? 128 - *st : *st;
            }
        } else {
            const auto why = held.why_lost();
            std::fprintf(stderr, "coordctl: lost %s (token %llu): %s; stopping COMMAND\n", printable(name).c_str(),
                         static_cast<unsigned long long>(held.token()),
                         why ? why->message().c_str() : "no renewal was answered before the safe deadline");
            (void)stop_child(child, grace);
            (void)held.release();  // refused when another holder has it: theirs stays
            return exit_refused;
        }
        if (cron_stop.load()) {
            (void)stop_child(child, grace);
            release();
            return 128 + hold_signal.load();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{20});  // a lost lease is acted on within 20 ms
    }
}

/// --ttl of a lease a keeper holds for COMMAND: 100 ms to 24 h.
std::chrono::milliseconds kept_ttl(const options& o, const char* command) {
    const auto ttl = o.duration("ttl");
    if (ttl < std::chrono::milliseconds{100}) throw usage_error(std::string("--ttl must be 100ms to 24h for ") + command);
    return ttl;
}
/// --grace: how long COMMAND has between SIGTERM and SIGKILL (default 10 s).
std::chrono::milliseconds grace_of(const options& o) {
    return o.has("grace") ? o.duration("grace", std::chrono::hours{1}, true) : std::chrono::milliseconds{10'000};
}

/// coordctl lease hold: takes the lease (waiting up to --wait with the
/// queued acquire where the store has one), runs COMMAND with the lease in
/// its environment while a keeper renews it, and releases it when COMMAND
/// exits (exit: COMMAND's status, 128 + signal when a signal ended it).
/// Lost (a renewal refused, or no renewal answered by the safe deadline):
/// COMMAND's group gets SIGTERM, SIGKILL after --grace, exit 3. Not granted:
/// exit 3, COMMAND never started. SIGTERM/SIGINT: COMMAND stopped the same
/// way, the lease released, exit 128 + the signal.
int lease_hold(const std::vector<std::string_view>& all) {
    const auto [opts, command] = split_command(all, "lease hold");
    options o(opts, {"store", "name", "owner", "ttl", "wait", "grace"});
    const auto& name = name_option(o, "name");
    const std::string owner = o.has("owner") ? name_option(o, "owner") : coord::unique_owner();
    const auto ttl = kept_ttl(o, "lease hold");
    const auto wait = o.has("wait") ? o.duration("wait") : std::chrono::milliseconds{0};
    const auto grace = grace_of(o);
    process_launcher launcher{command};
    on_stop_signals(hold_on_signal);
    return with_store(o, [&](auto& store) -> int {
        using Store = std::remove_reference_t<decltype(store)>;
        coord::basic_keeper<Store> keeper{store};
        coord::result<typename coord::basic_keeper<Store>::held_lease, coord::lease_error> held =
            coord::unexpected(coord::lease_error{});
        static_assert(coord::lease_queue_store<Store>, "every store coordctl opens has a waiting acquire");
        if (wait.count() > 0) {
            held = keeper.hold(name, owner, ttl, std::chrono::steady_clock::now() + wait);
        } else {
            held = keeper.hold(name, owner, ttl);
        }
        if (!held) {
            const auto& e = held.error();
            if (e == coord::errc::lease_held) {
                std::fprintf(stderr, "coordctl lease hold: %s is held by %s: not granted, COMMAND not started\n",
                             printable(name).c_str(), printable(e.holder).c_str());
                return exit_refused;
            }
            return infra(store, e.code);
        }
        if (cron_stop.load()) return 128 + hold_signal.load();
        return run_while_held(*held, launcher, grace);
    });
}

/// coordctl elect: campaigns for leadership of --name until granted (or
/// SIGTERM/SIGINT), then runs COMMAND while leader, as lease hold does.
int elect(const std::vector<std::string_view>& all) {
    const auto [opts, command] = split_command(all, "elect");
    options o(opts, {"store", "name", "candidate", "ttl", "grace"});
    const auto& name = name_option(o, "name");
    const std::string candidate = o.has("candidate") ? name_option(o, "candidate") : coord::unique_owner();
    const auto ttl = kept_ttl(o, "elect");
    const auto grace = grace_of(o);
    process_launcher launcher{command};
    on_stop_signals(hold_on_signal);
    return with_store(o, [&](auto& store) -> int {
        using Store = std::remove_reference_t<decltype(store)>;
        coord::basic_keeper<Store> keeper{store};
        coord::basic_election election{keeper, name};
        std::fprintf(stderr, "coordctl elect: %s campaigns for %s\n", printable(candidate).c_str(), printable(name).c_str());
        for (;;) {
            if (cron_stop.load()) return 128 + hold_signal.load();
            // In steps of a second, so that a signal is seen while waiting.
            auto lead = election.campaign(candidate, ttl, std::chrono::steady_clock::now() + std::chrono::seconds{1});
            if (!lead) {
                if (lead.error() == coord::errc::lease_held) continue;
                return infra(store, lead.error().code);
            }
            if (cron_stop.load()) return 128 + hold_signal.load();
            std::fprintf(stderr, "coordctl elect: %s leads %s, term %llu\n", printable(candidate).c_str(),
                         printable(name).c_str(), static_cast<unsigned long long>(lead->token()));
            return run_while_held(*lead, launcher, grace);
        }
    });
}

/// coordctl leader: who leads --name (leader=C token=T, or none); with
/// --watch, a line at every change until SIGTERM/SIGINT.
int leader(const std::vector<std::string_view>& args) {
    options o(args, {"store", "name"}, {"watch"});
    const auto& name = name_option(o, "name");
    const bool watch = o.has("watch");
    on_stop_signals(hold_on_signal);
    return with_store(o, [&](auto& store) -> int {
        using Store = std::remove_reference_t<decltype(store)>;
        coord::keeper_options no_thread;  // leader only reads
        no_thread.own_thread = false;
        coord::basic_keeper<Store> keeper{store, no_thread};
        coord::basic_election election{keeper, name};
        auto show = [](const std::optional<coord::leader_info>& l) {
            if (l)
                std::printf("leader=%s token=%llu\n", printable(l->candidate).c_str(),
                            static_cast<unsigned long long>(l->term));
            else
                std::puts("none");
            std::fflush(stdout);
        };
        auto now = election.leader();
        if (!now) return infra(store, now.error());
        show(*now);
        if (!watch) return exit_ok;
        std::optional<coord::fence_token> known = *now ? std::optional<coord::fence_token>((*now)->term) : std::nullopt;
        while (!cron_stop.load()) {
            auto next = election.observe(known, std::chrono::steady_clock::now() + std::chrono::milliseconds{500});
            if (!next) return infra(store, next.error());
            const std::optional<coord::fence_token> term =
                *next ? std::optional<coord::fence_token>((*next)->term) : std::nullopt;
            if (term != known) show(*next);
            known = term;
        }
        return exit_ok;
    });
}

#if defined(COORD_HAS_SCHEDULE)
int cron_run(const std::vector<std::string_view>& all) {
    const auto [opts, command] = split_command(all, "cron run");
    options o(opts, {"store", "job", "cron", "tz", "catch-up", "overlap", "lease-ttl", "for",
                                      "stop-grace", "max-attempts", "worker", "max-running", "schedule-version",
                                      "take-over-from"});
    coord::schedule_options so;
    if (o.has("schedule-version")) {
        const auto v = o.number("schedule-version");
        if (v < 1 || v > 0xffffffffu) throw usage_error("--schedule-version must be 1 to 4294967295");
        so.version = static_cast<std::uint32_t>(v);
    }
    auto sched = coord::schedule::make(name_option(o, "job"), o.required("cron"), o.required("tz"), so);
    if (!sched) throw usage_error(sched.error().message);
    coord::cron_options opt;
    opt.worker = o.has("worker") ? name_option(o, "worker") : coord::unique_owner();
    if (o.has("catch-up")) opt.catch_up = o.duration("catch-up", std::chrono::hours{24 * 400}, true);
    if (o.has("overlap")) {
        const auto& v = o.required("overlap");
        if (v == "allow") opt.overlap = coord::overlap_policy::allow;
        else if (v == "forbid") opt.overlap = coord::overlap_policy::skip;
        else if (v == "replace") opt.overlap = coord::overlap_policy::replace;
        else throw usage_error("--overlap must be allow, forbid or replace, got '" + printable(v) + "'");
    }
    if (o.has("lease-ttl")) {
        const auto ms = o.number("lease-ttl");
        if (ms < 100 || ms > 24ull * 3600 * 1000) throw usage_error("--lease-ttl must be 100 to 86400000 ms");
        opt.lease_ttl = std::chrono::milliseconds(ms);
    }
    if (o.has("stop-grace")) opt.stop_grace = o.duration("stop-grace", std::chrono::hours{24}, true);
    if (o.has("max-attempts")) {
        const auto n = o.number("max-attempts");
        if (n < 1 || n > 1000) throw usage_error("--max-attempts must be 1 to 1000");
        opt.max_attempts = static_cast<std::uint32_t>(n);
    }
    if (o.has("max-running")) {
        const auto n = o.number("max-running");
        if (n < 1 || n > 10000) throw usage_error("--max-running must be 1 to 10000");
        opt.max_running = static_cast<std::size_t>(n);
    }
    if (o.has("take-over-from")) {
        const auto& v = o.required("take-over-from");
        if (v == "now") {
            opt.take_over_now = true;
        } else {
            auto t = coord::slot::parse("from@" + v);
            if (!t) throw usage_error("--take-over-from must be now or YYYY-MM-DDTHH:MM[:SS]Z, got '" + printable(v) + "'");
            opt.take_over_from = std::chrono::ceil<std::chrono::seconds>(t->scheduled());
        }
    }
    std::optional<std::chrono::milliseconds> run_for;
    if (o.has("for")) run_for = o.duration("for", std::chrono::hours{24 * 400});
    process_launcher launcher{command};
    opt.on_event = [&](const coord::cron_event& e) {
        const auto now = std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now());
        std::string line = coord::format_utc(now);
        line += " coordctl cron: ";
        line += coord::to_string(e.kind);
        line += " slot=" + e.slot;
        if (e.fence) line += " fence=" + std::to_string(e.fence);
        if (e.attempt) line += " attempt=" + std::to_string(e.attempt);
        if (e.kind == coord::cron_event::started) line += " pid=" + std::to_string(launcher.last_pid());
        if (!e.detail.empty()) line += " " + printable(e.detail);
        line += '\n';
        std::fputs(line.c_str(), stderr);
    };
    on_stop_signals(cron_on_signal);
    return with_store(o, [&](auto& store) -> int {
        using Store = std::remove_reference_t<decltype(store)>;
        if constexpr (!(coord::ledger_store<Store> && coord::fence_update_store<Store>)) {
            throw usage_error("this store keeps no job ledger (etcd has no clock to judge its replay window on: use file, sqlite, postgres, redis or zookeeper)");
        } else {
            coord::basic_cron_runner<Store, process_launcher> runner{store, *sched, launcher, opt};
            std::fprintf(stderr, "coordctl cron: %s runs %s (schedule v%u: %s, %s)\n", printable(runner.holder()).c_str(),
                         sched->job().c_str(), runner.schedule_version(), printable(sched->cron().text()).c_str(),
                         std::string(sched->zone()).c_str());
            std::optional<coord::steady_clock::time_point> until;
            if (run_for) until = coord::steady_clock{}.now() + *run_for;
            runner.run_until(cron_stop, until);
            if (const auto& why = runner.refusal()) {
                std::fprintf(stderr, "coordctl cron: refused: %s\n", printable(why->detail()).c_str());
                return exit_usage;
            }
            std::fputs("coordctl cron: stopped\n", stderr);
            return exit_ok;
        }
    });
}

std::string iso_of_ns(std::int64_t ns) {
    if (ns == 0) return "-";
    return coord::format_utc(std::chrono::sys_time<std::chrono::milliseconds>{std::chrono::milliseconds{ns / 1'000'000}});
}

int cron_status(const std::vector<std::string_view>& args) {
    options o(args, {"store", "job", "n"});
    const auto& job = name_option(o, "job");
    const auto count = o.has("n") ? o.number("n") : 10;
    if (count < 1 || count > 10000) throw usage_error("-n must be 1..10000");
    return with_store(o, [&](auto& store) -> int {
        using Store = std::remove_reference_t<decltype(store)>;
        if constexpr (!(coord::ledger_store<Store> && coord::fence_store<Store>)) {
            throw usage_error("this store keeps no job ledger (etcd has no clock to judge its replay window on: use file, sqlite, postgres, redis or zookeeper)");
        } else {
            const auto now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
            auto h = coord::cron_history(store, job, now, static_cast<std::size_t>(count));
            if (!h) {
                if (h.error() == coord::errc::cron_job_unknown) {
                    std::printf("refused: %s\n", h.error().message().c_str());
                    return exit_refused;
                }
                return infra(store, h.error());
            }
            std::printf("%-40s %-8s %-32s %7s %-9s %-24s %-24s %-11s %s\n", "SLOT", "STATE", "WORKER", "ATTEMPT", "EXIT",
                        "SCHEDULED", "STARTED", "SCHEDULE", "INSTANCE");
            std::set<std::uint32_t> versions;
            for (const auto& s : *h) {
                versions.insert(s.schedule_version);
                std::printf("%-40s %-8s %-32s %7u %-9s %-24s %-24s v%-10u %s%s%s\n", s.slot.c_str(),
                            coord::to_string(s.state), s.worker.empty() ? "-" : printable(s.worker).c_str(), s.attempt,
                            s.exit.c_str(), iso_of_ns(s.scheduled.count() * 1'000'000).c_str(),
                            iso_of_ns(s.started.count()).c_str(), s.schedule_version,
                            s.instance.empty() ? "-" : s.instance.c_str(), s.detail.empty() ? "" : "  ",
                            printable(s.detail).c_str());
            }
            // The schedules the listed slots belong to.
            if (auto plan = coord::cron_job_plan(store, job)) {
                for (const auto& e : plan->first)
                    if (versions.count(e.version))
                        std::printf("# schedule v%u: cron \"%s\" tz %s, from %s\n", e.version, printable(e.cron).c_str(),
                                    printable(e.zone).c_str(),
                                    e.from.time_since_epoch().count() == 0 ? "the job's start"
                                                                           : coord::format_utc(e.from).c_str());
            }
            return exit_ok;
        }
    });
}
#endif

int cron_command(std::string_view verb, const std::vector<std::string_view>& args) {
#if defined(COORD_HAS_SCHEDULE)
    if (verb == "run") return cron_run(args);
    if (verb == "status") return cron_status(args);
    throw usage_error("unknown cron command: " + printable(verb));
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
    throw usage_error("unknown jwt command: " + printable(verb));
}
#endif

// `store init`: the explicit step a store that can lose its data needs before
// first use and after a loss (Redis: its identity key, which every script
// that needs the store's data checks; ZooKeeper: its root and identity node,
// which every create of a record checks; PostgreSQL: its identity row), or
// the recovery of one that went back (SQLite, the file store: --force), with
// the operator's statement of what the store handed out before (the floors),
// so that a store that lost its data never hands anything out twice. A no-op
// for stores that need none.
int store_command(std::string_view verb, const std::vector<std::string_view>& args) {
    if (verb != "init") throw usage_error("unknown store command: " + printable(verb));
    options o(args, {"store", "segment-floor", "fence-floor", "ledger-floor", "reservation-floor"}, {"force"});
    const bool force = o.has("force");
    return with_store(o, [&](auto& store) -> int {
        if constexpr (requires { store.initialize(coord::initial_floors{}, force); }) {
            for (const char* f : {"segment-floor", "fence-floor", "ledger-floor"})
                if (!o.has(f))
                    throw usage_error(
                        std::string("store init on this store needs --") + f +
                        ": state floors at or above everything the store handed out before (a store that lost its "
                        "data hands nothing out twice): --segment-floor N (the largest segment ID it ever handed "
                        "out; 0 if none), --fence-floor N|now (the highest fence token any key accepted; now: a "
                        "number above every lease token it granted), --ledger-floor "
                        "YYYY-MM-DDTHH:MM[:SS]Z|now|none (slots scheduled up to it that have no record are not run again; none: a "
                        "store that never served coord)");
            coord::initial_floors floors;
            floors.segment = o.number("segment-floor");
            if (floors.segment >= 0x7fffffffffffffffull) throw usage_error("--segment-floor must be below 2^63-1");
            if (o.required("fence-floor") == "now") floors.fence_now = true;
            else floors.fence = o.number("fence-floor");
            // An instant floor: now (the server's), none (0) or an ISO instant.
            auto instant_floor = [](const std::string& option, const std::string& v, std::int64_t& ms, bool& now) {
                if (v == "now") {
                    now = true;
                } else if (v == "none") {
                    ms = 0;
                } else {
                    auto t = coord::slot::parse("floor@" + v);
                    if (!t)
                        throw usage_error("--" + option + " must be now, none or YYYY-MM-DDTHH:MM[:SS]Z, got '" +
                                          printable(v) + "'");
                    ms = t->scheduled().time_since_epoch().count();
                }
            };
            instant_floor("ledger-floor", o.required("ledger-floor"), floors.ledger_ms, floors.ledger_now);
            // A time reservation reaches at most reserve_ahead (200 ms by
            // default) past a generator's clock: the server's now covers what
            // a store that lost its data before this command had reserved.
            instant_floor("reservation-floor", o.has("reservation-floor") ? o.required("reservation-floor") : "now",
                          floors.reservation_ms, floors.reservation_now);
            auto r = store.initialize(floors, force);
            if (!r) {
                if (r.error() == coord::errc::store_already_initialized) {
                    std::printf("refused: %s\n", r.error().message().c_str());
                    return exit_refused;
                }
                return infra(store, r.error());
            }
            // A file store has no identity: its new generation tells its copies apart.
            constexpr bool file = std::is_same_v<std::remove_cvref_t<decltype(store)>, coord::file_store>;
            std::printf("initialized: %s %s\n", file ? "generation" : "identity", r->c_str());
            return exit_ok;
        }
        (void)store;
        (void)force;
        std::puts("initialized: this store needs no initialization");
        return exit_ok;
    });
}

int run(const std::vector<std::string_view>& argv) {
    if (!argv.empty() && argv[0] == "uuid7") return uuid7_command({argv.begin() + 1, argv.end()});
    if (!argv.empty() && argv[0] == "elect") return elect({argv.begin() + 1, argv.end()});
    if (!argv.empty() && argv[0] == "leader") return leader({argv.begin() + 1, argv.end()});
    if (argv.size() < 2) throw usage_error("missing command");
    const auto primitive = argv[0];
    const auto verb = argv[1];
    const std::vector<std::string_view> rest(argv.begin() + 2, argv.end());
    if (primitive == "fence") return fence_command(verb, rest);
    if (primitive == "lease" && verb == "hold") return lease_hold(rest);
    if (primitive == "lease") return lease_command(verb, rest);
    if (primitive == "snowflake") return snowflake_command(verb, rest);
    if (primitive == "segment") return segment_command(verb, rest);
    if (primitive == "uuid") return uuid_command(verb, rest);
    if (primitive == "ledger") return ledger_command(verb, rest);
    if (primitive == "schedule") return schedule_command(verb, rest);
    if (primitive == "cron") return cron_command(verb, rest);
    if (primitive == "session") return session_command(verb, rest);
    if (primitive == "store") return store_command(verb, rest);
#if defined(COORD_HAS_SESSION)
    if (primitive == "jwt") return jwt_command(verb, rest);
#else
    if (primitive == "jwt") throw usage_error("coordctl was built without coord::session (install libssl-dev)");
#endif
    throw usage_error("unknown command: " + printable(primitive));
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
        std::fprintf(stderr, "error: %s%s\n", e.what(), assumption(e.code()));
        return exit_for(e.code());
    } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "coordctl: %s\n", e.what());
        return exit_usage;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return exit_infra;
    }
}
