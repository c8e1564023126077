// The head <-> node messages (runner/node_protocol.h): round trips and hostile input.
#include "runner/node_protocol.h"

#include <gtest/gtest.h>

#include "core/value.h"
#include "proto/value_codec.h"

namespace omnirt::runner::node {
namespace {

NodeMessage round_trip(const NodeMessage& message) {
    auto bytes = encode_node_message(message);
    EXPECT_TRUE(bytes.has_value());
    auto decoded = decode_node_message(*bytes);
    EXPECT_TRUE(decoded.has_value()) << decoded.error().to_string();
    return *decoded;
}

std::string decode_error(const Value& value) {
    auto bytes = proto::encode_value(value);
    EXPECT_TRUE(bytes.has_value());
    auto decoded = decode_node_message(*bytes);
    EXPECT_FALSE(decoded.has_value());
    if (decoded) return {};
    EXPECT_EQ(decoded.error().code, ErrorCode::invalid_argument);
    return decoded.error().message;
}

Map valid_join() {
    return Map{{"type", "join"}, {"version", kProtocolVersion}, {"nnodes", 2},
               {"node_rank", 1}, {"address", "10.77.0.2"},      {"pid", 1234}};
}

TEST(NodeProtocol, EveryMessageRoundTrips) {
    auto join = std::get<Join>(
        round_trip(Join{.nnodes = 3, .node_rank = 2, .address = "10.77.0.3", .pid = 42}));
    EXPECT_EQ(join.nnodes, 3);
    EXPECT_EQ(join.node_rank, 2);
    EXPECT_EQ(join.address, "10.77.0.3");
    EXPECT_EQ(join.pid, 42);

    config::RestartPolicy restart{.max_restarts = 0, .window_s = 12.5};
    auto welcome = std::get<Welcome>(round_trip(
        Welcome{.session = 0xfedcba9876543210ULL, .plan = {1, 2, 3}, .restart = restart}));
    EXPECT_EQ(welcome.session, 0xfedcba9876543210ULL);  // all 64 bits survive
    EXPECT_EQ(welcome.plan, (std::vector<std::uint8_t>{1, 2, 3}));
    EXPECT_EQ(welcome.restart.max_restarts, 0);
    EXPECT_EQ(welcome.restart.window_s, 12.5);

    auto heartbeat = std::get<Heartbeat>(
        round_trip(Heartbeat{.session = 7, .node_rank = 1, .pids = {{"talker", 99}}}));
    EXPECT_EQ(heartbeat.pids.at("talker"), 99);

    auto down = std::get<StagesDown>(round_trip(StagesDown{.session = 7,
                                                           .node_rank = 1,
                                                           .stages = {"a", "b"},
                                                           .reason = "exit 3",
                                                           .restarting = true}));
    EXPECT_EQ(down.stages, (std::vector<std::string>{"a", "b"}));
    EXPECT_TRUE(down.restarting);
    auto restarted = std::get<StagesRestarted>(
        round_trip(StagesRestarted{.session = 7, .node_rank = 1, .stages = {"a"}, .pid = 5}));
    EXPECT_EQ(restarted.pid, 5);
    EXPECT_EQ(
        std::get<Leave>(round_trip(Leave{.session = 7, .node_rank = 1, .reason = "bye"})).reason,
        "bye");
    EXPECT_EQ(std::get<Reject>(round_trip(Reject{"no"})).reason, "no");
    EXPECT_EQ(std::get<Rejoin>(round_trip(Rejoin{"again"})).reason, "again");
    EXPECT_EQ(std::get<Shutdown>(round_trip(Shutdown{"stop"})).reason, "stop");
    EXPECT_EQ(std::get<HubHeartbeat>(round_trip(HubHeartbeat{9})).session, 9u);
    EXPECT_EQ(message_type(NodeMessage{Shutdown{}}), "shutdown");
    auto control = std::get<ProcessControl>(round_trip(ProcessControl{
        .session = 7, .processes = {"tp_tp1", "tp_tp2"}, .start = true, .reason = "node back"}));
    EXPECT_EQ(control.session, 7u);
    EXPECT_EQ(control.processes, (std::vector<std::string>{"tp_tp1", "tp_tp2"}));
    EXPECT_TRUE(control.start);
    EXPECT_EQ(control.reason, "node back");
    EXPECT_EQ(message_type(NodeMessage{ProcessControl{}}), "process_control");
}

TEST(NodeProtocol, HostileProcessControlIsRefused) {
    auto valid = [] {
        return Map{{"type", "process_control"},
                   {"session", 7},
                   {"processes", List{Value("tp_tp1")}},
                   {"start", false},
                   {"reason", "node 1 is missing"}};
    };
    struct Case {
        std::string field;
        Value value;
        std::string error;
    };
    const Case cases[] = {
        {"processes", Value(List{}), "processes: is empty"},
        {"processes", Value("tp_tp1"), "processes: must be a list of strings"},
        {"processes", Value(List{Value("")}), "processes: must be a list of non-empty strings"},
        {"processes", Value(List{Value(3)}), "processes: must be a list of non-empty strings"},
        {"start", Value(1), "start: must be a boolean"},
        {"session", Value("7"), "session: must be an integer"},
        {"reason", Value(5), "reason: must be a string"},
    };
    for (const auto& c : cases) {
        Map message = valid();
        message[c.field] = c.value;
        EXPECT_NE(decode_error(Value(message)).find(c.error), std::string::npos) << c.error;
    }
    for (const char* field : {"processes", "start", "session", "reason"}) {
        Map message = valid();
        message.erase(field);
        EXPECT_NE(decode_error(Value(message)).find(std::string(field) + ": missing"),
                  std::string::npos)
            << field;
    }
}

TEST(NodeProtocol, GarbageBytesAreRefused) {
    const std::vector<std::uint8_t> cases[] = {
        {},
        {0xc1},                            // never used in msgpack
        {0x92, 0x01},                      // a list cut short
        {0xdd, 0xff, 0xff, 0xff, 0xff},    // a list claiming 4 billion elements
        {0x81, 0xa4, 't', 'y', 'p', 'e'},  // a map cut short
    };
    for (const auto& bytes : cases) {
        auto decoded = decode_node_message(bytes);
        ASSERT_FALSE(decoded.has_value());
        EXPECT_EQ(decoded.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(decoded.error().message.find("node message"), std::string::npos);
    }
}

TEST(NodeProtocol, MalformedJoinsNameTheField) {
    EXPECT_NE(decode_error(Value(List{1, 2})).find("message: must be a map"), std::string::npos);
    EXPECT_NE(decode_error(Value(Map{{"version", 1}})).find("type: missing"), std::string::npos);
    EXPECT_NE(decode_error(Value(Map{{"type", 5}})).find("type: must be a string"),
              std::string::npos);
    EXPECT_NE(decode_error(Value(Map{{"type", "hello"}})).find("unknown message type 'hello'"),
              std::string::npos);

    struct Case {
        std::string field;
        Value value;
        std::string expected;
    };
    const Case cases[] = {
        {"version", Value(99), "version: this omnirt speaks version 2"},
        {"version", Value("1"), "version: must be an integer"},
        {"nnodes", Value(1), "nnodes: 1 is outside 2..1024"},
        {"nnodes", Value(std::int64_t{1} << 40), "nnodes: "},
        {"node_rank", Value(-1), "node_rank: -1 is outside 0..1023"},
        {"node_rank", Value(2.0), "node_rank: must be an integer"},
        {"address", Value(""), "address: is empty"},
        {"address", Value(Bytes{{1, 2}}), "address: must be a string"},
        {"pid", Value(0), "pid: 0 is outside 1.."},
    };
    for (const auto& c : cases) {
        Map join = valid_join();
        join[c.field] = c.value;
        EXPECT_NE(decode_error(Value(join)).find(c.expected), std::string::npos) << c.field;
        join.erase(c.field);
        EXPECT_NE(decode_error(Value(join)).find(c.field + ": missing"), std::string::npos)
            << c.field;
    }
    // A string longer than the limit is refused before it is built.
    Map join = valid_join();
    join["address"] = Value(std::string(100000, 'x'));
    EXPECT_NE(decode_error(Value(join)).find("not a valid encoding"), std::string::npos);
}

TEST(NodeProtocol, HostileHeartbeatsAndReportsAreRefused) {
    Map heartbeat{
        {"type", "heartbeat"}, {"session", 1}, {"node_rank", 1}, {"pids", Map{{"p", -5}}}};
    EXPECT_NE(decode_error(Value(heartbeat)).find("pids: must map process names to pids >= 1"),
              std::string::npos);
    heartbeat["pids"] = Value(List{});
    EXPECT_NE(decode_error(Value(heartbeat)).find("pids: must be a map"), std::string::npos);
    Map down{{"type", "stages_down"},  {"session", 1},  {"node_rank", 1},
             {"stages", List{"a", 3}}, {"reason", "x"}, {"restarting", true}};
    EXPECT_NE(decode_error(Value(down)).find("stages: must be a list of non-empty strings"),
              std::string::npos);
    down["stages"] = Value(List{"a"});
    down["restarting"] = Value(1);
    EXPECT_NE(decode_error(Value(down)).find("restarting: must be a boolean"), std::string::npos);
    Map welcome{{"type", "welcome"},  {"session", 1},    {"plan", "not bytes"},
                {"max_restarts", 3},  {"window_s", 1.0}, {"backoff_initial_ms", 1},
                {"backoff_max_ms", 2}};
    EXPECT_NE(decode_error(Value(welcome)).find("plan: must be bytes"), std::string::npos);
    welcome["plan"] = Value(Bytes{});
    welcome["window_s"] = Value(-1.0);
    EXPECT_NE(decode_error(Value(welcome)).find("window_s: must be a positive number"),
              std::string::npos);
}

}  // namespace
}  // namespace omnirt::runner::node
