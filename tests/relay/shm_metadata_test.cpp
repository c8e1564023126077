// The shm receiver trusts nothing in metadata: every malformed, foreign, out-of-range, stale
// or corrupted case is refused with a clear reason, and refusing never consumes the transfer.
#include <gtest/gtest.h>

#include <functional>

#include "relay/shm/segment.h"
#include "shm_test_support.h"

namespace omnirt::relay::testing {
namespace {

constexpr std::size_t kSlot = 4096;

struct Rejection {
    std::string what;
    std::function<void(Map&)> mutate;
    ErrorCode code;
    std::string message_part;
};

class ShmMetadataTest : public ShmRelayTest {
  protected:
    void SetUp() override {
        ShmRelayTest::SetUp();
        sender_ = make(options("sender", kSlot, 2));
        receiver_ = make(options("receiver", kSlot, 2));
    }

    void expect_rejected(const Value& metadata, ErrorCode code, const std::string& part,
                         const std::string& what, Tensor dest = Tensor()) {
        auto get = receiver_->get_async(metadata, dest, "request");
        ASSERT_FALSE(get.has_value()) << what;
        EXPECT_EQ(get.error().code, code) << what << ": " << get.error().to_string();
        EXPECT_NE(get.error().message.find(part), std::string::npos)
            << what << ": '" << get.error().message << "' lacks '" << part << "'";
    }

    void expect_all_rejected(const Value& good, const std::vector<Rejection>& cases) {
        for (const auto& rejection : cases) {
            Map map = good.as_map();
            rejection.mutate(map);
            expect_rejected(Value(map), rejection.code, rejection.message_part, rejection.what);
        }
    }

    std::string our_segment(const std::string& relay, std::uint64_t serial,
                            pid_t pid = ::getpid()) const {
        return shm::format_segment_name(
            {.instance = instance_, .pid = pid, .relay = relay, .serial = serial});
    }

    std::unique_ptr<ShmRelay> sender_;
    std::unique_ptr<ShmRelay> receiver_;
};

std::int64_t int_field(const Map& map, const std::string& key) { return map.at(key).as_int(); }

TEST_F(ShmMetadataTest, RefusesBadSlotMetadataWithoutConsumingTheTransfer) {
    Tensor expected = pattern(100, 1);
    auto put = sender_->put_async(expected, "request");
    ASSERT_TRUE(put.has_value());
    const Value good = (*put)->metadata();
    const std::string other_pid_segment = our_segment("sender", 0, ::getpid() + 1);

    expect_rejected(Value(5), ErrorCode::invalid_argument, "must be a map", "not a map");
    expect_all_rejected(
        good,
        {
            {"foreign backend", [](Map& m) { m["backend"] = "ucx"; }, ErrorCode::invalid_argument,
             "'ucx'"},
            {"no backend", [](Map& m) { m.erase("backend"); }, ErrorCode::invalid_argument,
             "'backend'"},
            {"no nbytes", [](Map& m) { m.erase("nbytes"); }, ErrorCode::invalid_argument, "nbytes"},
            {"negative nbytes", [](Map& m) { m["nbytes"] = -1; }, ErrorCode::invalid_argument,
             "nbytes"},
            {"string nbytes", [](Map& m) { m["nbytes"] = "100"; }, ErrorCode::invalid_argument,
             "nbytes"},
            {"unknown kind", [](Map& m) { m["kind"] = "pool"; }, ErrorCode::invalid_argument,
             "'kind'"},
            {"no segment", [](Map& m) { m.erase("segment"); }, ErrorCode::invalid_argument,
             "'segment'"},
            {"foreign segment", [](Map& m) { m["segment"] = "/etc"; }, ErrorCode::invalid_argument,
             "not an omnirt"},
            {"segment of another pid", [&](Map& m) { m["segment"] = other_pid_segment; },
             ErrorCode::invalid_argument, "was not created by owner_pid"},
            {"string owner", [](Map& m) { m["owner_pid"] = "me"; }, ErrorCode::invalid_argument,
             "'owner_pid' must be an integer"},
            {"negative owner", [](Map& m) { m["owner_pid"] = -5; }, ErrorCode::invalid_argument,
             "'owner_pid'"},
            {"no slot", [](Map& m) { m.erase("slot"); }, ErrorCode::invalid_argument, "'slot'"},
            {"slot out of range", [](Map& m) { m["slot"] = 1000; }, ErrorCode::invalid_argument,
             "out of range"},
            {"negative slot", [](Map& m) { m["slot"] = -1; }, ErrorCode::invalid_argument,
             "'slot'"},
            {"huge generation", [](Map& m) { m["generation"] = std::int64_t{1} << 40; },
             ErrorCode::invalid_argument, "'generation'"},
            {"offset before the slot", [](Map& m) { m["offset"] = 0; }, ErrorCode::invalid_argument,
             "outside slot"},
            {"offset inside the slot but not posted",
             [](Map& m) { m["offset"] = int_field(m, "offset") + 8; }, ErrorCode::invalid_argument,
             "does not match"},
            {"nbytes beyond the slot", [](Map& m) { m["nbytes"] = kSlot + 1; },
             ErrorCode::invalid_argument, "outside slot"},
            {"nbytes beyond the segment", [](Map& m) { m["nbytes"] = std::int64_t{1} << 50; },
             ErrorCode::invalid_argument, "outside slot"},
            {"nbytes smaller than posted", [](Map& m) { m["nbytes"] = 50; },
             ErrorCode::invalid_argument, "does not match"},
            {"stale generation", [](Map& m) { m["generation"] = int_field(m, "generation") + 1; },
             ErrorCode::not_found, "stale"},
            {"other pool incarnation", [](Map& m) { m["pool_id"] = int_field(m, "pool_id") ^ 1; },
             ErrorCode::not_found, "recreated"},
            {"segment that does not exist",
             [&](Map& m) { m["segment"] = our_segment("sender", 999999); }, ErrorCode::unavailable,
             "does not exist"},
            {"pool read as dedicated",
             [](Map& m) {
                 m["kind"] = "dedicated";
                 m["segment_id"] = 1;
             },
             ErrorCode::data_loss, "bad magic"},
        });
    expect_rejected(good, ErrorCode::invalid_argument, "destination has", "short destination",
                    *Tensor::empty({99}, DType::u8));

    auto get = receiver_->get_async(good, Tensor(), "request");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    EXPECT_TRUE(same_bytes((*get)->tensor(), expected));
    expect_rejected(good, ErrorCode::not_found, "already consumed", "read twice");
}

TEST_F(ShmMetadataTest, RefusesBadDedicatedMetadata) {
    Tensor expected = pattern(kSlot * 3, 2);
    auto put = sender_->put_async(expected, "request");
    ASSERT_TRUE(put.has_value());
    const Value good = (*put)->metadata();
    ASSERT_EQ(good.find("kind")->as_string(), "dedicated");
    expect_all_rejected(
        good,
        {
            {"offset moved", [](Map& m) { m["offset"] = int_field(m, "offset") + 1; },
             ErrorCode::invalid_argument, "does not match"},
            {"offset in the header", [](Map& m) { m["offset"] = 0; }, ErrorCode::invalid_argument,
             "does not match"},
            {"nbytes larger", [](Map& m) { m["nbytes"] = int_field(m, "nbytes") + 1; },
             ErrorCode::invalid_argument, "does not match"},
            {"no generation", [](Map& m) { m.erase("generation"); }, ErrorCode::invalid_argument,
             "'generation'"},
            {"huge generation", [](Map& m) { m["generation"] = std::int64_t{1} << 40; },
             ErrorCode::invalid_argument, "'generation'"},
            {"stale generation", [](Map& m) { m["generation"] = int_field(m, "generation") + 1; },
             ErrorCode::not_found, "stale"},
            {"no segment id", [](Map& m) { m.erase("segment_id"); }, ErrorCode::invalid_argument,
             "'segment_id'"},
            {"other segment incarnation",
             [](Map& m) { m["segment_id"] = int_field(m, "segment_id") ^ 1; }, ErrorCode::not_found,
             "recreated"},
            {"dedicated read as slot",
             [](Map& m) {
                 m["kind"] = "slot";
                 m["slot"] = 0;
                 m["generation"] = 1;
                 m["pool_id"] = 1;
             },
             ErrorCode::data_loss, "bad magic"},
        });
    auto get = receiver_->get_async(good, Tensor(), "request");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    EXPECT_TRUE(same_bytes((*get)->tensor(), expected));
    expect_rejected(good, ErrorCode::not_found, "already consumed", "read twice");
}

TEST_F(ShmMetadataTest, RefusesACorruptedPoolHeader) {
    const std::string name = our_segment("forged", 12345);
    auto forged = shm::Segment::create(name, 8192, false);
    ASSERT_TRUE(forged.has_value());
    std::memset((*forged)->data(), 0x5a, 8192);
    Value metadata(Map{{"backend", "shm"},
                       {"nbytes", 10},
                       {"kind", "slot"},
                       {"segment", name},
                       {"owner_pid", ::getpid()},
                       {"offset", 4096},
                       {"slot", 0},
                       {"generation", 1},
                       {"pool_id", 1}});
    expect_rejected(metadata, ErrorCode::data_loss, "corrupted", "forged pool");
}

TEST_F(ShmMetadataTest, RefusesAReadOnlyDestination) {
    auto put = sender_->put_async(pattern(10, 1), "request");
    ASSERT_TRUE(put.has_value());
    Tensor read_only = Tensor::from_vector<std::uint8_t>(std::vector<std::uint8_t>(10));
    auto view_storage = Storage::wrap(const_cast<std::byte*>(read_only.data()), 10, Device::cpu(),
                                      nullptr, /*read_only=*/true);
    auto view = Tensor::from_storage(view_storage, DType::u8, {10});
    ASSERT_TRUE(view.has_value());
    expect_rejected((*put)->metadata(), ErrorCode::invalid_argument, "read-only",
                    "read-only destination", *view);
}

TEST_F(ShmMetadataTest, ADeadSenderIsUnavailableAndItsSegmentsGo) {
    const pid_t dead = dead_pid();
    const std::string name = our_segment("ghost", 1, dead);
    auto left = shm::Segment::create(name, 8192, false);  // as a killed sender would leave it
    ASSERT_TRUE(left.has_value());
    Value metadata(Map{{"backend", "shm"},
                       {"nbytes", 10},
                       {"kind", "slot"},
                       {"segment", name},
                       {"owner_pid", dead},
                       {"offset", 4096},
                       {"slot", 0},
                       {"generation", 1},
                       {"pool_id", 1}});
    expect_rejected(metadata, ErrorCode::unavailable, "is gone", "dead sender");
    EXPECT_EQ(::access(("/dev/shm" + name).c_str(), F_OK), -1) << "segment of a dead pid stays";
}

}  // namespace
}  // namespace omnirt::relay::testing
