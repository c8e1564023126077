// The ucx relay with two instances (two UCX workers) in one process: round trips of every size
// class, send buffers that move no bytes, many transfers from several threads, credits and
// backpressure, timeouts, cleanup and close. Waits are bounded by kHangGuard; nothing sleeps to
// synchronise.
#include "relay/ucx/ucx_relay.h"

#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <thread>

#include "relay/registry.h"
#include "support/threads.h"

namespace omnirt::relay {
namespace {

using namespace std::chrono_literals;
constexpr Duration kHangGuard = 60s;
constexpr std::size_t kSlot = 64 << 10;

RelayOptions options(const std::string& name, std::size_t slot_bytes = kSlot,
                     std::int64_t credits = 4) {
    return RelayOptions{
        .backend = "ucx", .name = name, .slot_bytes = slot_bytes, .credits = credits};
}

std::unique_ptr<Relay> make(const RelayOptions& relay_options) {
    auto relay = create_ucx_relay(relay_options);
    EXPECT_TRUE(relay.has_value()) << relay.error().to_string();
    return relay ? std::move(*relay) : nullptr;
}

// `nbytes` bytes that depend on `seed`, so that a mix-up shows.
Tensor pattern(std::size_t nbytes, std::uint32_t seed) {
    auto tensor = Tensor::empty({static_cast<std::int64_t>(nbytes)}, DType::u8);
    EXPECT_TRUE(tensor.has_value());
    auto* bytes = reinterpret_cast<std::uint8_t*>(tensor->mutable_data());
    std::uint32_t state = seed * 2654435761u + 12345u;
    for (std::size_t i = 0; i < nbytes; ++i) {
        if (i % 4 == 0) state = state * 1664525u + 1013904223u;
        bytes[i] = static_cast<std::uint8_t>(state >> (8 * (i % 4)));
    }
    return *tensor;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
    if (a.nbytes() != b.nbytes()) return false;
    return a.nbytes() == 0 || std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Reads `put`'s transfer with `receiver` and checks the bytes against `expected`.
void read_and_check(Relay& receiver, PutOperation& put, const Tensor& expected,
                    const std::string& request_id = "request") {
    auto get = receiver.get_async(put.metadata(), Tensor(), request_id);
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    auto status = (*get)->wait_for_completion(kHangGuard);
    ASSERT_TRUE(status.has_value()) << status.error().to_string();
    EXPECT_TRUE(same_bytes((*get)->tensor(), expected));
    auto confirmed = put.wait_for_completion(kHangGuard);
    EXPECT_TRUE(confirmed.has_value()) << confirmed.error().to_string();
}

struct RoundTripCase {
    std::size_t nbytes;
    bool into_dest;
    bool send_buffer;
};

class UcxRoundTripTest : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(UcxRoundTripTest, DeliversTheBytesAndConfirms) {
    const RoundTripCase& param = GetParam();
    auto sender = make(options("sender"));
    auto receiver = make(options("receiver"));
    ASSERT_TRUE(sender && receiver);
    Tensor expected = pattern(param.nbytes, 7);
    Tensor source = expected;
    if (param.send_buffer) {
        auto buffer = sender->allocate_send_buffer(param.nbytes);
        ASSERT_TRUE(buffer.has_value()) << buffer.error().to_string();
        ASSERT_EQ(buffer->nbytes(), param.nbytes);
        if (param.nbytes > 0) std::memcpy(buffer->mutable_data(), expected.data(), param.nbytes);
        source = *buffer;
    }
    auto put = sender->put_async(source, "request");
    ASSERT_TRUE(put.has_value()) << put.error().to_string();
    source = Tensor();
    const Value& metadata = (*put)->metadata();
    EXPECT_EQ(metadata.find("backend")->as_string(), "ucx");
    EXPECT_EQ(metadata.find("nbytes")->as_int(), static_cast<std::int64_t>(param.nbytes));
    for (const char* field : {"address", "rkey"}) EXPECT_TRUE(metadata.find(field)->is_bytes());
    for (const char* field : {"remote_addr", "transfer_id"}) {
        EXPECT_TRUE(metadata.find(field)->is_int());
    }
    EXPECT_TRUE(metadata.find("sender")->is_string());

    Tensor dest;
    if (param.into_dest)
        dest = *Tensor::empty({static_cast<std::int64_t>(param.nbytes)}, DType::u8);
    auto get = receiver->get_async(metadata, dest, "request");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    auto status = (*get)->wait_for_completion(kHangGuard);
    ASSERT_TRUE(status.has_value()) << status.error().to_string();
    Tensor received = (*get)->tensor();
    EXPECT_TRUE(same_bytes(received, expected));
    if (param.into_dest) {
        EXPECT_EQ(received.storage(), dest.storage());
    }
    auto confirmed = (*put)->wait_for_completion(kHangGuard);
    EXPECT_TRUE(confirmed.has_value()) << confirmed.error().to_string();
}

std::vector<RoundTripCase> round_trip_cases() {
    std::vector<RoundTripCase> cases;
    for (std::size_t nbytes : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, kSlot, kSlot + 1,
                               std::size_t{64} << 20}) {
        for (bool into_dest : {true, false}) {
            for (bool send_buffer : {false, true})
                cases.push_back({nbytes, into_dest, send_buffer});
        }
    }
    return cases;
}

std::string case_name(const ::testing::TestParamInfo<RoundTripCase>& info) {
    return std::to_string(info.param.nbytes) + "B" +
           (info.param.into_dest ? "_IntoDest" : "_Allocated") +
           (info.param.send_buffer ? "_SendBuffer" : "_Tensor");
}

INSTANTIATE_TEST_SUITE_P(Sizes, UcxRoundTripTest, ::testing::ValuesIn(round_trip_cases()),
                         case_name);

TEST(UcxRelayTest, SendBufferIsPublishedInPlace) {
    // Writing into a send buffer after put_async breaks the contract; done here only to prove
    // that put_async copied nothing: the receiver sees the late write.
    auto sender = make(options("sender"));
    auto receiver = make(options("receiver"));
    for (std::size_t nbytes : {std::size_t{128}, kSlot + 100}) {
        auto buffer = sender->allocate_send_buffer(nbytes);
        ASSERT_TRUE(buffer.has_value());
        std::memset(buffer->mutable_data(), 1, nbytes);
        auto put = sender->put_async(*buffer, "request");
        ASSERT_TRUE(put.has_value());
        EXPECT_EQ((*put)->metadata().find("remote_addr")->as_int(),
                  reinterpret_cast<std::intptr_t>(buffer->data()));
        buffer->mutable_data()[0] = std::byte{42};
        auto get = receiver->get_async((*put)->metadata(), Tensor(), "request");
        ASSERT_TRUE(get.has_value()) << get.error().to_string();
        ASSERT_TRUE((*get)->wait_for_completion(kHangGuard).has_value());
        EXPECT_EQ((*get)->tensor().data()[0], std::byte{42}) << nbytes;
        EXPECT_EQ((*get)->tensor().data()[1], std::byte{1});
        EXPECT_TRUE((*put)->wait_for_completion(kHangGuard).has_value());
    }
}

TEST(UcxRelayTest, LargeTransfersReuseTheirMapping) {
    auto sender = make(options("sender"));
    auto receiver = make(options("receiver"));
    std::int64_t region = 0;
    for (int i = 0; i < 3; ++i) {
        Tensor expected = pattern(3 * kSlot + static_cast<std::size_t>(i), i);
        auto put = sender->put_async(expected, "request");
        ASSERT_TRUE(put.has_value());
        std::int64_t used = (*put)->metadata().find("shm_region")->as_int();
        if (i > 0) {
            EXPECT_EQ(used, region) << "a confirmed transfer's mapping is reused";
        }
        region = used;
        read_and_check(*receiver, **put, expected);
    }
}

TEST(UcxRelayTest, StridedAndTypedTensorsMoveTheirElements) {
    auto sender = make(options("sender"));
    auto receiver = make(options("receiver"));
    Tensor matrix = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    auto transposed = Tensor::from_storage(matrix.storage(), DType::f32, {3, 2}, {1, 3});
    ASSERT_TRUE(transposed.has_value());
    auto put = sender->put_async(*transposed, "request");
    ASSERT_TRUE(put.has_value());
    auto dest = *Tensor::empty({3, 2}, DType::f32);
    auto get = receiver->get_async((*put)->metadata(), dest, "request");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    ASSERT_TRUE((*get)->wait_for_completion(kHangGuard).has_value());
    EXPECT_TRUE(dest.equals(*transposed->clone()));
}

TEST(UcxRelayTest, ARelayReadsItsOwnTransfers) {
    auto relay = make(options("loop"));
    Tensor expected = pattern(5000, 3);
    auto put = relay->put_async(expected, "request");
    ASSERT_TRUE(put.has_value());
    read_and_check(*relay, **put, expected);
}

TEST(UcxRelayTest, ManyTransfersFromSeveralThreads) {
    auto sender = make(options("sender", kSlot, 3));
    auto receiver = make(options("receiver"));
    constexpr int kThreads = 4;
    constexpr int kPerThread = 40;
    std::vector<std::thread> threads;
    std::atomic<int> delivered{0};
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < kPerThread; ++i) {
                std::size_t nbytes = (static_cast<std::size_t>(i) * 7919 + t * 131) % (3 * kSlot);
                Tensor expected = pattern(nbytes, t * 1000 + i);
                auto request = "request-" + std::to_string(t);
                auto put = sender->put_async(expected, request);
                ASSERT_TRUE(put.has_value()) << put.error().to_string();
                read_and_check(*receiver, **put, expected, request);
                delivered++;
            }
        });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(delivered.load(), kThreads * kPerThread);
}

TEST(UcxRelayTest, OutOfCreditsPutBlocksUntilAReceiverConfirms) {
    auto sender = make(options("sender", kSlot, 2));
    auto receiver = make(options("receiver"));
    Tensor first = pattern(100, 1);
    auto put1 = sender->put_async(first, "request");
    auto put2 = sender->put_async(pattern(kSlot * 2, 2), "request");  // dedicated: one credit
    ASSERT_TRUE(put1.has_value() && put2.has_value());
    Tensor third = pattern(300, 3);
    auto blocked =
        std::async(std::launch::async, [&] { return sender->put_async(third, "request"); });
    // Not a synchronisation: only a check that the put is still waiting for a credit.
    EXPECT_EQ(blocked.wait_for(100ms), std::future_status::timeout);
    read_and_check(*receiver, **put1, first);
    auto put3 = blocked.get();
    ASSERT_TRUE(put3.has_value()) << put3.error().to_string();
    read_and_check(*receiver, **put3, third);
}

TEST(UcxRelayTest, SendBuffersDoNotBlockWhenSlotsRunOut) {
    auto sender = make(options("sender", kSlot, 1));
    auto receiver = make(options("receiver"));
    auto in_slot = sender->allocate_send_buffer(10);
    auto spare = sender->allocate_send_buffer(10);  // no slot left: plain memory, no blocking
    ASSERT_TRUE(in_slot.has_value() && spare.has_value());
    std::memset(in_slot->mutable_data(), 5, 10);
    std::memset(spare->mutable_data(), 9, 10);
    Tensor first = *in_slot->clone();
    auto put = sender->put_async(*in_slot, "request");  // the slot is its own credit
    ASSERT_TRUE(put.has_value());
    *in_slot = Tensor();
    read_and_check(*receiver, **put, first);
    // The slot came back with the confirmation: the spare is copied into it without blocking.
    auto put_spare = sender->put_async(*spare, "request");
    ASSERT_TRUE(put_spare.has_value());
    read_and_check(*receiver, **put_spare, *spare);
}

TEST(UcxRelayTest, WaitTimesOutWhileNobodyReadsThenCompletes) {
    auto sender = make(options("sender"));
    auto receiver = make(options("receiver"));
    Tensor expected = pattern(1000, 5);
    auto put = sender->put_async(expected, "request");
    ASSERT_TRUE(put.has_value());
    auto early = (*put)->wait_for_completion(20ms);
    ASSERT_FALSE(early.has_value());
    EXPECT_EQ(early.error().code, ErrorCode::deadline_exceeded);
    EXPECT_NE(early.error().message.find("has not confirmed"), std::string::npos);
    read_and_check(*receiver, **put, expected);
    // Extreme timeouts on a finished operation return at once.
    EXPECT_TRUE((*put)->wait_for_completion(Duration::max()).has_value());
    EXPECT_TRUE((*put)->wait_for_completion(Duration(-5)).has_value());
}

TEST(UcxRelayTest, CleanupAbortsTheRequestAndReturnsItsCredits) {
    auto sender = make(options("sender", kSlot, 1));
    auto receiver = make(options("receiver"));
    auto kept = sender->put_async(pattern(10, 1), "other");
    ASSERT_TRUE(kept.has_value());
    sender->cleanup("other");  // frees the only credit
    auto aborted = (*kept)->wait_for_completion(kHangGuard);
    ASSERT_FALSE(aborted.has_value());
    EXPECT_EQ(aborted.error().code, ErrorCode::aborted);

    auto pending = sender->put_async(pattern(kSlot * 3, 2), "doomed");
    ASSERT_TRUE(pending.has_value());
    sender->cleanup("unrelated");
    EXPECT_FALSE((*pending)->wait_for_completion(0ms).has_value());
    sender->cleanup("doomed");
    sender->cleanup("doomed");  // idempotent
    auto status = (*pending)->wait_for_completion(kHangGuard);
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().code, ErrorCode::aborted);

    // The credit is back: this put does not block.
    Tensor expected = pattern(100, 3);
    auto next = std::async(std::launch::async, [&] { return sender->put_async(expected, "next"); });
    ASSERT_EQ(next.wait_for(kHangGuard), std::future_status::ready);
    auto put = next.get();
    ASSERT_TRUE(put.has_value());
    read_and_check(*receiver, **put, expected, "next");
}

TEST(UcxRelayTest, CloseAbortsPendingAndBlockedPuts) {
    auto sender = make(options("sender", kSlot, 1));
    auto pending = sender->put_async(pattern(10, 1), "request");
    ASSERT_TRUE(pending.has_value());
    auto blocked = std::async(std::launch::async,
                              [&] { return sender->put_async(pattern(10, 2), "request"); });
    sender->close();
    auto status = (*pending)->wait_for_completion(kHangGuard);
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().code, ErrorCode::aborted);
    ASSERT_EQ(blocked.wait_for(kHangGuard), std::future_status::ready);
    auto late = blocked.get();
    ASSERT_FALSE(late.has_value());  // aborted while waiting, or refused after close
    EXPECT_TRUE(late.error().code == ErrorCode::aborted ||
                late.error().code == ErrorCode::failed_precondition)
        << late.error().to_string();
}

TEST(UcxRelayTest, CallsAfterCloseFailAndCloseIsIdempotent) {
    auto sender = make(options("sender"));
    auto receiver = make(options("receiver"));
    auto put = sender->put_async(pattern(10, 1), "request");
    ASSERT_TRUE(put.has_value());
    Value metadata = (*put)->metadata();
    receiver->close();
    receiver->close();
    receiver->cleanup("request");
    auto get = receiver->get_async(metadata, Tensor(), "request");
    ASSERT_FALSE(get.has_value());
    EXPECT_EQ(get.error().code, ErrorCode::failed_precondition);
    sender->close();
    auto late_put = sender->put_async(pattern(10, 1), "request");
    ASSERT_FALSE(late_put.has_value());
    EXPECT_EQ(late_put.error().code, ErrorCode::failed_precondition);
    EXPECT_FALSE(sender->allocate_send_buffer(10).has_value());
}

TEST(UcxRelayTest, SendBufferOutlivesItsRelay) {
    auto sender = make(options("sender"));
    auto buffer = sender->allocate_send_buffer(kSlot);
    ASSERT_TRUE(buffer.has_value());
    sender.reset();
    std::memset(buffer->mutable_data(), 3, kSlot);  // still mapped: the lease keeps it
    EXPECT_EQ(buffer->data()[kSlot - 1], std::byte{3});
}

TEST(UcxRelayTest, CloseLeavesNoThreads) {
    // A first relay starts UCX's process-wide state (its async thread lives while any worker
    // does); the count is taken once that exists.
    auto anchor = make(options("anchor"));
    const std::size_t before = omnirt::testing::process_thread_count();
    {
        auto sender = make(options("sender"));
        auto receiver = make(options("receiver"));
        Tensor expected = pattern(100, 1);
        auto put = sender->put_async(expected, "request");
        ASSERT_TRUE(put.has_value());
        read_and_check(*receiver, **put, expected);
        EXPECT_GT(omnirt::testing::process_thread_count(), before);
        receiver->close();
        sender->close();
        EXPECT_TRUE(omnirt::testing::thread_count_settles_to(before));
    }
    EXPECT_TRUE(omnirt::testing::thread_count_settles_to(before));
}

TEST(UcxRelayTest, CapabilitiesRegistryAndOptions) {
    auto relay = make(options("caps"));
    EXPECT_EQ(relay->backend(), "ucx");
    Capabilities capabilities = relay->capabilities();
    EXPECT_TRUE(capabilities.cross_host);
    EXPECT_FALSE(capabilities.zero_copy_receive);
    EXPECT_FALSE(capabilities.needs_rank_topology);
    EXPECT_FALSE(capabilities.device_memory);
    EXPECT_TRUE(capabilities.credit_flow_control);

    ASSERT_TRUE(register_ucx_backend().has_value());
    ASSERT_TRUE(register_ucx_backend().has_value());  // idempotent
    auto created = create_relay(options("from-registry"));
    ASSERT_TRUE(created.has_value()) << created.error().to_string();
    EXPECT_EQ((*created)->backend(), "ucx");

    auto no_credits = create_ucx_relay(options("bad", kSlot, 0));
    ASSERT_FALSE(no_credits.has_value());
    EXPECT_EQ(no_credits.error().code, ErrorCode::invalid_argument);
    auto cuda = options("cuda");
    cuda.device = Device::cuda(0);
    auto on_gpu = create_ucx_relay(cuda);
    ASSERT_FALSE(on_gpu.has_value());
    EXPECT_EQ(on_gpu.error().code, ErrorCode::unimplemented);
}

}  // namespace
}  // namespace omnirt::relay
