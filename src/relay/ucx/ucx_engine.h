#pragma once
// The progress side of a ucx relay: one thread owns the UCX worker (UCS_THREAD_MODE_SINGLE) and
// everything that uses it (endpoints, remote keys, in-flight reads, the table of published
// transfers). Other threads hand it work through a task queue and an eventfd; it sleeps in
// epoll on that eventfd and the worker's event fd (ucp_worker_arm), never spinning.
//
// Completion protocol: a receiver reads a transfer (a copy out of the sender's shared memory on
// its host, ucp_get_nbx elsewhere) and, once the bytes are in place, sends the sender an active
// message carrying the transfer id; the sender's handler finds the transfer, drops its memory
// and credit and completes its PutOperation.
//
// Endpoints: a reader on the sender's host talks to it over an endpoint without peer-failure
// handling (the only kind UCX 1.13 runs over shared memory; it carries the completion messages)
// plus a PEER endpoint (TCP) whose error callback reports the sender's death; a reader on another
// host uses one PEER endpoint for both.
//
// Thread safety: the public methods may be called from any thread except the loop thread.
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "relay/ucx/ucx_completion.h"
#include "relay/ucx/ucx_handles.h"
#include "relay/ucx/ucx_metadata.h"

namespace omnirt::relay::ucx {

// A published transfer on the sender: its memory stays readable until the receiver confirms.
struct OutgoingTransfer {
    std::int64_t id = 0;
    std::string request_id;
    std::shared_ptr<Completion> done;
    Tensor source;                    // keeps the registered bytes alive
    std::shared_ptr<Storage> credit;  // returns to the pool when the transfer is dropped
};

// A read on the receiver: `dest` is host memory of exactly descriptor.nbytes.
struct IncomingRead {
    TransferDescriptor descriptor;
    std::string request_id;
    Tensor dest;
    std::shared_ptr<Completion> done;
};

class Engine {
  public:
    [[nodiscard]] static Result<std::unique_ptr<Engine>> create(std::shared_ptr<Context> context,
                                                                const std::string& name);
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;
    ~Engine();  // stop()

    [[nodiscard]] const std::vector<std::uint8_t>& worker_address() const;

    // Makes `transfer` known to the completion handler. Returns once queued: a completion that
    // arrives before the loop ran the task is matched after it (the loop runs queued tasks
    // before matching completions). failed_precondition after stop().
    [[nodiscard]] Status publish(OutgoingTransfer transfer);
    // Connects to the sender (cached per worker address) and issues the read; blocks until it
    // is issued. unavailable when the sender cannot be reached or its key cannot be unpacked.
    [[nodiscard]] Status start_read(IncomingRead read);
    // Fails the request's transfers and reads with aborted and releases what they hold (a read
    // UCX is still writing keeps its destination alive until UCX lets go). Blocks until done.
    void cleanup(const std::string& request_id);
    // Aborts everything, closes the endpoints, joins the thread and destroys the worker.
    // Idempotent.
    void stop();

  private:
    struct Peer;
    struct PendingRead;
    using Task = std::move_only_function<void()>;

    Engine(std::shared_ptr<Context> context, std::unique_ptr<Worker> worker, FileDescriptor wake_fd,
           FileDescriptor epoll_fd);

    [[nodiscard]] Status post(Task task);
    [[nodiscard]] Status call(std::function<Status()> task);
    void wake() const;

    // Loop thread.
    void run();
    bool run_tasks();
    bool handle_events();
    void wait_for_events();
    void shut_down();
    [[nodiscard]] Status issue_read(IncomingRead read);
    [[nodiscard]] Status copy_shared(Peer& peer, const IncomingRead& read);
    [[nodiscard]] Result<Peer*> peer_for(const TransferDescriptor& descriptor);
    void finish_read(std::uint64_t read_id, ucs_status_t status);
    void send_completion(Peer& peer, std::int64_t transfer_id);
    void retire_peer(Peer& peer, const std::string& reason);
    void release_retired_peers();
    void abort_request(const std::string& request_id, const std::string& reason);

    static void on_read_done(void* request, ucs_status_t status, void* user_data);
    static void on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status);
    static ucs_status_t on_completion_message(void* arg, const void* header,
                                              std::size_t header_length, void* data,
                                              std::size_t length, const ucp_am_recv_param_t* param);

    std::shared_ptr<Context> context_;
    std::unique_ptr<Worker> worker_;
    std::vector<std::uint8_t> address_;
    FileDescriptor wake_fd_;
    FileDescriptor epoll_fd_;

    std::mutex stop_mutex_;  // serialises stop()
    std::mutex mutex_;       // guards tasks_ and stopping_
    std::deque<Task> tasks_;
    bool stopping_ = false;
    std::thread thread_;              // touched by create() and stop() only
    std::thread::id loop_thread_id_;  // set once by create()

    // Loop thread only (and the stopping thread once the loop has exited).
    std::map<std::string, std::unique_ptr<Peer>> peers_;  // by worker address bytes
    std::vector<std::unique_ptr<Peer>> retired_peers_;    // failed, waiting for their reads
    std::map<std::uint64_t, std::unique_ptr<PendingRead>> reads_;
    std::unordered_map<std::int64_t, OutgoingTransfer> outgoing_;
    std::vector<OutgoingTransfer> retained_;  // aborted by stop(), dropped after the worker
    std::vector<std::int64_t> arrived_completions_;
    std::vector<std::pair<std::uint64_t, ucs_status_t>> finished_reads_;
    std::vector<std::pair<ucp_ep_h, ucs_status_t>> failed_endpoints_;
    std::uint64_t next_read_id_ = 1;
    bool warned_no_failure_detection_ = false;
};

}  // namespace omnirt::relay::ucx
