#pragma once
// A small blocking HTTP/1.1 test client on plain POSIX sockets, with a 30 s hang guard on every
// receive. Header-only; used by the serve_http tests.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace omnirt::serve::http::testing {

inline int count_dir_entries(const char* path) {
    int count = 0;
    DIR* dir = opendir(path);
    if (dir == nullptr) return -1;
    while (dirent* entry = readdir(dir)) {
        if (entry->d_name[0] != '.') ++count;
    }
    closedir(dir);
    return count - (std::string(path) == "/proc/self/fd" ? 1 : 0);  // the DIR's own fd
}
inline int open_fds() { return count_dir_entries("/proc/self/fd"); }
inline int thread_count() { return count_dir_entries("/proc/self/task"); }

struct Response {
    int status = 0;
    std::map<std::string, std::string> headers;  // lowercased names
    std::string body;
    std::vector<std::string> chunks;  // for chunked responses
    bool chunked = false;
};

class Client {
  public:
    explicit Client(std::uint16_t port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        timeval guard{30, 0};
        ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof(guard));
        int one = 1;
        ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(port);
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    }
    ~Client() { close(); }
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    [[nodiscard]] bool connected() const { return connected_; }
    [[nodiscard]] int fd_for_test() const { return fd_; }
    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    // Abortive close (RST).
    void reset() {
        linger hard{1, 0};
        ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
        close();
    }

    bool send(const std::string& data) {
        std::size_t sent = 0;
        while (sent < data.size()) {
            ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
            if (n <= 0) return false;
            sent += static_cast<std::size_t>(n);
        }
        return true;
    }

    // True when the server closed the connection (EOF or reset) before the guard expired and no
    // more bytes came.
    bool wait_closed() {
        char byte;
        for (;;) {
            ssize_t n = ::recv(fd_, &byte, 1, 0);
            if (n == 0) return true;
            if (n < 0) return errno == ECONNRESET;
            buffer_.push_back(byte);
        }
    }

    // Reads one response (Content-Length, chunked, or until close); nullopt on close/timeout.
    std::optional<Response> read_response() {
        auto head = read_until("\r\n\r\n");
        if (!head) return std::nullopt;
        *head += "\r\n";  // every header line, the last included, ends with CRLF
        Response response;
        std::size_t line_end = head->find("\r\n");
        std::string status_line = head->substr(0, line_end);
        if (status_line.size() < 12) return std::nullopt;
        response.status = std::stoi(status_line.substr(9, 3));
        std::size_t pos = line_end + 2;
        while (pos < head->size()) {
            std::size_t end = head->find("\r\n", pos);
            if (end == std::string::npos || end == pos) break;
            std::string line = head->substr(pos, end - pos);
            auto colon = line.find(':');
            std::string name = line.substr(0, colon);
            for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            std::string value = line.substr(colon + 1);
            while (!value.empty() && value.front() == ' ') value.erase(0, 1);
            response.headers[name] = value;
            pos = end + 2;
        }
        if (response.headers.count("content-length") != 0) {
            auto body = read_exact(std::stoul(response.headers["content-length"]));
            if (!body) return std::nullopt;
            response.body = *body;
        } else if (response.headers["transfer-encoding"] == "chunked") {
            response.chunked = true;
            for (;;) {
                auto size_line = read_until("\r\n");
                if (!size_line) return std::nullopt;
                std::size_t size = std::stoul(*size_line, nullptr, 16);
                auto data = read_exact(size + 2);
                if (!data) return std::nullopt;
                if (size == 0) break;
                response.chunks.push_back(data->substr(0, size));
                response.body += data->substr(0, size);
            }
        } else {
            char chunk[4096];
            for (;;) {
                ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
                if (n <= 0) break;
                buffer_.append(chunk, static_cast<std::size_t>(n));
            }
            response.body = std::move(buffer_);
            buffer_.clear();
        }
        return response;
    }

    // Reads through `delimiter` (returned without it).
    std::optional<std::string> read_until(const std::string& delimiter) {
        for (;;) {
            auto found = buffer_.find(delimiter);
            if (found != std::string::npos) {
                std::string out = buffer_.substr(0, found);
                buffer_.erase(0, found + delimiter.size());
                return out;
            }
            if (!fill()) return std::nullopt;
        }
    }
    std::optional<std::string> read_exact(std::size_t size) {
        while (buffer_.size() < size) {
            if (!fill()) return std::nullopt;
        }
        std::string out = buffer_.substr(0, size);
        buffer_.erase(0, size);
        return out;
    }

  private:
    bool fill() {
        char chunk[4096];
        ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
        if (n <= 0) return false;
        buffer_.append(chunk, static_cast<std::size_t>(n));
        return true;
    }

    int fd_ = -1;
    bool connected_ = false;
    std::string buffer_;
};

}  // namespace omnirt::serve::http::testing
