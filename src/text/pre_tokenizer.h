#pragma once
// Private to omnirt_text: the pre-tokenizer pipeline of a byte-level BPE tokenizer.json:
// zero or more Split steps (regex or literal), then ByteLevel (optionally with its own GPT-2
// regex and a prefix space). Words come out as raw UTF-8 bytes; the byte-level alphabet is
// applied by the BPE model through its byte -> id table.
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/error.h"
#include "text/regex.h"

namespace omnirt::text::detail {

// What a Split step does with each match (Hugging Face's SplitDelimiterBehavior).
enum class SplitBehavior : std::uint8_t {
    isolated,              // matches and the text between them are separate words
    removed,               // matches are dropped
    merged_with_previous,  // a match ends the word before it
    merged_with_next,      // a match starts the word after it
    contiguous,            // consecutive matches form one word
};

struct SplitStep {
    std::string pattern;
    bool literal = false;  // pattern.String rather than pattern.Regex
    SplitBehavior behavior = SplitBehavior::isolated;
    bool invert = false;  // the pattern describes the words rather than the delimiters
};

struct ByteLevelStep {
    bool add_prefix_space = false;
    bool use_regex = true;
};

using PreTokenizeStep = std::variant<SplitStep, ByteLevelStep>;

// GPT-2's split pattern, used by ByteLevel when use_regex is true.
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class PreTokenizer {
  public:
    // `steps` must end with exactly one ByteLevel step. invalid_argument (with "pre_tokenizer"
    // in the message) for a bad regex or a misplaced ByteLevel.
    [[nodiscard]] static Result<std::unique_ptr<PreTokenizer>> create(
        std::vector<PreTokenizeStep> steps);
    ~PreTokenizer();

    // Appends the words of `text` (valid UTF-8). Words are views of `text` or of strings that
    // `arena` owns (added prefix spaces). Safe from any thread.
    [[nodiscard]] Status split(std::string_view text, std::vector<std::string_view>& words,
                               std::deque<std::string>& arena) const;

  private:
    struct Step {
        std::unique_ptr<Regex> regex;  // null: no splitting (ByteLevel without regex)
        SplitBehavior behavior = SplitBehavior::isolated;
        bool invert = false;
        bool add_prefix_space = false;
    };
    explicit PreTokenizer(std::vector<Step> steps);
    [[nodiscard]] Status apply(const Step& step, std::string_view word,
                               std::vector<std::string_view>& out,
                               std::deque<std::string>& arena) const;
    std::vector<Step> steps_;
};

}  // namespace omnirt::text::detail
