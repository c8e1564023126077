// qwen3.preprocess and qwen3.decode (torch-free), driven through their schedulers' inbox and
// outbox over the tiny tokenizer: prompts of every layout become input_ids equal to the
// tokenizer's own encoding; the thinker's token chunks become client text and log-probability
// entries; malformed input fails the request with a message naming the field.
#include "models/qwen3/text_stages.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "models/qwen3/chat_format.h"
#include "models/qwen3/prompt.h"
#include "models/qwen3/tiny_tokenizer.h"
#include "pipeline/stage_factory.h"
#include "text/tokenizer.h"

namespace omnirt::models::qwen3 {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using pipeline::Clock;
using pipeline::IncomingKind;
using pipeline::IncomingMessage;
using pipeline::OutgoingKind;
using pipeline::OutgoingMessage;
using pipeline::StreamChunk;

constexpr auto kHangGuard = 30s;

class Qwen3TextStagesTest : public ::testing::Test {
  protected:
    // A private model directory with only the tiny tokenizer's tokenizer.json in it.
    static void SetUpTestSuite() {
        std::string pattern = (fs::temp_directory_path() / "omnirt_text_stages_XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        directory_ = new fs::path(pattern);
        std::ofstream(*directory_ / "tokenizer.json") << tiny_tokenizer_files().tokenizer.dump();
        auto loaded = text::Tokenizer::from_file((*directory_ / "tokenizer.json").string());
        ASSERT_TRUE(loaded.has_value()) << loaded.error().to_string();
        tokenizer_ = loaded->release();
    }
    static void TearDownTestSuite() {
        if (directory_ != nullptr) fs::remove_all(*directory_);
        delete directory_;
        delete tokenizer_;
        directory_ = nullptr;
        tokenizer_ = nullptr;
    }

    void SetUp() override {
        ASSERT_TRUE(register_qwen3_text_stages(registry_).has_value());
        ASSERT_TRUE(register_qwen3_text_stages(registry_).has_value());  // idempotent
    }
    void TearDown() override {
        if (scheduler_) scheduler_->stop();
    }

    Result<std::unique_ptr<pipeline::Scheduler>> build(const std::string& factory, Map args,
                                                       std::vector<std::string> sources = {}) {
        OMNI_TRY(pipeline::StageFactory make, pipeline::find_stage_factory(factory, registry_));
        return make(pipeline::StageContext{
            .stage_name = factory == "qwen3.decode" ? "decode" : "preprocess",
            .args = std::move(args),
            .stream_sources = std::move(sources)});
    }
    void start(const std::string& factory, Map extra_args = {}) {
        Map args{{"model_path", Value(directory_->string())}};
        for (auto& [key, value] : extra_args) args.insert_or_assign(key, value);
        auto scheduler = build(factory, std::move(args),
                               factory == "qwen3.decode" ? std::vector<std::string>{"thinker"}
                                                         : std::vector<std::string>{});
        ASSERT_TRUE(scheduler.has_value()) << scheduler.error().to_string();
        scheduler_ = std::move(*scheduler);
        ASSERT_TRUE(scheduler_->start().has_value());
    }

    void push(const std::string& id, OmniRequest request, Value data = {}) {
        auto payload = std::make_shared<const StagePayload>(
            StagePayload{.request_id = id, .request = std::move(request), .data = std::move(data)});
        ASSERT_TRUE(scheduler_->inbox().push(IncomingMessage{
            .request_id = id, .kind = IncomingKind::new_request, .payload = std::move(payload)}));
    }
    void push_chunk(const std::string& id, Value chunk) {
        ASSERT_TRUE(scheduler_->inbox().push(IncomingMessage{
            .request_id = id,
            .kind = IncomingKind::stream_chunk,
            .chunk = std::make_shared<const StreamChunk>(StreamChunk{.chunk = std::move(chunk)}),
            .from_stage = "thinker"}));
    }
    void push_done(const std::string& id) {
        ASSERT_TRUE(scheduler_->inbox().push(IncomingMessage{
            .request_id = id, .kind = IncomingKind::stream_done, .from_stage = "thinker"}));
    }
    OutgoingMessage next() {
        auto out = scheduler_->outbox().pop_until(Clock::now() + kHangGuard);
        EXPECT_TRUE(out.has_value()) << "no output within the hang guard";
        return out ? std::move(*out) : OutgoingMessage{.kind = OutgoingKind::error};
    }
    Value next_result() {
        OutgoingMessage out = next();
        EXPECT_EQ(out.kind, OutgoingKind::result) << out.error.to_string();
        return out.result ? out.result->data : Value();
    }
    // The next output must be a chunk for the client; returns it.
    Value next_client_chunk() {
        OutgoingMessage out = next();
        EXPECT_EQ(out.kind, OutgoingKind::stream) << out.error.to_string();
        EXPECT_EQ(out.target, std::nullopt);
        return out.chunk ? out.chunk->chunk : Value();
    }
    Error next_error() {
        OutgoingMessage out = next();
        EXPECT_EQ(out.kind, OutgoingKind::error);
        return out.error;
    }

    // preprocess: the input_ids of `request` (an i32 tensor of shape [n]).
    std::vector<std::int32_t> input_ids(const std::string& id, OmniRequest request) {
        push(id, std::move(request));
        const Value data = next_result();
        const Value* ids = data.find("input_ids");
        EXPECT_NE(ids, nullptr) << data.debug_string();
        if (ids == nullptr || ids->if_tensor() == nullptr) return {};
        const Tensor& tensor = ids->as_tensor();
        EXPECT_EQ(tensor.dtype(), DType::i32);
        EXPECT_EQ(tensor.shape(), (Shape{tensor.numel()}));
        const std::int32_t* first = tensor.data_as<std::int32_t>();
        return std::vector<std::int32_t>(first, first + tensor.numel());
    }
    static std::vector<std::int32_t> encode(const std::string& text) {
        auto ids = tokenizer_->encode(text);
        EXPECT_TRUE(ids.has_value());
        return ids.value_or(std::vector<std::int32_t>{});
    }
    static std::int64_t id_of(const std::string& token) {
        auto id = tokenizer_->token_to_id(token);
        EXPECT_TRUE(id.has_value()) << token;
        return id.value_or(0);
    }

    static fs::path* directory_;
    static const text::Tokenizer* tokenizer_;
    Registry registry_;
    std::unique_ptr<pipeline::Scheduler> scheduler_;
};

fs::path* Qwen3TextStagesTest::directory_ = nullptr;
const text::Tokenizer* Qwen3TextStagesTest::tokenizer_ = nullptr;

Value text_part(const std::string& text) {
    return Value(Map{{"type", Value("text")}, {"text", Value(text)}});
}
// One message as the chat endpoint maps it (content: a list of parts).
Value message(const std::string& role, List content) {
    return Value(Map{{"role", Value(role)}, {"content", Value(std::move(content))}});
}
OmniRequest with_messages(List messages, Map params = {}) {
    return OmniRequest{.inputs = Value(Map{{"messages", Value(std::move(messages))}}),
                       .params = Value(std::move(params))};
}
OmniRequest with_prompt(Value prompt) {
    return OmniRequest{.inputs = Value(Map{{"prompt", std::move(prompt)}})};
}
Map enable_thinking_param(const std::string& stage, Value flag) {
    return Map{
        {"stage_params", Value(Map{{stage, Value(Map{{"enable_thinking", std::move(flag)}})}})}};
}

const char* const kHiConversation = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
const char* const kNoThinking = "<think>\n\n</think>\n\n";

TEST_F(Qwen3TextStagesTest, PreprocessRendersMessagesWithTheChatTemplate) {
    start("qwen3.preprocess");
    EXPECT_EQ(input_ids("a", with_messages({message("user", {text_part("Hi")})})),
              encode(kHiConversation));
    // A plain string content is one text part; several text parts are joined.
    EXPECT_EQ(input_ids("b", with_messages(
                                 {Value(Map{{"role", Value("user")}, {"content", Value("Hi")}})})),
              encode(kHiConversation));
    EXPECT_EQ(input_ids("c", with_messages({message("user", {text_part("H"), text_part("i")})})),
              encode(kHiConversation));
    // A conversation: the same as the text layer's template renders for it.
    const List conversation = {
        message("system", {text_part("Be brief.")}),
        message("user", {text_part("Hi")}),
        message("assistant", {text_part("Hello!")}),
        message("user", {text_part("How are you?")}),
    };
    std::vector<text::ChatMessage> chat;
    for (auto [role, content] :
         {std::pair{text::ChatRole::system, "Be brief."}, std::pair{text::ChatRole::user, "Hi"},
          std::pair{text::ChatRole::assistant, "Hello!"},
          std::pair{text::ChatRole::user, "How are you?"}}) {
        chat.push_back(
            text::ChatMessage{.role = role, .content = {text::ContentPart{.text = content}}});
    }
    auto rendered = format_chat(chat, /*add_generation_prompt=*/true);
    ASSERT_TRUE(rendered.has_value());
    EXPECT_EQ(rendered->rfind("<|im_start|>system\nBe brief.<|im_end|>\n", 0), 0u) << *rendered;
    EXPECT_EQ(input_ids("d", with_messages(conversation)), encode(*rendered));
}

TEST_F(Qwen3TextStagesTest, PreprocessEnableThinkingArgAndPerRequestOverride) {
    start("qwen3.preprocess", Map{{"enable_thinking", Value(false)}});
    const List hi = {message("user", {text_part("Hi")})};
    const std::string off = std::string(kHiConversation) + kNoThinking;
    EXPECT_EQ(input_ids("arg", with_messages(hi)), encode(off));
    EXPECT_EQ(input_ids("on", with_messages(hi, enable_thinking_param("preprocess", Value(true)))),
              encode(kHiConversation));
    // Another stage's params, or a null flag, leave the arg in force.
    EXPECT_EQ(input_ids("other", with_messages(hi, enable_thinking_param("thinker", Value(true)))),
              encode(off));
    EXPECT_EQ(input_ids("null", with_messages(hi, enable_thinking_param("preprocess", Value()))),
              encode(off));
    push("bad", with_messages(hi, enable_thinking_param("preprocess", Value("yes"))));
    const Error error = next_error();
    EXPECT_EQ(error.code, ErrorCode::invalid_argument);
    EXPECT_NE(
        error.message.find("params.stage_params.preprocess.enable_thinking must be a boolean"),
        std::string::npos)
        << error.message;
    // The stage keeps serving.
    EXPECT_EQ(input_ids("after", with_messages(hi)), encode(off));
}

TEST_F(Qwen3TextStagesTest, PreprocessDefaultThinksAndTheOverrideTurnsItOff) {
    start("qwen3.preprocess");
    const List hi = {message("user", {text_part("Hi")})};
    EXPECT_EQ(
        input_ids("off", with_messages(hi, enable_thinking_param("preprocess", Value(false)))),
        encode(std::string(kHiConversation) + kNoThinking));
}

TEST_F(Qwen3TextStagesTest, PreprocessTakesPromptStringsAsTheyAre) {
    start("qwen3.preprocess");
    for (const std::string prompt :
         {"Once upon a time", "héllo 🙂 你好\n", "<|im_start|>raw"}) {
        EXPECT_EQ(input_ids(prompt, with_prompt(Value(prompt))), encode(prompt)) << prompt;
    }
    // A null messages field does not hide the prompt.
    OmniRequest both{.inputs = Value(Map{{"messages", Value()}, {"prompt", Value("x")}})};
    EXPECT_EQ(input_ids("null messages", both), encode("x"));
}

TEST_F(Qwen3TextStagesTest, PreprocessTakesTokenIdsAsTheyAre) {
    start("qwen3.preprocess");
    const std::int64_t last = kTinyTokenizerSize - 1;
    EXPECT_EQ(input_ids("ids", with_prompt(Value(List{Value(0), Value(5), Value(last)}))),
              (std::vector<std::int32_t>{0, 5, static_cast<std::int32_t>(last)}));
}

TEST_F(Qwen3TextStagesTest, PreprocessRefusesBadPrompts) {
    start("qwen3.preprocess");
    struct Case {
        OmniRequest request;
        ErrorCode code;
        std::string fragment;
    };
    const std::string range =
        "must be a token id in [0, " + std::to_string(kTinyTokenizerSize) + ")";
    std::vector<Case> cases;
    cases.push_back({with_prompt(Value(List{Value(1), Value(-1)})), ErrorCode::invalid_argument,
                     "inputs.prompt[1] " + range});
    cases.push_back({with_prompt(Value(List{Value(kTinyTokenizerSize)})),
                     ErrorCode::invalid_argument, "inputs.prompt[0] " + range});
    cases.push_back({with_prompt(Value(List{Value(1), Value(2), Value(1.0)})),
                     ErrorCode::invalid_argument, "inputs.prompt[2]"});
    cases.push_back(
        {with_prompt(Value(List{Value("1")})), ErrorCode::invalid_argument, "inputs.prompt[0]"});
    cases.push_back({with_prompt(Value(std::int64_t{1} << 40)), ErrorCode::invalid_argument,
                     "inputs.prompt must be a string or a list of token ids"});
    cases.push_back(
        {with_prompt(Value(List{})), ErrorCode::invalid_argument, "inputs.prompt is empty"});
    cases.push_back(
        {with_prompt(Value("")), ErrorCode::invalid_argument, "inputs.prompt is empty"});
    cases.push_back(
        {OmniRequest{}, ErrorCode::invalid_argument, "no inputs.messages or inputs.prompt"});
    cases.push_back({with_messages({}), ErrorCode::invalid_argument,
                     "inputs.messages must be a non-empty list"});
    cases.push_back({with_messages({message("robot", {text_part("x")})}),
                     ErrorCode::invalid_argument, "inputs.messages[0].role"});
    cases.push_back({with_messages({Value(Map{{"content", Value("x")}})}),
                     ErrorCode::invalid_argument, "inputs.messages[0] needs a string 'role'"});
    cases.push_back({with_messages({message("user", {Value(Map{{"type", Value("text")}})})}),
                     ErrorCode::invalid_argument, "inputs.messages[0].content[0] (a text part)"});
    cases.push_back({with_messages({Value(Map{{"role", Value("user")}, {"content", Value(3)}})}),
                     ErrorCode::invalid_argument, "inputs.messages[0].content must be"});
    // Media parts need the Qwen3-Omni encoders.
    cases.push_back(
        {with_messages({message("user", {text_part("x")}),
                        message("user", {text_part("look"),
                                         Value(Map{{"type", Value("image")},
                                                   {"mime", Value("image/png")},
                                                   {"source", Value("bytes")},
                                                   {"data", Value(Bytes{{'h', 'i'}})}})})}),
         ErrorCode::unimplemented, "inputs.messages[1].content[1] is a 'image' part"});
    cases.push_back({with_messages({message("user", {Value(Map{{"type", Value("audio")}})})}),
                     ErrorCode::unimplemented, "'audio' part"});
    for (std::size_t i = 0; i < cases.size(); ++i) {
        push("r" + std::to_string(i), cases[i].request);
        const Error error = next_error();
        EXPECT_EQ(error.code, cases[i].code) << cases[i].fragment << ": " << error.to_string();
        EXPECT_NE(error.message.find(cases[i].fragment), std::string::npos) << error.message;
        EXPECT_NE(error.message.find("qwen3.preprocess"), std::string::npos) << error.message;
    }
    EXPECT_EQ(input_ids("fine", with_prompt(Value("still here"))), encode("still here"));
}

TEST_F(Qwen3TextStagesTest, FactoriesNeedATokenizer) {
    for (const char* factory : {"qwen3.preprocess", "qwen3.decode"}) {
        auto missing = build(factory, {});
        ASSERT_FALSE(missing.has_value()) << factory;
        EXPECT_EQ(missing.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(missing.error().message.find("arg 'model_path' is required"), std::string::npos)
            << missing.error().message;
        const fs::path empty = *directory_ / "empty";
        fs::create_directories(empty);
        auto no_file = build(factory, Map{{"model_path", Value(empty.string())}});
        ASSERT_FALSE(no_file.has_value()) << factory;
        EXPECT_NE(no_file.error().message.find(factory), std::string::npos)
            << no_file.error().message;
    }
    auto flag = build("qwen3.preprocess", Map{{"model_path", Value(directory_->string())},
                                              {"enable_thinking", Value("no")}});
    ASSERT_FALSE(flag.has_value());
    EXPECT_NE(flag.error().message.find("enable_thinking"), std::string::npos);
}

// An entry of the client output protocol, as qwen3.decode writes it.
Value entry(const std::string& token, std::string_view bytes, double logprob,
            std::optional<List> top = std::nullopt) {
    List byte_list;
    for (unsigned char c : bytes) byte_list.emplace_back(static_cast<std::int64_t>(c));
    Map out{{"token", Value(token)}, {"logprob", Value(logprob)}, {"bytes", Value(byte_list)}};
    if (top) out.emplace("top_logprobs", Value(std::move(*top)));
    return Value(std::move(out));
}
Value alternative(std::int64_t id, double logprob) {
    return Value(Map{{"token_id", Value(id)}, {"logprob", Value(logprob)}});
}
// A thinker token chunk.
Value token_chunk(std::int64_t id, const std::string& text, std::optional<double> logprob = {},
                  std::optional<List> top = std::nullopt) {
    Map out{{"token_id", Value(id)}, {"index", Value(0)}, {"text", Value(text)}};
    if (logprob) out.emplace("logprob", Value(*logprob));
    if (top) out.emplace("top_logprobs", Value(std::move(*top)));
    return Value(std::move(out));
}

TEST_F(Qwen3TextStagesTest, DecodeTurnsTokenChunksIntoClientTextAndLogprobs) {
    start("qwen3.decode");
    const std::int64_t ll = id_of("ll");  // a merged token
    const std::int64_t bang = id_of("!");
    const std::int64_t end = tiny_tokenizer_ids().im_end;
    const std::int64_t lead = id_of(byte_level("\xC3"));   // the first byte of "é"
    const std::int64_t trail = id_of(byte_level("\xA9"));  // its second byte
    const std::int64_t padded = kTinyVocabSize - 1;        // an embedding row past the tokenizer
    ASSERT_GE(padded, kTinyTokenizerSize);

    const Value thinker_result(Map{
        {"text", Value("llé!")},
        {"finish_reason", Value("length")},
        {"usage", Value(Map{{"prompt_tokens", Value(9)}, {"completion_tokens", Value(6)}})},
        {"output_ids",
         Value(List{Value(ll), Value(lead), Value(trail), Value(padded), Value(bang), Value(end)})},
        {"hidden_states", Value("for the talker only")},
    });
    push("r", OmniRequest{}, thinker_result);
    push_chunk("r",
               token_chunk(ll, "ll", -0.5, List{alternative(ll, -0.5), alternative(end, -3.0)}));
    push_chunk("r", token_chunk(lead, "", -1.0, List{}));
    push_chunk("r", token_chunk(trail, "é", -0.25));
    push_chunk("r", token_chunk(padded, "", -7.0, List{alternative(padded, -7.0)}));
    push_chunk("r", token_chunk(bang, "!"));  // no log probabilities asked for this one
    push_chunk("r", token_chunk(end, ""));    // nothing for the client
    push_done("r");

    const Value ll_entry = entry(
        "ll", "ll", -0.5, List{entry("ll", "ll", -0.5), entry("<|im_end|>", "<|im_end|>", -3.0)});
    const Value lead_entry = entry("\xEF\xBF\xBD", "\xC3", -1.0, List{});  // U+FFFD, byte 0xC3
    const Value trail_entry = entry("\xEF\xBF\xBD", "\xA9", -0.25);
    const Value padded_entry = entry("", "", -7.0, List{entry("", "", -7.0)});
    EXPECT_EQ(next_client_chunk(),
              Value(Map{{"text", Value("ll")}, {"logprobs", Value(List{ll_entry})}}));
    EXPECT_EQ(next_client_chunk(), Value(Map{{"logprobs", Value(List{lead_entry})}}));
    EXPECT_EQ(next_client_chunk(),
              Value(Map{{"text", Value("é")}, {"logprobs", Value(List{trail_entry})}}));
    EXPECT_EQ(next_client_chunk(), Value(Map{{"logprobs", Value(List{padded_entry})}}));
    EXPECT_EQ(next_client_chunk(), Value(Map{{"text", Value("!")}}));
    const Value result = next_result();
    EXPECT_EQ(
        result,
        Value(Map{{"text", Value("llé!")},
                  {"finish_reason", Value("length")},
                  {"usage", *thinker_result.find("usage")},
                  {"output_ids", *thinker_result.find("output_ids")},
                  {"logprobs", Value(List{ll_entry, lead_entry, trail_entry, padded_entry})}}))
        << result.debug_string();
    EXPECT_EQ(scheduler_->active_requests(), 0u);
}

TEST_F(Qwen3TextStagesTest, DecodeWithoutLogprobsPassesTextOnly) {
    start("qwen3.decode");
    // The chunks may come before the thinker's result.
    push_chunk("r", token_chunk(id_of("ll"), "ll"));
    push_chunk("r", token_chunk(id_of("!"), "!"));
    push("r", OmniRequest{}, Value(Map{{"text", Value("ll!")}, {"finish_reason", Value("stop")}}));
    push_done("r");
    EXPECT_EQ(next_client_chunk(), Value(Map{{"text", Value("ll")}}));
    EXPECT_EQ(next_client_chunk(), Value(Map{{"text", Value("!")}}));
    EXPECT_EQ(next_result(), Value(Map{{"text", Value("ll!")}, {"finish_reason", Value("stop")}}));
    // No chunks at all: the result alone, without a logprobs key.
    push("empty", OmniRequest{}, Value(Map{{"text", Value("")}}));
    push_done("empty");
    EXPECT_EQ(next_result(), Value(Map{{"text", Value("")}}));
    EXPECT_EQ(scheduler_->active_requests(), 0u);
}

TEST_F(Qwen3TextStagesTest, DecodeRefusesMalformedChunks) {
    start("qwen3.decode");
    const std::vector<std::pair<Value, std::string>> cases = {
        {Value(Map{{"text", Value("x")}, {"logprob", Value(-1.0)}}), "has no token_id"},
        {Value(Map{{"token_id", Value("5")}, {"logprob", Value(-1.0)}}), "a token_id >= 0"},
        {Value(Map{{"token_id", Value(5.0)}, {"logprob", Value(-1.0)}}), "a token_id >= 0"},
        {Value(Map{{"token_id", Value(-3)}, {"logprob", Value(-1.0)}}), "a token_id >= 0"},
        {Value(Map{{"token_id", Value(5)}, {"logprob", Value("low")}}), "a number logprob"},
        {Value(Map{{"token_id", Value(5)}, {"logprob", Value()}}), "a number logprob"},
        {Value(Map{{"token_id", Value(5)}, {"logprob", Value(-1.0)}, {"top_logprobs", Value(3)}}),
         "top_logprobs must be a list"},
        {token_chunk(5, "", -1.0, List{Value(Map{{"token_id", Value(5)}})}),
         "needs token_id and logprob"},
        {token_chunk(5, "", -1.0, List{Value(Map{{"logprob", Value(-1.0)}})}),
         "needs token_id and logprob"},
        {token_chunk(5, "", -1.0, List{Value(7)}), "needs token_id and logprob"},
        {token_chunk(5, "", -1.0,
                     List{alternative(5, -1.0),
                          Value(Map{{"token_id", Value("a")}, {"logprob", Value(-2.0)}})}),
         "a token_id >= 0"},
    };
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const std::string id = "bad" + std::to_string(i);
        push(id, OmniRequest{}, Value(Map{{"text", Value("x")}}));
        push_chunk(id, cases[i].first);
        const Error error = next_error();
        EXPECT_EQ(error.code, ErrorCode::invalid_argument) << cases[i].second;
        EXPECT_NE(error.message.find("qwen3.decode"), std::string::npos) << error.message;
        EXPECT_NE(error.message.find(cases[i].second), std::string::npos)
            << cases[i].first.debug_string() << ": " << error.message;
        // The failed request is gone; its late messages are dropped.
        push_done(id);
    }
    EXPECT_EQ(scheduler_->active_requests(), 0u);
    // The stage keeps serving.
    push("ok", OmniRequest{}, Value(Map{{"text", Value("fine")}}));
    push_chunk("ok", token_chunk(id_of("!"), "!"));
    push_done("ok");
    EXPECT_EQ(next_client_chunk(), Value(Map{{"text", Value("!")}}));
    EXPECT_EQ(next_result(), Value(Map{{"text", Value("fine")}}));
}

TEST_F(Qwen3TextStagesTest, PromptIdsMatchTheStage) {
    // qwen3_prompt_ids is what the stage runs; the thinker uses it directly when no preprocess
    // stage ran.
    auto ids = qwen3_prompt_ids(with_messages({message("user", {text_part("Hi")})}), *tokenizer_,
                                /*enable_thinking=*/false, "who");
    ASSERT_TRUE(ids.has_value()) << ids.error().to_string();
    EXPECT_EQ(*ids, encode(std::string(kHiConversation) + kNoThinking));
    auto refused = qwen3_prompt_ids(with_prompt(Value(List{Value(-3)})), *tokenizer_, true, "who");
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().message.rfind("who: inputs.prompt[0]", 0), 0u)
        << refused.error().message;
    auto rendered = render_chat_prompt(Value(List{message("user", {text_part("Hi")})}), true,
                                       /*add_generation_prompt=*/false, "who");
    ASSERT_TRUE(rendered.has_value());
    EXPECT_EQ(*rendered, "<|im_start|>user\nHi<|im_end|>\n");
}

}  // namespace
}  // namespace omnirt::models::qwen3
