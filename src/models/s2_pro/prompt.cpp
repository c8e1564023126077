#include "models/s2_pro/prompt.h"

namespace omnirt::models::s2_pro {
namespace {

constexpr std::string_view kSystemIntro = "convert the provided text to speech";
constexpr std::string_view kReferenceIntro =
    "convert the provided text to speech reference to the following:\n\nText:\n";

bool has_codes(const std::vector<PromptReference>& references) {
    for (const PromptReference& reference : references) {
        if (reference.codes.frames > 0) return true;
    }
    return false;
}

Status check_codes(const S2ProConfig& config, const PromptReference& reference, std::size_t index) {
    const CodeMatrix& codes = reference.codes;
    const std::string who = "reference " + std::to_string(index) + ": ";
    if (codes.frames < 0 || codes.codebooks < 0 ||
        static_cast<std::int64_t>(codes.codes.size()) != codes.codebooks * codes.frames) {
        return fail(ErrorCode::invalid_argument,
                    who + "codes hold " + std::to_string(codes.codes.size()) + " values, not " +
                        std::to_string(codes.codebooks) + " x " + std::to_string(codes.frames));
    }
    if (codes.frames == 0) return ok_status();
    if (codes.codebooks != config.num_codebooks) {
        return fail(ErrorCode::invalid_argument,
                    who + "codes have " + std::to_string(codes.codebooks) +
                        " codebooks; the model takes " + std::to_string(config.num_codebooks));
    }
    for (std::size_t i = 0; i < codes.codes.size(); ++i) {
        if (codes.codes[i] < 0 || codes.codes[i] >= config.codebook_size) {
            return fail(ErrorCode::invalid_argument,
                        who + "code " + std::to_string(codes.codes[i]) + " of codebook " +
                            std::to_string(static_cast<std::int64_t>(i) / codes.frames) +
                            " is outside [0, " + std::to_string(config.codebook_size) + ")");
        }
    }
    return ok_status();
}

}  // namespace

PromptParts prompt_parts(const std::string& text, const std::vector<PromptReference>& references,
                         PromptStyle style) {
    PromptParts parts;
    auto add = [&](std::string part) { parts.texts.push_back(std::move(part)); };
    const bool with_references = !references.empty();
    if (style == PromptStyle::sglang) {
        if (with_references) {
            add("<|im_start|>system\n");
            add(std::string(kReferenceIntro));
            for (const PromptReference& reference : references) {
                if (!reference.text.empty()) add("<|speaker:0|>" + reference.text);
            }
            add("\n\nSpeech:\n");
            if (has_codes(references)) {
                parts.vq_part = static_cast<std::int64_t>(parts.texts.size());
                add("");
            }
            add("<|im_end|>\n");
        }
        add("<|im_start|>user\n");
        add("<|speaker:0|>" + text);
    } else {
        add("<|im_start|>system\n");
        if (with_references) {
            std::string joined(kReferenceIntro);
            for (std::size_t i = 0; i < references.size(); ++i) {
                std::string tagged = references[i].text;
                if (!tagged.starts_with("<|speaker:")) {
                    tagged = "<|speaker:" + std::to_string(i) + "|>" + tagged;
                }
                joined += (i == 0 ? "" : "\n") + tagged;
            }
            add(std::move(joined));
            add("\n\nSpeech:\n");
            if (has_codes(references)) {
                parts.vq_part = static_cast<std::int64_t>(parts.texts.size());
                add("");
            }
        } else {
            add(std::string(kSystemIntro));
        }
        add("<|im_end|>\n");
        add("<|im_start|>user\n");
        add(text);
    }
    add("<|im_end|>\n");
    add("<|im_start|>assistant\n<|voice|>");
    return parts;
}

Result<S2ProPrompt> build_prompt(const text::Tokenizer& tokenizer, const S2ProConfig& config,
                                 const std::string& text,
                                 const std::vector<PromptReference>& references,
                                 PromptStyle style) {
    for (std::size_t i = 0; i < references.size(); ++i) {
        OMNI_RETURN_IF_ERROR(check_codes(config, references[i], i));
    }
    const PromptParts parts = prompt_parts(text, references, style);
    S2ProPrompt prompt;
    prompt.num_codebooks = config.num_codebooks;
    const text::EncodeOptions encode{.add_special_tokens = false, .match_special_tokens = true};
    for (std::size_t p = 0; p < parts.texts.size(); ++p) {
        if (static_cast<std::int64_t>(p) == parts.vq_part) {
            for (const PromptReference& reference : references) {
                const CodeMatrix& codes = reference.codes;
                for (std::int64_t t = 0; t < codes.frames; ++t) {
                    prompt.vq_positions.push_back(static_cast<std::int64_t>(prompt.ids.size()));
                    prompt.ids.push_back(
                        static_cast<std::int32_t>(config.ids.semantic_begin + codes.codes[t]));
                    for (std::int64_t k = 0; k < codes.codebooks; ++k) {
                        prompt.vq_codes.push_back(codes.codes[k * codes.frames + t]);
                    }
                }
            }
            continue;
        }
        auto ids = tokenizer.encode(parts.texts[p], encode);
        if (!ids) return fail(ids.error().with_context("S2-Pro prompt part " + std::to_string(p)));
        prompt.ids.insert(prompt.ids.end(), ids->begin(), ids->end());
    }
    return prompt;
}

}  // namespace omnirt::models::s2_pro
