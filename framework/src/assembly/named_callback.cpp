#include "assembly/named_callback.h"

#include <c10/util/Exception.h>

#include "common/first_line.h"
#include "mixt/error.h"

namespace mixt {

void NamedCallback::guarded(const char* method, const std::function<void()>& call) const {
  // A callback refusing the run it is given (a recipe error: exit 2) stays one.
  const auto failed = [&](const std::string& what, const std::string& hint = {}, ErrorKind kind = ErrorKind::runtime) {
    return Error(kind, "callback '" + name + "' (plugin '" + plugin + "') failed in " + method + ": " + what,
                 SourceLocation{file}, {}, hint);
  };
  try {
    call();
  } catch (const Error& e) {
    throw failed(e.message(), e.hint(), e.kind() == ErrorKind::recipe ? ErrorKind::recipe : ErrorKind::runtime);
  } catch (const c10::Error& e) {
    throw failed(first_line(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    throw failed(e.what());
  } catch (...) {
    throw failed("unknown exception");
  }
}

}  // namespace mixt
