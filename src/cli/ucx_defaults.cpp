#include "cli/ucx_defaults.h"

#include <cstdlib>

namespace omnirt::cli {

void choose_ucx_defaults() {
    // overwrite = 0: the user's value wins.
    ::setenv("UCX_TCP_TX_SEG_SIZE", "1M", 0);
    ::setenv("UCX_TCP_RX_SEG_SIZE", "1M", 0);
}

}  // namespace omnirt::cli
