#include "relay/builtin.h"

#include "relay/shm/shm_relay.h"
#include "relay/ucx/ucx_relay.h"

namespace omnirt::relay {

Status register_builtin_backends() {
    OMNI_RETURN_IF_ERROR(register_shm_backend());
    OMNI_RETURN_IF_ERROR(register_ucx_backend());
    return {};
}

}  // namespace omnirt::relay
