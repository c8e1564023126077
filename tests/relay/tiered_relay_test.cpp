// The tiered relay (relay/tiered_relay.h): puts to remote ranks go through the remote backend
// (ucx), the others through the local one (shm); reads follow the metadata's backend; cleanup
// and close reach both; bad construction and foreign metadata are refused.
#include "relay/tiered_relay.h"

#include <gtest/gtest.h>

#include <cstring>

#include "relay/ucx/ucx_relay.h"
#include "shm_test_support.h"

namespace omnirt::relay::testing {
namespace {

class TieredRelayTest : public ShmRelayTest {
  protected:
    // A tiered relay whose rank 1 is remote.
    std::unique_ptr<Relay> tiered(
        const std::string& name,
        TieredRelayOptions::SendBuffers send_buffers = TieredRelayOptions::SendBuffers::host) {
        auto ucx = create_ucx_relay(
            RelayOptions{.backend = "ucx", .name = name, .slot_bytes = 64 << 10, .credits = 4});
        EXPECT_TRUE(ucx.has_value()) << ucx.error().to_string();
        if (!ucx) return nullptr;
        auto relay = create_tiered_relay({.local = make(options(name)),
                                          .remote = std::move(*ucx),
                                          .remote_ranks = {1},
                                          .send_buffers = send_buffers});
        EXPECT_TRUE(relay.has_value()) << relay.error().to_string();
        return relay ? std::move(*relay) : nullptr;
    }

    // put from `sender` to `rank`, get on `receiver`: the backend that carried it.
    std::string round_trip(Relay& sender, Relay& receiver, std::int64_t rank, std::uint32_t seed) {
        Tensor expected = pattern(4096, seed);
        auto put = sender.put_async(expected, "r", rank);
        EXPECT_TRUE(put.has_value()) << put.error().to_string();
        if (!put) return "";
        std::string backend = (*put)->metadata().find("backend")->as_string();
        Tensor dest = Tensor::empty({4096}, DType::u8).value();
        auto get = receiver.get_async((*put)->metadata(), dest, "r");
        EXPECT_TRUE(get.has_value()) << get.error().to_string();
        if (!get) return "";
        EXPECT_TRUE((*get)->wait_for_completion(Duration(10000)).has_value());
        EXPECT_TRUE((*put)->wait_for_completion(Duration(10000)).has_value());
        EXPECT_EQ(std::memcmp(dest.data(), expected.data(), 4096), 0);
        return backend;
    }
};

TEST_F(TieredRelayTest, PicksTheBackendByRankAndReadsBoth) {
    auto sender = tiered("sender");
    auto receiver = tiered("receiver");
    ASSERT_TRUE(sender && receiver);
    EXPECT_EQ(sender->backend(), "tiered");
    EXPECT_TRUE(sender->reads_backend("shm"));
    EXPECT_TRUE(sender->reads_backend("ucx"));
    EXPECT_FALSE(sender->reads_backend("gloo"));
    EXPECT_TRUE(sender->capabilities().cross_host);
    EXPECT_EQ(round_trip(*sender, *receiver, 1, 1), "ucx");  // remote rank
    EXPECT_EQ(round_trip(*sender, *receiver, 0, 2), "shm");  // local rank
    EXPECT_EQ(round_trip(*sender, *receiver, 7, 3), "shm");  // not listed: local
    // A plain relay of either backend reads what the tiered one wrote through it.
    auto plain = make(options("plain"));
    ASSERT_TRUE(plain);
    EXPECT_EQ(round_trip(*sender, *plain, 0, 4), "shm");
    sender->close();
    receiver->close();
    plain->close();
    EXPECT_TRUE(segments().empty());
}

TEST_F(TieredRelayTest, SendBuffersComeFromTheRelayEverySendUses) {
    auto remote_only = tiered("remote-only", TieredRelayOptions::SendBuffers::remote);
    auto local_only = tiered("local-only", TieredRelayOptions::SendBuffers::local);
    auto receiver = tiered("receiver");
    ASSERT_TRUE(remote_only && local_only && receiver);
    for (auto* sender : {remote_only.get(), local_only.get()}) {
        auto buffer = sender->allocate_send_buffer(4096);
        ASSERT_TRUE(buffer.has_value()) << buffer.error().to_string();
        Tensor expected = pattern(4096, 9);
        std::memcpy(buffer->mutable_data(), expected.data(), 4096);
        const std::int64_t rank = sender == remote_only.get() ? 1 : 0;
        auto put = sender->put_async(*buffer, "r", rank);
        ASSERT_TRUE(put.has_value()) << put.error().to_string();
        Tensor dest = Tensor::empty({4096}, DType::u8).value();
        auto get = receiver->get_async((*put)->metadata(), dest, "r");
        ASSERT_TRUE(get.has_value()) << get.error().to_string();
        ASSERT_TRUE((*get)->wait_for_completion(Duration(10000)).has_value());
        EXPECT_EQ(std::memcmp(dest.data(), expected.data(), 4096), 0);
    }
}

TEST_F(TieredRelayTest, RefusesForeignMetadataAndBadConstruction) {
    auto relay = tiered("relay");
    ASSERT_TRUE(relay);
    Tensor dest = Tensor::empty({16}, DType::u8).value();
    for (const Value& metadata : {Value(Map{{"backend", "gloo"}, {"nbytes", 16}}),
                                  Value(Map{{"nbytes", 16}}), Value(List{1, 2}), Value()}) {
        auto get = relay->get_async(metadata, dest, "r");
        ASSERT_FALSE(get.has_value());
        EXPECT_EQ(get.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(get.error().message.find("expected 'shm' or 'ucx'"), std::string::npos);
    }
    auto missing = create_tiered_relay({.local = make(options("alone"))});
    ASSERT_FALSE(missing.has_value());
    EXPECT_EQ(missing.error().code, ErrorCode::invalid_argument);
    auto same = create_tiered_relay({.local = make(options("a")), .remote = make(options("b"))});
    ASSERT_FALSE(same.has_value());
    EXPECT_NE(same.error().message.find("both 'shm'"), std::string::npos);
}

}  // namespace
}  // namespace omnirt::relay::testing
