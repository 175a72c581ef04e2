// QuACK-C++ version (semantic versioning; the Python package quack-cpp carries the same).
#pragma once

#define QUACK_VERSION_MAJOR 0
#define QUACK_VERSION_MINOR 1
#define QUACK_VERSION_PATCH 0

namespace quack {
/// The library version, "MAJOR.MINOR.PATCH" from the macros above (e.g. "0.1.0"). Never throws.
const char* version();
}  // namespace quack
