# Script mode helper for kiln_embed: IN, OUT and SYMBOL are passed with -D.
file(READ "${IN}" content)
string(FIND "${content}" ")kiln_embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter used for embedding")
endif()
file(WRITE "${OUT}.tmp" "// Generated from ${IN}; do not edit.\n#include <string_view>\nnamespace kiln::embedded {\nextern const std::string_view ${SYMBOL};\nconst std::string_view ${SYMBOL} = R\"kiln_embed(${content})kiln_embed\";\n}\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
