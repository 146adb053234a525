# kiln_embed(<out.cpp> <symbol> <file>): turns a text file (a prompt template, the Python
# harness) into a C++ string constant so the binary carries what it needs and never looks for
# files next to itself at run time.
function(kiln_embed out symbol file)
  add_custom_command(
    OUTPUT "${out}"
    COMMAND "${CMAKE_COMMAND}" -DIN=${file} -DOUT=${out} -DSYMBOL=${symbol}
            -P "${PROJECT_SOURCE_DIR}/cmake/KilnEmbedFile.cmake"
    DEPENDS "${file}" "${PROJECT_SOURCE_DIR}/cmake/KilnEmbedFile.cmake"
    COMMENT "Embedding ${file}")
endfunction()
