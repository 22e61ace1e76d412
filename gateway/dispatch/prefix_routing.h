#ifndef LLMC_GATEWAY_DISPATCH_PREFIX_ROUTING_H_
#define LLMC_GATEWAY_DISPATCH_PREFIX_ROUTING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "llmc/v1/worker.pb.h"

namespace llmc::gateway {

// The bytes that decide where a generation's prompt starts: for chat the tools, the request's template and
// the messages as the client sent them (each turn of a conversation extends the previous turn's JSON
// array), for a text prompt the text, for token ids their bytes. Requests whose keys share a start share
// the start of their prompts. A cache_salt comes first: requests with different salts (which share no
// cached blocks) share no start. At most kMaxPrefixBytes (common/prefix_hash.h): the hashes look no further.
std::string RoutingKey(const v1::GenerateRequest& request);

// PrefixChunkHashes of the routing key, as PickWorker's prefix_hashes.
std::vector<uint64_t> RequestPrefixHashes(const v1::GenerateRequest& request);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_DISPATCH_PREFIX_ROUTING_H_
