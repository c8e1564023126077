#include "relay/ucx/ucx_metadata.h"

#include <unistd.h>

#include <bit>
#include <fstream>

#include "relay/relay.h"

namespace omnirt::relay::ucx {
namespace {

// FNV-1a, 64-bit.
class Checksum {
  public:
    void add(std::span<const std::uint8_t> bytes) {
        add_integer(bytes.size());
        for (std::uint8_t byte : bytes) mix(byte);
    }
    void add(std::string_view text) {
        add(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
    }
    void add_integer(std::uint64_t value) {
        for (int i = 0; i < 8; ++i) mix(static_cast<std::uint8_t>(value >> (8 * i)));
    }
    [[nodiscard]] std::int64_t value() const { return std::bit_cast<std::int64_t>(hash_); }

  private:
    void mix(std::uint8_t byte) {
        hash_ ^= byte;
        hash_ *= 0x100000001b3ULL;
    }
    std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

std::int64_t checksum_of(const TransferDescriptor& d) {
    Checksum sum;
    sum.add_integer(d.nbytes);
    sum.add(d.address);
    sum.add(d.rkey);
    sum.add_integer(d.remote_addr);
    sum.add_integer(static_cast<std::uint64_t>(d.shm_pid));
    sum.add_integer(d.shm_pid_namespace);
    sum.add_integer(static_cast<std::uint64_t>(d.shm_fd));
    sum.add_integer(d.shm_region);
    sum.add_integer(d.shm_offset);
    sum.add_integer(static_cast<std::uint64_t>(d.transfer_id));
    sum.add(d.sender);
    sum.add(d.host);
    return sum.value();
}

std::string field_error(std::string_view field, std::string_view problem) {
    return "ucx relay metadata field '" + std::string(field) + "' " + std::string(problem);
}

Result<const Value*> require(const Value& metadata, std::string_view field, ValueKind kind) {
    const Value* value = metadata.find(field);
    if (value == nullptr)
        return fail(ErrorCode::invalid_argument, field_error(field, "is missing"));
    if (value->kind() != kind) {
        return fail(ErrorCode::invalid_argument,
                    field_error(field, "must be " + std::string(to_string(kind)) + ", got " +
                                           std::string(to_string(value->kind()))));
    }
    return value;
}

std::string read_boot_id() {
    std::ifstream file("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(file, id);
    return id;
}

// The network namespace ("net:[4026531840]"), empty when unreadable.
std::string read_network_namespace() {
    char link[128] = {};
    ssize_t n = ::readlink("/proc/self/ns/net", link, sizeof link - 1);
    return n > 0 ? std::string(link, static_cast<std::size_t>(n)) : std::string();
}

}  // namespace

// Peers in another network namespace count as another host: they are reached the way a remote
// host is (UCX over the network), which is what a node in its own namespace needs.
const std::string& local_host_id() {
    static const std::string id = [] {
        char name[256] = {};
        ::gethostname(name, sizeof name - 1);
        return std::string(name) + "/" + read_boot_id() + "/" + read_network_namespace();
    }();
    return id;
}

Value encode_metadata(const TransferDescriptor& d) {
    Map map;
    map["backend"] = Value(std::string(kBackendName));
    map["nbytes"] = Value(static_cast<std::int64_t>(d.nbytes));
    map["address"] = Value(Bytes{d.address});
    map["rkey"] = Value(Bytes{d.rkey});
    map["remote_addr"] = Value(std::bit_cast<std::int64_t>(d.remote_addr));
    map["shm_pid"] = Value(d.shm_pid);
    map["shm_pidns"] = Value(std::bit_cast<std::int64_t>(d.shm_pid_namespace));
    map["shm_fd"] = Value(d.shm_fd);
    map["shm_region"] = Value(std::bit_cast<std::int64_t>(d.shm_region));
    map["shm_offset"] = Value(std::bit_cast<std::int64_t>(d.shm_offset));
    map["transfer_id"] = Value(d.transfer_id);
    map["sender"] = Value(d.sender);
    map["host"] = Value(d.host);
    map["checksum"] = Value(checksum_of(d));
    return Value(std::move(map));
}

Result<TransferDescriptor> decode_metadata(const Value& metadata) {
    OMNI_TRY(CommonMetadata common, read_common_metadata(metadata, kBackendName));
    TransferDescriptor d;
    d.nbytes = common.nbytes;
    OMNI_TRY(const Value* address, require(metadata, "address", ValueKind::bytes));
    OMNI_TRY(const Value* rkey, require(metadata, "rkey", ValueKind::bytes));
    OMNI_TRY(const Value* remote_addr, require(metadata, "remote_addr", ValueKind::integer));
    OMNI_TRY(const Value* shm_pid, require(metadata, "shm_pid", ValueKind::integer));
    OMNI_TRY(const Value* shm_pidns, require(metadata, "shm_pidns", ValueKind::integer));
    OMNI_TRY(const Value* shm_fd, require(metadata, "shm_fd", ValueKind::integer));
    OMNI_TRY(const Value* shm_region, require(metadata, "shm_region", ValueKind::integer));
    OMNI_TRY(const Value* shm_offset, require(metadata, "shm_offset", ValueKind::integer));
    OMNI_TRY(const Value* transfer_id, require(metadata, "transfer_id", ValueKind::integer));
    OMNI_TRY(const Value* sender, require(metadata, "sender", ValueKind::string));
    OMNI_TRY(const Value* host, require(metadata, "host", ValueKind::string));
    OMNI_TRY(const Value* checksum, require(metadata, "checksum", ValueKind::integer));
    d.address = address->if_bytes()->data;
    d.rkey = rkey->if_bytes()->data;
    d.remote_addr = std::bit_cast<std::uint64_t>(remote_addr->as_int());
    d.shm_pid = shm_pid->as_int();
    d.shm_pid_namespace = std::bit_cast<std::uint64_t>(shm_pidns->as_int());
    d.shm_fd = shm_fd->as_int();
    d.shm_region = std::bit_cast<std::uint64_t>(shm_region->as_int());
    d.shm_offset = std::bit_cast<std::uint64_t>(shm_offset->as_int());
    d.transfer_id = transfer_id->as_int();
    d.sender = sender->as_string();
    d.host = host->as_string();
    if (d.address.empty()) {
        return fail(ErrorCode::invalid_argument, field_error("address", "is empty"));
    }
    if (d.nbytes > 0 && d.rkey.empty()) {
        return fail(ErrorCode::invalid_argument,
                    field_error("rkey", "is empty for a transfer of " + std::to_string(d.nbytes) +
                                            " bytes"));
    }
    if (d.nbytes > 0 && d.remote_addr == 0) {
        return fail(ErrorCode::invalid_argument, field_error("remote_addr", "is null"));
    }
    if (d.nbytes > 0 && (d.shm_pid <= 0 || d.shm_fd < 0)) {
        return fail(ErrorCode::invalid_argument,
                    field_error("shm_pid", "or 'shm_fd' does not name a process's descriptor"));
    }
    if (d.transfer_id < 0) {
        return fail(ErrorCode::invalid_argument, field_error("transfer_id", "is negative"));
    }
    if (checksum->as_int() != checksum_of(d)) {
        return fail(ErrorCode::invalid_argument,
                    "ucx relay metadata is corrupted: its checksum does not match the address, "
                    "rkey or transfer fields (from sender '" +
                        d.sender + "')");
    }
    return d;
}

}  // namespace omnirt::relay::ucx
