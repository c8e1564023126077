#pragma once
// The S2-Pro prompt (fact sheet section 3): a list of parts, each text part tokenized on its own
// (BPE never merges across a part boundary; special tokens written in a part are single ids),
// and VQ parts (reference audio codes [num_codebooks, frames]) that contribute one semantic id
// per frame (semantic_begin + c_0) and mark those positions, whose codes travel alongside.
//
//   sglang style (SGLang-Omni's S2ProTokenizerAdapter; the serving reference), with references:
//     "<|im_start|>system\n"
//     "convert the provided text to speech reference to the following:\n\nText:\n"
//     "<|speaker:0|>{ref.text}"   one part per reference with text, no separator
//     "\n\nSpeech:\n"
//     VQ: every reference's codes, concatenated along time
//     "<|im_end|>\n"
//     "<|im_start|>user\n"  "<|speaker:0|>{text}"  "<|im_end|>\n"
//     "<|im_start|>assistant\n<|voice|>"   (open: generation starts after <|voice|>)
//   without references only the last four lines (no system message).
//
//   fish_speech style (fish-speech's generate_long, one batch, no long-text splitting):
//     the system message is always there; its text part is "convert the provided text to
//     speech" without references, else "convert ... following:\n\nText:\n" + the reference texts
//     tagged <|speaker:i|> (i = reference index, unless already tagged) joined by "\n" as ONE
//     part; the user text is not given a speaker tag.
//
// Thread safety: pure functions; the tokenizer is read only.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/s2_pro/config.h"
#include "text/tokenizer.h"

namespace omnirt::models::s2_pro {

// Codes of one reference clip: codebook k of frame t at codes[k * frames + t].
struct CodeMatrix {
    std::int64_t codebooks = 0;
    std::int64_t frames = 0;
    std::vector<std::int32_t> codes;
};

struct PromptReference {
    std::string text;  // may be empty (then no text part)
    CodeMatrix codes;  // frames may be 0 (text only)
};

enum class PromptStyle : std::uint8_t { sglang, fish_speech };

struct S2ProPrompt {
    std::vector<std::int32_t> ids;
    // Positions of VQ frames (ascending) and their codes: frame j's codebook k at
    // vq_codes[j * num_codebooks + k]; ids[vq_positions[j]] == semantic_begin + its code 0.
    std::vector<std::int64_t> vq_positions;
    std::vector<std::int32_t> vq_codes;
    std::int64_t num_codebooks = 0;
};

// Builds the prompt of `text` with `references`. Errors (invalid_argument, naming the reference):
// a code matrix whose size is not codebooks x frames, whose codebook count differs from the
// config's, or holding a code outside [0, codebook_size); the tokenizer's errors (text that is
// not UTF-8).
[[nodiscard]] Result<S2ProPrompt> build_prompt(const text::Tokenizer& tokenizer,
                                               const S2ProConfig& config, const std::string& text,
                                               const std::vector<PromptReference>& references,
                                               PromptStyle style = PromptStyle::sglang);

// The text parts (and the place of the VQ part, as an empty string at index vq_part) the prompt
// is made of, for tests and for explaining a prompt. vq_part is -1 when there is no VQ part.
struct PromptParts {
    std::vector<std::string> texts;
    std::int64_t vq_part = -1;
};
[[nodiscard]] PromptParts prompt_parts(const std::string& text,
                                       const std::vector<PromptReference>& references,
                                       PromptStyle style);

}  // namespace omnirt::models::s2_pro
