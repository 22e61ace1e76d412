#include "common/internal_auth/internal_channel.h"

#include <utility>
#include <vector>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/client_interceptor.h"

namespace llmc::internal_auth {
namespace {

// Adds the secret to each call's initial metadata. An interceptor rather than call credentials: gRPC sends
// call credentials only over channels with transport security, and the secret must also work without TLS.
class SecretInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit SecretInterceptor(const std::string& secret) : secret_(secret) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kClusterSecretMetadataKey, secret_);
    }
    methods->Proceed();
  }

 private:
  const std::string secret_;
};

class SecretInterceptorFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit SecretInterceptorFactory(std::string secret) : secret_(std::move(secret)) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new SecretInterceptor(secret_);
  }

 private:
  const std::string secret_;
};

std::shared_ptr<grpc::ChannelCredentials> TransportCredentials(const ClusterCredentials& credentials,
                                                               grpc::ChannelArguments& arguments) {
  if (!credentials.tls.has_value()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = credentials.tls->ca_pem;
  options.pem_private_key = credentials.tls->key_pem;
  options.pem_cert_chain = credentials.tls->cert_pem;
  arguments.SetSslTargetNameOverride(credentials.tls->server_name);
  return grpc::SslCredentials(options);
}

}  // namespace

std::shared_ptr<grpc::Channel> CreateInternalChannel(const std::string& address, const ClusterCredentials& credentials,
                                                     grpc::ChannelArguments arguments) {
  std::shared_ptr<grpc::ChannelCredentials> transport = TransportCredentials(credentials, arguments);
  if (credentials.secret.empty()) return grpc::CreateCustomChannel(address, transport, arguments);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<SecretInterceptorFactory>(credentials.secret));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, transport, arguments,
                                                                 std::move(interceptors));
}

}  // namespace llmc::internal_auth
