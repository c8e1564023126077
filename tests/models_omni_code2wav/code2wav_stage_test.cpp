// The qwen3_omni.code2wav streaming stage on the tiny checkpoint (seed 7, bf16, init std 0.1, as
// the other omni stage tests): the streamed audio equals decode_chunk over the same chunking plan
// called directly, chunk by chunk; a chunk leaves as soon as its frames arrived; EOS frames are
// skipped; malformed chunks fail their request only; abort frees the state; factory arguments are
// checked. Concurrent streams: chunks of several requests decoded in one batched forward (rows
// of different lengths right-padded) give each request the audio it gets alone. Deterministic:
// the tests wait on the outbox (the deadline only guards a hang); the batching tests queue their
// messages before the stage starts, so the batches are the same on every run.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "models/qwen3_omni/code2wav.h"
#include "models/qwen3_omni/code2wav_config.h"
#include "models/qwen3_omni/code2wav_stage.h"
#include "models/qwen3_omni/make_checkpoint.h"
#include "models_omni_stages/stage_harness.h"
#include "pipeline/scheduler.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3_omni {
namespace {

namespace fs = std::filesystem;
using testing::tiny_checkpoint;

constexpr std::int64_t kQuantizers = 16;
constexpr std::int64_t kFirstChunk = 3;
constexpr std::int64_t kChunk = 4;
constexpr std::int64_t kLeftContext = 2;
// float32: a batched forward differs from a forward of one row by rounding only.
constexpr float kTolerance = 1e-5f;

pipeline::StageContext stage_context(Map extra = {}) {
    Map args{{"model_path", Value(tiny_checkpoint().string())},
             {"num_threads", Value(2)},
             {"first_chunk_frames", Value(kFirstChunk)},
             {"chunk_frames", Value(kChunk)},
             {"left_context_frames", Value(kLeftContext)}};
    for (auto& [key, value] : extra) args.insert_or_assign(key, value);
    return pipeline::StageContext{
        .stage_name = "code2wav", .args = std::move(args), .stream_sources = {"talker"}};
}

Tensor omni(const at::Tensor& tensor) {
    auto converted = torch_bridge::from_torch(tensor.contiguous());
    OMNI_CHECK(converted.has_value(), "from_torch");
    return *converted;
}

// Deterministic codes [frames, 16] in [0, 2048).
at::Tensor codes_of(std::int64_t frames, std::uint64_t seed) {
    at::manual_seed(seed);
    return at::randint(2048, {frames, kQuantizers}, at::kLong);
}

Value codes_chunk(const at::Tensor& codes) { return Value(Map{{"codes", Value(omni(codes))}}); }

class Code2WavStageTest : public ::testing::Test {
  protected:
    void SetUp() override {
        auto stage = make_code2wav_stage(stage_context());
        ASSERT_TRUE(stage.has_value()) << stage.error().to_string();
        stage_ = std::move(*stage);
        ASSERT_TRUE(stage_->start().has_value());
    }
    void TearDown() override {
        if (stage_) stage_->stop();
    }

    void push_chunk(const std::string& id, std::int64_t chunk_id, Value data) {
        ASSERT_TRUE(stage_->inbox().push(pipeline::IncomingMessage{
            .request_id = id,
            .kind = pipeline::IncomingKind::stream_chunk,
            .chunk = std::make_shared<const pipeline::StreamChunk>(
                pipeline::StreamChunk{.chunk_id = chunk_id, .chunk = std::move(data)}),
            .from_stage = "talker"}));
    }
    void push_done(const std::string& id) {
        ASSERT_TRUE(stage_->inbox().push(
            pipeline::IncomingMessage{.request_id = id,
                                      .kind = pipeline::IncomingKind::stream_done,
                                      .from_stage = "talker"}));
    }
    void push_payload(const std::string& id) {
        ASSERT_TRUE(stage_->inbox().push(
            pipeline::IncomingMessage{.request_id = id,
                                      .kind = pipeline::IncomingKind::new_request,
                                      .payload = std::make_shared<const StagePayload>(
                                          StagePayload{.request_id = id, .data = Value(Map{})})}));
    }

    // The next outgoing message. The deadline only guards against a hang.
    pipeline::OutgoingMessage next() {
        auto message =
            stage_->outbox().pop_until(std::chrono::steady_clock::now() + std::chrono::minutes(2));
        OMNI_CHECK(message.has_value(), "timed out waiting for the code2wav stage");
        return std::move(*message);
    }

    // Messages until the result or error of `id`: the audio chunks of `id` in order, and the
    // final message. Messages of other requests fail the test.
    struct Finished {
        std::vector<at::Tensor> audio;
        pipeline::OutgoingMessage last;
    };
    Finished finish(const std::string& id) {
        Finished out;
        while (true) {
            pipeline::OutgoingMessage message = next();
            EXPECT_EQ(message.request_id, id);
            if (message.kind != pipeline::OutgoingKind::stream) {
                out.last = std::move(message);
                return out;
            }
            out.audio.push_back(audio_of(message));
        }
    }

    // Messages until every request of `ids` has its result or error, by request: the audio
    // chunks in order and the final message. Messages of other requests fail the test.
    // `batch_rows` gets the batch_rows metadata of every audio chunk.
    std::map<std::string, Finished> collect(const std::set<std::string>& ids,
                                            std::vector<std::int64_t>* batch_rows = nullptr) {
        std::map<std::string, Finished> out;
        std::size_t done = 0;
        while (done < ids.size()) {
            pipeline::OutgoingMessage message = next();
            EXPECT_TRUE(ids.contains(message.request_id)) << message.request_id;
            Finished& finished = out[message.request_id];
            if (message.kind == pipeline::OutgoingKind::stream) {
                if (batch_rows != nullptr) {
                    const Value* rows = message.chunk->metadata.find("batch_rows");
                    batch_rows->push_back(rows != nullptr && rows->is_int() ? rows->as_int() : 0);
                }
                finished.audio.push_back(audio_of(message));
            } else {
                finished.last = std::move(message);
                ++done;
            }
        }
        return out;
    }

    // A stage that is not started yet, so that messages can be queued first.
    void restart_unstarted(Map extra) {
        stage_->stop();
        auto stage = make_code2wav_stage(stage_context(std::move(extra)));
        ASSERT_TRUE(stage.has_value()) << stage.error().to_string();
        stage_ = std::move(*stage);
    }

    // Pushes `codes` as chunks of `piece` frames, then stream_done and the payload.
    void push_stream(const std::string& id, const at::Tensor& codes, std::int64_t piece) {
        std::int64_t chunk_id = 0;
        for (std::int64_t begin = 0; begin < codes.size(0); begin += piece) {
            push_chunk(id, chunk_id++,
                       codes_chunk(codes.narrow(0, begin, std::min(piece, codes.size(0) - begin))));
        }
        push_done(id);
        push_payload(id);
    }

    static void expect_same_audio(const std::vector<at::Tensor>& audio,
                                  const std::vector<at::Tensor>& expected, const std::string& id) {
        ASSERT_EQ(audio.size(), expected.size()) << id;
        for (std::size_t i = 0; i < audio.size(); ++i) {
            ASSERT_EQ(audio[i].size(0), expected[i].size(0)) << id << " chunk " << i;
            EXPECT_LE((audio[i] - expected[i]).abs().max().item<float>(), kTolerance)
                << id << " chunk " << i;
        }
    }

    static at::Tensor audio_of(const pipeline::OutgoingMessage& message) {
        OMNI_CHECK(message.kind == pipeline::OutgoingKind::stream && message.chunk != nullptr,
                   "a stream chunk");
        EXPECT_FALSE(message.target.has_value()) << "audio goes to the client";
        const Value* rate = message.chunk->chunk.find("sample_rate");
        EXPECT_TRUE(rate != nullptr && rate->is_int() && rate->as_int() == 24000);
        const Value* audio = message.chunk->chunk.find("audio");
        OMNI_CHECK(audio != nullptr && audio->is_tensor(), "audio is a tensor");
        EXPECT_EQ(audio->as_tensor().dtype(), DType::f32);
        EXPECT_EQ(audio->as_tensor().dim(), 1u);
        return torch_bridge::to_torch(audio->as_tensor()).clone();
    }

    // decode_chunk over code2wav_stream_chunks(frames), called directly on the same weights.
    static std::vector<at::Tensor> reference(const at::Tensor& codes) {
        auto opened = checkpoint::Checkpoint::open(tiny_checkpoint());
        OMNI_CHECK(opened.has_value(), "open the tiny checkpoint");
        auto config = code2wav_config_of((*opened)->config());
        OMNI_CHECK(config.has_value(), "code2wav config");
        const checkpoint::Checkpoint* raw = opened->get();
        auto model =
            Code2Wav::load(*config, [raw](const std::string& name) { return raw->tensor(name); });
        OMNI_CHECK(model.has_value(), "load Code2Wav");
        std::vector<at::Tensor> out;
        for (const Code2WavChunk& chunk :
             code2wav_stream_chunks(codes.size(0), kFirstChunk, kChunk, kLeftContext)) {
            const at::Tensor slice =
                codes.narrow(0, chunk.first_frame(), chunk.frames()).t().unsqueeze(0);
            auto audio = (*model)->decode_chunk(slice, chunk.context);
            OMNI_CHECK(audio.has_value(), "decode_chunk");
            EXPECT_EQ(audio->size(2), chunk_output_samples(*config, chunk));
            out.push_back(audio->reshape({-1}));
        }
        return out;
    }

    std::unique_ptr<pipeline::Scheduler> stage_;
};

TEST(Code2WavStreamChunks, FirstChunkThenChunkSizeWithLeftContext) {
    const auto chunks = code2wav_stream_chunks(47, 10, 25, 25);
    ASSERT_EQ(chunks.size(), 3u);
    EXPECT_EQ(chunks[0].begin, 0);
    EXPECT_EQ(chunks[0].end, 10);
    EXPECT_EQ(chunks[0].context, 0);
    EXPECT_EQ(chunks[1].begin, 10);
    EXPECT_EQ(chunks[1].end, 35);
    EXPECT_EQ(chunks[1].context, 10);
    EXPECT_EQ(chunks[2].begin, 35);
    EXPECT_EQ(chunks[2].end, 47);
    EXPECT_EQ(chunks[2].context, 25);
    EXPECT_TRUE(code2wav_stream_chunks(0, 10, 25, 25).empty());
    EXPECT_EQ(code2wav_stream_chunks(4, 10, 25, 25).size(), 1u);
    // first chunk == chunk size is transformers' chunked_decode.
    const auto same = code2wav_stream_chunks(70, 30, 30, 25);
    const auto hf = code2wav_chunks(70, 30, 25);
    ASSERT_EQ(same.size(), hf.size());
    for (std::size_t i = 0; i < same.size(); ++i) {
        EXPECT_EQ(same[i].begin, hf[i].begin);
        EXPECT_EQ(same[i].end, hf[i].end);
        EXPECT_EQ(same[i].context, hf[i].context);
    }
}

TEST_F(Code2WavStageTest, StreamEqualsDirectChunkedDecode) {
    const std::int64_t frames = 13;  // chunks 3, 4, 4 and a flushed remainder of 2
    const at::Tensor codes = codes_of(frames, 11);
    const std::vector<at::Tensor> expected = reference(codes);
    ASSERT_EQ(expected.size(), 4u);

    // One frame as [16] int32, then two as [2, 16] int64: the first chunk is due and leaves
    // before anything else is sent.
    push_chunk("r", 0, codes_chunk(codes[0].to(at::kInt)));
    push_chunk("r", 1, codes_chunk(codes.narrow(0, 1, 2)));
    std::vector<at::Tensor> audio;
    audio.push_back(audio_of(next()));
    // The rest in uneven pieces, an EOS frame among them, the payload last.
    at::Tensor eos = at::zeros({1, kQuantizers}, at::kLong);
    eos[0][0] = kDefaultCodecEosId;
    push_chunk("r", 2, codes_chunk(codes.narrow(0, 3, 6)));
    push_chunk("r", 3, codes_chunk(at::cat({codes.narrow(0, 9, 3), eos}).to(at::kInt)));
    push_chunk("r", 4, codes_chunk(at::cat({eos, codes.narrow(0, 12, 1)})));
    push_done("r");
    push_payload("r");
    Finished finished = finish("r");
    for (at::Tensor& piece : finished.audio) audio.push_back(piece);
    ASSERT_EQ(finished.last.kind, pipeline::OutgoingKind::result) << finished.last.error.message;

    ASSERT_EQ(audio.size(), expected.size());
    std::int64_t total = 0;
    for (std::size_t i = 0; i < audio.size(); ++i) {
        ASSERT_EQ(audio[i].size(0), expected[i].size(0)) << "chunk " << i;
        EXPECT_LE((audio[i] - expected[i]).abs().max().item<float>(), 1e-5f) << "chunk " << i;
        total += audio[i].size(0);
    }
    EXPECT_EQ(at::cat(audio).size(0), at::cat(expected).size(0));
    EXPECT_GT(at::cat(audio).abs().max().item<float>(), 0.0f) << "silence proves nothing";
    const Value& data = finished.last.result->data;
    EXPECT_EQ(data.find("sample_rate")->as_int(), 24000);
    EXPECT_EQ(data.find("samples")->as_int(), total);
    EXPECT_EQ(data.find("frames")->as_int(), frames);
    EXPECT_EQ(stage_->active_requests(), 0u);
}

TEST_F(Code2WavStageTest, PayloadFirstAndEmptyStream) {
    push_payload("empty");
    at::Tensor eos = at::zeros({kQuantizers}, at::kInt);
    eos[0] = kDefaultCodecEosId;
    push_chunk("empty", 0, codes_chunk(eos));
    push_done("empty");
    Finished finished = finish("empty");
    EXPECT_TRUE(finished.audio.empty());
    ASSERT_EQ(finished.last.kind, pipeline::OutgoingKind::result) << finished.last.error.message;
    EXPECT_EQ(finished.last.result->data.find("samples")->as_int(), 0);
    EXPECT_EQ(finished.last.result->data.find("frames")->as_int(), 0);

    // Fewer frames than the first chunk: one flushed chunk at the end.
    const at::Tensor codes = codes_of(2, 5);
    push_payload("short");
    push_chunk("short", 0, codes_chunk(codes));
    push_done("short");
    finished = finish("short");
    ASSERT_EQ(finished.audio.size(), 1u);
    const std::vector<at::Tensor> expected = reference(codes);
    ASSERT_EQ(expected.size(), 1u);
    ASSERT_EQ(finished.audio[0].size(0), expected[0].size(0));
    EXPECT_LE((finished.audio[0] - expected[0]).abs().max().item<float>(), 1e-5f);
}

TEST_F(Code2WavStageTest, MalformedChunksFailTheirRequestOnly) {
    const at::Tensor good = codes_of(1, 3);
    at::Tensor high = good.clone();
    high[0][5] = 2048;
    at::Tensor negative = good.clone();
    negative[0][0] = -1;
    const std::vector<std::pair<Value, std::string>> cases = {
        {Value(Map{}), "'codes' must be"},
        {Value(Map{{"codes", Value(std::int64_t{3})}}), "'codes' must be"},
        {codes_chunk(codes_of(2, 1).narrow(1, 0, 15)), "not int64 [2, 15]"},
        {codes_chunk(good.to(at::kFloat)), "not float32"},
        {codes_chunk(codes_of(8, 1).reshape({2, 4, kQuantizers})), "[2, 4, 16]"},
        {codes_chunk(high), "quantizer 5 holds 2048"},
        {codes_chunk(negative), "quantizer 0 holds -1"},
    };
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const std::string id = "bad" + std::to_string(i);
        push_chunk(id, 0, cases[i].first);
        pipeline::OutgoingMessage message = next();
        EXPECT_EQ(message.request_id, id);
        ASSERT_EQ(message.kind, pipeline::OutgoingKind::error) << i;
        EXPECT_EQ(message.error.code, ErrorCode::invalid_argument) << message.error.message;
        EXPECT_NE(message.error.message.find(cases[i].second), std::string::npos)
            << message.error.message;
        EXPECT_NE(message.error.message.find("stream chunk 0"), std::string::npos)
            << message.error.message;
        // Later messages of a failed request are dropped.
        push_chunk(id, 1, codes_chunk(codes_of(kFirstChunk, 2)));
        push_done(id);
        push_payload(id);
    }
    // The stage still serves: a good request's only messages are its own.
    push_chunk("good", 0, codes_chunk(good));
    push_done("good");
    push_payload("good");
    Finished finished = finish("good");
    EXPECT_EQ(finished.last.kind, pipeline::OutgoingKind::result) << finished.last.error.message;
    EXPECT_EQ(stage_->active_requests(), 0u);
}

TEST_F(Code2WavStageTest, AbortMidStreamFreesTheState) {
    push_payload("a");
    push_chunk("a", 0, codes_chunk(codes_of(kFirstChunk + 1, 4)));
    pipeline::OutgoingMessage first = next();
    EXPECT_EQ(first.request_id, "a");
    EXPECT_EQ(first.kind, pipeline::OutgoingKind::stream);
    EXPECT_EQ(stage_->active_requests(), 1u);
    stage_->abort("a");
    EXPECT_EQ(stage_->active_requests(), 0u);
    // More of "a" is dropped; "b" behind it finishes and nothing of "a" appears.
    push_chunk("a", 1, codes_chunk(codes_of(2 * kChunk, 4)));
    push_done("a");
    push_chunk("b", 0, codes_chunk(codes_of(kFirstChunk, 6)));
    push_done("b");
    push_payload("b");
    Finished finished = finish("b");
    EXPECT_EQ(finished.audio.size(), 1u);
    EXPECT_EQ(finished.last.kind, pipeline::OutgoingKind::result) << finished.last.error.message;
    EXPECT_EQ(stage_->active_requests(), 0u);
}

TEST_F(Code2WavStageTest, ConcurrentStreamsBatchedEqualEachAlone) {
    // Six streams of different lengths (a 2-frame one is only a flushed remainder), at most four
    // per forward: batches mix first chunks (3 frames), the 2-frame flush and later chunks with
    // context (6 frames), right-padded to the longest.
    restart_unstarted({{"max_batch_streams", Value(4)}});
    const std::vector<std::int64_t> lengths = {13, 7, 2, 10, 5, 16};
    std::vector<at::Tensor> codes;
    std::set<std::string> ids;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
        codes.push_back(codes_of(lengths[i], 100 + i));
        ids.insert("s" + std::to_string(i));
    }
    // Interleaved arrival: one piece of every stream in turn.
    for (std::int64_t begin = 0; begin < 16; begin += 5) {
        for (std::size_t i = 0; i < lengths.size(); ++i) {
            if (begin >= lengths[i]) continue;
            push_chunk("s" + std::to_string(i), begin / 5,
                       codes_chunk(codes[i].narrow(0, begin,
                                                   std::min<std::int64_t>(5, lengths[i] - begin))));
        }
    }
    for (const std::string& id : ids) {
        push_done(id);
        push_payload(id);
    }
    ASSERT_TRUE(stage_->start().has_value());
    std::vector<std::int64_t> batch_rows;
    std::map<std::string, Finished> finished = collect(ids, &batch_rows);
    for (std::size_t i = 0; i < lengths.size(); ++i) {
        const std::string id = "s" + std::to_string(i);
        ASSERT_EQ(finished[id].last.kind, pipeline::OutgoingKind::result)
            << finished[id].last.error.message;
        expect_same_audio(finished[id].audio, reference(codes[i]), id);
        EXPECT_EQ(finished[id].last.result->data.find("frames")->as_int(), lengths[i]);
    }
    ASSERT_FALSE(batch_rows.empty());
    EXPECT_EQ(*std::max_element(batch_rows.begin(), batch_rows.end()), 4);
    EXPECT_GE(*std::min_element(batch_rows.begin(), batch_rows.end()), 1);
    EXPECT_EQ(stage_->active_requests(), 0u);

    // max_batch_streams 1: one row per forward, the same audio.
    restart_unstarted({{"max_batch_streams", Value(1)}});
    for (std::size_t i = 0; i < 3; ++i) push_stream("s" + std::to_string(i), codes[i], 4);
    ASSERT_TRUE(stage_->start().has_value());
    batch_rows.clear();
    finished = collect({"s0", "s1", "s2"}, &batch_rows);
    for (std::size_t i = 0; i < 3; ++i) {
        const std::string id = "s" + std::to_string(i);
        expect_same_audio(finished[id].audio, reference(codes[i]), id);
    }
    for (std::int64_t rows : batch_rows) EXPECT_EQ(rows, 1);
}

TEST_F(Code2WavStageTest, AbortOneBatchedStreamOthersContinue) {
    restart_unstarted({});
    const at::Tensor a = codes_of(11, 21);
    const at::Tensor b = codes_of(11, 22);
    const at::Tensor c = codes_of(11, 23);
    // The first chunks of the three leave from one forward.
    push_chunk("a", 0, codes_chunk(a.narrow(0, 0, kFirstChunk)));
    push_chunk("b", 0, codes_chunk(b.narrow(0, 0, kFirstChunk)));
    push_chunk("c", 0, codes_chunk(c.narrow(0, 0, kFirstChunk)));
    ASSERT_TRUE(stage_->start().has_value());
    std::map<std::string, std::vector<at::Tensor>> audio;
    for (int i = 0; i < 3; ++i) {
        pipeline::OutgoingMessage message = next();
        ASSERT_EQ(message.kind, pipeline::OutgoingKind::stream);
        EXPECT_EQ(message.chunk->metadata.find("batch_rows")->as_int(), 3);
        audio[message.request_id].push_back(audio_of(message));
    }
    ASSERT_EQ(audio.size(), 3u);
    EXPECT_EQ(stage_->active_requests(), 3u);
    stage_->abort("b");
    EXPECT_EQ(stage_->active_requests(), 2u);
    // The rest of all three; nothing of "b" leaves and "a" and "c" are unchanged.
    for (const auto& [id, codes] : {std::pair{"a", a}, std::pair{"b", b}, std::pair{"c", c}}) {
        push_chunk(id, 1, codes_chunk(codes.narrow(0, kFirstChunk, 11 - kFirstChunk)));
        push_done(id);
        push_payload(id);
    }
    std::map<std::string, Finished> finished = collect({"a", "c"});
    for (const auto& [id, codes] : {std::pair{"a", a}, std::pair{"c", c}}) {
        ASSERT_EQ(finished[id].last.kind, pipeline::OutgoingKind::result)
            << finished[id].last.error.message;
        std::vector<at::Tensor> all = audio[id];
        for (at::Tensor& piece : finished[id].audio) all.push_back(piece);
        expect_same_audio(all, reference(codes), id);
    }
    EXPECT_EQ(stage_->active_requests(), 0u);
    EXPECT_EQ(stage_->outbox().size(), 0u);
}

TEST_F(Code2WavStageTest, MalformedChunkInOneStreamLeavesTheBatchAlone) {
    restart_unstarted({});
    const at::Tensor a = codes_of(9, 31);
    const at::Tensor c = codes_of(6, 33);
    at::Tensor bad = codes_of(2, 32);
    bad[1][7] = 4096;
    // "x" has a good first chunk pending when its malformed second chunk arrives: it fails
    // alone, before any forward, and the others' batches go on without it.
    push_chunk("a", 0, codes_chunk(a.narrow(0, 0, 4)));
    push_chunk("x", 0, codes_chunk(codes_of(kFirstChunk, 34)));
    push_chunk("c", 0, codes_chunk(c.narrow(0, 0, 4)));
    push_chunk("x", 1, codes_chunk(bad));
    push_chunk("a", 1, codes_chunk(a.narrow(0, 4, 5)));
    push_chunk("x", 2, codes_chunk(codes_of(kChunk, 35)));
    push_chunk("c", 1, codes_chunk(c.narrow(0, 4, 2)));
    for (const char* id : {"a", "x", "c"}) {
        push_done(id);
        push_payload(id);
    }
    ASSERT_TRUE(stage_->start().has_value());
    std::map<std::string, Finished> finished = collect({"a", "x", "c"});
    ASSERT_EQ(finished["x"].last.kind, pipeline::OutgoingKind::error);
    EXPECT_EQ(finished["x"].last.error.code, ErrorCode::invalid_argument);
    EXPECT_NE(finished["x"].last.error.message.find("stream chunk 1"), std::string::npos)
        << finished["x"].last.error.message;
    EXPECT_NE(finished["x"].last.error.message.find("quantizer 7 holds 4096"), std::string::npos)
        << finished["x"].last.error.message;
    EXPECT_TRUE(finished["x"].audio.empty());
    for (const auto& [id, codes] : {std::pair{"a", a}, std::pair{"c", c}}) {
        ASSERT_EQ(finished[id].last.kind, pipeline::OutgoingKind::result)
            << finished[id].last.error.message;
        expect_same_audio(finished[id].audio, reference(codes), id);
    }
    EXPECT_EQ(stage_->active_requests(), 0u);
}

TEST(Code2WavStageFactory, ArgumentErrorsNameTheArgument) {
    auto expect_error = [](Map args, ErrorCode code, const std::string& needle) {
        pipeline::StageContext context = stage_context(std::move(args));
        auto stage = make_code2wav_stage(context);
        ASSERT_FALSE(stage.has_value()) << needle;
        EXPECT_EQ(stage.error().code, code) << stage.error().message;
        EXPECT_NE(stage.error().message.find(needle), std::string::npos) << stage.error().message;
    };
    expect_error({{"model_path", Value(std::string())}}, ErrorCode::invalid_argument,
                 "'model_path' is required");
    expect_error({{"dtype", Value(std::string("float16"))}}, ErrorCode::invalid_argument,
                 "'dtype'");
    expect_error({{"chunk_frames", Value(0)}}, ErrorCode::invalid_argument, "'chunk_frames'");
    expect_error({{"first_chunk_frames", Value(-1)}}, ErrorCode::invalid_argument,
                 "'first_chunk_frames'");
    expect_error({{"left_context_frames", Value(-1)}}, ErrorCode::invalid_argument,
                 "'left_context_frames'");
    expect_error({{"max_batch_streams", Value(0)}}, ErrorCode::invalid_argument,
                 "'max_batch_streams'");
    expect_error({{"max_batch_streams", Value(257)}}, ErrorCode::invalid_argument,
                 "'max_batch_streams'");
    expect_error({{"load_format", Value(std::string("pt"))}}, ErrorCode::invalid_argument,
                 "'load_format'");
    expect_error({{"model_path", Value((tiny_checkpoint() / "absent").string())}},
                 ErrorCode::not_found, "code2wav stage 'code2wav'");
}

TEST(Code2WavStageFactory, DummyWeightsAndBfloat16Load) {
    for (const char* dtype : {"float32", "bfloat16"}) {
        auto stage = make_code2wav_stage(stage_context(
            {{"load_format", Value(std::string("dummy"))}, {"dtype", Value(std::string(dtype))}}));
        ASSERT_TRUE(stage.has_value()) << stage.error().to_string();
    }
}

TEST(Code2WavStageFactory, RegistersOnce) {
    Registry registry;
    ASSERT_TRUE(register_code2wav_stage(registry).has_value());
    ASSERT_TRUE(register_code2wav_stage(registry).has_value());
    auto entry = registry.find(FunctionKind::factory, "qwen3_omni.code2wav");
    ASSERT_TRUE(entry.has_value());
    ASSERT_EQ(entry->injectable_args.size(), 1u);
    EXPECT_EQ(entry->injectable_args[0], "model_path");
}

}  // namespace
}  // namespace omnirt::models::qwen3_omni
