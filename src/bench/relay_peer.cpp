#include "bench/relay_peer.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "proto/value_codec.h"
#include "relay/registry.h"

extern char** environ;

namespace omnirt::bench {
namespace {

constexpr int kCommandFd = 3;  // child's end of the command pipe
constexpr int kReplyFd = 4;    // child's end of the reply pipe
constexpr std::size_t kMaxFrameBytes = std::size_t{64} << 20;

Status read_exactly(int fd, std::byte* out, std::size_t n, std::int64_t deadline_ns) {
    std::size_t done = 0;
    while (done < n) {
        std::int64_t left_ms = (deadline_ns - monotonic_ns()) / 1000000;
        if (left_ms <= 0) return fail(ErrorCode::deadline_exceeded, "peer did not answer in time");
        pollfd p{fd, POLLIN, 0};
        int ready = poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left_ms, 1 << 30)));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) continue;
        ssize_t got = ::read(fd, out + done, n - done);
        if (got == 0) return fail(ErrorCode::unavailable, "peer closed its pipe");
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return fail(ErrorCode::unavailable, std::string("peer pipe: ") + std::strerror(errno));
        }
        done += static_cast<std::size_t>(got);
    }
    return {};
}

Status write_all(int fd, const std::uint8_t* data, std::size_t n) {
    while (n > 0) {
        ssize_t wrote = ::write(fd, data, n);
        if (wrote < 0) {
            if (errno == EINTR) continue;
            return fail(ErrorCode::unavailable, std::string("peer pipe: ") + std::strerror(errno));
        }
        data += wrote;
        n -= static_cast<std::size_t>(wrote);
    }
    return {};
}

Value error_reply(const Error& error) {
    return Map{
        {"ok", false}, {"code", std::string(to_string(error.code))}, {"error", error.message}};
}

const Value& field(const Value& map, const char* name) {
    static const Value null;
    const Value* v = map.find(name);
    return v ? *v : null;
}

std::int64_t int_field(const Value& map, const char* name, std::int64_t fallback) {
    const Value& v = field(map, name);
    return v.is_int() ? v.as_int() : fallback;
}

std::string string_field(const Value& map, const char* name) {
    const Value& v = field(map, name);
    return v.is_string() ? v.as_string() : std::string();
}

// The child's state: pending puts by request id.
class PeerLoop {
  public:
    explicit PeerLoop(std::unique_ptr<relay::Relay> relay) : relay_(std::move(relay)) {}

    Value handle(const Value& command) {
        std::string op = string_field(command, "op");
        if (op == "prepare") return prepare(command);
        if (op == "put") return put(command);
        if (op == "wait") return wait(command);
        if (op == "get") return get(command);
        if (op == "cleanup") {
            std::string id = string_field(command, "request_id");
            relay_->cleanup(id);
            puts_.erase(id);
            return Map{{"ok", true}};
        }
        return error_reply(Error{ErrorCode::invalid_argument, "unknown op '" + op + "'"});
    }

    void close() {
        puts_.clear();
        relay_->close();
    }

  private:
    // Allocates and fills the buffer of the next put, so that a put times the relay hop alone
    // (the orchestrator's round trip in between also runs the control path once more).
    Value prepare(const Value& command) {
        auto nbytes = static_cast<std::size_t>(int_field(command, "nbytes", 0));
        auto seed = static_cast<std::uint64_t>(int_field(command, "seed", 0));
        bool send_buffer = field(command, "send_buffer") == Value(true);
        Result<Tensor> buffer = send_buffer
                                    ? relay_->allocate_send_buffer(nbytes)
                                    : Tensor::empty({static_cast<std::int64_t>(nbytes)}, DType::u8);
        if (!buffer) return error_reply(buffer.error());
        fill_pattern({buffer->mutable_data(), nbytes}, seed);
        prepared_ = std::move(*buffer);
        return Map{{"ok", true}};
    }

    Value put(const Value& command) {
        std::string id = string_field(command, "request_id");
        if (field(command, "prepared") != Value(true)) {
            Value prepared = prepare(command);
            if (field(prepared, "ok") != Value(true)) return prepared;
        }
        if (!prepared_)
            return error_reply(Error{ErrorCode::failed_precondition, "nothing prepared"});
        Result<Tensor> buffer = std::move(*prepared_);
        prepared_.reset();
        std::optional<std::int64_t> dst;
        if (field(command, "dst_rank").is_int()) dst = field(command, "dst_rank").as_int();
        std::int64_t start = monotonic_ns();
        auto op = relay_->put_async(*buffer, id, dst);
        if (!op) return error_reply(op.error());
        Value metadata = (*op)->metadata();
        puts_[id] = std::move(*op);
        return Map{{"ok", true}, {"metadata", std::move(metadata)}, {"start_ns", start}};
    }

    Value wait(const Value& command) {
        std::string id = string_field(command, "request_id");
        auto it = puts_.find(id);
        if (it == puts_.end()) {
            return error_reply(Error{ErrorCode::not_found, "no put for request '" + id + "'"});
        }
        Status status =
            it->second->wait_for_completion(Duration(int_field(command, "timeout_ms", 30000)));
        if (!status) return error_reply(status.error());
        puts_.erase(it);
        return Map{{"ok", true}};
    }

    Value get(const Value& command) {
        std::string id = string_field(command, "request_id");
        const Value& metadata = field(command, "metadata");
        Tensor dest;
        if (field(command, "into_dest") == Value(true)) {
            const Value* nbytes = metadata.find("nbytes");
            std::int64_t n = nbytes && nbytes->is_int() ? nbytes->as_int() : 0;
            auto allocated = Tensor::empty({std::max<std::int64_t>(n, 0)}, DType::u8);
            if (!allocated) return error_reply(allocated.error());
            dest = *allocated;
        }
        auto op = relay_->get_async(metadata, dest, id);
        if (!op) return error_reply(op.error());
        Status status =
            (*op)->wait_for_completion(Duration(int_field(command, "timeout_ms", 30000)));
        std::int64_t end = monotonic_ns();
        if (!status) return error_reply(status.error());
        if (field(command, "verify") != Value(false)) {
            Tensor got = (*op)->tensor();
            std::int64_t bad =
                check_pattern({got.data(), got.nbytes()},
                              static_cast<std::uint64_t>(int_field(command, "seed", 0)));
            if (bad >= 0) {
                return error_reply(Error{ErrorCode::data_loss,
                                         "received bytes differ at offset " + std::to_string(bad)});
            }
        }
        return Map{{"ok", true}, {"end_ns", end}};
    }

    std::unique_ptr<relay::Relay> relay_;
    std::map<std::string, std::unique_ptr<relay::PutOperation>> puts_;
    std::optional<Tensor> prepared_;
};

}  // namespace

std::int64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void fill_pattern(std::span<std::byte> bytes, std::uint64_t seed) {
    // 8 bytes at a time: x_i = (i + 1) * golden + seed.
    std::size_t words = bytes.size() / 8;
    auto* out = reinterpret_cast<std::uint64_t*>(bytes.data());
    for (std::size_t i = 0; i < words; ++i) {
        std::uint64_t v = (i + 1) * 0x9e3779b97f4a7c15ULL + seed;
        std::memcpy(out + i, &v, 8);
    }
    for (std::size_t i = words * 8; i < bytes.size(); ++i) {
        bytes[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
    }
}

std::int64_t check_pattern(std::span<const std::byte> bytes, std::uint64_t seed) {
    std::size_t words = bytes.size() / 8;
    for (std::size_t i = 0; i < words; ++i) {
        std::uint64_t expected = (i + 1) * 0x9e3779b97f4a7c15ULL + seed, got;
        std::memcpy(&got, bytes.data() + i * 8, 8);
        if (got != expected) return static_cast<std::int64_t>(i * 8);
    }
    for (std::size_t i = words * 8; i < bytes.size(); ++i) {
        if (bytes[i] != static_cast<std::byte>((i * 131 + seed) & 0xff)) {
            return static_cast<std::int64_t>(i);
        }
    }
    return -1;
}

Status write_frame(int fd, const Value& value) {
    OMNI_TRY(std::vector<std::uint8_t> body, proto::encode_value(value));
    std::uint32_t n = static_cast<std::uint32_t>(body.size());
    std::uint8_t header[4] = {static_cast<std::uint8_t>(n), static_cast<std::uint8_t>(n >> 8),
                              static_cast<std::uint8_t>(n >> 16),
                              static_cast<std::uint8_t>(n >> 24)};
    // One write per frame: a separate write of the header woke the reader twice per message.
    body.insert(body.begin(), header, header + 4);
    return write_all(fd, body.data(), body.size());
}

Result<Value> read_frame(int fd, Duration timeout) {
    std::int64_t deadline = monotonic_ns() + timeout.count() * 1000000;
    std::byte header[4];
    OMNI_RETURN_IF_ERROR(read_exactly(fd, header, 4, deadline));
    std::uint32_t n = 0;
    for (int i = 3; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(header[i]);
    if (n > kMaxFrameBytes) return fail(ErrorCode::data_loss, "peer frame too large");
    std::vector<std::uint8_t> body(n);
    OMNI_RETURN_IF_ERROR(read_exactly(fd, reinterpret_cast<std::byte*>(body.data()), n, deadline));
    return proto::decode_value(body);
}

Error reply_error(const Value& reply) {
    std::string code = string_field(reply, "code");
    Error error{ErrorCode::internal, string_field(reply, "error")};
    for (int c = 0; c <= static_cast<int>(ErrorCode::internal); ++c) {
        if (to_string(static_cast<ErrorCode>(c)) == code) error.code = static_cast<ErrorCode>(c);
    }
    return error;
}

int run_relay_peer(const relay::RelayOptions& options, int in_fd, int out_fd) {
    auto relay = relay::create_relay(options);
    if (!relay) {
        (void)write_frame(out_fd, error_reply(relay.error()));
        return 1;
    }
    if (!write_frame(out_fd, Map{{"ok", true}, {"ready", true}})) return 1;
    PeerLoop loop(std::move(*relay));
    for (;;) {
        auto command = read_frame(in_fd, Duration(24LL * 3600 * 1000));
        if (!command) break;  // parent gone
        if (string_field(*command, "op") == "close") {
            loop.close();
            (void)write_frame(out_fd, Map{{"ok", true}});
            return 0;
        }
        if (!write_frame(out_fd, loop.handle(*command))) break;
    }
    loop.close();
    return 0;
}

PeerProcess::PeerProcess(pid_t pid, int to_child, int from_child)
    : pid_(pid), to_child_(to_child), from_child_(from_child) {}

PeerProcess::~PeerProcess() {
    if (!reaped_) {
        ::kill(pid_, SIGKILL);
        wait_exit();
    }
    ::close(to_child_);
    ::close(from_child_);
}

Result<std::unique_ptr<PeerProcess>> PeerProcess::start(const std::string& omnirt_binary,
                                                        const relay::RelayOptions& options) {
    int commands[2], replies[2];
    if (pipe2(commands, O_CLOEXEC) != 0 || pipe2(replies, O_CLOEXEC) != 0) {
        return fail(ErrorCode::unavailable, "pipe failed");
    }
    std::vector<std::string> args = {omnirt_binary,   "relay-peer",
                                     "--backend",     options.backend,
                                     "--name",        options.name,
                                     "--runtime-dir", options.runtime_dir,
                                     "--device",      options.device.to_string(),
                                     "--slot-bytes",  std::to_string(options.slot_bytes),
                                     "--credits",     std::to_string(options.credits),
                                     "--rank",        std::to_string(options.rank),
                                     "--world-size",  std::to_string(options.world_size)};
    if (!options.rendezvous.empty()) {
        args.push_back("--rendezvous");
        args.push_back(options.rendezvous);
    }
    if (options.zero_copy) args.push_back("--zero-copy");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, commands[0], kCommandFd);
    posix_spawn_file_actions_adddup2(&actions, replies[1], kReplyFd);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, omnirt_binary.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(commands[0]);
    ::close(replies[1]);
    if (rc != 0) {
        ::close(commands[1]);
        ::close(replies[0]);
        return fail(ErrorCode::unavailable,
                    "cannot start " + omnirt_binary + ": " + std::strerror(rc));
    }
    return std::unique_ptr<PeerProcess>(new PeerProcess(pid, commands[1], replies[0]));
}

Result<std::unique_ptr<PeerProcess>> PeerProcess::spawn(const std::string& omnirt_binary,
                                                        const relay::RelayOptions& options,
                                                        Duration ready_timeout) {
    OMNI_TRY(auto peer, start(omnirt_binary, options));
    OMNI_RETURN_IF_ERROR(peer->wait_ready(ready_timeout));
    return peer;
}

Status PeerProcess::wait_ready(Duration timeout) {
    OMNI_TRY(Value ready, read_frame(from_child_, timeout));
    if (ready.find("ready") == nullptr) return fail(reply_error(ready));
    return {};
}

Status PeerProcess::send(const Value& command) { return write_frame(to_child_, command); }

Result<Value> PeerProcess::reply(Duration timeout) { return read_frame(from_child_, timeout); }

Result<Value> PeerProcess::call(const Value& command, Duration timeout) {
    OMNI_RETURN_IF_ERROR(send(command));
    OMNI_TRY(Value answer, reply(timeout));
    if (answer.find("ok") == nullptr || *answer.find("ok") != Value(true)) {
        return fail(reply_error(answer));
    }
    return answer;
}

Status PeerProcess::close(Duration timeout) {
    if (reaped_) return {};
    auto answer = call(Map{{"op", "close"}}, timeout);
    if (!answer) {
        ::kill(pid_, SIGKILL);
        wait_exit();
        return fail(answer.error());
    }
    wait_exit();
    return {};
}

void PeerProcess::kill(int signal) {
    if (!reaped_) ::kill(pid_, signal);
}

int PeerProcess::wait_exit() {
    if (reaped_) return -1;
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace omnirt::bench
