# Writes a C file defining `const char NAME[]` with the bytes of INPUT, so generated
# kernels carry the ABI header and prelude verbatim (one source of truth: the files).
# Usage: cmake -DINPUT=f.h -DOUTPUT=f.c -DNAME=sym -P embed_text.cmake
file(READ "${INPUT}" text)
string(REPLACE "\\" "\\\\" text "${text}")
string(REPLACE "\"" "\\\"" text "${text}")
string(REPLACE "\n" "\\n\"\n\"" text "${text}")
file(WRITE "${OUTPUT}.tmp" "/* Generated from ${INPUT}; do not edit. */\nconst char ${NAME}[] =\n\"${text}\";\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
