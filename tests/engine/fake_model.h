#pragma once
// A fake engine::ModelRunner for the AR scheduler tests. It keeps its own "KV cache": one token
// value per (block, slot), written at the positions a step computes and read back through the
// block tables for every earlier position. The next token is a pure function of that history
// (next_token()), so a wrong block table, a bad prefix-cache hit or a lost position changes the
// output, and tests can compute the expected output without the engine (expected_greedy()).
//
// Instrumentation (thread-safe to read after the scheduler is idle): per step, the blocks that
// the batch's tables reference, and checks that no two sequences of a step write one block and
// that a written block is in no other sequence's table.
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "engine/model_runner.h"

namespace omnirt::engine::testing {

inline constexpr std::int64_t kFakeVocab = 64;
inline constexpr std::int32_t kFakeEos = 63;
inline constexpr std::int64_t kFakeHidden = 4;
inline constexpr std::int32_t kFakeLayers = 2;

// What the fake model captures after `after_layers` layers at position p: the value the cache
// holds there (plus the injections of layers up to after_layers), a checksum of every earlier
// position, the layer count and p, so a wrong block, a lost position or a wrong layer shows.
inline std::vector<float> fake_capture(const std::vector<std::int64_t>& history, std::int64_t p,
                                       std::int32_t after_layers, float injected) {
    double checksum = 0;
    for (std::int64_t q = 0; q <= p; ++q) {
        checksum += static_cast<double>(history[static_cast<std::size_t>(q)]) * (q + 1);
    }
    return {static_cast<float>(history[static_cast<std::size_t>(p)]) + injected,
            static_cast<float>(checksum), static_cast<float>(after_layers), static_cast<float>(p)};
}

// The next token after `history` (values as the fake cache holds them), plus `feedback`.
// Never kFakeEos unless `allow_eos` and the rule lands there.
inline std::int32_t next_token(const std::vector<std::int64_t>& history, std::int64_t feedback = 0,
                               bool allow_eos = false) {
    const auto n = static_cast<std::int64_t>(history.size());
    std::int64_t a = history[static_cast<std::size_t>(n - 1)];
    std::int64_t b = n >= 2 ? history[static_cast<std::size_t>(n - 2)] : 0;
    std::int64_t c = n >= 3 ? history[static_cast<std::size_t>(n - 3)] : 0;
    std::int64_t sum = 0;  // every position matters, not only the last ones
    for (std::int64_t token : history) sum += token;
    const std::int64_t modulus = allow_eos ? kFakeVocab : kFakeVocab - 1;
    std::int64_t value = (3 * a + 5 * b + 7 * c + 11 * n + 13 * sum + feedback) % modulus;
    if (value < 0) value += modulus;
    return static_cast<std::int32_t>(value);
}

// The greedy output of a prompt of `max_tokens` tokens (no EOS, no stops).
inline std::vector<std::int32_t> expected_greedy(const std::vector<std::int32_t>& prompt,
                                                 std::int64_t max_tokens) {
    std::vector<std::int64_t> history(prompt.begin(), prompt.end());
    std::vector<std::int32_t> out;
    for (std::int64_t i = 0; i < max_tokens; ++i) {
        const std::int32_t token = next_token(history);
        out.push_back(token);
        history.push_back(token);
    }
    return out;
}

class FakeModel final : public ModelRunner {
  public:
    FakeModel(std::int32_t num_blocks, std::int32_t block_size, std::int64_t max_positions = 4096)
        : num_blocks_(num_blocks),
          block_size_(block_size),
          max_positions_(max_positions),
          slots_(static_cast<std::size_t>(num_blocks) * static_cast<std::size_t>(block_size), -1) {}

    KVCacheSpec kv_spec() const override {
        return KVCacheSpec{.num_layers = 1, .num_kv_heads = 1, .head_dim = 1, .dtype = at::kFloat};
    }
    std::int64_t vocab_size() const override { return kFakeVocab; }
    ModelCapabilities capabilities() const override {
        return {.embeddings = true,
                .position_axes = 3,
                .layer_injections = true,
                .captures = true,
                .num_layers = kFakeLayers,
                .hidden_size = kFakeHidden};
    }
    Status open_request(const std::string& request_id) override {
        std::lock_guard lock(mutex_);
        if (!open_.insert(request_id).second)
            return violation_status("opened twice: " + request_id);
        ++opens_;
        return ok_status();
    }
    void close_request(const std::string& request_id) override {
        std::lock_guard lock(mutex_);
        if (open_.erase(request_id) == 0) {
            static_cast<void>(violation_status("closed but not open: " + request_id));
        }
    }
    std::int64_t max_positions() const override { return max_positions_; }

    Result<ForwardOutput> forward(std::span<const SequenceInput> batch, KVCache&) override {
        std::lock_guard lock(mutex_);
        ++steps_;
        if (fail_next_) {
            fail_next_ = false;
            return fail(ErrorCode::internal, "fake model failure");
        }
        std::set<std::int32_t> referenced;
        std::map<std::int32_t, std::string> written_by;
        for (const SequenceInput& sequence : batch) {
            if (sequence.tokens.empty()) return violation("a sequence without new tokens");
            const std::int64_t end =
                sequence.start_position + static_cast<std::int64_t>(sequence.tokens.size());
            if (static_cast<std::int64_t>(sequence.block_table.size()) * block_size_ < end) {
                return violation("block table too short for " + sequence.request_id);
            }
            std::set<std::int32_t> own(sequence.block_table.begin(), sequence.block_table.end());
            if (own.size() != sequence.block_table.size()) {
                return violation("a block twice in the table of " + sequence.request_id);
            }
            for (std::int32_t block : sequence.block_table) {
                if (block < 0 || block >= num_blocks_) return violation("block out of range");
                referenced.insert(block);
            }
            for (std::int64_t p = sequence.start_position; p < end; ++p) {
                const std::int32_t block =
                    sequence.block_table[static_cast<std::size_t>(p / block_size_)];
                auto [it, fresh] = written_by.emplace(block, sequence.request_id);
                if (!fresh && it->second != sequence.request_id) {
                    return violation("two sequences write block " + std::to_string(block));
                }
            }
        }
        for (const auto& [block, writer] : written_by) {
            for (const SequenceInput& other : batch) {
                if (other.request_id == writer) continue;
                if (std::find(other.block_table.begin(), other.block_table.end(), block) !=
                    other.block_table.end()) {
                    return violation("block " + std::to_string(block) + " written by " + writer +
                                     " is in the table of " + other.request_id);
                }
            }
        }
        max_blocks_referenced_ = std::max(max_blocks_referenced_, referenced.size());
        batch_sizes_.push_back(batch.size());

        const auto rows = static_cast<std::int64_t>(batch.size());
        at::Tensor logits = at::zeros({rows, kFakeVocab}, at::kFloat);
        at::Tensor hidden = at::zeros({rows, kFakeHidden}, at::kFloat);
        std::vector<std::vector<at::Tensor>> captures;
        auto* out = logits.data_ptr<float>();
        for (std::int64_t r = 0; r < rows; ++r) {
            const SequenceInput& sequence = batch[static_cast<std::size_t>(r)];
            if (!open_.contains(sequence.request_id)) {
                return violation("a forward of a request that is not open: " + sequence.request_id);
            }
            const auto count = static_cast<std::int64_t>(sequence.tokens.size());
            std::vector<std::int64_t> values(sequence.tokens.begin(), sequence.tokens.end());
            if (sequence.embeddings) {
                const RowValues& rows = *sequence.embeddings;
                for (std::size_t j = 0; j < rows.rows.size(); ++j) {
                    values[static_cast<std::size_t>(rows.rows[j])] = static_cast<std::int64_t>(
                        std::lround(rows.values[static_cast<std::int64_t>(j)][0].item<float>()));
                }
            }
            // Layer injections add to what later layers see: the cache holds the value plus
            // every injection (each rounded), so they change the next tokens too.
            std::vector<std::vector<float>> added(static_cast<std::size_t>(kFakeLayers) + 1,
                                                  std::vector<float>(values.size(), 0.0F));
            for (const LayerInjection& injection : sequence.layer_injections) {
                for (std::size_t j = 0; j < injection.add.rows.size(); ++j) {
                    const float add =
                        injection.add.values[static_cast<std::int64_t>(j)][0].item<float>();
                    for (auto n = static_cast<std::size_t>(injection.after_layers);
                         n <= static_cast<std::size_t>(kFakeLayers); ++n) {
                        added[n][static_cast<std::size_t>(injection.add.rows[j])] += add;
                    }
                }
            }
            for (std::int64_t i = 0; i < count; ++i) {
                slot(sequence, sequence.start_position + i) =
                    values[static_cast<std::size_t>(i)] +
                    std::lround(
                        added[static_cast<std::size_t>(kFakeLayers)][static_cast<std::size_t>(i)]);
            }
            const std::int64_t end = sequence.start_position + count;
            std::vector<std::int64_t> history;
            for (std::int64_t p = 0; p < end; ++p) history.push_back(slot(sequence, p));
            // Captures see the raw value plus the injections up to their layer.
            std::vector<at::Tensor> captured;
            for (const CaptureRequest& capture : sequence.captures) {
                at::Tensor rows_out =
                    at::zeros({capture.row_end - capture.row_begin, kFakeHidden}, at::kFloat);
                std::vector<std::int64_t> raw = history;
                for (std::int64_t i = 0; i < count; ++i) {
                    raw[static_cast<std::size_t>(sequence.start_position + i)] =
                        values[static_cast<std::size_t>(i)];
                }
                for (std::int64_t i = capture.row_begin; i < capture.row_end; ++i) {
                    const std::vector<float> row =
                        fake_capture(raw, sequence.start_position + i, capture.after_layers,
                                     added[static_cast<std::size_t>(capture.after_layers)]
                                          [static_cast<std::size_t>(i)]);
                    for (std::int64_t c = 0; c < kFakeHidden; ++c) {
                        rows_out[i - capture.row_begin][c] = row[static_cast<std::size_t>(c)];
                    }
                }
                captured.push_back(rows_out);
            }
            captures.push_back(std::move(captured));
            if (sequence.positions.defined()) {
                positions_seen_[sequence.request_id].push_back(sequence.positions.clone());
            }
            const std::int32_t target = next_token(history, 0, allow_eos_);
            for (std::int64_t v = 0; v < kFakeVocab; ++v) {
                out[r * kFakeVocab + v] = -static_cast<float>(std::abs(v - target));
            }
            hidden[r][0] = static_cast<float>(target);
            hidden[r][1] = static_cast<float>(end);
        }
        return ForwardOutput{.logits = logits, .hidden = hidden, .captures = std::move(captures)};
    }

    void set_allow_eos(bool allow) {
        std::lock_guard lock(mutex_);
        allow_eos_ = allow;
    }
    void fail_next_forward() {
        std::lock_guard lock(mutex_);
        fail_next_ = true;
    }
    std::string first_violation() const {
        std::lock_guard lock(mutex_);
        return violation_;
    }
    std::size_t max_blocks_referenced() const {
        std::lock_guard lock(mutex_);
        return max_blocks_referenced_;
    }
    std::size_t max_batch_size() const {
        std::lock_guard lock(mutex_);
        return batch_sizes_.empty() ? 0
                                    : *std::max_element(batch_sizes_.begin(), batch_sizes_.end());
    }
    std::int64_t steps() const {
        std::lock_guard lock(mutex_);
        return steps_;
    }
    // Requests opened (ModelRunner::open_request) and not closed yet; opens so far.
    std::size_t open_requests() const {
        std::lock_guard lock(mutex_);
        return open_.size();
    }
    std::int64_t opens() const {
        std::lock_guard lock(mutex_);
        return opens_;
    }
    // The explicit positions each step of `request_id` carried, concatenated: [axes, tokens].
    at::Tensor positions_seen(const std::string& request_id) const {
        std::lock_guard lock(mutex_);
        auto it = positions_seen_.find(request_id);
        if (it == positions_seen_.end()) return {};
        return at::cat(it->second, 1);
    }

  private:
    std::int64_t& slot(const SequenceInput& sequence, std::int64_t position) {
        const std::int32_t block =
            sequence.block_table[static_cast<std::size_t>(position / block_size_)];
        return slots_[static_cast<std::size_t>(block) * static_cast<std::size_t>(block_size_) +
                      static_cast<std::size_t>(position % block_size_)];
    }
    Result<ForwardOutput> violation(std::string message) {
        return fail(violation_status(std::move(message)).error());
    }
    Status violation_status(std::string message) {
        if (violation_.empty()) violation_ = message;
        return fail(ErrorCode::internal, "fake model: " + message);
    }

    std::int32_t num_blocks_;
    std::int32_t block_size_;
    std::int64_t max_positions_;
    mutable std::mutex mutex_;
    std::vector<std::int64_t> slots_;
    bool allow_eos_ = false;
    bool fail_next_ = false;
    std::string violation_;
    std::size_t max_blocks_referenced_ = 0;
    std::vector<std::size_t> batch_sizes_;
    std::int64_t steps_ = 0;
    std::set<std::string> open_;
    std::int64_t opens_ = 0;
    std::map<std::string, std::vector<at::Tensor>> positions_seen_;
};

}  // namespace omnirt::engine::testing
