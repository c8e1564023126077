#pragma once
// A relay endpoint in a separate process, driven over a pipe: the other side of the relay
// benchmark (`omnirt bench relay`) and of the cross-process relay conformance tests. The child is
// `omnirt relay-peer ...`; the parent talks to it with PeerProcess.
//
// Protocol: frames of a 4-byte little-endian length and a msgpack Value (proto/value_codec.h).
// The child first writes {"ready": true} (or {"ok": false, "error": ...}) once its relay exists,
// then answers each command map with one reply map {"ok": bool, ...}:
//   {"op": "put", "request_id", "nbytes", "seed", ["dst_rank"], ["send_buffer": bool]}
//       -> {"ok", "metadata", "start_ns"}     fills a pattern, put_async (may block on credits)
//   {"op": "wait", "request_id", "timeout_ms"}  -> {"ok", ["code", "error"]}
//   {"op": "get", "request_id", "metadata", "seed", "timeout_ms", ["verify": bool],
//    ["into_dest": bool]} -> {"ok", "end_ns", ["code", "error"]}
//   {"op": "cleanup", "request_id"} -> {"ok"}
//   {"op": "close"} -> {"ok"}, then the child exits 0
// Timestamps are CLOCK_MONOTONIC nanoseconds, comparable across processes on one host.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/error.h"
#include "core/value.h"
#include "relay/relay.h"

namespace omnirt::bench {

using Duration = std::chrono::milliseconds;

[[nodiscard]] Status write_frame(int fd, const Value& value);
// Reads one frame; deadline_exceeded after `timeout`, unavailable at end of stream.
[[nodiscard]] Result<Value> read_frame(int fd, Duration timeout);

// Deterministic byte pattern of `seed`; check returns the first mismatching offset or -1.
void fill_pattern(std::span<std::byte> bytes, std::uint64_t seed);
[[nodiscard]] std::int64_t check_pattern(std::span<const std::byte> bytes, std::uint64_t seed);

[[nodiscard]] std::int64_t monotonic_ns();

// The child's loop; returns the process exit code.
int run_relay_peer(const relay::RelayOptions& options, int in_fd, int out_fd);

// The parent's handle on a child. The destructor kills (SIGKILL) and reaps a child still alive.
class PeerProcess {
  public:
    // Starts `omnirt_binary relay-peer` with `options` and waits for its ready frame.
    [[nodiscard]] static Result<std::unique_ptr<PeerProcess>> spawn(
        const std::string& omnirt_binary, const relay::RelayOptions& options,
        Duration ready_timeout = Duration(60000));
    // Starts the child without waiting for ready (for collective backends whose creation
    // needs every rank); call wait_ready() later.
    [[nodiscard]] static Result<std::unique_ptr<PeerProcess>> start(
        const std::string& omnirt_binary, const relay::RelayOptions& options);
    [[nodiscard]] Status wait_ready(Duration timeout);

    PeerProcess(const PeerProcess&) = delete;
    PeerProcess& operator=(const PeerProcess&) = delete;
    ~PeerProcess();

    [[nodiscard]] Status send(const Value& command);
    [[nodiscard]] Result<Value> reply(Duration timeout);
    // send + reply; a reply with "ok": false becomes an Error carrying its code and message.
    [[nodiscard]] Result<Value> call(const Value& command, Duration timeout);

    // Asks the child to close its relay and exit, and reaps it; kills it if it does not answer.
    Status close(Duration timeout);
    void kill(int signal);
    // Waits for exit; returns the exit status (128 + signal when killed).
    int wait_exit();
    [[nodiscard]] pid_t pid() const { return pid_; }

  private:
    PeerProcess(pid_t pid, int to_child, int from_child);
    pid_t pid_;
    int to_child_;
    int from_child_;
    bool reaped_ = false;
};

// Maps a reply's {"code", "error"} back to an Error.
[[nodiscard]] Error reply_error(const Value& reply);

}  // namespace omnirt::bench
