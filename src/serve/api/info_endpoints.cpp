// GET /health, GET /health/live, GET /v1/models, GET /v1/audio/voices, GET /metrics, POST
// /start_profile, POST /stop_profile.
#include <nlohmann/json.hpp>

#include <filesystem>

#include "serve/api/api_internal.h"
#include "serve/openai/responses.h"

namespace omnirt::serve::api {
namespace {

using json = nlohmann::json;

std::int64_t unix_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

void health(ApiState& state, std::shared_ptr<http::HttpExchange> http) {
    Exchange exchange(state, std::move(http), "/health");
    auto report = state.client.health();
    json stages = json::array();
    for (const auto& stage : report.stages) {
        json entry = {{"name", stage.stage},
                      {"alive", stage.alive},
                      {"state", std::string(pipeline::to_string(stage.state))},
                      {"restarts", stage.restarts},
                      {"queue_depth", stage.queue_depth},
                      {"active_requests", stage.active_requests},
                      {"processed", stage.processed},
                      {"compute_seconds", static_cast<double>(stage.compute_ns) / 1e9}};
        if (!stage.down_reason.empty()) entry["down_reason"] = stage.down_reason;
        if (stage.replica >= 0) {
            entry["replica_of"] = stage.replica_of;
            entry["replica"] = stage.replica;
        }
        stages.push_back(std::move(entry));
    }
    // Degraded: replicas are down but every stage has one serving, so every request is served.
    const bool serving = report.healthy || report.degraded;
    json body = {{"status", report.healthy ? "ok" : (report.degraded ? "degraded" : "unhealthy")},
                 {"model", state.options.model_name},
                 {"stages", std::move(stages)},
                 {"requests", report.requests_by_state}};
    if (!report.healthy) body["reason"] = report.reason;
    exchange.respond_json(serving ? 200 : 503,
                          body.dump(-1, ' ', false, json::error_handler_t::replace));
}

// For liveness probes: 200 while the pipeline runs and supervision is not out of options (a
// stage that is restarting is live), 503 with the reason once a stage failed for good or stopped
// sending heartbeats, or the pipeline stopped.
void live(ApiState& state, std::shared_ptr<http::HttpExchange> http) {
    Exchange exchange(state, std::move(http), "/health/live");
    auto report = state.client.health();
    json body = {{"status", report.live ? "live" : "failed"}};
    if (!report.healthy) body["reason"] = report.reason;
    exchange.respond_json(report.live ? 200 : 503,
                          body.dump(-1, ' ', false, json::error_handler_t::replace));
}

void models(ApiState& state, std::shared_ptr<http::HttpExchange> http) {
    Exchange exchange(state, std::move(http), "/v1/models");
    if (!authorized(exchange)) return;
    static const std::int64_t created = unix_seconds();
    openai::ModelCard card{.id = state.options.model_name, .created = created};
    exchange.respond_json(200, openai::models_json(std::span(&card, 1)));
}

// {"voices": [{"id", "name", "kind"}...]}: the voices a request may name: the model family's
// speakers in its order (kind "preset"; chat audio.voice and speech `voice`), then the saved
// reference voices by name (kind "saved"; speech `voice` only). Empty when the server knows none
// and any voice goes to the pipeline.
void voices(ApiState& state, std::shared_ptr<http::HttpExchange> http) {
    Exchange exchange(state, std::move(http), "/v1/audio/voices");
    if (!authorized(exchange)) return;
    json list = json::array();
    for (const std::string& voice : state.options.voices) {
        list.push_back({{"id", voice}, {"name", voice}, {"kind", "preset"}});
    }
    if (state.options.saved_voices != nullptr) {
        for (const std::string& voice : state.options.saved_voices->names()) {
            list.push_back({{"id", voice}, {"name", voice}, {"kind", "saved"}});
        }
    }
    json body = {{"voices", std::move(list)}};
    exchange.respond_json(200, body.dump(-1, ' ', false, json::error_handler_t::replace));
}

void metrics(ApiState& state, std::shared_ptr<http::HttpExchange> http) {
    Exchange exchange(state, std::move(http), "/metrics");
    exchange.respond(200, "text/plain; version=0.0.4", state.metrics.render(state.client.health()));
}

void profile(ApiState& state, std::shared_ptr<http::HttpExchange> http, bool start) {
    Exchange exchange(state, std::move(http), start ? "/start_profile" : "/stop_profile");
    if (!authorized(exchange)) return;
    std::string template_path = state.options.profile_dir + "/trace-{stage}-{pid}.json";
    Status status;
    if (start) {
        std::error_code ec;
        std::filesystem::create_directories(state.options.profile_dir, ec);
        if (ec) {
            exchange.respond_error({500,
                                    "cannot create the profile directory '" +
                                        state.options.profile_dir + "': " + ec.message(),
                                    "server_error", "", ""});
            return;
        }
        status = state.client.start_profile(template_path);
    } else {
        status = state.client.stop_profile();
    }
    if (!status) {
        exchange.respond_error(pipeline_error(status.error()));
        return;
    }
    json body = {{"status", start ? "profiling" : "stopped"}, {"trace_template", template_path}};
    exchange.respond_json(200, body.dump());
}

}  // namespace

Status add_info_routes(ApiState& state) {
    ApiState* s = &state;
    OMNI_RETURN_IF_ERROR(
        state.http->add_route("GET", "/health", [s](auto http) { health(*s, std::move(http)); }));
    OMNI_RETURN_IF_ERROR(state.http->add_route("GET", "/health/live",
                                               [s](auto http) { live(*s, std::move(http)); }));
    OMNI_RETURN_IF_ERROR(state.http->add_route("GET", "/v1/models",
                                               [s](auto http) { models(*s, std::move(http)); }));
    OMNI_RETURN_IF_ERROR(state.http->add_route("GET", "/v1/audio/voices",
                                               [s](auto http) { voices(*s, std::move(http)); }));
    OMNI_RETURN_IF_ERROR(
        state.http->add_route("GET", "/metrics", [s](auto http) { metrics(*s, std::move(http)); }));
    OMNI_RETURN_IF_ERROR(state.http->add_route(
        "POST", "/start_profile", [s](auto http) { profile(*s, std::move(http), true); }));
    return state.http->add_route("POST", "/stop_profile",
                                 [s](auto http) { profile(*s, std::move(http), false); });
}

}  // namespace omnirt::serve::api
