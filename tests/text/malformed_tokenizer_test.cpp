// Malformed and hostile tokenizer.json files fail with an Error that names the field; nothing
// crashes, hangs or allocates without bound.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "text/tokenizer.h"
#include "tiny_tokenizer.h"

namespace omnirt::text {
namespace {

using nlohmann::json;
using testing::spell;
using testing::tiny_tokenizer_json;

struct Case {
    std::string name;
    std::function<void(json&)> edit;
    ErrorCode code;
    std::string message_part;  // the field the message must name
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class MalformedTokenizerTest : public ::testing::TestWithParam<Case> {};

TEST_P(MalformedTokenizerTest, FailsNamingTheField) {
    json root = tiny_tokenizer_json();
    GetParam().edit(root);
    auto tokenizer = Tokenizer::from_json(root.dump());
    ASSERT_FALSE(tokenizer.has_value()) << GetParam().name;
    EXPECT_EQ(tokenizer.error().code, GetParam().code) << tokenizer.error().to_string();
    EXPECT_NE(tokenizer.error().message.find(GetParam().message_part), std::string::npos)
        << tokenizer.error().to_string();
    EXPECT_LT(tokenizer.error().message.size(), 600u) << tokenizer.error().to_string();
}

json& steps(json& root) { return root["pre_tokenizer"]["pretokenizers"]; }

const ErrorCode kInvalid = ErrorCode::invalid_argument;
const ErrorCode kUnsupported = ErrorCode::unimplemented;

INSTANTIATE_TEST_SUITE_P(
    Fields, MalformedTokenizerTest,
    ::testing::Values(
        Case{"model_missing", [](json& r) { r.erase("model"); }, kInvalid, "model"},
        Case{"model_not_object", [](json& r) { r["model"] = "BPE"; }, kInvalid,
             "model: expected an object, got a string"},
        Case{"model_unigram", [](json& r) { r["model"]["type"] = "Unigram"; }, kUnsupported,
             "model.type"},
        Case{"model_wordpiece", [](json& r) { r["model"]["type"] = "WordPiece"; }, kUnsupported,
             "supported: BPE"},
        Case{"model_type_number", [](json& r) { r["model"]["type"] = 3; }, kInvalid,
             "model.type: expected a string"},
        Case{"vocab_missing", [](json& r) { r["model"].erase("vocab"); }, kInvalid,
             "model.vocab"},
        Case{"vocab_array", [](json& r) { r["model"]["vocab"] = json::array({"a"}); }, kInvalid,
             "model.vocab: expected an object, got an array"},
        Case{"vocab_id_string", [](json& r) { r["model"]["vocab"]["zz"] = "7"; }, kInvalid,
             "model.vocab['zz']: expected an integer id, got a string"},
        Case{"vocab_id_float", [](json& r) { r["model"]["vocab"]["zz"] = 1.5; }, kInvalid,
             "model.vocab['zz']"},
        Case{"vocab_id_negative", [](json& r) { r["model"]["vocab"]["zz"] = -1; }, kInvalid,
             "model.vocab['zz']: id -1 is outside"},
        Case{"vocab_id_huge", [](json& r) { r["model"]["vocab"]["zz"] = 1LL << 40; }, kInvalid,
             "is outside 0..16777215"},
        Case{"vocab_id_duplicate", [](json& r) { r["model"]["vocab"]["zz"] = 5; }, kInvalid,
             "model.vocab: id 5 is given to both"},
        Case{"vocab_without_byte_tokens",
             [](json& r) { r["model"]["vocab"].erase(spell(" ")); }, kUnsupported,
             "model.vocab has no token for byte 32"},
        Case{"merges_missing", [](json& r) { r["model"].erase("merges"); }, kInvalid,
             "model.merges: missing"},
        Case{"merges_object", [](json& r) { r["model"]["merges"] = json::object(); }, kInvalid,
             "model.merges: expected an array"},
        Case{"merge_without_space", [](json& r) { r["model"]["merges"][0] = "he"; }, kInvalid,
             "model.merges[0]: expected two tokens"},
        Case{"merge_with_two_spaces", [](json& r) { r["model"]["merges"][1] = "a b c"; },
             kInvalid, "model.merges[1]"},
        Case{"merge_number", [](json& r) { r["model"]["merges"][2] = 7; }, kInvalid,
             "model.merges[2]: expected a string \"a b\" or a pair"},
        Case{"merge_short_pair", [](json& r) { r["model"]["merges"][0] = json::array({"h"}); },
             kInvalid, "model.merges[0]"},
        Case{"merge_pair_of_numbers",
             [](json& r) { r["model"]["merges"][0] = json::array({1, 2}); }, kInvalid,
             "model.merges[0][0]: expected a string"},
        Case{"merge_part_unknown", [](json& r) { r["model"]["merges"][3] = "q\xE2\x82\xAC o"; },
             kInvalid, "model.merges[3]: 'q\xE2\x82\xAC' is not in model.vocab"},
        Case{"merge_result_unknown", [](json& r) { r["model"]["merges"][3] = "x y"; }, kInvalid,
             "model.merges[3]: the merged token 'xy' is not in model.vocab"},
        Case{"dropout", [](json& r) { r["model"]["dropout"] = 0.1; }, kUnsupported,
             "model.dropout"},
        Case{"byte_fallback", [](json& r) { r["model"]["byte_fallback"] = true; }, kUnsupported,
             "model.byte_fallback"},
        Case{"byte_fallback_string", [](json& r) { r["model"]["byte_fallback"] = "yes"; },
             kInvalid, "model.byte_fallback: expected a boolean"},
        Case{"subword_prefix", [](json& r) { r["model"]["continuing_subword_prefix"] = "##"; },
             kUnsupported, "model.continuing_subword_prefix"},
        Case{"added_tokens_object", [](json& r) { r["added_tokens"] = json::object(); }, kInvalid,
             "added_tokens: expected an array"},
        Case{"added_token_number", [](json& r) { r["added_tokens"][0] = 3; }, kInvalid,
             "added_tokens[0]: expected an object"},
        Case{"added_token_without_id", [](json& r) { r["added_tokens"][1].erase("id"); },
             kInvalid, "added_tokens[1].id: missing"},
        Case{"added_token_content_number", [](json& r) { r["added_tokens"][1]["content"] = 5; },
             kInvalid, "added_tokens[1].content: expected a string"},
        Case{"added_token_empty", [](json& r) { r["added_tokens"][1]["content"] = ""; },
             kInvalid, "added_tokens[1].content: is empty"},
        Case{"added_token_special_string",
             [](json& r) { r["added_tokens"][0]["special"] = "true"; }, kInvalid,
             "added_tokens[0].special: expected a boolean"},
        Case{"added_token_duplicate_content",
             [](json& r) { r["added_tokens"][1]["content"] = "<|end|>"; }, kInvalid,
             "added_tokens[1]: content '<|end|>' is listed twice"},
        Case{"added_token_duplicate_id", [](json& r) { r["added_tokens"][1]["id"] = 1000; },
             kInvalid, "added_tokens[1]: id 1000 is listed twice"},
        Case{"added_token_negative_id", [](json& r) { r["added_tokens"][1]["id"] = -3; },
             kInvalid, "added_tokens[1].id"},
        Case{"normalizer_lowercase", [](json& r) { r["normalizer"] = {{"type", "Lowercase"}}; },
             kUnsupported, "normalizer.type"},
        Case{"normalizer_without_type", [](json& r) { r["normalizer"] = json::object(); },
             kInvalid, "normalizer.type: missing"},
        Case{"normalizer_sequence_not_array",
             [](json& r) { r["normalizer"] = {{"type", "Sequence"}, {"normalizers", 1}}; },
             kInvalid, "normalizer.normalizers: expected an array"},
        Case{"nested_normalizer_unknown",
             [](json& r) {
                 r["normalizer"] = {{"type", "Sequence"},
                                    {"normalizers", json::array({{{"type", "NFC"}},
                                                                 {{"type", "Strip"}}})}};
             },
             kUnsupported, "normalizer.normalizers[1].type"},
        Case{"pre_tokenizer_missing", [](json& r) { r.erase("pre_tokenizer"); }, kUnsupported,
             "pre_tokenizer"},
        Case{"pre_tokenizer_metaspace",
             [](json& r) { r["pre_tokenizer"] = {{"type", "Metaspace"}}; }, kUnsupported,
             "pre_tokenizer.type"},
        Case{"pre_tokenizer_without_byte_level", [](json& r) { steps(r).erase(1); },
             kUnsupported, "ByteLevel"},
        Case{"byte_level_not_last",
             [](json& r) { steps(r).push_back(steps(r)[0]); }, kUnsupported,
             "ByteLevel must be the last"},
        Case{"bad_regex", [](json& r) { steps(r)[0]["pattern"]["Regex"] = "(\\p{L}+"; },
             kInvalid, "pre_tokenizer Split pattern '(\\p{L}+': bad regex at offset"},
        Case{"bad_regex_class", [](json& r) { steps(r)[0]["pattern"]["Regex"] = "[z-a]"; },
             kInvalid, "bad regex"},
        Case{"regex_number", [](json& r) { steps(r)[0]["pattern"]["Regex"] = 1; }, kInvalid,
             "pre_tokenizer.pretokenizers[0].pattern.Regex: expected a string"},
        Case{"pattern_empty_object", [](json& r) { steps(r)[0]["pattern"] = json::object(); },
             kInvalid, "pre_tokenizer.pretokenizers[0].pattern"},
        Case{"split_behavior_unknown", [](json& r) { steps(r)[0]["behavior"] = "Sideways"; },
             kInvalid, "pre_tokenizer.pretokenizers[0].behavior: unknown behavior"},
        Case{"byte_level_flag_string",
             [](json& r) { steps(r)[1]["add_prefix_space"] = "no"; }, kInvalid,
             "pre_tokenizer.pretokenizers[1].add_prefix_space: expected a boolean"},
        Case{"decoder_missing", [](json& r) { r.erase("decoder"); }, kUnsupported, "decoder"},
        Case{"decoder_wordpiece", [](json& r) { r["decoder"] = {{"type", "WordPiece"}}; },
             kUnsupported, "decoder.type"},
        Case{"post_processor_roberta",
             [](json& r) { r["post_processor"] = {{"type", "RobertaProcessing"}}; }, kUnsupported,
             "post_processor.type"},
        Case{"template_unknown_special",
             [](json& r) {
                 r["post_processor"] = {
                     {"type", "TemplateProcessing"},
                     {"single", json::array({{{"SpecialToken", {{"id", "<s>"}}}}})},
                     {"special_tokens", json::object()}};
             },
             kInvalid, "post_processor.special_tokens.<s>: missing"},
        Case{"template_id_unknown",
             [](json& r) {
                 r["post_processor"] = {
                     {"type", "TemplateProcessing"},
                     {"single", json::array({{{"SpecialToken", {{"id", "<s>"}}}}})},
                     {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {777}}}}}}};
             },
             ErrorCode::out_of_range, "token id 777 names no token"}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

Result<std::unique_ptr<Tokenizer>> from_text(std::string_view text) {
    return Tokenizer::from_json(text);
}

TEST(MalformedTokenizer, NotJson) {
    for (std::string_view text : {"", "{", "[1, 2", "{\"model\": }", "nul", "\xff\xfe"}) {
        auto tokenizer = from_text(text);
        ASSERT_FALSE(tokenizer.has_value()) << text;
        EXPECT_EQ(tokenizer.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(tokenizer.error().message.find("not valid JSON"), std::string::npos);
    }
}

TEST(MalformedTokenizer, RootMustBeAnObject) {
    for (std::string_view text : {"[]", "42", "\"tokenizer\"", "null"}) {
        auto tokenizer = from_text(text);
        ASSERT_FALSE(tokenizer.has_value());
        EXPECT_NE(tokenizer.error().message.find("(root): expected an object"), std::string::npos)
            << tokenizer.error().to_string();
    }
}

TEST(MalformedTokenizer, DeepNestingIsRefusedBeforeParsing) {
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    auto tokenizer = from_text(deep);
    ASSERT_FALSE(tokenizer.has_value());
    EXPECT_NE(tokenizer.error().message.find("nested deeper than 64"), std::string::npos);
    // Brackets inside strings do not count.
    json root = tiny_tokenizer_json();
    root["model"]["vocab"][std::string(200, '[')] = 5000;
    EXPECT_TRUE(from_text(root.dump()).has_value());
}

TEST(MalformedTokenizer, InvalidUtf8InStringsIsRejected) {
    // A raw invalid byte is rejected by the JSON parser itself.
    json root = tiny_tokenizer_json();
    std::string text = root.dump();
    text.insert(text.find("<|end|>"), "\xC0");
    auto tokenizer = from_text(text);
    ASSERT_FALSE(tokenizer.has_value());
    EXPECT_EQ(tokenizer.error().code, ErrorCode::invalid_argument);
    // A lone surrogate escape decodes to invalid UTF-8 (CESU), which the field check catches.
    root["added_tokens"][1]["content"] = "PLACEHOLDER";
    text = root.dump();
    text.replace(text.find("PLACEHOLDER"), 11, "\\ud800");
    tokenizer = from_text(text);
    ASSERT_FALSE(tokenizer.has_value());
}

TEST(MalformedTokenizer, MissingFileIsNotFound) {
    auto tokenizer = Tokenizer::from_file("/nonexistent/tokenizer.json");
    ASSERT_FALSE(tokenizer.has_value());
    EXPECT_EQ(tokenizer.error().code, ErrorCode::not_found);
    EXPECT_NE(tokenizer.error().message.find("/nonexistent/tokenizer.json"), std::string::npos);
}

TEST(MalformedTokenizer, FileErrorsNameThePath) {
    const std::string path =
        ::testing::TempDir() + "omnirt_bad_tokenizer_" + std::to_string(::getpid()) + ".json";
    {
        json root = tiny_tokenizer_json();
        root["model"]["type"] = "Unigram";
        std::ofstream file(path);
        file << root.dump();
    }
    auto tokenizer = Tokenizer::from_file(path);
    ASSERT_FALSE(tokenizer.has_value());
    EXPECT_NE(tokenizer.error().message.find(path), std::string::npos);
    EXPECT_NE(tokenizer.error().message.find("model.type"), std::string::npos);
    std::remove(path.c_str());
}

TEST(MalformedTokenizer, UnknownFieldsAreIgnored) {
    json root = tiny_tokenizer_json();
    root["something_new"] = {{"nested", json::array({1, 2, 3})}};
    root["model"]["future_option"] = true;
    root["truncation"] = {{"max_length", 5}};
    EXPECT_TRUE(from_text(root.dump()).has_value());
}

}  // namespace
}  // namespace omnirt::text
