#include "models/qwen3_omni/omni_config.h"

#include <utility>

namespace omnirt::models::qwen3_omni {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

unexpected<Error> config_error(const std::string& message) {
    return fail(ErrorCode::invalid_argument, "Qwen3-Omni config: " + message);
}

const json* member(const json& object, std::string_view key) {
    auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
}

// Reads object[key] when present; `where` names the object in errors.
Status read_id(const json& object, std::string_view where, std::string_view key,
               std::int64_t& out) {
    const json* value = member(object, key);
    if (value == nullptr) return ok_status();
    if (!value->is_number_integer() || value->get<std::int64_t>() < 0) {
        return config_error(std::string(where) + std::string(key) +
                            " must be a non-negative integer, not " + value->dump());
    }
    out = value->get<std::int64_t>();
    return ok_status();
}

Result<const json*> sub_object(const json& object, std::string_view where, std::string_view key,
                               bool required) {
    const json* value = member(object, key);
    if (value == nullptr) {
        if (required) return config_error(std::string(where) + std::string(key) + " is missing");
        return nullptr;
    }
    if (!value->is_object()) {
        return config_error(std::string(where) + std::string(key) + " must be an object");
    }
    return value;
}

}  // namespace

Result<OmniConfig> parse_omni_config(const json& object) {
    if (!object.is_object()) return config_error("the config must be a JSON object");
    const json* type = member(object, "model_type");
    if (type == nullptr || !type->is_string() || type->get<std::string>() != kModelType) {
        return config_error("model_type must be \"" + std::string(kModelType) + "\", not " +
                            (type == nullptr ? std::string("absent") : type->dump()));
    }
    OmniConfig config;
    if (const json* enable = member(object, "enable_audio_output")) {
        if (!enable->is_boolean()) return config_error("enable_audio_output must be a boolean");
        config.enable_audio_output = enable->get<bool>();
    }
    OmniTokenIds& ids = config.ids;
    for (auto [key, field] : {std::pair{"im_start_token_id", &ids.im_start},
                              {"im_end_token_id", &ids.im_end},
                              {"system_token_id", &ids.system},
                              {"user_token_id", &ids.user},
                              {"assistant_token_id", &ids.assistant},
                              {"tts_pad_token_id", &ids.tts_pad},
                              {"tts_bos_token_id", &ids.tts_bos},
                              {"tts_eos_token_id", &ids.tts_eos}}) {
        OMNI_RETURN_IF_ERROR(read_id(object, "", key, *field));
    }
    OMNI_TRY(const json* thinker, sub_object(object, "", "thinker_config", true));
    const std::string where = "thinker_config.";
    for (auto [key, field] : {std::pair{"audio_token_id", &ids.audio},
                              {"audio_start_token_id", &ids.audio_start},
                              {"audio_end_token_id", &ids.audio_end},
                              {"image_token_id", &ids.image},
                              {"video_token_id", &ids.video},
                              {"vision_start_token_id", &ids.vision_start},
                              {"vision_end_token_id", &ids.vision_end},
                              {"position_id_per_seconds", &config.position_id_per_seconds}}) {
        OMNI_RETURN_IF_ERROR(read_id(*thinker, where, key, *field));
    }
    if (config.position_id_per_seconds <= 0) {
        return config_error(where + "position_id_per_seconds must be positive");
    }
    OMNI_TRY(const json* text, sub_object(*thinker, where, "text_config", true));
    auto text_config = qwen3::parse_qwen3_config(*text);
    if (!text_config) return fail(text_config.error().with_context(where + "text_config"));
    config.thinker_text = std::move(*text_config);
    OMNI_TRY(const json* audio, sub_object(*thinker, where, "audio_config", true));
    OMNI_TRY(const json* vision, sub_object(*thinker, where, "vision_config", true));
    config.audio_config = *audio;
    config.vision_config = *vision;
    for (std::int64_t id :
         {ids.im_start, ids.im_end, ids.tts_pad, ids.tts_bos, ids.tts_eos, ids.audio,
          ids.audio_start, ids.audio_end, ids.image, ids.video, ids.vision_start, ids.vision_end}) {
        if (id >= config.thinker_text.vocab_size) {
            return config_error("token id " + std::to_string(id) +
                                " is outside the thinker vocabulary (" +
                                std::to_string(config.thinker_text.vocab_size) + ")");
        }
    }
    OMNI_TRY(const json* talker,
             sub_object(object, "", "talker_config", config.enable_audio_output));
    OMNI_TRY(const json* code2wav,
             sub_object(object, "", "code2wav_config", config.enable_audio_output));
    if (talker != nullptr) config.talker_config = *talker;
    if (code2wav != nullptr) config.code2wav_config = *code2wav;
    return config;
}

namespace {

struct PresetSizes {
    // thinker text
    std::int64_t hidden, layers, heads, kv_heads, head_dim, experts, top_k, expert_width;
    std::vector<std::int64_t> mrope_section;
    // audio encoder
    std::int64_t audio_width, audio_layers, audio_heads, audio_ffn, audio_downsample,
        audio_window_infer;
    // vision encoder
    std::int64_t vision_width, vision_depth, vision_heads, vision_ffn;
    std::vector<std::int64_t> deepstack;
    // talker
    std::int64_t talker_hidden, talker_layers, talker_heads, talker_kv_heads, talker_head_dim,
        talker_experts, talker_top_k, talker_expert_width, talker_shared_width,
        talker_projection_width, accept_hidden_layer;
    std::vector<std::int64_t> talker_mrope_section;
    // code predictor
    std::int64_t predictor_layers, predictor_heads, predictor_kv_heads, predictor_head_dim,
        predictor_ffn;
    // code2wav
    std::int64_t wav_hidden, wav_layers, wav_heads, wav_ffn, wav_decoder_dim;
};

PresetSizes tiny_sizes() {
    return {.hidden = 32,
            .layers = 3,
            .heads = 4,
            .kv_heads = 2,
            .head_dim = 16,
            .experts = 4,
            .top_k = 2,
            .expert_width = 32,
            .mrope_section = {4, 2, 2},
            .audio_width = 32,
            .audio_layers = 2,
            .audio_heads = 2,
            .audio_ffn = 64,
            .audio_downsample = 8,
            .audio_window_infer = 400,
            .vision_width = 32,
            .vision_depth = 4,
            .vision_heads = 2,
            .vision_ffn = 64,
            .deepstack = {0, 1, 2},
            .talker_hidden = 32,
            .talker_layers = 2,
            .talker_heads = 2,
            .talker_kv_heads = 1,
            .talker_head_dim = 16,
            .talker_experts = 4,
            .talker_top_k = 2,
            .talker_expert_width = 16,
            .talker_shared_width = 32,
            .talker_projection_width = 64,
            .accept_hidden_layer = 2,
            .talker_mrope_section = {4, 2, 2},
            .predictor_layers = 2,
            .predictor_heads = 2,
            .predictor_kv_heads = 1,
            .predictor_head_dim = 16,
            .predictor_ffn = 64,
            .wav_hidden = 32,
            .wav_layers = 2,
            .wav_heads = 2,
            .wav_ffn = 64,
            .wav_decoder_dim = 64};
}

PresetSizes small_sizes() {
    return {.hidden = 512,
            .layers = 8,
            .heads = 8,
            .kv_heads = 2,
            .head_dim = 64,
            .experts = 16,
            .top_k = 4,
            .expert_width = 256,
            .mrope_section = {16, 8, 8},
            .audio_width = 256,
            .audio_layers = 4,
            .audio_heads = 4,
            .audio_ffn = 1024,
            .audio_downsample = 64,
            .audio_window_infer = 800,
            .vision_width = 256,
            .vision_depth = 8,
            .vision_heads = 4,
            .vision_ffn = 1024,
            .deepstack = {1, 3, 5},
            .talker_hidden = 256,
            .talker_layers = 4,
            .talker_heads = 4,
            .talker_kv_heads = 2,
            .talker_head_dim = 64,
            .talker_experts = 16,
            .talker_top_k = 4,
            .talker_expert_width = 128,
            .talker_shared_width = 256,
            .talker_projection_width = 512,
            .accept_hidden_layer = 4,
            .talker_mrope_section = {16, 8, 8},
            .predictor_layers = 2,
            .predictor_heads = 4,
            .predictor_kv_heads = 2,
            .predictor_head_dim = 64,
            .predictor_ffn = 768,
            .wav_hidden = 256,
            .wav_layers = 4,
            .wav_heads = 4,
            .wav_ffn = 768,
            .wav_decoder_dim = 384};
}

// Qwen3-Omni-30B-A3B-Instruct's values (fact sheet sections 2-7).
PresetSizes full_sizes() {
    return {.hidden = 2048,
            .layers = 48,
            .heads = 32,
            .kv_heads = 4,
            .head_dim = 128,
            .experts = 128,
            .top_k = 8,
            .expert_width = 768,
            .mrope_section = {24, 20, 20},
            .audio_width = 1280,
            .audio_layers = 32,
            .audio_heads = 20,
            .audio_ffn = 5120,
            .audio_downsample = 480,
            .audio_window_infer = 800,
            .vision_width = 1152,
            .vision_depth = 27,
            .vision_heads = 16,
            .vision_ffn = 4304,
            .deepstack = {8, 16, 24},
            .talker_hidden = 1024,
            .talker_layers = 20,
            .talker_heads = 16,
            .talker_kv_heads = 2,
            .talker_head_dim = 128,
            .talker_experts = 128,
            .talker_top_k = 6,
            .talker_expert_width = 384,
            .talker_shared_width = 768,
            .talker_projection_width = 2048,
            .accept_hidden_layer = 24,
            .talker_mrope_section = {24, 20, 20},
            .predictor_layers = 5,
            .predictor_heads = 16,
            .predictor_kv_heads = 8,
            .predictor_head_dim = 128,
            .predictor_ffn = 3072,
            .wav_hidden = 1024,
            .wav_layers = 8,
            .wav_heads = 16,
            .wav_ffn = 3072,
            .wav_decoder_dim = 1536};
}

// The released file's rope spelling (rope_theta plus rope_scaling).
ordered_json mrope(const std::vector<std::int64_t>& section, bool thinker) {
    ordered_json scaling = {{"interleaved", true}};
    if (thinker) scaling["mrope_interleaved"] = true;
    scaling["mrope_section"] = section;
    scaling["rope_type"] = "default";
    scaling["type"] = "default";
    return scaling;
}

}  // namespace

std::vector<std::string> omni_preset_names() { return {"tiny", "small", "30b-a3b"}; }

Result<ordered_json> omni_preset(std::string_view name, const std::string& dtype,
                                 const OmniTokenIds& ids) {
    PresetSizes s;
    if (name == "tiny") {
        s = tiny_sizes();
    } else if (name == "small") {
        s = small_sizes();
    } else if (name == "30b-a3b") {
        s = full_sizes();
    } else {
        return fail(ErrorCode::not_found, "unknown Qwen3-Omni preset \"" + std::string(name) +
                                              "\" (tiny, small, 30b-a3b)");
    }
    constexpr std::int64_t kVocab = 152064;
    const ordered_json audio = {
        {"activation_function", "gelu"},
        {"conv_chunksize", 500},
        {"d_model", s.audio_width},
        {"downsample_hidden_size", s.audio_downsample},
        {"encoder_attention_heads", s.audio_heads},
        {"encoder_ffn_dim", s.audio_ffn},
        {"encoder_layers", s.audio_layers},
        {"max_source_positions", 1500},
        {"model_type", "qwen3_omni_moe_audio_encoder"},
        {"n_window", 50},
        {"n_window_infer", s.audio_window_infer},
        {"num_mel_bins", 128},
        {"output_dim", s.hidden},
        {"scale_embedding", false},
    };
    const ordered_json vision = {
        {"deepstack_visual_indexes", s.deepstack},
        {"depth", s.vision_depth},
        {"hidden_act", "gelu_pytorch_tanh"},
        {"hidden_size", s.vision_width},
        {"in_channels", 3},
        {"intermediate_size", s.vision_ffn},
        {"model_type", "qwen3_omni_moe_vision_encoder"},
        {"num_heads", s.vision_heads},
        {"num_position_embeddings", 2304},
        {"out_hidden_size", s.hidden},
        {"patch_size", 16},
        {"spatial_merge_size", 2},
        {"temporal_patch_size", 2},
    };
    const ordered_json text = {
        {"attention_bias", false},
        {"decoder_sparse_step", 1},
        {"head_dim", s.head_dim},
        {"hidden_act", "silu"},
        {"hidden_size", s.hidden},
        {"intermediate_size", s.expert_width},
        {"max_position_embeddings", 65536},
        {"mlp_only_layers", ordered_json::array()},
        {"model_type", "qwen3_omni_moe_text"},
        {"moe_intermediate_size", s.expert_width},
        {"norm_topk_prob", true},
        {"num_attention_heads", s.heads},
        {"num_experts", s.experts},
        {"num_experts_per_tok", s.top_k},
        {"num_hidden_layers", s.layers},
        {"num_key_value_heads", s.kv_heads},
        {"rms_norm_eps", 1e-6},
        {"rope_scaling", mrope(s.mrope_section, true)},
        {"rope_theta", 1000000},
        {"shared_expert_intermediate_size", 0},
        {"sliding_window", nullptr},
        {"use_qk_norm", true},
        {"use_sliding_window", false},
        {"vocab_size", kVocab},
    };
    const OmniTokenIds real;
    const ordered_json thinker = {
        {"audio_config", audio},
        {"audio_end_token_id", real.audio_end},
        {"audio_start_token_id", real.audio_start},
        {"audio_token_id", real.audio},
        {"image_token_id", real.image},
        {"model_type", "qwen3_omni_moe_thinker"},
        {"position_id_per_seconds", 13},
        {"seconds_per_chunk", 2},
        {"text_config", text},
        {"user_token_id", ids.user},
        {"video_token_id", real.video},
        {"vision_config", vision},
        {"vision_end_token_id", real.vision_end},
        {"vision_start_token_id", real.vision_start},
    };
    const ordered_json talker_text = {
        {"attention_bias", false},
        {"decoder_sparse_step", 1},
        {"head_dim", s.talker_head_dim},
        {"hidden_act", "silu"},
        {"hidden_size", s.talker_hidden},
        {"intermediate_size", s.talker_projection_width},
        {"max_position_embeddings", 65536},
        {"mlp_only_layers", ordered_json::array()},
        {"model_type", "qwen3_omni_moe_talker_text"},
        {"moe_intermediate_size", s.talker_expert_width},
        {"norm_topk_prob", true},
        {"num_attention_heads", s.talker_heads},
        {"num_experts", s.talker_experts},
        {"num_experts_per_tok", s.talker_top_k},
        {"num_hidden_layers", s.talker_layers},
        {"num_key_value_heads", s.talker_kv_heads},
        {"rms_norm_eps", 1e-6},
        {"rope_scaling", mrope(s.talker_mrope_section, false)},
        {"rope_theta", 1000000},
        {"shared_expert_intermediate_size", s.talker_shared_width},
        {"sliding_window", nullptr},
        {"use_sliding_window", false},
        {"vocab_size", 3072},
    };
    const ordered_json predictor = {
        {"attention_bias", false},
        {"head_dim", s.predictor_head_dim},
        {"hidden_act", "silu"},
        {"hidden_size", s.talker_hidden},
        {"intermediate_size", s.predictor_ffn},
        {"layer_types", std::vector<std::string>(s.predictor_layers, "full_attention")},
        {"max_position_embeddings", 32768},
        {"model_type", "qwen3_omni_moe_talker_code_predictor"},
        {"num_attention_heads", s.predictor_heads},
        {"num_code_groups", 16},
        {"num_hidden_layers", s.predictor_layers},
        {"num_key_value_heads", s.predictor_kv_heads},
        {"rms_norm_eps", 1e-6},
        {"rope_scaling", nullptr},
        {"rope_theta", 1000000},
        {"sliding_window", nullptr},
        {"use_sliding_window", false},
        {"vocab_size", 2048},
    };
    const ordered_json talker = {
        {"accept_hidden_layer", s.accept_hidden_layer},
        {"audio_end_token_id", real.audio_end},
        {"audio_start_token_id", real.audio_start},
        {"audio_token_id", real.audio},
        {"code_predictor_config", predictor},
        {"codec_bos_id", 2149},
        {"codec_eos_token_id", 2150},
        {"codec_nothink_id", 2155},
        {"codec_pad_id", 2148},
        {"codec_think_bos_id", 2156},
        {"codec_think_eos_id", 2157},
        {"image_token_id", real.image},
        {"model_type", "qwen3_omni_moe_talker"},
        {"num_code_groups", 16},
        {"position_id_per_seconds", 13},
        {"seconds_per_chunk", 2},
        {"spatial_merge_size", 2},
        {"speaker_id", {{"chelsie", 2301}, {"ethan", 2302}, {"aiden", 2303}}},
        {"text_config", talker_text},
        {"thinker_hidden_size", s.hidden},
        {"video_token_id", real.video},
        {"vision_start_token_id", real.vision_start},
    };
    const ordered_json code2wav = {
        {"attention_bias", false},
        {"codebook_size", 2048},
        {"decoder_dim", s.wav_decoder_dim},
        {"hidden_act", "silu"},
        {"hidden_size", s.wav_hidden},
        {"intermediate_size", s.wav_ffn},
        {"layer_scale_initial_scale", 0.01},
        {"max_position_embeddings", 8000},
        {"model_type", "qwen3_omni_moe_code2wav"},
        {"num_attention_heads", s.wav_heads},
        {"num_hidden_layers", s.wav_layers},
        {"num_key_value_heads", s.wav_heads},
        {"num_quantizers", 16},
        {"rms_norm_eps", 1e-5},
        {"rope_theta", 10000},
        {"sliding_window", 72},
        {"upsample_rates", {8, 5, 4, 3}},
        {"upsampling_ratios", {2, 2}},
    };
    return ordered_json{
        {"architectures", {kArchitecture}},
        {"assistant_token_id", ids.assistant},
        {"code2wav_config", code2wav},
        {"enable_audio_output", true},
        {"im_end_token_id", real.im_end},
        {"im_start_token_id", real.im_start},
        {"model_type", kModelType},
        {"system_token_id", ids.system},
        {"talker_config", talker},
        {"thinker_config", thinker},
        {"torch_dtype", dtype},
        {"transformers_version", "4.57.0.dev0"},
        {"tts_bos_token_id", real.tts_bos},
        {"tts_eos_token_id", real.tts_eos},
        {"tts_pad_token_id", real.tts_pad},
        {"user_token_id", ids.user},
    };
}

}  // namespace omnirt::models::qwen3_omni
