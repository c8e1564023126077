#include "config/runtime_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace omnirt::config {

Result<std::unique_ptr<RuntimeDirectory>> RuntimeDirectory::create(const std::string& base) {
    std::string pattern = base + "/omnirt-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    // mkdtemp creates the directory with mode 0700.
    if (mkdtemp(buffer.data()) == nullptr) {
        return fail(ErrorCode::unavailable, "cannot create a runtime directory under '" + base +
                                                "': " + std::strerror(errno));
    }
    return std::unique_ptr<RuntimeDirectory>(new RuntimeDirectory(buffer.data()));
}

RuntimeDirectory::~RuntimeDirectory() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

}  // namespace omnirt::config
