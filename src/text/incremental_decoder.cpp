// IncrementalDecoder: byte buffer + "complete prefix" UTF-8 decoding.
#include "text/incremental_decoder.h"

#include "text/utf8.h"

namespace omnirt::text {

IncrementalDecoder::IncrementalDecoder(std::shared_ptr<const Tokenizer> tokenizer,
                                       DecodeOptions options)
    : tokenizer_(std::move(tokenizer)), options_(options) {}

Result<std::string> IncrementalDecoder::push(TokenId id) {
    if (options_.skip_special_tokens && tokenizer_->is_special(id)) return std::string();
    OMNI_RETURN_IF_ERROR(tokenizer_->append_token_bytes(id, pending_));
    std::string text;
    const std::size_t consumed = append_utf8_complete_prefix(pending_, text);
    pending_.erase(0, consumed);
    return text;
}

std::string IncrementalDecoder::flush() {
    std::string text;
    append_utf8_lossy(pending_, text);
    pending_.clear();
    return text;
}

}  // namespace omnirt::text
