#include "gateway/dispatch/generate_call.h"

#include <atomic>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/client_context.h"

namespace llmc::gateway {
namespace {

// Shared between the reactor (which deletes itself when the stream ends) and whoever may cancel it.
class Handle final : public GenerateCallHandle {
 public:
  void Cancel() override;
  void Attach(grpc::ClientContext* context) {
    absl::MutexLock lock(&mu_);
    context_ = context;
  }
  void Detach() {
    absl::MutexLock lock(&mu_);
    context_ = nullptr;
  }

 private:
  absl::Mutex mu_;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
};

void Handle::Cancel() {
  absl::MutexLock lock(&mu_);
  if (context_ != nullptr) context_->TryCancel();
}

class GenerateReader;

// Starts the read after a message once: when the consumer calls it, or when its last copy is dropped
// uncalled (a consumer that went away, a task that never ran), so the reader's hold is always released.
class NextRead {
 public:
  explicit NextRead(GenerateReader* reader) : reader_(reader) {}
  ~NextRead() { Start(); }
  void Start();

 private:
  GenerateReader* const reader_;
  std::atomic<bool> started_{false};
};

class GenerateReader final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  GenerateReader(std::shared_ptr<Handle> handle, GenerateCallbacks callbacks)
      : handle_(std::move(handle)), callbacks_(std::move(callbacks)) {}

  void Begin(v1::Worker::Stub& stub, const v1::GenerateRequest& request, absl::Time deadline) {
    request_ = request;  // must stay valid while the call runs
    context_.set_deadline(absl::ToChronoTime(deadline));
    handle_->Attach(&context_);
    stub.async()->Generate(&context_, &request_, this);
    StartRead(&response_);
    StartCall();
  }

  void OnReadInitialMetadataDone(bool ok) override {
    if (ok && callbacks_.on_accepted) callbacks_.on_accepted();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    v1::GenerateResponse response = std::move(response_);
    response_.Clear();
    // The next read may start outside this reaction: the hold keeps the call (and this reactor) until then.
    AddHold();
    auto next = std::make_shared<NextRead>(this);
    callbacks_.on_response(std::move(response), [next] { next->Start(); });
  }

  // Called once per message by NextRead.
  void ReadNextMessage() {
    StartRead(&response_);
    RemoveHold();
  }

  void OnDone(const grpc::Status& status) override {
    handle_->Detach();
    callbacks_.on_done(status);
    delete this;
  }

 private:
  std::shared_ptr<Handle> handle_;
  GenerateCallbacks callbacks_;
  grpc::ClientContext context_;
  v1::GenerateRequest request_;
  v1::GenerateResponse response_;
};

void NextRead::Start() {
  if (!started_.exchange(true)) reader_->ReadNextMessage();
}

}  // namespace

std::shared_ptr<GenerateCallHandle> StartGenerateCall(v1::Worker::Stub& stub, const v1::GenerateRequest& request,
                                                      absl::Time deadline, GenerateCallbacks callbacks) {
  auto handle = std::make_shared<Handle>();
  (new GenerateReader(handle, std::move(callbacks)))->Begin(stub, request, deadline);
  return handle;
}

}  // namespace llmc::gateway
