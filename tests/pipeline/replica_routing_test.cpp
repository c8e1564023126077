// Replica routing keys and choices (pipeline/replica_routing.h): which requests share a key,
// how the sticky choice spreads keys and moves only a down replica's keys, and the routes a
// request carries in its metadata.
#include "pipeline/replica_routing.h"

#include <gtest/gtest.h>

#include <map>

namespace omnirt::pipeline {
namespace {

Value message(const std::string& role, const std::string& text) {
    return Value(Map{{"role", role}, {"content", List{Map{{"type", "text"}, {"text", text}}}}});
}

OmniRequest chat(List messages) {
    return OmniRequest{.inputs = Map{{"messages", std::move(messages)}}};
}

TEST(ReplicaRouting, UserAndSessionKeysAreStickyAndDistinct) {
    OmniRequest alice{.metadata = Map{{"user", "alice"}}};
    OmniRequest alice_again{.inputs = Map{{"prompt", "other"}}, .metadata = Map{{"user", "alice"}}};
    OmniRequest bob{.metadata = Map{{"user", "bob"}}};
    OmniRequest session{.metadata = Map{{"session_id", "alice"}}};
    ASSERT_TRUE(routing_key(alice).has_value());
    EXPECT_EQ(routing_key(alice), routing_key(alice_again));
    EXPECT_NE(routing_key(alice), routing_key(bob));
    ASSERT_TRUE(routing_key(session).has_value());
    EXPECT_NE(routing_key(session), routing_key(alice));  // a user and a session never collide
    // Empty or non-string keys are no keys.
    EXPECT_FALSE(routing_key(OmniRequest{.metadata = Map{{"user", ""}}}).has_value());
    EXPECT_FALSE(routing_key(OmniRequest{.metadata = Map{{"user", 7}}}).has_value());
    EXPECT_FALSE(routing_key(OmniRequest{.metadata = Value("user")}).has_value());
    EXPECT_FALSE(routing_key(OmniRequest{.inputs = Map{{"prompt", "hi"}}}).has_value());
}

TEST(ReplicaRouting, TheTurnsOfAConversationShareItsPrefixKey) {
    Value system = message("system", "be brief");
    auto first = chat({system, message("user", "hi")});
    auto second = chat({system, message("user", "hi"), message("assistant", "hello"),
                        message("user", "how are you")});
    auto third = chat({system, message("user", "hi"), message("assistant", "hello"),
                       message("user", "how are you"), message("assistant", "fine"),
                       message("user", "bye")});
    auto other = chat({system, message("user", "hey"), message("assistant", "hello"),
                       message("user", "how are you")});
    // The first turn already has the key of the later ones: the second turn finds its cache.
    ASSERT_TRUE(routing_key(first).has_value());
    EXPECT_EQ(routing_key(first), routing_key(second));
    EXPECT_EQ(routing_key(second), routing_key(third));
    EXPECT_NE(routing_key(second), routing_key(other));
    // A user key wins over the prefix.
    second.metadata = Map{{"user", "alice"}};
    EXPECT_EQ(routing_key(second), routing_key(OmniRequest{.metadata = Map{{"user", "alice"}}}));
    // Malformed messages are no key, never an error.
    EXPECT_FALSE(routing_key(OmniRequest{.inputs = Map{{"messages", "text"}}}).has_value());
    EXPECT_FALSE(routing_key(chat({Value(3), Value("x")})).has_value());
}

TEST(ReplicaRouting, StickyChoiceSpreadsKeysAndMovesOnlyTheDownReplicasKeys) {
    constexpr int kKeys = 4000;
    std::map<int, int> per_replica;
    std::vector<int> all_up;
    for (int k = 0; k < kKeys; ++k) {
        std::uint64_t key =
            *routing_key(OmniRequest{.metadata = Map{{"user", "u" + std::to_string(k)}}});
        int chosen = sticky_replica(key, "thinker", {0, 1, 2, 3});
        EXPECT_EQ(chosen, sticky_replica(key, "thinker", {0, 1, 2, 3}));  // stable
        all_up.push_back(chosen);
        ++per_replica[chosen];
    }
    for (int r = 0; r < 4; ++r) {
        EXPECT_GT(per_replica[r], kKeys / 4 * 8 / 10) << r;  // within 20% of an even share
        EXPECT_LT(per_replica[r], kKeys / 4 * 12 / 10) << r;
    }
    // Replica 2 down: only its keys move, spread over the others.
    std::map<int, int> moved_to;
    for (int k = 0; k < kKeys; ++k) {
        std::uint64_t key =
            *routing_key(OmniRequest{.metadata = Map{{"user", "u" + std::to_string(k)}}});
        int chosen = sticky_replica(key, "thinker", {0, 1, 3});
        if (all_up[static_cast<std::size_t>(k)] != 2) {
            EXPECT_EQ(chosen, all_up[static_cast<std::size_t>(k)]);
        } else {
            ++moved_to[chosen];
        }
    }
    EXPECT_EQ(moved_to.size(), 3u);
    EXPECT_EQ(moved_to.count(2), 0u);
}

TEST(ReplicaRouting, RoutesTravelInTheRequestMetadata) {
    OmniRequest request{.metadata = Map{{"api", "chat.completions"}}};
    ASSERT_TRUE(set_replica_routes(request, {{"thinker", 1}, {"decode", 1}}).has_value());
    EXPECT_EQ(*request.metadata.find("api"), Value("chat.completions"));
    EXPECT_EQ(replica_routes(request.metadata),
              (std::map<std::string, int>{{"decode", 1}, {"thinker", 1}}));
    // A client cannot choose: the coordinator's routes replace whatever was there.
    OmniRequest forged{.metadata = Map{{kReplicaRoutesKey, Map{{"thinker", 5}, {"x", 1}}}}};
    ASSERT_TRUE(set_replica_routes(forged, {{"thinker", 0}}).has_value());
    EXPECT_EQ(replica_routes(forged.metadata), (std::map<std::string, int>{{"thinker", 0}}));
    OmniRequest empty;
    ASSERT_TRUE(set_replica_routes(empty, {{"thinker", 0}}).has_value());
    EXPECT_EQ(replica_routes(empty.metadata).size(), 1u);
    OmniRequest bad{.metadata = Value("text")};
    auto status = set_replica_routes(bad, {{"thinker", 0}});
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().code, ErrorCode::invalid_argument);
    // Malformed routes read as none.
    EXPECT_TRUE(replica_routes(Value(Map{{kReplicaRoutesKey, "x"}})).empty());
    EXPECT_TRUE(replica_routes(Value(Map{{kReplicaRoutesKey, Map{{"t", -1}}}})).empty());
    EXPECT_TRUE(replica_routes(Value()).empty());
}

}  // namespace
}  // namespace omnirt::pipeline
