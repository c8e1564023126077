// The shm relay in one process: round trips of every size class in copy and zero-copy mode,
// send buffers that move no bytes, registry, capabilities, close, and a clean /dev/shm.
#include "relay/shm/shm_relay.h"

#include <gtest/gtest.h>

#include <future>

#include "relay/registry.h"
#include "shm_test_support.h"

namespace omnirt::relay::testing {
namespace {

constexpr std::size_t kSlot = 64 << 10;

enum class Receive { into_dest, allocated_copy, zero_copy };

struct RoundTripCase {
    std::size_t nbytes;
    Receive receive;
    bool send_buffer;
};

std::string case_name(const ::testing::TestParamInfo<RoundTripCase>& info) {
    const char* receive[] = {"IntoDest", "AllocatedCopy", "ZeroCopy"};
    return std::to_string(info.param.nbytes) + "B_" +
           receive[static_cast<int>(info.param.receive)] +
           (info.param.send_buffer ? "_SendBuffer" : "_Tensor");
}

class ShmRoundTripTest : public ShmRelayTest,
                         public ::testing::WithParamInterface<RoundTripCase> {};

TEST_P(ShmRoundTripTest, DeliversTheBytes) {
    const RoundTripCase& param = GetParam();
    auto sender = make(options("sender", kSlot));
    auto receiver = make(options("receiver", kSlot, 4, param.receive == Receive::zero_copy));
    ASSERT_TRUE(sender && receiver);
    Tensor expected = pattern(param.nbytes, 7);

    Tensor source = expected;
    if (param.send_buffer) {
        auto buffer = sender->allocate_send_buffer(param.nbytes);
        ASSERT_TRUE(buffer.has_value()) << buffer.error().to_string();
        ASSERT_EQ(buffer->nbytes(), param.nbytes);
        if (param.nbytes > 0) {
            std::memcpy(buffer->mutable_data(), expected.data(), param.nbytes);
        }
        source = *buffer;
    }
    auto put = sender->put_async(source, "request");
    ASSERT_TRUE(put.has_value()) << put.error().to_string();
    source = Tensor();
    const Value& metadata = (*put)->metadata();
    EXPECT_EQ(metadata.find("backend")->as_string(), "shm");
    EXPECT_EQ(metadata.find("nbytes")->as_int(), static_cast<std::int64_t>(param.nbytes));
    EXPECT_EQ(metadata.find("kind")->as_string(), param.nbytes > kSlot ? "dedicated" : "slot");

    Tensor dest;
    if (param.receive == Receive::into_dest) {
        dest = *Tensor::empty({static_cast<std::int64_t>(param.nbytes)}, DType::u8);
    }
    auto get = receiver->get_async(metadata, dest, "request");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    ASSERT_TRUE((*get)->wait_for_completion(kHangGuard).has_value());
    Tensor received = (*get)->tensor();
    ASSERT_TRUE(received.defined());
    EXPECT_TRUE(same_bytes(received, expected));

    if (param.receive == Receive::zero_copy) {
        EXPECT_TRUE(received.read_only());
        // The view holds the sender's memory: the put is not finished until it goes, but it
        // was delivered, and cleanup on the sender leaves the view intact.
        auto early = (*put)->wait_for_completion(Duration(0));
        ASSERT_FALSE(early.has_value());
        EXPECT_EQ(early.error().code, ErrorCode::deadline_exceeded);
        auto delivered = (*put)->wait_for_delivery(Duration(0));
        EXPECT_TRUE(delivered.has_value()) << delivered.error().to_string();
        received = Tensor();
        get->reset();
    } else {
        EXPECT_FALSE(received.read_only());
        if (param.receive == Receive::into_dest) {
            EXPECT_EQ(received.storage(), dest.storage());
        }
    }
    auto done = (*put)->wait_for_completion(kHangGuard);
    EXPECT_TRUE(done.has_value()) << done.error().to_string();
}

std::vector<RoundTripCase> round_trip_cases() {
    std::vector<RoundTripCase> cases;
    for (std::size_t nbytes : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, kSlot, kSlot + 1,
                               std::size_t{64} << 20}) {
        for (Receive receive : {Receive::into_dest, Receive::allocated_copy, Receive::zero_copy}) {
            for (bool send_buffer : {false, true}) cases.push_back({nbytes, receive, send_buffer});
        }
    }
    return cases;
}

INSTANTIATE_TEST_SUITE_P(Sizes, ShmRoundTripTest, ::testing::ValuesIn(round_trip_cases()),
                         case_name);

TEST_F(ShmRelayTest, SendBufferIsPublishedInPlace) {
    // Writing into a send buffer after put_async breaks the contract, and is done here only
    // to prove that put_async moved no bytes: the receiver sees the late write.
    for (std::size_t nbytes : {std::size_t{128}, kSlot + 100}) {
        auto sender = make(options("sender", kSlot));
        auto receiver = make(options("receiver", kSlot));
        auto buffer = sender->allocate_send_buffer(nbytes);
        ASSERT_TRUE(buffer.has_value());
        std::memset(buffer->mutable_data(), 1, nbytes);
        auto put = sender->put_async(*buffer, "request");
        ASSERT_TRUE(put.has_value());
        buffer->mutable_data()[0] = std::byte{42};
        auto get = receiver->get_async((*put)->metadata(), Tensor(), "request");
        ASSERT_TRUE(get.has_value()) << get.error().to_string();
        EXPECT_EQ((*get)->tensor().data()[0], std::byte{42}) << nbytes;
        EXPECT_EQ((*get)->tensor().data()[1], std::byte{1});
    }
}

TEST_F(ShmRelayTest, SendBufferSubViewAndTypedTensorsMoveTheirBytes) {
    auto sender = make(options("sender", kSlot));
    auto receiver = make(options("receiver", kSlot));
    auto buffer = sender->allocate_send_buffer(1000);
    ASSERT_TRUE(buffer.has_value());
    for (int i = 0; i < 1000; ++i) buffer->mutable_data()[i] = static_cast<std::byte>(i);
    auto view = Tensor::from_storage(buffer->storage(), DType::u8, {100}, {}, 200);
    ASSERT_TRUE(view.has_value());
    auto put = sender->put_async(*view, "request");
    ASSERT_TRUE(put.has_value());
    auto get = receiver->get_async((*put)->metadata(), Tensor(), "request");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    EXPECT_TRUE(same_bytes((*get)->tensor(), *view));

    // A strided float tensor goes out as its elements in row-major order.
    Tensor matrix = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    auto transposed = Tensor::from_storage(matrix.storage(), DType::f32, {3, 2}, {1, 3});
    ASSERT_TRUE(transposed.has_value());
    auto put_matrix = sender->put_async(*transposed, "request");
    ASSERT_TRUE(put_matrix.has_value());
    auto dest = *Tensor::empty({3, 2}, DType::f32);
    auto get_matrix = receiver->get_async((*put_matrix)->metadata(), dest, "request");
    ASSERT_TRUE(get_matrix.has_value()) << get_matrix.error().to_string();
    EXPECT_TRUE(dest.equals(*transposed->clone()));
}

TEST_F(ShmRelayTest, ARelayReadsItsOwnTransfers) {
    auto relay = make(options("loop", kSlot));
    Tensor expected = pattern(5000, 3);
    auto put = relay->put_async(expected, "request");
    ASSERT_TRUE(put.has_value());
    auto get = relay->get_async((*put)->metadata(), Tensor(), "request");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    EXPECT_TRUE(same_bytes((*get)->tensor(), expected));
    EXPECT_TRUE((*put)->wait_for_completion(kHangGuard).has_value());
}

TEST_F(ShmRelayTest, ReceiverMapsAPeerPoolOnce) {
    auto sender = make(options("sender", kSlot));
    auto receiver = make(options("receiver", kSlot));
    for (int i = 0; i < 10; ++i) {
        auto put = sender->put_async(pattern(100, i), "request");
        ASSERT_TRUE(put.has_value());
        auto get = receiver->get_async((*put)->metadata(), Tensor(), "request");
        ASSERT_TRUE(get.has_value());
    }
    EXPECT_EQ(receiver->mapped_peer_pools(), 1u);
}

TEST_F(ShmRelayTest, CapabilitiesAndRegistry) {
    auto relay = make(options("caps"));
    EXPECT_EQ(relay->backend(), "shm");
    Capabilities capabilities = relay->capabilities();
    EXPECT_TRUE(capabilities.zero_copy_receive);
    EXPECT_FALSE(capabilities.cross_host);
    EXPECT_FALSE(capabilities.needs_rank_topology);
    EXPECT_TRUE(capabilities.credit_flow_control);

    ASSERT_TRUE(register_shm_backend().has_value());
    ASSERT_TRUE(register_shm_backend().has_value());  // idempotent
    auto created = create_relay(options("from-registry"));
    ASSERT_TRUE(created.has_value()) << created.error().to_string();
    EXPECT_EQ((*created)->backend(), "shm");
}

TEST_F(ShmRelayTest, RejectsBadOptions) {
    auto no_credits = ShmRelay::create(options("bad", kSlot, 0));
    ASSERT_FALSE(no_credits.has_value());
    EXPECT_EQ(no_credits.error().code, ErrorCode::invalid_argument);
    auto no_slot = ShmRelay::create(options("bad", 0, 4));
    ASSERT_FALSE(no_slot.has_value());
    EXPECT_EQ(no_slot.error().code, ErrorCode::invalid_argument);
}

TEST_F(ShmRelayTest, CallsAfterCloseFailWithFailedPrecondition) {
    auto relay = make(options("closing"));
    auto put = relay->put_async(pattern(10, 1), "request");
    ASSERT_TRUE(put.has_value());
    relay->close();
    relay->close();  // idempotent
    relay->cleanup("request");

    auto put_after = relay->put_async(pattern(10, 1), "request");
    ASSERT_FALSE(put_after.has_value());
    EXPECT_EQ(put_after.error().code, ErrorCode::failed_precondition);
    auto get_after = relay->get_async((*put)->metadata(), Tensor(), "request");
    ASSERT_FALSE(get_after.has_value());
    EXPECT_EQ(get_after.error().code, ErrorCode::failed_precondition);
    auto buffer_after = relay->allocate_send_buffer(10);
    ASSERT_FALSE(buffer_after.has_value());
    EXPECT_EQ(buffer_after.error().code, ErrorCode::failed_precondition);
}

TEST_F(ShmRelayTest, ClosedSenderIsUnavailableToReceivers) {
    auto sender = make(options("sender", kSlot));
    auto receiver = make(options("receiver", kSlot));
    auto first = sender->put_async(pattern(10, 1), "request");
    ASSERT_TRUE(first.has_value());
    ASSERT_TRUE(receiver->get_async((*first)->metadata(), Tensor(), "request").has_value());
    auto second = sender->put_async(pattern(10, 2), "request");
    ASSERT_TRUE(second.has_value());
    sender->close();
    auto get = receiver->get_async((*second)->metadata(), Tensor(), "request");
    ASSERT_FALSE(get.has_value());
    EXPECT_EQ(get.error().code, ErrorCode::unavailable) << get.error().message;
    EXPECT_EQ(receiver->mapped_peer_pools(), 0u);
}

TEST_F(ShmRelayTest, NothingIsLeftInDevShmAfterClose) {
    auto sender = make(options("sender", kSlot, 2));
    auto receiver = make(options("receiver", kSlot, 2, /*zero_copy=*/true));
    EXPECT_EQ(segments().size(), 2u);
    // Unread transfers of both kinds, an unsent dedicated send buffer and a live view.
    auto unread_slot = sender->put_async(pattern(10, 1), "a");
    auto unread_dedicated = sender->put_async(pattern(kSlot * 3, 2), "b");
    auto unsent = sender->allocate_send_buffer(kSlot * 2);
    auto read = sender->put_async(pattern(kSlot * 2, 3), "c");
    ASSERT_TRUE(unread_slot && unread_dedicated && unsent && read);
    auto view = receiver->get_async((*read)->metadata(), Tensor(), "c");
    ASSERT_TRUE(view.has_value());
    Tensor held = (*view)->tensor();
    // Two pools, both dedicated segments (the viewed one goes when its view does) and the
    // send buffer.
    EXPECT_EQ(segments().size(), 5u);

    sender->close();
    receiver->close();
    EXPECT_TRUE(segments().empty()) << segments().front();
    EXPECT_EQ(held.nbytes(), kSlot * 2);  // still mapped after the names went
    EXPECT_EQ(held.data()[0], pattern(kSlot * 2, 3).data()[0]);
}

TEST_F(ShmRelayTest, DeliveryWaitsForTheReaderToClaimTheTransfer) {
    auto sender = make(options("sender", kSlot, 1));
    auto receiver = make(options("receiver", kSlot, 1, /*zero_copy=*/true));
    ASSERT_TRUE(sender && receiver);
    for (std::size_t nbytes : {std::size_t{100}, kSlot * 2}) {  // a slot, a dedicated segment
        auto put = sender->put_async(pattern(nbytes, 5), "r");
        ASSERT_TRUE(put.has_value()) << put.error().to_string();
        auto undelivered = (*put)->wait_for_delivery(Duration(0));
        ASSERT_FALSE(undelivered.has_value());
        EXPECT_EQ(undelivered.error().code, ErrorCode::deadline_exceeded);
        // A reader on another thread claims it while the sender waits (woken, not polled),
        // and keeps its view until the sender has cleaned up.
        std::promise<void> cleaned_up;
        std::thread reader([&, done = cleaned_up.get_future()]() mutable {
            auto get = receiver->get_async((*put)->metadata(), Tensor(), "r");
            ASSERT_TRUE(get.has_value()) << get.error().to_string();
            ASSERT_TRUE((*get)->wait_for_completion(kHangGuard).has_value());
            Tensor view = (*get)->tensor();
            done.wait();
            EXPECT_TRUE(same_bytes(view, pattern(nbytes, 5)));
        });
        auto delivered = (*put)->wait_for_delivery(kHangGuard);
        EXPECT_TRUE(delivered.has_value()) << delivered.error().to_string();
        sender->cleanup("r");
        cleaned_up.set_value();
        reader.join();
        // The view is gone: the one credit is back for the next put.
    }
    auto again = sender->put_async(pattern(10, 6), "r2");
    ASSERT_TRUE(again.has_value()) << again.error().to_string();
}

TEST_F(ShmRelayTest, DestructorUnlinksLikeClose) {
    {
        auto relay = make(options("scoped", kSlot));
        auto put = relay->put_async(pattern(kSlot + 1, 1), "request");
        ASSERT_TRUE(put.has_value());
        EXPECT_EQ(segments().size(), 2u);
    }
    EXPECT_TRUE(segments().empty());
}

}  // namespace
}  // namespace omnirt::relay::testing
