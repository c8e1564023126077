// put_async posts ProcessGroup::send, get_async posts ProcessGroup::recv, operations wait on the
// c10d Work.
//
// Tags and ordering. The sender numbers its transfers to each destination rank (see
// c10d_metadata.h); gloo matches a send to the receive of the same (peer, tag), so transfers
// between one pair may be received in any order and concurrently, and one that is never
// received holds up no other. Completion order between transfers is unspecified. (NCCL matches
// by order instead: see C10dGroup::ordered_matching.)
//
// Timeouts. Gloo's own wait timeout does not fail one transfer: it closes every connection of
// the process group ("Application timeout caused pair closure"). So it is never allowed to
// fire: wait() blocks in Work::wait in slices shorter than the transport timeout, each ended by
// Work::abort from the AbortTimer, and returns deadline_exceeded at the caller's deadline with
// the transfer still pending (a later wait may still succeed). A peer that dies closes its
// sockets, which fails the transfers waiting on it at once (unavailable).
//
// Zero-byte transfers never touch the wire: both sides complete them at once.
//
// Aborts. c10d cannot cancel a posted send or receive. cleanup() and close() make pending
// operations fail with aborted at once, but a transfer still posted in the transport keeps its
// Work, and so the memory the transport may still read or write, alive until close() (its
// unique tag keeps it from ever matching another transfer). On the normal path every transfer
// is waited for before cleanup, so nothing accumulates.
#include "relay/gloo/c10d_core.h"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "relay/gloo/abort_timer.h"
#include "relay/gloo/c10d_group.h"
#include "relay/gloo/c10d_metadata.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::relay {

using WorkPtr = c10::intrusive_ptr<c10d::Work>;

struct C10dTransferState {
    enum class State { pending, completed, failed, aborted };

    std::string request_id;
    std::string description;  // "gloo transfer tag 3 from rank 0 to rank 1 (4096 bytes)"
    bool is_send = false;
    std::mutex mutex;
    State state = State::pending;
    Error error;   // failed or aborted
    WorkPtr work;  // while posted; holds the at::Tensor over the transfer's memory
};

namespace {

using Clock = std::chrono::steady_clock;
using Transfer = C10dTransferState;
using State = C10dTransferState::State;

Clock::time_point deadline_after(Duration timeout) {
    constexpr Duration kLongest = std::chrono::hours(24 * 365);
    return Clock::now() + std::clamp(timeout, Duration::zero(), kLongest);
}

// The bytes of a contiguous tensor as a flat uint8 at::Tensor over the same memory.
Result<at::Tensor> byte_view(const Tensor& tensor) {
    OMNI_TRY(Tensor bytes, Tensor::from_storage(tensor.storage(), DType::u8,
                                                {static_cast<std::int64_t>(tensor.nbytes())}, {},
                                                tensor.storage_offset()));
    try {
        return torch_bridge::to_torch(bytes);
    } catch (...) {
        return fail(current_exception_error(ErrorCode::internal, "cannot view a tensor in torch"));
    }
}

// Wakes a thread blocked in work->wait (gloo). Never throws: c10d's default Work::abort does.
void wake_waiter(const WorkPtr& work) noexcept {
    try {
        work->abort();
    } catch (...) {
    }
}

// Fails a pending transfer with aborted and, with `wake` (gloo), wakes its waiter; polling
// waiters (nccl) see the state themselves, and NCCL's Work::abort would tear down the
// communicator. Returns the Work the transport may still touch (null when the transfer had
// finished); `release` also takes it out of the transfer.
WorkPtr abort_transfer(Transfer& transfer, const std::string& reason, bool release, bool wake) {
    WorkPtr work;
    {
        std::lock_guard lock(transfer.mutex);
        if (transfer.state != State::pending) return {};
        transfer.state = State::aborted;
        transfer.error =
            Error{ErrorCode::aborted, transfer.description + " was aborted: " + reason};
        work = release ? std::move(transfer.work) : transfer.work;
    }
    if (work && wake) wake_waiter(work);
    return work;
}

class CoreImpl final : public C10dCore {
  public:
    CoreImpl(RelayOptions options, C10dGroup group)
        : options_(std::move(options)),
          group_(std::move(group)),
          slice_(std::max(group_.transport_timeout / 2, Duration(1))),
          next_send_tag_(static_cast<std::size_t>(options_.world_size), 0),
          next_recv_tag_(static_cast<std::size_t>(options_.world_size), 0) {}
    ~CoreImpl() override { close(); }

    const RelayOptions& options() const override { return options_; }
    Capabilities capabilities() const override {
        return Capabilities{.zero_copy_receive = false,
                            .cross_host = true,
                            .needs_rank_topology = true,
                            .device_memory = !group_.device.is_cpu()};
    }

    Result<Sending> start_send(const Tensor& tensor, const std::string& request_id,
                               std::optional<std::int64_t> dst) override;
    Result<Receiving> start_recv(const Value& metadata, Tensor dest,
                                 const std::string& request_id) override;
    Status wait(const std::shared_ptr<Transfer>& transfer, Duration timeout) override;
    void cleanup(const std::string& request_id) override;
    void close() override;

  private:
    Status check_open() const;
    bool wakes() const { return group_.wait_mode == C10dWaitMode::abort_sliced; }
    Status check_tensor(const Tensor& tensor, const char* role) const;
    std::shared_ptr<Transfer> make_transfer(const std::string& request_id, bool is_send,
                                            std::int64_t src, std::int64_t dst, std::int64_t tag,
                                            std::size_t nbytes) const;
    Result<Tensor> allocate(const C10dMetadata& metadata) const;
    bool wait_once(const WorkPtr& work, Clock::time_point deadline);
    Status finish(const std::shared_ptr<Transfer>& transfer, Status outcome);

    const RelayOptions options_;
    C10dGroup group_;
    const Duration slice_;
    AbortTimer timer_;

    mutable std::mutex mutex_;
    bool closed_ = false;
    std::vector<std::int64_t> next_send_tag_;  // by destination rank
    std::vector<std::int64_t> next_recv_tag_;  // by source rank; ordered matching only
    // Transfers posted to the transport and not known to be finished, by request id.
    std::unordered_map<std::string, std::vector<std::shared_ptr<Transfer>>> pending_;
    // Aborted transfers the transport may still touch; released by close().
    std::vector<std::shared_ptr<Transfer>> orphans_;
};

Status CoreImpl::check_open() const {
    if (closed_) {
        return fail(ErrorCode::failed_precondition, options_.backend + " relay is closed");
    }
    return {};
}

Status CoreImpl::check_tensor(const Tensor& tensor, const char* role) const {
    std::string what = options_.backend + " relay " + role;
    if (!tensor.defined()) return fail(ErrorCode::invalid_argument, what + " is undefined");
    if (!tensor.is_contiguous()) {
        return fail(ErrorCode::invalid_argument, what + " must be contiguous");
    }
    if (tensor.device() != group_.device) {
        return fail(ErrorCode::invalid_argument, what + " is on " + tensor.device().to_string() +
                                                     " but this relay moves " +
                                                     group_.device.to_string() + " tensors");
    }
    return {};
}

std::shared_ptr<Transfer> CoreImpl::make_transfer(const std::string& request_id, bool is_send,
                                                  std::int64_t src, std::int64_t dst,
                                                  std::int64_t tag, std::size_t nbytes) const {
    auto transfer = std::make_shared<Transfer>();
    transfer->request_id = request_id;
    transfer->is_send = is_send;
    transfer->description = options_.backend + " transfer tag " + std::to_string(tag) +
                            " from rank " + std::to_string(src) + " to rank " +
                            std::to_string(dst) + " (" + std::to_string(nbytes) + " bytes)";
    if (nbytes == 0) transfer->state = State::completed;  // never on the wire
    return transfer;
}

Result<Tensor> CoreImpl::allocate(const C10dMetadata& metadata) const {
    try {
        auto options = at::TensorOptions()
                           .dtype(torch_bridge::to_scalar_type(metadata.dtype))
                           .device(torch_bridge::to_torch_device(group_.device));
        return torch_bridge::from_torch(at::empty(metadata.shape, options));
    } catch (...) {
        return fail(current_exception_error(
            ErrorCode::resource_exhausted,
            "could not allocate a destination of " + std::to_string(metadata.nbytes) + " bytes"));
    }
}

Result<C10dCore::Sending> CoreImpl::start_send(const Tensor& tensor, const std::string& request_id,
                                               std::optional<std::int64_t> dst) {
    const std::int64_t rank = options_.rank;
    if (!dst.has_value()) {
        return fail(ErrorCode::invalid_argument,
                    options_.backend +
                        " relay put_async needs dst_rank (the receiving stage's "
                        "relay rank from runtime prep)");
    }
    if (*dst < 0 || *dst >= options_.world_size || *dst == rank) {
        return fail(ErrorCode::invalid_argument,
                    options_.backend + " relay dst_rank " + std::to_string(*dst) +
                        " is not a peer of rank " + std::to_string(rank) +
                        " in a process group of " + std::to_string(options_.world_size));
    }
    OMNI_RETURN_IF_ERROR(check_tensor(tensor, "send tensor"));
    OMNI_TRY(at::Tensor bytes, byte_view(tensor));

    std::lock_guard lock(mutex_);
    OMNI_RETURN_IF_ERROR(check_open());
    auto& counter = next_send_tag_[static_cast<std::size_t>(*dst)];
    const std::int64_t tag = counter;
    counter = (counter + 1) % kC10dTagLimit;
    Sending sending{make_transfer(request_id, true, rank, *dst, tag, tensor.nbytes()),
                    to_metadata(C10dMetadata{.backend = options_.backend,
                                             .group = group_.id,
                                             .nbytes = tensor.nbytes(),
                                             .src_rank = rank,
                                             .dst_rank = *dst,
                                             .tag = tag,
                                             .dtype = tensor.dtype(),
                                             .shape = tensor.shape()})};
    if (tensor.nbytes() == 0) return sending;
    try {
        std::vector<at::Tensor> tensors{std::move(bytes)};
        sending.transfer->work =
            group_.process_group->send(tensors, static_cast<int>(*dst), static_cast<int>(tag));
    } catch (...) {
        return fail(current_exception_error(ErrorCode::unavailable,
                                            "could not start " + sending.transfer->description));
    }
    pending_[request_id].push_back(sending.transfer);
    return sending;
}

Result<C10dCore::Receiving> CoreImpl::start_recv(const Value& metadata_value, Tensor dest,
                                                 const std::string& request_id) {
    OMNI_TRY(C10dMetadata metadata, parse_metadata(metadata_value, options_.backend, group_.id,
                                                   options_.rank, options_.world_size));
    if (!dest.defined()) {
        OMNI_TRY(dest, allocate(metadata));
    }
    OMNI_RETURN_IF_ERROR(check_tensor(dest, "destination"));
    if (dest.read_only()) {
        return fail(ErrorCode::invalid_argument,
                    options_.backend + " relay destination is read-only");
    }
    if (dest.nbytes() != metadata.nbytes) {
        return fail(ErrorCode::invalid_argument,
                    options_.backend + " relay destination holds " + std::to_string(dest.nbytes()) +
                        " bytes but the transfer carries " + std::to_string(metadata.nbytes));
    }
    OMNI_TRY(at::Tensor bytes, byte_view(dest));

    std::lock_guard lock(mutex_);
    OMNI_RETURN_IF_ERROR(check_open());
    auto& expected = next_recv_tag_[static_cast<std::size_t>(metadata.src_rank)];
    if (group_.ordered_matching) {
        if (metadata.tag != expected) {
            return fail(ErrorCode::failed_precondition,
                        options_.backend + " matches transfers by order: expected tag " +
                            std::to_string(expected) + " from rank " +
                            std::to_string(metadata.src_rank) + ", got " +
                            std::to_string(metadata.tag) +
                            " (receive in the order the sender put)");
        }
        expected = (expected + 1) % kC10dTagLimit;
    }
    Receiving receiving{make_transfer(request_id, false, metadata.src_rank, options_.rank,
                                      metadata.tag, metadata.nbytes),
                        std::move(dest)};
    if (metadata.nbytes == 0) return receiving;
    try {
        std::vector<at::Tensor> tensors{std::move(bytes)};
        receiving.transfer->work = group_.process_group->recv(
            tensors, static_cast<int>(metadata.src_rank), static_cast<int>(metadata.tag));
    } catch (...) {
        return fail(current_exception_error(ErrorCode::unavailable,
                                            "could not start " + receiving.transfer->description));
    }
    pending_[request_id].push_back(receiving.transfer);
    return receiving;
}

// One bounded wait: true when `work` finished, false when the slice ended or an abort woke it.
// Throws what the transport reports.
bool CoreImpl::wait_once(const WorkPtr& work, Clock::time_point deadline) {
    if (group_.wait_mode == C10dWaitMode::poll_completion) {
        // One CUDA event query per poll; the back-off keeps a long wait cheap. Returns every
        // few milliseconds so that the caller sees aborts.
        const auto slice_end = std::min(deadline, Clock::now() + std::chrono::milliseconds(8));
        auto pause = std::chrono::microseconds(20);
        while (Clock::now() < slice_end) {
            if (work->isCompleted()) {
                if (!work->isSuccess()) std::rethrow_exception(work->exception());
                return true;
            }
            std::this_thread::sleep_for(pause);
            pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
        }
        return false;
    }
    const auto slice_end = std::min(deadline, Clock::now() + slice_);
    auto ticket = timer_.arm(slice_end, [work] { wake_waiter(work); });
    bool done = false;
    try {
        done = work->wait(::kNoTimeout);  // gloo: the transport timeout, never reached
    } catch (...) {
        timer_.disarm(ticket);
        throw;
    }
    timer_.disarm(ticket);
    return done;
}

Status CoreImpl::wait(const std::shared_ptr<Transfer>& transfer, Duration timeout) {
    const auto deadline = deadline_after(timeout);
    for (;;) {
        WorkPtr work;
        {
            std::lock_guard lock(transfer->mutex);
            switch (transfer->state) {
                case State::completed:
                    return {};
                case State::failed:
                case State::aborted:
                    return fail(transfer->error);
                case State::pending:
                    work = transfer->work;
                    break;
            }
        }
        bool done = false;
        try {
            done = wait_once(work, deadline);
        } catch (...) {
            return finish(transfer,
                          fail(current_exception_error(ErrorCode::unavailable,
                                                       transfer->description + " failed")));
        }
        if (done) return finish(transfer, {});
        {
            std::lock_guard lock(transfer->mutex);
            if (transfer->state != State::pending) continue;  // aborted meanwhile
        }
        if (Clock::now() >= deadline) {
            return fail(
                ErrorCode::deadline_exceeded,
                transfer->description + " did not complete within " +
                    std::to_string(timeout.count()) + " ms" +
                    (transfer->is_send ? " (has the receiver called get_async with its metadata?)"
                                       : " (is the sender alive, and did it put this transfer?)"));
        }
    }
}

// Records the outcome of a finished transfer and lets go of its Work (and memory).
Status CoreImpl::finish(const std::shared_ptr<Transfer>& transfer, Status outcome) {
    WorkPtr work;
    {
        std::lock_guard lock(transfer->mutex);
        if (transfer->state != State::pending) {
            if (transfer->state == State::completed) return {};
            return fail(transfer->error);
        }
        transfer->state = outcome ? State::completed : State::failed;
        if (!outcome) transfer->error = outcome.error();
        work = std::move(transfer->work);
    }
    std::lock_guard lock(mutex_);
    if (auto it = pending_.find(transfer->request_id); it != pending_.end()) {
        std::erase(it->second, transfer);
        if (it->second.empty()) pending_.erase(it);
    }
    return outcome;
}

void CoreImpl::cleanup(const std::string& request_id) {
    std::vector<std::shared_ptr<Transfer>> transfers;
    {
        std::lock_guard lock(mutex_);
        auto it = pending_.find(request_id);
        if (it == pending_.end()) return;
        transfers = std::move(it->second);
        pending_.erase(it);
    }
    std::vector<std::shared_ptr<Transfer>> orphans;
    for (auto& transfer : transfers) {
        if (abort_transfer(*transfer, "cleanup(" + request_id + ")", false, wakes())) {
            orphans.push_back(transfer);
        }
    }
    std::lock_guard lock(mutex_);
    if (!closed_) {
        orphans_.insert(orphans_.end(), orphans.begin(), orphans.end());
        return;
    }
    // close() ran meanwhile and released the transport: let go of these Works too.
    for (auto& orphan : orphans) {
        std::lock_guard orphan_lock(orphan->mutex);
        orphan->work.reset();
    }
}

void CoreImpl::close() {
    std::vector<std::shared_ptr<Transfer>> transfers;
    c10::intrusive_ptr<torch_bridge::C10dBackend> process_group;
    {
        std::lock_guard lock(mutex_);
        if (closed_) return;
        closed_ = true;
        for (auto& [request_id, list] : pending_) {
            transfers.insert(transfers.end(), list.begin(), list.end());
        }
        transfers.insert(transfers.end(), orphans_.begin(), orphans_.end());
        pending_.clear();
        orphans_.clear();
        process_group = std::move(group_.process_group);
    }
    for (auto& transfer : transfers) {
        abort_transfer(*transfer, "the relay was closed", true, wakes());
        std::lock_guard lock(transfer->mutex);
        transfer->work.reset();  // orphans were aborted earlier and still hold theirs
    }
    // The connections close once the process group and the last Work are gone (a waiter woken
    // above may hold one for a moment); the peers' pending transfers then fail.
    process_group.reset();
}

}  // namespace

Result<std::shared_ptr<C10dCore>> C10dCore::join(const RelayOptions& options,
                                                 const C10dOptions& c10d) {
    Result<C10dGroup> group = fail(ErrorCode::invalid_argument,
                                   "relay backend '" + options.backend + "' is not a c10d backend");
    if (options.backend == "gloo") {
        group = join_gloo_group(options, c10d);
    } else if (options.backend == "nccl") {
#ifdef USE_C10D_NCCL
        group = join_nccl_group(options, c10d);
#else
        return fail(ErrorCode::unimplemented,
                    "relay backend 'nccl' needs a CUDA build of libtorch; this build has none");
#endif
    }
    if (!group) return fail(std::move(group).error());
    return std::shared_ptr<C10dCore>(std::make_shared<CoreImpl>(options, std::move(*group)));
}

}  // namespace omnirt::relay
