// gradwire: compressed gradient exchange for data-parallel training over
// commodity Ethernet. Include this one header; link @gradwire//:gradwire.
#ifndef GRADWIRE_GRADWIRE_H_
#define GRADWIRE_GRADWIRE_H_

#include "gradwire/kernels/dispatch.h"

#endif  // GRADWIRE_GRADWIRE_H_
