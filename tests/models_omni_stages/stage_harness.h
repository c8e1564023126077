#pragma once
// Shared by the encoder stage tests: the tiny Qwen3-Omni checkpoint (generated once per test
// process: seed 7, bf16, init std 0.1, as the golden tests), payload builders, and a driver that
// pushes requests into a stage's inbox and collects what leaves its outbox.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "models/qwen3_omni/encoder_stages.h"
#include "models/qwen3_omni/make_checkpoint.h"
#include "pipeline/scheduler.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3_omni::testing {

namespace fs = std::filesystem;

// The checkpoint directory, made on first use and removed at exit.
inline const fs::path& tiny_checkpoint() {
    struct Directory {
        fs::path path;
        Directory() {
            path =
                fs::temp_directory_path() / ("omnirt_encoder_stages_" + std::to_string(::getpid()));
            fs::remove_all(path);
            auto made = make_checkpoint(
                path, {.preset = "tiny", .seed = 7, .dtype = DType::bf16, .init_std = 0.1});
            OMNI_CHECK(made.has_value(), made.has_value() ? "" : made.error().to_string().c_str());
        }
        ~Directory() {
            std::error_code ignored;
            fs::remove_all(path, ignored);
        }
    };
    static const Directory directory;
    return directory.path;
}

inline std::unique_ptr<checkpoint::Checkpoint> open_tiny() {
    auto opened = checkpoint::Checkpoint::open(tiny_checkpoint());
    OMNI_CHECK(opened.has_value(), "open the tiny checkpoint");
    return std::move(*opened);
}

inline pipeline::StageContext stage_context(const std::string& name, Map extra = {}) {
    Map args{{"model_path", Value(tiny_checkpoint().string())}, {"num_threads", Value(2)}};
    for (auto& [key, value] : extra) args.insert_or_assign(key, value);
    return pipeline::StageContext{.stage_name = name, .args = std::move(args)};
}

// Deterministic float32 values in (-1, 1) that differ per seed.
inline at::Tensor pattern(at::IntArrayRef shape, std::int64_t seed) {
    std::int64_t count = 1;
    for (std::int64_t size : shape) count *= size;
    return (at::arange(count, at::kFloat) * 0.7311f + static_cast<float>(seed) * 1.37f)
        .sin()
        .reshape(shape);
}

inline Tensor omni(const at::Tensor& tensor) {
    auto converted = torch_bridge::from_torch(tensor.contiguous());
    OMNI_CHECK(converted.has_value(), "from_torch");
    return *converted;
}

inline Tensor grid_tensor(std::int64_t t, std::int64_t h, std::int64_t w) {
    return Tensor::from_vector(std::vector<std::int64_t>{t, h, w}, {3});
}

// An image item {key, pixel_values [t*h*w, 1536], grid_thw}; pixel values follow `key`.
inline Value image_item(std::int64_t key, std::int64_t t, std::int64_t h, std::int64_t w) {
    return Value(Map{{"key", Value(key)},
                     {"pixel_values", Value(omni(pattern({t * h * w, 1536}, key)))},
                     {"grid_thw", Value(grid_tensor(t, h, w))}});
}

// An audio item {key, mel [128, frames]}; values follow `key`.
inline Value audio_item(std::int64_t key, std::int64_t frames) {
    return Value(Map{{"key", Value(key)}, {"mel", Value(omni(pattern({128, frames}, key)))}});
}

inline Value items_data(List items) { return Value(Map{{"items", Value(std::move(items))}}); }

inline void submit(pipeline::Scheduler& stage, const std::string& id, Value data) {
    ASSERT_TRUE(stage.inbox().push(
        pipeline::IncomingMessage{.request_id = id,
                                  .kind = pipeline::IncomingKind::new_request,
                                  .payload = std::make_shared<const StagePayload>(
                                      StagePayload{.request_id = id, .data = std::move(data)})}));
}

// The next `count` results and errors, by request id. The deadline only guards against a hang.
inline std::map<std::string, Result<StagePayload>> collect(pipeline::Scheduler& stage,
                                                           std::size_t count) {
    std::map<std::string, Result<StagePayload>> out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (out.size() < count) {
        auto message = stage.outbox().pop_until(deadline);
        if (!message) {
            ADD_FAILURE() << "timed out waiting for results";
            break;
        }
        if (message->kind == pipeline::OutgoingKind::result) {
            out.emplace(message->request_id, *message->result);
        } else if (message->kind == pipeline::OutgoingKind::error) {
            out.emplace(message->request_id, fail(message->error));
        }
    }
    return out;
}

inline at::Tensor torch_of(const Value& value) {
    OMNI_CHECK(value.is_tensor(), "a tensor");
    return torch_bridge::to_torch(value.as_tensor());
}

// data.items[i] of a result.
inline const Map& item_of(const StagePayload& payload, std::size_t i) {
    return payload.data.find("items")->as_list().at(i).as_map();
}

}  // namespace omnirt::models::qwen3_omni::testing
