#pragma once
// Joining a c10d process group for a relay: the store behind the rendezvous, the process group
// and the facts the relay needs about it. Internal to omnirt_relay_gloo; includes libtorch, so
// only this directory's .cpp files include it.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <string>

#include "relay/gloo/c10d_relay.h"
#include "torch_bridge/c10d_backend.h"

namespace omnirt::relay {

// How a relay learns that a c10d Work finished.
enum class C10dWaitMode {
    // gloo: block in Work::wait, cut short by Work::abort from the AbortTimer.
    abort_sliced,
    // nccl: poll Work::isCompleted (a CUDA event query); NCCL works have no host wake-up.
    poll_completion,
};

struct C10dGroup {
    c10::intrusive_ptr<torch_bridge::C10dBackend> process_group;
    std::string id;  // the same on every rank of the group (see c10d_metadata.h)
    Device device;   // where the tensors moved by this group live
    C10dWaitMode wait_mode = C10dWaitMode::abort_sliced;
    // True when the transport matches sends to receives by order rather than by tag (NCCL):
    // the receiver must then post its receives from each sender in the sender's tag order.
    bool ordered_matching = false;
    // The transport's own timeout (gloo's context timeout). Abort-sliced waits re-arm well
    // before it so that it never fires.
    Duration transport_timeout{};
};

// Opens the store of options.rendezvous with timeout `c10d.timeout`, agrees on a group id (rank
// 0 draws it) and returns the store under a relay-private key prefix.
struct C10dStore {
    c10::intrusive_ptr<c10d::Store> store;
    std::string group_id;
};
[[nodiscard]] Result<C10dStore> open_c10d_store(const RelayOptions& options,
                                                const C10dOptions& c10d);

// Converts the exception in flight (call only inside a catch block) to an Error: timeouts are
// deadline_exceeded, everything else `code`; c10 backtraces are left out.
[[nodiscard]] Error current_exception_error(ErrorCode code, const std::string& context);

[[nodiscard]] Result<C10dGroup> join_gloo_group(const RelayOptions& options,
                                                const C10dOptions& c10d);
// Defined only in builds against a libtorch with NCCL (nccl_group.cpp).
[[nodiscard]] Result<C10dGroup> join_nccl_group(const RelayOptions& options,
                                                const C10dOptions& c10d);

}  // namespace omnirt::relay
