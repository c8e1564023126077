#pragma once
// The config.json of Fish Audio S2-Pro (model_type fish_qwen3_omni, FishQwen3OmniForCausalLM;
// docs/models/s2_pro.md, fact sheet section 1.2): the token ids at the top level, the slow AR
// (`text_config`, fish_qwen3) and the fast AR (`audio_decoder_config`,
// fish_qwen3_audio_decoder), in fish-speech's own key names (dim, n_layer, n_head,
// n_local_heads, ...).
//
// Values come from the file: the Python classes' defaults are unrelated toy values, so every size
// is required; only flags the released file always writes take the released value when absent.
// The two decoders map onto the shared Qwen3 decoder stack (to_qwen3()); what that stack cannot
// run (biases, MoE, a project_in) is refused with unimplemented.
//
// Thread safety: plain values; the functions are pure.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "models/qwen3/config.h"

namespace omnirt::models::s2_pro {

inline constexpr std::string_view kModelType = "fish_qwen3_omni";
inline constexpr std::string_view kArchitecture = "FishQwen3OmniForCausalLM";

// Token ids of the prompt format (fact sheet section 2). Top-level config keys override
// eos (eos_token_id), pad (pad_token_id), audio_pad, semantic_begin / semantic_end; the rest are
// fixed by the tokenizer (the generated tokenizer writes them at these ids).
struct S2ProTokenIds {
    std::int64_t endoftext = 151643;
    std::int64_t im_start = 151644;
    std::int64_t im_end = 151645;  // eos_token_id: stops generation
    std::int64_t pad = 151669;
    std::int64_t phoneme_start = 151670;
    std::int64_t phoneme_end = 151671;
    std::int64_t text = 151672;
    std::int64_t voice = 151673;
    std::int64_t interleave = 151674;
    std::int64_t audio_start = 151675;
    std::int64_t audio_end = 151676;
    std::int64_t audio_pad = 151677;
    std::int64_t semantic_begin = 151678;  // <|semantic:0|>
    std::int64_t semantic_end = 155773;    // <|semantic:4095|>

    [[nodiscard]] bool is_semantic(std::int64_t id) const {
        return id >= semantic_begin && id <= semantic_end;
    }
};

// One fish decoder stack (text_config or audio_decoder_config), in the file's key names.
struct FishDecoderConfig {
    std::string model_type;
    std::int64_t dim = 0;
    std::int64_t n_layer = 0;
    std::int64_t n_head = 0;
    std::int64_t n_local_heads = 0;  // kv heads
    std::int64_t head_dim = 0;
    std::int64_t intermediate_size = 0;
    std::int64_t vocab_size = 0;
    std::int64_t max_seq_len = 0;
    double rope_base = 1e6;
    double norm_eps = 1e-6;
    bool attention_qk_norm = false;
    bool attention_qkv_bias = false;
    bool attention_o_bias = false;
    bool tie_word_embeddings = false;
    bool use_moe = false;
    // audio_decoder_config only.
    std::int64_t num_codebooks = 0;
    std::int64_t text_dim = 0;  // width of the slow AR's hidden fed in (project_in when != dim)
};

struct S2ProConfig {
    std::string torch_dtype;  // "bfloat16"; empty when absent
    S2ProTokenIds ids;
    FishDecoderConfig text;   // slow AR
    FishDecoderConfig audio;  // fast AR
    // Codes per frame (audio_decoder_config.num_codebooks) and entries per codebook row of
    // codebook_embeddings (audio_decoder_config.vocab_size).
    std::int64_t num_codebooks = 0;
    std::int64_t codebook_size = 0;
    // fish-speech hard-codes both for this format (fact sheet section 1.2).
    bool scale_codebook_embeddings = true;
    bool norm_fastlayer_input = true;
};

// Parses a config.json object. invalid_argument naming the key ("text_config.dim is missing",
// "audio_decoder_config.n_head must be an integer, not \"x\"") for a missing or malformed value
// or a model_type other than fish_qwen3_omni; invalid_argument for inconsistent sizes (heads
// not divisible by kv heads, semantic ids outside the text vocabulary or not one per code of a
// codebook); unimplemented for what the runtime does not run (biases, MoE, text_dim != dim).
[[nodiscard]] Result<S2ProConfig> parse_s2_pro_config(const nlohmann::json& json);

// The shared decoder stack's view of one fish stack (qk norms, GQA, SwiGLU, RMSNorm).
[[nodiscard]] qwen3::Qwen3Config to_qwen3(const FishDecoderConfig& decoder, std::int64_t eos);

// Presets: "tiny" (tests: dim 64, 2 + 2 layers), "small" (CPU benchmarks: dim 256, 4 + 2
// layers), both with the real vocabulary, token ids and 10 codebooks of 4096; "s2-pro" is the
// released config.json (4.56 B parameters, for --load-format dummy).
[[nodiscard]] std::vector<std::string> s2_pro_preset_names();
// config.json of a preset with `dtype` ("bfloat16"); not_found for other names.
[[nodiscard]] Result<nlohmann::ordered_json> s2_pro_preset(std::string_view name,
                                                           const std::string& dtype);

}  // namespace omnirt::models::s2_pro
