// Same seed, same audio: s2_pro.tts (sampling, a request seed) streaming its frames into
// s2_pro.vocoder, as configs/s2_pro_tts.yaml wires them, gives bit-identical audio on a fresh
// pair of stages, and the same audio when another request is generated and vocoded beside it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>

#include "models/s2_pro/make_checkpoint.h"
#include "models/s2_pro/tts_stage.h"
#include "models/s2_pro/vocoder_stage.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::s2_pro {
namespace {

namespace fs = std::filesystem;

class S2ProSpeechDeterminismTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        directory_ = new fs::path(fs::temp_directory_path() /
                                  ("omnirt_s2_pro_speech_" + std::to_string(::getpid())));
        fs::remove_all(*directory_);
        ASSERT_TRUE(make_checkpoint(*directory_, {.preset = "tiny", .seed = 8, .dtype = DType::f32})
                        .has_value());
    }
    static void TearDownTestSuite() {
        fs::remove_all(*directory_);
        delete directory_;
    }

    // Generates every request in `seeds` (id -> seed) at once on a fresh tts stage, streams each
    // frame into a fresh vocoder stage as it comes, and returns each request's audio.
    static std::map<std::string, at::Tensor> speak(
        const std::map<std::string, std::int64_t>& seeds) {
        auto tts = make_tts_stage(pipeline::StageContext{
            .stage_name = "tts",
            .args =
                Map{{"model_path", Value(directory_->string())}, {"max_total_tokens", Value(1024)}},
            .stream_to = {"vocoder"}});
        OMNI_CHECK(tts.has_value(), "tts stage");
        auto vocoder = make_vocoder_stage(
            pipeline::StageContext{.stage_name = "vocoder",
                                   .args = Map{{"model_path", Value(directory_->string())},
                                               {"first_chunk_frames", Value(2)},
                                               {"chunk_frames", Value(3)}},
                                   .stream_sources = {"tts"},
                                   .terminal = true});
        OMNI_CHECK(vocoder.has_value(), "vocoder stage");
        OMNI_CHECK((*tts)->start().has_value() && (*vocoder)->start().has_value(), "start");
        const std::vector<std::int32_t> prompt = {151644, 872, 198, 50, 60, 151645, 151644, 151673};
        for (const auto& [id, seed] : seeds) {
            StagePayload payload{
                .request_id = id,
                .request = OmniRequest{.params = Value(Map{
                                           {"max_tokens", Value(7)},
                                           {"seed", Value(seed)},
                                           {"sampling", Value(Map{{"temperature", Value(0.9)}})}})},
                .data = Value(Map{{"input_ids", Value(Tensor::from_vector(prompt))}})};
            OMNI_CHECK((*tts)->inbox().push(pipeline::IncomingMessage{
                           .request_id = id,
                           .kind = pipeline::IncomingKind::new_request,
                           .payload = std::make_shared<const StagePayload>(std::move(payload))}),
                       "push");
        }
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
        std::size_t generated = 0;
        while (generated < seeds.size()) {  // relay the tts stage's output as a Stage would
            auto message = (*tts)->outbox().pop_until(deadline);
            OMNI_CHECK(message.has_value(), "tts timed out");
            OMNI_CHECK(message->kind != pipeline::OutgoingKind::error, "tts failed");
            if (message->kind == pipeline::OutgoingKind::stream) {
                OMNI_CHECK((*vocoder)->inbox().push(pipeline::IncomingMessage{
                               .request_id = message->request_id,
                               .kind = pipeline::IncomingKind::stream_chunk,
                               .chunk = message->chunk,
                               .from_stage = "tts"}),
                           "chunk");
                continue;
            }
            ++generated;
            OMNI_CHECK((*vocoder)->inbox().push(
                           pipeline::IncomingMessage{.request_id = message->request_id,
                                                     .kind = pipeline::IncomingKind::stream_done,
                                                     .from_stage = "tts"}),
                       "done");
            OMNI_CHECK((*vocoder)->inbox().push(
                           pipeline::IncomingMessage{.request_id = message->request_id,
                                                     .kind = pipeline::IncomingKind::new_request,
                                                     .payload = message->result}),
                       "payload");
        }
        std::map<std::string, std::vector<at::Tensor>> pieces;
        std::size_t finished = 0;
        while (finished < seeds.size()) {
            auto message = (*vocoder)->outbox().pop_until(deadline);
            OMNI_CHECK(message.has_value(), "vocoder timed out");
            OMNI_CHECK(message->kind != pipeline::OutgoingKind::error, "vocoder failed");
            if (message->kind == pipeline::OutgoingKind::stream) {
                pieces[message->request_id].push_back(
                    torch_bridge::to_torch(*message->chunk->chunk.find("audio")->if_tensor())
                        .clone());
            } else {
                ++finished;
            }
        }
        (*tts)->stop();
        (*vocoder)->stop();
        std::map<std::string, at::Tensor> audio;
        for (auto& [id, list] : pieces) audio[id] = at::cat(list);
        return audio;
    }

    static fs::path* directory_;
};

fs::path* S2ProSpeechDeterminismTest::directory_ = nullptr;

TEST_F(S2ProSpeechDeterminismTest, SameSeedSameAudioAloneAndBatched) {
    const auto first = speak({{"a", 11}});
    const auto again = speak({{"a", 11}});
    const auto batched = speak({{"a", 11}, {"b", 12}, {"c", 11}});
    ASSERT_TRUE(first.contains("a"));
    EXPECT_GT(first.at("a").size(0), 0);
    EXPECT_EQ(first.at("a").size(0) % 2048, 0);
    EXPECT_TRUE(at::equal(again.at("a"), first.at("a")));
    EXPECT_TRUE(at::equal(batched.at("a"), first.at("a")));
    EXPECT_TRUE(at::equal(batched.at("c"), first.at("a")));  // the same seed under another id
    EXPECT_FALSE(batched.at("b").sizes() == first.at("a").sizes() &&
                 at::equal(batched.at("b"), first.at("a")));
}

}  // namespace
}  // namespace omnirt::models::s2_pro
