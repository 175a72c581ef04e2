// QuACK-C++: kernels for training transformer models on NVIDIA Hopper (sm_90a).
// Umbrella header: include this and link quack::quack. The GEMM (quack/gemm.h) joins it once
// it has been validated on a GPU; until then include quack/gemm.h yourself.
#pragma once

#include "quack/errors.h"
#include "quack/norm.h"
#include "quack/tensor.h"
#include "quack/version.h"
