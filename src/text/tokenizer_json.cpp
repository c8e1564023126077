// tokenizer.json -> TokenizerSpec, with errors that name the field.
#include "text/tokenizer_json.h"

#include <nlohmann/json.hpp>

#include <unordered_set>

#include "text/utf8.h"

namespace omnirt::text::detail {
namespace {

using nlohmann::json;

std::string type_name(const json& value) {
    switch (value.type()) {
        case json::value_t::null:
            return "null";
        case json::value_t::boolean:
            return "a boolean";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned:
            return "an integer";
        case json::value_t::number_float:
            return "a number";
        case json::value_t::string:
            return "a string";
        case json::value_t::array:
            return "an array";
        case json::value_t::object:
            return "an object";
        default:
            return "an unsupported value";
    }
}

unexpected<Error> field_error(std::string_view path, std::string message,
                              ErrorCode code = ErrorCode::invalid_argument) {
    return fail(code, "tokenizer.json: " + std::string(path) + ": " + std::move(message));
}

unexpected<Error> type_error(std::string_view path, std::string_view expected, const json& value) {
    return field_error(path, "expected " + std::string(expected) + ", got " + type_name(value));
}

std::string child(std::string_view path, std::string_view key) {
    return path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
}

std::string element(std::string_view path, std::size_t index) {
    return std::string(path) + "[" + std::to_string(index) + "]";
}

std::string shown(std::string_view text) {
    return "'" + std::string(text.substr(0, 100)) + (text.size() > 100 ? "...'" : "'");
}

// The member `key` of `object`, or null when it is missing or JSON null.
const json* member(const json& object, std::string_view key) {
    const auto found = object.find(key);
    if (found == object.end() || found->is_null()) return nullptr;
    return &*found;
}

Result<bool> read_bool(const json& object, std::string_view path, std::string_view key,
                       bool fallback) {
    const json* value = member(object, key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) return type_error(child(path, key), "a boolean", *value);
    return value->get<bool>();
}

Result<std::string> read_string(const json& value, std::string_view path) {
    if (!value.is_string()) return type_error(path, "a string", value);
    std::string text = value.get<std::string>();
    if (find_invalid_utf8(text)) return field_error(path, "the string is not valid UTF-8");
    return text;
}

Result<std::string> read_required_string(const json& object, std::string_view path,
                                         std::string_view key) {
    const json* value = member(object, key);
    if (value == nullptr) return field_error(child(path, key), "missing (a string is required)");
    return read_string(*value, child(path, key));
}

Result<TokenId> read_id(const json& value, std::string_view path) {
    if (!value.is_number_integer()) return type_error(path, "an integer id", value);
    const auto id = value.get<std::int64_t>();
    if (id < 0 || id > kMaxTokenId) {
        return field_error(
            path, "id " + std::to_string(id) + " is outside 0.." + std::to_string(kMaxTokenId));
    }
    return static_cast<TokenId>(id);
}

Result<std::string> read_type(const json& object, std::string_view path) {
    if (!object.is_object()) return type_error(path, "an object", object);
    return read_required_string(object, path, "type");
}

// ---- sections ------------------------------------------------------------------------------

Result<std::vector<AddedToken>> parse_added_tokens(const json& root) {
    std::vector<AddedToken> tokens;
    const json* list = member(root, "added_tokens");
    if (list == nullptr) return tokens;
    if (!list->is_array()) return type_error("added_tokens", "an array", *list);
    std::unordered_set<std::string> contents;
    std::unordered_set<TokenId> ids;
    for (std::size_t i = 0; i < list->size(); ++i) {
        const std::string path = element("added_tokens", i);
        const json& item = (*list)[i];
        if (!item.is_object()) return type_error(path, "an object", item);
        AddedToken token;
        const json* id = member(item, "id");
        if (id == nullptr)
            return field_error(child(path, "id"), "missing (an integer is required)");
        OMNI_TRY(token.id, read_id(*id, child(path, "id")));
        OMNI_TRY(token.content, read_required_string(item, path, "content"));
        if (token.content.empty()) return field_error(child(path, "content"), "is empty");
        OMNI_TRY(token.special, read_bool(item, path, "special", false));
        OMNI_TRY(token.single_word, read_bool(item, path, "single_word", false));
        OMNI_TRY(token.lstrip, read_bool(item, path, "lstrip", false));
        OMNI_TRY(token.rstrip, read_bool(item, path, "rstrip", false));
        OMNI_TRY(token.normalized, read_bool(item, path, "normalized", !token.special));
        if (!contents.insert(token.content).second) {
            return field_error(path, "content " + shown(token.content) + " is listed twice");
        }
        if (!ids.insert(token.id).second) {
            return field_error(path, "id " + std::to_string(token.id) + " is listed twice");
        }
        tokens.push_back(std::move(token));
    }
    return tokens;
}

Status parse_normalizer(const json& value, std::string_view path, std::vector<NormalForm>& forms) {
    OMNI_TRY(const std::string type, read_type(value, path));
    if (type == "NFC") {
        forms.push_back(NormalForm::nfc);
    } else if (type == "NFD") {
        forms.push_back(NormalForm::nfd);
    } else if (type == "NFKC") {
        forms.push_back(NormalForm::nfkc);
    } else if (type == "NFKD") {
        forms.push_back(NormalForm::nfkd);
    } else if (type == "Sequence") {
        const json* list = member(value, "normalizers");
        if (list == nullptr || !list->is_array()) {
            return type_error(child(path, "normalizers"), "an array",
                              list == nullptr ? json() : *list);
        }
        for (std::size_t i = 0; i < list->size(); ++i) {
            OMNI_RETURN_IF_ERROR(
                parse_normalizer((*list)[i], element(child(path, "normalizers"), i), forms));
        }
    } else {
        return field_error(child(path, "type"),
                           "normalizer " + shown(type) +
                               " is not supported (supported: NFC, NFD, NFKC, NFKD, Sequence)",
                           ErrorCode::unimplemented);
    }
    return ok_status();
}

Result<SplitBehavior> parse_behavior(const json& object, std::string_view path) {
    OMNI_TRY(const std::string name, read_required_string(object, path, "behavior"));
    if (name == "Isolated") return SplitBehavior::isolated;
    if (name == "Removed") return SplitBehavior::removed;
    if (name == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
    if (name == "MergedWithNext") return SplitBehavior::merged_with_next;
    if (name == "Contiguous") return SplitBehavior::contiguous;
    return field_error(child(path, "behavior"),
                       "unknown behavior " + shown(name) +
                           " (expected Isolated, Removed, MergedWithPrevious, MergedWithNext or "
                           "Contiguous)");
}

Status parse_pre_tokenizer(const json& value, std::string_view path,
                           std::vector<PreTokenizeStep>& steps) {
    OMNI_TRY(const std::string type, read_type(value, path));
    if (type == "Sequence") {
        const json* list = member(value, "pretokenizers");
        if (list == nullptr || !list->is_array()) {
            return type_error(child(path, "pretokenizers"), "an array",
                              list == nullptr ? json() : *list);
        }
        for (std::size_t i = 0; i < list->size(); ++i) {
            OMNI_RETURN_IF_ERROR(
                parse_pre_tokenizer((*list)[i], element(child(path, "pretokenizers"), i), steps));
        }
    } else if (type == "Split") {
        SplitStep step;
        const std::string pattern_path = child(path, "pattern");
        const json* pattern = member(value, "pattern");
        if (pattern == nullptr || !pattern->is_object()) {
            return type_error(pattern_path, "an object {\"Regex\": ...} or {\"String\": ...}",
                              pattern == nullptr ? json() : *pattern);
        }
        if (const json* regex = member(*pattern, "Regex")) {
            OMNI_TRY(step.pattern, read_string(*regex, child(pattern_path, "Regex")));
        } else if (const json* literal = member(*pattern, "String")) {
            OMNI_TRY(step.pattern, read_string(*literal, child(pattern_path, "String")));
            step.literal = true;
        } else {
            return field_error(pattern_path, "expected a \"Regex\" or \"String\" member");
        }
        OMNI_TRY(step.behavior, parse_behavior(value, path));
        OMNI_TRY(step.invert, read_bool(value, path, "invert", false));
        steps.emplace_back(std::move(step));
    } else if (type == "ByteLevel") {
        ByteLevelStep step;
        OMNI_TRY(step.add_prefix_space, read_bool(value, path, "add_prefix_space", true));
        OMNI_TRY(step.use_regex, read_bool(value, path, "use_regex", true));
        steps.emplace_back(step);
    } else {
        return field_error(child(path, "type"),
                           "pre-tokenizer " + shown(type) +
                               " is not supported (supported: Sequence, Split, ByteLevel)",
                           ErrorCode::unimplemented);
    }
    return ok_status();
}

Status parse_merges(const json& merges, BpeConfig& config) {
    if (!merges.is_array()) return type_error("model.merges", "an array", merges);
    if (merges.size() > kMaxMerges) {
        return field_error("model.merges",
                           "has " + std::to_string(merges.size()) + " entries; the limit is " +
                               std::to_string(kMaxMerges),
                           ErrorCode::resource_exhausted);
    }
    config.merges.reserve(merges.size());
    for (std::size_t i = 0; i < merges.size(); ++i) {
        const json& merge = merges[i];
        const std::string path = element("model.merges", i);
        if (merge.is_string()) {
            OMNI_TRY(std::string line, read_string(merge, path));
            const std::size_t space = line.find(' ');
            if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos ||
                space == 0 || space + 1 == line.size()) {
                return field_error(
                    path, "expected two tokens separated by one space, got " + shown(line));
            }
            config.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
        } else if (merge.is_array() && merge.size() == 2) {
            OMNI_TRY(std::string left, read_string(merge[0], element(path, 0)));
            OMNI_TRY(std::string right, read_string(merge[1], element(path, 1)));
            config.merges.emplace_back(std::move(left), std::move(right));
        } else {
            return type_error(path, "a string \"a b\" or a pair [\"a\", \"b\"]", merge);
        }
    }
    return ok_status();
}

Result<BpeConfig> parse_model(const json& root) {
    const json* model = member(root, "model");
    if (model == nullptr) return field_error("model", "missing");
    if (!model->is_object()) return type_error("model", "an object", *model);
    if (const json* type = member(*model, "type")) {
        OMNI_TRY(const std::string name, read_string(*type, "model.type"));
        if (name != "BPE") {
            return field_error("model.type",
                               "model " + shown(name) + " is not supported (supported: BPE)",
                               ErrorCode::unimplemented);
        }
    }
    BpeConfig config;
    const json* vocab = member(*model, "vocab");
    if (vocab == nullptr) return field_error("model.vocab", "missing");
    if (!vocab->is_object()) return type_error("model.vocab", "an object", *vocab);
    config.vocab.reserve(vocab->size());
    for (const auto& [spelling, id] : vocab->items()) {
        const std::string path = "model.vocab[" + shown(spelling) + "]";
        if (find_invalid_utf8(spelling)) return field_error(path, "the token is not valid UTF-8");
        OMNI_TRY(const TokenId value, read_id(id, path));
        config.vocab.emplace_back(spelling, value);
    }
    const json* merges = member(*model, "merges");
    if (merges == nullptr) return field_error("model.merges", "missing (BPE needs its merges)");
    OMNI_RETURN_IF_ERROR(parse_merges(*merges, config));

    if (const json* dropout = member(*model, "dropout")) {
        if (!dropout->is_number()) return type_error("model.dropout", "a number", *dropout);
        if (dropout->get<double>() != 0.0) {
            return field_error("model.dropout", "BPE dropout is not supported",
                               ErrorCode::unimplemented);
        }
    }
    for (std::string_view key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        if (const json* affix = member(*model, key)) {
            OMNI_TRY(const std::string text, read_string(*affix, child("model", key)));
            if (!text.empty()) {
                return field_error(child("model", key), "a non-empty value is not supported",
                                   ErrorCode::unimplemented);
            }
        }
    }
    OMNI_TRY(const bool byte_fallback, read_bool(*model, "model", "byte_fallback", false));
    if (byte_fallback) {
        return field_error("model.byte_fallback", "byte fallback is not supported",
                           ErrorCode::unimplemented);
    }
    OMNI_TRY(config.ignore_merges, read_bool(*model, "model", "ignore_merges", false));
    OMNI_TRY(const bool fuse_unk, read_bool(*model, "model", "fuse_unk", false));
    (void)fuse_unk;  // byte-level vocabularies never produce an unknown token
    if (const json* unk = member(*model, "unk_token")) {
        OMNI_TRY(const std::string unk_token, read_string(*unk, "model.unk_token"));
        (void)unk_token;
    }
    return config;
}

Status parse_post_processor(const json& value, std::string_view path, TokenizerSpec& spec) {
    OMNI_TRY(const std::string type, read_type(value, path));
    if (type == "ByteLevel") return ok_status();  // offsets only; adds no ids
    if (type == "Sequence") {
        const json* list = member(value, "processors");
        if (list == nullptr || !list->is_array()) {
            return type_error(child(path, "processors"), "an array",
                              list == nullptr ? json() : *list);
        }
        for (std::size_t i = 0; i < list->size(); ++i) {
            OMNI_RETURN_IF_ERROR(
                parse_post_processor((*list)[i], element(child(path, "processors"), i), spec));
        }
        return ok_status();
    }
    if (type != "TemplateProcessing") {
        return field_error(child(path, "type"),
                           "post-processor " + shown(type) +
                               " is not supported (supported: ByteLevel, TemplateProcessing, "
                               "Sequence)",
                           ErrorCode::unimplemented);
    }
    const std::string single_path = child(path, "single");
    const json* single = member(value, "single");
    if (single == nullptr || !single->is_array()) {
        return type_error(single_path, "an array", single == nullptr ? json() : *single);
    }
    const json* special_tokens = member(value, "special_tokens");
    if (special_tokens != nullptr && !special_tokens->is_object()) {
        return type_error(child(path, "special_tokens"), "an object", *special_tokens);
    }
    bool seen_sequence = false;
    for (std::size_t i = 0; i < single->size(); ++i) {
        const std::string item_path = element(single_path, i);
        const json& item = (*single)[i];
        if (!item.is_object()) return type_error(item_path, "an object", item);
        if (member(item, "Sequence") != nullptr) {
            seen_sequence = true;
            continue;
        }
        const json* special = member(item, "SpecialToken");
        if (special == nullptr || !special->is_object()) {
            return field_error(item_path, "expected a \"SpecialToken\" or \"Sequence\" item");
        }
        OMNI_TRY(const std::string name,
                 read_required_string(*special, child(item_path, "SpecialToken"), "id"));
        const json* entry = special_tokens == nullptr ? nullptr : member(*special_tokens, name);
        const std::string entry_path = child(child(path, "special_tokens"), name);
        if (entry == nullptr || !entry->is_object()) {
            return field_error(entry_path, "missing (named by " + item_path + ")");
        }
        const json* ids = member(*entry, "ids");
        if (ids == nullptr || !ids->is_array()) {
            return type_error(child(entry_path, "ids"), "an array", ids == nullptr ? json() : *ids);
        }
        for (std::size_t k = 0; k < ids->size(); ++k) {
            OMNI_TRY(const TokenId id, read_id((*ids)[k], element(child(entry_path, "ids"), k)));
            (seen_sequence ? spec.suffix_ids : spec.prefix_ids).push_back(id);
        }
    }
    return ok_status();
}

Status check_decoder(const json& value, std::string_view path) {
    OMNI_TRY(const std::string type, read_type(value, path));
    if (type == "ByteLevel") return ok_status();
    if (type == "Sequence") {
        const json* list = member(value, "decoders");
        if (list == nullptr || !list->is_array()) {
            return type_error(child(path, "decoders"), "an array",
                              list == nullptr ? json() : *list);
        }
        for (std::size_t i = 0; i < list->size(); ++i) {
            OMNI_RETURN_IF_ERROR(check_decoder((*list)[i], element(child(path, "decoders"), i)));
        }
        return ok_status();
    }
    return field_error(child(path, "type"),
                       "decoder " + shown(type) + " is not supported (supported: ByteLevel)",
                       ErrorCode::unimplemented);
}

// nlohmann's parser is iterative, but a bound on nesting keeps hostile files from building
// deep trees at all.
Status check_depth(std::string_view text) {
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') {
                ++i;
            } else if (c == '"') {
                in_string = false;
            }
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxJsonDepth) {
                return fail(ErrorCode::invalid_argument,
                            "tokenizer.json: nested deeper than " + std::to_string(kMaxJsonDepth) +
                                " levels (byte " + std::to_string(i) + ")");
            }
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return ok_status();
}

}  // namespace

Result<TokenizerSpec> parse_tokenizer_json(std::string_view json_text) {
    if (json_text.size() > kMaxTokenizerJsonBytes) {
        return fail(ErrorCode::resource_exhausted,
                    "tokenizer.json: " + std::to_string(json_text.size()) +
                        " bytes; the limit is " + std::to_string(kMaxTokenizerJsonBytes));
    }
    OMNI_RETURN_IF_ERROR(check_depth(json_text));
    json root;
    try {
        root = json::parse(json_text);
    } catch (const json::exception& e) {
        return fail(ErrorCode::invalid_argument,
                    std::string("tokenizer.json: not valid JSON: ") + e.what());
    }
    if (!root.is_object()) return type_error("(root)", "an object", root);

    TokenizerSpec spec;
    OMNI_TRY(spec.added_tokens, parse_added_tokens(root));
    if (const json* normalizer = member(root, "normalizer")) {
        OMNI_RETURN_IF_ERROR(parse_normalizer(*normalizer, "normalizer", spec.normal_forms));
    }
    const json* pre_tokenizer = member(root, "pre_tokenizer");
    if (pre_tokenizer == nullptr) {
        return field_error("pre_tokenizer",
                           "missing: only byte-level BPE tokenizers (a ByteLevel pre-tokenizer) "
                           "are supported",
                           ErrorCode::unimplemented);
    }
    OMNI_RETURN_IF_ERROR(parse_pre_tokenizer(*pre_tokenizer, "pre_tokenizer", spec.pre_tokenizer));
    OMNI_TRY(spec.model, parse_model(root));
    if (const json* post_processor = member(root, "post_processor")) {
        OMNI_RETURN_IF_ERROR(parse_post_processor(*post_processor, "post_processor", spec));
    }
    const json* decoder = member(root, "decoder");
    if (decoder == nullptr) {
        return field_error("decoder", "missing (a ByteLevel decoder is required)",
                           ErrorCode::unimplemented);
    }
    OMNI_RETURN_IF_ERROR(check_decoder(*decoder, "decoder"));
    return spec;
}

}  // namespace omnirt::text::detail
