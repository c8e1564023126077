// Reuse of dedicated segments (payloads larger than a slot): the sender keeps idle segments by
// size class within a byte cap, receivers keep their mappings, generations and segment ids
// refuse stale metadata, a segment a reader still holds is never reused, and a killed sender's
// segments still go (its last transfer is delivered, then its segments are unlinked).
#include <gtest/gtest.h>

#include <signal.h>

#include <array>
#include <cstring>

#include "relay/shm/dedicated_cache.h"
#include "relay/shm/dedicated_mappings.h"
#include "shm_test_support.h"

namespace omnirt::relay::testing {
namespace {

constexpr std::size_t kSlot = 4096;
constexpr std::size_t kLarge = 3 * kSlot;  // a dedicated payload, class 3 pages

class ShmDedicatedReuseTest : public ShmRelayTest {
  protected:
    // An explicit cap, so that OMNIRT_SHM_DEDICATED_CACHE_MB cannot change the outcome.
    static ShmTuning tuning(std::uint64_t cache_bytes = std::uint64_t{64} << 20) {
        return {.credit_wait = kHangGuard, .dedicated_cache_bytes = cache_bytes};
    }
    std::unique_ptr<ShmRelay> relay(const std::string& name, bool zero_copy = false,
                                    std::uint64_t cache_bytes = std::uint64_t{64} << 20) {
        return make(options(name, kSlot, 2, zero_copy), tuning(cache_bytes));
    }

    // One transfer sender -> receiver, read and finished; returns its metadata.
    Value send_and_read(ShmRelay& sender, ShmRelay& receiver, std::size_t nbytes,
                        std::uint32_t seed) {
        Tensor expected = pattern(nbytes, seed);
        auto put = sender.put_async(expected, "request");
        EXPECT_TRUE(put.has_value()) << put.error().to_string();
        if (!put) return Value();
        {
            auto get = receiver.get_async((*put)->metadata(), Tensor(), "request");
            EXPECT_TRUE(get.has_value()) << get.error().to_string();
            if (get) {
                EXPECT_TRUE(same_bytes((*get)->tensor(), expected));
            }
        }  // a zero-copy view goes here
        auto done = (*put)->wait_for_completion(kHangGuard);
        EXPECT_TRUE(done.has_value()) << done.error().to_string();
        return (*put)->metadata();
    }
};

std::string segment_of(const Value& metadata) { return metadata.find("segment")->as_string(); }
std::int64_t generation_of(const Value& metadata) { return metadata.find("generation")->as_int(); }

TEST(ShmDedicatedSizeClassTest, ClassesArePagesThenEighthOctaves) {
    using shm::DedicatedCache;
    EXPECT_EQ(DedicatedCache::size_class(1), 4096u);
    EXPECT_EQ(DedicatedCache::size_class(4097), 8192u);
    EXPECT_EQ(DedicatedCache::size_class(8 * 4096), 8 * 4096u);
    EXPECT_EQ(DedicatedCache::size_class(8 * 4096 + 1), 9 * 4096u);
    EXPECT_EQ(DedicatedCache::size_class(std::uint64_t{256} << 20), std::uint64_t{256} << 20);
    EXPECT_EQ(DedicatedCache::size_class((std::uint64_t{256} << 20) + 1), std::uint64_t{288} << 20);
    for (std::uint64_t n :
         {std::uint64_t{100000}, std::uint64_t{5} << 20, std::uint64_t{300} << 20}) {
        const std::uint64_t size_class = DedicatedCache::size_class(n);
        EXPECT_GE(size_class, n);
        EXPECT_LE(size_class, n + n / 8 + 4096) << n;
    }
}

TEST_F(ShmDedicatedReuseTest, ReusesAnIdleSegmentAndItsMapping) {
    for (bool zero_copy : {false, true}) {
        auto sender = relay("sender");
        auto receiver = relay("receiver", zero_copy);
        ASSERT_TRUE(sender && receiver);
        std::string first_segment;
        for (std::uint32_t i = 0; i < 5; ++i) {
            // A slightly different size each time: one class, one segment.
            Value metadata = send_and_read(*sender, *receiver, kLarge - i * 100, i);
            ASSERT_EQ(metadata.find("kind")->as_string(), "dedicated");
            if (i == 0) first_segment = segment_of(metadata);
            EXPECT_EQ(segment_of(metadata), first_segment) << i;
            EXPECT_EQ(generation_of(metadata), i + 1);
        }
        ShmDedicatedStats stats = sender->dedicated_stats();
        EXPECT_EQ(stats.sender.created, 1u);
        EXPECT_EQ(stats.sender.reused, 4u);
        EXPECT_EQ(stats.sender.idle_segments, 1u);
        EXPECT_EQ(receiver->dedicated_stats().receiver_mappings_opened, 1u);
        EXPECT_EQ(receiver->dedicated_stats().receiver_mappings, 1u);
        EXPECT_EQ(segments().size(), 3u);  // two pools, one dedicated segment
    }
    EXPECT_TRUE(segments().empty());
}

TEST_F(ShmDedicatedReuseTest, SendBuffersReuseSegmentsToo) {
    auto sender = relay("sender");
    auto receiver = relay("receiver", /*zero_copy=*/true);
    for (std::uint32_t i = 0; i < 3; ++i) {
        auto buffer = sender->allocate_send_buffer(kLarge);
        ASSERT_TRUE(buffer.has_value()) << buffer.error().to_string();
        Tensor expected = pattern(kLarge, i);
        std::memcpy(buffer->mutable_data(), expected.data(), kLarge);
        auto put = sender->put_async(*buffer, "request");
        ASSERT_TRUE(put.has_value());
        *buffer = Tensor();  // the tensor's lease goes; the transfer's stays until it finishes
        auto get = receiver->get_async((*put)->metadata(), Tensor(), "request");
        ASSERT_TRUE(get.has_value()) << get.error().to_string();
        EXPECT_TRUE(same_bytes((*get)->tensor(), expected));
        get->reset();
        ASSERT_TRUE((*put)->wait_for_completion(kHangGuard).has_value());
    }
    EXPECT_EQ(sender->dedicated_stats().sender.created, 1u);
    EXPECT_EQ(sender->dedicated_stats().sender.reused, 2u);

    // A send buffer that is still alive keeps its segment out of the cache, even after its
    // transfer finished: the tensor could still write into it.
    auto held = sender->allocate_send_buffer(kLarge);
    ASSERT_TRUE(held.has_value());
    auto put = sender->put_async(*held, "request");
    ASSERT_TRUE(put.has_value());
    auto get = receiver->get_async((*put)->metadata(), Tensor(), "request");
    ASSERT_TRUE(get.has_value());
    get->reset();
    ASSERT_TRUE((*put)->wait_for_completion(kHangGuard).has_value());
    auto next = sender->put_async(pattern(kLarge, 9), "request");
    ASSERT_TRUE(next.has_value());
    EXPECT_NE(segment_of((*next)->metadata()), segment_of((*put)->metadata()));
    EXPECT_EQ(sender->dedicated_stats().sender.created, 2u);
}

TEST_F(ShmDedicatedReuseTest, MetadataOfAnEarlierUseIsStale) {
    auto sender = relay("sender");
    auto receiver = relay("receiver");
    const Value first = send_and_read(*sender, *receiver, kLarge, 1);
    Tensor expected = pattern(kLarge, 2);
    auto second = sender->put_async(expected, "request");
    ASSERT_TRUE(second.has_value());
    const Value& metadata = (*second)->metadata();
    ASSERT_EQ(segment_of(metadata), segment_of(first));  // the same segment, reused
    ASSERT_EQ(generation_of(metadata), generation_of(first) + 1);

    // The first use's metadata (read again, or replayed) cannot touch the second use.
    auto stale = receiver->get_async(first, Tensor(), "request");
    ASSERT_FALSE(stale.has_value());
    EXPECT_EQ(stale.error().code, ErrorCode::not_found);
    EXPECT_NE(stale.error().message.find("stale"), std::string::npos) << stale.error().message;
    Value ahead = metadata;
    ahead["generation"] = generation_of(metadata) + 1;
    auto future = receiver->get_async(ahead, Tensor(), "request");
    ASSERT_FALSE(future.has_value());
    EXPECT_EQ(future.error().code, ErrorCode::not_found);

    auto get = receiver->get_async(metadata, Tensor(), "request");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    EXPECT_TRUE(same_bytes((*get)->tensor(), expected));
}

TEST_F(ShmDedicatedReuseTest, CleanupReturnsTheSegmentForReuseAndItsMetadataGoesStale) {
    auto sender = relay("sender");
    auto receiver = relay("receiver");
    auto put = sender->put_async(pattern(kLarge, 1), "request");
    ASSERT_TRUE(put.has_value());
    sender->cleanup("request");
    EXPECT_EQ((*put)->wait_for_completion(kHangGuard).error().code, ErrorCode::aborted);
    auto aborted = receiver->get_async((*put)->metadata(), Tensor(), "request");
    ASSERT_FALSE(aborted.has_value());
    EXPECT_EQ(aborted.error().code, ErrorCode::aborted) << aborted.error().message;
    EXPECT_EQ(sender->dedicated_stats().sender.idle_segments, 1u);

    const Value next = send_and_read(*sender, *receiver, kLarge, 2);
    EXPECT_EQ(segment_of(next), segment_of((*put)->metadata()));
    auto stale = receiver->get_async((*put)->metadata(), Tensor(), "request");
    ASSERT_FALSE(stale.has_value());
    EXPECT_EQ(stale.error().code, ErrorCode::not_found) << stale.error().message;
}

TEST_F(ShmDedicatedReuseTest, AHeldViewKeepsItsSegmentOutOfReuse) {
    auto sender = relay("sender");
    auto receiver = relay("receiver", /*zero_copy=*/true);
    Tensor first_bytes = pattern(kLarge, 1);
    auto first = sender->put_async(first_bytes, "a");
    ASSERT_TRUE(first.has_value());
    auto get = receiver->get_async((*first)->metadata(), Tensor(), "a");
    ASSERT_TRUE(get.has_value());
    Tensor view = (*get)->tensor();
    get->reset();
    ASSERT_TRUE((*first)->wait_for_delivery(kHangGuard).has_value());

    // The same size class while the view is held: a second segment, the view untouched.
    Value second = send_and_read(*sender, *receiver, kLarge, 2);
    EXPECT_NE(segment_of(second), segment_of((*first)->metadata()));
    EXPECT_TRUE(same_bytes(view, first_bytes));

    // Released, the first segment is idle again, and the next two payloads use both.
    view = Tensor();
    ASSERT_TRUE((*first)->wait_for_completion(kHangGuard).has_value());
    send_and_read(*sender, *receiver, kLarge, 3);
    EXPECT_EQ(sender->dedicated_stats().sender.created, 2u);
    EXPECT_EQ(receiver->dedicated_stats().receiver_mappings_opened, 2u);
}

TEST_F(ShmDedicatedReuseTest, CleanupWhileAViewIsHeldRetiresTheSegmentAndKeepsTheView) {
    auto sender = relay("sender");
    auto receiver = relay("receiver", /*zero_copy=*/true);
    Tensor bytes = pattern(kLarge, 1);
    auto put = sender->put_async(bytes, "a");
    ASSERT_TRUE(put.has_value());
    auto get = receiver->get_async((*put)->metadata(), Tensor(), "a");
    ASSERT_TRUE(get.has_value());
    Tensor view = (*get)->tensor();
    get->reset();
    const std::string held_segment = segment_of((*put)->metadata());

    // The sender gives up on the transfer while the reader still holds it: the segment is
    // retired (its name goes, no later payload gets it), the view stays valid.
    sender->cleanup("a");
    EXPECT_EQ(segments().size(), 2u);
    EXPECT_EQ(sender->dedicated_stats().sender.idle_segments, 0u);
    Value next = send_and_read(*sender, *receiver, kLarge, 2);
    EXPECT_NE(segment_of(next), held_segment);
    EXPECT_TRUE(same_bytes(view, bytes));
    // The receiver dropped its cached mapping of the retired segment; the view has its own.
    EXPECT_EQ(receiver->dedicated_stats().receiver_mappings, 1u);
    EXPECT_TRUE(same_bytes(view, bytes));
    view = Tensor();
}

TEST_F(ShmDedicatedReuseTest, IdleSegmentsStayWithinTheCap) {
    // Room for two idle segments of 3 pages (plus their header pages), not three.
    const std::uint64_t segment_bytes = shm::DedicatedCache::size_class(kLarge) + 4096;
    auto sender = relay("sender", false, 2 * segment_bytes + 100);
    auto receiver = relay("receiver", /*zero_copy=*/true);
    // Three views held at once need three segments.
    std::vector<std::unique_ptr<PutOperation>> puts;
    std::vector<Tensor> views;
    for (std::uint32_t i = 0; i < 3; ++i) {
        auto put = sender->put_async(pattern(kLarge, i), "r" + std::to_string(i));
        ASSERT_TRUE(put.has_value());
        auto get = receiver->get_async((*put)->metadata(), Tensor(), "r" + std::to_string(i));
        ASSERT_TRUE(get.has_value());
        views.push_back((*get)->tensor());
        puts.push_back(std::move(*put));
    }
    EXPECT_EQ(segments().size(), 5u);
    views.clear();
    for (auto& put : puts) ASSERT_TRUE(put->wait_for_completion(kHangGuard).has_value());
    puts.clear();
    // A payload far larger than the cap is never kept.
    send_and_read(*sender, *receiver, 64 * kSlot, 7);

    shm::DedicatedStats stats = sender->dedicated_stats().sender;
    EXPECT_EQ(stats.idle_segments, 2u);
    EXPECT_LE(stats.idle_bytes, 2 * segment_bytes + 100);
    EXPECT_EQ(segments().size(), 4u);  // two pools, two idle segments
    // The receiver forgets the evicted segments on its next get.
    send_and_read(*sender, *receiver, kLarge, 8);
    EXPECT_EQ(receiver->dedicated_stats().receiver_mappings, 2u);
}

TEST_F(ShmDedicatedReuseTest, ACapOfZeroGivesEveryPayloadANewSegment) {
    auto sender = relay("sender", false, 0);
    auto receiver = relay("receiver", false, 0);
    for (std::uint32_t i = 0; i < 3; ++i) send_and_read(*sender, *receiver, kLarge, i);
    EXPECT_EQ(sender->dedicated_stats().sender.created, 3u);
    EXPECT_EQ(sender->dedicated_stats().sender.idle_segments, 0u);
    EXPECT_EQ(receiver->dedicated_stats().receiver_mappings, 0u);
    EXPECT_EQ(segments().size(), 2u);
}

TEST_F(ShmDedicatedReuseTest, MappingsFollowTheSegmentIdNotJustTheName) {
    // A name that now belongs to another segment (a new process that got the old pid) is
    // mapped afresh; metadata of the old segment is refused.
    const std::string name = shm::format_segment_name(
        {.instance = instance_, .pid = ::getpid(), .relay = "renamed", .serial = 1u << 30});
    auto metadata_for = [&](std::uint64_t segment_id) {
        return shm::TransferMetadata{.kind = shm::TransferKind::dedicated,
                                     .segment = name,
                                     .owner_pid = ::getpid(),
                                     .nbytes = 10,
                                     .offset = shm::DedicatedSegment::payload_offset(),
                                     .generation = 1,
                                     .segment_id = segment_id};
    };
    shm::DedicatedMappings mappings(std::uint64_t{1} << 20);
    auto old_segment = shm::DedicatedSegment::create(name, kSlot, 11);
    ASSERT_TRUE(old_segment.has_value());
    EXPECT_EQ(mappings.find(metadata_for(11)), nullptr);
    auto mapped = mappings.open(metadata_for(11), false);
    ASSERT_TRUE(mapped.has_value()) << mapped.error().to_string();
    ASSERT_NE(mappings.find(metadata_for(11)), nullptr);
    EXPECT_EQ(mappings.find(metadata_for(11))->segment_id(), 11u);
    (*old_segment)->segment().unlink();
    old_segment->reset();

    auto new_segment = shm::DedicatedSegment::create(name, kSlot, 22);
    ASSERT_TRUE(new_segment.has_value());
    EXPECT_EQ(mappings.find(metadata_for(22)), nullptr);  // cached under the name, as id 11
    auto fresh = mappings.open(metadata_for(22), false);
    ASSERT_TRUE(fresh.has_value()) << fresh.error().to_string();
    EXPECT_EQ((*fresh)->segment_id(), 22u);
    EXPECT_EQ(mappings.opened(), 2u);
    EXPECT_EQ(mappings.size(), 1u);  // the old incarnation's entry went

    EXPECT_EQ(mappings.find(metadata_for(11)), nullptr);
    auto old = mappings.open(metadata_for(11), false);
    ASSERT_FALSE(old.has_value());
    EXPECT_EQ(old.error().code, ErrorCode::not_found);
    EXPECT_NE(old.error().message.find("recreated"), std::string::npos);
    EXPECT_EQ(mappings.find(metadata_for(22)), *fresh);
    EXPECT_EQ(mappings.size(), 1u);
}

// What a sender in a child process tells the parent about one transfer.
struct SentTransfer {
    std::array<char, 128> segment{};
    std::uint64_t offset = 0;
    std::uint64_t nbytes = 0;
    std::uint64_t generation = 0;
    std::uint64_t segment_id = 0;
};

Value metadata_of(const SentTransfer& sent, pid_t owner) {
    return Value(Map{{"backend", "shm"},
                     {"nbytes", sent.nbytes},
                     {"kind", "dedicated"},
                     {"segment", std::string(sent.segment.data())},
                     {"owner_pid", static_cast<std::int64_t>(owner)},
                     {"offset", sent.offset},
                     {"generation", sent.generation},
                     {"segment_id", sent.segment_id}});
}

TEST_F(ShmDedicatedReuseTest, AKilledSendersCachedSegmentsAreRemoved) {
    auto receiver = relay("receiver");
    int to_parent[2];
    int to_child[2];
    ASSERT_EQ(::pipe(to_parent), 0);
    ASSERT_EQ(::pipe(to_child), 0);
    const RelayOptions child_options = options("child", kSlot, 2);
    pid_t child = ::fork();
    if (child == 0) {
        // Sends two payloads of one class through one segment (the parent reads the first),
        // leaves a third class idle in its cache, then waits to be killed. Send buffers, so
        // that no copy runs in the forked child.
        auto sender = ShmRelay::create(child_options, tuning());
        if (!sender) ::_exit(2);
        std::vector<std::unique_ptr<PutOperation>> puts;
        for (std::size_t nbytes : {std::size_t{16} * kSlot, kLarge, kLarge}) {
            auto buffer = (*sender)->allocate_send_buffer(nbytes);
            if (!buffer) ::_exit(3);
            std::memset(buffer->mutable_data(), static_cast<int>(nbytes / kSlot), nbytes);
            auto put = (*sender)->put_async(*buffer, "request");
            if (!put) ::_exit(4);
            if (nbytes != kLarge) (*sender)->cleanup("request");  // idle in the cache
            const Value& metadata = (*put)->metadata();
            SentTransfer sent{
                .offset = static_cast<std::uint64_t>(metadata.find("offset")->as_int()),
                .nbytes = nbytes,
                .generation = static_cast<std::uint64_t>(metadata.find("generation")->as_int()),
                .segment_id = static_cast<std::uint64_t>(metadata.find("segment_id")->as_int())};
            std::strncpy(sent.segment.data(), metadata.find("segment")->as_string().c_str(),
                         sent.segment.size() - 1);
            if (::write(to_parent[1], &sent, sizeof sent) != sizeof sent) ::_exit(5);
            char go = 0;
            if (::read(to_child[0], &go, 1) != 1) ::_exit(6);
            if ((*put)->wait_for_completion(kHangGuard).has_value()) puts.clear();
            puts.push_back(std::move(*put));
        }
        ::pause();
        ::_exit(0);
    }
    ASSERT_GT(child, 0);
    SentTransfer sent[3];
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(::read(to_parent[0], &sent[i], sizeof sent[i]),
                  static_cast<ssize_t>(sizeof sent[i]));
        if (i == 1) {
            auto get = receiver->get_async(metadata_of(sent[1], child), Tensor(), "request");
            ASSERT_TRUE(get.has_value()) << get.error().to_string();
            EXPECT_EQ((*get)->tensor().data()[kLarge - 1], static_cast<std::byte>(kLarge / kSlot));
        }
        ASSERT_EQ(::write(to_child[1], "g", 1), 1);
    }
    EXPECT_STREQ(sent[1].segment.data(), sent[2].segment.data());  // reused
    EXPECT_EQ(sent[2].generation, sent[1].generation + 1);
    EXPECT_EQ(receiver->dedicated_stats().receiver_mappings, 1u);
    // The child's pool and its two dedicated segments, next to the receiver's pool.
    EXPECT_EQ(segments().size(), 4u);

    ::kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    for (int fd : {to_parent[0], to_parent[1], to_child[0], to_child[1]}) ::close(fd);

    // What the sender posted before it died is complete and is delivered; reading it is when
    // the receiver notices the death: the mapping goes, and with it every segment of the pid.
    auto get = receiver->get_async(metadata_of(sent[2], child), Tensor(), "request");
    ASSERT_TRUE(get.has_value()) << get.error().to_string();
    EXPECT_EQ((*get)->tensor().data()[0], static_cast<std::byte>(kLarge / kSlot));
    EXPECT_EQ(receiver->dedicated_stats().receiver_mappings, 0u);
    EXPECT_EQ(segments().size(), 1u);  // the receiver's own pool
    auto again = receiver->get_async(metadata_of(sent[2], child), Tensor(), "request");
    ASSERT_FALSE(again.has_value());
    EXPECT_EQ(again.error().code, ErrorCode::unavailable) << again.error().message;
}

}  // namespace
}  // namespace omnirt::relay::testing
