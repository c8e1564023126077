// relay_io over two shm relays of one process: payload and stream chunk round trips in copy
// and view modes, payloads without tensors, refused metadata, and discard_transfer returning
// the sender's only credit.
#include "pipeline/relay_io.h"

#include <gtest/gtest.h>

#include "config/runtime_dir.h"
#include "pipeline/fake_coordinator.h"
#include "relay/builtin.h"
#include "relay/registry.h"

namespace omnirt::pipeline::testing {
namespace {

class RelayIoTest : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_TRUE(relay::register_builtin_backends().has_value());
        auto dir = config::RuntimeDirectory::create(::testing::TempDir());
        ASSERT_TRUE(dir.has_value());
        dir_ = std::move(*dir);
        sender_ = make("sender", 1);
        receiver_ = make("receiver", 4);
        ASSERT_TRUE(sender_ && receiver_);
    }
    void TearDown() override {
        sender_->close();
        receiver_->close();
        sender_.reset();
        receiver_.reset();
        EXPECT_TRUE(shm_segments_of_this_process().empty());
    }
    std::unique_ptr<relay::Relay> make(const std::string& name, std::int64_t credits) {
        auto relay = relay::create_relay(relay::RelayOptions{.name = name,
                                                             .runtime_dir = dir_->path(),
                                                             .slot_bytes = 1 << 20,
                                                             .credits = credits,
                                                             .zero_copy = true});
        EXPECT_TRUE(relay.has_value());
        return relay ? std::move(*relay) : nullptr;
    }
    static ReadOptions options(ReadMode mode) { return {.mode = mode, .timeout = kHangGuard}; }

    std::unique_ptr<config::RuntimeDirectory> dir_;
    std::unique_ptr<relay::Relay> sender_;
    std::unique_ptr<relay::Relay> receiver_;
};

TEST_F(RelayIoTest, PayloadRoundTripsInViewAndCopyMode) {
    for (ReadMode mode : {ReadMode::view, ReadMode::copy}) {
        StagePayload sent = tensor_payload("r", 200000);
        sent.request.params = Map{{"p", 1}};
        auto write = write_payload(*sender_, sent, std::nullopt);
        ASSERT_TRUE(write.has_value());
        ASSERT_NE(write->put, nullptr);
        EXPECT_FALSE(write->relay_metadata.is_null());
        auto read =
            read_payload(*receiver_, write->header, write->relay_metadata, "r", options(mode));
        ASSERT_TRUE(read.has_value()) << read.error().to_string();
        EXPECT_EQ(*read, sent);
        const Tensor& tensor = read->data.find("tensor")->as_tensor();
        EXPECT_EQ(tensor.read_only(), mode == ReadMode::view);
        if (mode == ReadMode::view) {
            // The sender's only credit is held by the view until it goes.
            read = fail(ErrorCode::internal, "dropped");
        }
        EXPECT_TRUE(write->put->wait_for_completion(kHangGuard).has_value());
    }
}

TEST_F(RelayIoTest, SmallPayloadsAreCopiedEvenInViewMode) {
    StagePayload sent = tensor_payload("r", 1000);
    auto write = write_payload(*sender_, sent, std::nullopt);
    ASSERT_TRUE(write.has_value());
    auto read = read_payload(*receiver_, write->header, write->relay_metadata, "r",
                             options(ReadMode::view));
    ASSERT_TRUE(read.has_value());
    EXPECT_FALSE(read->data.find("tensor")->as_tensor().read_only());
    // The slot returned although the payload is still alive.
    EXPECT_TRUE(write->put->wait_for_completion(kHangGuard).has_value());
    EXPECT_EQ(*read, sent);
}

TEST_F(RelayIoTest, PayloadWithoutTensorsMovesNoRelayData) {
    StagePayload sent{.request_id = "r", .data = Map{{"text", "hello"}}};
    auto write = write_payload(*sender_, sent, std::nullopt);
    ASSERT_TRUE(write.has_value());
    EXPECT_EQ(write->put, nullptr);
    EXPECT_TRUE(write->relay_metadata.is_null());
    EXPECT_EQ(write->header.buffer_bytes, 0u);
    auto read = read_payload(*receiver_, write->header, Value(), "r", options(ReadMode::view));
    ASSERT_TRUE(read.has_value());
    EXPECT_EQ(*read, sent);
}

TEST_F(RelayIoTest, StreamChunkRoundTripsWithTensorMetadata) {
    Value chunk = Map{{"hidden", tensor_payload("", 4096).data["tensor"]}, {"i", 3}};
    Value metadata = Map{{"codes", Tensor::from_vector(std::vector<std::int64_t>{1, 2, 3})}};
    auto write = write_stream_chunk(*sender_, "r", chunk, metadata, std::nullopt);
    ASSERT_TRUE(write.has_value());
    auto blob = read_stream_chunk(*receiver_, write->header, write->relay_metadata, "r",
                                  options(ReadMode::copy));
    ASSERT_TRUE(blob.has_value());
    EXPECT_EQ(blob->chunk, chunk);
    EXPECT_EQ(blob->metadata, metadata);
    EXPECT_TRUE(write->put->wait_for_completion(kHangGuard).has_value());
}

TEST_F(RelayIoTest, RefusedMetadataAndShortTransfersFail) {
    StagePayload sent = tensor_payload("r", 1000);
    auto encoded = proto::encode_payload(sent);
    ASSERT_TRUE(encoded.has_value());
    const proto::PayloadHeader& header = encoded->header;
    auto no_metadata = read_payload(*receiver_, header, Value(), "r", options(ReadMode::copy));
    ASSERT_FALSE(no_metadata.has_value());
    EXPECT_NE(no_metadata.error().message.find("no relay metadata"), std::string::npos);
    auto not_a_map = read_payload(*receiver_, header, Value(42), "r", options(ReadMode::copy));
    EXPECT_FALSE(not_a_map.has_value());
    auto foreign = read_payload(*receiver_, header, Map{{"backend", "ucx"}, {"nbytes", 1024}}, "r",
                                options(ReadMode::copy));
    EXPECT_FALSE(foreign.has_value());

    // A real transfer smaller than the header says: refused, and the slot still returns.
    StagePayload small = tensor_payload("r", 64);
    auto write = write_payload(*sender_, small, std::nullopt);
    ASSERT_TRUE(write.has_value());
    auto short_read =
        read_payload(*receiver_, header, write->relay_metadata, "r", options(ReadMode::view));
    ASSERT_FALSE(short_read.has_value());
    EXPECT_EQ(short_read.error().code, ErrorCode::data_loss);
    EXPECT_TRUE(write->put->wait_for_completion(kHangGuard).has_value());
}

TEST_F(RelayIoTest, DiscardTransferReturnsTheSendersCredit) {
    EXPECT_TRUE(discard_transfer(*receiver_, Value(), "r", kHangGuard).has_value());
    for (int i = 0; i < 3; ++i) {  // one credit: each put needs the previous discard
        auto write = write_payload(*sender_, tensor_payload("r", 5000), std::nullopt);
        ASSERT_TRUE(write.has_value());
        EXPECT_TRUE(discard_transfer(*receiver_, write->relay_metadata, "r", kHangGuard));
        EXPECT_TRUE(write->put->wait_for_completion(kHangGuard).has_value());
    }
    // Stale metadata (already consumed) is refused without harm.
    auto write = write_payload(*sender_, tensor_payload("r", 5000), std::nullopt);
    ASSERT_TRUE(write.has_value());
    ASSERT_TRUE(discard_transfer(*receiver_, write->relay_metadata, "r", kHangGuard));
    EXPECT_FALSE(discard_transfer(*receiver_, write->relay_metadata, "r", kHangGuard));
}

TEST_F(RelayIoTest, ReadAfterSenderCleanupFails) {
    auto write = write_payload(*sender_, tensor_payload("r", 5000), std::nullopt);
    ASSERT_TRUE(write.has_value());
    sender_->cleanup("r");
    EXPECT_FALSE(write->put->wait_for_completion(kHangGuard).has_value());
    auto read = read_payload(*receiver_, write->header, write->relay_metadata, "r",
                             options(ReadMode::copy));
    EXPECT_FALSE(read.has_value());
}

}  // namespace
}  // namespace omnirt::pipeline::testing
