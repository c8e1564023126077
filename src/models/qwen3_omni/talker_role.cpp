#include "models/qwen3_omni/talker_role.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "engine/ar_sequence.h"
#include "models/qwen3_omni/speech_functions.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3_omni {
namespace {

Error invalid(std::string message) {
    return Error{ErrorCode::invalid_argument, "Qwen3-Omni talker: " + std::move(message)};
}

// One request's talker state: its plan, and what the thinker's stream brought so far.
struct TalkerRequest final : engine::RoleRequestState {
    std::vector<std::int32_t> thinker_prompt;
    TalkerPlan plan;
    std::int64_t speaker = 0;
    std::vector<std::int32_t> text;  // the thinker's text tokens (its stop token excluded)
    bool text_done = false;          // a stop token came, or the stream ended
    at::Tensor media_hidden;         // [n, thinker hidden] float32, from the first chunk
    std::int64_t media_begin = 0;
    at::Tensor prefill;  // [prompt rows, hidden], built once the first tokens are in
};

// data.positions: i64 [3, n]; absent or null: none.
Result<std::vector<std::vector<std::int64_t>>> read_positions(const Value& data, std::size_t n) {
    std::vector<std::vector<std::int64_t>> out;
    const Value* value = data.find("positions");
    if (value == nullptr || value->is_null()) return out;
    const Tensor* tensor = value->if_tensor();
    if (tensor == nullptr || tensor->dtype() != DType::i64 || tensor->dim() != 2 ||
        tensor->shape()[0] != 3 || tensor->shape()[1] != static_cast<std::int64_t>(n)) {
        return fail(
            invalid("data.positions must be an int64 tensor [3, " + std::to_string(n) + "]"));
    }
    OMNI_TRY(Tensor dense, tensor->contiguous());
    const std::int64_t* values = dense.data_as<std::int64_t>();
    out.assign(3, std::vector<std::int64_t>(n));
    for (std::size_t axis = 0; axis < 3; ++axis) {
        std::copy(values + axis * n, values + (axis + 1) * n, out[axis].begin());
    }
    return out;
}

bool chunk_is_stop(const pipeline::StreamChunk& chunk) {
    const Value* stop = chunk.chunk.find("stop");
    return stop != nullptr && stop->is_bool() && stop->as_bool();
}

// Takes the thinker's chunks into the request's state.
Status absorb(engine::ArSequence& sequence, TalkerRequest& state) {
    auto& chunks = sequence.stream_input().chunks;
    while (!chunks.empty()) {
        const std::shared_ptr<const pipeline::StreamChunk> chunk = chunks.front().chunk;
        chunks.pop_front();
        const Value& data = chunk->chunk;
        if (const Value* hidden = data.find("talker_hidden"); hidden != nullptr) {
            const Tensor* rows = hidden->if_tensor();
            const Value* begin = data.find("talker_hidden_begin");
            if (rows == nullptr || rows->dtype() != DType::f32 || rows->dim() != 2 ||
                begin == nullptr || !begin->is_int() || begin->as_int() < 0) {
                return fail(
                    invalid("the thinker's talker_hidden must be a float32 tensor [n, "
                            "hidden] with an int talker_hidden_begin"));
            }
            state.media_hidden = torch_bridge::to_torch(*rows);
            state.media_begin = begin->as_int();
        }
        if (chunk_is_stop(*chunk)) {
            state.text_done = true;
            continue;
        }
        const Value* token = data.find("token_id");
        if (token == nullptr || !token->is_int()) {
            return fail(invalid("a thinker chunk has no int token_id"));
        }
        if (!state.text_done) state.text.push_back(static_cast<std::int32_t>(token->as_int()));
    }
    if (sequence.stream_input().done()) state.text_done = true;
    return ok_status();
}

// The prefill rows of §5.4.
Result<at::Tensor> build_prefill(const TalkerConfig& config, const TalkerInputs& inputs,
                                 const at::Tensor& codec_embedding, const TalkerRequest& state) {
    const TalkerPlan& plan = state.plan;
    const std::int64_t hidden = config.text.hidden_size;
    const auto users = static_cast<std::int64_t>(plan.user_rows.size());
    at::Tensor prefill =
        at::empty({plan.prompt_rows(), hidden},
                  at::TensorOptions().dtype(inputs.dtype()).device(inputs.device()));
    std::vector<std::int32_t> text_ids;
    std::vector<std::int64_t> text_rows, media_rows, media_sources;
    for (std::int64_t k = 0; k < users; ++k) {
        const std::int64_t row = plan.user_rows[static_cast<std::size_t>(k)];
        const std::int32_t id = state.thinker_prompt[static_cast<std::size_t>(row)];
        if (is_media_pad(id, config.ids)) {
            const std::int64_t source = row - state.media_begin;
            if (!state.media_hidden.defined() || source < 0 ||
                source >= state.media_hidden.size(0)) {
                return fail(invalid("the thinker sent no hidden state for media row " +
                                    std::to_string(row)));
            }
            media_rows.push_back(k);
            media_sources.push_back(source);
        } else {
            text_rows.push_back(k);
            text_ids.push_back(id);
        }
    }
    auto index = [&](const std::vector<std::int64_t>& rows) {
        return at::tensor(rows, at::kLong).to(inputs.device());
    };
    if (!text_rows.empty()) {
        OMNI_TRY(at::Tensor projected, inputs.project_tokens(text_ids));
        prefill.index_copy_(0, index(text_rows), projected);
    }
    if (!media_rows.empty()) {
        if (state.media_hidden.size(1) != config.thinker_hidden_size) {
            return fail(invalid("talker_hidden rows must have the thinker's hidden size " +
                                std::to_string(config.thinker_hidden_size)));
        }
        const at::Tensor rows = state.media_hidden.index_select(0, at::tensor(media_sources));
        prefill.index_copy_(0, index(media_rows), inputs.project_hidden(rows));
    }
    // The assistant turn: <|im_start|> assistant \n, control rows, tts_bos, the first token.
    std::vector<std::int32_t> role_ids;
    for (std::int64_t k = 0; k < 3; ++k) {
        role_ids.push_back(
            state.thinker_prompt[static_cast<std::size_t>(plan.assistant_begin + k)]);
    }
    const bool has_text = !state.text.empty();
    if (has_text) role_ids.push_back(state.text.front());
    OMNI_TRY(at::Tensor role, inputs.project_tokens(role_ids));
    auto codec = [&](std::int64_t id) { return codec_embedding[id]; };
    at::Tensor assistant = prefill.narrow(0, users, kAssistantPrefillRows);
    assistant.narrow(0, 0, 3).copy_(role.narrow(0, 0, 3));
    const CodecIds& ids = config.codec;
    assistant[3].copy_(inputs.tts_pad() + codec(ids.nothink));
    assistant[4].copy_(inputs.tts_pad() + codec(ids.think_bos));
    assistant[5].copy_(inputs.tts_pad() + codec(ids.think_eos));
    assistant[6].copy_(inputs.tts_pad() + codec(state.speaker));
    assistant[7].copy_(inputs.tts_bos() + codec(ids.pad));
    // A thinker that said nothing: tts_pad stands for the first token.
    assistant[8].copy_((has_text ? role[3] : inputs.tts_pad()) + codec(ids.bos));
    return prefill;
}

}  // namespace

TalkerRole::TalkerRole(TalkerConfig config, std::shared_ptr<TalkerInputs> inputs,
                       const CodePredictor* predictor, TalkerRoleOptions options)
    : config_(std::move(config)),
      inputs_(std::move(inputs)),
      predictor_(predictor),
      options_(std::move(options)),
      suppressed_(suppressed_codec_ids(config_)) {}

Result<engine::RequestSetup> TalkerRole::open_request(const StagePayload& payload) {
    OMNI_TRY(engine::RequestSetup read, engine::read_request_setup(payload));
    auto state = std::make_unique<TalkerRequest>();
    state->thinker_prompt = std::move(read.prompt);
    OMNI_TRY(auto positions, read_positions(payload.data, state->thinker_prompt.size()));
    OMNI_TRY(state->plan, plan_talker_prefill(state->thinker_prompt, positions, config_.ids));
    OMNI_TRY(std::string voice, omni_requested_voice(payload.request));
    OMNI_TRY(state->speaker, speaker_codec_id(config_, voice));
    OMNI_TRY(engine::SamplingParams sampling,
             engine::parse_sampling_params(payload.request.params, options_.stage_name,
                                           options_.default_sampling, engine::SamplingLayers::own));

    engine::RequestSetup setup;
    const std::int64_t rows = state->plan.prompt_rows();
    setup.prompt.assign(static_cast<std::size_t>(rows),
                        static_cast<std::int32_t>(config_.codec.pad));
    setup.prefix_cache = false;
    at::Tensor table = at::empty({3, rows}, at::kLong);
    for (std::int64_t axis = 0; axis < 3; ++axis) {
        const auto& values = state->plan.positions[static_cast<std::size_t>(axis)];
        std::copy(values.begin(), values.end(), table[axis].data_ptr<std::int64_t>());
    }
    setup.positions = table;
    setup.position_offset = state->plan.position_offset;
    // transformers samples the code predictor exactly when it samples the talker.
    if (sampling.temperature < engine::kGreedyTemperature) {
        engine::SamplingParams greedy;
        greedy.temperature = 0;
        setup.depth_sampling = {greedy};
    }
    setup.state = std::move(state);
    return setup;
}

bool TalkerRole::ready(const engine::ArSequence& sequence) {
    const auto* state = sequence.role_state<TalkerRequest>();
    if (state == nullptr) return true;
    if (state->text_done || sequence.stream_input().done()) return true;
    auto available = static_cast<std::int64_t>(state->text.size());
    for (const auto& item : sequence.stream_input().chunks) {
        if (chunk_is_stop(*item.chunk)) return true;
        ++available;
    }
    // The step that makes frame s (s frames so far) feeds back trailing[s] = g_{s+1}.
    return available >= static_cast<std::int64_t>(sequence.output().size()) + 2;
}

Status TalkerRole::prepare_step(engine::ArSequence& sequence, engine::SequenceInput& input) {
    auto* state = sequence.role_state<TalkerRequest>();
    if (state == nullptr) return fail(invalid("the request has no talker state"));
    OMNI_RETURN_IF_ERROR(absorb(sequence, *state));
    const std::int64_t prompt_rows = state->plan.prompt_rows();
    const std::int64_t start = input.start_position;
    if (start >= prompt_rows) return ok_status();
    if (!state->prefill.defined()) {
        OMNI_TRY(state->prefill,
                 build_prefill(config_, *inputs_, predictor_->talker_codec_embedding(), *state));
    }
    const std::int64_t count =
        std::min<std::int64_t>(prompt_rows - start, static_cast<std::int64_t>(input.tokens.size()));
    engine::RowValues merged;
    for (std::int64_t k = 0; k < count; ++k) merged.rows.push_back(k);
    at::Tensor values = state->prefill.narrow(0, start, count);
    if (input.embeddings) {
        for (std::int64_t row : input.embeddings->rows) {
            if (row < count) return fail(invalid("a prompt row already has an embedding"));
            merged.rows.push_back(row);
        }
        values =
            at::cat({values, input.embeddings->values.to(values.device(), values.scalar_type())});
    }
    merged.values = values;
    input.embeddings = std::move(merged);
    return ok_status();
}

std::span<const std::int32_t> TalkerRole::suppressed_tokens(const engine::ArSequence&) {
    return suppressed_;
}

Result<at::Tensor> TalkerRole::feedback(engine::ArSequence& sequence,
                                        const engine::TokenStep& step) {
    auto* state = sequence.role_state<TalkerRequest>();
    if (state == nullptr) return fail(invalid("the request has no talker state"));
    OMNI_RETURN_IF_ERROR(absorb(sequence, *state));
    if (step.codes.size() != static_cast<std::size_t>(config_.residual_codes())) {
        return fail(
            invalid("a frame has " + std::to_string(step.codes.size()) + " residual codes"));
    }
    at::Tensor sum = predictor_->feedback_sum(step.token, step.codes);
    const std::int64_t next = step.index + 1;  // trailing[s] is the text token g_{s+1}
    const auto have = static_cast<std::int64_t>(state->text.size());
    if (next < have) {
        OMNI_TRY(at::Tensor text, inputs_->project_tokens(
                                      std::span(&state->text[static_cast<std::size_t>(next)], 1)));
        return sum.add_(text[0]);
    }
    if (!state->text_done) {
        return fail(Error{ErrorCode::internal,
                          "Qwen3-Omni talker: frame " + std::to_string(step.index) +
                              " ran before the thinker's token " + std::to_string(next)});
    }
    // trailing = [P(g1) .. P(g(have-1)), tts_eos]: its last entry (index max(have, 1) - 1) is
    // tts_eos, everything after it tts_pad.
    return sum.add_(next == std::max<std::int64_t>(have, 1) ? inputs_->tts_eos()
                                                            : inputs_->tts_pad());
}

}  // namespace omnirt::models::qwen3_omni
