#pragma once
/// The checkout's root directory, for tests that read the corpus or run
/// scripts: every test is compiled with `-include source_dir.hpp` and
/// `PIPECHECK_SOURCE_DIR` standing for this call (tests/CMakeLists.txt).
const char *pipecheck_source_dir();
