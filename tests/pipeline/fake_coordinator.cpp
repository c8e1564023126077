#include "pipeline/fake_coordinator.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "config/load.h"
#include "core/registry.h"
#include "pipeline/stage_factory.h"
#include "relay/builtin.h"

namespace omnirt::pipeline::testing {
namespace {

Result<std::vector<std::string>> string_list(const Value* value, const std::string& what) {
    if (value == nullptr || !value->is_list()) {
        return fail(ErrorCode::invalid_argument, what + " must be a list of stage names");
    }
    std::vector<std::string> out;
    for (const auto& item : value->as_list()) {
        if (!item.is_string()) {
            return fail(ErrorCode::invalid_argument, what + " must be a list of stage names");
        }
        out.push_back(item.as_string());
    }
    return out;
}

void add(FunctionKind kind, const std::string& name, std::any callable) {
    (void)Registry::global().add(kind, name, RegistryEntry{.callable = std::move(callable)});
}

// Starts the process-wide threads some runtimes create lazily with the first thread (the
// ThreadSanitizer runtime's background thread), so that tests comparing thread counts before
// and after see only their own.
const bool kLazyThreadsStarted = [] {
    std::thread([] {}).join();
    return true;
}();

}  // namespace

void register_test_functions() {
    static const bool registered = [] {
        EXPECT_TRUE(relay::register_builtin_backends().has_value());
        (void)register_stage_factory("h2test.stage", [](const StageContext&) {
            return Result<std::unique_ptr<Scheduler>>(std::make_unique<FakeScheduler>());
        });
        add(FunctionKind::merge, "h2test.merge",
            MergeFn([](const std::string& request_id,
                       const std::map<std::string, std::shared_ptr<const StagePayload>>& inputs)
                        -> Result<StagePayload> {
                StagePayload merged{.request_id = request_id};
                Map data;
                for (const auto& [source, payload] : inputs) {
                    merged.request = payload->request;
                    data[source] = payload->data;
                }
                merged.data = std::move(data);
                return merged;
            }));
        add(FunctionKind::route, "h2test.route",
            RouteFn([](const std::string&, const StagePayload& output) {
                return string_list(output.request.params.find("route"), "params.route");
            }));
        add(FunctionKind::wait_for, "h2test.wait_for",
            WaitForFn([](const std::string&, const std::string&, const StagePayload& payload)
                          -> Result<std::optional<std::vector<std::string>>> {
                const Value* list = payload.data.find("wait_for");
                if (list == nullptr) return std::optional<std::vector<std::string>>();
                OMNI_TRY(auto names, string_list(list, "data.wait_for"));
                return std::optional<std::vector<std::string>>(std::move(names));
            }));
        add(FunctionKind::projection, "h2test.project",
            ProjectionFn([](const std::string& target, const StagePayload& output) {
                StagePayload projected = output;
                projected.data = Map{{"projected_for", target}, {"data", output.data}};
                return Result<StagePayload>(std::move(projected));
            }));
        add(FunctionKind::stream_done, "h2test.stream_done",
            StreamDoneFn([](const std::string&, const StagePayload& output) {
                return string_list(output.request.params.find("stream_done_to"),
                                   "params.stream_done_to");
            }));
        return true;
    }();
    (void)registered;
}

TestPlan make_plan(const std::string& yaml) {
    register_test_functions();
    TestPlan out;
    auto dir = config::RuntimeDirectory::create(::testing::TempDir());
    EXPECT_TRUE(dir.has_value());
    if (!dir) return out;
    out.dir = std::move(*dir);
    auto config = config::load_pipeline_text(yaml, "stage_test.yaml", {.load_plugins = false});
    EXPECT_TRUE(config.has_value()) << (config ? "" : config.error().message);
    if (!config) return out;
    auto plan = config::prepare_runtime(*config, {.runtime_dir = out.dir->path()});
    EXPECT_TRUE(plan.has_value()) << (plan ? "" : plan.error().message);
    if (!plan) return out;
    out.plan = std::make_shared<const config::RuntimePlan>(std::move(*plan));
    return out;
}

std::vector<std::string> shm_segments_of_this_process() {
    std::vector<std::string> out;
    const std::string pid = "." + std::to_string(::getpid()) + ".";
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
        std::string name = entry.path().filename().string();
        if (name.starts_with("omnirt.") && name.find(pid) != std::string::npos) {
            out.push_back(name);
        }
    }
    return out;
}

std::size_t thread_count() {
    std::size_t count = 0;
    std::error_code error;
    for (auto it = std::filesystem::directory_iterator("/proc/self/task", error);
         it != std::filesystem::directory_iterator(); ++it) {
        ++count;
    }
    return count;
}

std::string thread_names() {
    std::string out;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", error)) {
        std::ifstream comm(entry.path() / "comm");
        std::string name;
        std::getline(comm, name);
        out += (out.empty() ? "" : ", ") + name;
    }
    return out;
}

// --- FakeScheduler ---

FakeScheduler::Handler FakeScheduler::identity() {
    return [](const IncomingMessage& message, FakeScheduler& self) {
        if (message.kind == IncomingKind::new_request) {
            self.emit_result(message.request_id, *message.payload);
        }
    };
}

FakeScheduler::Handler FakeScheduler::hold() {
    return [](const IncomingMessage&, FakeScheduler&) {};
}

FakeScheduler::FakeScheduler(Handler handler, bool retain_payloads)
    : handler_(std::move(handler)), retain_payloads_(retain_payloads) {}

FakeScheduler::~FakeScheduler() { stop(); }

Status FakeScheduler::start() {
    thread_ = std::thread([this] {
        while (std::optional<IncomingMessage> message = inbox_.pop()) {
            {
                std::lock_guard lock(mutex_);
                received_.push_back(*message);
                active_.insert(message->request_id);
            }
            handler_(*message, *this);
            {
                std::lock_guard lock(mutex_);
                if (!retain_payloads_) {
                    // Find our record (the handler may not have touched received_).
                    for (auto it = received_.rbegin(); it != received_.rend(); ++it) {
                        if (it->request_id == message->request_id && it->kind == message->kind) {
                            it->payload.reset();
                            it->chunk.reset();
                            break;
                        }
                    }
                }
            }
            changed_.notify_all();
        }
    });
    return ok_status();
}

void FakeScheduler::stop() {
    {
        std::lock_guard lock(mutex_);
        if (stopped_) return;
        stopped_ = true;
    }
    inbox_.close();
    if (thread_.joinable()) thread_.join();
    outbox_.close();
}

void FakeScheduler::abort(const std::string& request_id) {
    {
        std::lock_guard lock(mutex_);
        aborted_.insert(request_id);
        active_.erase(request_id);
    }
    inbox_.remove_if([&](const IncomingMessage& m) { return m.request_id == request_id; });
    changed_.notify_all();
}

std::size_t FakeScheduler::active_requests() const {
    std::lock_guard lock(mutex_);
    return active_.size();
}

void FakeScheduler::emit(OutgoingMessage message) {
    if (message.kind != OutgoingKind::stream) {
        std::lock_guard lock(mutex_);
        active_.erase(message.request_id);
    }
    // Through the Stage's output sink, like SimpleScheduler: tests exercise both output paths.
    (void)deliver(std::move(message));
}

void FakeScheduler::emit_result(const std::string& request_id, StagePayload payload) {
    emit(OutgoingMessage{.request_id = request_id,
                         .kind = OutgoingKind::result,
                         .result = std::make_shared<const StagePayload>(std::move(payload))});
}

void FakeScheduler::emit_error(const std::string& request_id, Error error) {
    emit(OutgoingMessage{
        .request_id = request_id, .kind = OutgoingKind::error, .error = std::move(error)});
}

void FakeScheduler::emit_stream(const std::string& request_id, Value chunk,
                                std::optional<std::string> target, Value metadata) {
    emit(OutgoingMessage{.request_id = request_id,
                         .kind = OutgoingKind::stream,
                         .chunk = std::make_shared<const StreamChunk>(StreamChunk{
                             .chunk = std::move(chunk), .metadata = std::move(metadata)}),
                         .target = std::move(target)});
}

std::vector<IncomingMessage> FakeScheduler::received() const {
    std::lock_guard lock(mutex_);
    return received_;
}

std::vector<IncomingMessage> FakeScheduler::received_for(const std::string& request_id) const {
    std::lock_guard lock(mutex_);
    std::vector<IncomingMessage> out;
    for (const auto& m : received_) {
        if (m.request_id == request_id) out.push_back(m);
    }
    return out;
}

bool FakeScheduler::wait_received(std::size_t count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kHangGuard, [&] { return received_.size() >= count; });
}

bool FakeScheduler::wait_received_for(const std::string& request_id, std::size_t count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kHangGuard, [&] {
        return static_cast<std::size_t>(std::count_if(
                   received_.begin(), received_.end(),
                   [&](const IncomingMessage& m) { return m.request_id == request_id; })) >= count;
    });
}

bool FakeScheduler::wait_aborted(const std::string& request_id) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kHangGuard, [&] { return aborted_.contains(request_id); });
}

bool FakeScheduler::was_aborted(const std::string& request_id) const {
    std::lock_guard lock(mutex_);
    return aborted_.contains(request_id);
}

// --- FakeCoordinator ---

FakeCoordinator::FakeCoordinator(const config::RuntimePlan& plan) : plan_(plan) {}

std::unique_ptr<FakeCoordinator> FakeCoordinator::create(const config::RuntimePlan& plan) {
    auto coordinator = std::unique_ptr<FakeCoordinator>(new FakeCoordinator(plan));
    auto plane = control::ControlPlane::create();
    EXPECT_TRUE(plane.has_value());
    if (!plane) return nullptr;
    coordinator->plane_ = std::move(*plane);
    FakeCoordinator* self = coordinator.get();
    EXPECT_TRUE(coordinator->plane_
                    ->bind_pull(plan.coordinator_endpoint,
                                [self](proto::ControlMessage message) {
                                    {
                                        std::lock_guard lock(self->mutex_);
                                        self->messages_.push_back(std::move(message));
                                    }
                                    self->changed_.notify_all();
                                })
                    .has_value());
    EXPECT_TRUE(coordinator->plane_->bind_publisher(plan.abort_endpoint).has_value());
    EXPECT_TRUE(coordinator->plane_->start().has_value());
    return coordinator;
}

FakeCoordinator::~FakeCoordinator() { stop(); }

void FakeCoordinator::stop() {
    if (plane_) plane_->stop();
}

Status FakeCoordinator::submit(const std::string& stage, const std::string& request_id, Value data,
                               Value params) {
    StagePayload payload{.request_id = request_id,
                         .request = OmniRequest{.inputs = data, .params = std::move(params)},
                         .data = data};
    return send_to_stage(
        stage, proto::SubmitMessage{.request_id = request_id, .payload = std::move(payload)});
}

Status FakeCoordinator::send_to_stage(const std::string& stage,
                                      const proto::ControlMessage& message) {
    return plane_->send(plan_.find_stage(stage)->endpoint, message);
}

Status FakeCoordinator::send_bytes_to_stage(const std::string& stage,
                                            std::vector<std::uint8_t> bytes) {
    return plane_->send_bytes(plan_.find_stage(stage)->endpoint, std::move(bytes));
}

Status FakeCoordinator::abort(const std::string& request_id) {
    return plane_->publish(proto::AbortMessage{.request_id = request_id, .reason = "test"});
}

bool FakeCoordinator::wait_for_subscribers(std::size_t count) {
    return plane_->wait_for_subscribers(count, kHangGuard).has_value();
}

std::optional<proto::CompleteMessage> FakeCoordinator::wait_complete(
    const std::string& request_id, const std::string& from_stage) {
    std::unique_lock lock(mutex_);
    std::optional<proto::CompleteMessage> found;
    changed_.wait_for(lock, kHangGuard, [&] {
        for (const auto& message : messages_) {
            const auto* complete = std::get_if<proto::CompleteMessage>(&message);
            if (complete != nullptr && complete->request_id == request_id &&
                (from_stage.empty() || complete->from_stage == from_stage)) {
                found = *complete;
                return true;
            }
        }
        return false;
    });
    return found;
}

std::vector<proto::StreamMessage> FakeCoordinator::wait_streams(const std::string& request_id,
                                                                std::size_t count) {
    std::unique_lock lock(mutex_);
    std::vector<proto::StreamMessage> found;
    changed_.wait_for(lock, kHangGuard, [&] {
        found.clear();
        for (const auto& message : messages_) {
            const auto* stream = std::get_if<proto::StreamMessage>(&message);
            if (stream != nullptr && stream->request_id == request_id) found.push_back(*stream);
        }
        return found.size() >= count;
    });
    return found;
}

bool FakeCoordinator::wait_heartbeat(const std::string& stage) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kHangGuard, [&] {
        for (const auto& message : messages_) {
            const auto* beat = std::get_if<proto::HeartbeatMessage>(&message);
            if (beat != nullptr && beat->stage == stage) return true;
        }
        return false;
    });
}

std::vector<proto::CompleteMessage> FakeCoordinator::completes() const {
    std::lock_guard lock(mutex_);
    std::vector<proto::CompleteMessage> out;
    for (const auto& message : messages_) {
        if (const auto* complete = std::get_if<proto::CompleteMessage>(&message)) {
            out.push_back(*complete);
        }
    }
    return out;
}

std::size_t FakeCoordinator::completes_for(const std::string& request_id) const {
    std::size_t count = 0;
    for (const auto& complete : completes()) count += complete.request_id == request_id;
    return count;
}

// --- stages and payloads ---

StageUnderTest start_stage(const TestPlan& plan, const std::string& name, StageSetup setup) {
    StageUnderTest out;
    auto scheduler =
        std::make_unique<FakeScheduler>(std::move(setup.handler), setup.retain_payloads);
    out.scheduler = scheduler.get();
    out.tracer = std::make_shared<Tracer>(name);
    auto stage = Stage::create(StageOptions{.plan = plan.plan,
                                            .stage_name = name,
                                            .local = setup.local,
                                            .relay_timeout = setup.relay_timeout,
                                            .heartbeat_interval = setup.heartbeat_interval,
                                            .on_shutdown = std::move(setup.on_shutdown)},
                               std::move(scheduler), out.tracer);
    EXPECT_TRUE(stage.has_value()) << (stage ? "" : stage.error().message);
    if (!stage) {
        out.scheduler = nullptr;
        return out;
    }
    out.stage = std::move(*stage);
    auto started = out.stage->start();
    EXPECT_TRUE(started.has_value()) << (started ? "" : started.error().message);
    return out;
}

StagePayload tensor_payload(const std::string& request_id, std::size_t bytes) {
    std::vector<std::uint8_t> values(bytes);
    for (std::size_t i = 0; i < bytes; ++i) values[i] = static_cast<std::uint8_t>(i % 251);
    Map data;
    data["tensor"] = Tensor::from_vector(values);
    data["label"] = "payload";
    return StagePayload{.request_id = request_id, .data = std::move(data)};
}

bool has_pattern(const Tensor& tensor, std::size_t bytes) {
    if (!tensor.defined() || tensor.dtype() != DType::u8 || tensor.nbytes() != bytes) return false;
    const auto* data = tensor.data_as<std::uint8_t>();
    for (std::size_t i = 0; i < bytes; ++i) {
        if (data[i] != static_cast<std::uint8_t>(i % 251)) return false;
    }
    return true;
}

}  // namespace omnirt::pipeline::testing
