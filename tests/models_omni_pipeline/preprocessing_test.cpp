// The Qwen3-Omni preprocessing stage's work and the pipeline functions around it (no libtorch):
// chat + media to input ids, encoder items and 3-D positions; routing, projections, fan-in
// sources and the merge into the thinker's input; bad media named by its content part.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "core/registry.h"
#include "media/audio.h"
#include "models/qwen3_omni/chat_layout.h"
#include "models/qwen3_omni/make_checkpoint.h"
#include "models/qwen3_omni/omni_stages.h"
#include "models/qwen3_omni/preprocessing.h"
#include "text/tokenizer.h"

namespace omnirt::models::qwen3_omni {
namespace {

// The functions the tests look up by name.
[[maybe_unused]] const bool kRegistered = [] {
    auto registered = register_omni_stages();
    OMNI_CHECK(registered.has_value(), "register_omni_stages");
    return true;
}();

std::shared_ptr<const text::Tokenizer> tokenizer() {
    static std::shared_ptr<const text::Tokenizer> shared = [] {
        auto made = text::Tokenizer::from_json(omni_tokenizer_files().tokenizer.dump());
        OMNI_CHECK(made.has_value(), "tokenizer");
        return std::shared_ptr<const text::Tokenizer>(std::move(*made));
    }();
    return shared;
}

// An uncompressed 24-bit BMP of seeded pixels.
std::vector<std::uint8_t> bmp(int width, int height, std::uint32_t seed) {
    const int stride = (width * 3 + 3) / 4 * 4;
    const std::uint32_t size = 54 + static_cast<std::uint32_t>(stride * height);
    std::vector<std::uint8_t> out(size, 0);
    auto put32 = [&](std::size_t at, std::uint32_t v) {
        for (int i = 0; i < 4; ++i) out[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
    };
    out[0] = 'B';
    out[1] = 'M';
    put32(2, size);
    put32(10, 54);
    put32(14, 40);
    put32(18, static_cast<std::uint32_t>(width));
    put32(22, static_cast<std::uint32_t>(height));
    out[26] = 1;
    out[28] = 24;
    put32(34, static_cast<std::uint32_t>(stride * height));
    std::uint32_t state = seed;
    for (int y = 0; y < height; ++y) {
        for (int x = 0; x < width * 3; ++x) {
            state = state * 1664525u + 1013904223u;
            out[54 + static_cast<std::size_t>(y * stride + x)] =
                static_cast<std::uint8_t>(state >> 24);
        }
    }
    return out;
}

std::vector<std::uint8_t> wav(double seconds) {
    media::AudioBuffer buffer{.sample_rate = 16000, .channels = 1};
    const auto n = static_cast<std::size_t>(seconds * 16000);
    for (std::size_t i = 0; i < n; ++i) {
        buffer.samples.push_back(static_cast<float>(0.3 * std::sin(0.05 * static_cast<double>(i))));
    }
    auto encoded = media::encode_audio(buffer, media::AudioFormat::wav);
    OMNI_CHECK(encoded.has_value(), "wav");
    return {encoded->begin(), encoded->end()};
}

Value media_part(const std::string& type, std::vector<std::uint8_t> bytes) {
    return Value(Map{{"type", Value(type)},
                     {"source", Value("bytes")},
                     {"data", Value(Bytes{std::move(bytes)})}});
}

Value text_part(const std::string& text) {
    return Value(Map{{"type", Value("text")}, {"text", Value(text)}});
}

OmniRequest chat(List content) {
    OmniRequest request;
    request.inputs =
        Value(Map{{"messages", Value(List{Value(Map{{"role", Value("user")},
                                                    {"content", Value(std::move(content))}})})}});
    return request;
}

std::vector<std::int64_t> ints(const Value& value) {
    const Tensor& tensor = value.as_tensor();
    std::vector<std::int64_t> out;
    if (tensor.dtype() == DType::i32) {
        for (std::int64_t i = 0; i < tensor.numel(); ++i)
            out.push_back(tensor.data_as<std::int32_t>()[i]);
    } else {
        for (std::int64_t i = 0; i < tensor.numel(); ++i)
            out.push_back(tensor.data_as<std::int64_t>()[i]);
    }
    return out;
}

StagePayload payload_of(Map data, const OmniRequest& request = {}) {
    return StagePayload{.request_id = "r", .request = request, .data = Value(std::move(data))};
}

TEST(OmniPreprocessingTest, TextOnlyPromptHasSequentialPositionsAndNoEncoders) {
    auto data = preprocess_request(chat(List{text_part("hello there")}), *tokenizer(), {});
    ASSERT_TRUE(data.has_value()) << data.error().to_string();
    const Value result(std::move(*data));
    const auto ids = ints(*result.find("input_ids"));
    ASSERT_FALSE(ids.empty());
    const auto positions = ints(*result.find("positions"));
    ASSERT_EQ(positions.size(), 3 * ids.size());
    for (std::size_t i = 0; i < positions.size(); ++i) {
        EXPECT_EQ(positions[i], static_cast<std::int64_t>(i % ids.size()));
    }
    EXPECT_EQ(result.find("rope_delta")->as_int(), 0);
    EXPECT_TRUE(result.find("media")->as_list().empty());
    const StagePayload payload = payload_of(result.as_map());
    auto route =
        Registry::global().get<RouteFn>(FunctionKind::route, "qwen3_omni.route_by_modality");
    ASSERT_TRUE(route.has_value());
    EXPECT_EQ((*route)("r", payload).value(), std::vector<std::string>{"mm_aggregate"});
    auto wait =
        Registry::global().get<WaitForFn>(FunctionKind::wait_for, "qwen3_omni.active_encoders");
    ASSERT_TRUE(wait.has_value());
    EXPECT_EQ((*wait)("r", "preprocessing", payload).value(),
              std::optional(std::vector<std::string>{"preprocessing"}));
}

TEST(OmniPreprocessingTest, ImageAndAudioBecomeEncoderItemsAtTheirPlaceholderRows) {
    const OmniRequest request =
        chat(List{text_part("what is this?"), media_part("image", bmp(100, 70, 3)),
                  media_part("audio", wav(1.3))});
    auto data = preprocess_request(request, *tokenizer(), {});
    ASSERT_TRUE(data.has_value()) << data.error().to_string();
    const Value result(std::move(*data));
    const auto ids = ints(*result.find("input_ids"));
    const List& media = result.find("media")->as_list();
    ASSERT_EQ(media.size(), 2u);
    // 70 x 100 -> smart_resize 64 x 96 -> grid (1, 4, 6) -> 6 tokens; 1.3 s -> 130 frames -> 17.
    const auto image_rows = ints(*media[0].find("rows"));
    const auto audio_rows = ints(*media[1].find("rows"));
    ASSERT_EQ(image_rows.size(), 6u);
    ASSERT_EQ(audio_rows.size(), 17u);
    for (auto row : image_rows) EXPECT_EQ(ids[row], 151655);
    for (auto row : audio_rows) EXPECT_EQ(ids[row], 151675);
    EXPECT_EQ(media[0].find("encoder")->as_string(), "image_encoder");
    EXPECT_EQ(media[1].find("encoder")->as_string(), "audio_encoder");
    const List& images = result.find("image_items")->as_list();
    ASSERT_EQ(images.size(), 1u);
    EXPECT_EQ(ints(*images[0].find("grid_thw")), (std::vector<std::int64_t>{1, 4, 6}));
    EXPECT_EQ(images[0].find("pixel_values")->as_tensor().shape(), (Shape{24, 1536}));
    const List& audios = result.find("audio_items")->as_list();
    ASSERT_EQ(audios.size(), 1u);
    EXPECT_EQ(audios[0].find("mel")->as_tensor().shape(), (Shape{128, 130}));
    // The image's 2 x 3 merged grid: heights st, st, st, st+1, ... widths st, st+1, st+2, ...
    const auto positions = ints(*result.find("positions"));
    const std::size_t n = ids.size();
    const std::int64_t st = positions[image_rows[0]];
    EXPECT_EQ(positions[n + image_rows[3]], st + 1);
    EXPECT_EQ(positions[2 * n + image_rows[2]], st + 2);
    EXPECT_LT(result.find("rope_delta")->as_int(), 0);

    const StagePayload payload = payload_of(result.as_map(), request);
    auto route =
        Registry::global().get<RouteFn>(FunctionKind::route, "qwen3_omni.route_by_modality");
    EXPECT_EQ((*route)("r", payload).value(),
              (std::vector<std::string>{"mm_aggregate", "image_encoder", "audio_encoder"}));
    auto to_image = Registry::global().get<ProjectionFn>(FunctionKind::projection,
                                                         "qwen3_omni.project_to_image_encoder");
    auto projected = (*to_image)("image_encoder", payload);
    ASSERT_TRUE(projected.has_value());
    EXPECT_EQ(projected->data.find("items")->as_list().size(), 1u);
    EXPECT_EQ(projected->data.find("media"), nullptr);
    auto to_aggregate = Registry::global().get<ProjectionFn>(FunctionKind::projection,
                                                             "qwen3_omni.project_to_aggregate");
    auto slim = (*to_aggregate)("mm_aggregate", payload);
    EXPECT_EQ(slim->data.find("image_items"), nullptr);
    EXPECT_NE(slim->data.find("media"), nullptr);

    // The merge: encoder outputs land as runs at the placeholder rows.
    const std::int64_t hidden = 4;
    auto rows_of = [&](std::int64_t count, float base) {
        std::vector<float> values(static_cast<std::size_t>(count * hidden));
        for (std::size_t i = 0; i < values.size(); ++i) values[i] = base + static_cast<float>(i);
        return Value(Tensor::from_vector(values, {count, hidden}));
    };
    auto image_out = std::make_shared<const StagePayload>(payload_of(Map{
        {"items", Value(List{Value(Map{{"key", *images[0].find("key")},
                                       {"embeddings", rows_of(6, 0)},
                                       {"deepstack", Value(List{rows_of(6, 100), rows_of(6, 200),
                                                                rows_of(6, 300)})}})})}}));
    auto audio_out = std::make_shared<const StagePayload>(
        payload_of(Map{{"items", Value(List{Value(Map{{"key", *audios[0].find("key")},
                                                      {"embeddings", rows_of(17, 1000)}})})}}));
    auto merged =
        merge_for_thinker("r", {{"preprocessing", std::make_shared<const StagePayload>(*slim)},
                                {"image_encoder", image_out},
                                {"audio_encoder", audio_out}});
    ASSERT_TRUE(merged.has_value()) << merged.error().to_string();
    const List& runs = merged->data.find("mm_runs")->as_list();
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0].find("begin")->as_int(), image_rows[0]);
    EXPECT_EQ(runs[1].find("begin")->as_int(), audio_rows[0]);
    EXPECT_EQ(runs[1].find("values")->as_tensor().shape(), (Shape{17, hidden}));
    const List& deepstack = merged->data.find("deepstack_runs")->as_list();
    ASSERT_EQ(deepstack.size(), 1u);
    EXPECT_EQ(deepstack[0].find("values")->as_list().size(), 3u);
    EXPECT_NE(merged->data.find("positions"), nullptr);
}

TEST(OmniPreprocessingTest, VideoWithItsSoundtrackInterleaves) {
    std::ifstream file(std::string(OMNIRT_SOURCE_DIR) + "/tests/media/goldens/video_h264_aac.mp4",
                       std::ios::binary);
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(file)), {});
    ASSERT_FALSE(bytes.empty());
    PreprocessOptions options;
    options.use_audio_in_video = true;
    auto data = preprocess_request(chat(List{media_part("video", bytes), text_part("and?")}),
                                   *tokenizer(), options);
    ASSERT_TRUE(data.has_value()) << data.error().to_string();
    const Value result(std::move(*data));
    const List& media = result.find("media")->as_list();
    ASSERT_EQ(media.size(), 2u);
    EXPECT_EQ(media[0].find("kind")->as_string(), "video");
    EXPECT_EQ(media[1].find("kind")->as_string(), "audio");
    const auto video_rows = ints(*media[0].find("rows"));
    const auto audio_rows = ints(*media[1].find("rows"));
    ASSERT_FALSE(video_rows.empty());
    ASSERT_FALSE(audio_rows.empty());
    // Interleaved: the audio's rows are not one block after the video's.
    EXPECT_LT(audio_rows.front(), video_rows.back());
    EXPECT_EQ(result.find("image_items")->as_list().size(), 1u);
    EXPECT_EQ(result.find("audio_items")->as_list().size(), 1u);
}

TEST(OmniPreprocessingTest, BadMediaIsNamedByItsContentPart) {
    auto expect_bad = [](const OmniRequest& request, const std::string& needle,
                         const PreprocessOptions& options = {}) {
        auto data = preprocess_request(request, *tokenizer(), options);
        ASSERT_FALSE(data.has_value()) << needle;
        EXPECT_EQ(data.error().code, ErrorCode::invalid_argument) << data.error().message;
        EXPECT_NE(data.error().message.find(needle), std::string::npos) << data.error().message;
    };
    expect_bad(chat(List{text_part("x"), media_part("image", {1, 2, 3, 4})}),
               "inputs.messages[0].content[1] (image)");
    expect_bad(chat(List{media_part("image", {})}), "inputs.messages[0].content[0] (image)");
    auto truncated = bmp(64, 64, 1);
    truncated.resize(100);
    expect_bad(chat(List{media_part("image", truncated)}), "(image)");
    expect_bad(chat(List{media_part("image", bmp(402, 2, 1))}), "(image)");  // aspect > 200
    expect_bad(chat(List{media_part("audio", {'R', 'I', 'F', 'F', 0, 0})}), "(audio)");
    expect_bad(chat(List{media_part("video", {0, 0, 0, 24, 'f', 't', 'y', 'p'})}), "(video)");
    expect_bad(chat(List{Value(Map{{"type", Value("image")},
                                   {"source", Value("remote_url")},
                                   {"url", Value("http://127.0.0.1:1/a.png")}})}),
               "inputs.messages[0].content[0] (image): http://127.0.0.1:1/a.png");
    expect_bad(chat(List{Value(Map{{"type", Value("image")},
                                   {"source", Value("remote_url")},
                                   {"url", Value("file:///etc/passwd")}})}),
               "only http and https");
    expect_bad(chat(List{Value(Map{{"type", Value("image")}, {"source", Value("bytes")}})}),
               "'data' must be bytes");
    PreprocessOptions one;
    one.max_media_items = 1;
    expect_bad(chat(List{media_part("image", bmp(64, 64, 1)), media_part("image", bmp(64, 64, 2))}),
               "at most 1", one);
    expect_bad(chat(List{text_part("<|image_pad|>")}), "");
}

// POST /v1/audio/speech sends inputs.text (text to read aloud): a clear refusal that names the
// chat route, not the generic "needs inputs.messages"; no input at all names what is needed.
TEST(OmniPreprocessingTest, SpeechTextIsRefusedNamingTheChatRoute) {
    OmniRequest speech;
    speech.inputs = Value(Map{{"text", Value("read this")}, {"voice", Value("ethan")}});
    auto refused = preprocess_request(speech, *tokenizer(), {});
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(refused.error().message.find("/v1/audio/speech is not served"), std::string::npos)
        << refused.error().message;
    EXPECT_NE(refused.error().message.find("/v1/chat/completions"), std::string::npos);

    OmniRequest empty;
    empty.inputs = Value(Map{{"text", Value(std::int64_t{3})}});
    auto missing = preprocess_request(empty, *tokenizer(), {});
    ASSERT_FALSE(missing.has_value());
    EXPECT_NE(missing.error().message.find("needs inputs.messages"), std::string::npos)
        << missing.error().message;
}

TEST(OmniPreprocessingTest, MergeRefusesMissingOrMismatchedEncoderOutputs) {
    Map data{
        {"input_ids", Value(Tensor::from_vector(std::vector<std::int32_t>{1, 2, 3}))},
        {"media",
         Value(List{Value(Map{{"kind", Value("image")},
                              {"key", Value(std::int64_t{5})},
                              {"rows", Value(Tensor::from_vector(std::vector<std::int64_t>{1}))},
                              {"encoder", Value("image_encoder")},
                              {"item", Value(std::int64_t{0})}})})}};
    auto base = std::make_shared<const StagePayload>(payload_of(data));
    EXPECT_FALSE(merge_for_thinker("r", {{"preprocessing", base}}).has_value());
    auto wrong_rows = std::make_shared<const StagePayload>(payload_of(Map{
        {"items",
         Value(List{Value(Map{
             {"embeddings", Value(Tensor::from_vector(std::vector<float>(8, 0.f), {2, 4}))}})})}}));
    auto merged = merge_for_thinker("r", {{"preprocessing", base}, {"image_encoder", wrong_rows}});
    ASSERT_FALSE(merged.has_value());
    EXPECT_NE(merged.error().message.find("1 rows"), std::string::npos) << merged.error().message;
    auto no_items = std::make_shared<const StagePayload>(payload_of(Map{}));
    EXPECT_FALSE(
        merge_for_thinker("r", {{"preprocessing", base}, {"image_encoder", no_items}}).has_value());
    EXPECT_FALSE(merge_for_thinker("r", {}).has_value());
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni
