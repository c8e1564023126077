// Segment names, removal of segments whose owner died, and recovery from a reader process
// that dies while it holds a sender's memory.
#include "relay/shm/segment.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>

#include "relay/shm/dedicated.h"
#include "relay/shm/metadata.h"
#include "relay/shm/pool.h"
#include "shm_test_support.h"

namespace omnirt::relay::testing {
namespace {

using shm::SegmentName;

bool exists(const std::string& name) { return ::access(("/dev/shm" + name).c_str(), F_OK) == 0; }

// A segment as a killed process leaves it: a name and a few bytes, nobody to unlink it.
void leave_segment(const std::string& name) {
    int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0) << name;
    ASSERT_EQ(::ftruncate(fd, 4096), 0);
    ::close(fd);
}

TEST(ShmSegmentNameTest, FormatsAndParsesBack) {
    SegmentName name{.instance = "omnirt-AbC123", .pid = 4242, .relay = "talker_0", .serial = 17};
    std::string text = shm::format_segment_name(name);
    EXPECT_EQ(text, "/omnirt.omnirt-AbC123.4242.talker_0.17");
    for (std::string_view form : {std::string_view(text), std::string_view(text).substr(1)}) {
        auto parsed = shm::parse_segment_name(form);
        ASSERT_TRUE(parsed.has_value()) << form;
        EXPECT_EQ(parsed->instance, name.instance);
        EXPECT_EQ(parsed->pid, name.pid);
        EXPECT_EQ(parsed->relay, name.relay);
        EXPECT_EQ(parsed->serial, name.serial);
    }
    for (const char* bad :
         {"omnirt.a.b.c.1", "omnirt.a.1.c", "other.a.1.c.2", "omnirt.a.0.c.1", "omnirt..1.c.1",
          "omnirt.a.1.c.1.2", "omnirt.a b.1.c.1", "omnirt.a.1.c.x", "omnirt.a.99999999999.c.1"}) {
        EXPECT_FALSE(shm::parse_segment_name(bad).has_value()) << bad;
    }
}

TEST(ShmSegmentNameTest, SanitizesNamesAndInstances) {
    EXPECT_EQ(shm::sanitize_name_part("stage.0/x y", "relay"), "stage_0_x_y");
    EXPECT_EQ(shm::sanitize_name_part("", "relay"), "relay");
    EXPECT_EQ(shm::sanitize_name_part(std::string(100, 'a'), "relay").size(), 48u);
    EXPECT_EQ(shm::instance_tag("/tmp/omnirt-AbC123/"), "omnirt-AbC123");
    EXPECT_EQ(shm::instance_tag("/run/user/1000/omnirt-x.y"), "omnirt-x_y");
    EXPECT_EQ(shm::instance_tag(""), "default");
    EXPECT_NE(shm::next_segment_serial(), shm::next_segment_serial());
}

TEST_F(ShmRelayTest, RemovesSegmentsOfDeadOwnersOnly) {
    const pid_t dead = dead_pid();
    auto name = [&](const std::string& instance, pid_t pid) {
        return shm::format_segment_name(
            {.instance = instance, .pid = pid, .relay = "stale", .serial = 1});
    };
    const std::string ours_dead = name(instance_, dead);
    const std::string ours_live = name(instance_, ::getpid());
    const std::string other_dead = name(instance_ + "-other", dead);
    for (const auto& segment : {ours_dead, ours_live, other_dead}) leave_segment(segment);

    ASSERT_TRUE(shm::remove_stale_segments(instance_).has_value());
    EXPECT_FALSE(exists(ours_dead));
    EXPECT_TRUE(exists(ours_live));
    // Another instance's, not asked for, stays. Any relay created by a test running beside this
    // one sweeps every instance's dead segments, so a vanished one is left again and the sweep
    // of ours repeated: a sweep that ignored the instance would remove it every time.
    bool other_kept = exists(other_dead);
    for (int attempt = 0; attempt < 5 && !other_kept; ++attempt) {
        leave_segment(other_dead);
        ASSERT_TRUE(shm::remove_stale_segments(instance_).has_value());
        other_kept = exists(other_dead);
    }
    EXPECT_TRUE(other_kept);

    ASSERT_TRUE(shm::remove_stale_segments("").has_value());
    EXPECT_FALSE(exists(other_dead));
    EXPECT_TRUE(exists(ours_live));
    ::shm_unlink(ours_live.c_str());
}

TEST_F(ShmRelayTest, CreatingARelayRemovesAKilledInstancesSegments) {
    const std::string left = shm::format_segment_name(
        {.instance = "omnirt-killed", .pid = dead_pid(), .relay = "thinker", .serial = 0});
    leave_segment(left);
    auto relay = make(options("fresh"));
    EXPECT_FALSE(exists(left));
}

// A child process claims what `metadata` describes, as a receiver would, and exits without
// releasing it: the reader died holding the sender's memory.
void die_while_reading(const Value& metadata) {
    pid_t child = ::fork();
    if (child == 0) {
        auto parsed = shm::TransferMetadata::parse(metadata);
        if (!parsed) ::_exit(2);
        if (parsed->kind == shm::TransferKind::slot) {
            auto pool = shm::Pool::attach(parsed->segment, parsed->owner_pid, parsed->pool_id);
            if (!pool) ::_exit(3);
            shm::SlotTicket ticket{parsed->slot, parsed->generation};
            ::_exit((*pool)->claim(ticket, parsed->offset, parsed->nbytes) ? 0 : 4);
        }
        auto segment = shm::DedicatedSegment::open(parsed->segment, parsed->owner_pid,
                                                   parsed->segment_id, false);
        if (!segment) ::_exit(5);
        ::_exit((*segment)->claim(parsed->generation, parsed->offset, parsed->nbytes) ? 0 : 6);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(ShmRelayTest, AReaderThatDiesGivesTheCreditBack) {
    const ShmTuning tuning{.credit_wait = kHangGuard,
                           .liveness_interval = std::chrono::milliseconds(5)};
    auto sender = make(options("sender", 4096, 1), tuning);
    for (std::size_t nbytes : {std::size_t{100}, std::size_t{10000}}) {
        auto put = sender->put_async(pattern(nbytes, 1), "request");
        ASSERT_TRUE(put.has_value());
        die_while_reading((*put)->metadata());
        auto waited = (*put)->wait_for_completion(kHangGuard);
        ASSERT_FALSE(waited.has_value()) << nbytes;
        EXPECT_EQ(waited.error().code, ErrorCode::unavailable) << waited.error().message;
    }
    // With the only credit held by a dead reader, a blocked put recovers it.
    auto held = sender->put_async(pattern(100, 2), "request");
    ASSERT_TRUE(held.has_value());
    die_while_reading((*held)->metadata());
    auto next = sender->put_async(pattern(100, 3), "request");
    EXPECT_TRUE(next.has_value()) << next.error().to_string();
    sender->close();
    EXPECT_TRUE(segments().empty());
}

}  // namespace
}  // namespace omnirt::relay::testing
