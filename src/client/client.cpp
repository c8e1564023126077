#include "client/client.h"

#include <cstdio>
#include <random>

namespace omnirt::client {
namespace {

// splitmix64: spreads consecutive counters over all bits.
std::uint64_t mix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

}  // namespace

Client::Client(pipeline::Coordinator& coordinator)
    : coordinator_(coordinator), instance_tag_(std::random_device{}()) {
    instance_tag_ = (instance_tag_ << 32) ^ std::random_device{}();
}

std::string Client::next_request_id(std::string_view prefix) {
    std::uint64_t n = counter_.fetch_add(1, std::memory_order_relaxed);
    char digits[25];
    // 8 digits of the instance tag, 16 of a bijective mix of the counter: unique in-process.
    std::snprintf(digits, sizeof(digits), "%08x%016llx",
                  static_cast<unsigned>(mix(instance_tag_) & 0xffffffffU),
                  static_cast<unsigned long long>(mix(instance_tag_ ^ n)));
    std::string id(prefix);
    id += digits;
    return id;
}

Status Client::start(const std::string& request_id, OmniRequest request,
                     pipeline::RequestOptions options, pipeline::EventCallback callback) {
    return coordinator_.start_request(request_id, std::move(request), options, std::move(callback));
}

Result<StagePayload> Client::generate(const std::string& request_id, OmniRequest request,
                                      pipeline::RequestOptions options) {
    return coordinator_.submit(request_id, std::move(request), options);
}

Result<std::unique_ptr<pipeline::RequestStream>> Client::stream(const std::string& request_id,
                                                                OmniRequest request,
                                                                pipeline::RequestOptions options) {
    return coordinator_.stream(request_id, std::move(request), options);
}

Status Client::abort(const std::string& request_id, const std::string& reason) {
    return coordinator_.abort(request_id, reason);
}

Status Client::pause(const std::string& request_id, bool paused) {
    return coordinator_.pause(request_id, paused);
}

Status Client::start_profile(const std::string& trace_path_template) {
    return coordinator_.start_profile(trace_path_template);
}

Status Client::stop_profile() { return coordinator_.stop_profile(); }

pipeline::HealthReport Client::health() const { return coordinator_.health(); }

std::size_t Client::live_requests() const { return coordinator_.live_requests(); }

}  // namespace omnirt::client
