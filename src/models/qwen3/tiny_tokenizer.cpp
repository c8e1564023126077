#include "models/qwen3/tiny_tokenizer.h"

#include <array>
#include <map>
#include <set>

#include "core/error.h"

namespace omnirt::models::qwen3 {
namespace {

constexpr QwenSpecialToken kSpecialTokens[] = {
    {"<|endoftext|>", 151643, true},
    {"<|im_start|>", 151644, true},
    {"<|im_end|>", 151645, true},
    {"<|object_ref_start|>", 151646, true},
    {"<|object_ref_end|>", 151647, true},
    {"<|box_start|>", 151648, true},
    {"<|box_end|>", 151649, true},
    {"<|quad_start|>", 151650, true},
    {"<|quad_end|>", 151651, true},
    {"<|vision_start|>", 151652, true},
    {"<|vision_end|>", 151653, true},
    {"<|vision_pad|>", 151654, true},
    {"<|image_pad|>", 151655, true},
    {"<|video_pad|>", 151656, true},
    {"<tool_call>", 151657, false},
    {"</tool_call>", 151658, false},
    {"<|fim_prefix|>", 151659, false},
    {"<|fim_middle|>", 151660, false},
    {"<|fim_suffix|>", 151661, false},
    {"<|fim_pad|>", 151662, false},
    {"<|repo_name|>", 151663, false},
    {"<|file_sep|>", 151664, false},
    {"<tool_response>", 151665, false},
    {"</tool_response>", 151666, false},
    {"<think>", 151667, false},
    {"</think>", 151668, false},
    // Qwen3-Omni.
    {"<|audio_start|>", 151669, true},
    {"<|audio_end|>", 151670, true},
    {"<tts_pad>", 151671, true},
    {"<tts_text_bos>", 151672, true},
    {"<tts_text_eod>", 151673, true},
    {"<tts_text_bos_single>", 151674, true},
    {"<|audio_pad|>", 151675, true},
};
static_assert(std::size(kSpecialTokens) == kQwenSpecialCount);

constexpr std::string_view kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::int64_t tiny_id(std::int64_t qwen_id) {
    return kTinyFirstSpecialId + (qwen_id - kQwenFirstSpecialId);
}

void append_utf8(std::string& out, std::uint32_t code_point) {
    if (code_point < 0x80) {
        out += static_cast<char>(code_point);
    } else if (code_point < 0x800) {
        out += static_cast<char>(0xC0 | (code_point >> 6));
        out += static_cast<char>(0x80 | (code_point & 0x3F));
    } else {
        out += static_cast<char>(0xE0 | (code_point >> 12));
        out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code_point & 0x3F));
    }
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the others map to
// U+0100 upwards. `order` is the byte order of the first 256 vocabulary ids.
struct ByteTable {
    std::array<std::uint32_t, 256> code_point{};
    std::array<std::uint8_t, 256> order{};
};

const ByteTable& byte_table() {
    static const ByteTable table = [] {
        ByteTable t;
        std::size_t next = 0;
        std::array<bool, 256> printable{};
        for (int b = 0; b < 256; ++b) {
            printable[b] = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            if (printable[b]) {
                t.code_point[b] = static_cast<std::uint32_t>(b);
                t.order[next++] = static_cast<std::uint8_t>(b);
            }
        }
        std::uint32_t extra = 256;
        for (int b = 0; b < 256; ++b) {
            if (!printable[b]) {
                t.code_point[b] = extra++;
                t.order[next++] = static_cast<std::uint8_t>(b);
            }
        }
        return t;
    }();
    return table;
}

bool is_letter(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
bool is_newline(unsigned char c) { return c == '\r' || c == '\n'; }
bool is_other(unsigned char c) { return !is_space(c) && !is_letter(c) && !is_digit(c); }
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Length of the regex match at `i` (the alternatives in order, first match wins).
std::size_t match_at(std::string_view s, std::size_t i) {
    const std::size_t n = s.size();
    auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (s[i] == '\'') {
        for (std::string_view suffix : {"s", "t", "re", "ve", "m", "ll", "d"}) {
            if (i + 1 + suffix.size() > n) continue;
            bool same = true;
            for (std::size_t k = 0; k < suffix.size(); ++k)
                same &= lower(s[i + 1 + k]) == suffix[k];
            if (same) return 1 + suffix.size();
        }
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    {
        std::size_t j = i;
        if (!is_newline(at(j)) && !is_letter(at(j)) && !is_digit(at(j)) && j + 1 < n &&
            is_letter(at(j + 1))) {
            ++j;
        }
        if (is_letter(at(j))) {
            while (j < n && is_letter(at(j))) ++j;
            return j - i;
        }
    }
    // \p{N}
    if (is_digit(at(i))) return 1;
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    {
        std::size_t j = i;
        if (at(j) == ' ' && j + 1 < n && is_other(at(j + 1))) ++j;
        if (is_other(at(j))) {
            while (j < n && is_other(at(j))) ++j;
            while (j < n && is_newline(at(j))) ++j;
            return j - i;
        }
    }
    // The remaining alternatives start with whitespace; s[i] is whitespace here.
    std::size_t end = i;
    while (end < n && is_space(at(end))) ++end;
    // \s*[\r\n]+ : up to and including the run's last newline.
    for (std::size_t k = end; k-- > i;) {
        if (is_newline(at(k))) return k + 1 - i;
    }
    // \s+(?!\S) : the run, less its last character when text follows.
    if (end == n) return end - i;
    if (end - i >= 2) return end - 1 - i;
    // \s+
    return end - i;
}

TinyTokenizerFiles build() {
    TinyTokenizerFiles files;
    const ByteTable& bytes = byte_table();
    std::map<std::string, std::int64_t> vocab_ids;
    for (std::uint8_t b : bytes.order) {
        std::string token = byte_level(std::string_view(reinterpret_cast<const char*>(&b), 1));
        vocab_ids.emplace(token, static_cast<std::int64_t>(files.vocab.size()));
        files.vocab.push_back(token);
    }
    // Pre-tokenize the corpus and count each piece.
    std::map<std::string, std::int64_t> counts;
    for (const std::string& piece : qwen_split_ascii(tiny_tokenizer_corpus())) ++counts[piece];
    struct Word {
        std::vector<std::int64_t> symbols;
        std::int64_t count;
    };
    std::vector<Word> words;
    for (const auto& [piece, count] : counts) {
        Word word{.symbols = {}, .count = count};
        for (char c : piece) {
            word.symbols.push_back(vocab_ids.at(byte_level(std::string_view(&c, 1))));
        }
        words.push_back(std::move(word));
    }
    // Learn merges: the most frequent adjacent pair, ties broken by the pair's text.
    while (static_cast<std::int64_t>(files.vocab.size()) < kTinyFirstSpecialId) {
        std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> pairs;
        for (const Word& word : words) {
            for (std::size_t k = 0; k + 1 < word.symbols.size(); ++k) {
                pairs[{word.symbols[k], word.symbols[k + 1]}] += word.count;
            }
        }
        OMNI_CHECK(!pairs.empty(), "tiny tokenizer corpus is too small for its merges");
        auto best = pairs.begin();
        for (auto it = pairs.begin(); it != pairs.end(); ++it) {
            const auto& [a, b] = it->first;
            const auto& [best_a, best_b] = best->first;
            if (it->second > best->second ||
                (it->second == best->second &&
                 std::tie(files.vocab[a], files.vocab[b]) <
                     std::tie(files.vocab[best_a], files.vocab[best_b]))) {
                best = it;
            }
        }
        const auto [left, right] = best->first;
        const std::string merged = files.vocab[left] + files.vocab[right];
        files.merges.emplace_back(files.vocab[left], files.vocab[right]);
        auto [it, inserted] =
            vocab_ids.emplace(merged, static_cast<std::int64_t>(files.vocab.size()));
        if (inserted) files.vocab.push_back(merged);
        const std::int64_t merged_id = it->second;
        for (Word& word : words) {
            std::vector<std::int64_t> next;
            next.reserve(word.symbols.size());
            for (std::size_t k = 0; k < word.symbols.size(); ++k) {
                if (k + 1 < word.symbols.size() && word.symbols[k] == left &&
                    word.symbols[k + 1] == right) {
                    next.push_back(merged_id);
                    ++k;
                } else {
                    next.push_back(word.symbols[k]);
                }
            }
            word.symbols = std::move(next);
        }
    }
    for (const QwenSpecialToken& special : kSpecialTokens) {
        files.vocab.emplace_back(special.content);
    }

    using ordered_json = nlohmann::ordered_json;
    ordered_json vocab = ordered_json::object();
    for (std::int64_t id = 0; id < kTinyFirstSpecialId; ++id) vocab[files.vocab[id]] = id;
    ordered_json merges = ordered_json::array();
    for (const auto& [a, b] : files.merges) merges.push_back(a + " " + b);
    ordered_json added_tokens = ordered_json::array();
    ordered_json added_tokens_decoder = ordered_json::object();
    ordered_json additional_special_tokens = ordered_json::array();
    for (const QwenSpecialToken& special : kSpecialTokens) {
        const std::int64_t id = tiny_id(special.qwen_id);
        added_tokens.push_back({{"id", id},
                                {"content", special.content},
                                {"single_word", false},
                                {"lstrip", false},
                                {"rstrip", false},
                                {"normalized", false},
                                {"special", special.special}});
        added_tokens_decoder[std::to_string(id)] = {
            {"content", special.content}, {"lstrip", false},
            {"normalized", false},        {"rstrip", false},
            {"single_word", false},       {"special", special.special}};
        if (special.special && special.content != "<|endoftext|>") {
            additional_special_tokens.push_back(special.content);
        }
    }
    const ordered_json byte_level_step = {{"type", "ByteLevel"},
                                          {"add_prefix_space", false},
                                          {"trim_offsets", false},
                                          {"use_regex", false}};
    files.tokenizer = {
        {"version", "1.0"},
        {"truncation", nullptr},
        {"padding", nullptr},
        {"added_tokens", std::move(added_tokens)},
        {"normalizer", {{"type", "NFC"}}},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", kQwen2SplitPattern}}},
             {"behavior", "Isolated"},
             {"invert", false}},
            byte_level_step}}}},
        {"post_processor", byte_level_step},
        {"decoder", byte_level_step},
        {"model",
         {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", nullptr},
          {"continuing_subword_prefix", ""},
          {"end_of_word_suffix", ""},
          {"fuse_unk", false},
          {"byte_fallback", false},
          {"ignore_merges", false},
          {"vocab", std::move(vocab)},
          {"merges", std::move(merges)}}},
    };
    files.tokenizer_config = {
        {"add_bos_token", false},
        {"add_prefix_space", false},
        {"added_tokens_decoder", std::move(added_tokens_decoder)},
        {"additional_special_tokens", std::move(additional_special_tokens)},
        {"bos_token", nullptr},
        {"chat_template", qwen3_chat_template()},
        {"clean_up_tokenization_spaces", false},
        {"eos_token", "<|im_end|>"},
        {"errors", "replace"},
        {"model_max_length", 131072},
        {"pad_token", "<|endoftext|>"},
        {"split_special_tokens", false},
        {"tokenizer_class", "Qwen2Tokenizer"},
        {"unk_token", nullptr},
    };
    return files;
}

}  // namespace

std::span<const QwenSpecialToken> qwen_special_tokens() { return kSpecialTokens; }

TinyTokenizerIds tiny_tokenizer_ids() {
    return TinyTokenizerIds{
        .endoftext = tiny_id(151643),
        .im_start = tiny_id(151644),
        .im_end = tiny_id(151645),
        .vision_start = tiny_id(151652),
        .vision_end = tiny_id(151653),
        .image_pad = tiny_id(151655),
        .video_pad = tiny_id(151656),
        .audio_start = tiny_id(151669),
        .audio_end = tiny_id(151670),
        .audio_pad = tiny_id(151675),
        .tts_pad = tiny_id(151671),
        .tts_bos = tiny_id(151672),
        .tts_eos = tiny_id(151673),
    };
}

const TinyTokenizerFiles& tiny_tokenizer_files() {
    static const TinyTokenizerFiles files = build();
    return files;
}

std::vector<std::string> qwen_split_ascii(std::string_view text) {
    std::vector<std::string> pieces;
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t length = match_at(text, i);
        pieces.emplace_back(text.substr(i, length));
        i += length;
    }
    return pieces;
}

std::string byte_level(std::string_view bytes) {
    std::string out;
    for (char c : bytes) append_utf8(out, byte_table().code_point[static_cast<unsigned char>(c)]);
    return out;
}

std::vector<std::string> tiny_bpe(std::string_view piece) {
    const TinyTokenizerFiles& files = tiny_tokenizer_files();
    static const std::map<std::pair<std::string, std::string>, std::size_t> ranks = [&] {
        std::map<std::pair<std::string, std::string>, std::size_t> r;
        for (std::size_t i = 0; i < files.merges.size(); ++i) r.emplace(files.merges[i], i);
        return r;
    }();
    std::vector<std::string> symbols;
    for (char c : piece) symbols.push_back(byte_level(std::string_view(&c, 1)));
    while (symbols.size() > 1) {
        std::size_t best_rank = ranks.size();
        std::size_t best_at = 0;
        for (std::size_t k = 0; k + 1 < symbols.size(); ++k) {
            auto it = ranks.find({symbols[k], symbols[k + 1]});
            if (it != ranks.end() && it->second < best_rank) {
                best_rank = it->second;
                best_at = k;
            }
        }
        if (best_rank == ranks.size()) break;
        symbols[best_at] += symbols[best_at + 1];
        symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
    }
    return symbols;
}

}  // namespace omnirt::models::qwen3
