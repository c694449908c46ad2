// SPDX-License-Identifier: Apache-2.0
// coord/zookeeper/session_lease.hpp: leases bound to a ZooKeeper session
// (store.session_bound(), a lease_store of its own).
//
// A grant is ONE multi-operation: the ephemeral node ROOT/slease/NAME/holder
// (the owner as its data, owned by this store object's session) created, and
// the name's record ROOT/slease/NAME set to the owner (the token: the zxid of
// that transaction, the holder node's czxid and the record's mzxid). The term is the
// session timeout the ensemble negotiated, whatever TTL was asked (the grant
// reports it); the session's heartbeats renew it; the ensemble ends it, and
// deletes the node, when it expires the session: a holder that lost its
// connection keeps the lease only until then, and learns it lost it from the
// node's absence (renew: lease_expired) once it reconnects with a new session.
//
// A create whose answer was lost (a connection loss) is recognised on retry:
// the node is there, owned by this session and holding this owner: it is
// this grant, not a second holder's, and no orphan is left.
// Round trips: acquire 1 (2 the first time a name is used: its parent node),
// refused 2; renew and read 1; release 2 (the node; its deletion at that
// version).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "coord/lease.hpp"
#include "coord/zookeeper/context.hpp"

namespace coord::zookeeper {

template <class Clock>
class session_lease_adapter {
public:
    explicit session_lease_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    /// The term is the session timeout; `ttl` is not ZooKeeper's to give here.
    result<lease, lease_error> lease_acquire(std::string_view name, std::string_view owner, std::chrono::nanoseconds) {
        const std::string parent = ctx_.path("slease", name), holder = parent + "/holder";
        for (int attempt = 0; attempt < 2; ++attempt) {
            auto r = ctx_.multi([&](detail::pending& st) {
                st.keep = {holder, std::string(owner), parent, detail::encode({std::string(owner)})};
                st.ops.resize(2);
                st.path_buffers.assign(1, std::vector<char>(holder.size() + 16));
                zoo_create_op_init(&st.ops[0], st.keep[0].c_str(), st.keep[1].data(), static_cast<int>(st.keep[1].size()),
                                   &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, st.path_buffers[0].data(),
                                   static_cast<int>(st.path_buffers[0].size()));
                st.op_stats.resize(1);
                zoo_set_op_init(&st.ops[1], st.keep[2].c_str(), st.keep[3].data(), static_cast<int>(st.keep[3].size()), -1,
                                &st.op_stats[0]);
            });
            if (!r) {
                // A lost answer: the node may be ours. Recognised on the read.
                if (r.error() == coord::condition::outcome_unknown) {
                    auto mine = ours(name, owner, 0);
                    if (mine && *mine) return **mine;
                }
                return failed(r.error());
            }
            if (r->rc == ZOK && r->stats.size() == 2) {
                const fence_token token = static_cast<fence_token>(r->stats[1].mzxid);
                return term_of(name, owner, token);
            }
            if (r->rc == ZNONODE && attempt == 0) {  // the name's parent node, the first time
                auto c = ctx_.create_or_exists(parent, "", 0);
                if (!c) return failed(c.error());
                continue;
            }
            break;
        }
        // Held: by us already (an earlier attempt whose answer was lost), or by another.
        auto mine = ours(name, owner, 0);
        if (!mine) return failed(mine.error());
        if (*mine) return **mine;
        return held_by(name, coord::errc::lease_held);
    }

    result<lease, lease_error> lease_renew(std::string_view name, std::string_view owner, fence_token token,
                                           std::chrono::nanoseconds) {
        auto mine = ours(name, owner, token);
        if (!mine) return failed(mine.error());
        if (*mine) return **mine;
        // Not held by this session: expired (the name's record still shows
        // our grant, its node gone with the session) or another's.
        auto rec = ctx_.get(ctx_.path("slease", name));
        if (!rec) return failed(rec.error());
        if (*rec) {
            // The record was set in the grant's own transaction: its mzxid is the token.
            auto f = detail::decode((*rec)->data, 1);
            if (f && (*f)[0] == owner && (token == 0 || static_cast<fence_token>((*rec)->stat.mzxid) == token)) {
                auto h = ctx_.get(ctx_.path("slease", name) + "/holder");
                if (h && !*h) return held_by(name, coord::errc::lease_expired);
            }
        }
        return held_by(name, coord::errc::not_lease_holder);
    }

    result<void, lease_error> lease_release(std::string_view name, std::string_view owner, fence_token token) {
        const std::string holder = ctx_.path("slease", name) + "/holder";
        auto h = ctx_.get(holder);
        if (!h) return unexpected(failed(h.error()).error());
        if (!*h || (*h)->data != owner || (token != 0 && static_cast<fence_token>((*h)->stat.czxid) != token))
            return unexpected(held_by(name, coord::errc::not_lease_holder).error());
        auto d = ctx_.del(holder, (*h)->stat.version);
        if (!d) return unexpected(failed(d.error()).error());
        if (d->rc != ZOK) return unexpected(held_by(name, coord::errc::not_lease_holder).error());
        return {};
    }

    result<std::optional<lease>> lease_read(std::string_view name) {
        auto h = ctx_.get(ctx_.path("slease", name) + "/holder");
        if (!h) return unexpected(h.error());
        if (!*h) return std::optional<lease>{};
        return std::optional<lease>{*term_of(name, (*h)->data, static_cast<fence_token>((*h)->stat.czxid))};
    }

private:
    // The grant as this session holds it: the session timeout as its term,
    // ending (at the latest) that long from now on this machine's clock.
    result<lease, lease_error> term_of(std::string_view name, std::string_view owner, fence_token token) {
        const auto timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(ctx_.zk().negotiated_timeout());
        const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch());
        return lease{std::string(name), std::string(owner), token, timeout, now + timeout};
    }

    // This session's node for `name` holding `owner` (and `token`), if it is there.
    result<std::optional<lease>> ours(std::string_view name, std::string_view owner, fence_token token) {
        auto h = ctx_.get(ctx_.path("slease", name) + "/holder");
        if (!h) return unexpected(h.error());
        if (!*h || (*h)->data != owner || (*h)->stat.ephemeralOwner != ctx_.zk().id()) return std::optional<lease>{};
        const auto t = static_cast<fence_token>((*h)->stat.czxid);
        if (token != 0 && t != token) return std::optional<lease>{};
        return std::optional<lease>{*term_of(name, owner, t)};
    }

    unexpected<lease_error> held_by(std::string_view name, coord::errc code) {
        lease_error e{coord::make_error_code(code), {}, 0, {}};
        auto h = ctx_.get(ctx_.path("slease", name) + "/holder");
        if (h && *h) {
            auto l = term_of(name, (*h)->data, static_cast<fence_token>((*h)->stat.czxid));
            e.holder = l->owner;
            e.token = l->token;
            e.expires_at = l->expires_at;
        }
        e.now = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch());
        return unexpected(std::move(e));
    }
    static unexpected<lease_error> failed(const coord::error& e) { return unexpected(lease_error{e, {}, 0, {}}); }

    detail::context<Clock>& ctx_;
};

}  // namespace coord::zookeeper
