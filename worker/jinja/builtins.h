#ifndef LLMC_WORKER_JINJA_BUILTINS_H_
#define LLMC_WORKER_JINJA_BUILTINS_H_

#include "absl/strings/string_view.h"

namespace llmc::jinja {

// The filters and tests the interpreter implements; the parser refuses others when a template loads.
bool IsKnownFilter(absl::string_view name);
bool IsKnownTest(absl::string_view name);

}  // namespace llmc::jinja

#endif  // LLMC_WORKER_JINJA_BUILTINS_H_
