// The default ArRole: prompt ids and cache salt from the payload, the default result layout, and
// the hidden-state value helper shared by roles that stream hidden states.
#include "engine/ar_role.h"
#include "core/log.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "engine/ar_sequence.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::engine {
namespace {

Result<std::vector<std::int32_t>> tokens_from_tensor(const Tensor& tensor) {
    const bool shape_ok = tensor.dim() == 1 || (tensor.dim() == 2 && tensor.shape()[0] == 1);
    if (!shape_ok || (tensor.dtype() != DType::i32 && tensor.dtype() != DType::i64) ||
        !tensor.device().is_cpu()) {
        return fail(ErrorCode::invalid_argument,
                    "data.input_ids must be an int32 or int64 host tensor of shape [n] or [1, n]");
    }
    OMNI_TRY(Tensor dense, tensor.contiguous());
    const auto count = static_cast<std::size_t>(dense.numel());
    std::vector<std::int32_t> ids(count);
    if (dense.dtype() == DType::i32) {
        std::copy_n(dense.data_as<std::int32_t>(), count, ids.begin());
        return ids;
    }
    const std::int64_t* wide = dense.data_as<std::int64_t>();
    for (std::size_t i = 0; i < count; ++i) {
        if (wide[i] < std::numeric_limits<std::int32_t>::min() ||
            wide[i] > std::numeric_limits<std::int32_t>::max()) {
            return fail(ErrorCode::invalid_argument,
                        "data.input_ids[" + std::to_string(i) + "] does not fit a token id");
        }
        ids[i] = static_cast<std::int32_t>(wide[i]);
    }
    return ids;
}

Result<std::vector<std::int32_t>> read_input_ids(const Value& data) {
    const Value* ids = data.find("input_ids");
    if (ids == nullptr) {
        return fail(ErrorCode::invalid_argument,
                    "the payload has no data.input_ids (the prompt's token ids)");
    }
    if (const Tensor* tensor = ids->if_tensor()) return tokens_from_tensor(*tensor);
    const List* list = ids->if_list();
    if (list == nullptr) {
        return fail(ErrorCode::invalid_argument,
                    "data.input_ids must be an integer tensor or a list of ints, got " +
                        std::string(to_string(ids->kind())));
    }
    std::vector<std::int32_t> out;
    out.reserve(list->size());
    for (std::size_t i = 0; i < list->size(); ++i) {
        const std::int64_t* id = (*list)[i].if_int();
        if (id == nullptr || *id < std::numeric_limits<std::int32_t>::min() ||
            *id > std::numeric_limits<std::int32_t>::max()) {
            return fail(ErrorCode::invalid_argument, "data.input_ids[" + std::to_string(i) +
                                                         "] must be a token id, got " +
                                                         (*list)[i].debug_string());
        }
        out.push_back(static_cast<std::int32_t>(*id));
    }
    return out;
}

}  // namespace

Result<std::string> read_cache_salt(const Value& data) {
    const Value* value = data.find("cache_salt");
    if (value == nullptr || value->is_null()) return std::string();
    if (!value->is_string()) {
        return fail(ErrorCode::invalid_argument, "data.cache_salt must be a string");
    }
    return value->as_string();
}

Result<RequestSetup> read_request_setup(const StagePayload& payload) {
    RequestSetup setup;
    OMNI_TRY(setup.prompt, read_input_ids(payload.data));
    OMNI_TRY(setup.cache_salt, read_cache_salt(payload.data));
    return setup;
}

Result<RequestSetup> ArRole::open_request(const StagePayload& payload) {
    return read_request_setup(payload);
}

Status ArRole::detokenize(std::int32_t /*token*/, std::string& /*text*/) {
    return fail(ErrorCode::internal, "this role produces no text");
}

Result<Map> ArRole::make_result(const ArSequence& sequence, const std::string& finish_reason) {
    const std::vector<std::int32_t> output(sequence.output().begin(), sequence.output().end());
    Map data;
    data.emplace("output_ids", Value(Tensor::from_vector(output)));
    if (const IncrementalText* text = sequence.text()) data.emplace("text", Value(text->text()));
    data.emplace("finish_reason", Value(finish_reason));
    data.emplace(
        "usage",
        Value(Map{{"prompt_tokens", Value(sequence.prompt_tokens())},
                  {"completion_tokens", Value(static_cast<std::int64_t>(output.size()))}}));
    if (sequence.sampling_params().logprobs) {
        List logprobs;
        for (float logprob : sequence.logprobs()) logprobs.push_back(Value(logprob));
        data.emplace("logprobs", Value(std::move(logprobs)));
    }
    if (sequence.frames() > 0) {
        const std::span<const std::int32_t> codes = sequence.frame_codes();
        const std::int64_t width = static_cast<std::int64_t>(codes.size()) / sequence.frames();
        data.emplace("codes", Value(Tensor::from_vector(
                                  std::vector<std::int32_t>(codes.begin(), codes.end()),
                                  {sequence.frames(), width})));
    }
    return data;
}

Value hidden_row_value(const at::Tensor& row) {
    at::Tensor host;
    try {
        host = row.to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true).contiguous();
    } catch (const c10::Error& error) {
        log::warn(std::string("AR engine: dropping a hidden state: ") +
                  error.what_without_backtrace());
        return Value();
    }
    Result<Tensor> converted = torch_bridge::from_torch(host);
    if (!converted) {
        log::warn("AR engine: dropping a hidden state: " + converted.error().to_string());
        return Value();
    }
    return Value(std::move(*converted));
}

}  // namespace omnirt::engine
