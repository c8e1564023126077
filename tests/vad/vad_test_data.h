#pragma once
// The committed Silero VAD goldens (tests/vad/goldens, written by generate.mjs there) and the
// model file from the cache (scripts/fetch_vad_model.sh).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "vad/silero_vad.h"

namespace omnirt::vad::testing {

inline std::string golden_path(const std::string& name) {
    return std::string(OMNIRT_SOURCE_DIR) + "/tests/vad/goldens/" + name;
}

inline std::string read_file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The samples of a 16-bit mono PCM WAV written by generate.mjs (canonical 44-byte header).
inline std::vector<std::int16_t> read_wav16(const std::string& path) {
    const std::string bytes = read_file_bytes(path);
    if (bytes.size() < 44 || bytes.compare(0, 4, "RIFF") != 0 ||
        bytes.compare(36, 4, "data") != 0) {
        ADD_FAILURE() << path << " is not a canonical WAV file";
        return {};
    }
    std::vector<std::int16_t> samples((bytes.size() - 44) / 2);
    std::memcpy(samples.data(), bytes.data() + 44, samples.size() * 2);
    return samples;
}

struct GoldenRecording {
    std::string name;
    std::vector<std::int16_t> pcm;  // 16 kHz
    std::vector<float> probabilities;
};

inline nlohmann::json golden_json() {
    return nlohmann::json::parse(read_file_bytes(golden_path("probabilities.json")));
}

// A recording from its parts: files and stretches of digital silence.
inline std::vector<std::int16_t> assemble(const nlohmann::json& parts) {
    std::vector<std::int16_t> pcm;
    for (const auto& part : parts) {
        if (part.contains("file")) {
            const auto samples = read_wav16(golden_path(part["file"].get<std::string>()));
            pcm.insert(pcm.end(), samples.begin(), samples.end());
        } else {
            pcm.resize(pcm.size() + part["silence_ms"].get<std::size_t>() * 16, 0);
        }
    }
    return pcm;
}

inline std::vector<GoldenRecording> golden_recordings() {
    std::vector<GoldenRecording> recordings;
    const nlohmann::json golden = golden_json();
    for (const auto& entry : golden["recordings"]) {
        GoldenRecording recording;
        recording.name = entry["name"].get<std::string>();
        recording.pcm = assemble(entry["parts"]);
        recording.probabilities = entry["probabilities"].get<std::vector<float>>();
        recordings.push_back(std::move(recording));
    }
    return recordings;
}

inline GoldenRecording golden_recording(const std::string& name) {
    for (auto& recording : golden_recordings()) {
        if (recording.name == name) return recording;
    }
    ADD_FAILURE() << "no golden recording " << name;
    return {};
}

// The cached model, or nullptr when the file is absent (the caller skips).
inline std::shared_ptr<const SileroModel> cached_model() {
    static const std::shared_ptr<const SileroModel> model = [] {
        const std::string path = default_model_path();
        if (!std::filesystem::exists(path)) return std::shared_ptr<const SileroModel>();
        auto loaded = SileroModel::load(path);
        if (!loaded) {
            ADD_FAILURE() << loaded.error().to_string();
            return std::shared_ptr<const SileroModel>();
        }
        return *loaded;
    }();
    return model;
}

}  // namespace omnirt::vad::testing

// Skips the test when the model file is not in the cache.
#define OMNIRT_VAD_MODEL_OR_SKIP(variable)                                                      \
    auto variable = ::omnirt::vad::testing::cached_model();                                     \
    if (variable == nullptr) {                                                                  \
        GTEST_SKIP() << "Silero VAD model not found at " << ::omnirt::vad::default_model_path() \
                     << "; run scripts/fetch_vad_model.sh (needs npm and the registry)";        \
    }
