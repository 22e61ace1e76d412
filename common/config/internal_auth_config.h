#ifndef LLMC_COMMON_CONFIG_INTERNAL_AUTH_CONFIG_H_
#define LLMC_COMMON_CONFIG_INTERNAL_AUTH_CONFIG_H_

#include <string>

#include "absl/status/status.h"

namespace llmc::config {

// TLS between the cluster's processes: every process presents the cluster certificate and requires the
// peer's, both signed by `ca_file`. Files, not inline PEM, so they come from a mounted Kubernetes Secret.
struct InternalTlsConfig {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  // The name clients check the server's certificate for, whatever address they dial: one certificate whose
  // SAN is this name serves pods with changing IPs.
  std::string server_name = "llmc-internal";

  bool enabled() const { return !ca_file.empty() || !cert_file.empty() || !key_file.empty(); }

  template <typename Visitor>
  void VisitFields(Visitor& v) {
    v("ca_file", ca_file, "PEM file of the CA that signs every cluster certificate; empty: no internal TLS");
    v("cert_file", cert_file, "PEM certificate this process presents to its peers (signed by ca_file)");
    v("key_file", key_file, "PEM private key of cert_file");
    v("server_name", server_name,
      "name the server certificates are checked for (their SAN), whatever address is dialled");
  }
};

// How the controller, workers and gateways authenticate each other's gRPC calls (docs/security.md). Each
// binary's section holds these keys; all three processes need the same secret.
struct InternalAuthConfig {
  std::string cluster_secret;       // with cluster_secret_file and LLMC_CLUSTER_SECRET
  std::string cluster_secret_file;  // read at start: a Kubernetes Secret mounted as a file
  bool allow_unauthenticated_internal = false;
  InternalTlsConfig internal_tls;

  template <typename Visitor>
  void VisitFields(Visitor& v) {
    v("cluster_secret", cluster_secret,
      "shared secret every internal gRPC call carries and every server checks; prefer cluster_secret_file or the "
      "LLMC_CLUSTER_SECRET environment variable, which are used when this is empty");
    v("cluster_secret_file", cluster_secret_file,
      "file holding the cluster secret (surrounding whitespace ignored), read at start");
    v("allow_unauthenticated_internal", allow_unauthenticated_internal,
      "allow serving gRPC beyond loopback with neither a cluster secret nor internal TLS; without it such a "
      "process refuses to start");
    v("internal_tls", internal_tls, "mutual TLS between the cluster's processes");
  }

  absl::Status Validate() const;
};

}  // namespace llmc::config

#endif  // LLMC_COMMON_CONFIG_INTERNAL_AUTH_CONFIG_H_
