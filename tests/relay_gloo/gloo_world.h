#pragma once
// Test support: a whole gloo process group inside the test process (one relay per rank, each
// created on its own thread, as creation blocks until every rank has joined) over a FileStore
// in a private temporary directory; and byte patterns to check transfers with.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "relay/gloo/c10d_relay.h"

namespace omnirt::relay::testing {

using namespace std::chrono_literals;

inline constexpr Duration kGuard = 60s;  // hang guard for waits that must succeed

class TempDir {
  public:
    TempDir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "omnirt_gloo_XXXXXX");
        OMNI_CHECK(mkdtemp(pattern.data()) != nullptr, "mkdtemp failed");
        path_ = pattern;
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    const std::string& path() const { return path_; }

  private:
    std::string path_;
};

inline RelayOptions gloo_options(std::int64_t rank, std::int64_t world,
                                 const std::string& rendezvous) {
    return RelayOptions{.backend = "gloo",
                        .name = "rank" + std::to_string(rank),
                        .rank = rank,
                        .world_size = world,
                        .rendezvous = rendezvous};
}

inline C10dOptions loopback(Duration timeout = 30s) {
    return C10dOptions{.timeout = timeout, .listen_host = "127.0.0.1"};
}

// Creates the relays of ranks `ranks` (all of 0..world-1 by default) concurrently and returns
// each rank's result.
inline std::vector<Result<std::unique_ptr<Relay>>> create_ranks(
    std::int64_t world, const std::string& rendezvous, const C10dOptions& c10d,
    std::vector<std::int64_t> ranks = {}) {
    if (ranks.empty()) {
        for (std::int64_t rank = 0; rank < world; ++rank) ranks.push_back(rank);
    }
    std::vector<std::optional<Result<std::unique_ptr<Relay>>>> slots(ranks.size());
    {
        std::vector<std::jthread> threads;
        for (std::size_t i = 0; i < ranks.size(); ++i) {
            threads.emplace_back([&, i] {
                slots[i].emplace(
                    create_c10d_relay(gloo_options(ranks[i], world, rendezvous), c10d));
            });
        }
    }
    std::vector<Result<std::unique_ptr<Relay>>> results;
    for (auto& slot : slots) results.push_back(std::move(*slot));
    return results;
}

// A formed group of `world` gloo relays; relays[r] is rank r.
class GlooWorld {
  public:
    explicit GlooWorld(std::int64_t world, C10dOptions c10d = loopback()) {
        for (auto& relay : create_ranks(world, "file://" + dir_.path() + "/store", c10d)) {
            if (!relay) {
                ADD_FAILURE() << "gloo relay creation failed: " << relay.error().to_string();
                continue;
            }
            relays_.push_back(std::move(*relay));
        }
    }
    bool formed(std::int64_t world) const {
        return relays_.size() == static_cast<std::size_t>(world);
    }
    Relay& operator[](std::size_t rank) { return *relays_.at(rank); }
    std::vector<std::unique_ptr<Relay>>& relays() { return relays_; }

  private:
    TempDir dir_;
    std::vector<std::unique_ptr<Relay>> relays_;
};

inline std::uint8_t pattern_byte(std::uint64_t seed, std::size_t i) {
    return static_cast<std::uint8_t>(seed * 131 + i * 7 + (i >> 8) * 13 + (i >> 16));
}

inline Tensor patterned(std::size_t nbytes, std::uint64_t seed) {
    auto tensor = Tensor::empty({static_cast<std::int64_t>(nbytes)}, DType::u8);
    OMNI_CHECK(tensor.has_value(), "allocation failed");
    auto* bytes = reinterpret_cast<std::uint8_t*>(tensor->mutable_data());
    for (std::size_t i = 0; i < nbytes; ++i) bytes[i] = pattern_byte(seed, i);
    return *tensor;
}

// Empty when `tensor` holds the pattern of `seed`, else where it first differs.
inline std::string pattern_mismatch(const Tensor& tensor, std::uint64_t seed) {
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(tensor.data());
    for (std::size_t i = 0; i < tensor.nbytes(); ++i) {
        if (bytes[i] != pattern_byte(seed, i)) {
            return "byte " + std::to_string(i) + " of " + std::to_string(tensor.nbytes()) + " is " +
                   std::to_string(bytes[i]) + ", expected " + std::to_string(pattern_byte(seed, i));
        }
    }
    return {};
}

inline std::int64_t metadata_int(const Value& metadata, std::string_view key) {
    const Value* field = metadata.find(key);
    return field != nullptr && field->is_int() ? field->as_int() : -1;
}

}  // namespace omnirt::relay::testing
