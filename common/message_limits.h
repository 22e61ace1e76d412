#ifndef LLMC_COMMON_MESSAGE_LIMITS_H_
#define LLMC_COMMON_MESSAGE_LIMITS_H_

#include <cstdint>

namespace llmc {

// The one request-size limit users configure is the gateway's max_body_bytes (HTTP 413 beyond it). Every
// gRPC server and channel of the cluster carries messages up to kMaxGrpcMessageBytes, and max_body_bytes may
// not exceed kMaxRequestBodyBytes, so a body the gateway accepts always reaches a worker: the request built
// from it is no larger than the body (token ids take fewer bytes as varints than as JSON, text loses its
// escapes) plus a few hundred bytes of fields. gRPC's own 4 MiB default would turn a 5 MB prompt into a
// RESOURCE_EXHAUSTED, which reads as "queue full" and invites the client to retry forever.
constexpr int kMaxGrpcMessageBytes = 64 << 20;
constexpr uint64_t kMaxRequestBodyBytes = 32 << 20;

}  // namespace llmc

#endif  // LLMC_COMMON_MESSAGE_LIMITS_H_
