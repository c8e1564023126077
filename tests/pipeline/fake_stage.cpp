#include "pipeline/fake_stage.h"

#include <unistd.h>

#include <filesystem>
#include <thread>
#include <variant>

namespace omnirt::pipeline::testing {

FakeStage::FakeStage(std::string name, std::string coordinator_endpoint, Responder responder)
    : name_(std::move(name)),
      coordinator_endpoint_(std::move(coordinator_endpoint)),
      responder_(std::move(responder)) {}

std::unique_ptr<FakeStage> FakeStage::create(std::string name, const std::string& stage_endpoint,
                                             const std::string& abort_endpoint,
                                             std::string coordinator_endpoint,
                                             Responder responder) {
    std::unique_ptr<FakeStage> stage(
        new FakeStage(std::move(name), std::move(coordinator_endpoint), std::move(responder)));
    auto plane = control::ControlPlane::create();
    EXPECT_TRUE(plane.has_value());
    if (!plane) return nullptr;
    stage->plane_ = std::move(*plane);
    FakeStage* self = stage.get();
    auto bound = stage->plane_->bind_pull(stage_endpoint, [self](proto::ControlMessage message) {
        self->record(std::move(message));
    });
    EXPECT_TRUE(bound.has_value()) << bound.error().to_string();
    auto subscribed = stage->plane_->subscribe(
        abort_endpoint, [self](proto::ControlMessage m) { self->record_abort(std::move(m)); });
    EXPECT_TRUE(subscribed.has_value()) << subscribed.error().to_string();
    auto started = stage->plane_->start();
    EXPECT_TRUE(started.has_value());
    if (!bound || !subscribed || !started) return nullptr;
    return stage;
}

FakeStage::~FakeStage() { stop(); }

void FakeStage::stop() {
    if (plane_) plane_->stop(Duration(0));
}

void FakeStage::record(proto::ControlMessage message) {
    {
        std::lock_guard lock(mutex_);
        messages_.push_back(message);
        changed_.notify_all();
    }
    if (responder_) responder_(*this, message);
}

void FakeStage::record_abort(proto::ControlMessage message) {
    std::lock_guard lock(mutex_);
    if (auto* pause = std::get_if<proto::PauseMessage>(&message)) {
        pauses_.push_back(std::move(*pause));
        changed_.notify_all();
        return;
    }
    auto* abort = std::get_if<proto::AbortMessage>(&message);
    EXPECT_NE(abort, nullptr) << "only aborts and pauses are broadcast";
    if (abort == nullptr) return;
    aborts_.push_back(std::move(*abort));
    changed_.notify_all();
}

bool FakeStage::wait_for_pauses(std::size_t count, Duration timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return pauses_.size() >= count; });
}

std::vector<proto::PauseMessage> FakeStage::pauses() const {
    std::lock_guard lock(mutex_);
    return pauses_;
}

bool FakeStage::wait_for_messages(std::size_t count, Duration timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return messages_.size() >= count; });
}

bool FakeStage::wait_for_aborts(std::size_t count, Duration timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return aborts_.size() >= count; });
}

std::vector<proto::ControlMessage> FakeStage::messages() const {
    std::lock_guard lock(mutex_);
    return messages_;
}

std::vector<proto::SubmitMessage> FakeStage::submits() const {
    std::vector<proto::SubmitMessage> submits;
    std::lock_guard lock(mutex_);
    for (const auto& message : messages_) {
        if (auto* submit = std::get_if<proto::SubmitMessage>(&message)) submits.push_back(*submit);
    }
    return submits;
}

std::vector<proto::AbortMessage> FakeStage::aborts() const {
    std::lock_guard lock(mutex_);
    return aborts_;
}

Status FakeStage::send(const proto::ControlMessage& message) {
    return plane_->send(coordinator_endpoint_, message);
}

Status FakeStage::send_bytes(std::vector<std::uint8_t> bytes) {
    return plane_->send_bytes(coordinator_endpoint_, std::move(bytes));
}

Status FakeStage::complete(const std::string& request_id, StagePayload result) {
    return send(proto::CompleteMessage{
        .request_id = request_id, .from_stage = name_, .ok = true, .result = std::move(result)});
}

Status FakeStage::complete_with_error(const std::string& request_id, Error error) {
    return send(proto::CompleteMessage{
        .request_id = request_id, .from_stage = name_, .ok = false, .error = std::move(error)});
}

Status FakeStage::chunk(const std::string& request_id, std::int64_t index, Value chunk,
                        Value metadata) {
    return send(proto::StreamMessage{.request_id = request_id,
                                     .from_stage = name_,
                                     .chunk_index = index,
                                     .chunk = std::move(chunk),
                                     .metadata = std::move(metadata)});
}

Status FakeStage::heartbeat(std::int64_t queue_depth, std::int64_t active, std::int64_t processed) {
    return send(proto::HeartbeatMessage{.stage = name_,
                                        .pid = static_cast<std::int64_t>(::getpid()),
                                        .queue_depth = queue_depth,
                                        .active_requests = active,
                                        .processed = processed});
}

FakeStage::Responder echo_responder() {
    return [](FakeStage& stage, const proto::ControlMessage& message) {
        if (auto* submit = std::get_if<proto::SubmitMessage>(&message)) {
            // Refused only while the fake is stopping (the test may end before every reply).
            (void)stage.complete(submit->request_id, submit->payload);
        }
    };
}

EventCallback EventLog::callback() {
    return [this](RequestEvent event) {
        std::lock_guard lock(mutex_);
        if (event.terminal()) ++terminals_;
        events_.push_back(std::move(event));
        changed_.notify_all();
    };
}

bool EventLog::wait_for_terminals(std::size_t count, Duration timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return terminals_ >= count; });
}

bool EventLog::wait_for_events(std::size_t count, Duration timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return events_.size() >= count; });
}

std::vector<RequestEvent> EventLog::events() const {
    std::lock_guard lock(mutex_);
    return events_;
}

std::vector<RequestEvent> EventLog::events_for(const std::string& request_id) const {
    std::vector<RequestEvent> selected;
    std::lock_guard lock(mutex_);
    for (const auto& event : events_) {
        if (event.request_id == request_id) selected.push_back(event);
    }
    return selected;
}

std::size_t EventLog::terminal_count() const {
    std::lock_guard lock(mutex_);
    return terminals_;
}

std::size_t thread_count() { return directory_entries("/proc/self/task"); }

std::size_t directory_entries(const std::string& path) {
    std::size_t count = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(path)) ++count;
    return count;
}

void CoordinatorTest::SetUp() {
    // Sanitizer runtimes start a background thread with the process's first thread: start it
    // now so that it is not counted as a leak (and wait for the joined thread to leave).
    threads_before_ = omnirt::testing::thread_count_after_warm_up();
    auto dir = config::RuntimeDirectory::create(::testing::TempDir());
    ASSERT_TRUE(dir.has_value());
    dir_ = std::move(*dir);
}

void CoordinatorTest::TearDown() {
    if (coordinator_) coordinator_->stop();
    coordinator_.reset();
    stages_.clear();
    EXPECT_EQ(directory_entries(dir_->path()), 0u) << "ipc sockets left in " << dir_->path();
    EXPECT_TRUE(thread_count_settles_to(threads_before_))
        << "threads left running: " << thread_count() << " vs " << threads_before_;
    dir_.reset();
}

std::string CoordinatorTest::ipc(const std::string& name) const {
    return "ipc://" + dir_->path() + "/" + name;
}

CoordinatorOptions CoordinatorTest::options(const std::vector<std::string>& stages,
                                            const std::vector<std::string>& terminals) const {
    CoordinatorOptions options{.coordinator_endpoint = ipc("coordinator.sock"),
                               .abort_endpoint = ipc("abort.sock"),
                               .entry_stage = stages.empty() ? std::string() : stages.front(),
                               .terminal_stages = terminals};
    for (const auto& stage : stages) options.stage_endpoints[stage] = ipc(stage + ".sock");
    return options;
}

Coordinator& CoordinatorTest::start(CoordinatorOptions options) {
    options_ = options;
    auto coordinator = Coordinator::create(std::move(options));
    EXPECT_TRUE(coordinator.has_value()) << coordinator.error().to_string();
    coordinator_ = std::move(*coordinator);
    auto started = coordinator_->start();
    EXPECT_TRUE(started.has_value()) << started.error().to_string();
    return *coordinator_;
}

FakeStage& CoordinatorTest::add_stage(const std::string& stage, FakeStage::Responder responder) {
    auto fake =
        FakeStage::create(stage, options_.stage_endpoints.at(stage), options_.abort_endpoint,
                          options_.coordinator_endpoint, std::move(responder));
    OMNI_CHECK(fake != nullptr, "fake stage creation failed");
    auto& slot = stages_[stage];
    slot = std::move(fake);
    return *slot;
}

void CoordinatorTest::wait_for_stages() {
    auto joined = coordinator_->wait_for_stages(stages_.size(), kHangGuard);
    ASSERT_TRUE(joined.has_value()) << joined.error().to_string();
}

OmniRequest make_request(Value inputs) { return OmniRequest{.inputs = std::move(inputs)}; }

}  // namespace omnirt::pipeline::testing
