#pragma once
// A private per-instance runtime directory (mode 0700) for IPC sockets and rendezvous files, so
// that two omnirt instances on one host never collide. Removed with its contents when the owner
// goes away.
#include <memory>
#include <string>

#include "core/error.h"

namespace omnirt::config {

class RuntimeDirectory {
  public:
    // Creates "<base>/omnirt-XXXXXX" with a unique suffix.
    [[nodiscard]] static Result<std::unique_ptr<RuntimeDirectory>> create(const std::string& base);

    RuntimeDirectory(const RuntimeDirectory&) = delete;
    RuntimeDirectory& operator=(const RuntimeDirectory&) = delete;
    ~RuntimeDirectory();

    [[nodiscard]] const std::string& path() const { return path_; }

  private:
    explicit RuntimeDirectory(std::string path) : path_(std::move(path)) {}
    std::string path_;
};

}  // namespace omnirt::config
