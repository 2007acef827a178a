#include "source_dir.hpp"

const char *pipecheck_source_dir() { return PIPECHECK_SOURCE_DIR_PATH; }
