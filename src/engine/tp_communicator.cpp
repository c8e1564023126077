#include "engine/tp_communicator.h"
#include "core/log.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "torch_bridge/c10d_backend.h"
#include "torch_bridge/torch_errors.h"

namespace omnirt::engine {
namespace {

using torch_bridge::current_exception_text;
using torch_bridge::mentions_timeout;

constexpr std::string_view kFileScheme = "file://";
constexpr std::string_view kTcpScheme = "tcp://";
// Keys of the group live under this prefix of the rendezvous store.
constexpr const char* kStorePrefix = "omnirt_tp";

struct TcpAddress {
    std::string host;
    std::uint16_t port = 0;
};

std::optional<TcpAddress> parse_tcp(std::string_view address) {
    const auto colon = address.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return std::nullopt;
    std::string_view host = address.substr(0, colon);
    const std::string_view digits = address.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
    }
    unsigned port = 0;
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (host.empty() || error != std::errc() || end != digits.data() + digits.size() || port == 0 ||
        port > 65535) {
        return std::nullopt;
    }
    return TcpAddress{std::string(host), static_cast<std::uint16_t>(port)};
}

bool is_loopback(const std::string& host) {
    return host == "localhost" || host.starts_with("127.") || host == "::1";
}

// Wakes the engine thread when a gloo collective finishes, or when cancel() gives up on it.
struct Waiter {
    std::mutex mutex;
    std::condition_variable changed;
    bool done = false;
    bool cancelled = false;
};

}  // namespace

struct C10dTpGroup::State {
    TpGroupOptions options;
    std::string who;  // "<name> TP group (rank r of n, rendezvous ...)"
    c10::intrusive_ptr<torch_bridge::C10dBackend> group;
    bool host_staging = false;  // gloo with tensors off the CPU: collectives on host copies

    std::mutex mutex;
    std::shared_ptr<Waiter> waiter;  // of the collective in flight
    bool cancelled = false;
    bool abandoned = false;             // a collective was left in flight by cancel()
    std::optional<std::string> broken;  // the first failure

    // Blocks until `work` finished; throws TpCollectiveError (and marks the group broken) when
    // it failed or was cancelled.
    void wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) {
        if (!host_staging && options.device.is_cuda()) {
            // NCCL: wait() orders the current stream after the collective; it does not block
            // the host.
            try {
                work->wait();
            } catch (...) {
                fail_with(what + " failed: " + current_exception_text());
            }
            return;
        }
        auto waiting = std::make_shared<Waiter>();
        {
            std::lock_guard lock(mutex);
            if (cancelled) fail_locked(what + " was cancelled (the stage is stopping)");
            waiter = waiting;
        }
        work->getFuture()->addCallback([waiting](c10::ivalue::Future&) {
            {
                std::lock_guard lock(waiting->mutex);
                waiting->done = true;
            }
            waiting->changed.notify_all();
        });
        bool done = false;
        {
            std::unique_lock lock(waiting->mutex);
            waiting->changed.wait(lock, [&] { return waiting->done || waiting->cancelled; });
            done = waiting->done;
        }
        {
            std::lock_guard lock(mutex);
            waiter.reset();
            if (!done) {
                abandoned = true;
                fail_locked(what + " was cancelled (the stage is stopping)");
            }
        }
        auto future = work->getFuture();
        if (future->hasError()) {
            fail_with(what + " failed: " + first_line(future->tryRetrieveErrorMessage()));
        }
    }

    static std::string first_line(std::string text) {
        if (const auto newline = text.find('\n'); newline != std::string::npos) {
            text.resize(newline);
        }
        return text;
    }

    void check_usable(const std::string& what) {
        std::lock_guard lock(mutex);
        if (!group) fail_locked(what + ": the group is not connected");
        if (broken) fail_locked(what + ": the group failed earlier: " + *broken);
        if (cancelled) fail_locked(what + " was cancelled (the stage is stopping)");
    }

    [[noreturn]] void fail_with(const std::string& message) {
        std::lock_guard lock(mutex);
        fail_locked(message);
    }

    [[noreturn]] void fail_locked(const std::string& message) {
        if (!broken) broken = message;
        throw TpCollectiveError(who + ": " + message);
    }

    // The tensor a collective runs on: `tensor` itself, or a host copy.
    at::Tensor staged(const at::Tensor& tensor) const {
        return host_staging ? tensor.to(at::kCPU) : tensor;
    }
};

Result<std::shared_ptr<C10dTpGroup>> C10dTpGroup::create(TpGroupOptions options) {
    const std::string who = options.name + " TP group (rank " + std::to_string(options.rank) +
                            " of " + std::to_string(options.size) + ", rendezvous " +
                            options.rendezvous + ")";
    auto invalid = [&](const std::string& why) {
        return fail(ErrorCode::invalid_argument, who + ": " + why);
    };
    if (options.size < 2) return invalid("a TP group needs at least 2 ranks");
    if (options.rank < 0 || options.rank >= options.size) return invalid("rank out of range");
    if (options.timeout <= std::chrono::milliseconds::zero()) return invalid("timeout must be > 0");
    const std::string_view rendezvous = options.rendezvous;
    const bool file = rendezvous.starts_with(kFileScheme) && rendezvous.size() > kFileScheme.size();
    const bool tcp = rendezvous.starts_with(kTcpScheme) &&
                     parse_tcp(rendezvous.substr(kTcpScheme.size())).has_value();
    if (!file && !tcp) return invalid("the rendezvous must be file://<path> or tcp://host:port");
    auto state = std::make_unique<State>();
    state->options = std::move(options);
    state->who = who;
    return std::shared_ptr<C10dTpGroup>(new C10dTpGroup(std::move(state)));
}

C10dTpGroup::C10dTpGroup(std::unique_ptr<State> state) : state_(std::move(state)) {}

C10dTpGroup::~C10dTpGroup() {
    if (state_->abandoned && state_->group) {
        log::warn(state_->who +
                  ": leaking the process group of a cancelled collective (destroying it would "
                  "wait for gloo's timeout)");
        static_cast<void>(state_->group.release());
    }
}

int C10dTpGroup::rank() const { return state_->options.rank; }

int C10dTpGroup::size() const { return state_->options.size; }

Result<std::uint64_t> C10dTpGroup::connect(std::uint64_t seed_state) {
    State& s = *state_;
    const TpGroupOptions& options = s.options;
    const auto start = std::chrono::steady_clock::now();
    const std::string_view rendezvous = options.rendezvous;
    try {
        c10::intrusive_ptr<c10d::Store> store;
        bool local = true;
        if (rendezvous.starts_with(kFileScheme)) {
            store = c10::make_intrusive<c10d::FileStore>(
                std::string(rendezvous.substr(kFileScheme.size())), options.size);
        } else {
            const TcpAddress address = *parse_tcp(rendezvous.substr(kTcpScheme.size()));
            local = is_loopback(address.host);
            c10d::TCPStoreOptions tcp;
            tcp.port = address.port;
            tcp.isServer = options.rank == 0;
            tcp.numWorkers = static_cast<std::size_t>(options.size);
            tcp.waitWorkers = false;  // the process group's rendezvous waits for everyone
            tcp.timeout = options.timeout;
            store = c10::make_intrusive<c10d::TCPStore>(address.host, tcp);
        }
        store->setTimeout(options.timeout);
        auto prefixed = c10::make_intrusive<c10d::PrefixStore>(kStorePrefix, store);
#ifdef USE_C10D_NCCL
        if (options.device.is_cuda()) {
            auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
            nccl_options->timeout = options.timeout;
            s.group = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, options.rank,
                                                                  options.size, nccl_options);
        }
#endif
        if (!s.group) {
            auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
            if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
                interface != nullptr && *interface != '\0') {
                gloo_options->devices.push_back(
                    c10d::ProcessGroupGloo::createDeviceForInterface(interface));
            } else if (!options.listen_host.empty()) {
                gloo_options->devices.push_back(
                    c10d::ProcessGroupGloo::createDeviceForHostname(options.listen_host));
            } else if (local) {
                // A file store or a loopback address: the ranks share this host.
                gloo_options->devices.push_back(
                    c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
            } else {
                gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
            }
            gloo_options->threads = 1;  // one engine thread issues every collective
            // Connects every pair of ranks: returns once all of them have joined.
            s.group = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, options.rank,
                                                                  options.size, gloo_options);
            s.host_staging = !options.device.is_cpu();
        }
    } catch (...) {
        const std::string text = current_exception_text();
        const bool timed_out =
            mentions_timeout(text) || std::chrono::steady_clock::now() - start >= options.timeout;
        return fail(timed_out ? ErrorCode::deadline_exceeded : ErrorCode::unavailable,
                    s.who + ": the ranks did not all join within " +
                        std::to_string(options.timeout.count()) +
                        " ms (did every rank start, with the same rendezvous?): " + text);
    }
    // Rank 0's seed state, so that every rank draws the same seeds for unseeded requests.
    try {
        at::Tensor seed = at::tensor({static_cast<std::int64_t>(seed_state)}, at::kLong);
        std::vector<at::Tensor> tensors{s.staged(seed.to(s.options.device))};
        s.wait(s.group->broadcast(tensors, c10d::BroadcastOptions{.rootRank = 0}),
               "broadcasting the seed");
        return static_cast<std::uint64_t>(tensors[0].to(at::kCPU).item<std::int64_t>());
    } catch (const TpCollectiveError& error) {
        return fail(ErrorCode::unavailable, error.what());
    }
}

Result<LockstepDecision> C10dTpGroup::agree(const LockstepProposal& proposal) {
    State& s = *state_;
    constexpr std::int64_t kFields = 4;  // received, stopping, abort bytes, digest
    std::string aborts;
    for (const std::string& id : proposal.aborts) {
        aborts += id;
        aborts.push_back('\0');
    }
    try {
        s.check_usable("agreeing on a step");
        const at::Tensor mine = at::tensor(
            {static_cast<std::int64_t>(proposal.received_messages),
             static_cast<std::int64_t>(proposal.stopping ? 1 : 0),
             s.options.rank == 0 ? static_cast<std::int64_t>(aborts.size()) : std::int64_t{0},
             static_cast<std::int64_t>(proposal.state_digest)},
            at::kLong);
        const at::Tensor all = all_gather(mine.to(s.options.device)).to(at::kCPU).contiguous();
        const std::int64_t* rows = all.data_ptr<std::int64_t>();
        LockstepDecision decision;
        decision.messages = static_cast<std::uint64_t>(rows[0]);
        for (int rank = 0; rank < s.options.size; ++rank) {
            const std::int64_t* row = rows + rank * kFields;
            decision.messages = std::min(decision.messages, static_cast<std::uint64_t>(row[0]));
            if (row[1] != 0 && !decision.stop) {
                decision.stop = true;
                decision.stopping_rank = rank;
            }
            if (row[3] != rows[3]) decision.diverged = true;
        }
        const std::int64_t abort_bytes = rows[2];
        if (abort_bytes > 0) {
            at::Tensor bytes = at::empty({abort_bytes}, at::kByte);
            if (s.options.rank == 0) std::memcpy(bytes.data_ptr(), aborts.data(), aborts.size());
            std::vector<at::Tensor> tensors{bytes.to(s.options.device)};
            s.wait(s.group->broadcast(tensors, c10d::BroadcastOptions{.rootRank = 0}),
                   "broadcasting rank 0's aborts");
            const at::Tensor received = tensors[0].to(at::kCPU).contiguous();
            const char* text = reinterpret_cast<const char*>(received.data_ptr());
            std::string id;
            for (std::int64_t i = 0; i < abort_bytes; ++i) {
                if (text[i] == '\0') {
                    decision.aborts.push_back(std::move(id));
                    id.clear();
                } else {
                    id.push_back(text[i]);
                }
            }
        }
        return decision;
    } catch (const TpCollectiveError& error) {
        return fail(ErrorCode::unavailable, error.what());
    } catch (...) {
        return fail(ErrorCode::internal,
                    s.who + ": agreeing on a step: " + current_exception_text());
    }
}

void C10dTpGroup::cancel() {
    std::shared_ptr<Waiter> waiting;
    {
        std::lock_guard lock(state_->mutex);
        state_->cancelled = true;
        waiting = state_->waiter;
    }
    if (!waiting) return;
    {
        std::lock_guard lock(waiting->mutex);
        waiting->cancelled = true;
    }
    waiting->changed.notify_all();
}

void C10dTpGroup::all_reduce_sum(at::Tensor& tensor) {
    State& s = *state_;
    s.check_usable("all-reduce");
    const bool narrow_float =
        tensor.scalar_type() == at::kBFloat16 || tensor.scalar_type() == at::kHalf;
    at::Tensor work_tensor;
    try {
        work_tensor = s.staged(narrow_float ? tensor.to(at::kFloat) : tensor).contiguous();
    } catch (...) {
        s.fail_with("all-reduce: " + current_exception_text());
    }
    std::vector<at::Tensor> tensors{work_tensor};
    c10::intrusive_ptr<c10d::Work> work;
    try {
        work = s.group->allreduce(tensors, c10d::AllreduceOptions{.reduceOp = c10d::ReduceOp::SUM});
    } catch (...) {
        s.fail_with("all-reduce failed: " + current_exception_text());
    }
    s.wait(work, "all-reduce of " + std::to_string(tensor.numel()) + " values");
    if (!tensors[0].is_same(tensor)) tensor.copy_(tensors[0]);
}

at::Tensor C10dTpGroup::all_gather(const at::Tensor& tensor) {
    State& s = *state_;
    s.check_usable("all-gather");
    std::vector<at::Tensor> input;
    std::vector<std::vector<at::Tensor>> output(1);
    try {
        input.push_back(s.staged(tensor).contiguous());
        for (int rank = 0; rank < s.options.size; ++rank) {
            output[0].push_back(at::empty_like(input[0]));
        }
    } catch (...) {
        s.fail_with("all-gather: " + current_exception_text());
    }
    c10::intrusive_ptr<c10d::Work> work;
    try {
        work = s.group->allgather(output, input);
    } catch (...) {
        s.fail_with("all-gather failed: " + current_exception_text());
    }
    s.wait(work, "all-gather of " + std::to_string(tensor.numel()) + " values");
    return at::stack(output[0]).to(tensor.device());
}

}  // namespace omnirt::engine
