// Declarations of the Gloo types transport/ headers name by pointer or
// reference, so that those headers need not include Gloo's.
#ifndef GRADWIRE_TRANSPORT_GLOO_FWD_H_
#define GRADWIRE_TRANSPORT_GLOO_FWD_H_

namespace gloo {
class Algorithm;
class Context;
namespace transport {
class Device;
}  // namespace transport
}  // namespace gloo

#endif  // GRADWIRE_TRANSPORT_GLOO_FWD_H_
