// The relay conformance suite: one parameterized set of cross-process tests run against every
// backend this build has. The test process is one relay endpoint; `omnirt relay-peer` children
// are the others (bench/relay_peer.h describes the protocol).
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <random>

#include "bench/relay_peer.h"
#include "config/runtime_dir.h"
#include "relay/builtin.h"
#include "relay/registry.h"
#include "support/command.h"
#if defined(OMNIRT_HAVE_C10D_RELAY)
#include "relay/gloo/c10d_relay.h"
#endif

// Sanitizer builds: UCX 1.13 leaks ~100 bytes (the remote-segment table of a shared-memory
// endpoint) when ucp_ep_create cannot attach a killed sender's FIFO
// (SenderKilledWithSigkillLeavesNothingBehind/ucx_copy). scripts/lsan.supp suppresses it by that
// one UCX function (make sanitize passes it in LSAN_OPTIONS); the full malloc stacks the match
// needs come from the slow unwinder (libuct is built without frame pointers). Only this process
// unwinds slowly, not the relay-peer children. No effect without a sanitizer.
extern "C" __attribute__((used)) const char* __asan_default_options() {
    return "fast_unwind_on_malloc=0";
}

namespace omnirt::relay {
namespace {

using namespace std::chrono_literals;
using bench::PeerProcess;
constexpr Duration kGuard = 60s;  // hang guard only

struct BackendCase {
    std::string backend;
    bool zero_copy = false;
};

void PrintTo(const BackendCase& c, std::ostream* out) {
    *out << c.backend << (c.zero_copy ? " zero-copy" : " copy");
}

std::string case_name(const ::testing::TestParamInfo<BackendCase>& info) {
    return info.param.backend + (info.param.zero_copy ? "_zero_copy" : "_copy");
}

// /dev/shm entries whose name contains `tag`.
std::vector<std::string> shm_entries(const std::string& tag) {
    std::vector<std::string> out;
    if (DIR* dir = opendir("/dev/shm")) {
        while (dirent* e = readdir(dir)) {
            std::string name = e->d_name;
            if (name.find(tag) != std::string::npos) out.push_back(name);
        }
        closedir(dir);
    }
    return out;
}

class RelayConformance : public ::testing::TestWithParam<BackendCase> {
  protected:
    void SetUp() override {
        ASSERT_TRUE(register_builtin_backends().has_value());
#if defined(OMNIRT_HAVE_C10D_RELAY)
        ASSERT_TRUE(register_c10d_backends().has_value());
#endif
        auto names = registered_backends();
        if (std::find(names.begin(), names.end(), GetParam().backend) == names.end()) {
            GTEST_SKIP() << "relay backend '" << GetParam().backend << "' is not built";
        }
        auto dir = config::RuntimeDirectory::create("/tmp");
        ASSERT_TRUE(dir.has_value());
        dir_ = std::move(*dir);
        tag_ = dir_->path().substr(dir_->path().rfind('/') + 1);
    }

    void TearDown() override {
        for (auto& peer : peers_) EXPECT_TRUE(peer->close(kGuard).has_value());
        peers_.clear();
        if (relay_) relay_->close();
        relay_.reset();
        if (dir_) {
            EXPECT_TRUE(shm_entries(tag_).empty())
                << "left in /dev/shm: " << shm_entries(tag_).size();
        }
    }

    RelayOptions options(const std::string& name, std::int64_t rank, std::int64_t world) {
        return RelayOptions{.backend = GetParam().backend,
                            .name = name,
                            .runtime_dir = dir_->path(),
                            .slot_bytes = std::size_t{4} << 20,
                            .credits = credits_,
                            .rank = rank,
                            .world_size = world,
                            .rendezvous = "file://" + dir_->path() + "/store",
                            .zero_copy = GetParam().zero_copy};
    }

    // The test process as rank 0 plus `peers` children as ranks 1..peers.
    void start(int peers) {
        std::int64_t world = peers + 1;
        for (int i = 1; i <= peers; ++i) {
            auto peer = PeerProcess::start(testing::omnirt_binary(),
                                           options("peer" + std::to_string(i), i, world));
            ASSERT_TRUE(peer.has_value()) << peer.error().message;
            peers_.push_back(std::move(*peer));
        }
        auto relay = create_relay(options("test", 0, world));
        ASSERT_TRUE(relay.has_value()) << relay.error().message;
        relay_ = std::move(*relay);
        for (auto& peer : peers_) ASSERT_TRUE(peer->wait_ready(kGuard).has_value());
    }

    static Value put_command(const std::string& id, std::size_t nbytes, std::uint64_t seed,
                             std::int64_t dst_rank = 0) {
        return Map{{"op", "put"},
                   {"request_id", id},
                   {"nbytes", static_cast<std::int64_t>(nbytes)},
                   {"seed", static_cast<std::int64_t>(seed)},
                   {"dst_rank", dst_rank}};
    }

    // Receives the transfer `metadata` describes and checks its bytes.
    void receive_and_check(const Value& metadata, std::size_t nbytes, std::uint64_t seed,
                           const std::string& id) {
        Tensor dest;
        if (!GetParam().zero_copy) {
            auto allocated = Tensor::empty({static_cast<std::int64_t>(nbytes)}, DType::u8);
            ASSERT_TRUE(allocated.has_value());
            dest = *allocated;
        }
        auto get = relay_->get_async(metadata, dest, id);
        ASSERT_TRUE(get.has_value()) << get.error().message;
        auto status = (*get)->wait_for_completion(kGuard);
        ASSERT_TRUE(status.has_value()) << status.error().message;
        Tensor got = (*get)->tensor();
        ASSERT_EQ(got.nbytes(), nbytes);
        if (GetParam().zero_copy && nbytes > 0) EXPECT_TRUE(got.read_only());
        EXPECT_EQ(bench::check_pattern({got.data(), got.nbytes()}, seed), -1) << "size " << nbytes;
    }

    void wait_ok(PeerProcess& peer, const std::string& id) {
        auto waited =
            peer.call(Map{{"op", "wait"}, {"request_id", id}, {"timeout_ms", 60000}}, kGuard);
        ASSERT_TRUE(waited.has_value()) << waited.error().message;
    }

    // A SIGKILLed process cannot clean up after itself; the next start of the instance (a new
    // relay, as a restarted stage or the supervising runner creates) removes what it left.
    void restart_removes_what_the_killed_peer_left() {
        relay_->close();
        relay_.reset();
        auto next = create_relay(options("restart", 0, 1));
        if (next.has_value()) (*next)->close();
        EXPECT_TRUE(shm_entries(tag_).empty());
    }

    std::int64_t credits_ = 4;
    std::unique_ptr<config::RuntimeDirectory> dir_;
    std::string tag_;
    std::vector<std::unique_ptr<PeerProcess>> peers_;
    std::unique_ptr<Relay> relay_;
};

TEST_P(RelayConformance, SizesFromZeroTo256MB) {
    start(1);
    std::uint64_t seed = 11;
    for (std::size_t size :
         {std::size_t{0}, std::size_t{1}, std::size_t{4095}, std::size_t{4} << 20,
          (std::size_t{4} << 20) + 3, std::size_t{64} << 20, std::size_t{256} << 20}) {
        std::string id = "size-" + std::to_string(size);
        auto put = peers_[0]->call(put_command(id, size, ++seed), kGuard);
        ASSERT_TRUE(put.has_value()) << put.error().message;
        receive_and_check(*put->find("metadata"), size, seed, id);
        relay_->cleanup(id);
        wait_ok(*peers_[0], id);
    }
}

TEST_P(RelayConformance, SeveralSendersManyTransfersInFlight) {
    start(3);
    std::mt19937 rng(7);
    struct InFlight {
        std::size_t peer;
        std::string id;
        std::size_t size;
        std::uint64_t seed;
        Value metadata;
    };
    std::uint64_t seed = 100;
    for (int round = 0; round < 4; ++round) {
        std::vector<InFlight> flights;
        // Every peer puts `credits_` transfers before anything is read.
        for (std::size_t p = 0; p < peers_.size(); ++p) {
            for (int k = 0; k < credits_; ++k) {
                InFlight f{
                    p,
                    "r" + std::to_string(round) + "p" + std::to_string(p) + "k" + std::to_string(k),
                    std::size_t{1} << (10 + rng() % 11),
                    ++seed,
                    {}};
                auto put = peers_[p]->call(put_command(f.id, f.size, f.seed), kGuard);
                ASSERT_TRUE(put.has_value()) << put.error().message;
                f.metadata = *put->find("metadata");
                flights.push_back(std::move(f));
            }
        }
        std::shuffle(flights.begin(), flights.end(), rng);
        for (auto& f : flights) {
            receive_and_check(f.metadata, f.size, f.seed, f.id);
            relay_->cleanup(f.id);
        }
        for (auto& f : flights) wait_ok(*peers_[f.peer], f.id);
    }
}

TEST_P(RelayConformance, CreditExhaustionIsBackpressureNotAnError) {
    credits_ = 2;
    start(1);
    if (!relay_->capabilities().credit_flow_control) GTEST_SKIP() << "no credit flow control";
    const int total = 5;
    for (int i = 0; i < total; ++i) {
        ASSERT_TRUE(
            peers_[0]->send(put_command("c" + std::to_string(i), 1 << 20, i + 1)).has_value());
    }
    std::vector<Value> metadata;
    for (int i = 0; i < credits_; ++i) {
        auto reply = peers_[0]->reply(kGuard);
        ASSERT_TRUE(reply.has_value());
        ASSERT_EQ(*reply->find("ok"), Value(true));
        metadata.push_back(*reply->find("metadata"));
    }
    // The third put waits for a credit: no reply while nothing has been read. (A negative
    // check: it can only fail if backpressure is broken, never because the machine is slow.)
    auto early = peers_[0]->reply(200ms);
    ASSERT_FALSE(early.has_value());
    EXPECT_EQ(early.error().code, ErrorCode::deadline_exceeded);
    for (int i = 0; i < total; ++i) {
        receive_and_check(metadata[i], 1 << 20, i + 1, "c" + std::to_string(i));
        relay_->cleanup("c" + std::to_string(i));
        if (i + credits_ < total) {
            auto reply = peers_[0]->reply(kGuard);
            ASSERT_TRUE(reply.has_value()) << reply.error().message;
            ASSERT_EQ(*reply->find("ok"), Value(true)) << reply->debug_string();
            metadata.push_back(*reply->find("metadata"));
        }
    }
    for (int i = 0; i < total; ++i) wait_ok(*peers_[0], "c" + std::to_string(i));
}

TEST_P(RelayConformance, ReceiverThatNeverReadsMakesTheSenderTimeOut) {
    start(1);
    auto put = peers_[0]->call(put_command("unread", 1 << 20, 3), kGuard);
    ASSERT_TRUE(put.has_value()) << put.error().message;
    auto waited =
        peers_[0]->call(Map{{"op", "wait"}, {"request_id", "unread"}, {"timeout_ms", 300}}, kGuard);
    ASSERT_FALSE(waited.has_value());
    EXPECT_EQ(waited.error().code, ErrorCode::deadline_exceeded) << waited.error().message;
    ASSERT_TRUE(
        peers_[0]->call(Map{{"op", "cleanup"}, {"request_id", "unread"}}, kGuard).has_value());
    relay_->cleanup("unread");
    // The pair still works afterwards.
    auto again = peers_[0]->call(put_command("after", 4096, 4), kGuard);
    ASSERT_TRUE(again.has_value()) << again.error().message;
    receive_and_check(*again->find("metadata"), 4096, 4, "after");
    relay_->cleanup("after");
    wait_ok(*peers_[0], "after");
}

TEST_P(RelayConformance, AbortMidTransferReleasesEverything) {
    start(1);
    auto put = peers_[0]->call(put_command("aborted", std::size_t{32} << 20, 5), kGuard);
    ASSERT_TRUE(put.has_value()) << put.error().message;
    Tensor dest;
    if (!GetParam().zero_copy) dest = *Tensor::empty({std::int64_t{32} << 20}, DType::u8);
    auto get = relay_->get_async(*put->find("metadata"), dest, "aborted");
    // The abort reaches both sides: whatever state the transfer is in, it ends, and waits
    // return (ok if it had finished, aborted otherwise) instead of hanging.
    relay_->cleanup("aborted");
    if (get.has_value()) {
        auto status = (*get)->wait_for_completion(kGuard);
        if (!status) {
            EXPECT_NE(status.error().code, ErrorCode::deadline_exceeded);
        }
        get->reset();
    }
    ASSERT_TRUE(
        peers_[0]->call(Map{{"op", "cleanup"}, {"request_id", "aborted"}}, kGuard).has_value());
    auto waited = peers_[0]->call(
        Map{{"op", "wait"}, {"request_id", "aborted"}, {"timeout_ms", 100}}, kGuard);
    if (!waited) {
        EXPECT_EQ(waited.error().code, ErrorCode::not_found);  // cleanup dropped it
    }
    auto again = peers_[0]->call(put_command("next", 1 << 20, 6), kGuard);
    ASSERT_TRUE(again.has_value()) << again.error().message;
    receive_and_check(*again->find("metadata"), 1 << 20, 6, "next");
    relay_->cleanup("next");
    wait_ok(*peers_[0], "next");
}

TEST_P(RelayConformance, CorruptedOrForeignMetadataIsAClearError) {
    start(1);
    auto put = peers_[0]->call(put_command("meta", 4096, 9), kGuard);
    ASSERT_TRUE(put.has_value()) << put.error().message;
    const Value good = *put->find("metadata");
    std::vector<Value> bad = {Value(), Value(42), Value("metadata"), Value(Map{})};
    Value foreign = good;
    foreign["backend"] = GetParam().backend == "shm" ? "ucx" : "shm";
    bad.push_back(foreign);
    for (const auto& [key, item] : good.as_map()) {
        Value missing = good;
        missing.as_map().erase(key);
        bad.push_back(missing);
        for (Value wrong : {Value("x"), Value(-1), Value(List{}), Value(Bytes{{1, 2, 3}}),
                            Value(std::int64_t{1} << 62)}) {
            Value changed = good;
            changed[key] = wrong;
            if (changed != good) bad.push_back(changed);
        }
    }
    int rejected = 0;
    for (const Value& metadata : bad) {
        Tensor dest = *Tensor::empty({4096}, DType::u8);
        auto get = relay_->get_async(metadata, GetParam().zero_copy ? Tensor() : dest, "meta-bad");
        if (!get.has_value()) {
            EXPECT_FALSE(get.error().message.empty());
            ++rejected;
            continue;
        }
        // Accepted at first: the operation must still end (error, or the real data when the
        // changed field did not matter) within the guard.
        auto status = (*get)->wait_for_completion(5s);
        if (!status) ++rejected;
    }
    relay_->cleanup("meta-bad");
    EXPECT_GE(rejected, 5);
    receive_and_check(good, 4096, 9, "meta");
    relay_->cleanup("meta");
    wait_ok(*peers_[0], "meta");
}

TEST_P(RelayConformance, SenderKilledWithSigkillLeavesNothingBehind) {
    start(1);
    auto put = peers_[0]->call(put_command("orphan", 1 << 20, 12), kGuard);
    ASSERT_TRUE(put.has_value()) << put.error().message;
    peers_[0]->kill(SIGKILL);
    EXPECT_EQ(peers_[0]->wait_exit(), 128 + SIGKILL);
    Tensor dest;
    if (!GetParam().zero_copy) dest = *Tensor::empty({1 << 20}, DType::u8);
    auto get = relay_->get_async(*put->find("metadata"), dest, "orphan");
    if (get.has_value()) {
        // Either the bytes were already readable or the relay reports the dead peer; never a
        // hang past its own timeout.
        auto status = (*get)->wait_for_completion(30s);
        if (!status) {
            EXPECT_NE(status.error().message, "");
        }
        get->reset();
    }
    relay_->cleanup("orphan");
    restart_removes_what_the_killed_peer_left();
}

TEST_P(RelayConformance, ReceiverKilledWithSigkillFailsTheSenderWithinItsTimeout) {
    start(1);
    auto put = relay_->put_async(*Tensor::empty({1 << 20}, DType::u8), "to-dead", 1);
    ASSERT_TRUE(put.has_value()) << put.error().message;
    peers_[0]->kill(SIGKILL);
    peers_[0]->wait_exit();
    auto status = (*put)->wait_for_completion(2s);
    ASSERT_FALSE(status.has_value());
    EXPECT_TRUE(status.error().code == ErrorCode::deadline_exceeded ||
                status.error().code == ErrorCode::unavailable)
        << status.error().to_string();
    put->reset();
    relay_->cleanup("to-dead");
    restart_removes_what_the_killed_peer_left();
}

INSTANTIATE_TEST_SUITE_P(Backends, RelayConformance,
                         ::testing::Values(BackendCase{"shm", false}, BackendCase{"shm", true},
                                           BackendCase{"ucx", false}, BackendCase{"gloo", false}),
                         case_name);

}  // namespace
}  // namespace omnirt::relay
