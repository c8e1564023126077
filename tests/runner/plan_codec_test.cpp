#include "runner/plan_codec.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <functional>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "config/load.h"
#include "config/runtime_plan.h"
#include "proto/value_codec.h"
#include "support/command.h"

namespace omnirt::runner {
namespace {

using config::RuntimePlan;

// Field-by-field comparison, so a field the encoder and decoder both forget still fails.
void expect_same_plan(const RuntimePlan& a, const RuntimePlan& b) {
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.model_path, b.model_path);
    EXPECT_EQ(a.relay_backend, b.relay_backend);
    EXPECT_EQ(a.entry_stage, b.entry_stage);
    EXPECT_EQ(a.terminal_stages, b.terminal_stages);
    EXPECT_EQ(a.terminal_stages_fn, b.terminal_stages_fn);
    EXPECT_EQ(a.scheme, b.scheme);
    EXPECT_EQ(a.runtime_dir, b.runtime_dir);
    EXPECT_EQ(a.coordinator_endpoint, b.coordinator_endpoint);
    EXPECT_EQ(a.abort_endpoint, b.abort_endpoint);
    EXPECT_EQ(a.relay_rendezvous, b.relay_rendezvous);
    EXPECT_EQ(a.env_defaults, b.env_defaults);
    EXPECT_EQ(a.plugins, b.plugins);
    ASSERT_EQ(a.stages.size(), b.stages.size());
    for (std::size_t i = 0; i < a.stages.size(); ++i) {
        SCOPED_TRACE("stage " + a.stages[i].name);
        const auto& x = a.stages[i];
        const auto& y = b.stages[i];
        EXPECT_EQ(x.name, y.name);
        EXPECT_EQ(x.factory, y.factory);
        EXPECT_EQ(Value(x.factory_args), Value(y.factory_args));
        EXPECT_EQ(x.process, y.process);
        EXPECT_EQ(x.processes, y.processes);
        EXPECT_EQ(x.gpu, y.gpu);
        EXPECT_EQ(x.tp_size, y.tp_size);
        EXPECT_EQ(x.endpoint, y.endpoint);
        EXPECT_EQ(x.replicas, y.replicas);
        EXPECT_EQ(x.replica_endpoints, y.replica_endpoints);
        EXPECT_EQ(x.relay.backend, y.relay.backend);
        EXPECT_EQ(x.relay.device, y.relay.device);
        EXPECT_EQ(x.relay.slot_size_mb, y.relay.slot_size_mb);
        EXPECT_EQ(x.relay.credits, y.relay.credits);
        EXPECT_EQ(x.relay.rank, y.relay.rank);
        EXPECT_EQ(x.relay.world_size, y.relay.world_size);
        EXPECT_EQ(x.next, y.next);
        EXPECT_EQ(x.terminal, y.terminal);
        EXPECT_EQ(x.route_fn, y.route_fn);
        EXPECT_EQ(x.wait_for, y.wait_for);
        EXPECT_EQ(x.wait_for_fn, y.wait_for_fn);
        EXPECT_EQ(x.merge_fn, y.merge_fn);
        EXPECT_EQ(x.stream_to, y.stream_to);
        EXPECT_EQ(x.stream_done_to_fn, y.stream_done_to_fn);
        EXPECT_EQ(x.project_payload, y.project_payload);
        EXPECT_EQ(x.fan_in_timeout_s, y.fan_in_timeout_s);
        EXPECT_EQ(x.local_targets, y.local_targets);
        EXPECT_EQ(x.local_stream_targets, y.local_stream_targets);
        EXPECT_EQ(x.same_gpu_stream_targets, y.same_gpu_stream_targets);
        EXPECT_EQ(x.stream_sources, y.stream_sources);
    }
    ASSERT_EQ(a.processes.size(), b.processes.size());
    for (std::size_t i = 0; i < a.processes.size(); ++i) {
        const auto& x = a.processes[i];
        const auto& y = b.processes[i];
        EXPECT_EQ(x.name, y.name);
        EXPECT_EQ(x.stages, y.stages);
        EXPECT_EQ(x.gpu, y.gpu);
        ASSERT_EQ(x.tp.has_value(), y.tp.has_value());
        if (x.tp) {
            EXPECT_EQ(x.tp->stage, y.tp->stage);
            EXPECT_EQ(x.tp->rank, y.tp->rank);
            EXPECT_EQ(x.tp->size, y.tp->size);
            EXPECT_EQ(x.tp->rendezvous, y.tp->rendezvous);
            EXPECT_EQ(x.tp->endpoint, y.tp->endpoint);
            EXPECT_EQ(x.tp->endpoint, y.tp->endpoint);
        }
        EXPECT_EQ(x.relay_rank, y.relay_rank);
        EXPECT_EQ(x.replica, y.replica);
        EXPECT_EQ(x.replicas, y.replicas);
    }
    ASSERT_EQ(a.edges.size(), b.edges.size());
    for (std::size_t i = 0; i < a.edges.size(); ++i) {
        EXPECT_EQ(a.edges[i].from, b.edges[i].from);
        EXPECT_EQ(a.edges[i].to, b.edges[i].to);
        EXPECT_EQ(a.edges[i].kind, b.edges[i].kind);
        EXPECT_EQ(a.edges[i].same_process, b.edges[i].same_process);
        EXPECT_EQ(a.edges[i].same_gpu, b.edges[i].same_gpu);
    }
}

// A plan prepared from a config file of the repository. The config's factories and functions
// are registered as dummies (with injectable args) in a private registry, so it validates.
RuntimePlan plan_from_config(const std::string& relative) {
    Registry registry;
    auto unchecked = config::load_pipeline_file(testing::source_path(relative),
                                                {.load_plugins = false, .check_registry = false});
    EXPECT_TRUE(unchecked.has_value()) << unchecked.error().message;
    auto add = [&registry](FunctionKind kind, const std::optional<std::string>& name) {
        if (name && !registry.contains(kind, *name)) {
            EXPECT_TRUE(
                registry
                    .add(kind, *name, {.callable = 0, .injectable_args = {"model_path", "gpu_id"}})
                    .has_value());
        }
    };
    add(FunctionKind::terminal_stages, unchecked->terminal_stages_fn);
    for (const auto& stage : unchecked->stages) {
        add(FunctionKind::factory, stage.factory);
        add(FunctionKind::route, stage.route_fn);
        add(FunctionKind::wait_for, stage.wait_for_fn);
        add(FunctionKind::merge, stage.merge_fn);
        add(FunctionKind::stream_done, stage.stream_done_to_fn);
        for (const auto& [target, fn] : stage.project_payload) add(FunctionKind::projection, fn);
    }
    auto validated = config::load_pipeline_file(testing::source_path(relative),
                                                {.load_plugins = false, .registry = &registry});
    EXPECT_TRUE(validated.has_value()) << validated.error().message;
    auto plan = config::prepare_runtime(
        *validated, {.runtime_dir = "/run/user/1/omnirt-test", .registry = &registry});
    EXPECT_TRUE(plan.has_value()) << plan.error().message;
    return *plan;
}

// Every field set to something other than its default.
RuntimePlan full_plan() {
    RuntimePlan plan;
    plan.name = "full";
    plan.model_path = "/models/full";
    plan.relay_backend = "ucx";
    plan.entry_stage = "a";
    plan.terminal_stages = {"b"};
    plan.terminal_stages_fn = "test.terminal";
    plan.scheme = config::EndpointScheme::tcp;
    plan.runtime_dir = "/tmp/omnirt-full";
    plan.coordinator_endpoint = "tcp://127.0.0.1:17000";
    plan.abort_endpoint = "tcp://127.0.0.1:17001";
    plan.relay_rendezvous = "tcp://127.0.0.1:17002";
    config::StagePlan a;
    a.name = "a";
    a.factory = "test.identity";
    a.factory_args = Map{
        {"int", -5},       {"float", 0.25},        {"bool", true},
        {"null", Value()}, {"list", List{1, "x"}}, {"nested", Map{{"bytes", Bytes{{1, 2, 3}}}}}};
    a.process = "pa";
    a.processes = {"pa"};
    a.endpoint = "tcp://127.0.0.1:17002";
    a.relay = {.backend = "ucx",
               .device = "cuda:1",
               .slot_size_mb = 2.5,
               .credits = 3,
               .rank = 0,
               .world_size = 2};
    a.next = {"b"};
    a.route_fn = "test.route";
    a.stream_to = {"b"};
    a.stream_done_to_fn = "test.done";
    a.project_payload = {{"b", "test.project"}};
    a.same_gpu_stream_targets = {"b"};
    a.gpu = {1};
    config::StagePlan b;
    b.name = "b";
    b.factory = "test.tp";
    b.process = "pb-0";
    b.processes = {"pb-0", "pb-1"};
    b.gpu = {0, 1};
    b.tp_size = 2;
    b.endpoint = "tcp://127.0.0.1:17003";
    b.relay = {.backend = "ucx",
               .device = "cpu",
               .slot_size_mb = 16,
               .credits = 8,
               .rank = 1,
               .world_size = 2};
    b.terminal = true;
    b.wait_for = {"a"};
    b.wait_for_fn = "test.wait";
    b.merge_fn = "test.merge";
    b.fan_in_timeout_s = 0.5;
    b.local_targets = {"a"};
    b.local_stream_targets = {"a"};
    b.stream_sources = {"a"};
    plan.stages = {a, b};
    plan.processes = {
        {.name = "pa", .stages = {"a"}, .gpu = 1, .relay_rank = 0},
        {.name = "pb-0",
         .stages = {"b"},
         .gpu = 0,
         .tp = config::TpRank{.stage = "b", .rank = 0, .size = 2, .rendezvous = "tcp://h:1"},
         .relay_rank = 1},
        {.name = "pb-1",
         .stages = {"b"},
         .gpu = 1,
         .tp = config::TpRank{.stage = "b",
                              .rank = 1,
                              .size = 2,
                              .rendezvous = "tcp://h:1",
                              .endpoint = "tcp://h:2"},
         .relay_rank = -1},
    };
    plan.edges = {{.from = "a", .to = "b", .kind = config::EdgeKind::normal},
                  {.from = "a",
                   .to = "b",
                   .kind = config::EdgeKind::stream,
                   .same_process = true,
                   .same_gpu = true}};
    plan.env_defaults = {{"OMP_NUM_THREADS", "1"}, {"EMPTY", ""}};
    plan.plugins = {"/opt/plugins/libx.so"};
    return plan;
}

RuntimePlan round_trip(const RuntimePlan& plan) {
    auto bytes = encode_plan(plan);
    EXPECT_TRUE(bytes.has_value());
    auto decoded = decode_plan(*bytes);
    EXPECT_TRUE(decoded.has_value()) << decoded.error().message;
    return decoded.value_or(RuntimePlan{});
}

TEST(PlanCodec, RoundTripsPlansOfTheRepositoryConfigs) {
    for (const char* config : {"configs/test_pipeline.yaml", "configs/qwen3_omni_speech.yaml"}) {
        SCOPED_TRACE(config);
        RuntimePlan plan = plan_from_config(config);
        ASSERT_FALSE(plan.stages.empty());
        expect_same_plan(plan, round_trip(plan));
    }
}

TEST(PlanCodec, RoundTripsEveryField) {
    RuntimePlan plan = full_plan();
    RuntimePlan decoded = round_trip(plan);
    expect_same_plan(plan, decoded);
    // Spot checks that the comparison itself sees the values.
    EXPECT_EQ(decoded.scheme, config::EndpointScheme::tcp);
    EXPECT_EQ(decoded.processes[2].tp->rank, 1);
    EXPECT_EQ(decoded.processes[2].relay_rank, -1);
    EXPECT_EQ(decoded.processes[2].tp->endpoint, "tcp://h:2");
    EXPECT_EQ(decoded.edges[1].kind, config::EdgeKind::stream);
    EXPECT_EQ(decoded.stages[0].factory_args.at("nested"), Value(Map{{"bytes", Bytes{{1, 2, 3}}}}));
    EXPECT_FALSE(decoded.processes[0].tp.has_value());
    // Encoding is deterministic.
    EXPECT_EQ(*encode_plan(plan), *encode_plan(decoded));
}

// --- hostile values ------------------------------------------------------------------------

std::string decode_error(const Value& value) {
    auto plan = plan_from_value(value);
    if (plan.has_value()) return "decoded";
    EXPECT_EQ(plan.error().code, ErrorCode::invalid_argument) << plan.error().message;
    return plan.error().message;
}

Value& at(Value& value, std::initializer_list<std::variant<const char*, int>> path) {
    Value* node = &value;
    for (const auto& step : path) {
        if (std::holds_alternative<int>(step)) {
            node = &node->as_list().at(static_cast<std::size_t>(std::get<int>(step)));
        } else {
            node = &(*node)[std::get<const char*>(step)];
        }
    }
    return *node;
}

class PlanValue : public ::testing::Test {
  protected:
    Value value = plan_to_value(full_plan());

    void expect_error(const std::string& expected) {
        std::string message = decode_error(value);
        EXPECT_NE(message.find(expected), std::string::npos) << message;
    }
};

TEST_F(PlanValue, TheUnmodifiedValueDecodes) { EXPECT_EQ(decode_error(value), "decoded"); }

TEST_F(PlanValue, WrongTypesNameTheFieldPath) {
    at(value, {"stages", 1, "relay", "credits"}) = Value("8");
    expect_error("stages[1].relay.credits: expected int, got string");
}

TEST_F(PlanValue, WrongTypesInListsAndMaps) {
    at(value, {"stages", 0, "next", 0}) = Value(3);
    expect_error("stages[0].next[0]: expected string, got int");
    value = plan_to_value(full_plan());
    at(value, {"env_defaults", "OMP_NUM_THREADS"}) = Value(1);
    expect_error("env_defaults.OMP_NUM_THREADS: expected string, got int");
    value = plan_to_value(full_plan());
    at(value, {"processes", 1, "tp"}) = Value(List{});
    expect_error("processes[1].tp: expected map, got list");
    value = plan_to_value(full_plan());
    at(value, {"stages", 0, "factory_args"}) = Value("x");
    expect_error("stages[0].factory_args: expected map, got string");
    value = plan_to_value(full_plan());
    at(value, {"stages", 0, "terminal"}) = Value(1);
    expect_error("stages[0].terminal: expected bool, got int");
    value = plan_to_value(full_plan());
    at(value, {"stages", 0, "route_fn"}) = Value(false);
    expect_error("stages[0].route_fn: expected string, got bool");
    EXPECT_NE(decode_error(Value(List{})).find("plan: expected map, got list"), std::string::npos);
}

TEST_F(PlanValue, MissingAndUnknownFields) {
    value["processes"].as_list()[0].as_map().erase("relay_rank");
    expect_error("processes[0].relay_rank: missing");
    value = plan_to_value(full_plan());
    at(value, {"stages", 1, "relay", "colour"}) = Value("blue");
    expect_error("stages[1].relay: unknown field 'colour'");
    value = plan_to_value(full_plan());
    value.as_map().erase("format_version");
    expect_error("format_version: missing");
    value = plan_to_value(full_plan());
    value["format_version"] = Value(99);
    expect_error("format_version: this omnirt reads version 3, got 99");
}

TEST_F(PlanValue, UnknownEnumStrings) {
    value["scheme"] = Value("udp");
    expect_error("scheme: unknown endpoint scheme 'udp'");
    value = plan_to_value(full_plan());
    at(value, {"edges", 1, "kind"}) = Value("sideways");
    expect_error("edges[1].kind: unknown edge kind 'sideways'");
}

TEST_F(PlanValue, OutOfRangeNumbers) {
    struct Case {
        std::initializer_list<std::variant<const char*, int>> path;
        Value bad;
        const char* expected;
    };
    const Case cases[] = {
        {{"stages", 0, "relay", "credits"}, Value(0), "stages[0].relay.credits: must be in [1, "},
        {{"stages", 0, "relay", "rank"}, Value(-1), "stages[0].relay.rank: must be in [0, "},
        {{"stages", 0, "relay", "world_size"}, Value(0), "stages[0].relay.world_size"},
        {{"stages", 0, "relay", "slot_size_mb"}, Value(0.0), "stages[0].relay.slot_size_mb"},
        {{"stages", 0, "relay", "slot_size_mb"}, Value(std::nan("")), "slot_size_mb: must be"},
        {{"stages", 0, "relay", "slot_size_mb"},
         Value(std::numeric_limits<double>::infinity()),
         "slot_size_mb: must be"},
        {{"stages", 1, "fan_in_timeout_s"}, Value(-1.0), "stages[1].fan_in_timeout_s"},
        {{"stages", 1, "tp_size"}, Value(0), "stages[1].tp_size: must be in [1, "},
        {{"stages", 1, "tp_size"}, Value(std::int64_t{1} << 40), "stages[1].tp_size"},
        {{"stages", 1, "gpu", 1}, Value(-2), "stages[1].gpu[1]: must be in [0, "},
        {{"processes", 0, "gpu"}, Value(-1), "processes[0].gpu"},
        {{"processes", 0, "relay_rank"}, Value(-2), "processes[0].relay_rank"},
        {{"processes", 2, "tp", "rank"}, Value(2), "processes[2].tp.rank: must be below size 2"},
        {{"processes", 2, "tp", "size"}, Value(0), "processes[2].tp.size"},
        {{"processes", 2, "tp", "endpoint"},
         Value(""),
         "processes[2].tp.endpoint: a follower rank needs its control endpoint"},
    };
    for (const auto& c : cases) {
        value = plan_to_value(full_plan());
        at(value, c.path) = c.bad;
        expect_error(c.expected);
    }
}

TEST_F(PlanValue, NamesMustResolve) {
    at(value, {"stages", 0, "process"}) = Value("nowhere");
    expect_error("stages[0].process: unknown process 'nowhere'");
    value = plan_to_value(full_plan());
    at(value, {"stages", 0, "next", 0}) = Value("ghost");
    expect_error("stages[0].next[0]: unknown stage 'ghost'");
    value = plan_to_value(full_plan());
    at(value, {"edges", 0, "to"}) = Value("ghost");
    expect_error("edges[0].to: unknown stage 'ghost'");
    value = plan_to_value(full_plan());
    value["entry_stage"] = Value("ghost");
    expect_error("entry_stage: unknown stage 'ghost'");
    value = plan_to_value(full_plan());
    at(value, {"processes", 2, "tp", "stage"}) = Value("ghost");
    expect_error("processes[2].tp.stage: unknown stage 'ghost'");
    value = plan_to_value(full_plan());
    at(value, {"stages", 1, "name"}) = Value("a");
    expect_error("stages[1].name: duplicate name 'a'");
    value = plan_to_value(full_plan());
    at(value, {"processes", 1, "name"}) = Value("pa");
    expect_error("processes[1].name: duplicate name 'pa'");
}

TEST_F(PlanValue, LongNamesAreShortenedInMessages) {
    at(value, {"stages", 0, "process"}) = Value(std::string(100000, 'p'));
    std::string message = decode_error(value);
    EXPECT_LT(message.size(), 300u);
    EXPECT_NE(message.find("..."), std::string::npos);
}

// --- hostile bytes -------------------------------------------------------------------------

// A plan with a replicated process group: stage b and c run in processes g.r0 and g.r1.
RuntimePlan replicated_plan() {
    RuntimePlan plan = full_plan();
    plan.stages.resize(1);  // a only; TP stage b is replaced
    plan.processes.resize(1);
    plan.edges.clear();
    plan.terminal_stages = {"b"};
    config::StagePlan b;
    b.name = "b";
    b.factory = "test.identity";
    b.process = "g.r0";
    b.processes = {"g.r0", "g.r1"};
    b.endpoint = "tcp://h:5";
    b.replicas = 2;
    b.replica_endpoints = {"tcp://h:5", "tcp://h:6"};
    b.terminal = true;
    b.relay = plan.stages[0].relay;
    plan.stages.push_back(b);
    plan.stages[0].next = {"b"};
    plan.stages[0].processes = {plan.stages[0].process};
    for (int k = 0; k < 2; ++k) {
        plan.processes.push_back(config::ProcessPlan{.name = "g.r" + std::to_string(k),
                                                     .stages = {"b"},
                                                     .relay_rank = k + 1,
                                                     .replica = k,
                                                     .replicas = 2});
    }
    return plan;
}

TEST(PlanCodec, RoundTripsNodeNames) {
    RuntimePlan plan = full_plan();
    plan.node_addresses = {"10.0.0.1", "10.0.0.2"};
    plan.node_names = {"head", "gpu-a"};
    plan.processes[2].node = 1;
    RuntimePlan decoded = round_trip(plan);
    EXPECT_EQ(decoded.node_addresses, plan.node_addresses);
    EXPECT_EQ(decoded.node_names, plan.node_names);
    EXPECT_EQ(decoded.processes[2].node, 1);
    EXPECT_EQ(decoded.node_label(1), "node gpu-a (rank 1, 10.0.0.2)");
    // More names than nodes is a corrupt plan.
    plan.node_names = {"head", "gpu-a", "gpu-b"};
    auto bytes = encode_plan(plan);
    ASSERT_TRUE(bytes.has_value());
    auto refused = decode_plan(*bytes);
    ASSERT_FALSE(refused.has_value());
    EXPECT_NE(refused.error().message.find("node_names: names 3 nodes"), std::string::npos)
        << refused.error().message;
}

TEST(PlanCodec, RoundTripsReplicas) {
    RuntimePlan plan = replicated_plan();
    RuntimePlan decoded = round_trip(plan);
    expect_same_plan(plan, decoded);
    EXPECT_EQ(decoded.processes[2].replica, 1);
    EXPECT_EQ(decoded.stages[1].replica_endpoints[1], "tcp://h:6");
}

TEST(PlanCodec, HostileReplicaValuesAreErrors) {
    auto error_of = [](const std::function<void(Value&)>& edit) {
        Value value = plan_to_value(replicated_plan());
        edit(value);
        return decode_error(value);
    };
    auto has = [](const std::string& message, const std::string& part) {
        return message.find(part) != std::string::npos;
    };
    EXPECT_TRUE(has(error_of([](Value& v) { v["processes"].as_list()[2]["replica"] = Value(2); }),
                    "processes[2].replica: replica 2 of 2 is out of range"));
    EXPECT_TRUE(has(error_of([](Value& v) { v["processes"].as_list()[2]["replica"] = Value(-1); }),
                    "processes[2].replica"));
    EXPECT_TRUE(has(error_of([](Value& v) { v["processes"].as_list()[1]["replicas"] = Value(0); }),
                    "processes[1].replicas"));
    EXPECT_TRUE(has(error_of([](Value& v) { v["stages"].as_list()[1]["replicas"] = Value(65); }),
                    "stages[1].replicas: must be at most 64"));
    EXPECT_TRUE(has(error_of([](Value& v) {
                        v["stages"].as_list()[1]["replica_endpoints"] = Value(List{"tcp://h:5"});
                    }),
                    "stages[1].replica_endpoints: needs one endpoint per replica (2), got 1"));
    // A replica process whose stage has another replica count would bind a missing endpoint.
    EXPECT_TRUE(has(error_of([](Value& v) {
                        auto& p = v["processes"].as_list()[2];
                        p["stages"] = Value(List{"a"});
                    }),
                    "process 'g.r1' has 2 replicas, stage 'a' 1"));
}

TEST(PlanBytes, EveryTruncationFails) {
    auto bytes = *encode_plan(full_plan());
    for (std::size_t size = 0; size < bytes.size(); ++size) {
        auto plan = decode_plan(std::span(bytes.data(), size));
        ASSERT_FALSE(plan.has_value()) << size;
        EXPECT_EQ(plan.error().code, ErrorCode::invalid_argument);
    }
    bytes.push_back(0xc0);  // trailing bytes
    EXPECT_FALSE(decode_plan(bytes).has_value());
}

TEST(PlanBytes, RandomAndCorruptedBytesNeverCrash) {
    std::mt19937 random(1234);
    const auto valid = *encode_plan(full_plan());
    for (int i = 0; i < 2000; ++i) {
        std::vector<std::uint8_t> bytes(random() % 256);
        for (auto& b : bytes) b = static_cast<std::uint8_t>(random());
        EXPECT_FALSE(decode_plan(bytes).has_value());
    }
    // Flipped bytes in a valid plan: decodes to some plan or fails, never crashes.
    for (int i = 0; i < 2000; ++i) {
        auto bytes = valid;
        for (int flips = 0; flips < 3; ++flips) {
            bytes[random() % bytes.size()] ^= static_cast<std::uint8_t>(1 + random() % 255);
        }
        auto plan = decode_plan(bytes);
        if (!plan) {
            EXPECT_FALSE(plan.error().message.empty());
        }
    }
}

TEST(PlanBytes, DeclaredSizesAreBoundedBeforeAllocation) {
    // A map header, then one key whose string header claims 4 GiB, then nothing.
    const std::vector<std::uint8_t> huge_string = {0x81, 0xdb, 0xff, 0xff, 0xff, 0xff};
    auto plan = decode_plan(huge_string);
    ASSERT_FALSE(plan.has_value());
    EXPECT_EQ(plan.error().code, ErrorCode::invalid_argument);
    // An array header claiming 2^32 - 1 elements.
    const std::vector<std::uint8_t> huge_list = {0xdd, 0xff, 0xff, 0xff, 0xff};
    EXPECT_FALSE(decode_plan(huge_list).has_value());
    // A string over the plan's 1 MiB string limit, well-formed.
    Value value = plan_to_value(full_plan());
    value["name"] = Value(std::string((1 << 20) + 1, 'n'));
    auto bytes = *proto::encode_value(value);
    plan = decode_plan(bytes);
    ASSERT_FALSE(plan.has_value());
    EXPECT_NE(plan.error().message.find("not a valid encoding"), std::string::npos);
    // Lists nested deeper than the limit inside factory_args.
    Value deep = Value(List{});
    for (int i = 0; i < 100; ++i) deep = Value(List{deep});
    value = plan_to_value(full_plan());
    at(value, {"stages", 0, "factory_args", "deep"}) = deep;
    EXPECT_FALSE(decode_plan(*proto::encode_value(value)).has_value());
    // Inline tensors are not plan content.
    value = plan_to_value(full_plan());
    at(value, {"stages", 0, "factory_args", "t"}) = Value(*Tensor::empty({2}, DType::f32));
    EXPECT_FALSE(decode_plan(*proto::encode_value(value)).has_value());
}

// --- files ---------------------------------------------------------------------------------

class PlanFile : public ::testing::Test {
  protected:
    void SetUp() override {
        char pattern[] = "/tmp/omnirt-plan-test-XXXXXX";
        ASSERT_NE(mkdtemp(pattern), nullptr);
        dir = pattern;
    }
    void TearDown() override { std::filesystem::remove_all(dir); }
    std::string dir;
};

TEST_F(PlanFile, WritesMode0600AndReadsBack) {
    std::string path = dir + "/plan.msgpack";
    std::ofstream(path) << "old content";
    chmod(path.c_str(), 0644);
    RuntimePlan plan = full_plan();
    ASSERT_TRUE(write_plan_file(plan, path).has_value());
    struct stat info {};
    ASSERT_EQ(stat(path.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0600u);
    auto read = read_plan_file(path);
    ASSERT_TRUE(read.has_value()) << read.error().message;
    expect_same_plan(plan, *read);
    // No temporary file is left beside it.
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir),
                            std::filesystem::directory_iterator()),
              1);
}

TEST_F(PlanFile, ErrorsNameThePath) {
    auto missing = read_plan_file(dir + "/missing");
    ASSERT_FALSE(missing.has_value());
    EXPECT_EQ(missing.error().code, ErrorCode::not_found);
    EXPECT_NE(missing.error().message.find(dir + "/missing"), std::string::npos);
    EXPECT_FALSE(read_plan_file(dir).has_value());  // a directory
    std::ofstream(dir + "/garbage") << "this is not msgpack";
    auto garbage = read_plan_file(dir + "/garbage");
    ASSERT_FALSE(garbage.has_value());
    EXPECT_EQ(garbage.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(garbage.error().message.find("garbage"), std::string::npos);
    std::ofstream(dir + "/empty");
    EXPECT_FALSE(read_plan_file(dir + "/empty").has_value());
    // A huge file is refused by its size, before anything is read (sparse: costs no disk).
    std::filesystem::resize_file(std::filesystem::path(dir + "/empty"), std::uint64_t{65} << 20);
    auto huge = read_plan_file(dir + "/empty");
    ASSERT_FALSE(huge.has_value());
    EXPECT_EQ(huge.error().code, ErrorCode::out_of_range);
    auto unwritable = write_plan_file(full_plan(), dir + "/no/such/dir/plan");
    ASSERT_FALSE(unwritable.has_value());
    EXPECT_NE(unwritable.error().message.find("no/such/dir"), std::string::npos);
}

}  // namespace
}  // namespace omnirt::runner
