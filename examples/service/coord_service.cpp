// SPDX-License-Identifier: Apache-2.0
// coord_service: a small order service, the example to copy for a service
// that runs as several instances (examples/service/README.md walks through
// it). Every instance:
//   - opens its coordination store from its configuration file;
//   - campaigns for leadership of "orders" (coord::basic_election on a
//     coord::basic_keeper, which renews the term and says the moment it is
//     lost); only the leader takes orders, the others answer 503 naming it;
//   - draws each order's ID from Snowflake, its node id leased on the store
//     (two instances configured with one node id cannot both issue IDs);
//   - writes the order to its own SQLite database with the term's fence
//     token, and the database refuses a token older than the last one it
//     took: a leader that paused past its term and wakes cannot overwrite
//     what its successor wrote, even if it never noticed it lost;
//   - runs the "tally" job on a cron schedule through the job-slot ledger:
//     every instance tries every slot, one runs it, and the tally is written
//     with the slot's fence token.
//
//   coord_service --config FILE
//
// FILE: one "key = value" a line (# starts a comment):
//   store = URL           the coordination store: file:PATH, sqlite:PATH,
//                         postgres:CONNINFO, redis://..., zookeeper://...
//                         (etcd keeps no ledger: refused)
//   store_user = NAME     the store's user, when it asks for one
//   store_password_file = FILE   its password (mode 600), never in the config
//   listen = HOST:PORT    where to serve HTTP
//   instance = NAME       this instance's name (the leader's name others show)
//   database = PATH       the SQLite database the orders are written to
//   node = N              the Snowflake node id, 0..1023, one per instance
//   term = SECONDS        the leadership term (default 10)
//   tally = CRON          the tally job's schedule, in UTC (default "* * * * *";
//                         six fields put seconds first)
//
// Routes: GET /status, POST /orders (the body: the order's text, 1..256
// bytes), GET /orders, GET /tallies; text/plain answers.
// Exit: 0 after SIGTERM or SIGINT; 2 bad configuration; 3 the store or the
// database failed at start.
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "../common/http_server.hpp"
#include "coord/election.hpp"
#include "coord/job_ledger.hpp"
#include "coord/keeper.hpp"
#include "coord/open.hpp"
#include "coord/schedule.hpp"
#include "coord/snowflake.hpp"

namespace {

using namespace std::chrono_literals;
using coord_example::http_request;
using coord_example::http_response;

struct config_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// The configuration file, checked whole before anything is opened.
struct config {
    std::string store, store_user, store_password_file, listen_host, instance, database, tally = "* * * * *";
    int listen_port = 0;
    std::uint64_t node = 0;
    std::chrono::seconds term{10};

    static config read(const std::string& path) {
        std::ifstream in(path);
        if (!in) throw config_error("cannot read " + path);
        std::map<std::string, std::string> kv;
        std::string line;
        for (int n = 1; std::getline(in, line); ++n) {
            if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
            const auto trim = [](std::string s) {
                s.erase(0, s.find_first_not_of(" \t\r"));
                s.erase(s.find_last_not_of(" \t\r") + 1);
                return s;
            };
            if (trim(line).empty()) continue;
            const auto eq = line.find('=');
            if (eq == std::string::npos) throw config_error(path + ":" + std::to_string(n) + ": not \"key = value\"");
            kv[trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
        }
        config c;
        const auto take = [&](const char* key, std::string& to, bool required) {
            const auto it = kv.find(key);
            if (it == kv.end()) {
                if (required) throw config_error(path + ": " + key + " is missing");
                return;
            }
            to = it->second;
            kv.erase(it);
        };
        const auto number = [&](const char* key, std::uint64_t lo, std::uint64_t hi) -> std::optional<std::uint64_t> {
            std::string text;
            take(key, text, false);
            if (text.empty()) return std::nullopt;
            std::uint64_t v = 0;
            const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
            if (ec != std::errc{} || end != text.data() + text.size() || v < lo || v > hi)
                throw config_error(path + ": " + key + " must be " + std::to_string(lo) + ".." + std::to_string(hi));
            return v;
        };
        std::string listen;
        take("store", c.store, true);
        take("store_user", c.store_user, false);
        take("store_password_file", c.store_password_file, false);
        take("listen", listen, true);
        take("instance", c.instance, true);
        take("database", c.database, true);
        take("tally", c.tally, false);
        c.node = number("node", 0, coord::default_layout::max_node).value_or(0);
        c.term = std::chrono::seconds{number("term", 1, 3600).value_or(10)};
        if (!kv.empty()) throw config_error(path + ": unknown key " + kv.begin()->first);
        const auto colon = listen.rfind(':');
        const auto port = colon == std::string::npos ? std::string{} : listen.substr(colon + 1);
        if (colon == std::string::npos || std::from_chars(port.data(), port.data() + port.size(), c.listen_port).ec != std::errc{} ||
            c.listen_port < 1 || c.listen_port > 65535)
            throw config_error(path + ": listen must be HOST:PORT");
        c.listen_host = listen.substr(0, colon);
        if (c.instance.empty() || c.instance.size() > 64) throw config_error(path + ": instance must be 1 to 64 bytes");
        return c;
    }

    /// The store's password: from its file (mode 600 or stricter), never from
    /// the configuration itself.
    coord::open_options store_options() const {
        coord::open_options o;
        o.user = store_user;
        if (store_password_file.empty()) return o;
        struct stat st {};
        if (::stat(store_password_file.c_str(), &st) != 0 || (st.st_mode & 077) != 0)
            throw config_error("store_password_file must exist and be mode 600");
        std::ifstream in(store_password_file);
        std::getline(in, o.password);
        return o;
    }
};

/// The service's own database: orders and tallies, each write refused
/// unless its fence token is at least the last one that table took.
class order_book {
public:
    explicit order_book(const std::string& path) {
        if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK)
            throw std::runtime_error("cannot open " + path + ": " + sqlite3_errmsg(db_));
        sqlite3_busy_timeout(db_, 5000);
        exec("PRAGMA journal_mode=WAL");
        exec("CREATE TABLE IF NOT EXISTS fences (name TEXT PRIMARY KEY, token INTEGER NOT NULL)");
        exec("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL, token INTEGER NOT NULL, "
             "instance TEXT NOT NULL)");
        exec("CREATE TABLE IF NOT EXISTS tallies (slot TEXT PRIMARY KEY, orders INTEGER NOT NULL, token INTEGER NOT NULL, "
             "instance TEXT NOT NULL)");
    }
    order_book(const order_book&) = delete;
    order_book& operator=(const order_book&) = delete;
    ~order_book() { sqlite3_close_v2(db_); }

    enum class outcome { written, stale };

    /// Writes an order under the leadership's token, in one transaction with
    /// the fence's check: a token below the last one taken changes nothing.
    outcome add_order(std::uint64_t id, const std::string& item, coord::fence_token token, const std::string& instance) {
        std::lock_guard lk(mutex_);
        transaction t(*this);
        if (!fence(t, "orders", token)) return outcome::stale;
        run("INSERT INTO orders (id, item, token, instance) VALUES (?1, ?2, ?3, ?4)", {std::to_string(id), item,
            std::to_string(token), instance});
        t.commit();
        return outcome::written;
    }

    /// Records a slot's tally under the slot's fence token (a repeat of the
    /// slot with a larger token replaces it; an older one changes nothing).
    outcome add_tally(const std::string& slot, coord::fence_token token, const std::string& instance) {
        std::lock_guard lk(mutex_);
        transaction t(*this);
        if (!fence(t, "tally " + slot, token)) return outcome::stale;
        run("INSERT OR REPLACE INTO tallies (slot, orders, token, instance) "
            "VALUES (?1, (SELECT count(*) FROM orders), ?2, ?3)",
            {slot, std::to_string(token), instance});
        t.commit();
        return outcome::written;
    }

    /// The rows of `sql`, a line each, columns separated by spaces.
    std::string lines(const char* sql) {
        std::lock_guard lk(mutex_);
        std::string out;
        statement s(db_, sql);
        while (s.step())
            for (int i = 0, n = sqlite3_column_count(s.get()); i < n; ++i)
                out.append(reinterpret_cast<const char*>(sqlite3_column_text(s.get(), i))).append(i + 1 < n ? " " : "\n");
        return out;
    }

private:
    sqlite3* db_ = nullptr;
    std::mutex mutex_;

    class statement {
    public:
        statement(sqlite3* db, const char* sql) : db_(db) {
            if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK) fail();
        }
        ~statement() { sqlite3_finalize(s_); }
        sqlite3_stmt* get() const { return s_; }
        bool step() {
            const int rc = sqlite3_step(s_);
            if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail();
            return rc == SQLITE_ROW;
        }

    private:
        [[noreturn]] void fail() { throw std::runtime_error(std::string("database: ") + sqlite3_errmsg(db_)); }
        sqlite3* db_;
        sqlite3_stmt* s_ = nullptr;
    };

    /// BEGIN IMMEDIATE (the write lock first), rolled back unless committed.
    class transaction {
    public:
        explicit transaction(order_book& b) : b_(b) { b_.exec("BEGIN IMMEDIATE"); }
        ~transaction() {
            if (!done_) sqlite3_exec(b_.db_, "ROLLBACK", nullptr, nullptr, nullptr);
        }
        void commit() {
            b_.exec("COMMIT");
            done_ = true;
        }

    private:
        order_book& b_;
        bool done_ = false;
    };

    void exec(const char* sql) {
        char* why = nullptr;
        if (sqlite3_exec(db_, sql, nullptr, nullptr, &why) != SQLITE_OK) {
            std::string w = why ? why : "?";
            sqlite3_free(why);
            throw std::runtime_error("database: " + w);
        }
    }
    int run(const char* sql, const std::vector<std::string>& params) {
        statement s(db_, sql);
        for (std::size_t i = 0; i < params.size(); ++i)
            sqlite3_bind_text(s.get(), static_cast<int>(i + 1), params[i].data(), static_cast<int>(params[i].size()),
                              SQLITE_TRANSIENT);
        s.step();
        return sqlite3_changes(db_);
    }
    /// The fence: raises `name`'s token to `token`, or refuses a smaller one.
    bool fence(transaction&, const std::string& name, coord::fence_token token) {
        const auto t = std::to_string(token);
        run("INSERT INTO fences (name, token) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING", {name, t});
        return run("UPDATE fences SET token = ?2 WHERE name = ?1 AND token <= ?2", {name, t}) == 1;
    }
};

std::atomic<bool> stopping{false};

/// The instance: leadership, IDs, the order book and the tally job, on any
/// store with leases and a ledger.
template <class Store>
int serve(Store& store, const config& c) {
    using namespace std::chrono;
    order_book book(c.database);
    auto sched = coord::schedule::make("tally", c.tally, "UTC");
    if (!sched) {
        std::fprintf(stderr, "coord_service: tally: %s\n", sched.error().message.c_str());
        return 2;
    }
    coord::basic_keeper<Store> keeper{store};
    coord::basic_election election{keeper, "orders"};
    coord::snowflake_options ids_options;
    ids_options.node = c.node;
    coord::basic_snowflake<coord::default_layout, coord::system_clock, Store> ids{store, ids_options};
    coord::basic_job_ledger<Store> ledger{store};

    // The leadership, while this instance holds it; lost() ends it.
    std::mutex lead_mutex;
    std::optional<typename coord::basic_election<Store>::leadership> lead;
    const auto leading = [&]() -> std::optional<coord::fence_token> {
        std::lock_guard lk(lead_mutex);
        if (lead && lead->valid()) return lead->token();
        return std::nullopt;
    };

    coord_example::http_server http({});
    http.route("GET", "/status", [&](const http_request&, http_response& res) {
        auto who = election.leader();
        std::string leader = "unknown";
        if (who) leader = *who ? (*who)->candidate + " term " + std::to_string((*who)->term) : "none";
        const auto mine = leading();
        res.content = "instance " + c.instance + "\nleader " + leader + "\nleading " + (mine ? "yes" : "no") + "\n";
    });
    http.route("POST", "/orders", [&](const http_request& req, http_response& res) {
        if (req.body.empty() || req.body.size() > 256 || req.body.find_first_of("\r\n") != std::string::npos) {
            res.status = 400;
            res.content = "An order is one line of 1 to 256 bytes.\n";
            return;
        }
        const auto token = leading();
        if (!token) {
            auto who = election.leader();
            res.status = 503;
            res.content = "Not the leader; the leader is " +
                          (who && *who ? (*who)->candidate : std::string("not known yet")) + ".\n";
            return;
        }
        auto id = ids.next();
        if (!id) {
            res.status = 503;
            res.content = "No ID: " + id.error().message() + "\n";
            return;
        }
        if (book.add_order(*id, req.body, *token, c.instance) == order_book::outcome::stale) {
            res.status = 409;  // a newer leader wrote: this instance's term is over
            res.content = "Refused: a newer leader has written (token " + std::to_string(*token) + " is stale).\n";
            return;
        }
        res.status = 201;
        res.content = "id " + std::to_string(*id) + " token " + std::to_string(*token) + "\n";
    });
    http.route("GET", "/orders", [&](const http_request&, http_response& res) {
        res.content = book.lines("SELECT id, token, instance, item FROM orders ORDER BY rowid");
    });
    http.route("GET", "/tallies", [&](const http_request&, http_response& res) {
        res.content = book.lines("SELECT slot, orders, token, instance FROM tallies ORDER BY slot");
    });
    if (!http.listen(c.listen_host, c.listen_port)) {
        std::fprintf(stderr, "coord_service: cannot listen on %s:%d\n", c.listen_host.c_str(), c.listen_port);
        return 3;
    }
    std::fprintf(stderr, "coord_service: %s serving on http://%s:%d\n", c.instance.c_str(), c.listen_host.c_str(),
                 c.listen_port);

    // The tally job: every instance tries every slot; the ledger lets one run it.
    std::thread tally([&] {
        auto last = time_point_cast<seconds>(system_clock::now());
        while (!stopping.load()) {
            const auto fire = sched->next_after(last);
            if (!fire) return;
            while (!stopping.load() && system_clock::now() < fire->utc) std::this_thread::sleep_for(100ms);
            if (stopping.load()) return;
            last = fire->utc;
            auto r = ledger.run(fire->which, c.instance, "", [&](const coord::ledger_context& ctx) {
                return book.add_tally(ctx.which.to_string(), ctx.fence, c.instance) == order_book::outcome::written
                           ? std::string("tallied")
                           : std::string("stale");
            });
            if (!r)
                std::fprintf(stderr, "coord_service: tally %s: %s\n", fire->which.to_string().c_str(), r.error().message().c_str());
            else if (r->kind == coord::run_outcome::applied)
                std::fprintf(stderr, "coord_service: tally %s ran here, token %llu\n", fire->which.to_string().c_str(),
                             static_cast<unsigned long long>(r->fence));
        }
    });

    // Campaign, lead until the keeper says the term is lost, campaign again.
    while (!stopping.load()) {
        auto won = election.campaign(c.instance, c.term, steady_clock::now() + 1s);
        if (!won) {
            if (won.error() != coord::errc::lease_held)
                std::fprintf(stderr, "coord_service: campaign: %s\n", won.error().code.message().c_str());
            if (won.error() != coord::errc::lease_held) std::this_thread::sleep_for(1s);
            continue;
        }
        std::fprintf(stderr, "coord_service: %s leads, term %llu\n", c.instance.c_str(),
                     static_cast<unsigned long long>(won->token()));
        const std::stop_token lost = won->lost();
        {
            std::lock_guard lk(lead_mutex);
            lead.emplace(std::move(*won));
        }
        while (!stopping.load() && !lost.stop_requested()) std::this_thread::sleep_for(100ms);
        if (lost.stop_requested()) std::fprintf(stderr, "coord_service: %s lost its term\n", c.instance.c_str());
        std::optional<typename coord::basic_election<Store>::leadership> ending;
        {
            std::lock_guard lk(lead_mutex);
            ending.swap(lead);  // requests see "not leading" from here on
        }
        ending.reset();  // releases the term, if it is still ours: a store call, outside the lock
    }
    tally.join();
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    coord_example::program_name = "coord_service";
    if (argc != 3 || std::string(argv[1]) != "--config") {
        std::fputs("usage: coord_service --config FILE\n", stderr);
        return 2;
    }
    config c;
    coord::open_options store_options;
    try {
        c = config::read(argv[2]);
        store_options = c.store_options();
    } catch (const config_error& e) {
        std::fprintf(stderr, "coord_service: %s\n", e.what());
        return 2;
    }
    // SIGTERM and SIGINT stop the loops; the leadership is released on the way out.
    struct sigaction sa {};
    sa.sa_handler = [](int) { stopping.store(true); };
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    try {
        return coord::with_store(
            c.store,
            [&](auto& store) -> int {
                using Store = std::remove_reference_t<decltype(store)>;
                if constexpr (coord::ledger_store<Store> && coord::fence_update_store<Store>) {
                    return serve(store, c);
                } else {
                    std::fprintf(stderr, "coord_service: store: this store keeps no job ledger (etcd); use another\n");
                    return 2;
                }
            },
            store_options);
    } catch (const coord::bad_store_url& e) {
        std::fprintf(stderr, "coord_service: store: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "coord_service: %s\n", e.what());
        return 3;
    }
}
