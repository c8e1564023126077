#pragma once
// The tiny tokenizer written into generated Qwen3 checkpoints: a real byte-level BPE tokenizer in
// Qwen's tokenizer.json format (NFC normalizer, Qwen2 split regex + ByteLevel pre-tokenizer,
// ByteLevel decoder), with the 256 byte tokens in GPT-2 byte order, kTinyMerges merges learned
// deterministically from a fixed text (tiny_tokenizer_corpus()), and Qwen's 33 added tokens
// (<|endoftext|> .. <|audio_pad|>) after them, at the same offsets from <|endoftext|> as in the
// real vocabulary: tiny id = kTinyFirstSpecialId + (Qwen id - 151643).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace omnirt::models::qwen3 {

inline constexpr std::int64_t kTinyMerges = 700;             // new vocabulary entries learned
inline constexpr std::int64_t kQwenFirstSpecialId = 151643;  // <|endoftext|> in Qwen's vocabulary
inline constexpr std::int64_t kTinyFirstSpecialId = 256 + kTinyMerges;
inline constexpr std::int64_t kQwenSpecialCount = 33;  // 151643 ..= 151675
inline constexpr std::int64_t kTinyTokenizerSize = kTinyFirstSpecialId + kQwenSpecialCount;
// vocab_size of the tiny preset: the tokenizer rounded up to a multiple of 64, as Qwen pads its
// embedding (ids past the tokenizer exist in the model but never in text).
inline constexpr std::int64_t kTinyVocabSize = (kTinyTokenizerSize + 63) / 64 * 64;

struct QwenSpecialToken {
    std::string_view content;
    std::int64_t qwen_id;
    bool special;  // false for <tool_call>, <think>, <|fim_*|>, ...: kept when decoding
};
// Qwen's added tokens, Qwen3 (151643..151668) and Qwen3-Omni (151669..151675), in id order.
[[nodiscard]] std::span<const QwenSpecialToken> qwen_special_tokens();

// Ids of the tokens the runtime needs, in the tiny vocabulary.
struct TinyTokenizerIds {
    std::int64_t endoftext, im_start, im_end;
    std::int64_t vision_start, vision_end, image_pad, video_pad;
    std::int64_t audio_start, audio_end, audio_pad;
    std::int64_t tts_pad, tts_bos, tts_eos;
};
[[nodiscard]] TinyTokenizerIds tiny_tokenizer_ids();

struct TinyTokenizerFiles {
    nlohmann::ordered_json tokenizer;         // tokenizer.json
    nlohmann::ordered_json tokenizer_config;  // tokenizer_config.json (with chat_template)
    std::vector<std::string> vocab;           // id -> token (byte-level string), specials included
    std::vector<std::pair<std::string, std::string>> merges;  // in rank order
};
// Built on first use (a few milliseconds), then shared; thread-safe.
[[nodiscard]] const TinyTokenizerFiles& tiny_tokenizer_files();

// Building blocks, exposed for tests.
[[nodiscard]] std::string_view tiny_tokenizer_corpus();
[[nodiscard]] std::string_view qwen3_chat_template();
// Splits text as Qwen's pre-tokenizer regex does (exact for ASCII; other bytes count as letters).
[[nodiscard]] std::vector<std::string> qwen_split_ascii(std::string_view text);
// GPT-2's byte-to-unicode mapping of each byte, as UTF-8 ("Ġ" for a space).
[[nodiscard]] std::string byte_level(std::string_view bytes);
// BPE of one pre-tokenized piece with the tiny tokenizer's merges: the tokens (byte-level).
[[nodiscard]] std::vector<std::string> tiny_bpe(std::string_view piece);

}  // namespace omnirt::models::qwen3
