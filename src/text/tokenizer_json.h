#pragma once
// Private to omnirt_text: reads a tokenizer.json into plain structs, checking every field it
// uses. Error messages start with "tokenizer.json: <field path>: ".
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "text/added_tokens.h"
#include "text/bpe.h"
#include "text/normalizer.h"
#include "text/pre_tokenizer.h"

namespace omnirt::text::detail {

struct TokenizerSpec {
    std::vector<AddedToken> added_tokens;
    std::vector<NormalForm> normal_forms;  // empty: no normalizer
    std::vector<PreTokenizeStep> pre_tokenizer;
    BpeConfig model;
    // The post-processor's template for a single sequence (TemplateProcessing.single), resolved
    // to ids: added before and after the text's ids when add_special_tokens is set.
    std::vector<TokenId> prefix_ids;
    std::vector<TokenId> suffix_ids;
};

[[nodiscard]] Result<TokenizerSpec> parse_tokenizer_json(std::string_view json_text);

}  // namespace omnirt::text::detail
