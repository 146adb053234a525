#pragma once

// Every atom kiln sends. CAF 0.17 atoms are at most 10 characters.

#include <caf/atom.hpp>

namespace kiln {

using ask_atom = caf::atom_constant<caf::atom("ask")>;
using eval_atom = caf::atom_constant<caf::atom("eval")>;
using grant_atom = caf::atom_constant<caf::atom("grant")>;
using put_atom = caf::atom_constant<caf::atom("put")>;
using get_atom = caf::atom_constant<caf::atom("get")>;
using done_atom = caf::atom_constant<caf::atom("done")>;
using progress_atom = caf::atom_constant<caf::atom("progress")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using facts_atom = caf::atom_constant<caf::atom("facts")>;
using flush_atom = caf::atom_constant<caf::atom("flush")>;
using restart_atom = caf::atom_constant<caf::atom("restart")>;
using run_atom = caf::atom_constant<caf::atom("run")>;
using status_atom = caf::atom_constant<caf::atom("status")>;
using start_atom = caf::atom_constant<caf::atom("start")>;
using ok_atom = caf::atom_constant<caf::atom("ok")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using retime_atom = caf::atom_constant<caf::atom("retime")>;
using compile_atom = caf::atom_constant<caf::atom("compile")>;

} // namespace kiln
