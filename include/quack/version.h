#pragma once

#define QUACK_VERSION_MAJOR 0
#define QUACK_VERSION_MINOR 1
#define QUACK_VERSION_PATCH 0

namespace quack {
/// "0.1.0"
const char* version();
}  // namespace quack
