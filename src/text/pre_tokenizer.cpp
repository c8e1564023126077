// Split / ByteLevel pre-tokenization with Hugging Face's delimiter behaviours.
#include "text/pre_tokenizer.h"

namespace omnirt::text::detail {
namespace {

struct Piece {
    std::size_t begin;
    std::size_t end;
    bool is_match;
};

// The word cut into alternating gaps and matches that cover it exactly.
std::vector<Piece> cover(std::size_t size, const std::vector<Span>& matches, bool invert) {
    std::vector<Piece> pieces;
    pieces.reserve(matches.size() * 2 + 1);
    std::size_t position = 0;
    for (const Span& match : matches) {
        if (match.begin > position) pieces.push_back({position, match.begin, invert});
        pieces.push_back({match.begin, match.end, !invert});
        position = match.end;
    }
    if (position < size) pieces.push_back({position, size, invert});
    return pieces;
}

// Applies the behaviour; the result's is_match marks pieces to drop (only `removed` keeps any).
std::vector<Piece> apply_behavior(std::vector<Piece> pieces, SplitBehavior behavior) {
    std::vector<Piece> out;
    out.reserve(pieces.size());
    switch (behavior) {
        case SplitBehavior::isolated:
            for (Piece& piece : pieces) out.push_back({piece.begin, piece.end, false});
            return out;
        case SplitBehavior::removed:
            return pieces;
        case SplitBehavior::merged_with_previous: {
            bool previous_match = false;
            for (const Piece& piece : pieces) {
                if (piece.is_match && !previous_match && !out.empty()) {
                    out.back().end = piece.end;
                } else {
                    out.push_back({piece.begin, piece.end, false});
                }
                previous_match = piece.is_match;
            }
            return out;
        }
        case SplitBehavior::merged_with_next: {
            bool previous_match = false;
            for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
                if (it->is_match && !previous_match && !out.empty()) {
                    out.back().begin = it->begin;
                } else {
                    out.push_back({it->begin, it->end, false});
                }
                previous_match = it->is_match;
            }
            return {out.rbegin(), out.rend()};
        }
        case SplitBehavior::contiguous: {
            bool previous_match = false;
            for (const Piece& piece : pieces) {
                if (piece.is_match == previous_match && !out.empty()) {
                    out.back().end = piece.end;
                } else {
                    out.push_back({piece.begin, piece.end, false});
                }
                previous_match = piece.is_match;
            }
            return out;
        }
    }
    return out;
}

}  // namespace

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::create(std::vector<PreTokenizeStep> steps) {
    std::vector<Step> compiled;
    for (std::size_t i = 0; i < steps.size(); ++i) {
        const bool last = i + 1 == steps.size();
        if (const auto* split = std::get_if<SplitStep>(&steps[i])) {
            if (last) {
                return fail(ErrorCode::unimplemented,
                            "pre_tokenizer: only byte-level tokenizers are supported, and the "
                            "last step is not ByteLevel");
            }
            auto regex = Regex::compile(split->pattern, split->literal);
            if (!regex) {
                return fail(regex.error().with_context("pre_tokenizer Split pattern '" +
                                                       split->pattern.substr(0, 200) + "'"));
            }
            compiled.push_back(
                {.regex = std::move(*regex), .behavior = split->behavior, .invert = split->invert});
        } else {
            const auto& byte_level = std::get<ByteLevelStep>(steps[i]);
            if (!last) {
                return fail(ErrorCode::unimplemented,
                            "pre_tokenizer: ByteLevel must be the last pre-tokenizer");
            }
            Step step{.add_prefix_space = byte_level.add_prefix_space};
            if (byte_level.use_regex) {
                OMNI_TRY(step.regex, Regex::compile(kGpt2SplitPattern, false));
            }
            compiled.push_back(std::move(step));
        }
    }
    if (compiled.empty()) {
        return fail(ErrorCode::unimplemented,
                    "pre_tokenizer: only byte-level tokenizers are supported, and there is no "
                    "ByteLevel pre-tokenizer");
    }
    return std::unique_ptr<PreTokenizer>(new PreTokenizer(std::move(compiled)));
}

PreTokenizer::PreTokenizer(std::vector<Step> steps) : steps_(std::move(steps)) {}
PreTokenizer::~PreTokenizer() = default;

Status PreTokenizer::apply(const Step& step, std::string_view word,
                           std::vector<std::string_view>& out,
                           std::deque<std::string>& arena) const {
    if (step.add_prefix_space && !word.starts_with(' ')) {
        arena.push_back(" " + std::string(word));
        word = arena.back();
    }
    if (step.regex == nullptr) {
        out.push_back(word);
        return ok_status();
    }
    std::vector<Span> matches;
    OMNI_RETURN_IF_ERROR(step.regex->find_all(word, matches));
    // The common case (Isolated, not inverted) needs no intermediate pieces.
    if (step.behavior == SplitBehavior::isolated && !step.invert) {
        std::size_t position = 0;
        for (const Span& match : matches) {
            if (match.begin > position)
                out.push_back(word.substr(position, match.begin - position));
            out.push_back(word.substr(match.begin, match.end - match.begin));
            position = match.end;
        }
        if (position < word.size()) out.push_back(word.substr(position));
        return ok_status();
    }
    for (const Piece& piece :
         apply_behavior(cover(word.size(), matches, step.invert), step.behavior)) {
        if (!piece.is_match && piece.end > piece.begin) {
            out.push_back(word.substr(piece.begin, piece.end - piece.begin));
        }
    }
    return ok_status();
}

Status PreTokenizer::split(std::string_view text, std::vector<std::string_view>& words,
                           std::deque<std::string>& arena) const {
    std::vector<std::string_view> current{text};
    std::vector<std::string_view> next;
    for (std::size_t i = 0; i < steps_.size(); ++i) {
        const bool last = i + 1 == steps_.size();
        std::vector<std::string_view>& target = last ? words : next;
        for (std::string_view word : current) {
            OMNI_RETURN_IF_ERROR(apply(steps_[i], word, target, arena));
        }
        if (!last) {
            current.swap(next);
            next.clear();
        }
    }
    return ok_status();
}

}  // namespace omnirt::text::detail
