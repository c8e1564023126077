#include "relay/gloo/c10d_group.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <charconv>
#include <cstdlib>
#include <random>

#include "torch_bridge/torch_errors.h"

namespace omnirt::relay {
namespace {

constexpr std::string_view kFileScheme = "file://";
constexpr std::string_view kTcpScheme = "tcp://";
constexpr const char* kGroupIdKey = "group_id";
constexpr std::int64_t kMaxWorldSize = std::int64_t{1} << 16;

struct TcpAddress {
    std::string host;
    std::uint16_t port = 0;
};

Result<TcpAddress> parse_tcp(std::string_view address, const std::string& rendezvous) {
    auto bad = [&] {
        return fail(ErrorCode::invalid_argument,
                    "relay rendezvous '" + rendezvous + "' is not tcp://host:port");
    };
    auto colon = address.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return bad();
    std::string_view host = address.substr(0, colon);
    std::string_view digits = address.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);  // [IPv6]
    }
    unsigned port = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (host.empty() || digits.empty() || ec != std::errc() ||
        end != digits.data() + digits.size() || port == 0 || port > 65535) {
        return bad();
    }
    return TcpAddress{std::string(host), static_cast<std::uint16_t>(port)};
}

Status validate(const RelayOptions& options, const C10dOptions& c10d) {
    if (options.world_size < 1 || options.world_size > kMaxWorldSize) {
        return fail(ErrorCode::invalid_argument,
                    options.backend + " relay world_size " + std::to_string(options.world_size) +
                        " is outside [1, " + std::to_string(kMaxWorldSize) + "]");
    }
    if (options.rank < 0 || options.rank >= options.world_size) {
        return fail(ErrorCode::invalid_argument,
                    options.backend + " relay rank " + std::to_string(options.rank) +
                        " is outside [0, " + std::to_string(options.world_size) + ")");
    }
    if (c10d.timeout <= Duration::zero()) {
        return fail(ErrorCode::invalid_argument, options.backend + " relay timeout must be > 0");
    }
    return {};
}

std::string random_group_id() {
    std::random_device entropy;
    std::uint64_t value = (std::uint64_t{entropy()} << 32) ^ entropy();
    char text[17] = {};
    auto [end, ec] = std::to_chars(text, text + 16, value, 16);
    return std::string(text, end);
}

std::string describe(const RelayOptions& options) {
    return options.backend + " relay (rank " + std::to_string(options.rank) + " of " +
           std::to_string(options.world_size) + ", rendezvous " + options.rendezvous + ")";
}

std::shared_ptr<::gloo::transport::Device> make_gloo_device(const C10dOptions& c10d) {
    if (!c10d.listen_host.empty()) {
        return c10d::ProcessGroupGloo::createDeviceForHostname(c10d.listen_host);
    }
    if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
        interface != nullptr && *interface != '\0') {
        return c10d::ProcessGroupGloo::createDeviceForInterface(interface);
    }
    return c10d::ProcessGroupGloo::createDefaultDevice();
}

// The exception in flight during a rendezvous that started at `start`: deadline_exceeded once
// the timeout has passed, whatever the store reported (a FileStore whose file nobody created
// yet fails with "No such file or directory" at its timeout).
Error rendezvous_error(std::chrono::steady_clock::time_point start, Duration timeout,
                       const std::string& context) {
    Error error = current_exception_error(ErrorCode::unavailable, context);
    if (std::chrono::steady_clock::now() - start >= timeout) {
        error.code = ErrorCode::deadline_exceeded;
    }
    return error;
}

}  // namespace

Error current_exception_error(ErrorCode code, const std::string& context) {
    const std::string what = torch_bridge::current_exception_text();
    if (torch_bridge::mentions_timeout(what)) code = ErrorCode::deadline_exceeded;
    return Error{code, context + ": " + what};
}

Result<C10dStore> open_c10d_store(const RelayOptions& options, const C10dOptions& c10d) {
    OMNI_RETURN_IF_ERROR(validate(options, c10d));
    std::string_view rendezvous = options.rendezvous;
    const auto start = std::chrono::steady_clock::now();
    try {
        c10::intrusive_ptr<c10d::Store> store;
        if (rendezvous.starts_with(kFileScheme) && rendezvous.size() > kFileScheme.size()) {
            std::string path(rendezvous.substr(kFileScheme.size()));
            store =
                c10::make_intrusive<c10d::FileStore>(path, static_cast<int>(options.world_size));
        } else if (rendezvous.starts_with(kTcpScheme)) {
            OMNI_TRY(TcpAddress address,
                     parse_tcp(rendezvous.substr(kTcpScheme.size()), options.rendezvous));
            c10d::TCPStoreOptions tcp;
            tcp.port = address.port;
            tcp.isServer = options.rank == 0;
            tcp.numWorkers = static_cast<std::size_t>(options.world_size);
            tcp.waitWorkers = false;  // the process group's rendezvous waits for everyone
            tcp.timeout = c10d.timeout;
            store = c10::make_intrusive<c10d::TCPStore>(address.host, tcp);
        } else {
            return fail(ErrorCode::invalid_argument,
                        options.backend + " relay rendezvous '" + options.rendezvous +
                            "' must be file://<path> or tcp://host:port");
        }
        store->setTimeout(c10d.timeout);
        auto prefixed = c10::make_intrusive<c10d::PrefixStore>("omnirt_relay", store);
        C10dStore opened{prefixed, {}};
        if (options.rank == 0) {
            opened.group_id = random_group_id();
            prefixed->set(kGroupIdKey, std::vector<std::uint8_t>(opened.group_id.begin(),
                                                                 opened.group_id.end()));
        } else {
            auto bytes = prefixed->get(kGroupIdKey);  // waits for rank 0, up to the timeout
            opened.group_id.assign(bytes.begin(), bytes.end());
        }
        return opened;
    } catch (...) {
        return fail(rendezvous_error(
            start, c10d.timeout,
            describe(options) + " could not reach rank 0 through its " + "rendezvous within " +
                std::to_string(c10d.timeout.count()) + " ms (has rank 0 started?)"));
    }
}

Result<C10dGroup> join_gloo_group(const RelayOptions& options, const C10dOptions& c10d) {
    if (!options.device.is_cpu()) {
        return fail(ErrorCode::invalid_argument,
                    "the gloo relay moves host memory; its device must be cpu, not " +
                        options.device.to_string() + " (nccl moves cuda tensors)");
    }
    OMNI_TRY(C10dStore opened, open_c10d_store(options, c10d));
    const auto start = std::chrono::steady_clock::now();
    try {
        auto pg_options = c10d::ProcessGroupGloo::Options::create(c10d.timeout);
        pg_options->devices.push_back(make_gloo_device(c10d));
        // Worker threads run collectives only; send and recv never use them.
        pg_options->threads = 1;
        // Connects every pair of ranks: returns once all world_size ranks have joined.
        auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(
            opened.store, static_cast<int>(options.rank), static_cast<int>(options.world_size),
            pg_options);
        return C10dGroup{
            .process_group = std::move(group),
            .id = std::move(opened.group_id),
            .device = Device::cpu(),
            .wait_mode = C10dWaitMode::abort_sliced,
            .ordered_matching = false,
            .transport_timeout = c10d.timeout,
        };
    } catch (...) {
        return fail(rendezvous_error(
            start, c10d.timeout,
            describe(options) + " could not connect to all " + std::to_string(options.world_size) +
                " ranks within " + std::to_string(c10d.timeout.count()) +
                " ms (did every rank start with the same rendezvous, and is the rendezvous "
                "file fresh?)"));
    }
}

}  // namespace omnirt::relay
