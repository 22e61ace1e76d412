#include "gateway/dispatch/internal_auth_failure.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "gateway/openai/openai_error.h"

namespace llmc::gateway {

bool IsInternalAuthFailure(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
         status.error_code() == grpc::StatusCode::PERMISSION_DENIED;
}

absl::Status InternalAuthFailure(const std::string& peer, const std::string& peer_detail, const grpc::Status& status) {
  LLMC_LOG(Error).With("peer", peer_detail)
      << "internal authentication failed: " << peer_detail << " refused the gateway's credentials ("
      << status.error_message()
      << "); every process of the cluster needs the same cluster secret (cluster_secret_file or "
         "LLMC_CLUSTER_SECRET) and, with internal_tls, certificates from the same CA";
  absl::Status failure = absl::InternalError(
      absl::StrCat("the gateway could not authenticate to ", peer,
                   " (internal authentication failed): the server is misconfigured; this is not a problem with your "
                   "API key or request"));
  return WithErrorCode(WithClientMessage(std::move(failure)), "internal_error");
}

}  // namespace llmc::gateway
