// The engine's transfer logic (loop thread): reads, completion messages, peers and their death.
#include <spdlog/spdlog.h>

#include <cstring>

#include "relay/ucx/ucx_engine_internal.h"

namespace omnirt::relay::ucx {

std::shared_ptr<Completion> release(OutgoingTransfer transfer) {
    auto done = std::move(transfer.done);
    // Explicitly: a by-value parameter may outlive the call until the caller's full-expression.
    transfer.source = Tensor();
    transfer.credit.reset();
    return done;
}

Result<Engine::Peer*> Engine::peer_for(const TransferDescriptor& descriptor) {
    std::string key(descriptor.address.begin(), descriptor.address.end());
    if (auto it = peers_.find(key); it != peers_.end()) return it->second.get();
    auto peer = std::make_unique<Peer>();
    peer->key = key;
    peer->sender = descriptor.sender;
    const auto context = "ucx relay cannot reach sender '" + descriptor.sender + "'";
    ucp_worker_h worker = worker_->get();
    if (descriptor.host == local_host_id()) {
        auto data = Endpoint::connect(worker, descriptor.address, Endpoint::ErrorMode::none,
                                      &Engine::on_endpoint_error, this);
        if (!data) return fail(data.error().with_context(context));
        peer->data = std::move(*data);
        auto control = Endpoint::connect(worker, descriptor.address, Endpoint::ErrorMode::peer,
                                         &Engine::on_endpoint_error, this);
        if (control) {
            peer->control = std::move(*control);
        } else if (!warned_no_failure_detection_) {
            warned_no_failure_detection_ = true;
            spdlog::warn(
                "ucx relay: no UCX transport with peer-failure handling reaches '{}' "
                "({}); reads from a sender that dies are noticed only through their "
                "timeout. Include tcp in UCX_TLS to detect it",
                descriptor.sender, control.error().message);
        }
    } else {
        auto control = Endpoint::connect(worker, descriptor.address, Endpoint::ErrorMode::peer,
                                         &Engine::on_endpoint_error, this);
        if (!control) return fail(control.error().with_context(context));
        peer->control = std::move(*control);
    }
    return peers_.emplace(std::move(key), std::move(peer)).first->second.get();
}

Status Engine::copy_shared(Peer& peer, const IncomingRead& read) {
    const TransferDescriptor& d = read.descriptor;
    auto key = std::make_pair(d.shm_fd, d.shm_region);
    auto it = peer.mappings.find(key);
    if (it == peer.mappings.end()) {
        auto opened = PeerMapping::open(d.shm_pid, d.shm_fd, d.shm_region);
        if (!opened) return fail(opened.error().with_context("sender '" + d.sender + "'"));
        if (peer.mappings.size() >= kPeerCacheLimit) peer.mappings.erase(peer.mappings.begin());
        it = peer.mappings.emplace(key, std::move(*opened)).first;
    }
    const PeerMapping* mapping = it->second.get();
    if (d.shm_offset > mapping->size() || d.nbytes > mapping->size() - d.shm_offset) {
        return fail(ErrorCode::invalid_argument,
                    "ucx relay: " + std::to_string(d.nbytes) + " bytes at offset " +
                        std::to_string(d.shm_offset) + " lie outside the " +
                        std::to_string(mapping->size()) + "-byte region of sender '" + d.sender +
                        "'");
    }
    const std::byte* source = mapping->data() + d.shm_offset;
    prefault(source, d.nbytes, /*for_write=*/false);  // one call instead of a fault per page
    std::memcpy(read.dest.mutable_data(), source, d.nbytes);
    return {};
}

Status Engine::issue_read(IncomingRead read) {
    const std::string sender = read.descriptor.sender;
    OMNI_TRY(Peer * peer, peer_for(read.descriptor));
    // On the sender's host (and in its pid namespace, so /proc/<pid> names it) the bytes are
    // copied straight out of its shared memory; the endpoint only carries the confirmation.
    if (peer->data.valid() && read.descriptor.shm_pid_namespace == pid_namespace_id()) {
        OMNI_RETURN_IF_ERROR(copy_shared(*peer, read));
        send_completion(*peer, read.descriptor.transfer_id);
        read.done->set(ok_status());
        return {};
    }

    // Elsewhere UCX reads (RDMA, TCP, CMA). The key has no shared-memory component, so
    // unpacking it attaches nothing and cannot fail because the sender is gone.
    auto pending = std::make_unique<PendingRead>();
    auto cached = peer->keys.find(read.descriptor.rkey);
    if (cached == peer->keys.end()) {
        auto rkey = RemoteKey::unpack(peer->io(), read.descriptor.rkey);
        if (!rkey) return fail(rkey.error().with_context("ucx relay, sender '" + sender + "'"));
        if (peer->keys.size() >= kPeerCacheLimit && peer->reads_in_flight == 0) {
            peer->keys.erase(peer->keys.begin());
        }
        cached = peer->keys.emplace(read.descriptor.rkey, std::move(*rkey)).first;
    }
    pending->rkey = cached->second.get();
    pending->engine = this;
    pending->id = next_read_id_++;
    pending->read = std::move(read);
    pending->peer = peer;
    const TransferDescriptor& d = pending->read.descriptor;
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    params.cb.send = &Engine::on_read_done;
    params.user_data = pending.get();
    ucs_status_ptr_t request = ucp_get_nbx(peer->io(), pending->read.dest.mutable_data(), d.nbytes,
                                           d.remote_addr, pending->rkey, &params);
    if (request == nullptr) {  // done in place
        send_completion(*peer, d.transfer_id);
        pending->read.done->set(ok_status());
        return {};
    }
    if (UCS_PTR_IS_ERR(request)) {
        return fail(ucx_error(ErrorCode::unavailable,
                              "ucx relay: reading " + std::to_string(d.nbytes) +
                                  " bytes from sender '" + sender + "' failed",
                              UCS_PTR_STATUS(request)));
    }
    peer->reads_in_flight++;
    auto id = pending->id;
    reads_.emplace(id, std::move(pending));
    return {};
}

void Engine::on_read_done(void* request, ucs_status_t status, void* user_data) {
    auto* pending = static_cast<PendingRead*>(user_data);
    ucp_request_free(request);
    pending->engine->finished_reads_.emplace_back(pending->id, status);
}

void Engine::finish_read(std::uint64_t read_id, ucs_status_t status) {
    auto it = reads_.find(read_id);
    if (it == reads_.end()) return;
    PendingRead& pending = *it->second;
    Peer& peer = *pending.peer;
    peer.reads_in_flight--;
    if (status == UCS_OK) {
        if (!peer.retired) send_completion(peer, pending.read.descriptor.transfer_id);
        pending.read.done->set(ok_status());
    } else {
        pending.read.done->set(fail(ucx_error(
            ErrorCode::unavailable,
            "ucx relay: reading from sender '" + pending.read.descriptor.sender + "' failed",
            status)));
    }
    reads_.erase(it);  // the key goes while its endpoint is still open
}

void Engine::send_completion(Peer& peer, std::int64_t transfer_id) {
    auto message = std::make_unique<CompletionMessage>();
    message->transfer_id = transfer_id;
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    params.cb.send = [](void* request, ucs_status_t, void* user_data) {
        delete static_cast<CompletionMessage*>(user_data);
        ucp_request_free(request);
    };
    params.user_data = message.get();
    ucs_status_ptr_t request = ucp_am_send_nbx(peer.io(), kCompletionMessageId, message.get(),
                                               sizeof(CompletionMessage), nullptr, 0, &params);
    if (UCS_PTR_IS_PTR(request)) {
        (void)message.release();  // the callback deletes it
    } else if (UCS_PTR_IS_ERR(request)) {
        // The sender is gone or unreachable; its transfer times out or is cleaned up there.
        spdlog::warn("ucx relay: cannot confirm transfer {} to sender '{}': {}", transfer_id,
                     peer.sender, ucs_status_string(UCS_PTR_STATUS(request)));
    }
}

ucs_status_t Engine::on_completion_message(void* arg, const void* header, std::size_t header_length,
                                           void*, std::size_t, const ucp_am_recv_param_t*) {
    auto* engine = static_cast<Engine*>(arg);
    CompletionMessage message;
    if (header_length != sizeof message) {
        spdlog::warn("ucx relay: ignoring a completion message of {} bytes", header_length);
        return UCS_OK;
    }
    std::memcpy(&message, header, sizeof message);
    if (message.magic != kCompletionMagic) {
        spdlog::warn("ucx relay: ignoring a completion message with a foreign tag");
        return UCS_OK;
    }
    engine->arrived_completions_.push_back(message.transfer_id);
    return UCS_OK;
}

void Engine::on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
    static_cast<Engine*>(arg)->failed_endpoints_.emplace_back(ep, status);
}

bool Engine::handle_events() {
    auto arrived = std::exchange(arrived_completions_, {});
    auto finished = std::exchange(finished_reads_, {});
    auto failed = std::exchange(failed_endpoints_, {});
    for (std::int64_t id : arrived) {
        auto it = outgoing_.find(id);
        if (it == outgoing_.end()) {
            // Cleaned up or closed meanwhile, or a duplicate: nothing holds memory for it.
            spdlog::debug("ucx relay: completion for unknown transfer {}", id);
            continue;
        }
        // Memory and credit go back before the put learns of it, so a caller that saw the
        // confirmation finds the credit free.
        auto done = release(std::move(outgoing_.extract(it).mapped()));
        done->set(ok_status());
    }
    for (auto [read_id, status] : finished) finish_read(read_id, status);
    for (auto [ep, status] : failed) {
        for (auto& [key, peer] : peers_) {
            // A peer retired by an earlier failure of this batch (it has two endpoints on the
            // sender's host, and both fail) is already gone from peers_: its entry is empty.
            if (peer != nullptr && peer->owns(ep)) {
                retire_peer(*peer, ucs_status_string(status));
                break;
            }
        }
    }
    std::erase_if(peers_, [](const auto& entry) { return entry.second == nullptr; });
    release_retired_peers();
    return !arrived.empty() || !finished.empty() || !failed.empty();
}

void Engine::retire_peer(Peer& peer, const std::string& reason) {
    peer.retired = true;
    spdlog::info("ucx relay: lost the connection to sender '{}' (UCX: {}); its pending reads fail",
                 peer.sender, reason);
    for (auto& [id, pending] : reads_) {
        if (pending->peer != &peer) continue;
        pending->read.done->set(
            fail(ErrorCode::unavailable,
                 "ucx relay: sender '" + peer.sender + "' is gone (UCX: " + reason + ")"));
    }
    auto it = peers_.find(peer.key);
    if (it != peers_.end() && it->second.get() == &peer) {
        retired_peers_.push_back(std::move(it->second));  // erased from peers_ by the caller
    }
}

void Engine::release_retired_peers() {
    // A retired peer's endpoints close once no read uses its keys (UCX wants keys destroyed
    // before their endpoint). Reads that never finish keep it until stop().
    std::erase_if(retired_peers_,
                  [](const std::unique_ptr<Peer>& peer) { return peer->reads_in_flight == 0; });
}

void Engine::abort_request(const std::string& request_id, const std::string& reason) {
    for (auto it = outgoing_.begin(); it != outgoing_.end();) {
        if (it->second.request_id != request_id) {
            ++it;
            continue;
        }
        auto next = std::next(it);
        release(std::move(outgoing_.extract(it).mapped()))->set(fail(ErrorCode::aborted, reason));
        it = next;
    }
    // A read UCX is still writing stays in the table (holding its destination) until it ends.
    for (auto& [id, pending] : reads_) {
        if (pending->read.request_id == request_id) {
            pending->read.done->set(fail(ErrorCode::aborted, reason));
        }
    }
}

}  // namespace omnirt::relay::ucx
