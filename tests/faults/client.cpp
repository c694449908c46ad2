// SPDX-License-Identifier: Apache-2.0
// coord_fault_client: one client process of the fault suite. It runs one
// workload against a store until a deadline, appending every operation it
// completes to its history file (one JSON object a line, written with one
// write() so a SIGKILL never leaves half a line), and runs the workloads'
// final reads. tests/faults/run.sh starts several of these per workload,
// restarts them when a fault kills them, and hands the histories to
// coord_fault_check.
//
//   coord_fault_client now                       CLOCK_MONOTONIC in ns (the histories' time base)
//   coord_fault_client run   --store S --workload W --proc P --history FILE --until NS
//                            [--index I] [--slots-at UNIX_MS] [--slots N] [--start NS] [--holder FILE]
//   coord_fault_client final --store S --workload W --proc P --history FILE [...]
//   coord_fault_client setup --store S          (the ledger's effect table, before the clients)
//   With a secured store: [--store-user NAME] [--store-password-file FILE]
//   (or COORD_STORE_PASSWORD) [--store-ca-file PEM] [--store-cert-file PEM]
//   [--store-key-file PEM], as coordctl takes them.
//
// Workloads:
//   register   take the lease "faults.register" (TTL 2 s); with the token, write
//              to the fenced register "register" six times 100 ms apart,
//              without checking the lease again (the pattern the fence exists
//              for: a pause or a slow clock there makes the writes stale); release, or one time in eight just stop.
//              With --holder FILE: says "PID TOKEN" of each grant in FILE, and
//              stops itself after a batch's first write when FILE.pause
//              exists (see pause_if_asked).
//   control    the same with an unfenced register (every write with token 0,
//              so the register accepts whatever comes): must show violations.
//   ids        Snowflake (node = index % 2: two processes share a node id, the
//              node lease decides), segment IDs (tag "faults"), UUIDv7 with a
//              reservation per process: every ID recorded.
//   ledger     slots fx@(slots-at + k s), k < slots, one due every 250 ms
//              from --start; workers race for the due ones: claim, work,
//              effect, done. Where the store runs the
//              effect in its transaction (SQLite, PostgreSQL) the effect is a
//              row inserted there; elsewhere a fenced effect: the claim's fence
//              appended to the fenced key fx/SLOT. final: every slot driven to
//              done by one worker, then every slot's record and effects read.
//   durability puts of fresh keys (a fenced write with token 1); final: each
//              acknowledged put of this process read back.
//
// Times in the history are CLOCK_MONOTONIC (never faked: run.sh starts
// faketime clients with FAKETIME_DONT_FAKE_MONOTONIC=1), so the histories
// of all processes on this machine share one time base.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "coord/fence.hpp"
#include "coord/job_ledger.hpp"
#include "coord/lease.hpp"
#include "coord/open.hpp"
#include "coord/segment.hpp"
#include "coord/snowflake.hpp"
#include "coord/storage/memory.hpp"
#include "coord/uuid7.hpp"

namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

std::int64_t mono_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

struct args {
    std::string cmd, store, workload, proc, history, holder;
    std::int64_t until = 0, slots_at_ms = 0, start = 0;
    std::uint64_t index = 0, slots = 40;
};

/// The history file: one line per write(2), O_APPEND.
class history {
public:
    explicit history(const std::string& path) : fd_(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) {
        if (fd_ < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
    }
    ~history() { ::close(fd_); }
    history(const history&) = delete;
    history& operator=(const history&) = delete;
    void add(std::int64_t t0, const std::string& proc, const char* f, const char* type, json fields) {
        fields["t0"] = t0;
        fields["t1"] = mono_ns();
        fields["proc"] = proc;
        fields["f"] = f;
        fields["type"] = type;
        const std::string line = fields.dump() + "\n";
        if (::write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
            throw std::runtime_error(std::string("cannot write the history: ") + std::strerror(errno));
    }

private:
    int fd_;
};

/// ok / refused / unknown of an error (Jepsen's ok / fail / info): refused
/// means certainly not applied (a rule said no, or the store was not
/// reached); unknown that it may have been.
// A store that went back (state_went_back) refuses every later call of the
// store object that saw it; the client then stops at once, exit status 3,
// and run.sh runs the recovery (docs/concepts/went-back.md) (a store replicated asynchronously
// that lost acknowledged writes in a failover).
bool went_back = false;

const char* type_of(const std::error_code& ec) {
    if (ec == coord::errc::state_went_back) went_back = true;
    return ec == coord::condition::outcome_unknown ? "unknown" : "refused";
}

bool past(const args& a) { return went_back || mono_ns() >= a.until; }

// client-pause asks for a pause mid-batch by creating HOLDER.pause: the
// holder that finds it after a batch's first write claims it (rename: one
// claimant), says "PID TOKEN" in HOLDER.paused, and stops itself. The pause
// then lands with five writes to come, however loaded the machine is (a
// signal sent from outside at a guessed instant may miss the batch).
void pause_if_asked(const args& a, std::uint64_t token) {
    if (a.holder.empty()) return;
    const auto ask = a.holder + ".pause";
    const auto claimed = ask + "." + std::to_string(::getpid());
    if (std::rename(ask.c_str(), claimed.c_str()) != 0) return;
    std::ofstream(claimed, std::ios::trunc) << ::getpid() << ' ' << token << "\n";
    std::rename(claimed.c_str(), (a.holder + ".paused").c_str());
    ::raise(SIGSTOP);
}

template <class Store>
void register_workload(Store& store, const args& a, history& h, bool fenced) {
    coord::basic_lease_manager leases{store};
    coord::basic_keyed_fenced_resource reg{store};
    const std::string name = fenced ? "faults.register" : "faults.control";
    const std::string key = fenced ? "register" : "control";
    const std::string owner = a.proc + "-" + std::to_string(::getpid());
    std::mt19937_64 rng(std::random_device{}());
    while (!past(a)) {
        auto l = leases.acquire(name, owner, 2000ms);
        if (!l) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng() % 100));
            continue;
        }
        if (!a.holder.empty()) {
            // Tells the fault scheduler who holds the lease now and with
            // which grant: "PID TOKEN" (rename: atomic).
            const auto tmp = a.holder + ".tmp" + std::to_string(::getpid());
            std::ofstream(tmp) << ::getpid() << ' ' << l->token << "\n";
            std::rename(tmp.c_str(), a.holder.c_str());
        }
        // A batch of six writes 100 ms apart, never looking at the lease
        // again: a pause, or a clock running slow (faketime stretches the
        // sleeps), makes the later ones outlive the lease.
        for (int i = 0; i < 6; ++i) {
            const auto t0 = mono_ns();
            const std::string value = a.proc + ":" + std::to_string(l->token) + ":" + std::to_string(i);
            auto w = reg.write(key, fenced ? l->token : 0, value);
            json f = {{"key", key}, {"token", l->token}, {"value", value}};
            if (w) {
                h.add(t0, a.proc, "write", "ok", f);
            } else {
                f["why"] = w.error().code.message();
                h.add(t0, a.proc, "write", type_of(w.error().code), f);
            }
            if (i == 0) pause_if_asked(a, l->token);
            std::this_thread::sleep_for(100ms);
        }
        if (rng() % 8 != 0) (void)leases.release(name, owner);
        std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 100));
    }
}

template <class Store>
void ids_workload(Store& store, const args& a, history& h) {
    coord::snowflake_options so;
    so.node = a.index % 2;  // two processes share each node id: the node lease decides
    so.node_lease_ttl = 3000ms;
    so.name = "faults.snowflake";
    coord::basic_snowflake<coord::default_layout, coord::system_clock, Store> snow{store, so};
    coord::segment_options sg;
    sg.initial_step = sg.min_step = 50;
    sg.max_step = 1000;
    coord::basic_segment_generator<Store> seg{store, sg};
    auto tag = seg.tag("faults");
    coord::uuid7_options uo;
    uo.name = "faults.uuid7." + std::to_string(a.index);
    coord::basic_uuid7_generator<coord::system_clock, coord::os_random, Store> uuid{store, uo};
    char text[37] = {};
    while (!past(a)) {
        for (int i = 0; i < 10; ++i) {
            auto t0 = mono_ns();
            if (auto id = snow.next()) h.add(t0, a.proc, "id", "ok", {{"gen", "snowflake"}, {"id", std::to_string(*id)}});
            else {
                h.add(t0, a.proc, "id", type_of(id.error()), {{"gen", "snowflake"}, {"why", id.error().message()}});
                std::this_thread::sleep_for(100ms);
                break;
            }
        }
        for (int i = 0; i < 10; ++i) {
            auto t0 = mono_ns();
            if (auto id = tag.next()) h.add(t0, a.proc, "id", "ok", {{"gen", "segment"}, {"id", std::to_string(*id)}});
            else {
                h.add(t0, a.proc, "id", type_of(id.error()), {{"gen", "segment"}, {"why", id.error().message()}});
                std::this_thread::sleep_for(100ms);
                break;
            }
        }
        for (int i = 0; i < 10; ++i) {
            auto t0 = mono_ns();
            if (auto u = uuid.next()) {
                u->to_chars(text);
                h.add(t0, a.proc, "id", "ok", {{"gen", "uuid7"}, {"id", std::string(text, 36)}});
            } else {
                h.add(t0, a.proc, "id", type_of(u.error()), {{"gen", "uuid7"}, {"why", u.error().message()}});
                std::this_thread::sleep_for(100ms);
                break;
            }
        }
        std::this_thread::sleep_for(20ms);
    }
}

// The ledger's effect where the store has a transaction to put it in.
template <class Store>
constexpr bool atomic_effect = coord::ledger_run_store<Store> && !std::is_same_v<Store, coord::memory_store>;

template <class Store>
std::string insert_sql() {
#if defined(COORD_HAS_POSTGRES)
    if constexpr (std::is_same_v<Store, coord::postgres::store>)
        return "INSERT INTO coord_fault_fx(slot, fence, worker) VALUES ($1, $2, $3)";
#endif
    return "INSERT INTO coord_fault_fx(slot, fence, worker) VALUES (?1, ?2, ?3)";
}

template <class Store>
auto effect_exec(const std::string& sql, const std::vector<std::optional<std::string>>& params = {}) {
    return Store::effect_exec(sql, params);
}

coord::slot slot_at(const args& a, std::uint64_t k) {
    return coord::slot("fx", coord::slot::time_point{std::chrono::milliseconds{a.slots_at_ms + static_cast<std::int64_t>(k) * 1000}});
}

coord::ledger_options ledger_opts() {
    coord::ledger_options o;
    o.lease_ttl = 1500ms;
    o.replay_window = std::chrono::hours{24};
    o.retention = std::chrono::hours{48};
    return o;
}

/// One attempt at a slot. Returns false when the slot is not done yet.
template <class Store>
bool ledger_step(Store& store, coord::basic_job_ledger<Store>& ledger, const coord::slot& s, const std::string& worker,
                 const args& a, history& h, std::mt19937_64& rng) {
    const auto t0 = mono_ns();
    const std::string text = s.to_string();
    if constexpr (atomic_effect<Store>) {
        auto r = ledger.run(s, worker, "", [&](const coord::ledger_context& c) -> std::string {
            std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 40));  // work inside the transaction
            auto ins = effect_exec<Store>(insert_sql<Store>(), {text, std::to_string(c.fence), worker});
            if (!ins) throw std::runtime_error("effect: " + ins.error().message());
            return "fence " + std::to_string(c.fence);
        });
        if (!r) {
            h.add(t0, a.proc, "run", type_of(r.error()), {{"slot", text}, {"why", r.error().message()}});
            return false;
        }
        static constexpr const char* names[] = {"applied", "replayed", "in_progress", "stale_fence", "payload_mismatch", "expired"};
        h.add(t0, a.proc, "run", r->kind == coord::run_outcome::applied ? "ok" : "refused",
              {{"slot", text}, {"outcome", names[r->kind]}, {"fence", r->fence}});
        // (expired: never run, as after a recovery's ledger floor.)
        return r->kind == coord::run_outcome::applied || r->kind == coord::run_outcome::replayed ||
               r->kind == coord::run_outcome::expired;
    } else {
        auto c = ledger.claim(s, worker);
        if (!c) {
            h.add(t0, a.proc, "run", type_of(c.error()), {{"slot", text}, {"why", c.error().message()}});
            return false;
        }
        if (c->kind == coord::claim_outcome::replayed) {
            h.add(t0, a.proc, "run", "refused", {{"slot", text}, {"outcome", "replayed"}});
            return true;
        }
        if (c->kind == coord::claim_outcome::expired) {  // never run, as after a recovery's ledger floor
            h.add(t0, a.proc, "run", "refused", {{"slot", text}, {"outcome", "expired"}});
            return true;
        }
        if (c->kind != coord::claim_outcome::granted) {
            h.add(t0, a.proc, "run", "refused",
                  {{"slot", text},
                   {"outcome", c->kind == coord::claim_outcome::in_progress ? "in_progress" : "payload_mismatch"},
                   {"holder", c->holder}, {"lease_until_ms", c->lease_until.count() / 1000000}});
            return false;
        }
        // Work outside any lock (a pause here outlives the execution lease),
        // then the fenced effect, then the done marker.
        std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 80));
        const std::string fence = std::to_string(c->fence);
        auto e = store.fence_update("fx/" + text, c->fence, [&](std::string& v) { v += (v.empty() ? "" : ",") + fence; });
        if (!e) {
            h.add(t0, a.proc, "run", type_of(e.error().code),
                  {{"slot", text}, {"fence", c->fence}, {"why", "effect: " + e.error().code.message()}});
            return false;
        }
        auto done = ledger.complete(s, c->fence, "fence " + fence);
        if (!done) {
            h.add(t0, a.proc, "run", type_of(done.error()),
                  {{"slot", text}, {"fence", c->fence}, {"why", "done: " + done.error().message()}});
            return false;
        }
        h.add(t0, a.proc, "run", "ok", {{"slot", text}, {"outcome", "applied"}, {"fence", c->fence}});
        return true;
    }
}

template <class Store>
void ledger_workload(Store& store, const args& a, history& h) {
    if constexpr (!coord::ledger_store<Store>) {
        throw std::runtime_error("this store keeps no job ledger");
    } else {
        coord::basic_job_ledger<Store> ledger{store, ledger_opts()};
        std::mt19937_64 rng(std::random_device{}());
        const std::string worker = a.proc + "-" + std::to_string(::getpid());
        // A schedule firing every 250 ms: the slots due now are the ones
        // the workers race for (the one due and the two before it).
        while (!past(a)) {
            const auto due = static_cast<std::uint64_t>(std::max<std::int64_t>(0, mono_ns() - a.start) / 250'000'000);
            const auto k = std::min<std::uint64_t>(a.slots - 1, due - std::min<std::uint64_t>(due, rng() % 3));
            if (!ledger_step(store, ledger, slot_at(a, k), worker, a, h, rng))
                std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 30));
            else
                std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 30));
        }
    }
}

template <class Store>
void ledger_final(Store& store, const args& a, history& h) {
    if constexpr (coord::ledger_store<Store>) {
        coord::basic_job_ledger<Store> ledger{store, ledger_opts()};
        std::mt19937_64 rng(1);
        const auto give_up = mono_ns() + 60'000'000'000;
        // Every slot driven to done (waiting out the leases of paused or
        // killed workers), then read.
        for (std::uint64_t k = 0; k < a.slots; ++k)
            while (!ledger_step(store, ledger, slot_at(a, k), "final", a, h, rng) && mono_ns() < give_up)
                std::this_thread::sleep_for(100ms);
        std::map<std::string, std::vector<std::pair<std::string, std::string>>> rows;  // slot -> (fence, worker)
        if constexpr (atomic_effect<Store>) {
            // The effect table read inside a run of a slot of its own (the
            // ledger's transaction is the way into the store's database).
            coord::slot reader("fx-read", coord::slot::time_point{std::chrono::milliseconds{a.slots_at_ms}});
            auto r = ledger.run(reader, "final-" + std::to_string(::getpid()), "", [&](const coord::ledger_context&) {
                auto q = effect_exec<Store>("SELECT slot, fence, worker FROM coord_fault_fx");
                if (!q) throw std::runtime_error("reading the effects: " + q.error().message());
                for (auto& row : *q) rows[row.at(0)].emplace_back(row.at(1), row.at(2));
                return std::string("read");
            });
            if (!r || r->kind != coord::run_outcome::applied)
                throw std::runtime_error("cannot read the effect table" + (r ? std::string() : ": " + r.error().message()));
        }
        for (std::uint64_t k = 0; k < a.slots; ++k) {
            const auto s = slot_at(a, k);
            const std::string text = s.to_string();
            const auto t0 = mono_ns();
            auto rec = ledger.read(s);
            if (!rec) {
                h.add(t0, a.proc, "slot", type_of(rec.error()), {{"slot", text}, {"why", rec.error().message()}});
                continue;
            }
            const char* state = !*rec ? "none"
                                : (*rec)->state == coord::ledger_record::state_t::done    ? "done"
                                : (*rec)->state == coord::ledger_record::state_t::running ? "running"
                                                                                          : "idle";
            h.add(t0, a.proc, "slot", "ok", {{"slot", text}, {"state", state}, {"fence", *rec ? (*rec)->fence : 0}});
            if constexpr (atomic_effect<Store>) {
                std::size_t order = 0;
                for (const auto& [fence, worker] : rows[text])
                    h.add(t0, a.proc, "effect", "ok",
                          {{"slot", text}, {"fence", std::stoull(fence)}, {"worker", worker}, {"mode", "atomic"}, {"order", order++}});
            } else {
                auto v = store.fence_read("fx/" + text);
                if (!v) throw std::runtime_error("reading the effect of " + text + ": " + v.error().message());
                std::size_t order = 0;
                for (std::size_t p = 0; p < v->value.size();) {
                    auto e = v->value.find(',', p);
                    if (e == std::string::npos) e = v->value.size();
                    h.add(t0, a.proc, "effect", "ok",
                          {{"slot", text}, {"fence", std::stoull(v->value.substr(p, e - p))}, {"mode", "fenced"}, {"order", order++}});
                    p = e + 1;
                }
            }
        }
    }
}

template <class Store>
void durability_workload(Store& store, const args& a, history& h) {
    coord::basic_keyed_fenced_resource res{store};
    const std::string prefix = "d/" + a.proc + "/" + std::to_string(::getpid()) + "/";
    for (std::uint64_t i = 0; !past(a); ++i) {
        const auto t0 = mono_ns();
        const std::string key = prefix + std::to_string(i), value = "v" + std::to_string(i);
        auto w = res.write(key, 1, value);
        if (w) h.add(t0, a.proc, "put", "ok", {{"key", key}, {"value", value}});
        else h.add(t0, a.proc, "put", type_of(w.error().code), {{"key", key}, {"value", value}, {"why", w.error().code.message()}});
        std::this_thread::sleep_for(20ms);
    }
}

template <class Store>
void durability_final(Store& store, const args& a, history& h) {
    // The acknowledged puts of this process (every run of it), from its history.
    std::vector<std::string> keys;
    {
        std::ifstream in(a.history);
        for (std::string line; std::getline(in, line);) {
            if (line.empty()) continue;
            auto j = json::parse(line);
            if (j.at("f") == "put" && j.at("type") == "ok") keys.push_back(j.at("key").get<std::string>());
        }
    }
    coord::basic_keyed_fenced_resource res{store};
    // The final reads run once every fault healed; a cluster may still be
    // electing: a read that fails is tried again for up to a minute (a
    // failed read is no loss), and only its last outcome is recorded.
    const auto give_up = mono_ns() + 60'000'000'000;
    for (const auto& key : keys) {
        const auto t0 = mono_ns();
        auto v = res.read(key);
        while (!v && mono_ns() < give_up) {
            std::this_thread::sleep_for(200ms);
            v = res.read(key);
        }
        if (!v) h.add(t0, a.proc, "final", type_of(v.error()), {{"key", key}, {"why", v.error().message()}});
        else if (!v->written) h.add(t0, a.proc, "final", "ok", {{"key", key}, {"present", false}});
        else h.add(t0, a.proc, "final", "ok", {{"key", key}, {"value", v->value}});
    }
}

template <class Store>
int run(Store& store, const args& a) {
    if (a.cmd == "setup") {
        if constexpr (atomic_effect<Store>) {
            coord::basic_job_ledger<Store> ledger{store, ledger_opts()};
            coord::slot s("fx-setup", coord::slot::time_point{std::chrono::milliseconds{a.slots_at_ms}});
            auto r = ledger.run(s, "setup", "", [](const coord::ledger_context&) {
                auto q = effect_exec<Store>("CREATE TABLE IF NOT EXISTS coord_fault_fx(slot TEXT NOT NULL, fence TEXT NOT NULL, worker TEXT NOT NULL)");
                if (!q) throw std::runtime_error("creating the effect table: " + q.error().message());
                return std::string("created");
            });
            if (!r) throw std::runtime_error("setup: " + r.error().message());
            if (r->kind != coord::run_outcome::applied) throw std::runtime_error("setup: the setup slot was not run");
        }
        return 0;
    }
    history h(a.history);
    const bool final = a.cmd == "final";
    if (a.workload == "register" || a.workload == "control") {
        if (!final) register_workload(store, a, h, a.workload == "register");
    } else if (a.workload == "ids") {
        if (!final) ids_workload(store, a, h);
    } else if (a.workload == "ledger") {
        if (final) ledger_final(store, a, h);
        else ledger_workload(store, a, h);
    } else if (a.workload == "durability") {
        if (final) durability_final(store, a, h);
        else durability_workload(store, a, h);
    } else {
        throw std::invalid_argument("unknown workload '" + a.workload + "'");
    }
    return went_back ? 3 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        args a;
        if (argc < 2) throw std::invalid_argument("usage: coord_fault_client now|setup|run|final --store S ...");
        a.cmd = argv[1];
        if (a.cmd == "now") {
            std::printf("%lld\n", static_cast<long long>(mono_ns()));
            return 0;
        }
        coord::open_options open{.timeout = std::chrono::milliseconds{2000}};
        for (int i = 2; i + 1 < argc; i += 2) {
            const std::string k = argv[i], v = argv[i + 1];
            if (k == "--store") a.store = v;
            else if (k == "--store-user") open.user = v;
            else if (k == "--store-password-file") {
                if (auto why = coord::detail::read_secret_file(v, open.password))
                    throw std::invalid_argument("--store-password-file " + *why);
            } else if (k == "--store-ca-file") open.ca_file = v;
            else if (k == "--store-cert-file") open.cert_file = v;
            else if (k == "--store-key-file") open.key_file = v;
            else if (k == "--workload") a.workload = v;
            else if (k == "--proc") a.proc = v;
            else if (k == "--history") a.history = v;
            else if (k == "--holder") a.holder = v;
            else if (k == "--until") a.until = std::stoll(v);
            else if (k == "--index") a.index = std::stoull(v);
            else if (k == "--slots-at") a.slots_at_ms = std::stoll(v);
            else if (k == "--slots") a.slots = std::stoull(v);
            else if (k == "--start") a.start = std::stoll(v);
            else throw std::invalid_argument("unknown option " + k);
        }
        if (a.cmd != "setup" && a.cmd != "run" && a.cmd != "final") throw std::invalid_argument("unknown command " + a.cmd);
        if (a.store.empty()) throw std::invalid_argument("--store is required");
        if (a.cmd != "setup" && (a.history.empty() || a.proc.empty() || a.workload.empty()))
            throw std::invalid_argument("--workload, --proc and --history are required");
        if (a.slots == 0 || a.slots > 100000) throw std::invalid_argument("--slots must be 1..100000");
        if (const char* env = std::getenv("COORD_STORE_PASSWORD"); env && *env && open.password.empty()) open.password = env;
        // A final read opens the store once every fault healed; a cluster
        // may still be electing: opening is tried again for up to a minute.
        bool opened = false;
        const auto give_up = mono_ns() + 60'000'000'000;
        for (;;) {
            try {
                return coord::with_store(a.store, [&](auto& store) { opened = true; return run(store, a); }, open);
            } catch (const coord::store_error& e) {
                if (opened || a.cmd != "final" || mono_ns() >= give_up) throw;
                std::this_thread::sleep_for(200ms);
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "coord_fault_client: %s\n", e.what());
        return 1;
    }
}
