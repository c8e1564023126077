#pragma once
// EncoderBatcher: the batch compute of the Qwen3-Omni encoder stages (encoder_stages.h), the
// same for the image and the audio encoder. For one SimpleScheduler batch it
//   1. parses data.items of every request (a malformed request fails alone, invalid_argument
//      naming the item: "items[2]: ..."),
//   2. takes what it can from the EncoderCache and computes each missing (key, shape) once,
//   3. runs every missing item of every request through one encoder forward,
//   4. stores the new outputs in the cache and returns each request its items in order.
// Requests already aborted are not computed; results of requests aborted during the forward are
// returned as aborted errors, which the scheduler drops. When the batched forward fails (it
// should not: inputs are checked first) each request is retried alone, so that only the request
// that makes the encoder fail fails.
//
// Thread safety: run() may be called from several threads at once (the cache locks, encoders
// are immutable); a stage runs one worker.
#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/request.h"
#include "core/value.h"
#include "models/qwen3_omni/encoder_cache.h"
#include "pipeline/simple_scheduler.h"

namespace omnirt::models::qwen3_omni {

// One parsed item of data.items.
struct EncoderInput {
    std::int64_t key = 0;  // the item's `key`, copied to its output
    EncoderCacheKey cache_key;
    at::Tensor input;  // what the model reads (vision pixel_values, audio mel), float32, CPU
};

// The model side of a stage. Implementations are immutable; both calls may run on any thread.
class ItemEncoder {
  public:
    virtual ~ItemEncoder() = default;
    // One element of data.items; invalid_argument naming the field (the batcher names the item).
    [[nodiscard]] virtual Result<EncoderInput> parse(const Value& item) const = 0;
    // One forward over `inputs` (at least one): one output map per input, in order, without
    // `key`; float32 omnirt tensors that own their storage. May throw (libtorch); the batcher
    // converts.
    [[nodiscard]] virtual Result<std::vector<Map>> encode(
        std::span<const EncoderInput* const> inputs) const = 0;
};

// What a stage did, for tests and metrics. Updated by the worker thread; read from any thread.
struct EncoderStageCounters {
    std::atomic<std::int64_t> forwards{0};        // encoder forward calls
    std::atomic<std::int64_t> items_computed{0};  // items that went through a forward
    std::atomic<std::int64_t> cache_hits{0};      // items answered from the cache
    std::atomic<std::int64_t> cache_bytes{0};     // the cache's bytes after the last batch
};

// Optional observers of a stage (tests; metrics). Both may be empty.
struct EncoderStageHooks {
    std::shared_ptr<EncoderStageCounters> counters;
    // Called on the worker thread right before each encoder forward.
    std::function<void()> before_forward;
};

class EncoderBatcher {
  public:
    // `who` prefixes every error ("stage 'image_encoder'"); cache_bytes 0 disables the cache.
    EncoderBatcher(std::string who, std::unique_ptr<const ItemEncoder> encoder,
                   std::size_t cache_bytes, EncoderStageHooks hooks);

    // A pipeline::BatchComputeFn: one result per batch item, in order.
    [[nodiscard]] std::vector<Result<StagePayload>> run(
        const std::vector<pipeline::BatchItem>& batch);

    [[nodiscard]] const EncoderCache& cache() const { return cache_; }

  private:
    // data.items of one request, parsed.
    [[nodiscard]] Result<std::vector<EncoderInput>> parse_request(const StagePayload& input) const;
    // One forward; exceptions become internal errors.
    [[nodiscard]] Result<std::vector<Map>> forward(
        std::span<const EncoderInput* const> inputs) const;

    std::string who_;
    std::unique_ptr<const ItemEncoder> encoder_;
    EncoderCache cache_;
    EncoderStageHooks hooks_;
};

}  // namespace omnirt::models::qwen3_omni
