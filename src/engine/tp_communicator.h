#pragma once
// Tensor parallelism of a model stage: the collectives its forward needs (TpCommunicator) and a
// c10d process group that provides them together with the engine's lockstep agreement
// (C10dTpGroup, engine/lockstep.h). Model-independent: a model family's forward takes a
// TpCommunicator, its stage factory creates the C10dTpGroup.
//
// One C10dTpGroup per rank, over the stage's rendezvous (StageContext::tp_rendezvous:
// "file://<path>" or "tcp://host:port", the same on every rank). Gloo runs the collectives of
// CPU tensors (and of CUDA tensors through a host copy); in builds against a libtorch with NCCL,
// a CUDA device gets a ProcessGroupNCCL.
//
// Creation does not connect: a stage factory runs before its peers exist (and in one process the
// ranks' factories run one after another), so the engine thread calls connect() when it starts.
//
// Failures: a collective that fails (a rank that is gone closes its sockets, which fails the
// collectives waiting on it at once; a rank that hangs fails them after `timeout`) or that
// cancel() cut short leaves the group unusable: every later collective fails at once with the
// first error. The model's collectives throw TpCollectiveError (a model's forward turns it into
// an `unavailable` error); connect() and agree() return errors.
//
// Threads: connect(), agree() and the collectives from one thread at a time (the engine
// thread); cancel() from any thread.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "engine/lockstep.h"

namespace omnirt::engine {

// What a collective of TpCommunicator throws; the message says which one and why.
class TpCollectiveError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

class TpCommunicator {
  public:
    virtual ~TpCommunicator() = default;
    [[nodiscard]] virtual int rank() const = 0;
    [[nodiscard]] virtual int size() const = 0;
    // Sums `tensor` (contiguous) over the ranks, in place; every rank ends with the same values.
    // bfloat16 / float16 are summed in float32 and rounded once.
    virtual void all_reduce_sum(at::Tensor& tensor) = 0;
    // Every rank's `tensor` (the same shape and dtype on every rank) stacked in rank order:
    // [size, tensor.sizes()...].
    [[nodiscard]] virtual at::Tensor all_gather(const at::Tensor& tensor) = 0;
};

struct TpGroupOptions {
    std::string name;  // for messages, e.g. "stage 'thinker'"
    int rank = 0;
    int size = 1;
    std::string rendezvous;  // file://<path> or tcp://host:port
    // The address gloo binds this rank's connections to and tells the other ranks
    // (StageContext::node_address). Empty: 127.0.0.1 for a file store or a loopback
    // rendezvous, else the address the host name resolves to. GLOO_SOCKET_IFNAME, when set,
    // overrides either.
    std::string listen_host;
    at::Device device = at::kCPU;  // where the model's tensors live
    // Joining the group, and any one collective (gloo's timeout).
    std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

class C10dTpGroup final : public Lockstep, public TpCommunicator {
  public:
    // invalid_argument for a rank outside [0, size), a size below 2, a rendezvous of another
    // scheme or a timeout <= 0. Does not connect.
    [[nodiscard]] static Result<std::shared_ptr<C10dTpGroup>> create(TpGroupOptions options);
    C10dTpGroup(const C10dTpGroup&) = delete;
    C10dTpGroup& operator=(const C10dTpGroup&) = delete;
    // A group whose collective was cancelled while in flight is leaked on purpose: destroying it
    // would wait for that collective until gloo's timeout.
    ~C10dTpGroup() override;

    [[nodiscard]] int rank() const override;
    [[nodiscard]] int size() const override;

    // Lockstep. connect() errors: deadline_exceeded when the ranks did not all join
    // within the timeout, unavailable otherwise, naming the rendezvous.
    [[nodiscard]] Result<std::uint64_t> connect(std::uint64_t seed_state) override;
    [[nodiscard]] Result<LockstepDecision> agree(const LockstepProposal& proposal) override;
    void cancel() override;

    // TpCommunicator; throw TpCollectiveError (also before connect()).
    void all_reduce_sum(at::Tensor& tensor) override;
    [[nodiscard]] at::Tensor all_gather(const at::Tensor& tensor) override;

  private:
    struct State;
    explicit C10dTpGroup(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

}  // namespace omnirt::engine
