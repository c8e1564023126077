#include "engine/sampling.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <limits>
#include <string>

namespace omnirt::engine {
namespace {

template <class T>
at::Tensor to_tensor(const std::vector<T>& values, at::ScalarType type, at::Device device) {
    return at::from_blob(const_cast<T*>(values.data()), {static_cast<std::int64_t>(values.size())},
                         at::TensorOptions().dtype(type))
        .clone()
        .to(device);
}

Status check_shape(const at::Tensor& logits, std::span<const SamplerRow> rows) {
    if (!logits.defined() || logits.dim() != 2 || !at::isFloatingType(logits.scalar_type()) ||
        logits.size(0) != static_cast<std::int64_t>(rows.size()) || logits.size(1) < 1) {
        return fail(ErrorCode::invalid_argument,
                    "Sampler: logits must be a floating [" + std::to_string(rows.size()) +
                        ", vocab] tensor, got " +
                        (logits.defined() ? std::string(logits.toString()) + " of shape " +
                                                c10::str(logits.sizes())
                                          : std::string("an undefined tensor")));
    }
    for (const SamplerRow& row : rows) {
        if (row.state == nullptr) {
            return fail(ErrorCode::invalid_argument, "Sampler: a row without a sampling state");
        }
    }
    return ok_status();
}

// Penalties and bans, in place on a float32 [rows, vocab] tensor of our own.
void apply_penalties(at::Tensor& logits, std::span<const SamplerRow> rows) {
    const std::int64_t vocab = logits.size(1);
    std::vector<std::int64_t> repetition_index;
    std::vector<float> repetition_factor;
    std::vector<std::int64_t> additive_index;
    std::vector<float> additive_delta;
    std::vector<std::int64_t> banned_index;
    for (std::size_t r = 0; r < rows.size(); ++r) {
        const SamplingState& state = *rows[r].state;
        const SamplingParams& params = state.params();
        const auto base = static_cast<std::int64_t>(r) * vocab;
        if (params.repetition_penalty != 1.0) {
            for (std::int32_t token : state.seen_tokens()) {
                if (token < 0 || token >= vocab) continue;
                repetition_index.push_back(base + token);
                repetition_factor.push_back(static_cast<float>(params.repetition_penalty));
            }
        }
        if (params.frequency_penalty != 0.0 || params.presence_penalty != 0.0) {
            for (const auto& [token, count] : state.output_counts()) {
                if (token < 0 || token >= vocab) continue;
                additive_index.push_back(base + token);
                additive_delta.push_back(static_cast<float>(
                    -(params.frequency_penalty * count + params.presence_penalty)));
            }
        }
        for (std::int32_t token : rows[r].banned) {
            if (token >= 0 && token < vocab) banned_index.push_back(base + token);
        }
    }
    at::Tensor flat = logits.view({-1});
    const at::Device device = logits.device();
    if (!repetition_index.empty()) {
        const at::Tensor index = to_tensor(repetition_index, at::kLong, device);
        const at::Tensor factor = to_tensor(repetition_factor, at::kFloat, device);
        const at::Tensor values = flat.index_select(0, index);
        flat.index_copy_(0, index, at::where(values > 0, values / factor, values * factor));
    }
    if (!additive_index.empty()) {
        flat.index_add_(0, to_tensor(additive_index, at::kLong, device),
                        to_tensor(additive_delta, at::kFloat, device));
    }
    if (!banned_index.empty()) {
        // Sorted and unique, so that a token banned twice is filled once.
        std::sort(banned_index.begin(), banned_index.end());
        banned_index.erase(std::unique(banned_index.begin(), banned_index.end()),
                           banned_index.end());
        flat.index_fill_(0, to_tensor(banned_index, at::kLong, device),
                         -std::numeric_limits<float>::infinity());
    }
}

at::Tensor penalized(const at::Tensor& logits, std::span<const SamplerRow> rows) {
    at::Tensor copy = logits.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true).contiguous();
    apply_penalties(copy, rows);
    return copy;
}

// The distribution of step 3 for temperature-scaled rows: probabilities (float64) in the order
// `order` gives (undefined: vocabulary order).
struct Filtered {
    at::Tensor probs;
    at::Tensor order;
};

Filtered filter(const at::Tensor& scaled, const std::vector<const SamplingParams*>& params) {
    const std::int64_t vocab = scaled.size(1);
    const at::Device device = scaled.device();
    bool need_sort = false;
    std::vector<float> min_p;
    std::vector<std::int64_t> top_k;
    std::vector<double> top_p;
    for (const SamplingParams* p : params) {
        const bool uses_top_k = p->top_k > 0 && p->top_k < vocab;
        need_sort = need_sort || p->min_p > 0 || uses_top_k || p->top_p < 1.0;
        min_p.push_back(static_cast<float>(p->min_p));
        top_k.push_back(uses_top_k ? p->top_k : vocab);
        // Above 1: no token is dropped, even where rounding makes the running sum reach 1.
        top_p.push_back(p->top_p < 1.0 ? p->top_p : 2.0);
    }
    if (!need_sort) return {scaled.softmax(-1, at::kDouble), at::Tensor()};

    auto [sorted, order] = scaled.sort(-1, /*descending=*/true);
    const at::Tensor probs = sorted.softmax(-1);
    at::Tensor drop =
        probs < probs.select(1, 0).unsqueeze(1) * to_tensor(min_p, at::kFloat, device).unsqueeze(1);
    const at::Tensor positions =
        at::arange(vocab, at::TensorOptions().dtype(at::kLong).device(device));
    drop = drop | (positions.unsqueeze(0) >= to_tensor(top_k, at::kLong, device).unsqueeze(1));
    at::Tensor kept =
        sorted.masked_fill(drop, -std::numeric_limits<float>::infinity()).softmax(-1, at::kDouble);
    const at::Tensor before = kept.cumsum(-1) - kept;  // mass of the more likely tokens
    kept = kept.masked_fill(before >= to_tensor(top_p, at::kDouble, device).unsqueeze(1), 0.0);
    kept = kept / kept.sum(-1, /*keepdim=*/true);
    return {kept, order};
}

// Rows of `logits` (already penalized) split into greedy and sampled ones.
struct Split {
    std::vector<std::int64_t> greedy;
    std::vector<std::int64_t> sampled;
    std::vector<float> temperatures;  // of the sampled rows
    std::vector<const SamplingParams*> sampled_params;
};

Split split_rows(std::span<const SamplerRow> rows) {
    Split split;
    for (std::size_t r = 0; r < rows.size(); ++r) {
        const SamplingParams& params = rows[r].state->params();
        if (params.greedy()) {
            split.greedy.push_back(static_cast<std::int64_t>(r));
        } else {
            split.sampled.push_back(static_cast<std::int64_t>(r));
            split.temperatures.push_back(static_cast<float>(params.temperature));
            split.sampled_params.push_back(&params);
        }
    }
    return split;
}

at::Tensor scaled_rows(const at::Tensor& logits, const Split& split) {
    const at::Device device = logits.device();
    return logits.index_select(0, to_tensor(split.sampled, at::kLong, device)) /
           to_tensor(split.temperatures, at::kFloat, device).unsqueeze(1);
}

Error torch_error(const c10::Error& error) {
    return Error{ErrorCode::internal,
                 std::string("Sampler: libtorch failed: ") + error.what_without_backtrace()};
}

}  // namespace

Result<at::Tensor> Sampler::penalized_logits(const at::Tensor& logits,
                                             std::span<const SamplerRow> rows) {
    OMNI_RETURN_IF_ERROR(check_shape(logits, rows));
    try {
        return penalized(logits, rows);
    } catch (const c10::Error& error) {
        return fail(torch_error(error));
    }
}

Result<at::Tensor> Sampler::sampling_distribution(const at::Tensor& logits,
                                                  std::span<const SamplerRow> rows) {
    OMNI_RETURN_IF_ERROR(check_shape(logits, rows));
    try {
        const at::Tensor x = penalized(logits, rows);
        const Split split = split_rows(rows);
        at::Tensor out = at::zeros(x.sizes(), x.options().dtype(at::kDouble));
        const at::Device device = x.device();
        if (!split.greedy.empty()) {
            const at::Tensor index = to_tensor(split.greedy, at::kLong, device);
            at::Tensor one_hot = at::zeros({index.size(0), x.size(1)}, out.options());
            one_hot.scatter_(1, x.index_select(0, index).argmax(-1, true), 1.0);
            out.index_copy_(0, index, one_hot);
        }
        if (!split.sampled.empty()) {
            const at::Tensor index = to_tensor(split.sampled, at::kLong, device);
            Filtered filtered = filter(scaled_rows(x, split), split.sampled_params);
            at::Tensor probs = filtered.probs;
            if (filtered.order.defined()) {
                probs = at::zeros_like(filtered.probs).scatter_(1, filtered.order, filtered.probs);
            }
            out.index_copy_(0, index, probs);
        }
        return out;
    } catch (const c10::Error& error) {
        return fail(torch_error(error));
    }
}

Result<std::vector<SampledToken>> Sampler::sample(const at::Tensor& logits,
                                                  std::span<const SamplerRow> rows) {
    OMNI_RETURN_IF_ERROR(check_shape(logits, rows));
    if (rows.empty()) return std::vector<SampledToken>();
    try {
        const at::Tensor x = penalized(logits, rows);
        const at::Device device = x.device();
        const std::int64_t vocab = x.size(1);
        const Split split = split_rows(rows);
        at::Tensor tokens =
            at::zeros({x.size(0)}, at::TensorOptions().dtype(at::kLong).device(device));
        if (!split.greedy.empty()) {
            const at::Tensor index = to_tensor(split.greedy, at::kLong, device);
            tokens.index_copy_(0, index, x.index_select(0, index).argmax(-1));
        }
        if (!split.sampled.empty()) {
            const Filtered filtered = filter(scaled_rows(x, split), split.sampled_params);
            std::vector<double> uniforms;
            for (std::int64_t r : split.sampled) {
                uniforms.push_back(rows[static_cast<std::size_t>(r)].state->next_uniform());
            }
            const at::Tensor cdf = filtered.probs.cumsum(-1);
            const at::Tensor target = to_tensor(uniforms, at::kDouble, device).unsqueeze(1) *
                                      cdf.select(1, -1).unsqueeze(1);
            at::Tensor choice = at::searchsorted(cdf, target, /*out_int32=*/false, /*right=*/true)
                                    .clamp_max(vocab - 1);
            if (filtered.order.defined()) choice = filtered.order.gather(1, choice);
            tokens.index_copy_(0, to_tensor(split.sampled, at::kLong, device), choice.squeeze(1));
        }

        std::int64_t max_top = -1;  // -1: nobody wants logprobs
        for (const SamplerRow& row : rows) {
            if (row.state->params().logprobs) {
                max_top = std::max(max_top, *row.state->params().logprobs);
            }
        }
        std::vector<SampledToken> out(rows.size());
        const at::Tensor tokens_cpu = tokens.cpu();
        const auto* token_data = tokens_cpu.data_ptr<std::int64_t>();
        for (std::size_t r = 0; r < rows.size(); ++r) {
            out[r].token = static_cast<std::int32_t>(token_data[r]);
        }
        if (max_top >= 0) {
            const at::Tensor logprobs = logits.to(at::kFloat).log_softmax(-1);
            const at::Tensor chosen = logprobs.gather(1, tokens.unsqueeze(1)).squeeze(1).cpu();
            const auto* chosen_data = chosen.data_ptr<float>();
            at::Tensor top_values;
            at::Tensor top_tokens;
            if (max_top > 0) {
                auto [values, indices] = logprobs.topk(std::min(max_top, vocab), -1);
                top_values = values.cpu();
                top_tokens = indices.cpu();
            }
            for (std::size_t r = 0; r < rows.size(); ++r) {
                const auto& wanted = rows[r].state->params().logprobs;
                if (!wanted) continue;
                out[r].logprob = chosen_data[r];
                const std::int64_t count = std::min(*wanted, vocab);
                for (std::int64_t i = 0; i < count; ++i) {
                    out[r].top.push_back(TokenLogprob{
                        .token = static_cast<std::int32_t>(
                            top_tokens[static_cast<std::int64_t>(r)][i].item<std::int64_t>()),
                        .logprob = top_values[static_cast<std::int64_t>(r)][i].item<float>()});
                }
            }
        }
        return out;
    } catch (const c10::Error& error) {
        return fail(torch_error(error));
    }
}

}  // namespace omnirt::engine
