#include "relay/ucx/ucx_handles.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace omnirt::relay::ucx {

Error ucx_error(ErrorCode code, std::string_view what, ucs_status_t status) {
    return Error{code, std::string(what) + ": " + ucs_status_string(status)};
}

void prefault(const void* data, std::size_t nbytes, bool for_write) {
    if (nbytes == 0) return;
    constexpr std::uintptr_t kPage = 4096;
    auto begin = reinterpret_cast<std::uintptr_t>(data) & ~(kPage - 1);
    auto end = (reinterpret_cast<std::uintptr_t>(data) + nbytes + kPage - 1) & ~(kPage - 1);
    (void)::madvise(reinterpret_cast<void*>(begin), end - begin,
                    for_write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
}

Result<std::shared_ptr<Context>> Context::create(const std::string& name) {
    ucp_config_t* config = nullptr;
    ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
    if (status != UCS_OK) {
        return fail(ucx_error(ErrorCode::unavailable,
                              "ucx relay: cannot read the UCX configuration", status));
    }
    ucp_params_t params{};
    params.field_mask =
        UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 1;  // memory is mapped and unmapped on the callers' threads
    params.name = name.c_str();
    ucp_context_h context = nullptr;
    status = ucp_init(&params, config, &context);
    ucp_config_release(config);
    if (status != UCS_OK) {
        return fail(ucx_error(ErrorCode::unavailable, "ucx relay: ucp_init failed", status));
    }
    return std::shared_ptr<Context>(new Context(context));
}

Context::~Context() { ucp_cleanup(context_); }

MemoryRegion::MemoryRegion(std::shared_ptr<Context> context, std::unique_ptr<SharedMemory> memory,
                           ucp_mem_h memh, std::vector<std::uint8_t> packed_rkey)
    : context_(std::move(context)),
      memory_(std::move(memory)),
      memh_(memh),
      packed_rkey_(std::move(packed_rkey)) {}

Result<std::shared_ptr<MemoryRegion>> MemoryRegion::allocate(std::shared_ptr<Context> context,
                                                             std::size_t nbytes) {
    OMNI_CHECK(nbytes > 0, "MemoryRegion::allocate: empty region");
    OMNI_TRY(auto memory, SharedMemory::create(nbytes));
    ucp_mem_map_params_t params{};
    params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    params.address = memory->data();
    params.length = nbytes;
    ucp_mem_h memh = nullptr;
    ucs_status_t status = ucp_mem_map(context->get(), &params, &memh);
    if (status != UCS_OK) {
        return fail(ucx_error(
            ErrorCode::resource_exhausted,
            "ucx relay: cannot register " + std::to_string(nbytes) + " bytes with UCX", status));
    }
    void* packed = nullptr;
    std::size_t packed_size = 0;
    status = ucp_rkey_pack(context->get(), memh, &packed, &packed_size);
    if (status != UCS_OK) {
        ucp_mem_unmap(context->get(), memh);
        return fail(ucx_error(ErrorCode::internal, "ucx relay: cannot pack a remote key", status));
    }
    const auto* packed_bytes = static_cast<const std::uint8_t*>(packed);
    std::vector<std::uint8_t> rkey(packed_bytes, packed_bytes + packed_size);
    ucp_rkey_buffer_release(packed);
    return std::shared_ptr<MemoryRegion>(
        new MemoryRegion(std::move(context), std::move(memory), memh, std::move(rkey)));
}

MemoryRegion::~MemoryRegion() { ucp_mem_unmap(context_->get(), memh_); }

bool MemoryRegion::contains(const std::byte* begin, std::size_t nbytes) const {
    auto address = reinterpret_cast<std::uintptr_t>(begin);
    auto base = reinterpret_cast<std::uintptr_t>(data());
    return address >= base && address - base <= size() && nbytes <= size() - (address - base);
}

Worker::Worker(std::shared_ptr<Context> context, ucp_worker_h worker, int event_fd,
               std::vector<std::uint8_t> address)
    : context_(std::move(context)),
      worker_(worker),
      event_fd_(event_fd),
      address_(std::move(address)) {}

Result<std::unique_ptr<Worker>> Worker::create(std::shared_ptr<Context> context,
                                               const std::string& name) {
    ucp_worker_params_t params{};
    params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_NAME;
    params.thread_mode = UCS_THREAD_MODE_SINGLE;
    params.name = name.c_str();
    ucp_worker_h worker = nullptr;
    ucs_status_t status = ucp_worker_create(context->get(), &params, &worker);
    if (status != UCS_OK) {
        return fail(
            ucx_error(ErrorCode::unavailable, "ucx relay: cannot create a UCX worker", status));
    }
    int event_fd = -1;
    status = ucp_worker_get_efd(worker, &event_fd);
    ucp_address_t* address = nullptr;
    std::size_t address_length = 0;
    if (status == UCS_OK) status = ucp_worker_get_address(worker, &address, &address_length);
    if (status != UCS_OK) {
        ucp_worker_destroy(worker);
        return fail(ucx_error(ErrorCode::unavailable,
                              "ucx relay: cannot set up the UCX worker's wake-up or address",
                              status));
    }
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(address);
    std::vector<std::uint8_t> copy(bytes, bytes + address_length);
    ucp_worker_release_address(worker, address);
    return std::unique_ptr<Worker>(
        new Worker(std::move(context), worker, event_fd, std::move(copy)));
}

Worker::~Worker() { ucp_worker_destroy(worker_); }

Result<Endpoint> Endpoint::connect(ucp_worker_h worker, std::span<const std::uint8_t> address,
                                   ErrorMode mode, ucp_err_handler_cb_t on_error, void* arg) {
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    params.address = reinterpret_cast<const ucp_address_t*>(address.data());
    params.err_mode =
        mode == ErrorMode::peer ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    if (on_error != nullptr) {
        params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
        params.err_handler.cb = on_error;
        params.err_handler.arg = arg;
    }
    ucp_ep_h ep = nullptr;
    ucs_status_t status = ucp_ep_create(worker, &params, &ep);
    if (status != UCS_OK) {
        return fail(
            ucx_error(ErrorCode::unavailable, "cannot connect to the peer's UCX worker", status));
    }
    return Endpoint(ep, mode);
}

Endpoint::Endpoint(Endpoint&& other) noexcept
    : ep_(std::exchange(other.ep_, nullptr)), mode_(other.mode_) {}

Endpoint& Endpoint::operator=(Endpoint&& other) noexcept {
    if (this != &other) {
        if (ep_ != nullptr) {
            ucs_status_ptr_t request = close();
            if (UCS_PTR_IS_PTR(request)) ucp_request_free(request);
        }
        ep_ = std::exchange(other.ep_, nullptr);
        mode_ = other.mode_;
    }
    return *this;
}

Endpoint::~Endpoint() {
    if (ep_ == nullptr) return;
    ucs_status_ptr_t request = close();
    if (UCS_PTR_IS_PTR(request)) ucp_request_free(request);
}

ucs_status_ptr_t Endpoint::close() {
    OMNI_CHECK(ep_ != nullptr, "Endpoint::close on a closed endpoint");
    ucp_request_param_t params{};
    if (mode_ == ErrorMode::peer) {
        params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        params.flags = UCP_EP_CLOSE_FLAG_FORCE;
    }
    return ucp_ep_close_nbx(std::exchange(ep_, nullptr), &params);
}

Result<RemoteKey> RemoteKey::unpack(ucp_ep_h ep, std::span<const std::uint8_t> packed) {
    ucp_rkey_h rkey = nullptr;
    ucs_status_t status = ucp_ep_rkey_unpack(ep, packed.data(), &rkey);
    if (status != UCS_OK) {
        return fail(ucx_error(ErrorCode::unavailable,
                              "cannot unpack the sender's remote key (the sender may have exited "
                              "or released the buffer)",
                              status));
    }
    return RemoteKey(rkey);
}

RemoteKey& RemoteKey::operator=(RemoteKey&& other) noexcept {
    if (this != &other) {
        if (rkey_ != nullptr) ucp_rkey_destroy(rkey_);
        rkey_ = std::exchange(other.rkey_, nullptr);
    }
    return *this;
}

RemoteKey::~RemoteKey() {
    if (rkey_ != nullptr) ucp_rkey_destroy(rkey_);
}

}  // namespace omnirt::relay::ucx
