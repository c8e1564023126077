#include "relay/shm/copy.h"

#include <cstring>

namespace omnirt::relay::shm {

void copy_bytes(std::byte* destination, const std::byte* source, std::size_t nbytes) {
    if (nbytes != 0) std::memcpy(destination, source, nbytes);
}

}  // namespace omnirt::relay::shm
