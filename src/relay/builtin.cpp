#include "relay/builtin.h"

#if __has_include("relay/shm/shm_relay.h")
#include "relay/shm/shm_relay.h"
#define OMNIRT_BUILTIN_SHM 1
#endif
#if __has_include("relay/ucx/ucx_relay.h")
#include "relay/ucx/ucx_relay.h"
#define OMNIRT_BUILTIN_UCX 1
#endif

namespace omnirt::relay {

Status register_builtin_backends() {
#ifdef OMNIRT_BUILTIN_SHM
    OMNI_RETURN_IF_ERROR(register_shm_backend());
#endif
#ifdef OMNIRT_BUILTIN_UCX
    OMNI_RETURN_IF_ERROR(register_ucx_backend());
#endif
    return {};
}

}  // namespace omnirt::relay
