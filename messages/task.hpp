#pragma once

#include <string>

namespace kiln {

/// A KernelBench-format task: one Python file with `Model`, `get_inputs` and `get_init_inputs`.
struct task_spec {
  /// The file name without `.py`, e.g. `1_MLP`; the key of the task everywhere.
  std::string name;
  /// Absolute path of the task file.
  std::string path;
  /// The file's contents, read once when the run starts so that edits during a run cannot
  /// change what is being optimised.
  std::string source;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, task_spec& x) {
  return f(caf::meta::type_name("task_spec"), x.name, x.path, x.source);
}

} // namespace kiln
