#pragma once
// The metadata a ucx put publishes and a ucx get reads (a Value map):
//   backend      "ucx"
//   nbytes       int     bytes to read
//   address      bytes   the sender's UCX worker address
//   rkey         bytes   packed remote key of the memory holding the bytes (empty when nbytes 0)
//   remote_addr  int     the bytes' virtual address in the sender
//   shm_pid, shm_pidns, shm_fd, shm_region, shm_offset   int
//                        where readers on the sender's host map the bytes: /proc/<pid>/fd/<fd>
//                        in pid namespace <pidns>, region id and offset (ucx_shared_memory.h)
//   transfer_id  int     echoed in the completion message that releases the sender's memory
//   sender       string  "<relay name>@<host>:<pid>", for error messages
//   host         string  hostname and boot id: readers on the same host use shared memory
//   checksum     int     FNV-1a over the fields above
// UCX parses worker addresses and remote keys without a length, so damaged bytes could make it
// read out of bounds; the checksum lets the reader refuse them before UCX sees them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/value.h"

namespace omnirt::relay::ucx {

inline constexpr std::string_view kBackendName = "ucx";

struct TransferDescriptor {
    std::size_t nbytes = 0;
    std::vector<std::uint8_t> address;
    std::vector<std::uint8_t> rkey;
    std::uint64_t remote_addr = 0;
    std::int64_t shm_pid = 0;
    std::uint64_t shm_pid_namespace = 0;
    std::int64_t shm_fd = -1;
    std::uint64_t shm_region = 0;
    std::uint64_t shm_offset = 0;
    std::int64_t transfer_id = 0;
    std::string sender;
    std::string host;
};

[[nodiscard]] Value encode_metadata(const TransferDescriptor& descriptor);
// invalid_argument naming the field for a foreign backend, a missing or mistyped field, an
// implausible value or a checksum mismatch.
[[nodiscard]] Result<TransferDescriptor> decode_metadata(const Value& metadata);

// "<hostname>/<boot id>" of this machine, computed once.
[[nodiscard]] const std::string& local_host_id();

}  // namespace omnirt::relay::ucx
