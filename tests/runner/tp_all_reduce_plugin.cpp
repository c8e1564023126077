// A plugin for the runner tests (configs name it under `plugins:`): the test stage
// `test.tp_all_reduce`, whose tensor-parallel ranks sum a tensor over the stage's own process
// group (engine::C10dTpGroup over StageContext::tp_rendezvous: gloo) for every request. It
// links libtorch, which the omnirt binary and the test stages (src/testing) do not, so it lives
// here and the stage processes load it like any plugin.
//
// Input data {"n": int}; rank r contributes (n + k) * (r + 1) for k = 0..3; every rank ends
// with the sum over the ranks, and rank 0's result is {"n": n, "sum": [four numbers],
// "ranks": tp_size}. Args: timeout_ms (joining the group and each collective, default 60000).
// The group connects at the first request (every rank gets it), so the ranks' processes may
// start in any order. A collective that fails (a rank is gone) fails the request with
// `unavailable` and the reason; the group stays unusable, as a model stage's would.
#include <ATen/ATen.h>

#include <cstring>
#include <memory>
#include <mutex>

#include "config/plugins.h"
#include "engine/tp_communicator.h"
#include "pipeline/simple_scheduler.h"
#include "pipeline/stage_args.h"
#include "pipeline/stage_factory.h"

namespace omnirt::testing {
namespace {

constexpr int kWidth = 4;

// The rank's group, connected at the first request (on the scheduler's one worker thread).
class LazyGroup {
  public:
    explicit LazyGroup(std::shared_ptr<engine::C10dTpGroup> group) : group_(std::move(group)) {}

    Status connect_once() {
        std::lock_guard lock(mutex_);
        if (!connected_) {
            OMNI_TRY(std::uint64_t seed, group_->connect(0));
            (void)seed;
            connected_ = true;
        }
        return ok_status();
    }

    engine::C10dTpGroup& group() { return *group_; }

  private:
    std::mutex mutex_;
    bool connected_ = false;
    std::shared_ptr<engine::C10dTpGroup> group_;
};

Result<StagePayload> all_reduce(LazyGroup& lazy, const pipeline::StageContext& context,
                                const StagePayload& input) {
    const std::string who =
        "stage '" + context.stage_name + "' rank " + std::to_string(context.tp_rank);
    if (!input.data.is_map() || !input.data.as_map().contains("n") ||
        !input.data.as_map().at("n").is_int()) {
        return fail(ErrorCode::invalid_argument, who + ": test.tp_all_reduce needs data {n: int}");
    }
    const std::int64_t n = input.data.as_map().at("n").as_int();
    OMNI_RETURN_IF_ERROR(lazy.connect_once());
    at::Tensor tensor = at::arange(kWidth, at::kDouble).add_(static_cast<double>(n));
    tensor.mul_(static_cast<double>(context.tp_rank + 1));
    try {
        lazy.group().all_reduce_sum(tensor);
    } catch (const engine::TpCollectiveError& error) {
        return fail(ErrorCode::unavailable, who + ": " + error.what());
    }
    List sum;
    for (int k = 0; k < kWidth; ++k) sum.push_back(Value(tensor[k].item<double>()));
    StagePayload output = input;
    output.data = Map{{"n", n}, {"sum", Value(std::move(sum))}, {"ranks", context.tp_size}};
    return output;
}

Result<std::unique_ptr<pipeline::Scheduler>> make_stage(const pipeline::StageContext& context) {
    const std::string who = "stage '" + context.stage_name + "': test.tp_all_reduce";
    if (context.tp_size < 2) {
        return fail(ErrorCode::invalid_argument, who + " needs tp_size 2 or more");
    }
    OMNI_TRY(std::int64_t timeout_ms,
             pipeline::int_arg_in(context, who, "timeout_ms", 60000, 1, 3600000));
    OMNI_TRY(auto group,
             engine::C10dTpGroup::create({.name = "stage '" + context.stage_name + "'",
                                          .rank = context.tp_rank,
                                          .size = context.tp_size,
                                          .rendezvous = context.tp_rendezvous,
                                          .listen_host = context.node_address,
                                          .timeout = std::chrono::milliseconds(timeout_ms)}));
    auto lazy = std::make_shared<LazyGroup>(std::move(group));
    return pipeline::make_simple_scheduler(
        context, [lazy, context](const StagePayload& input, pipeline::Emitter&) {
            return all_reduce(*lazy, context, input);
        });
}

}  // namespace
}  // namespace omnirt::testing

OMNIRT_PLUGIN_ABI_VERSION_FN

extern "C" int omnirt_register_plugin(omnirt::Registry* registry, char* error, int capacity) {
    auto added = omnirt::pipeline::register_stage_factory(
        "test.tp_all_reduce", omnirt::testing::make_stage,
        "tensor-parallel ranks sum a tensor over the stage's gloo group per request", {},
        *registry);
    if (!added.has_value()) {
        std::strncpy(error, added.error().message.c_str(), static_cast<std::size_t>(capacity));
        return 1;
    }
    return 0;
}
