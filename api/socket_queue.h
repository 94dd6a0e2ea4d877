// What the kernel still holds of a TCP connection's output, for back-pressure decisions
// (http_session.cpp): the unsent / unacknowledged bytes of the send queue, whether a
// stalled peer is alive with its receive window shut (it stopped reading) or silent (gone),
// and whether the peer reset the connection.
//
// Ownership: none (queries on a borrowed fd). Thread-safety: any thread. Failure: a query
// that fails answers 0 / false, the cautious value for the caller.
#pragma once

#include <cstddef>

namespace lifeline::api {

// Bytes in the socket's send queue not yet acknowledged by the peer (SIOCOUTQ).
size_t KernelQueuedBytes(int fd);

// True when every byte sent was acknowledged (tcpi_unacked == 0) while more wait in the send
// queue, or `write_pending`: the peer's receive window is closed because it does not read.
bool PeerStoppedReading(int fd, bool write_pending);

// True when the connection is closed at the TCP level (a reset from the peer, e.g. a socket
// it closed answering data we sent after its FIN).
bool PeerReset(int fd);

}  // namespace lifeline::api
