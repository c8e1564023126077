// The seed corpora of the proto fuzzers (fuzz/corpus/{value,message,payload}/).
//
// Regenerate them with
//   OMNIRT_WRITE_FUZZ_CORPUS=1 ./build/tests/proto_fuzz_corpus_test
// (run from anywhere; the files go under $OMNIRT_SOURCE_DIR or the source tree this test was
// built from). Under ctest the test checks that every committed seed still decodes, so a wire
// change that invalidates the seeds fails here rather than silently weakening the fuzzers.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "proto/messages.h"
#include "proto/payload_codec.h"
#include "proto/value_codec.h"

namespace omnirt::proto {
namespace {

namespace fs = std::filesystem;
using Bytes8 = std::vector<std::uint8_t>;

fs::path corpus_root() {
    const char* source = std::getenv("OMNIRT_SOURCE_DIR");
    // CMake compiles with absolute paths: tests/proto/<this file> -> the source root.
    const fs::path root = source != nullptr
                              ? fs::path(source)
                              : fs::path(__FILE__).parent_path().parent_path().parent_path();
    return root / "fuzz" / "corpus";
}

// The payload fuzzer's input: [u32 LE header size][header wire form][flat buffer].
Bytes8 payload_fuzz_input(const EncodedPayload& encoded) {
    Bytes8 header;
    EXPECT_TRUE(encode_payload_header(encoded.header, header).has_value());
    Bytes8 out;
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(header.size() >> (8 * i)));
    out.insert(out.end(), header.begin(), header.end());
    Tensor buffer = make_flat_buffer(encoded).value();
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(buffer.data());
    out.insert(out.end(), bytes, bytes + encoded.header.buffer_bytes);
    return out;
}

StagePayload small_payload() {
    return StagePayload{
        .request_id = "req-1",
        .request = {.inputs =
                        Map{{"prompt", "hello"},
                            {"image", Tensor::from_vector<std::uint8_t>({1, 2, 3, 4}, {2, 2})}},
                    .params = Map{{"temperature", 0.7}, {"max_tokens", 16}},
                    .metadata = Map{}},
        .data = Map{{"hidden", Tensor::from_vector<float>({0.5F, -1.0F, 2.0F}, {1, 3})},
                    {"ids", List{1, 2, 3}},
                    {"mask", Tensor::from_vector<bool>({true, false})}}};
}

std::map<std::string, std::vector<Bytes8>> seeds() {
    std::map<std::string, std::vector<Bytes8>> out;
    auto& values = out["value"];
    values.push_back(
        encode_value(Value(Map{{"a", 1}, {"b", List{true, Value(), 2.5, "s"}}})).value());
    values.push_back(
        encode_value(Value(List{Bytes{{1, 2, 3}}, std::int64_t{-1} << 40, "日本"})).value());
    values.push_back(
        encode_value(Value(Tensor::from_vector<std::int32_t>({1, 2, 3, 4, 5, 6}, {2, 3}))).value());
    values.push_back(
        encode_value(Value(Map{{"t", Tensor::empty({0, 2}, DType::bf16).value()}})).value());
    values.push_back(encode_value(Value(List{Map{{"x", List{1.5, -0.0}}}, Value(), Map{},
                                             std::numeric_limits<double>::infinity()}))
                         .value());

    StagePayload payload = small_payload();
    EncodedPayload encoded = encode_payload(payload).value();
    auto& messages = out["message"];
    for (const ControlMessage& message : std::vector<ControlMessage>{
             SubmitMessage{
                 .request_id = "req-1", .payload = payload, .deadline_unix_ms = 1700000000000},
             DataReadyMessage{.request_id = "req-1",
             .from_stage = "thinker",
             .to_stage = "talker",
             .relay_metadata = Map{{"slot", 3}},
             .header = encoded.header,
             .chunk_id = 4},
             DataReadyMessage{.request_id = "req-1",
             .from_stage = "a",
             .to_stage = "b",
             .is_done = true,
             .error = "stage failed"},
             CompleteMessage{
                 .request_id = "req-1", .from_stage = "decode", .ok = true, .result = payload},
             CompleteMessage{.request_id = "req-1",
             .from_stage = "decode",
             .ok = false,
             .error = Error{ErrorCode::aborted, "client went away"}},
             StreamMessage{.request_id = "req-1",
             .from_stage = "talker",
             .chunk_index = 2,
             .chunk = Tensor::from_vector<std::int64_t>({7, 8}),
             .metadata = Map{{"final", false}}},
             AbortMessage{.request_id = "req-1", .reason = "cancelled"},
             ShutdownMessage{.reason = "bye"},
             ProfilerStartMessage{.trace_path_template = "/tmp/trace-{stage}.json"},
             ProfilerStopMessage{},
             HeartbeatMessage{.stage = "thinker", .pid = 42, .queue_depth = 3}}) {
        messages.push_back(encode_message(message).value());
    }

    auto& payloads = out["payload"];
    payloads.push_back(payload_fuzz_input(encoded));
    payloads.push_back(
        payload_fuzz_input(encode_blob(List{Tensor::from_vector<float>({1, 2})},
                                       Map{{"codes", Tensor::from_vector<std::int16_t>({3})}})
                               .value()));
    payloads.push_back(payload_fuzz_input(
        encode_payload(StagePayload{.request_id = "r", .request = {}, .data = "text only"})
            .value()));
    return out;
}

TEST(FuzzCorpus, WriteSeedsOnRequest) {
    if (std::getenv("OMNIRT_WRITE_FUZZ_CORPUS") == nullptr) {
        GTEST_SKIP() << "set OMNIRT_WRITE_FUZZ_CORPUS=1 to (re)write fuzz/corpus";
    }
    for (const auto& [name, inputs] : seeds()) {
        const fs::path dir = corpus_root() / name;
        fs::create_directories(dir);
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            std::ofstream file(dir / ("seed_" + std::to_string(i)), std::ios::binary);
            file.write(reinterpret_cast<const char*>(inputs[i].data()),
                       static_cast<std::streamsize>(inputs[i].size()));
            ASSERT_TRUE(file.good()) << dir;
        }
    }
}

Bytes8 read_file(const fs::path& path) {
    std::ifstream file(path, std::ios::binary);
    return Bytes8(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

TEST(FuzzCorpus, CommittedSeedsStillDecode) {
    const fs::path root = corpus_root();
    if (!fs::exists(root / "message")) GTEST_SKIP() << "no corpus at " << root;
    int checked = 0;
    for (const auto& entry : fs::directory_iterator(root / "value")) {
        auto value = decode_value(read_file(entry.path()));
        EXPECT_TRUE(value.has_value()) << entry.path() << ": " << value.error().to_string();
        ++checked;
    }
    for (const auto& entry : fs::directory_iterator(root / "message")) {
        auto message = decode_message(read_file(entry.path()));
        EXPECT_TRUE(message.has_value()) << entry.path() << ": " << message.error().to_string();
        ++checked;
    }
    for (const auto& entry : fs::directory_iterator(root / "payload")) {
        Bytes8 input = read_file(entry.path());
        ASSERT_GE(input.size(), 4u);
        std::uint32_t size =
            input[0] | input[1] << 8 | input[2] << 16 | static_cast<std::uint32_t>(input[3]) << 24;
        ASSERT_LE(size, input.size() - 4);
        auto header = decode_payload_header(std::span(input.data() + 4, size));
        ASSERT_TRUE(header.has_value()) << entry.path() << ": " << header.error().to_string();
        const std::size_t buffer_size = input.size() - 4 - size;
        Tensor buffer = Tensor::empty({static_cast<std::int64_t>(buffer_size)}, DType::u8).value();
        if (buffer_size > 0)
            std::memcpy(buffer.mutable_data(), input.data() + 4 + size, buffer_size);
        EXPECT_TRUE(decode_payload(*header, buffer).has_value() ||
                    decode_blob(*header, buffer).has_value())
            << entry.path();
        ++checked;
    }
    EXPECT_GE(checked, 10);
}

}  // namespace
}  // namespace omnirt::proto
