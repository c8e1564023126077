#pragma once
// A hand-written byte-level BPE tokenizer.json for the unit tests: the 256 byte tokens take ids
// 0..255 (id == byte value), merged tokens follow from 256 in merge order. Tests edit the JSON
// to exercise one feature or one malformation at a time.
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "text/byte_level.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace omnirt::text::testing {

// Qwen2 / Qwen3's split pattern.
inline constexpr const char* kQwenPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The byte-level spelling of UTF-8 text ("hello world" -> "helloĠworld").
inline std::string spell(std::string_view bytes) {
    std::string out;
    append_byte_level_spelling(bytes, out);
    return out;
}

// Merges in raw text ("h", "e"); spelled byte-level in the JSON.
inline const std::vector<std::pair<std::string, std::string>>& tiny_merges() {
    static const std::vector<std::pair<std::string, std::string>> merges = {
        {"h", "e"},   {"l", "l"}, {"he", "ll"},   {"hell", "o"}, {" ", "w"}, {"o", "r"},
        {" w", "or"}, {"l", "d"}, {" wor", "ld"}, {"a", "a"},    {"b", "c"}, {"a", "b"},
    };
    return merges;
}

// The id of a merged token (raw text) in tiny_tokenizer_json().
inline TokenId tiny_id(std::string_view raw) {
    if (raw.size() == 1) return static_cast<unsigned char>(raw[0]);
    const auto& merges = tiny_merges();
    for (std::size_t i = 0; i < merges.size(); ++i) {
        if (merges[i].first + merges[i].second == raw) return static_cast<TokenId>(256 + i);
    }
    return -1;
}

struct TinyOptions {
    bool merges_as_pairs = false;
    bool nfc = false;
};

inline nlohmann::json tiny_tokenizer_json(const TinyOptions& options = {}) {
    using nlohmann::json;
    json vocab = json::object();
    for (int byte = 0; byte < 256; ++byte) {
        std::string spelling;
        append_code_point(byte_to_code_point(static_cast<std::uint8_t>(byte)), spelling);
        vocab[spelling] = byte;
    }
    json merges = json::array();
    int next_id = 256;
    for (const auto& [left, right] : tiny_merges()) {
        const std::string merged = spell(left + right);
        if (!vocab.contains(merged)) vocab[merged] = next_id;
        ++next_id;
        if (options.merges_as_pairs) {
            merges.push_back(json::array({spell(left), spell(right)}));
        } else {
            merges.push_back(spell(left) + " " + spell(right));
        }
    }
    json root = {
        {"version", "1.0"},
        {"truncation", nullptr},
        {"padding", nullptr},
        {"added_tokens",
         json::array({
             {{"id", 1000}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}},
             {{"id", 1001}, {"content", "<x>"}, {"special", false}, {"normalized", false}},
         })},
        {"normalizer", options.nfc ? json{{"type", "NFC"}} : json(nullptr)},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers", json::array({{{"type", "Split"},
                                          {"pattern", {{"Regex", kQwenPattern}}},
                                          {"behavior", "Isolated"},
                                          {"invert", false}},
                                         {{"type", "ByteLevel"},
                                          {"add_prefix_space", false},
                                          {"trim_offsets", false},
                                          {"use_regex", false}}})}}},
        {"post_processor", {{"type", "ByteLevel"}}},
        {"decoder", {{"type", "ByteLevel"}}},
        {"model",
         {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", nullptr},
          {"continuing_subword_prefix", ""},
          {"end_of_word_suffix", ""},
          {"fuse_unk", false},
          {"byte_fallback", false},
          {"ignore_merges", false},
          {"vocab", vocab},
          {"merges", merges}}},
    };
    return root;
}

inline std::unique_ptr<Tokenizer> make_tokenizer(const nlohmann::json& json) {
    auto tokenizer = Tokenizer::from_json(json.dump());
    if (!tokenizer) throw std::runtime_error(tokenizer.error().to_string());
    return std::move(*tokenizer);
}

}  // namespace omnirt::text::testing
