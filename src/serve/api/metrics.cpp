#include "serve/api/metrics.h"

#include <cstdio>
#include <tuple>

namespace omnirt::serve::api {
namespace {

std::string number(double value) {
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), "%.17g", value);
    return buffer;
}

// Label values escape backslash, double quote and newline.
std::string label_value(std::string_view value) {
    std::string out;
    for (char c : value) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
    out += "# HELP ";
    out += name;
    out += ' ';
    out += help;
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type;
    out += '\n';
}

void sample(std::string& out, std::string_view name, std::string_view labels, double value) {
    out += name;
    if (!labels.empty()) {
        out += '{';
        out += labels;
        out += '}';
    }
    out += ' ';
    out += number(value);
    out += '\n';
}

}  // namespace

void Histogram::observe(double seconds) {
    if (!(seconds >= 0)) seconds = 0;  // NaN and negatives (clock steps) count as 0
    std::size_t bucket = 0;
    while (bucket < kBounds.size() && seconds > kBounds[bucket]) ++bucket;
    std::lock_guard lock(mutex_);
    ++counts_[bucket];
    sum_ += seconds;
    ++count_;
}

void Histogram::render(std::string& out, std::string_view name, std::string_view labels) const {
    std::array<std::uint64_t, kBounds.size() + 1> counts;
    double sum = 0;
    std::uint64_t count = 0;
    {
        std::lock_guard lock(mutex_);
        counts = counts_;
        sum = sum_;
        count = count_;
    }
    std::string prefix = labels.empty() ? std::string() : std::string(labels) + ",";
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i <= kBounds.size(); ++i) {
        cumulative += counts[i];
        std::string le = i < kBounds.size() ? number(kBounds[i]) : "+Inf";
        sample(out, std::string(name) + "_bucket", prefix + "le=\"" + le + "\"",
               static_cast<double>(cumulative));
    }
    sample(out, std::string(name) + "_sum", labels, sum);
    sample(out, std::string(name) + "_count", labels, static_cast<double>(count));
}

void ServerMetrics::record_request(std::string_view endpoint, int status, double seconds) {
    std::lock_guard lock(mutex_);
    auto it = endpoints_.find(endpoint);
    if (it == endpoints_.end()) {
        it = endpoints_
                 .emplace(std::piecewise_construct, std::forward_as_tuple(endpoint),
                          std::forward_as_tuple())
                 .first;
    }
    ++it->second.by_status[status];
    it->second.latency.observe(seconds);
}

std::string ServerMetrics::render(const pipeline::HealthReport& health) const {
    std::string out;
    {
        std::lock_guard lock(mutex_);
        header(out, "omnirt_http_requests_total", "counter",
               "HTTP requests by endpoint and status.");
        for (const auto& [endpoint, stats] : endpoints_) {
            for (const auto& [status, count] : stats.by_status) {
                sample(out, "omnirt_http_requests_total",
                       "endpoint=\"" + label_value(endpoint) + "\",status=\"" +
                           std::to_string(status) + "\"",
                       static_cast<double>(count));
            }
        }
        header(out, "omnirt_http_request_duration_seconds", "histogram",
               "Time from a request's arrival to its answer (a stream: to its end).");
        for (const auto& [endpoint, stats] : endpoints_) {
            stats.latency.render(out, "omnirt_http_request_duration_seconds",
                                 "endpoint=\"" + label_value(endpoint) + "\"");
        }
    }
    header(out, "omnirt_http_requests_in_flight", "gauge", "Generation requests being served.");
    sample(out, "omnirt_http_requests_in_flight", "", static_cast<double>(in_flight()));
    header(out, "omnirt_http_requests_queued", "gauge",
           "Generation requests waiting for a slot (--max-queue).");
    sample(out, "omnirt_http_requests_queued", "", static_cast<double>(queued()));
    header(out, "omnirt_http_streams_paused", "gauge",
           "Streams whose reader is behind by more than the high-water mark (the request is "
           "paused in the pipeline).");
    sample(out, "omnirt_http_streams_paused", "", static_cast<double>(paused_.load()));
    header(out, "omnirt_http_stream_pauses_total", "counter",
           "Times a stream's reader fell behind by more than the high-water mark.");
    sample(out, "omnirt_http_stream_pauses_total", "", static_cast<double>(pauses_.load()));
    header(out, "omnirt_http_stream_stalls_total", "counter",
           "Streams cut (their requests aborted) because the reader read nothing for the stall "
           "timeout.");
    sample(out, "omnirt_http_stream_stalls_total", "", static_cast<double>(stalls_.load()));
    header(out, "omnirt_time_to_first_token_seconds", "histogram",
           "Time from a request's arrival to its first text delta.");
    first_token_.render(out, "omnirt_time_to_first_token_seconds", "");
    header(out, "omnirt_time_to_first_audio_seconds", "histogram",
           "Time from a request's arrival to its first audio chunk.");
    first_audio_.render(out, "omnirt_time_to_first_audio_seconds", "");
    header(out, "omnirt_inter_chunk_gap_seconds", "histogram",
           "Time between consecutive output chunks of a request.");
    chunk_gap_.render(out, "omnirt_inter_chunk_gap_seconds", "");

    header(out, "omnirt_pipeline_healthy", "gauge", "1 when every stage is alive.");
    sample(out, "omnirt_pipeline_healthy", "", health.healthy ? 1 : 0);
    header(out, "omnirt_stage_alive", "gauge", "1 when the stage's heartbeats are current.");
    for (const auto& stage : health.stages) {
        sample(out, "omnirt_stage_alive", "stage=\"" + label_value(stage.stage) + "\"",
               stage.alive ? 1 : 0);
    }
    header(out, "omnirt_stage_state", "gauge",
           "1 for the stage's supervision state (running, restarting, failed), 0 for the others.");
    for (const auto& stage : health.stages) {
        for (auto state : {pipeline::StageState::running, pipeline::StageState::restarting,
                           pipeline::StageState::failed}) {
            sample(out, "omnirt_stage_state",
                   "stage=\"" + label_value(stage.stage) + "\",state=\"" +
                       std::string(pipeline::to_string(state)) + "\"",
                   stage.state == state ? 1 : 0);
        }
    }
    header(out, "omnirt_stage_restarts_total", "counter",
           "Restarts of the stage's process that supervision scheduled.");
    for (const auto& stage : health.stages) {
        sample(out, "omnirt_stage_restarts_total", "stage=\"" + label_value(stage.stage) + "\"",
               static_cast<double>(stage.restarts));
    }
    header(out, "omnirt_stage_queue_depth", "gauge", "Work queued in the stage's scheduler.");
    for (const auto& stage : health.stages) {
        sample(out, "omnirt_stage_queue_depth", "stage=\"" + label_value(stage.stage) + "\"",
               static_cast<double>(stage.queue_depth));
    }
    header(out, "omnirt_stage_active_requests", "gauge", "Requests holding state in the stage.");
    for (const auto& stage : health.stages) {
        sample(out, "omnirt_stage_active_requests", "stage=\"" + label_value(stage.stage) + "\"",
               static_cast<double>(stage.active_requests));
    }
    header(out, "omnirt_stage_processed_total", "counter", "Items the stage has processed.");
    for (const auto& stage : health.stages) {
        sample(out, "omnirt_stage_processed_total", "stage=\"" + label_value(stage.stage) + "\"",
               static_cast<double>(stage.processed));
    }
    header(out, "omnirt_stage_compute_seconds_total", "counter",
           "Time the stage's scheduler spent computing.");
    for (const auto& stage : health.stages) {
        sample(out, "omnirt_stage_compute_seconds_total",
               "stage=\"" + label_value(stage.stage) + "\"",
               static_cast<double>(stage.compute_ns) / 1e9);
    }
    header(out, "omnirt_stage_paused_requests", "gauge",
           "Requests the stage holds because their client reads slowly.");
    for (const auto& stage : health.stages) {
        sample(out, "omnirt_stage_paused_requests", "stage=\"" + label_value(stage.stage) + "\"",
               static_cast<double>(stage.paused_requests));
    }
    // Stages with a KV cache (the AR engine) only.
    struct EngineFamily {
        const char* name;
        const char* type;
        const char* help;
        std::int64_t pipeline::StageHealth::*field;
    };
    static constexpr EngineFamily kEngineFamilies[] = {
        {"omnirt_stage_kv_blocks_used", "gauge",
         "KV cache blocks held by requests (the prefix cache's not counted).",
         &pipeline::StageHealth::kv_blocks_used},
        {"omnirt_stage_kv_blocks_total", "gauge", "KV cache blocks in all.",
         &pipeline::StageHealth::kv_blocks_total},
        {"omnirt_stage_generated_tokens_total", "counter", "Tokens the stage generated.",
         &pipeline::StageHealth::generated_tokens},
    };
    for (const auto& family : kEngineFamilies) {
        header(out, family.name, family.type, family.help);
        for (const auto& stage : health.stages) {
            if (stage.kv_blocks_total == 0) continue;
            sample(out, family.name, "stage=\"" + label_value(stage.stage) + "\"",
                   static_cast<double>(stage.*family.field));
        }
    }
    // Relay traffic per edge (from -> to), one family per quantity.
    struct EdgeFamily {
        const char* name;
        const char* help;
        double (*value)(const proto::EdgeTraffic&);
    };
    static constexpr EdgeFamily kEdgeFamilies[] = {
        {"omnirt_relay_transfers_total",
         "Payloads and stream chunks sent to a stage in another process, per edge.",
         [](const proto::EdgeTraffic& e) { return static_cast<double>(e.transfers); }},
        {"omnirt_relay_bytes_total", "Tensor bytes moved through the relay per edge.",
         [](const proto::EdgeTraffic& e) { return static_cast<double>(e.bytes); }},
        {"omnirt_relay_write_seconds_total",
         "Time the sender spent encoding and writing into the relay, per edge.",
         [](const proto::EdgeTraffic& e) { return static_cast<double>(e.write_ns) / 1e9; }},
        {"omnirt_relay_delivery_seconds_total",
         "Time from a relay put to the receiver taking the data, summed per edge.",
         [](const proto::EdgeTraffic& e) { return static_cast<double>(e.delivery_ns) / 1e9; }},
    };
    for (const auto& family : kEdgeFamilies) {
        header(out, family.name, "counter", family.help);
        for (const auto& stage : health.stages) {
            for (const auto& edge : stage.edges) {
                sample(out, family.name,
                       "from=\"" + label_value(stage.stage) + "\",to=\"" +
                           label_value(edge.target) + "\"",
                       family.value(edge));
            }
        }
    }
    // The coordinator reports live requests (pending, running) and totals of ended ones.
    std::string live;
    std::string totals;
    for (const auto& [state, count] : health.requests_by_state) {
        bool is_live = state == "pending" || state == "running";
        sample(is_live ? live : totals,
               is_live ? "omnirt_pipeline_live_requests" : "omnirt_pipeline_requests_total",
               "state=\"" + label_value(state) + "\"", static_cast<double>(count));
    }
    header(out, "omnirt_pipeline_live_requests", "gauge", "Requests in the pipeline by state.");
    out += live;
    header(out, "omnirt_pipeline_requests_total", "counter", "Requests ended, by how they ended.");
    out += totals;
    return out;
}

}  // namespace omnirt::serve::api
