// QuACK-C++: kernels for training transformer models on NVIDIA Hopper (sm_90a).
// Umbrella header: include this and link quack::quack.
#pragma once

#include "quack/cross_entropy.h"
#include "quack/errors.h"
#include "quack/gemm.h"
#include "quack/gemm_act.h"
#include "quack/gemm_rotary.h"
#include "quack/linear_cross_entropy.h"
#include "quack/norm.h"
#include "quack/rotary.h"
#include "quack/softmax.h"
#include "quack/tensor.h"
#include "quack/topk.h"
#include "quack/version.h"
