#include "proto/messages.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "proto/random_values.h"
#include "proto/value_codec.h"

namespace omnirt::proto {
namespace {

using testing::RandomValues;
using Bytes8 = std::vector<std::uint8_t>;

Bytes8 encode_ok(const ControlMessage& message) {
    auto bytes = encode_message(message);
    EXPECT_TRUE(bytes.has_value()) << bytes.error().to_string();
    return bytes.has_value() ? *bytes : Bytes8{};
}

PayloadHeader random_header(RandomValues& random) {
    auto encoded = encode_payload(random.payload());
    EXPECT_TRUE(encoded.has_value());
    return encoded->header;
}

// One random message of every type, `round` picking the optional fields.
std::vector<ControlMessage> random_messages(RandomValues& random) {
    std::vector<ControlMessage> out;
    out.push_back(SubmitMessage{
        .request_id = random.string(),
        .payload = random.payload(),
        .deadline_unix_ms = random.chance(0.5) ? std::optional(random.integer()) : std::nullopt});
    DataReadyMessage data_ready{.request_id = random.string(),
                                .from_stage = random.string(),
                                .to_stage = random.string(),
                                .relay_metadata = random.value(2, false)};
    switch (random.below(3)) {
        case 0:
            data_ready.header = random_header(random);
            break;
        case 1:
            data_ready.header = random_header(random);
            data_ready.chunk_id = random.integer();
            break;
        default:
            data_ready.is_done = random.chance(0.5);
            if (random.chance(0.5)) data_ready.error = random.string();
    }
    out.push_back(std::move(data_ready));
    CompleteMessage complete{.request_id = random.string(), .from_stage = random.string()};
    complete.ok = random.chance(0.5);
    if (complete.ok) {
        complete.result = random.payload();
    } else {
        complete.error = Error{static_cast<ErrorCode>(random.below(12)), random.string()};
    }
    out.push_back(std::move(complete));
    out.push_back(StreamMessage{.request_id = random.string(),
                                .from_stage = random.string(),
                                .chunk_index = random.integer(),
                                .chunk = random.value(3),
                                .metadata = random.value(2)});
    out.push_back(AbortMessage{.request_id = random.string(), .reason = random.string()});
    out.push_back(ShutdownMessage{.reason = random.string()});
    out.push_back(ProfilerStartMessage{.trace_path_template = random.string()});
    out.push_back(ProfilerStopMessage{});
    out.push_back(HeartbeatMessage{.stage = random.string(),
                                   .pid = random.integer(),
                                   .queue_depth = random.integer(),
                                   .active_requests = random.integer(),
                                   .processed = random.integer(),
                                   .compute_ns = random.integer(),
                                   .edges = {proto::EdgeTraffic{.target = random.string(),
                                                                .transfers = 3,
                                                                .bytes = 4096,
                                                                .write_ns = 7,
                                                                .delivery_ns = 11},
                                             proto::EdgeTraffic{.target = random.string()}},
                                   .kv_blocks_used = 5,
                                   .kv_blocks_total = 64,
                                   .paused_requests = 1,
                                   .generated_tokens = 1234});
    out.push_back(PauseMessage{.request_id = random.string() + "r", .paused = random.chance(0.5)});
    return out;
}

TEST(Messages, EveryTypeRoundTrips) {
    RandomValues random(11);
    for (int i = 0; i < 150; ++i) {
        for (const ControlMessage& message : random_messages(random)) {
            Bytes8 bytes = encode_ok(message);
            auto decoded = decode_message(bytes);
            ASSERT_TRUE(decoded.has_value())
                << message_type_name(message) << ": " << decoded.error().to_string();
            EXPECT_EQ(decoded->index(), message.index());
            EXPECT_TRUE(*decoded == message) << message_type_name(message) << " round " << i;
            EXPECT_EQ(encode_ok(*decoded), bytes);
        }
    }
}

TEST(Messages, TypeNamesAndRequestIds) {
    EXPECT_EQ(message_type_name(DataReadyMessage{}), "data_ready");
    EXPECT_EQ(message_type_name(ProfilerStopMessage{}), "profiler_stop");
    EXPECT_EQ(message_type_name(HeartbeatMessage{}), "heartbeat");
    EXPECT_EQ(request_id_of(HeartbeatMessage{.stage = "s"}), "");
    EXPECT_EQ(request_id_of(AbortMessage{.request_id = "r1"}), "r1");
    EXPECT_EQ(request_id_of(ShutdownMessage{.reason = "bye"}), "");
}

TEST(Messages, EnvelopeLayout) {
    auto root = decode_value(encode_ok(AbortMessage{.request_id = "r", .reason = "x"}));
    ASSERT_TRUE(root.has_value());
    EXPECT_EQ(*root, Value(Map{{"v", 1}, {"type", "abort"}, {"request_id", "r"}, {"reason", "x"}}));
    // Unset optionals are omitted; the header travels as a nested map with the tree as bin.
    auto data_ready = decode_value(encode_ok(
        DataReadyMessage{.request_id = "r", .from_stage = "a", .to_stage = "b", .is_done = true}));
    ASSERT_TRUE(data_ready.has_value());
    EXPECT_EQ(data_ready->find("chunk_id"), nullptr);
    EXPECT_EQ(data_ready->find("header"), nullptr);
    EXPECT_EQ(*data_ready->find("is_done"), Value(true));
    PayloadHeader header{.tree = {0x80}, .tensor_info = {}, .buffer_bytes = 0};
    header.tensor_info.push_back(TensorInfo{.path = {std::string("data"), std::int64_t{2}},
                                            .dtype = DType::bf16,
                                            .shape = {2, 3},
                                            .offset = 64,
                                            .nbytes = 12});
    header.buffer_bytes = 76;
    auto with_header = decode_value(encode_ok(DataReadyMessage{.header = header}));
    const Value* wire = with_header->find("header");
    ASSERT_NE(wire, nullptr);
    EXPECT_EQ(*wire->find("tree"), Value(Bytes{{0x80}}));
    EXPECT_EQ(*wire->find("buffer_bytes"), Value(76));
    EXPECT_EQ(wire->find("tensor_info")->as_list()[0], Value(Map{{"path", List{"data", 2}},
                                                                 {"dtype", "bfloat16"},
                                                                 {"shape", List{2, 3}},
                                                                 {"offset", 64},
                                                                 {"nbytes", 12}}));
}

// Encodes a hand-built message map (Values can express any malformed message).
std::string decode_error(const Value& message) {
    auto bytes = encode_value(message);
    EXPECT_TRUE(bytes.has_value());
    auto decoded = decode_message(*bytes);
    if (decoded.has_value()) return "<decoded " + std::string(message_type_name(*decoded)) + ">";
    return decoded.error().message;
}

Value valid_data_ready() {
    return Map{{"v", 1},          {"type", "data_ready"}, {"request_id", "r"}, {"from_stage", "a"},
               {"to_stage", "b"}, {"is_done", false}};
}

TEST(Messages, FieldErrorsNameTheFieldAndKinds) {
    EXPECT_EQ(decode_error(valid_data_ready()), "<decoded data_ready>");
    Value message = valid_data_ready();
    message["chunk_id"] = "seven";
    EXPECT_EQ(decode_error(message), "data_ready.chunk_id: expected int, got string");
    message = valid_data_ready();
    message.as_map().erase("to_stage");
    EXPECT_EQ(decode_error(message), "data_ready.to_stage: missing field (expected string)");
    message = valid_data_ready();
    message["header"] = Map{{"tree", Bytes{}}, {"tensor_info", List{Map{}}}, {"buffer_bytes", 0}};
    EXPECT_EQ(decode_error(message),
              "data_ready.header.tensor_info[0].path: missing field (expected list)");
    message["header"] = Map{
        {"tree", Bytes{}}, {"tensor_info", List{Map{{"path", List{1.5}}}}}, {"buffer_bytes", 0}};
    EXPECT_EQ(decode_error(message),
              "data_ready.header.tensor_info[0].path[0]: expected string or int, got float");
    message["header"] = Map{{"tree", "not bytes"}, {"tensor_info", List{}}, {"buffer_bytes", 0}};
    EXPECT_EQ(decode_error(message), "data_ready.header.tree: expected bytes, got string");
    message["header"] = Map{{"tree", Bytes{}},
                            {"tensor_info", List{Map{{"path", List{}},
                                                     {"dtype", "float99"},
                                                     {"shape", List{}},
                                                     {"offset", 0},
                                                     {"nbytes", 0}}}},
                            {"buffer_bytes", 0}};
    EXPECT_NE(decode_error(message).find("data_ready.header.tensor_info[0].dtype: unknown dtype "
                                         "'float99'"),
              std::string::npos);
    message["header"] = Map{{"tree", Bytes{}}, {"tensor_info", List{}}, {"buffer_bytes", -1}};
    EXPECT_EQ(decode_error(message),
              "data_ready.header.buffer_bytes: expected a non-negative int, got -1");
    EXPECT_EQ(decode_error(Map{{"v", 1}, {"type", "submit"}, {"request_id", "r"}, {"payload", 3}}),
              "submit.payload: expected map, got int");
    EXPECT_EQ(decode_error(Map{{"v", 1},
                               {"type", "submit"},
                               {"request_id", "r"},
                               {"payload", Map{{"request_id", "r"}, {"request", List{}}}}}),
              "submit.payload.request: expected map, got list");
    EXPECT_EQ(decode_error(Map{{"v", 1},
                               {"type", "complete"},
                               {"request_id", "r"},
                               {"from_stage", "s"},
                               {"ok", false},
                               {"error", Map{{"code", "aborted"}}}}),
              "complete.error.message: missing field (expected string)");
}

TEST(Messages, EnvelopeErrors) {
    EXPECT_EQ(decode_error(Map{{"v", 2}, {"type", "abort"}}),
              "unsupported wire version 2 (this build speaks version 1)");
    EXPECT_EQ(decode_error(Map{{"type", "abort"}}), "message.v: missing field (expected int)");
    EXPECT_EQ(decode_error(Map{{"v", 1}, {"type", "teleport"}}), "unknown message type 'teleport'");
    EXPECT_EQ(decode_error(Map{{"v", 1}, {"type", 5}}), "message.type: expected string, got int");
    EXPECT_EQ(decode_error(List{1, "abort"}), "control message: expected map, got list");
    auto truncated = decode_message(Bytes8{0x82, 0xa1, 'v'});
    ASSERT_FALSE(truncated.has_value());
    EXPECT_EQ(truncated.error().code, ErrorCode::data_loss);
    EXPECT_NE(truncated.error().message.find("control message: truncated input"), std::string::npos)
        << truncated.error().message;
}

TEST(Messages, UnknownFieldsAreIgnoredAndNilOptionalsAreUnset) {
    Value message = valid_data_ready();
    message["added_in_v1_5"] = List{1, 2};
    message["chunk_id"] = Value();
    message["error"] = Value();
    auto bytes = encode_value(message);
    auto decoded = decode_message(*bytes);
    ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
    const auto& data_ready = std::get<DataReadyMessage>(*decoded);
    EXPECT_FALSE(data_ready.chunk_id.has_value());
    EXPECT_FALSE(data_ready.error.has_value());
    EXPECT_TRUE(data_ready.relay_metadata.is_null());
}

TEST(Messages, HeartbeatTrafficFieldsAreOptionalAndChecked) {
    // A heartbeat of an older stage (no compute_ns, no edges) still decodes.
    Value old = Map{{"v", 1},           {"type", "heartbeat"},  {"stage", "a"},  {"pid", 1},
                    {"queue_depth", 2}, {"active_requests", 3}, {"processed", 4}};
    auto bytes = encode_value(old);
    ASSERT_TRUE(bytes.has_value());
    auto decoded = decode_message(*bytes);
    ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
    const auto& heartbeat = std::get<HeartbeatMessage>(*decoded);
    EXPECT_EQ(heartbeat.processed, 4);
    EXPECT_EQ(heartbeat.compute_ns, 0);
    EXPECT_TRUE(heartbeat.edges.empty());

    // Malformed traffic fields name the field.
    auto with = [&](const char* key, Value value) {
        Value message = old;
        message[key] = std::move(value);
        return decode_error(message);
    };
    EXPECT_NE(with("edges", 5).find("heartbeat.edges: expected list"), std::string::npos)
        << with("edges", 5);
    EXPECT_NE(with("edges", List{"x"}).find("edges[0]"), std::string::npos)
        << with("edges", List{"x"});
    Value negative = List{
        Map{{"target", "b"}, {"transfers", -1}, {"bytes", 0}, {"write_ns", 0}, {"delivery_ns", 0}}};
    EXPECT_NE(with("edges", negative).find("transfers"), std::string::npos)
        << with("edges", negative);
    EXPECT_NE(with("compute_ns", "fast").find("compute_ns"), std::string::npos);
}

TEST(Messages, PauseIsCheckedFieldByField) {
    auto bytes = encode_message(PauseMessage{.request_id = "r1", .paused = false});
    ASSERT_TRUE(bytes.has_value());
    auto root = decode_value(*bytes);
    ASSERT_TRUE(root.has_value());
    EXPECT_EQ(*root,
              Value(Map{{"v", 1}, {"type", "pause"}, {"request_id", "r1"}, {"paused", false}}));
    EXPECT_EQ(request_id_of(PauseMessage{.request_id = "r1"}), "r1");
    EXPECT_EQ(message_type_name(PauseMessage{}), "pause");

    const Value valid = Map{{"v", 1}, {"type", "pause"}, {"request_id", "r"}, {"paused", true}};
    auto with = [&](const char* key, Value value) {
        Value message = valid;
        message[key] = std::move(value);
        return decode_error(message);
    };
    auto without = [&](const char* key) {
        Map message = valid.as_map();
        message.erase(key);
        return decode_error(Value(std::move(message)));
    };
    EXPECT_EQ(with("paused", 1), "pause.paused: expected bool, got int");
    EXPECT_EQ(with("paused", "yes"), "pause.paused: expected bool, got string");
    EXPECT_EQ(with("paused", Value()), "pause.paused: expected bool, got null");
    EXPECT_EQ(without("paused"), "pause.paused: missing field (expected bool)");
    EXPECT_EQ(with("request_id", 7), "pause.request_id: expected string, got int");
    EXPECT_EQ(with("request_id", ""), "pause.request_id: empty");
    EXPECT_EQ(without("request_id"), "pause.request_id: missing field (expected string)");
}

TEST(Messages, HeartbeatEngineFieldsAreOptionalAndNonNegative) {
    Value old = Map{{"v", 1},           {"type", "heartbeat"},  {"stage", "a"},  {"pid", 1},
                    {"queue_depth", 2}, {"active_requests", 3}, {"processed", 4}};
    auto decoded = decode_message(*encode_value(old));
    ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
    const auto& heartbeat = std::get<HeartbeatMessage>(*decoded);
    EXPECT_EQ(heartbeat.kv_blocks_used, 0);
    EXPECT_EQ(heartbeat.paused_requests, 0);
    for (const char* key :
         {"kv_blocks_used", "kv_blocks_total", "paused_requests", "generated_tokens"}) {
        Value negative = old;
        negative[key] = -3;
        EXPECT_EQ(decode_error(negative),
                  std::string("heartbeat.") + key + ": expected a non-negative int, got -3");
        Value text = old;
        text[key] = "many";
        EXPECT_EQ(decode_error(text),
                  std::string("heartbeat.") + key + ": expected int, got string");
    }
}

TEST(Messages, UnknownErrorCodeBecomesInternal) {
    Value message = Map{{"v", 1},
                        {"type", "complete"},
                        {"request_id", "r"},
                        {"from_stage", "s"},
                        {"ok", false},
                        {"error", Map{{"code", "quota_melted"}, {"message", "boom"}}}};
    auto decoded = decode_message(*encode_value(message));
    ASSERT_TRUE(decoded.has_value());
    const auto& complete = std::get<CompleteMessage>(*decoded);
    EXPECT_EQ(complete.error.code, ErrorCode::internal);
    EXPECT_EQ(complete.error.message, "(error code 'quota_melted') boom");
}

TEST(Messages, TruncationAndByteFlipsNeverCrash) {
    RandomValues random(12);
    for (int round = 0; round < 8; ++round) {
        for (const ControlMessage& message : random_messages(random)) {
            Bytes8 bytes = encode_ok(message);
            for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
                auto decoded = decode_message(std::span(bytes.data(), cut));
                ASSERT_FALSE(decoded.has_value());
                EXPECT_EQ(decoded.error().code, ErrorCode::data_loss) << decoded.error().message;
            }
            for (int flip = 0; flip < 200; ++flip) {
                Bytes8 mutated = bytes;
                mutated[random.below(mutated.size())] ^=
                    static_cast<std::uint8_t>(1 + random.below(255));
                auto decoded = decode_message(mutated);
                if (decoded.has_value()) {
                    auto again = decode_message(encode_ok(*decoded));
                    ASSERT_TRUE(again.has_value()) << again.error().to_string();
                    EXPECT_TRUE(*again == *decoded);
                } else {
                    EXPECT_FALSE(decoded.error().message.empty());
                }
            }
        }
    }
}

TEST(Messages, ControlLimitsAreStricter) {
    Value deep = Value();
    for (int i = 0; i < 40; ++i) deep = List{std::move(deep)};
    StreamMessage stream{.request_id = "r", .from_stage = "s", .chunk = deep};
    Bytes8 bytes = encode_ok(stream);
    auto strict = decode_message(bytes);
    ASSERT_FALSE(strict.has_value());
    EXPECT_NE(strict.error().message.find("nested deeper than 32"), std::string::npos);
    EXPECT_TRUE(decode_message(bytes, DecodeLimits{}).has_value());
}

TEST(Messages, EncodingRefusesDeviceLessTensors) {
    StreamMessage stream{.request_id = "r", .from_stage = "s", .chunk = Value(Tensor())};
    auto bytes = encode_message(stream);
    ASSERT_FALSE(bytes.has_value());
    EXPECT_EQ(bytes.error().message, "cannot encode an undefined tensor");
}

// Not a pass/fail check (timings vary by machine and sanitizer): prints the cost of the hot
// control-plane path so regressions are visible in the test log.
TEST(Messages, SmallDataReadyTiming) {
    StagePayload payload{
        .request_id = "req-000123",
        .request = {},
        .data = Map{{"hidden", Tensor::empty({16, 64}, DType::bf16).value()}, {"step", 3}}};
    auto encoded = encode_payload(payload).value();
    DataReadyMessage message{.request_id = "req-000123",
                             .from_stage = "thinker",
                             .to_stage = "talker",
                             .relay_metadata = Map{{"slot", 7}, {"credit", 1}},
                             .header = encoded.header};
    constexpr int kIterations = 20000;
    Bytes8 out;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kIterations; ++i) {
        out.clear();
        ASSERT_TRUE(encode_message(message, out).has_value());
    }
    auto middle = std::chrono::steady_clock::now();
    for (int i = 0; i < kIterations; ++i) ASSERT_TRUE(decode_message(out).has_value());
    auto end = std::chrono::steady_clock::now();
    using us = std::chrono::duration<double, std::micro>;
    std::printf("data_ready of %zu bytes: encode %.2f us, decode %.2f us\n", out.size(),
                us(middle - start).count() / kIterations, us(end - middle).count() / kIterations);
}

}  // namespace
}  // namespace omnirt::proto
