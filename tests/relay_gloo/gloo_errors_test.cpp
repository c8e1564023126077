// The gloo relay's errors: arguments, metadata, timeouts, aborts, peers that go away, groups
// that never form, and the nccl backend this build does not have.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

#include "relay/registry.h"
#include "relay_gloo/gloo_world.h"
#include "support/ports.h"

namespace omnirt::relay::testing {
namespace {

using ::testing::HasSubstr;

void expect_error(const Status& status, ErrorCode code, const std::string& fragment) {
    ASSERT_FALSE(status.has_value())
        << "expected " << to_string(code) << " with '" << fragment << "'";
    EXPECT_EQ(status.error().code, code) << status.error().to_string();
    EXPECT_THAT(status.error().message, HasSubstr(fragment));
}

template <class T>
Status status_of(const Result<T>& result) {
    if (result) return {};
    return fail(result.error());
}

TEST(GlooRelayErrors, PutNeedsAValidPeerRank) {
    GlooWorld world(2);
    ASSERT_TRUE(world.formed(2));
    Tensor tensor = patterned(64, 1);
    expect_error(status_of(world[0].put_async(tensor, "r")), ErrorCode::invalid_argument,
                 "needs dst_rank");
    for (std::int64_t bad : {std::int64_t{-1}, std::int64_t{2}, std::int64_t{0}}) {
        expect_error(status_of(world[0].put_async(tensor, "r", bad)), ErrorCode::invalid_argument,
                     "is not a peer of rank 0");
    }
    auto strided = Tensor::from_storage(tensor.storage(), DType::u8, {8}, {2});
    ASSERT_TRUE(strided.has_value());
    expect_error(status_of(world[0].put_async(*strided, "r", 1)), ErrorCode::invalid_argument,
                 "contiguous");
    expect_error(status_of(world[0].put_async(Tensor{}, "r", 1)), ErrorCode::invalid_argument,
                 "undefined");
}

TEST(GlooRelayErrors, RejectsForeignCorruptedOrMisaddressedMetadata) {
    GlooWorld world(3);
    ASSERT_TRUE(world.formed(3));
    auto put = world[0].put_async(patterned(256, 3), "r", 1);
    ASSERT_TRUE(put.has_value()) << put.error().to_string();
    const Value good = (*put)->metadata();
    auto with = [&](std::string_view key, Value value) {
        Value changed = good;
        changed[key] = std::move(value);
        return changed;
    };
    auto without = [&](std::string_view key) {
        Value changed = good;
        changed.as_map().erase(std::string(key));
        return changed;
    };
    auto dest = Tensor::empty({256}, DType::u8);
    ASSERT_TRUE(dest.has_value());
    struct Case {
        Value metadata;
        std::string fragment;
    };
    const Case cases[] = {
        {Value("gloo"), "must be a map"},
        {with("backend", "shm"), "written by backend 'shm'"},
        {with("nbytes", "256"), "nbytes"},
        {with("group", "0123"), "belongs to process group"},
        {without("group"), "no 'group' string"},
        {with("src_rank", 3), "outside the process group of 3 ranks"},
        {with("src_rank", -1), "outside the process group"},
        {with("src_rank", "0"), "no integer 'src_rank'"},
        {with("src_rank", 1), "own rank 1 as sender"},
        {with("dst_rank", 2), "addresses rank 2 but this relay is rank 1"},
        {with("tag", std::int64_t{1} << 31), "outside [0, 2^31)"},
        {without("tag"), "no integer 'tag'"},
        {with("dtype", "complex64"), "unknown dtype"},
        {with("shape", List{Value(255)}), "do not account for exactly"},
        {with("shape", List{Value(-256)}), "non-negative"},
        {with("shape", "256"), "no 'shape' list"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.metadata.debug_string());
        expect_error(status_of(world[1].get_async(c.metadata, *dest, "r")),
                     ErrorCode::invalid_argument, c.fragment);
    }
    // Destinations that do not fit.
    auto small = Tensor::empty({255}, DType::u8);
    ASSERT_TRUE(small.has_value());
    expect_error(status_of(world[1].get_async(good, *small, "r")), ErrorCode::invalid_argument,
                 "holds 255 bytes but the transfer carries 256");
    auto read_only = Tensor::from_storage(
        Storage::wrap(dest->mutable_data(), 256, Device::cpu(), nullptr, true), DType::u8, {256});
    ASSERT_TRUE(read_only.has_value());
    expect_error(status_of(world[1].get_async(good, *read_only, "r")), ErrorCode::invalid_argument,
                 "read-only");

    // None of that disturbed the transfer itself.
    auto get = world[1].get_async(good, *dest, "r");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    ASSERT_TRUE((*get)->wait_for_completion(kGuard).has_value());
    EXPECT_EQ(pattern_mismatch(*dest, 3), "");
    EXPECT_TRUE((*put)->wait_for_completion(kGuard).has_value());
}

TEST(GlooRelayErrors, SendWaitTimesOutWhileNobodyReceivesAndTheTransferSurvives) {
    GlooWorld world(2);
    ASSERT_TRUE(world.formed(2));
    auto put = world[0].put_async(patterned(1 << 20, 5), "late", 1);
    ASSERT_TRUE(put.has_value()) << put.error().to_string();
    expect_error((*put)->wait_for_completion(200ms), ErrorCode::deadline_exceeded,
                 "did not complete within 200 ms");
    expect_error((*put)->wait_for_completion(0ms), ErrorCode::deadline_exceeded, "within 0 ms");

    // The timeout closed nothing: another transfer goes through, then the late one completes.
    auto other = world[0].put_async(patterned(4096, 6), "other", 1);
    ASSERT_TRUE(other.has_value());
    auto other_get = world[1].get_async((*other)->metadata(), Tensor{}, "other");
    ASSERT_TRUE(other_get.has_value()) << other_get.error().to_string();
    ASSERT_TRUE((*other_get)->wait_for_completion(kGuard).has_value());
    EXPECT_EQ(pattern_mismatch((*other_get)->tensor(), 6), "");

    auto get = world[1].get_async((*put)->metadata(), Tensor{}, "late");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    ASSERT_TRUE((*get)->wait_for_completion(kGuard).has_value());
    EXPECT_EQ(pattern_mismatch((*get)->tensor(), 5), "");
    EXPECT_TRUE((*put)->wait_for_completion(kGuard).has_value());
}

TEST(GlooRelayErrors, WaitsLongerThanTheTransportTimeoutDoNotTearTheGroupDown) {
    // Gloo closes every connection when its own timeout fires in a wait; the relay waits in
    // slices below it, so a wait past it is an ordinary deadline and the group lives on.
    GlooWorld world(2, loopback(4s));  // 4 s: time to form the group on a loaded machine
    ASSERT_TRUE(world.formed(2));
    auto put = world[0].put_async(patterned(64, 7), "slow", 1);
    ASSERT_TRUE(put.has_value()) << put.error().to_string();
    expect_error((*put)->wait_for_completion(9000ms), ErrorCode::deadline_exceeded, "9000 ms");
    auto get = world[1].get_async((*put)->metadata(), Tensor{}, "slow");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    auto received = (*get)->wait_for_completion(kGuard);
    ASSERT_TRUE(received.has_value()) << received.error().to_string();
    EXPECT_EQ(pattern_mismatch((*get)->tensor(), 7), "");
    EXPECT_TRUE((*put)->wait_for_completion(kGuard).has_value());
}

TEST(GlooRelayErrors, ReceiveWaitTimesOutThenCleanupAbortsIt) {
    GlooWorld world(2);
    ASSERT_TRUE(world.formed(2));
    auto put = world[0].put_async(patterned(64, 8), "r", 1);
    ASSERT_TRUE(put.has_value());
    Value never_sent = (*put)->metadata();
    never_sent["tag"] = 1000;  // a transfer rank 0 has not put
    auto get = world[1].get_async(never_sent, Tensor{}, "orphan");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    expect_error((*get)->wait_for_completion(100ms), ErrorCode::deadline_exceeded,
                 "is the sender alive");
    world[1].cleanup("orphan");
    expect_error((*get)->wait_for_completion(kGuard), ErrorCode::aborted, "cleanup(orphan)");
    world[1].cleanup("orphan");  // idempotent
}

TEST(GlooRelayErrors, CleanupWakesAWaiterWithAborted) {
    GlooWorld world(2);
    ASSERT_TRUE(world.formed(2));
    auto put = world[0].put_async(patterned(64, 9), "doomed", 1);
    ASSERT_TRUE(put.has_value());
    Status waited;
    std::jthread waiter([&] { waited = (*put)->wait_for_completion(kGuard); });
    world[0].cleanup("doomed");
    waiter.join();
    expect_error(waited, ErrorCode::aborted, "cleanup(doomed)");
    // Other requests are unaffected.
    auto next = world[0].put_async(patterned(64, 10), "next", 1);
    ASSERT_TRUE(next.has_value());
    auto get = world[1].get_async((*next)->metadata(), Tensor{}, "next");
    ASSERT_TRUE(get.has_value());
    ASSERT_TRUE((*get)->wait_for_completion(kGuard).has_value());
    EXPECT_EQ(pattern_mismatch((*get)->tensor(), 10), "");
}

TEST(GlooRelayErrors, CloseAbortsPendingOperationsAndIsIdempotent) {
    GlooWorld world(2);
    ASSERT_TRUE(world.formed(2));
    auto put = world[0].put_async(patterned(64, 11), "r", 1);
    ASSERT_TRUE(put.has_value());
    auto incoming = world[1].put_async(patterned(64, 12), "r", 0);
    ASSERT_TRUE(incoming.has_value());
    world[0].close();
    expect_error((*put)->wait_for_completion(kGuard), ErrorCode::aborted, "closed");
    expect_error(status_of(world[0].put_async(patterned(64, 12), "r", 1)),
                 ErrorCode::failed_precondition, "closed");
    expect_error(status_of(world[0].get_async((*incoming)->metadata(), Tensor{}, "r")),
                 ErrorCode::failed_precondition, "closed");
    world[0].close();
    world[0].cleanup("r");
}

TEST(GlooRelayErrors, APeerThatGoesAwayFailsTransfersWaitingOnIt) {
    GlooWorld world(2);
    ASSERT_TRUE(world.formed(2));
    auto put = world[0].put_async(patterned(64, 13), "r", 1);
    ASSERT_TRUE(put.has_value());
    Value never_sent = (*put)->metadata();
    never_sent["tag"] = 77;
    auto get = world[1].get_async(never_sent, Tensor{}, "r");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    world.relays()[0].reset();  // rank 0 closes its connections, as a dying process does
    expect_error((*get)->wait_for_completion(kGuard), ErrorCode::unavailable, "failed");
    auto after = world[1].put_async(patterned(64, 14), "r", 0);
    Status sent = after ? (*after)->wait_for_completion(kGuard) : status_of(after);
    expect_error(sent, ErrorCode::unavailable, "");
}

TEST(GlooRelayErrors, RendezvousTimesOutWhenARankNeverJoins) {
    for (std::int64_t present : {0, 1}) {
        SCOPED_TRACE("only rank " + std::to_string(present) + " of 2 starts");
        TempDir dir;
        auto relays =
            create_ranks(2, "file://" + dir.path() + "/store", loopback(500ms), {present});
        ASSERT_EQ(relays.size(), 1u);
        expect_error(status_of(relays[0]), ErrorCode::deadline_exceeded, "within 500 ms");
        EXPECT_THAT(relays[0].error().message, HasSubstr("rank " + std::to_string(present)));
    }
}

TEST(GlooRelayErrors, TcpRendezvousFormsAGroup) {
    const int port = omnirt::testing::free_ports(1);
    ASSERT_GT(port, 0);
    auto relays = create_ranks(2, "tcp://127.0.0.1:" + std::to_string(port), loopback());
    ASSERT_TRUE(relays[0].has_value()) << relays[0].error().to_string();
    ASSERT_TRUE(relays[1].has_value()) << relays[1].error().to_string();
    auto put = (*relays[1])->put_async(patterned(3000, 15), "r", 0);
    ASSERT_TRUE(put.has_value());
    auto get = (*relays[0])->get_async((*put)->metadata(), Tensor{}, "r");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    ASSERT_TRUE((*get)->wait_for_completion(kGuard).has_value());
    EXPECT_EQ(pattern_mismatch((*get)->tensor(), 15), "");
}

TEST(GlooRelayErrors, RejectsMalformedOptions) {
    TempDir dir;
    const std::string file = "file://" + dir.path() + "/store";
    auto create = [](RelayOptions options) {
        return status_of(create_c10d_relay(options, loopback(500ms)));
    };
    expect_error(create(gloo_options(0, 2, "nfs://x")), ErrorCode::invalid_argument,
                 "must be file://<path> or tcp://host:port");
    expect_error(create(gloo_options(0, 2, "tcp://localhost")), ErrorCode::invalid_argument,
                 "not tcp://host:port");
    expect_error(create(gloo_options(0, 2, "tcp://localhost:99999")), ErrorCode::invalid_argument,
                 "not tcp://host:port");
    expect_error(create(gloo_options(2, 2, file)), ErrorCode::invalid_argument,
                 "rank 2 is outside [0, 2)");
    expect_error(create(gloo_options(0, 0, file)), ErrorCode::invalid_argument, "world_size 0");
    RelayOptions on_gpu = gloo_options(0, 1, file);
    on_gpu.device = Device::cuda(0);
    expect_error(create(on_gpu), ErrorCode::invalid_argument, "device must be cpu");
}

TEST(GlooRelayErrors, NcclNeedsACudaLibtorch) {
    ASSERT_TRUE(register_c10d_backends().has_value());
    ASSERT_TRUE(register_c10d_backends().has_value());  // idempotent
    auto names = registered_backends();
    EXPECT_NE(std::find(names.begin(), names.end(), "gloo"), names.end());
    EXPECT_EQ(std::find(names.begin(), names.end(), "nccl"), names.end());
    RelayOptions options = gloo_options(0, 2, "file:///nonexistent/store");
    options.backend = "nccl";
    auto relay = create_relay(options);
    expect_error(status_of(relay), ErrorCode::unimplemented, "needs a CUDA build of libtorch");
    expect_error(status_of(create_c10d_relay(options)), ErrorCode::unimplemented,
                 "needs a CUDA build of libtorch");
}

TEST(GlooRelayErrors, RegisteredFactoryCreatesGlooRelays) {
    ASSERT_TRUE(register_c10d_backends().has_value());
    TempDir dir;
    auto relay = create_relay(gloo_options(0, 1, "file://" + dir.path() + "/store"));
    ASSERT_TRUE(relay.has_value()) << relay.error().to_string();
    EXPECT_EQ((*relay)->backend(), "gloo");
}

}  // namespace
}  // namespace omnirt::relay::testing
