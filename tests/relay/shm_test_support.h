#pragma once
// Shared helpers of the shm relay tests: a private runtime directory per test (so segment
// names carry a unique instance tag), relay construction, payload patterns and /dev/shm
// listings. Waits are bounded by kHangGuard; nothing sleeps to synchronise.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "config/runtime_dir.h"
#include "relay/shm/segment.h"
#include "relay/shm/shm_relay.h"

namespace omnirt::relay::testing {

using namespace std::chrono_literals;
inline constexpr Duration kHangGuard = 60s;

// A tensor of `nbytes` whose bytes depend on `seed`, so that a mix-up shows.
inline Tensor pattern(std::size_t nbytes, std::uint32_t seed) {
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

inline bool same_bytes(const Tensor& a, const Tensor& b) {
    if (a.nbytes() != b.nbytes()) return false;
    return a.nbytes() == 0 || std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Spins (yielding) until `done` holds or the hang guard expires; for states that have no
// notification of their own, such as "a sender is now blocked".
inline bool eventually(const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::yield();
    }
    return true;
}

// The pid of a process that has exited and been reaped (until the kernel reuses it).
inline pid_t dead_pid() {
    pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    int status = 0;
    ::waitpid(child, &status, 0);
    return child;
}

class ShmRelayTest : public ::testing::Test {
  protected:
    void SetUp() override {
        auto dir = config::RuntimeDirectory::create(::testing::TempDir());
        ASSERT_TRUE(dir.has_value());
        dir_ = std::move(*dir);
        instance_ = shm::instance_tag(dir_->path());
    }

    RelayOptions options(const std::string& name, std::size_t slot_bytes = 64 << 10,
                         std::int64_t credits = 4, bool zero_copy = false) const {
        return RelayOptions{.backend = "shm",
                            .name = name,
                            .runtime_dir = dir_->path(),
                            .slot_bytes = slot_bytes,
                            .credits = credits,
                            .zero_copy = zero_copy};
    }

    std::unique_ptr<ShmRelay> make(const RelayOptions& relay_options, ShmTuning tuning = {}) {
        auto relay = ShmRelay::create(relay_options, tuning);
        EXPECT_TRUE(relay.has_value()) << relay.error().to_string();
        return relay ? std::move(*relay) : nullptr;
    }

    // Names in /dev/shm that carry this test's instance tag.
    std::vector<std::string> segments() const {
        std::vector<std::string> names;
        DIR* directory = ::opendir("/dev/shm");
        if (directory == nullptr) return names;
        const std::string prefix = "omnirt." + instance_ + ".";
        while (dirent* entry = ::readdir(directory)) {
            std::string name = entry->d_name;
            if (name.starts_with(prefix)) names.push_back(name);
        }
        ::closedir(directory);
        return names;
    }

    std::unique_ptr<config::RuntimeDirectory> dir_;
    std::string instance_;
};

}  // namespace omnirt::relay::testing
