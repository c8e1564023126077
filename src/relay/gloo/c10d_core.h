#pragma once
// The state a c10d relay shares with its operations: the process group, the tag counters, the
// transfers in flight. Internal to omnirt_relay_gloo. This header does not include libtorch;
// the implementation (c10d_core.cpp) does.
//
// Thread safety: every method may be called from any thread; wait() on one transfer by one
// thread at a time (the Relay contract for operations).
#include <memory>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/tensor.h"
#include "core/value.h"
#include "relay/gloo/c10d_relay.h"

namespace omnirt::relay {

// One transfer, shared by its operation object and the core (defined in c10d_core.cpp).
struct C10dTransferState;

class C10dCore {
  public:
    // Joins the process group of options.backend; blocks until it has formed (c10d_relay.h).
    [[nodiscard]] static Result<std::shared_ptr<C10dCore>> join(const RelayOptions& options,
                                                                const C10dOptions& c10d);

    C10dCore() = default;
    C10dCore(const C10dCore&) = delete;
    C10dCore& operator=(const C10dCore&) = delete;
    virtual ~C10dCore() = default;

    [[nodiscard]] virtual const RelayOptions& options() const = 0;
    [[nodiscard]] virtual Capabilities capabilities() const = 0;

    struct Sending {
        std::shared_ptr<C10dTransferState> transfer;
        Value metadata;
    };
    // Posts the send of `tensor`'s bytes to rank `dst`.
    [[nodiscard]] virtual Result<Sending> start_send(const Tensor& tensor,
                                                     const std::string& request_id,
                                                     std::optional<std::int64_t> dst) = 0;

    struct Receiving {
        std::shared_ptr<C10dTransferState> transfer;
        Tensor dest;  // the caller's, or one allocated from the metadata's dtype and shape
    };
    // Validates `metadata` and posts the receive into `dest`.
    [[nodiscard]] virtual Result<Receiving> start_recv(const Value& metadata, Tensor dest,
                                                       const std::string& request_id) = 0;

    // Blocks until the transfer finished, `timeout` passed (deadline_exceeded; the transfer
    // stays pending), or it was aborted.
    [[nodiscard]] virtual Status wait(const std::shared_ptr<C10dTransferState>& transfer,
                                      Duration timeout) = 0;
    virtual void cleanup(const std::string& request_id) = 0;
    virtual void close() = 0;
};

}  // namespace omnirt::relay
