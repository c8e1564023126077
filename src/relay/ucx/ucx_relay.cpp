#include "relay/ucx/ucx_relay.h"

#include <unistd.h>

#include <atomic>
#include <mutex>
#include <random>

#include "relay/registry.h"
#include "relay/ucx/ucx_engine.h"
#include "relay/ucx/ucx_metadata.h"
#include "relay/ucx/ucx_send_memory.h"

namespace omnirt::relay {
namespace {

using ucx::Completion;

std::string describe_timeout(Duration timeout) { return std::to_string(timeout.count()) + " ms"; }

class UcxPutOperation final : public PutOperation {
  public:
    UcxPutOperation(Value metadata, std::shared_ptr<Completion> done, std::int64_t transfer_id,
                    std::size_t nbytes)
        : metadata_(std::move(metadata)),
          done_(std::move(done)),
          transfer_id_(transfer_id),
          nbytes_(nbytes) {}

    const Value& metadata() const override { return metadata_; }

    Status wait_for_completion(Duration timeout) override {
        auto status = done_->wait(timeout);
        if (status) return *status;
        return fail(ErrorCode::deadline_exceeded,
                    "ucx relay: the receiver has not confirmed transfer " +
                        std::to_string(transfer_id_) + " (" + std::to_string(nbytes_) +
                        " bytes) within " + describe_timeout(timeout));
    }

  private:
    Value metadata_;
    std::shared_ptr<Completion> done_;
    std::int64_t transfer_id_;
    std::size_t nbytes_;
};

class UcxGetOperation final : public GetOperation {
  public:
    UcxGetOperation(Tensor dest, std::shared_ptr<Completion> done, std::string sender)
        : dest_(std::move(dest)), done_(std::move(done)), sender_(std::move(sender)) {}

    Status wait_for_completion(Duration timeout) override {
        auto status = done_->wait(timeout);
        if (status) return *status;
        return fail(ErrorCode::deadline_exceeded,
                    "ucx relay: reading " + std::to_string(dest_.nbytes()) +
                        " bytes from sender '" + sender_ + "' did not finish within " +
                        describe_timeout(timeout));
    }

    Tensor tensor() const override { return dest_; }

  private:
    Tensor dest_;
    std::shared_ptr<Completion> done_;
    std::string sender_;
};

// Thread safety: every method may be called from any thread (relay.h).
class UcxRelay final : public Relay {
  public:
    static Result<std::unique_ptr<Relay>> create(const RelayOptions& options) {
        if (!options.device.is_cpu()) {
            return fail(ErrorCode::unimplemented,
                        "ucx relay moves host memory only; device " + options.device.to_string() +
                            " would need a CUDA-enabled UCX and libtorch");
        }
        if (options.credits <= 0 || options.slot_bytes == 0) {
            return fail(ErrorCode::invalid_argument,
                        "ucx relay needs slot_bytes > 0 and credits > 0, got slot_bytes " +
                            std::to_string(options.slot_bytes) + " and credits " +
                            std::to_string(options.credits));
        }
        std::string name = options.name.empty() ? "ucx" : options.name;
        OMNI_TRY(auto context, ucx::Context::create(name));
        OMNI_TRY(auto memory, ucx::SendMemory::create(context, options.slot_bytes,
                                                      static_cast<std::size_t>(options.credits)));
        OMNI_TRY(auto engine, ucx::Engine::create(context, name));
        char host[256] = {};
        ::gethostname(host, sizeof host - 1);
        std::string label = name + "@" + host + ":" + std::to_string(::getpid());
        return std::unique_ptr<Relay>(
            new UcxRelay(std::move(label), std::move(memory), std::move(engine)));
    }

    ~UcxRelay() override { close(); }

    std::string_view backend() const override { return ucx::kBackendName; }

    Capabilities capabilities() const override {
        return Capabilities{.zero_copy_receive = false,
                            .cross_host = true,
                            .needs_rank_topology = false,
                            .device_memory = false,
                            .credit_flow_control = true};
    }

    Result<Tensor> allocate_send_buffer(std::size_t nbytes) override {
        OMNI_RETURN_IF_ERROR(check_open());
        return memory_->allocate(nbytes);
    }

    Result<std::unique_ptr<PutOperation>> put_async(const Tensor& tensor,
                                                    const std::string& request_id,
                                                    std::optional<std::int64_t>) override {
        OMNI_RETURN_IF_ERROR(check_open());
        if (!tensor.defined()) {
            return fail(ErrorCode::invalid_argument, "ucx relay: put_async of an undefined tensor");
        }
        if (!tensor.device().is_cpu()) {
            return fail(ErrorCode::invalid_argument,
                        "ucx relay moves host tensors; got one on " + tensor.device().to_string());
        }
        ucx::TransferDescriptor d{.nbytes = tensor.nbytes(),
                                  .address = engine_->worker_address(),
                                  .sender = label_,
                                  .host = ucx::local_host_id()};
        auto done = std::make_shared<Completion>();
        if (d.nbytes == 0) {  // nothing to read: no memory, no completion message
            done->set(ok_status());
            return std::make_unique<UcxPutOperation>(ucx::encode_metadata(d), done, 0, 0);
        }
        OMNI_TRY(ucx::StagedSource staged, memory_->stage(tensor));
        const ucx::MemoryRegion& region = *staged.region;
        d.rkey = region.packed_rkey();
        d.remote_addr = reinterpret_cast<std::uintptr_t>(staged.tensor.data());
        d.shm_pid = ::getpid();
        d.shm_pid_namespace = ucx::pid_namespace_id();
        d.shm_fd = region.shared().fd();
        d.shm_region = region.shared().region_id();
        d.shm_offset = static_cast<std::uint64_t>(staged.tensor.data() - region.data());
        d.transfer_id = next_transfer_id_.fetch_add(1, std::memory_order_relaxed);
        OMNI_RETURN_IF_ERROR(
            engine_->publish(ucx::OutgoingTransfer{.id = d.transfer_id,
                                                   .request_id = request_id,
                                                   .done = done,
                                                   .source = std::move(staged.tensor),
                                                   .credit = std::move(staged.credit)}));
        return std::make_unique<UcxPutOperation>(ucx::encode_metadata(d), std::move(done),
                                                 d.transfer_id, d.nbytes);
    }

    Result<std::unique_ptr<GetOperation>> get_async(const Value& metadata, Tensor dest,
                                                    const std::string& request_id) override {
        OMNI_RETURN_IF_ERROR(check_open());
        OMNI_TRY(ucx::TransferDescriptor d, ucx::decode_metadata(metadata));
        if (dest.defined()) {
            OMNI_RETURN_IF_ERROR(check_destination(dest, d.nbytes));
        } else {
            OMNI_TRY(dest, Tensor::empty({static_cast<std::int64_t>(d.nbytes)}, DType::u8));
        }
        auto done = std::make_shared<Completion>();
        auto op = std::make_unique<UcxGetOperation>(dest, done, d.sender);
        if (d.nbytes == 0) {
            done->set(ok_status());
            return op;
        }
        OMNI_RETURN_IF_ERROR(engine_->start_read(ucx::IncomingRead{.descriptor = std::move(d),
                                                                   .request_id = request_id,
                                                                   .dest = std::move(dest),
                                                                   .done = std::move(done)}));
        return op;
    }

    void cleanup(const std::string& request_id) override {
        if (closed_.load()) return;
        engine_->cleanup(request_id);
    }

    void close() override {
        std::lock_guard lock(close_mutex_);
        if (closed_.exchange(true)) return;
        memory_->wake_waiters();  // puts waiting for a credit fail with aborted
        engine_->stop();
        memory_->close();  // only now: late readers could otherwise reach unmapped memory
    }

  private:
    UcxRelay(std::string label, std::unique_ptr<ucx::SendMemory> memory,
             std::unique_ptr<ucx::Engine> engine)
        : label_(std::move(label)), memory_(std::move(memory)), engine_(std::move(engine)) {
        // Ids start at a random point so a stale or misdirected completion message is unlikely
        // to match a live transfer.
        std::random_device random;
        auto start = (static_cast<std::uint64_t>(random()) << 32 | random()) >> 2;
        next_transfer_id_.store(static_cast<std::int64_t>(start) + 1);
    }

    Status check_open() const {
        if (closed_.load()) return fail(ErrorCode::failed_precondition, "ucx relay is closed");
        return {};
    }

    static Status check_destination(const Tensor& dest, std::size_t nbytes) {
        if (!dest.device().is_cpu()) {
            return fail(
                ErrorCode::invalid_argument,
                "ucx relay reads into host memory; destination is on " + dest.device().to_string());
        }
        if (dest.read_only()) {
            return fail(ErrorCode::invalid_argument, "ucx relay: destination tensor is read-only");
        }
        if (!dest.is_contiguous()) {
            return fail(ErrorCode::invalid_argument,
                        "ucx relay: destination tensor must be contiguous");
        }
        if (dest.nbytes() != nbytes) {
            return fail(ErrorCode::invalid_argument,
                        "ucx relay: destination holds " + std::to_string(dest.nbytes()) +
                            " bytes but the transfer has " + std::to_string(nbytes));
        }
        return {};
    }

    const std::string label_;
    std::unique_ptr<ucx::SendMemory> memory_;
    std::unique_ptr<ucx::Engine> engine_;
    std::atomic<std::int64_t> next_transfer_id_{1};
    std::atomic<bool> closed_{false};
    std::mutex close_mutex_;
};

}  // namespace

Result<std::unique_ptr<Relay>> create_ucx_relay(const RelayOptions& options) {
    return UcxRelay::create(options);
}

Status register_ucx_backend() {
    auto status = register_backend(std::string(ucx::kBackendName), &create_ucx_relay);
    if (!status && status.error().code == ErrorCode::already_exists) return {};
    return status;
}

}  // namespace omnirt::relay
