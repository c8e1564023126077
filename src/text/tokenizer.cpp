// Tokenizer: added tokens -> normalizer -> pre-tokenizer -> BPE -> post-processor, and decode.
#include "text/tokenizer.h"

#include <algorithm>
#include <deque>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_map>

#include "text/added_tokens.h"
#include "text/bpe.h"
#include "text/byte_level.h"
#include "text/normalizer.h"
#include "text/pre_tokenizer.h"
#include "text/tokenizer_json.h"
#include "text/utf8.h"

namespace omnirt::text {

namespace {
constexpr std::uint8_t kAssigned = 1;
constexpr std::uint8_t kSpecial = 2;
}  // namespace

struct Tokenizer::Impl {
    std::vector<detail::AddedToken> added_tokens;
    detail::AddedTokenMatcher raw_matcher;         // normalized == false: matched in the input
    detail::AddedTokenMatcher normalized_matcher;  // normalized == true: after normalization
    std::unique_ptr<detail::Normalizer> normalizer;
    std::unique_ptr<detail::PreTokenizer> pre_tokenizer;
    std::unique_ptr<detail::BpeModel> model;
    std::vector<TokenId> prefix_ids;
    std::vector<TokenId> suffix_ids;

    // Per id: flags, spelling, and the bytes it decodes to (token_bytes[offsets[id]..[id+1])).
    std::vector<std::uint8_t> flags;
    std::vector<std::string_view> spellings;
    std::string token_bytes;
    std::vector<std::uint32_t> byte_offsets;
    std::unordered_map<std::string, TokenId> added_by_content;

    [[nodiscard]] bool known(TokenId id) const {
        return id >= 0 && static_cast<std::size_t>(id) < flags.size() &&
               (flags[static_cast<std::size_t>(id)] & kAssigned) != 0;
    }
    [[nodiscard]] std::string_view bytes_of(TokenId id) const {
        const auto index = static_cast<std::size_t>(id);
        return std::string_view(token_bytes)
            .substr(byte_offsets[index], byte_offsets[index + 1] - byte_offsets[index]);
    }
    [[nodiscard]] Status encode_text(std::string_view text, std::vector<TokenId>& ids) const;
    [[nodiscard]] Status encode_normalized(std::string_view text, std::vector<TokenId>& ids) const;
};

namespace {

Error unknown_id(TokenId id, std::size_t vocab_size) {
    return Error{ErrorCode::out_of_range, "token id " + std::to_string(id) +
                                              " names no token (vocabulary size " +
                                              std::to_string(vocab_size) + ")"};
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_file(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    if (!file) return fail(ErrorCode::not_found, "cannot open tokenizer file '" + path + "'");
    file.seekg(0, std::ios::end);
    const std::streamoff size = file.tellg();
    if (size < 0) return fail(ErrorCode::unavailable, "cannot read tokenizer file '" + path + "'");
    if (static_cast<std::uint64_t>(size) > kMaxTokenizerJsonBytes) {
        return fail(ErrorCode::resource_exhausted,
                    "tokenizer file '" + path + "' has " + std::to_string(size) +
                        " bytes; the limit is " + std::to_string(kMaxTokenizerJsonBytes));
    }
    file.seekg(0, std::ios::beg);
    std::string text(static_cast<std::size_t>(size), '\0');
    if (!file.read(text.data(), size)) {
        return fail(ErrorCode::unavailable, "cannot read tokenizer file '" + path + "'");
    }
    auto tokenizer = from_json(text);
    if (!tokenizer) return fail(tokenizer.error().with_context(path));
    return tokenizer;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_json(std::string_view json_text) {
    OMNI_TRY(detail::TokenizerSpec spec, detail::parse_tokenizer_json(json_text));
    auto impl = std::make_unique<Impl>();
    OMNI_TRY(impl->normalizer, detail::Normalizer::create(std::move(spec.normal_forms)));
    auto pre_tokenizer = detail::PreTokenizer::create(std::move(spec.pre_tokenizer));
    if (!pre_tokenizer) return fail(pre_tokenizer.error().with_context("tokenizer.json"));
    impl->pre_tokenizer = std::move(*pre_tokenizer);
    auto model = detail::BpeModel::create(std::move(spec.model));
    if (!model) return fail(model.error().with_context("tokenizer.json"));
    impl->model = std::move(*model);
    impl->prefix_ids = std::move(spec.prefix_ids);
    impl->suffix_ids = std::move(spec.suffix_ids);
    impl->added_tokens = std::move(spec.added_tokens);

    // Id tables over the vocabulary and the added tokens (an added token wins a shared id).
    TokenId max_id = -1;
    for (const auto& [spelling, id] : impl->model->vocab()) max_id = std::max(max_id, id);
    for (const auto& token : impl->added_tokens) max_id = std::max(max_id, token.id);
    const auto count = static_cast<std::size_t>(max_id + 1);
    impl->flags.assign(count, 0);
    impl->spellings.assign(count, std::string_view());
    for (const auto& [spelling, id] : impl->model->vocab()) {
        impl->flags[static_cast<std::size_t>(id)] = kAssigned;
        impl->spellings[static_cast<std::size_t>(id)] = spelling;
    }
    std::vector<std::int32_t> added_index(count, -1);
    std::vector<const detail::AddedToken*> raw_tokens;
    std::vector<const detail::AddedToken*> normalized_tokens;
    for (std::size_t i = 0; i < impl->added_tokens.size(); ++i) {
        const auto& token = impl->added_tokens[i];
        const auto index = static_cast<std::size_t>(token.id);
        impl->flags[index] = static_cast<std::uint8_t>(kAssigned | (token.special ? kSpecial : 0));
        impl->spellings[index] = token.content;
        added_index[index] = static_cast<std::int32_t>(i);
        impl->added_by_content.emplace(token.content, token.id);
        (token.normalized ? normalized_tokens : raw_tokens).push_back(&token);
    }
    impl->raw_matcher = detail::AddedTokenMatcher(raw_tokens);
    impl->normalized_matcher = detail::AddedTokenMatcher(normalized_tokens);
    for (TokenId id : impl->prefix_ids) {
        if (!impl->known(id)) return fail(unknown_id(id, count).with_context("post_processor"));
    }
    for (TokenId id : impl->suffix_ids) {
        if (!impl->known(id)) return fail(unknown_id(id, count).with_context("post_processor"));
    }

    impl->byte_offsets.reserve(count + 1);
    for (std::size_t id = 0; id < count; ++id) {
        impl->byte_offsets.push_back(static_cast<std::uint32_t>(impl->token_bytes.size()));
        if ((impl->flags[id] & kAssigned) == 0) continue;
        const std::string_view spelling = impl->spellings[id];
        // Added tokens decode to their content; vocabulary spellings through the byte-level
        // alphabet (or as themselves when a character is outside it, as Hugging Face does).
        if (added_index[id] >= 0 || !append_byte_level_bytes(spelling, impl->token_bytes)) {
            impl->token_bytes.append(spelling);
        }
        if (impl->token_bytes.size() > std::numeric_limits<std::uint32_t>::max()) {
            return fail(ErrorCode::resource_exhausted, "tokenizer.json: tokens too large");
        }
    }
    impl->byte_offsets.push_back(static_cast<std::uint32_t>(impl->token_bytes.size()));
    return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Status Tokenizer::Impl::encode_normalized(std::string_view text, std::vector<TokenId>& ids) const {
    if (text.empty()) return ok_status();
    thread_local std::vector<std::string_view> words;
    thread_local std::deque<std::string> arena;
    words.clear();
    arena.clear();
    OMNI_RETURN_IF_ERROR(pre_tokenizer->split(text, words, arena));
    for (std::string_view word : words) {
        if (!word.empty()) model->encode_word(word, ids);
    }
    return ok_status();
}

Status Tokenizer::Impl::encode_text(std::string_view text, std::vector<TokenId>& ids) const {
    if (normalizer->empty() && normalized_matcher.empty()) return encode_normalized(text, ids);
    std::string normalized;
    OMNI_RETURN_IF_ERROR(normalizer->normalize(text, normalized));
    if (normalized_matcher.empty()) return encode_normalized(normalized, ids);
    std::vector<detail::Segment> segments;
    normalized_matcher.split(normalized, /*match_special=*/true, segments);
    for (const detail::Segment& segment : segments) {
        if (segment.token >= 0) {
            ids.push_back(segment.token);
        } else {
            OMNI_RETURN_IF_ERROR(encode_normalized(
                std::string_view(normalized).substr(segment.begin, segment.end - segment.begin),
                ids));
        }
    }
    return ok_status();
}

Result<std::vector<TokenId>> Tokenizer::encode(std::string_view text,
                                               bool add_special_tokens) const {
    return encode(text, EncodeOptions{.add_special_tokens = add_special_tokens});
}

Result<std::vector<TokenId>> Tokenizer::encode(std::string_view text,
                                               const EncodeOptions& options) const {
    if (text.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
        return fail(ErrorCode::out_of_range, "text of " + std::to_string(text.size()) +
                                                 " bytes is too long to encode (limit 2 GiB)");
    }
    if (const auto invalid = find_invalid_utf8(text)) {
        return fail(
            ErrorCode::invalid_argument,
            "text is not valid UTF-8 (first bad byte at offset " + std::to_string(*invalid) + ")");
    }
    std::vector<TokenId> ids;
    ids.reserve(text.size() / 4 + 4);
    if (options.add_special_tokens) {
        ids.insert(ids.end(), impl_->prefix_ids.begin(), impl_->prefix_ids.end());
    }
    if (impl_->raw_matcher.empty()) {
        if (!text.empty()) OMNI_RETURN_IF_ERROR(impl_->encode_text(text, ids));
    } else {
        std::vector<detail::Segment> segments;
        impl_->raw_matcher.split(text, options.match_special_tokens, segments);
        for (const detail::Segment& segment : segments) {
            if (segment.token >= 0) {
                ids.push_back(segment.token);
            } else {
                OMNI_RETURN_IF_ERROR(impl_->encode_text(
                    text.substr(segment.begin, segment.end - segment.begin), ids));
            }
        }
    }
    if (options.add_special_tokens) {
        ids.insert(ids.end(), impl_->suffix_ids.begin(), impl_->suffix_ids.end());
    }
    return ids;
}

Status Tokenizer::append_token_bytes(TokenId id, std::string& out) const {
    if (!impl_->known(id)) return fail(unknown_id(id, vocab_size()));
    out.append(impl_->bytes_of(id));
    return ok_status();
}

Result<std::string> Tokenizer::decode(std::span<const TokenId> ids,
                                      const DecodeOptions& options) const {
    std::string bytes;
    for (TokenId id : ids) {
        if (!impl_->known(id)) return fail(unknown_id(id, vocab_size()));
        if (options.skip_special_tokens && is_special(id)) continue;
        bytes.append(impl_->bytes_of(id));
    }
    if (!find_invalid_utf8(bytes)) return bytes;
    std::string text;
    text.reserve(bytes.size() + 8);
    append_utf8_lossy(bytes, text);
    return text;
}

std::optional<std::string_view> Tokenizer::id_to_token(TokenId id) const {
    if (!impl_->known(id)) return std::nullopt;
    return impl_->spellings[static_cast<std::size_t>(id)];
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
    const auto added = impl_->added_by_content.find(std::string(token));
    if (added != impl_->added_by_content.end()) return added->second;
    return impl_->model->find(token);
}

bool Tokenizer::is_special(TokenId id) const {
    return impl_->known(id) && (impl_->flags[static_cast<std::size_t>(id)] & kSpecial) != 0;
}

std::size_t Tokenizer::vocab_size() const { return impl_->flags.size(); }

}  // namespace omnirt::text
