// Stage replicas (docs/pipeline.md "Replicas"): a process group with `replicas: N` runs as N
// processes; new requests go round-robin, a routing key keeps a conversation on one replica, a
// killed replica fails only its own requests while the others serve (health degraded), and
// the restart policy brings it back. Every wait is on a condition, with a generous timeout as a
// hang guard only.
#include <gtest/gtest.h>
#include <signal.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>

#include "core/registry.h"
#include "pipeline_harness.h"

namespace omnirt::testing {
namespace {

using runner::Placement;
using Kind = pipeline::RequestEvent::Kind;
using pipeline::StageState;

constexpr std::chrono::milliseconds kHangGuard(60000);

const Layout kProcesses{Placement::processes, false, "replicas"};

pipeline::StageHealth stage_health(const pipeline::HealthReport& report, const std::string& stage) {
    for (const auto& entry : report.stages) {
        if (entry.stage == stage) return entry;
    }
    ADD_FAILURE() << "no stage '" << stage << "' in the health report";
    return {};
}

// Results emitted by each replica of `stage`, from the heartbeats.
std::vector<std::int64_t> processed(runner::Pipeline& pipeline, const std::string& stage,
                                    int replicas) {
    auto report = pipeline.health();
    std::vector<std::int64_t> out;
    for (int k = 0; k < replicas; ++k) {
        out.push_back(stage_health(report, stage + ".r" + std::to_string(k)).processed);
    }
    return out;
}

std::int64_t sum(const std::vector<std::int64_t>& values) {
    std::int64_t total = 0;
    for (auto value : values) total += value;
    return total;
}

// Waits until the replicas of `stage` have emitted `total` results together, and returns them.
std::vector<std::int64_t> processed_when(runner::Pipeline& pipeline, const std::string& stage,
                                         int replicas, std::int64_t total) {
    std::vector<std::int64_t> counts;
    EXPECT_TRUE(eventually(
        [&] {
            counts = processed(pipeline, stage, replicas);
            return sum(counts) >= total;
        },
        kHangGuard))
        << "stage " << stage;
    return counts;
}

std::vector<int> pids_of(runner::Pipeline& pipeline) {
    std::vector<int> out;
    for (const auto& [name, pid] : pipeline.process_ids()) out.push_back(pid);
    return out;
}

const char* const kThreeStages = R"(
name: replicated
model_path: none
restart: {max_restarts: 3, window_s: 600, backoff_initial_ms: 10, backoff_max_ms: 100}
stages:
  - {name: front, process: a, factory: test.identity, next: mid}
  - {name: mid, process: b, replicas: 2, factory: test.sleep,
     factory_args: {ms: 0, worker_threads: 8}, next: last}
  - {name: last, process: a, factory: test.identity, terminal: true}
)";

TEST(PipelineReplicas, EachReplicaIsAProcessAndNewRequestsGoRoundRobin) {
    auto started = start_pipeline(kThreeStages, kProcesses);
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto& pipeline = **started;
    auto ids = pipeline.process_ids();
    ASSERT_EQ(ids.size(), 3u);
    ASSERT_TRUE(ids.contains("b.r0") && ids.contains("b.r1"));
    EXPECT_NE(ids.at("b.r0"), ids.at("b.r1"));
    auto health = pipeline.health();
    EXPECT_TRUE(health.healthy) << health.reason;
    EXPECT_EQ(stage_health(health, "mid.r1").replica_of, "mid");
    EXPECT_EQ(stage_health(health, "mid.r1").replica, 1);
    EXPECT_EQ(stage_health(health, "mid.r1").pid, ids.at("b.r1"));
    EXPECT_EQ(stage_health(health, "front").replica, -1);

    constexpr int kRequests = 10;
    for (int i = 0; i < kRequests; ++i) {
        auto result =
            pipeline.submit("rr-" + std::to_string(i), OmniRequest{.inputs = Map{{"i", i}}});
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
        EXPECT_EQ(result->data, Value(Map{{"i", i}}));
    }
    // One after another, without a routing key: alternating replicas.
    EXPECT_EQ(processed_when(pipeline, "mid", 2, kRequests), (std::vector<std::int64_t>{5, 5}));
    expect_nothing_left(pipeline, pids_of(pipeline));
}

TEST(PipelineReplicas, TheSameUserStaysOnOneReplica) {
    auto started = start_pipeline(kThreeStages, kProcesses);
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto& pipeline = **started;
    std::int64_t total = 0;
    std::set<std::size_t> used;
    for (const std::string user : {"alice", "bob", "carol", "dave", "erin", "frank"}) {
        auto before = processed_when(pipeline, "mid", 2, total);
        constexpr int kTurns = 4;
        for (int turn = 0; turn < kTurns; ++turn) {
            auto result = pipeline.submit(
                user + "-" + std::to_string(turn),
                OmniRequest{.inputs = Map{{"turn", turn}}, .metadata = Map{{"user", user}}});
            ASSERT_TRUE(result.has_value()) << result.error().to_string();
        }
        total += kTurns;
        auto after = processed_when(pipeline, "mid", 2, total);
        // Every turn of this user went to the same replica.
        std::size_t replica = after[0] > before[0] ? 0 : 1;
        EXPECT_EQ(after[replica] - before[replica], kTurns) << user;
        EXPECT_EQ(after[1 - replica], before[1 - replica]) << user;
        used.insert(replica);
    }
    // Six users over two replicas: the keys spread (a fixed hash, so this is deterministic).
    EXPECT_EQ(used.size(), 2u);
    expect_nothing_left(pipeline, pids_of(pipeline));
}

TEST(PipelineReplicas, AKilledReplicaFailsOnlyItsRequestsTheOtherServesAndItComesBack) {
    auto started = start_pipeline(kThreeStages, kProcesses);
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto& pipeline = **started;
    const int dead_pid = pipeline.process_ids().at("b.r1");
    const int survivor_pid = pipeline.process_ids().at("b.r0");

    // Ten sleeping requests, five on each replica (round-robin).
    constexpr int kLoad = 10;
    Outcomes outcomes;
    for (int i = 0; i < kLoad; ++i) {
        Status accepted = pipeline.coordinator().start_request(
            "held-" + std::to_string(i),
            OmniRequest{.inputs = Map{{"i", i}}, .params = Map{{"sleep_ms", 600000}}}, {},
            outcomes.callback());
        ASSERT_TRUE(accepted.has_value()) << accepted.error().to_string();
    }
    ASSERT_TRUE(eventually(
        [&] {
            auto report = pipeline.health();
            return stage_health(report, "mid.r0").active_requests == kLoad / 2 &&
                   stage_health(report, "mid.r1").active_requests == kLoad / 2;
        },
        kHangGuard));
    ASSERT_EQ(::kill(dead_pid, SIGKILL), 0);

    // The dead replica's five fail at once, naming it; the survivor's five are still running.
    ASSERT_TRUE(outcomes.wait_for(kLoad / 2));
    for (const auto& event : outcomes.events()) {
        EXPECT_EQ(event.kind, Kind::failed) << event.request_id;
        EXPECT_EQ(event.error.code, ErrorCode::unavailable) << event.error.to_string();
        EXPECT_NE(event.error.message.find("stage 'mid.r1' is down"), std::string::npos)
            << event.error.message;
        EXPECT_NE(event.error.message.find("killed by signal 9"), std::string::npos)
            << event.error.message;
    }
    EXPECT_EQ(outcomes.events().size(), static_cast<std::size_t>(kLoad / 2));
    EXPECT_EQ(pipeline.coordinator().live_requests(), static_cast<std::size_t>(kLoad / 2));

    // Degraded, not down: new requests are served by the survivor while r1 restarts (or after).
    for (int i = 0; i < 4; ++i) {
        auto result =
            pipeline.submit("during-" + std::to_string(i), OmniRequest{.inputs = Map{{"i", i}}});
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
        EXPECT_EQ(result->data, Value(Map{{"i", i}}));
    }

    // The restart policy brings r1 back; health is ok again.
    ASSERT_TRUE(eventually([&] { return pipeline.health().healthy; }, kHangGuard))
        << pipeline.health().reason;
    auto health = pipeline.health();
    EXPECT_FALSE(health.degraded);
    EXPECT_EQ(stage_health(health, "mid.r1").restarts, 1);
    EXPECT_EQ(stage_health(health, "mid.r0").restarts, 0);
    const int new_pid = pipeline.process_ids().at("b.r1");
    EXPECT_NE(new_pid, dead_pid);
    EXPECT_EQ(pipeline.process_ids().at("b.r0"), survivor_pid);

    // Both replicas serve again: round-robin reaches the new incarnation.
    auto before = processed(pipeline, "mid", 2);
    for (int i = 0; i < 4; ++i) {
        auto result =
            pipeline.submit("after-" + std::to_string(i), OmniRequest{.inputs = Map{{"i", i}}});
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
    }
    auto after = processed_when(pipeline, "mid", 2, sum(before) + 4);
    EXPECT_GT(after[1], before[1]);

    // The survivor's requests were never touched: abort them now.
    for (int i = 0; i < kLoad; ++i) (void)pipeline.abort("held-" + std::to_string(i), "done");
    ASSERT_TRUE(outcomes.wait_for(kLoad));
    int aborted = 0;
    for (const auto& event : outcomes.events()) aborted += event.kind == Kind::aborted ? 1 : 0;
    EXPECT_EQ(aborted, kLoad / 2);
    expect_nothing_left(pipeline, {dead_pid, new_pid, survivor_pid});
}

TEST(PipelineReplicas, AReplicaPastItsBudgetLeavesTheStageDegradedButServing) {
    std::string yaml = kThreeStages;
    yaml.replace(yaml.find("max_restarts: 3"), 15, "max_restarts: 0");
    auto started = start_pipeline(yaml, kProcesses);
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto& pipeline = **started;
    const int dead_pid = pipeline.process_ids().at("b.r0");
    ASSERT_EQ(::kill(dead_pid, SIGKILL), 0);
    ASSERT_TRUE(eventually(
        [&] { return stage_health(pipeline.health(), "mid.r0").state == StageState::failed; },
        kHangGuard));
    auto health = pipeline.health();
    EXPECT_FALSE(health.healthy);
    EXPECT_TRUE(health.degraded);
    EXPECT_TRUE(health.live);  // mid still has a replica: nothing is lost
    EXPECT_EQ(health.reason.rfind("degraded: stage 'mid.r0' failed", 0), 0u) << health.reason;
    // Every new request goes to the replica that serves, with or without a key.
    for (int i = 0; i < 6; ++i) {
        OmniRequest request{.inputs = Map{{"i", i}}};
        if (i % 2 == 0) request.metadata = Map{{"user", "u" + std::to_string(i)}};
        auto result = pipeline.submit("after-" + std::to_string(i), request);
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
    }
    EXPECT_EQ(processed_when(pipeline, "mid", 2, 6)[1], 6);

    // With the last replica gone too the stage is down: refused, naming both replicas.
    ASSERT_EQ(::kill(pipeline.process_ids().at("b.r1"), SIGKILL), 0);
    ASSERT_TRUE(eventually(
        [&] { return stage_health(pipeline.health(), "mid.r1").state == StageState::failed; },
        kHangGuard));
    EXPECT_FALSE(pipeline.health().live);
    EXPECT_FALSE(pipeline.health().degraded);
    auto refused = pipeline.submit("refused", OmniRequest{});
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().code, ErrorCode::unavailable);
    EXPECT_NE(refused.error().message.find("no replica of stage 'mid' is serving"),
              std::string::npos)
        << refused.error().message;
    expect_nothing_left(pipeline, pids_of(pipeline));
}

// The omni speech shape with the encoders, the thinker and the talker replicated: fan-out to
// replicated encoders, fan-in from them, payloads and stream chunks from one replicated group
// to another, several terminal stages.
std::string replicated_omni_yaml() {
    return R"(
name: omni-replicas
model_path: none
terminal_stages_fn: test.terminal_from_params
stages:
  - name: preprocessing
    process: preprocessing
    factory: test.identity
    next: [image_encoder, audio_encoder, mm_aggregate]
    route_fn: test.route_from_params
  - {name: image_encoder, process: encoders, replicas: 2, factory: test.tensor_producer,
     factory_args: {bytes: 65536, dtype: float32}, next: mm_aggregate}
  - {name: audio_encoder, process: encoders, replicas: 2, factory: test.arithmetic,
     next: mm_aggregate}
  - name: mm_aggregate
    process: preprocessing
    factory: test.identity
    wait_for: [preprocessing, image_encoder, audio_encoder]
    wait_for_fn: test.wait_for_from_params
    merge_fn: test.merge
    next: thinker
  - name: thinker
    process: thinker
    replicas: 2
    factory: test.token_streamer
    factory_args: {tokens: 5}
    next: [decode, talker]
    stream_to: [talker]
  - {name: decode, process: thinker, replicas: 2, factory: test.identity, terminal: true}
  - {name: talker, process: talker, replicas: 3, factory: test.stream_collector,
     factory_args: {forward: true}, terminal: true}
)";
}

TEST(PipelineReplicas, EncoderThinkerAndTalkerReplicasServeTheOmniShape) {
    auto started = start_pipeline(replicated_omni_yaml(), kProcesses);
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto& pipeline = **started;
    EXPECT_EQ(pipeline.process_ids().size(), 1u + 2u + 2u + 3u);

    constexpr int kRequests = 24;
    std::vector<std::unique_ptr<pipeline::RequestStream>> streams;
    for (int i = 0; i < kRequests; ++i) {
        OmniRequest speech{
            .inputs = Map{{"prompt", "describe " + std::to_string(i)}},
            .params = Map{{"route", List{"image_encoder", "audio_encoder", "mm_aggregate"}},
                          {"wait_for", List{"preprocessing", "image_encoder", "audio_encoder"}},
                          {"terminal_stages", List{"decode", "talker"}}}};
        if (i % 3 == 0) speech.metadata = Map{{"user", "user-" + std::to_string(i % 4)}};
        auto stream = pipeline.stream("speech-" + std::to_string(i), speech);
        ASSERT_TRUE(stream.has_value()) << stream.error().to_string();
        streams.push_back(std::move(*stream));
    }
    for (auto& stream : streams) {
        int talker_chunks = 0;
        std::optional<pipeline::RequestEvent> end;
        while (!end) {
            auto event = stream->next(kHangGuard);
            ASSERT_TRUE(event.has_value()) << event.error().to_string();
            ASSERT_TRUE(event->has_value());
            if ((*event)->terminal()) {
                end = std::move(**event);
            } else if ((*event)->from_stage == "talker") {
                ++talker_chunks;
            }
        }
        ASSERT_EQ(end->kind, Kind::completed)
            << stream->request_id() << ": " << end->error.to_string();
        EXPECT_EQ(talker_chunks, 5);
        const Value* decode = end->result.data.find("decode");
        const Value* talker = end->result.data.find("talker");
        ASSERT_NE(decode, nullptr);
        ASSERT_NE(talker, nullptr);
        EXPECT_EQ(*decode->find("text"), Value("t0 t1 t2 t3 t4 "));
        EXPECT_EQ(*talker->find("count"), Value(5));
        const Value* merged = decode->find("input");
        ASSERT_NE(merged, nullptr);
        EXPECT_NE(merged->find("image_encoder"), nullptr);
        EXPECT_NE(merged->find("audio_encoder"), nullptr);
    }
    // Every replica of every replicated stage took part.
    for (const auto& [stage, replicas] : std::vector<std::pair<std::string, int>>{
             {"image_encoder", 2}, {"audio_encoder", 2}, {"thinker", 2}, {"talker", 3}}) {
        auto counts = processed_when(pipeline, stage, replicas, kRequests);
        for (int k = 0; k < replicas; ++k) {
            EXPECT_GT(counts[static_cast<std::size_t>(k)], 0) << stage << ".r" << k;
        }
    }
    EXPECT_TRUE(eventually([&] { return all_stages_idle(pipeline); }, kHangGuard));
    expect_nothing_left(pipeline, pids_of(pipeline));
}

// A projection that builds a new request (as a model stage's compute might): the payload it
// returns has no metadata, so no routes; the sender puts the request's routes back.
TEST(PipelineReplicas, RoutesSurviveAStageThatBuildsANewRequest) {
    ASSERT_TRUE(
        Registry::global()
            .add_if_absent(FunctionKind::projection, "replicas_test.fresh_request",
                           RegistryEntry{.callable = ProjectionFn(
                                             [](const std::string&,
                                                const StagePayload& in) -> Result<StagePayload> {
                                                 return StagePayload{.request_id = in.request_id,
                                                                     .request = OmniRequest{},
                                                                     .data = in.data};
                                             })})
            .has_value());
    auto started = start_pipeline(R"(
name: fresh-request
model_path: none
stages:
  - {name: front, process: a, factory: test.identity, next: plain,
     project_payload: {plain: replicas_test.fresh_request}}
  - {name: plain, process: b, factory: test.identity, next: mid}
  - {name: mid, process: c, replicas: 2, factory: test.identity, next: last}
  - {name: last, process: a, factory: test.identity, terminal: true}
)",
                                  Layout{Placement::in_process, false, "in"});
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto& pipeline = **started;
    for (int i = 0; i < 4; ++i) {
        auto result =
            pipeline.submit("fresh-" + std::to_string(i), OmniRequest{.inputs = Map{{"i", i}}});
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
        EXPECT_EQ(result->data, Value(Map{{"i", i}}));
    }
    EXPECT_EQ(processed_when(pipeline, "mid", 2, 4), (std::vector<std::int64_t>{2, 2}));
    pipeline.stop();
}

TEST(PipelineReplicas, InProcessPlacementHostsEveryReplica) {
    auto started = start_pipeline(kThreeStages, Layout{Placement::in_process, false, "in"});
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    auto& pipeline = **started;
    for (int i = 0; i < 4; ++i) {
        auto result =
            pipeline.submit("in-" + std::to_string(i), OmniRequest{.inputs = Map{{"i", i}}});
        ASSERT_TRUE(result.has_value()) << result.error().to_string();
    }
    EXPECT_EQ(processed_when(pipeline, "mid", 2, 4), (std::vector<std::int64_t>{2, 2}));
    pipeline.stop();
}

}  // namespace
}  // namespace omnirt::testing
