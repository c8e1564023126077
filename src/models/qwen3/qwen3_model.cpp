#include "models/qwen3/qwen3_model.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/kv_cache.h"
#include "engine/paged_attention.h"
#include "models/qwen3/layers.h"

namespace omnirt::models::qwen3 {

using engine::ForwardOutput;
using engine::KVCache;
using engine::SequenceInput;

Result<std::unique_ptr<Qwen3Model>> Qwen3Model::create(const Qwen3Config& config,
                                                       const WeightLookup& lookup,
                                                       Qwen3ModelOptions options) {
    const engine::TpCommunicator* tp = options.tensor_parallel.get();
    OMNI_TRY(Qwen3Weights weights, load_qwen3_weights(config, lookup,
                                                      {.dtype = options.dtype,
                                                       .device = options.device,
                                                       .prefix = options.weight_prefix,
                                                       .tp_rank = tp ? tp->rank() : 0,
                                                       .tp_size = tp ? tp->size() : 1,
                                                       .embed_name = options.embed_name,
                                                       .lm_head_name = options.lm_head_name}));
    if (!options.logit_rows.empty()) {
        if (tp != nullptr && tp->size() > 1) {
            return fail(ErrorCode::invalid_argument,
                        "Qwen3Model: logit_rows needs a single rank (no tensor parallelism)");
        }
        const auto& rows = options.logit_rows;
        const bool ascending =
            std::adjacent_find(rows.begin(), rows.end(), std::greater_equal<>()) == rows.end();
        if (!ascending || rows.front() < 0 || rows.back() >= config.vocab_size) {
            return fail(ErrorCode::invalid_argument,
                        "Qwen3Model: logit_rows must be ascending, unique and below the vocabulary "
                        "size " +
                            std::to_string(config.vocab_size));
        }
    }
    if (!options.rotary) {
        options.rotary = std::make_unique<DefaultRotaryEmbedding>(
            static_cast<int>(config.head_dim), config.rope_theta, config.max_position_embeddings,
            options.device);
    }
    return std::unique_ptr<Qwen3Model>(
        new Qwen3Model(config, std::move(weights), std::move(options)));
}

Qwen3Model::Qwen3Model(const Qwen3Config& config, Qwen3Weights weights, Qwen3ModelOptions options)
    : config_(config),
      weights_(std::move(weights)),
      dtype_(options.dtype),
      device_(options.device),
      rotary_(std::move(options.rotary)),
      tensor_parallel_(std::move(options.tensor_parallel)),
      gathered_attention_(options.gathered_attention) {
    if (tensor_parallel_ && tensor_parallel_->size() == 1) tensor_parallel_.reset();
    if (!options.logit_rows.empty()) {
        head_row_ids_ = at::tensor(options.logit_rows, at::kLong).to(device_);
        head_rows_ = weights_.lm_head.index_select(0, head_row_ids_).contiguous();
    }
}

engine::KVCacheSpec Qwen3Model::kv_spec() const {
    return {.num_layers = static_cast<int>(config_.num_hidden_layers),
            .num_kv_heads = static_cast<int>(weights_.shard.kv_heads),
            .head_dim = static_cast<int>(config_.head_dim),
            .dtype = dtype_};
}

engine::ModelCapabilities Qwen3Model::capabilities() const {
    return {.embeddings = true,
            .position_axes = rotary_->axes(),
            .layer_injections = true,
            .captures = true,
            .num_layers = static_cast<std::int32_t>(config_.num_hidden_layers),
            .hidden_size = config_.hidden_size};
}

Status Qwen3Model::check_batch(std::span<const SequenceInput> batch, const KVCache& cache) const {
    auto invalid = [](const std::string& what) {
        return fail(ErrorCode::invalid_argument, "qwen3 forward: " + what);
    };
    if (batch.empty()) return invalid("empty batch");
    const engine::KVCacheSpec spec = kv_spec();
    const engine::KVCacheSpec& have = cache.spec();
    if (have.num_layers != spec.num_layers || have.num_kv_heads != spec.num_kv_heads ||
        have.head_dim != spec.head_dim || have.dtype != spec.dtype || cache.device() != device_) {
        return fail(ErrorCode::failed_precondition,
                    "qwen3 forward: the KV cache was made for another model (layers, kv heads, "
                    "head_dim, dtype or device differ from kv_spec())");
    }
    for (const SequenceInput& sequence : batch) {
        const std::string who = "sequence '" + sequence.request_id + "': ";
        const auto count = static_cast<std::int64_t>(sequence.tokens.size());
        if (count == 0) return invalid(who + "no new tokens");
        if (sequence.start_position < 0) return invalid(who + "negative start_position");
        const std::int64_t end = sequence.start_position + count;
        if (end > max_positions()) {
            return fail(ErrorCode::out_of_range,
                        "qwen3 forward: " + who + "position " + std::to_string(end - 1) +
                            " is beyond max_positions " + std::to_string(max_positions()));
        }
        const std::int64_t blocks_needed = (end + cache.block_size() - 1) / cache.block_size();
        if (static_cast<std::int64_t>(sequence.block_table.size()) < blocks_needed) {
            return invalid(who + "block table has " + std::to_string(sequence.block_table.size()) +
                           " blocks, positions up to " + std::to_string(end - 1) + " need " +
                           std::to_string(blocks_needed));
        }
        for (std::int64_t b = 0; b < blocks_needed; ++b) {
            const std::int32_t block = sequence.block_table[static_cast<std::size_t>(b)];
            if (block < 0 || block >= cache.num_blocks()) {
                return invalid(who + "block id " + std::to_string(block) + " outside the cache (" +
                               std::to_string(cache.num_blocks()) + " blocks)");
            }
        }
        OMNI_RETURN_IF_ERROR(check_content(sequence, count));
        std::vector<bool> replaced(static_cast<std::size_t>(count), false);
        if (sequence.embeddings) {
            for (std::int64_t row : sequence.embeddings->rows) {
                replaced[static_cast<std::size_t>(row)] = true;
            }
        }
        for (std::int64_t i = 0; i < count; ++i) {
            if (replaced[static_cast<std::size_t>(i)]) continue;
            const std::int32_t token = sequence.tokens[static_cast<std::size_t>(i)];
            if (token < 0 || token >= config_.vocab_size) {
                return invalid(who + "token id " + std::to_string(token) +
                               " outside the vocabulary of " + std::to_string(config_.vocab_size));
            }
        }
    }
    return ok_status();
}

Status Qwen3Model::check_content(const SequenceInput& sequence, std::int64_t count) const {
    const std::string who = "qwen3 forward: sequence '" + sequence.request_id + "': ";
    auto invalid = [&](const std::string& what) {
        return fail(ErrorCode::invalid_argument, who + what);
    };
    auto check_rows = [&](const engine::RowValues& values, const std::string& what) -> Status {
        std::int64_t previous = -1;
        for (std::int64_t row : values.rows) {
            if (row <= previous || row >= count) {
                return invalid(what + " rows must be ascending, distinct and below " +
                               std::to_string(count));
            }
            previous = row;
        }
        const at::Tensor& data = values.values;
        const auto rows = static_cast<std::int64_t>(values.rows.size());
        if (!data.defined() || data.dim() != 2 || data.size(0) != rows ||
            data.size(1) != config_.hidden_size || !data.is_floating_point()) {
            return invalid(what + " values must be a floating [" + std::to_string(rows) + ", " +
                           std::to_string(config_.hidden_size) + "] tensor");
        }
        return ok_status();
    };
    if (sequence.embeddings) OMNI_RETURN_IF_ERROR(check_rows(*sequence.embeddings, "embeddings"));
    for (const engine::LayerInjection& injection : sequence.layer_injections) {
        if (injection.after_layers < 1 || injection.after_layers > config_.num_hidden_layers) {
            return invalid("layer injection after_layers " +
                           std::to_string(injection.after_layers) + " outside [1, " +
                           std::to_string(config_.num_hidden_layers) + "]");
        }
        OMNI_RETURN_IF_ERROR(check_rows(injection.add, "layer injection"));
    }
    for (const engine::CaptureRequest& capture : sequence.captures) {
        if (capture.after_layers < 0 || capture.after_layers > config_.num_hidden_layers ||
            capture.row_begin < 0 || capture.row_end <= capture.row_begin ||
            capture.row_end > count) {
            return invalid("a capture needs after_layers in [0, " +
                           std::to_string(config_.num_hidden_layers) + "] and rows within [0, " +
                           std::to_string(count) + ")");
        }
    }
    if (sequence.positions.defined()) {
        const at::Tensor& positions = sequence.positions;
        const bool shape = (positions.dim() == 1 && positions.size(0) == count) ||
                           (positions.dim() == 2 && positions.size(1) == count &&
                            positions.size(0) >= 1 && positions.size(0) <= rotary_->axes());
        if (!shape ||
            (positions.scalar_type() != at::kLong && positions.scalar_type() != at::kInt)) {
            return invalid("positions must be an integer [" + std::to_string(count) +
                           "] or [axes <= " + std::to_string(rotary_->axes()) + ", " +
                           std::to_string(count) + "] tensor");
        }
    }
    return ok_status();
}

Result<ForwardOutput> Qwen3Model::forward(std::span<const SequenceInput> batch, KVCache& cache) {
    OMNI_RETURN_IF_ERROR(check_batch(batch, cache));
    try {
        return run(batch, cache);
    } catch (const engine::TpCollectiveError& error) {
        return fail(ErrorCode::unavailable, std::string("qwen3 forward: ") + error.what());
    } catch (const c10::Error& error) {
        return fail(ErrorCode::internal,
                    std::string("qwen3 forward: ") + error.what_without_backtrace());
    } catch (const std::exception& error) {
        return fail(ErrorCode::internal, std::string("qwen3 forward: ") + error.what());
    }
}

void Qwen3Model::reduce(at::Tensor& partial) const {
    if (tensor_parallel_) tensor_parallel_->all_reduce_sum(partial);
}

at::Tensor Qwen3Model::embed(std::span<const SequenceInput> batch,
                             const at::Tensor& token_ids) const {
    at::Tensor x;
    if (tensor_parallel_) {
        // Vocabulary-parallel: this rank looks up its own rows, zeros elsewhere, and the sum
        // over the ranks is the full lookup (exactly: one rank adds the row, the others zeros).
        const Qwen3Shard& shard = weights_.shard;
        const at::Tensor local = token_ids - shard.vocab_begin;
        const at::Tensor outside = (local < 0).logical_or_(local >= shard.vocab_rows);
        x = weights_.embed_tokens.index_select(0, local.masked_fill(outside, 0));
        x.masked_fill_(outside.unsqueeze(1), 0);
        reduce(x);
    } else {
        x = weights_.embed_tokens.index_select(0, token_ids);
    }
    std::int64_t offset = 0;
    for (const SequenceInput& sequence : batch) {
        if (sequence.embeddings) write_rows(x, offset, *sequence.embeddings, /*replace=*/true);
        offset += static_cast<std::int64_t>(sequence.tokens.size());
    }
    return x;
}

void Qwen3Model::write_rows(at::Tensor& x, std::int64_t offset, const engine::RowValues& values,
                            bool replace) const {
    if (values.rows.empty()) return;
    const at::Tensor index = (at::tensor(values.rows, at::kLong) + offset).to(device_);
    const at::Tensor source = values.values.to(device_, dtype_);
    if (replace) {
        x.index_copy_(0, index, source);
    } else {
        x.index_add_(0, index, source);
    }
}

void Qwen3Model::layer_content(std::int32_t after_layers, at::Tensor& x,
                               std::span<const SequenceInput> batch, ForwardOutput& output) const {
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < batch.size(); ++i) {
        for (const engine::LayerInjection& injection : batch[i].layer_injections) {
            if (injection.after_layers == after_layers) {
                write_rows(x, offset, injection.add, /*replace=*/false);
            }
        }
        const std::vector<engine::CaptureRequest>& captures = batch[i].captures;
        for (std::size_t j = 0; j < captures.size(); ++j) {
            if (captures[j].after_layers != after_layers) continue;
            // A copy: the layers after this one update x in place.
            output.captures[i][j] = x.narrow(0, offset + captures[j].row_begin,
                                             captures[j].row_end - captures[j].row_begin)
                                        .clone();
        }
        offset += static_cast<std::int64_t>(batch[i].tokens.size());
    }
}

void Qwen3Model::decoder_layer(std::int64_t index, at::Tensor& x, const RotaryTables& rotary,
                               const at::Tensor& slots, std::span<const SequenceInput> batch,
                               const engine::AttentionIndex* attention, KVCache& cache) const {
    const Qwen3LayerWeights& w = weights_.layers[static_cast<std::size_t>(index)];
    const std::int64_t tokens = x.size(0);
    const std::int64_t d = config_.head_dim;
    const std::int64_t heads = weights_.shard.heads;  // of this rank
    const std::int64_t kv_heads = weights_.shard.kv_heads;
    const double eps = config_.rms_norm_eps;

    const at::Tensor qkv =
        project(rms_norm(x, w.input_layernorm, eps), w.qkv_proj, w.qkv_bias, w.qkv_packed.get());
    at::Tensor q = rms_norm(qkv.narrow(1, 0, heads * d).view({tokens, heads, d}), w.q_norm, eps);
    at::Tensor k =
        rms_norm(qkv.narrow(1, heads * d, kv_heads * d).view({tokens, kv_heads, d}), w.k_norm, eps);
    const at::Tensor v =
        qkv.narrow(1, (heads + kv_heads) * d, kv_heads * d).view({tokens, kv_heads, d});
    apply_rotary(q, rotary);
    apply_rotary(k, rotary);

    at::Tensor& keys = cache.keys(static_cast<int>(index));
    at::Tensor& values = cache.values(static_cast<int>(index));
    keys.view({-1, kv_heads, d}).index_copy_(0, slots, k);
    values.view({-1, kv_heads, d}).index_copy_(0, slots, v);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    const at::Tensor attended =
        attention != nullptr ? engine::paged_attention_gathered(q, keys, values, *attention, scale)
                             : engine::paged_attention(q, keys, values, batch, scale);
    if (tensor_parallel_) {
        // Row-parallel: partial sums over this rank's heads; the bias joins once, after them.
        at::Tensor attention =
            project(attended.view({tokens, heads * d}), w.o_proj, {}, w.o_packed.get());
        reduce(attention);
        if (w.o_bias.defined()) attention.add_(w.o_bias);
        x.add_(attention);
    } else {
        x.add_(project(attended.view({tokens, heads * d}), w.o_proj, w.o_bias, w.o_packed.get()));
    }

    const at::Tensor h = rms_norm(x, w.post_attention_layernorm, eps);
    at::Tensor mlp = w.router.defined() ? moe_mlp(h, w.router, w.expert_gate_up, w.expert_down,
                                                  static_cast<int>(config_.num_experts_per_tok),
                                                  config_.norm_topk_prob)
                                        : swiglu_mlp(h, w.gate_up_proj, w.down_proj,
                                                     w.gate_up_packed.get(), w.down_packed.get());
    if (w.shared_gate_up.defined()) {
        // transformers adds sigmoid(gate(h)) * shared_expert(h) after the routed experts' sum.
        at::Tensor shared = swiglu_mlp(h, w.shared_gate_up, w.shared_down,
                                       w.shared_gate_up_packed.get(), w.shared_down_packed.get());
        shared.mul_(at::sigmoid(project(h, w.shared_gate)));
        mlp.add_(shared);
    }
    reduce(mlp);  // the experts' / the MLP's partial sums over this rank's columns
    x.add_(mlp);
}

at::Tensor Qwen3Model::lm_head(const at::Tensor& hidden) const {
    if (head_rows_.defined()) {
        at::Tensor logits =
            at::full({hidden.size(0), config_.vocab_size}, -std::numeric_limits<float>::infinity(),
                     at::TensorOptions().dtype(at::kFloat).device(device_));
        logits.index_copy_(1, head_row_ids_, project(hidden, head_rows_).to(at::kFloat));
        return logits;
    }
    at::Tensor logits =
        project(hidden, weights_.lm_head, {}, weights_.lm_head_packed.get()).to(at::kFloat);
    if (!tensor_parallel_) return logits;
    // Vocabulary-parallel: every rank's rows, padded to the same width, gathered in rank order.
    const Qwen3Shard& shard = weights_.shard;
    if (shard.vocab_rows < shard.vocab_shard) {
        logits = at::constant_pad_nd(logits, {0, shard.vocab_shard - shard.vocab_rows});
    }
    const at::Tensor gathered = tensor_parallel_->all_gather(logits.contiguous());
    return gathered.permute({1, 0, 2})
        .reshape({hidden.size(0), shard.size * shard.vocab_shard})
        .narrow(1, 0, config_.vocab_size)
        .contiguous();
}

Result<ForwardOutput> Qwen3Model::run(std::span<const SequenceInput> batch, KVCache& cache) {
    std::int64_t total = 0;
    for (const SequenceInput& sequence : batch) {
        total += static_cast<std::int64_t>(sequence.tokens.size());
    }
    // Token ids (masked rows read row 0; they are overwritten), cache slots and last rows.
    std::vector<std::int64_t> token_ids;
    std::vector<std::int64_t> slots;
    std::vector<std::int64_t> last_rows;
    token_ids.reserve(static_cast<std::size_t>(total));
    slots.reserve(static_cast<std::size_t>(total));
    const std::int64_t block_size = cache.block_size();
    bool want_hidden = false;
    bool has_content = false;
    for (const SequenceInput& sequence : batch) {
        std::vector<bool> replaced(sequence.tokens.size(), false);
        if (sequence.embeddings) {
            for (std::int64_t row : sequence.embeddings->rows) {
                replaced[static_cast<std::size_t>(row)] = true;
            }
        }
        has_content =
            has_content || !sequence.layer_injections.empty() || !sequence.captures.empty();
        for (std::size_t i = 0; i < sequence.tokens.size(); ++i) {
            token_ids.push_back(replaced[i] ? 0 : sequence.tokens[i]);
            const std::int64_t position = sequence.start_position + static_cast<std::int64_t>(i);
            const std::int64_t block =
                sequence.block_table[static_cast<std::size_t>(position / block_size)];
            slots.push_back(block * block_size + position % block_size);
        }
        last_rows.push_back(static_cast<std::int64_t>(token_ids.size()) - 1);
        want_hidden = want_hidden || sequence.want_hidden;
    }
    auto to_device = [&](const std::vector<std::int64_t>& values) {
        return at::tensor(values, at::kLong).to(device_);
    };
    const at::Tensor slot_index = to_device(slots);
    // Off the CPU, attention runs batched over indices copied to the device once per forward.
    std::optional<engine::AttentionIndex> attention;
    if (!device_.is_cpu() || gathered_attention_) {
        attention = engine::attention_index(batch, block_size, weights_.shard.heads, device_);
    }

    OMNI_TRY(const RotaryTables rotary, rotary_->tables(batch, total));
    ForwardOutput output;
    if (has_content) {
        output.captures.resize(batch.size());
        for (std::size_t i = 0; i < batch.size(); ++i) {
            output.captures[i].resize(batch[i].captures.size());
        }
    }
    at::Tensor x = embed(batch, to_device(token_ids));
    if (has_content) layer_content(0, x, batch, output);
    for (std::int64_t layer = 0; layer < config_.num_hidden_layers; ++layer) {
        decoder_layer(layer, x, rotary, slot_index, batch, attention ? &*attention : nullptr,
                      cache);
        if (has_content) layer_content(static_cast<std::int32_t>(layer + 1), x, batch, output);
    }
    const at::Tensor hidden =
        rms_norm(x.index_select(0, to_device(last_rows)), weights_.norm, config_.rms_norm_eps);
    output.logits = lm_head(hidden);
    if (want_hidden) output.hidden = hidden;
    return output;
}

}  // namespace omnirt::models::qwen3
